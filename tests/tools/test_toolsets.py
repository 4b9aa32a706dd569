"""Toolsets in the registry and in agent runs: started for a run, listed, closed after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _toolsets import FakeToolset

import agentkit
from agentkit.engine import FunctionEngine, ScriptedCall
from agentkit.errors import ConfigurationError, EngineError, ToolExecutionError
from agentkit.tools import Tool, ToolRegistry, Toolset, tool
from agentkit.transcript import ToolResultBlock

pytestmark = pytest.mark.anyio


@tool
def local() -> str:
    """A plain tool."""
    return "local"


def call(name: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': {}})}\n</tool_call>"


def test_a_fake_toolset_is_a_toolset() -> None:
    assert isinstance(FakeToolset("x"), Toolset)
    assert not isinstance(local, Toolset)


async def test_running_starts_lists_in_order_and_closes() -> None:
    first, second = FakeToolset("a", "a1", "a2"), FakeToolset("b", "b1")
    registry = ToolRegistry([first, local, second])
    assert registry.names == ["local"]
    assert registry.toolsets == [first, second]
    async with registry.running():
        assert registry.names == ["a1", "a2", "local", "b1"]
        assert (first.started, second.started) == (1, 1)
    assert (first.closed, second.closed) == (1, 1)


async def test_a_running_toolset_is_used_as_it_is() -> None:
    toolset = FakeToolset("a", "a1")
    await toolset.start()
    registry = ToolRegistry([toolset])
    async with registry.running():
        assert registry.names == ["a1"]
    assert (toolset.started, toolset.closed) == (1, 0)


async def test_a_name_two_sources_share_is_a_configuration_error() -> None:
    toolset = FakeToolset("a", "local")
    registry = ToolRegistry([local, toolset])
    with pytest.raises(ConfigurationError, match="'local' \\(from toolset 'a'\\)"):
        async with registry.running():
            pass
    assert toolset.closed == 1  # what was started is closed again


def test_a_toolset_is_registered_once() -> None:
    toolset = FakeToolset("a")
    with pytest.raises(ConfigurationError, match="already registered"):
        ToolRegistry([toolset, toolset])


async def test_a_run_offers_the_toolset_tools_and_closes_it() -> None:
    toolset = FakeToolset("srv", "ping", "broken")
    offered: list[list[str]] = []

    def model(request: ScriptedCall) -> str:
        offered.append(request.tool_names)
        return call("ping") + call("broken") if request.turn == 1 else "ok"

    agent = agentkit.Agent(FunctionEngine(model), tools=[local, toolset], profile="qwen3")
    result = await agent.run("go")
    assert offered[0] == ["local", "ping", "broken"]
    ping, broken = result.transcript.messages[-2].content
    assert isinstance(ping, ToolResultBlock)
    assert isinstance(broken, ToolResultBlock)
    assert (ping.content, ping.is_error) == ("srv.ping", False)
    assert (broken.content, broken.is_error) == ("it broke", True)
    assert (toolset.started, toolset.closed) == (1, 1)


async def test_a_tool_error_from_a_handler_gets_the_call_id() -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        raise ToolExecutionError("nope", call_id="", tool_name="t")

    with pytest.raises(ToolExecutionError) as caught:
        await Tool("t", "", {"type": "object"}, handler).invoke({}, call_id="call_7")
    assert caught.value.call_id == "call_7"


async def test_a_failed_run_closes_the_toolsets_it_started() -> None:
    toolset = FakeToolset("srv", "ping")

    def model(request: ScriptedCall) -> str:
        raise EngineError("down")

    agent = agentkit.Agent(FunctionEngine(model), tools=[toolset], profile="qwen3")
    with pytest.raises(EngineError):
        await agent.run("go")
    assert (toolset.started, toolset.closed) == (1, 1)


async def test_tool_choice_may_name_a_toolset_tool() -> None:
    choices: list[str | None] = []

    def model(request: ScriptedCall) -> str:
        choices.append(request.tool_choice)
        return call("ping") if request.turn == 1 else "ok"

    agent = agentkit.Agent(
        FunctionEngine(model), tools=[FakeToolset("srv", "ping")], profile="qwen3"
    )
    result = await agent.run("go", tool_choice="ping")
    assert result.output_text == "ok"
    assert choices == ["ping", "auto"]
    with pytest.raises(ConfigurationError, match="'pong'"):
        await agent.run("go", tool_choice="pong")
