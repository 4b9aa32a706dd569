"""The same test MCP server over streamable HTTP on 127.0.0.1, in a process of its own."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from _mcp_helpers import HoldingEngine, HttpServer, ServerLog, call

import agentkit
from agentkit.engine import FunctionEngine, ScriptedCall
from agentkit.mcp import MCPServer, MCPServerError
from agentkit.transcript import ToolResultBlock

pytestmark = pytest.mark.anyio


def results(result: agentkit.RunResult[Any]) -> list[ToolResultBlock]:
    return [
        block
        for message in result.transcript.messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


async def test_tools_are_listed_and_called_mid_stream(
    http_server: HttpServer, log: ServerLog
) -> None:
    server = MCPServer.http(http_server.url, {"X-Test": "yes"}, timeout=0.5)
    engine = HoldingEngine(
        call("add", a=40, b=2) + call("wait", label="http"),
        " still talking",
        lambda: log.wait_for("started http"),
    )
    agent = agentkit.Agent(engine, tools=[server], profile="qwen3")
    async with server:
        assert {"add", "wait", "fail", "picture"} <= {tool.name for tool in server.tools}
        assert server.name == "127.0.0.1"
        result = await agent.run("go")
        await log.wait_for("cancelled http")  # the timeout's cancellation reached the server
    added, waited = results(result)
    assert (added.content, added.is_error) == ("42", False)
    assert waited.is_error
    assert "timed out" in waited.content


async def test_an_error_result(http_server: HttpServer) -> None:
    agent = agentkit.Agent(
        FunctionEngine(lambda r: call("fail", message="denied") if r.turn == 1 else "ok"),
        tools=[MCPServer.http(http_server.url)],
        profile="qwen3",
    )
    [block] = results(await agent.run("go"))
    assert block.is_error
    assert "denied" in block.content


async def test_a_server_killed_mid_call(http_server: HttpServer, log: ServerLog) -> None:
    async def model(request: ScriptedCall) -> str:
        if request.turn == 1:
            return call("wait", label="kill")
        if request.turn == 2:
            return call("add", a=1, b=1)
        return "carried on"

    async def kill_when_started() -> None:
        await log.wait_for("started kill")
        http_server.process.kill()

    server = MCPServer.http(http_server.url, name="remote")
    agent = agentkit.Agent(FunctionEngine(model), tools=[server], profile="qwen3")
    async with anyio.create_task_group() as group:
        group.start_soon(kill_when_started)
        result = await agent.run("go")
    killed, later = results(result)
    assert killed.is_error
    assert "MCP server 'remote'" in killed.content
    assert later.is_error
    assert result.output_text == "carried on"


async def test_cancelling_the_run_reaches_the_server(
    http_server: HttpServer, log: ServerLog
) -> None:
    server = MCPServer.http(http_server.url)
    agent = agentkit.Agent(
        FunctionEngine(lambda r: call("wait", label="cancel") if r.turn == 1 else "ok"),
        tools=[server],
        profile="qwen3",
    )
    async with server:  # held open: the session outlives the cancelled run
        async with anyio.create_task_group() as group:

            async def cancel_when_started() -> None:
                await log.wait_for("started cancel")
                group.cancel_scope.cancel()

            group.start_soon(cancel_when_started)
            await agent.run("go")
        await log.wait_for("cancelled cancel")


async def test_an_endpoint_that_does_not_answer_stops_the_run() -> None:
    server = MCPServer.http("http://127.0.0.1:9/mcp", name="nowhere", start_timeout=10)
    agent = agentkit.Agent(FunctionEngine(lambda r: "ok"), tools=[server], profile="qwen3")
    with pytest.raises(MCPServerError, match="'nowhere'"):
        await agent.run("go")
