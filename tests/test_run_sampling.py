"""``agent.run`` / ``agent.stream`` take ``temperature`` and ``top_p`` for one run: every model
request of that run uses them, and the agent's own apply to the runs that give none."""

from __future__ import annotations

import pytest

import agentkit
from agentkit.engine import ScriptedEngine

pytestmark = pytest.mark.anyio

CALL = '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'


@agentkit.tool
async def ping() -> str:
    """Answers pong."""
    return "pong"


async def test_a_runs_sampling_applies_to_each_of_its_turns_and_only_to_that_run() -> None:
    engine = ScriptedEngine([CALL, "done", "plain"])
    agent = agentkit.Agent(engine, tools=[ping], profile="qwen3", temperature=0.7, top_p=0.9)
    await agent.run("go", temperature=0.0, top_p=0.5)  # two turns: the call, then the answer
    async with agent.stream("again") as events:
        async for _ in events:
            pass
    sampled = [(r.temperature, r.top_p) for r in engine.requests]
    assert sampled == [(0.0, 0.5), (0.0, 0.5), (0.7, 0.9)]


async def test_stream_takes_one_of_the_two() -> None:
    engine = ScriptedEngine(["hi"])
    agent = agentkit.Agent(engine, profile="qwen3", temperature=0.7)
    async with agent.stream("go", top_p=0.25) as events:
        async for _ in events:
            pass
    assert (engine.requests[0].temperature, engine.requests[0].top_p) == (0.7, 0.25)
