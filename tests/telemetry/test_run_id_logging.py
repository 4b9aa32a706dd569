"""Every log record of a run carries its run_id, tool records and tool threads included;
``TurnComplete`` carries the turn's duration."""

from __future__ import annotations

import logging

import pytest
import structlog

import agentkit
from agentkit._logging import get_logger
from agentkit.engine import ScriptedEngine
from agentkit.events import TurnComplete

pytestmark = pytest.mark.anyio

_CALLS = (
    '<tool_call>\n{"name": "in_task", "arguments": {}}\n</tool_call>\n'
    '<tool_call>\n{"name": "in_thread", "arguments": {}}\n</tool_call>\n'
    '<tool_call>\n{"name": "crashes", "arguments": {}}\n</tool_call>'
)


@agentkit.tool
async def in_task() -> str:
    get_logger("agentkit.test").info("from_async_tool")
    return "ok"


@agentkit.tool
def in_thread() -> str:
    get_logger("agentkit.test").info("from_sync_tool")
    return str(structlog.contextvars.get_contextvars().get("run_id"))


@agentkit.tool
def crashes() -> str:
    raise ValueError("boom")


async def test_every_record_of_a_run_carries_its_run_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentkit")
    agent = agentkit.Agent(
        ScriptedEngine([_CALLS, "done"]), tools=[in_task, in_thread, crashes], profile="qwen3"
    )
    result = await agent.run("go")
    records = [r for r in caplog.records if r.name.startswith("agentkit")]
    events = {r.getMessage().split()[0] for r in records}
    assert {
        "event='from_async_tool'",
        "event='from_sync_tool'",
        "event='tool_call'",
        "event='turn'",
    } <= events
    for record in records:
        assert f"run_id='{result.run_id}'" in record.getMessage(), record.getMessage()
    (crash,) = [r for r in records if r.levelno == logging.ERROR]
    assert crash.exc_info is not None  # the tool logger still hands over the traceback
    assert result.transcript.messages[2].content[1].content == result.run_id  # type: ignore[union-attr]


async def test_the_binding_ends_with_the_run(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentkit")
    with structlog.contextvars.bound_contextvars(run_id="outer", request="r1"):
        agent = agentkit.Agent(ScriptedEngine(["hi"]), profile="qwen3")
        result = await agent.run("go")
        assert structlog.contextvars.get_contextvars() == {"run_id": "outer", "request": "r1"}
    assert structlog.contextvars.get_contextvars() == {}
    (turn,) = [r.getMessage() for r in caplog.records if "event='turn'" in r.getMessage()]
    assert f"run_id='{result.run_id}'" in turn
    assert "request='r1'" in turn


async def test_turn_complete_carries_the_turns_duration() -> None:
    agent = agentkit.Agent(ScriptedEngine(["hi"], token_delay=0.001), profile="qwen3")
    async with agent.stream("go") as events:
        turns = [event async for event in events if isinstance(event, TurnComplete)]
    (turn,) = turns
    assert turn.duration_s > 0
