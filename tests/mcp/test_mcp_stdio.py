"""A real MCP server over stdio (the official SDK's, spawned by the agent) as agent tools."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from _mcp_helpers import HoldingEngine, ServerLog, call

import agentkit
from agentkit.engine import FunctionEngine, ScriptedCall
from agentkit.errors import ConfigurationError
from agentkit.events import ToolResultEvent
from agentkit.mcp import MCPServer, MCPServerError
from agentkit.transcript import ToolResultBlock

pytestmark = pytest.mark.anyio

Factory = Callable[..., MCPServer]


def results(result: agentkit.RunResult[Any]) -> list[ToolResultBlock]:
    return [
        block
        for message in result.transcript.messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


def calls_then(*calls: str, answer: str = "done") -> FunctionEngine:
    """First turn: the calls; then the answer."""
    return FunctionEngine(lambda r: "".join(calls) if r.turn == 1 else answer)


async def test_tools_are_listed_with_their_schemas(stdio_server: Factory) -> None:
    async with stdio_server() as server:
        tools = {tool.name: tool for tool in server.tools}
    assert {"add", "shout", "fail", "wait", "die", "picture", "grow"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert not server.running


async def test_prefix_include_exclude_and_approval(stdio_server: Factory) -> None:
    server = stdio_server(
        prefix="calc", include={"add", "shout", "fail"}, exclude={"fail"}, requires_approval={"add"}
    )
    async with server:
        tools = {tool.name: tool for tool in server.tools}
    assert set(tools) == {"calc_add", "calc_shout"}
    assert tools["calc_add"].requires_approval
    assert not tools["calc_shout"].requires_approval


async def test_a_run_calls_the_tool_and_the_model_reads_its_text(
    stdio_server: Factory,
) -> None:
    seen: list[ScriptedCall] = []

    def model(request: ScriptedCall) -> str:
        seen.append(request)
        if request.turn == 1:
            return call("add", a=2, b=3) + call("calc_shout", text="hi")
        return "sum: " + request.tool_results[0].content

    agent = agentkit.Agent(
        FunctionEngine(model),
        tools=[stdio_server(), stdio_server(prefix="calc", include={"shout"})],
        profile="qwen3",
    )
    result = await agent.run("add 2 and 3")
    assert [(r.name, r.content, r.is_error) for r in results(result)] == [
        ("add", "5", False),
        ("calc_shout", "HI", False),
    ]
    assert result.output_text == "sum: 5"
    assert "add" in seen[0].tool_names
    assert "calc_shout" in seen[0].tool_names
    assert "calc_add" not in seen[0].tool_names


async def test_the_call_is_dispatched_while_the_model_still_streams(
    stdio_server: Factory, log: ServerLog
) -> None:
    """The server sees the call before the turn's output has ended; the tool's timeout then
    cancels it, and the cancellation reaches the server (which stays up: what stopped the
    call was ``notifications/cancelled``, not the server's shutdown)."""
    engine = HoldingEngine(
        call("wait", label="mid"), " and more text", lambda: log.wait_for("started mid")
    )
    server = stdio_server(timeout=0.5)
    agent = agentkit.Agent(engine, tools=[server], profile="qwen3")
    async with server:
        result = await agent.run("go")
        await log.wait_for("cancelled mid")
    [block] = results(result)
    assert block.is_error
    assert "timed out" in block.content
    assert result.output_text == "done"


async def test_an_error_result_is_an_error_the_model_sees(stdio_server: Factory) -> None:
    agent = agentkit.Agent(
        calls_then(call("fail", message="no such file"), call("add", a="x", b=1)),
        tools=[stdio_server()],
        profile="qwen3",
        raise_tool_errors=True,  # a server's error result is not a crash of the run
    )
    result = await agent.run("go")
    failed, bad_arguments = results(result)
    assert failed.is_error
    assert "no such file" in failed.content
    assert bad_arguments.is_error
    assert "a" in bad_arguments.content
    assert result.output_text == "done"


async def test_images_become_a_placeholder(stdio_server: Factory) -> None:
    agent = agentkit.Agent(calls_then(call("picture")), tools=[stdio_server()], profile="qwen3")
    [block] = results(await agent.run("go"))
    assert block.content == "a picture:\n\n[image: image/png, 5 bytes]"
    assert not block.is_error


async def test_a_server_killed_mid_call_gives_error_results_and_the_run_goes_on(
    stdio_server: Factory,
) -> None:
    def model(request: ScriptedCall) -> str:
        if request.turn == 1:
            return call("die")
        if request.turn == 2:
            return call("add", a=1, b=1)
        return "the server is gone"

    agent = agentkit.Agent(
        FunctionEngine(model), tools=[stdio_server(name="calc")], profile="qwen3"
    )
    result = await agent.run("go")
    died, later = results(result)
    assert died.is_error
    assert "MCP server 'calc' is not available" in died.content
    assert later.is_error
    assert "may have exited" in later.content
    assert result.output_text == "the server is gone"


async def test_cancelling_the_run_cancels_the_call_on_the_server(
    stdio_server: Factory, log: ServerLog
) -> None:
    server = stdio_server()
    agent = agentkit.Agent(calls_then(call("wait", label="run")), tools=[server], profile="qwen3")
    async with server:  # held open: the server outlives the run, and hears of the cancellation
        async with agent.stream("go") as events:
            async for event in events:
                if event.type == "tool_call_complete":
                    await log.wait_for("started run")
                    break
        await log.wait_for("cancelled run")
        assert server.running


async def test_a_changed_tool_list_is_offered_from_the_next_run(stdio_server: Factory) -> None:
    offered: list[list[str]] = []

    def model(request: ScriptedCall) -> str:
        offered.append(request.tool_names)
        if request.turn == 1 and "extra" not in request.tool_names:
            return call("grow")
        return "ok"

    server = stdio_server()
    agent = agentkit.Agent(FunctionEngine(model), tools=[server], profile="qwen3")
    async with server:
        await agent.run("grow")
        with anyio.fail_after(20):  # the change notice arrives on its own schedule
            while not server.tools_changed:  # noqa: ASYNC110 - set by the connection's task
                await anyio.sleep(0.02)
        await agent.run("again")
    assert "extra" not in offered[0]
    assert offered[0] == offered[1]
    assert "extra" in offered[2]


async def test_an_open_server_serves_many_runs_and_a_closed_one_lives_for_a_run(
    stdio_server: Factory, log: ServerLog
) -> None:
    server = stdio_server()
    agent = agentkit.Agent(calls_then(call("add", a=1, b=2)), tools=[server], profile="qwen3")
    await agent.run("one")
    assert not server.running  # the run opened it, and closed it
    await agent.run("two")
    assert sum(line.startswith("pid") for line in log.lines()) == 2
    async with server:
        await agent.run("three")
        await agent.run("four")
        assert server.running
    assert sum(line.startswith("pid") for line in log.lines()) == 3


async def test_results_go_through_approvals(stdio_server: Factory) -> None:
    agent = agentkit.Agent(
        calls_then(call("add", a=1, b=2)),
        tools=[stdio_server(requires_approval=True)],
        profile="qwen3",
    )
    result = await agent.run("go")
    assert result.paused
    assert [p.name for p in result.pending_approvals] == ["add"]


async def test_a_server_that_cannot_start_stops_the_run() -> None:
    server = MCPServer.stdio(sys.executable, ["-c", "import sys; sys.exit(2)"], name="broken")
    agent = agentkit.Agent(calls_then(), tools=[server], profile="qwen3")
    with pytest.raises(MCPServerError, match="'broken' could not start") as caught:
        await agent.run("go")
    assert caught.value.server == "broken"
    assert not server.running


async def test_two_servers_with_one_tool_name_are_a_configuration_error(
    stdio_server: Factory,
) -> None:
    agent = agentkit.Agent(
        calls_then(), tools=[stdio_server(), stdio_server(include={"add"})], profile="qwen3"
    )
    with pytest.raises(ConfigurationError, match="'add'"):
        await agent.run("go")


async def test_events_carry_the_results(stdio_server: Factory) -> None:
    agent = agentkit.Agent(
        calls_then(call("add", a=20, b=22)), tools=[stdio_server()], profile="qwen3"
    )
    async with stdio_server() as _, agent.stream("go") as events:
        seen = [event async for event in events if isinstance(event, ToolResultEvent)]
    assert [event.result.content for event in seen] == ["42"]
