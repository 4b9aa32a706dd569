"""Agent hints reach the engine's requests, and agent.side_query leaves the transcript alone."""

from __future__ import annotations

import pytest

import agentkit
from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile

pytestmark = pytest.mark.anyio


def engine(outputs: list[str]) -> TokenizedScriptedEngine:
    qwen3 = get_profile("qwen3")
    return TokenizedScriptedEngine(outputs, specials=qwen3.special_tokens, stop=qwen3.stop[0])


async def test_priority_hints_per_agent_and_per_run() -> None:
    scripted = engine(["one", "two"])
    agent = agentkit.Agent(scripted, hints=agentkit.AgentHints(priority=-5), profile="qwen3")
    await agent.run("a")
    await agent.run("b", hints=agentkit.AgentHints(priority=3, latency_sensitive=True))
    first, second = scripted.requests
    # Typed on the request, not an engine option: each engine maps what it can.
    assert (first.hints, first.extra) == (agentkit.AgentHints(priority=-5), {})
    assert second.hints == agentkit.AgentHints(priority=3, latency_sensitive=True)
    assert second.extra == {}


async def test_side_queries_reuse_the_prompt_and_leave_the_transcript_alone() -> None:
    scripted = engine(["Paris is sunny.", '{"title": "Weather in Paris"}'])
    agent = agentkit.Agent(scripted, system="Be brief.", profile="qwen3")
    result = await agent.run("Weather in Paris?")
    before = result.transcript.model_dump()
    title = await agent.side_query("title", transcript=result.transcript)
    assert title.title == "Weather in Paris"  # type: ignore[attr-defined]
    assert result.transcript.model_dump() == before
    main, side = scripted.requests
    assert main.prompt_token_ids is not None
    assert side.prompt_token_ids is not None
    assert side.prompt_token_ids[: len(main.prompt_token_ids)] == main.prompt_token_ids
    assert title.cached_prompt_tokens >= len(main.prompt_token_ids)
