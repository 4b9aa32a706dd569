"""The GenAI metrics of instrumented runs, read back with the SDK's in-memory reader."""

from __future__ import annotations

import pytest
from _otel_memory import TWO_CALLS, Otel

import agentkit
from agentkit.engine import ScriptedEngine

pytestmark = pytest.mark.anyio


@agentkit.tool
async def first(x: int) -> str:
    return "one"


@agentkit.tool
def second(x: int) -> str:
    raise RuntimeError("broken")


async def test_token_turn_tool_and_cache_metrics() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"])
    agent = agentkit.Agent(
        engine, tools=[first, second], profile="qwen3", instrument=otel.settings()
    )
    result = await agent.run("go")
    usage = result.usage

    tokens = {
        dict(p.attributes)["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")
    }
    assert tokens["input"].sum == usage.prompt_tokens
    assert tokens["input"].count == 2
    assert tokens["output"].sum == usage.output_tokens
    assert tokens["output"].count == 2
    for point in tokens.values():
        assert dict(point.attributes)["gen_ai.operation.name"] == "chat"
        assert dict(point.attributes)["gen_ai.provider.name"] == "scripted"

    (turns,) = otel.points("gen_ai.client.operation.duration")
    assert turns.count == 2
    assert turns.sum > 0
    (first_chunk,) = otel.points("gen_ai.client.operation.time_to_first_chunk")
    assert first_chunk.count == 2
    assert first_chunk.sum == pytest.approx(
        sum(t.time_to_first_token_s or 0.0 for t in usage.turns)
    )
    (ratio,) = otel.points("agentkit.client.token.cache_hit_ratio")
    assert ratio.count == 2
    assert ratio.sum == pytest.approx(
        sum(t.cached_prompt_tokens / t.prompt_tokens for t in usage.turns)
    )
    assert 0 < ratio.sum < 2

    tools = {
        dict(p.attributes)["gen_ai.tool.name"]: p for p in otel.points("agentkit.tool.duration")
    }
    assert set(tools) == {"first", "second"}
    assert tools["first"].count == 1
    assert "error.type" not in dict(tools["first"].attributes)
    assert dict(tools["second"].attributes)["error.type"] == "ToolExecutionError"


async def test_an_agent_that_is_not_instrumented_records_nothing() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"])
    await agentkit.Agent(engine, tools=[first, second], profile="qwen3").run("go")
    assert otel.finished() == []
    assert otel.points("gen_ai.client.token.usage") == []
