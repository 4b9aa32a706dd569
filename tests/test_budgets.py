"""Usage limits on the scripted engine: each limit stops the run as early as is correct, with
a typed error that names it and keeps everything produced."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest
from _hermes import hermes
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import agentkit
from agentkit import UsageLimitExceeded, UsageLimits
from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    ScriptedEngine,
    ScriptedOutput,
    TokenizedScriptedEngine,
)
from agentkit.errors import MaxTurnsExceeded
from agentkit.transcript import TextBlock, ToolResultBlock

pytestmark = pytest.mark.anyio


def words(n: int) -> list[str]:
    """``n`` chunks of one pseudo-token each (the scripted engine counts one per chunk)."""
    return [f"w{i}," for i in range(n)]


class Recording:
    """Wraps an engine: counts the chunks it streamed and whether each stream was closed."""

    def __init__(self, inner: ScriptedEngine) -> None:
        self.inner = inner
        self.chunks = 0
        self.closed = 0
        self.requests = inner.requests

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        try:
            async for chunk in self.inner.generate(request):
                self.chunks += 1
                yield chunk
        finally:
            self.closed += 1


@agentkit.tool
def ping() -> str:
    """Ping."""
    return "pong"


def agent(engine: object, **options: object) -> agentkit.Agent:
    return agentkit.Agent(engine=engine, tools=[ping], profile="qwen3", **options)  # type: ignore[arg-type]


async def test_output_tokens_stop_the_stream_and_keep_the_partial_turn() -> None:
    engine = Recording(ScriptedEngine([words(50)]))
    limited = agent(engine, usage_limits=UsageLimits(output_tokens=10))
    with pytest.raises(UsageLimitExceeded) as info:
        await limited.run("go")
    error = info.value
    assert (error.limit, error.value, error.maximum) == ("output_tokens", 11, 10)
    assert engine.requests[0].max_tokens == 10  # capped to what was left
    assert (engine.chunks, engine.closed) == (11, 1)  # the request was aborted there
    assert error.transcript is not None
    last = error.transcript.messages[-1]
    assert last.role == "assistant"
    assert last.text == "".join(words(11))  # nothing produced is lost


async def test_output_tokens_cap_each_request_to_what_is_left_of_the_run() -> None:
    engine = ScriptedEngine([[*words(4), hermes("ping")], "done"])
    result = await agent(engine, max_tokens=500, usage_limits=UsageLimits(output_tokens=100)).run(
        "go"
    )
    assert result.output_text == "done"
    first, second = engine.requests
    assert first.max_tokens == 100
    assert second.max_tokens == 100 - result.usage.turns[0].output_tokens


async def test_a_turn_the_budgets_cap_cut_short_ends_the_run() -> None:
    # A real engine stops at the capped max_tokens with finish_reason "length".
    engine = ScriptedEngine([ScriptedOutput(words(5), finish_reason="length")])
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(output_tokens=5)).run("go")
    assert (info.value.limit, info.value.value, info.value.maximum) == ("output_tokens", 5, 5)


async def test_the_agents_own_max_tokens_cutting_a_turn_is_not_a_budget_stop() -> None:
    engine = ScriptedEngine([ScriptedOutput(words(5), finish_reason="length")])
    limited = agent(engine, max_tokens=5, usage_limits=UsageLimits(output_tokens=50))
    result = await limited.run("go")
    assert result.output_text == "".join(words(5))


async def test_no_request_starts_with_no_output_token_left() -> None:
    # The first turn uses exactly the run's three tokens (two words and a one-chunk call).
    engine = ScriptedEngine([[*words(2), hermes("ping")], "done"])
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(output_tokens=3)).run("go")
    assert (info.value.limit, info.value.value, info.value.maximum) == ("output_tokens", 3, 3)
    assert len(engine.requests) == 1


async def test_total_tokens_count_prompt_and_output_after_the_turn() -> None:
    # The plain scripted engine reports the prompt's length only with its last chunk.
    engine = ScriptedEngine(["a short answer"])
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(total_tokens=5)).run("go")
    error = info.value
    assert (error.limit, error.maximum) == ("total_tokens", 5)
    assert error.value > 5
    assert error.transcript is not None
    assert error.transcript.messages[-1].text == "a short answer"


async def test_total_tokens_cap_the_request_when_the_prompt_length_is_known() -> None:
    engine = TokenizedScriptedEngine(["ok"], specials=("<|im_start|>", "<|im_end|>"))
    limited = agent(engine, usage_limits=UsageLimits(total_tokens=10_000))
    await limited.run("go")
    request = engine.requests[0]
    assert request.prompt_token_ids is not None
    assert request.max_tokens == 10_000 - len(request.prompt_token_ids)


async def test_a_prompt_that_uses_up_the_total_tokens_is_never_sent() -> None:
    engine = TokenizedScriptedEngine(["ok"], specials=("<|im_start|>", "<|im_end|>"))
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(total_tokens=3)).run("go")
    assert info.value.limit == "total_tokens"
    assert engine.requests == []


async def test_a_call_beyond_tool_calls_is_not_run_and_the_stream_stops() -> None:
    runs: list[str] = []

    @agentkit.tool
    def note(text: str) -> str:
        """Note something."""
        runs.append(text)
        return "noted"

    engine = Recording(
        ScriptedEngine([hermes("note", text="a") + hermes("note", text="b") + " tail" * 30])
    )
    limited = agentkit.Agent(
        engine=engine, tools=[note], profile="qwen3", usage_limits=UsageLimits(tool_calls=1)
    )
    with pytest.raises(UsageLimitExceeded) as info:
        await limited.run("go")
    error = info.value
    assert (error.limit, error.value, error.maximum) == ("tool_calls", 2, 1)
    assert runs == ["a"]
    assert engine.closed == 1
    transcript = error.transcript
    assert transcript is not None
    assert "tail" not in transcript.messages[1].text
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool"]
    assistant, tool = transcript.messages[1:]
    assert [c.arguments for c in assistant.tool_calls] == [{"text": "a"}, {"text": "b"}]
    results = [b for b in tool.content if isinstance(b, ToolResultBlock)]
    assert [(r.content, r.is_error) for r in results] == [
        ("noted", False),
        ("Not run: the run reached its usage limit tool_calls.", True),
    ]
    assert [r.call_id for r in results] == [c.id for c in assistant.tool_calls]


async def test_no_tool_runs_with_a_limit_of_zero_calls() -> None:
    engine = ScriptedEngine([hermes("ping")])
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(tool_calls=0)).run("go")
    assert (info.value.limit, info.value.value) == ("tool_calls", 1)


async def test_turns_stop_before_a_request_beyond_the_limit() -> None:
    engine = ScriptedEngine([hermes("ping")] * 5)
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(turns=2)).run("go")
    assert (info.value.limit, info.value.value, info.value.maximum) == ("turns", 3, 2)
    assert len(engine.requests) == 2
    assert info.value.transcript is not None
    roles = [m.role for m in info.value.transcript.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]


async def test_max_turns_keeps_its_own_error() -> None:
    engine = ScriptedEngine([hermes("ping")] * 5)
    with pytest.raises(MaxTurnsExceeded):
        await agent(engine, max_turns=2, usage_limits=UsageLimits(turns=3)).run("go")


async def test_wall_time_cancels_running_tools_and_keeps_the_turn() -> None:
    cancelled = anyio.Event()

    @agentkit.tool
    async def hang() -> str:
        """Never finishes on its own."""
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "unreachable"

    engine = ScriptedEngine([hermes("hang") + "then text"])
    limited = agentkit.Agent(
        engine=engine, tools=[hang], profile="qwen3", usage_limits=UsageLimits(wall_time_s=0.05)
    )
    with pytest.raises(UsageLimitExceeded) as info:
        await limited.run("go")
    assert (info.value.limit, info.value.maximum) == ("wall_time_s", 0.05)
    assert cancelled.is_set()
    transcript = info.value.transcript
    assert transcript is not None
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool"]
    assert transcript.messages[1].text == "then text"
    (result,) = transcript.messages[2].content
    assert isinstance(result, ToolResultBlock)
    assert result.is_error


class Stalling:
    """Streams a few chunks, then waits for ever: the engine request the deadline aborts."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks
        self.aborted = False

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        try:
            for chunk in self.chunks:
                yield GenerationChunk(text=chunk)
            await anyio.sleep_forever()
            yield GenerationChunk(text="unreachable")
        finally:
            self.aborted = True


async def test_wall_time_aborts_a_stalled_engine_request_and_keeps_its_output() -> None:
    engine = Stalling(["partial", " answer"])
    limited = agent(engine, usage_limits=UsageLimits(wall_time_s=0.05))
    with pytest.raises(UsageLimitExceeded) as info:
        await limited.run("go")
    assert info.value.limit == "wall_time_s"
    assert engine.aborted
    assert info.value.transcript is not None
    (block,) = info.value.transcript.messages[-1].content
    assert isinstance(block, TextBlock)
    assert block.text == "partial answer"


async def test_wall_time_before_any_output_leaves_no_empty_message() -> None:
    engine = Stalling([])
    with pytest.raises(UsageLimitExceeded) as info:
        await agent(engine, usage_limits=UsageLimits(wall_time_s=0.02)).run("go")
    assert info.value.transcript is not None
    assert [m.role for m in info.value.transcript.messages] == ["user"]


async def test_a_runs_limits_replace_the_agents() -> None:
    engine = ScriptedEngine([hermes("ping"), "done"])
    strict = agent(engine, usage_limits=UsageLimits(tool_calls=0))
    result = await strict.run("go", usage_limits=UsageLimits())
    assert result.output_text == "done"


async def test_a_stream_raises_the_limit_after_its_events() -> None:
    engine = ScriptedEngine([words(20)])
    limited = agent(engine)
    types: list[str] = []

    async def consume() -> None:
        async with limited.stream("go", usage_limits=UsageLimits(output_tokens=3)) as events:
            async for event in events:
                types.append(event.type)

    with pytest.raises(UsageLimitExceeded):
        await consume()
    assert types.count("text_delta") == 4
    assert types[-1] == "turn_complete"


def test_limits_are_validated_and_frozen() -> None:
    with pytest.raises(ValidationError):
        UsageLimits(output_tokens=0)
    with pytest.raises(ValidationError):
        UsageLimits(wall_time_s=0)
    with pytest.raises(ValidationError):
        UsageLimits(tool_calls=-1)
    with pytest.raises(ValidationError):
        UsageLimits(turn=3)  # type: ignore[call-arg]
    limits = UsageLimits(turns=2)
    with pytest.raises(ValidationError):
        limits.turns = 3  # type: ignore[misc]


@settings(max_examples=30, deadline=None)
@given(length=st.integers(min_value=1, max_value=30), limit=st.integers(min_value=1, max_value=30))
def test_output_is_never_lost_and_never_far_over_the_limit(length: int, limit: int) -> None:
    chunks = words(length)

    async def run() -> agentkit.RunResult | UsageLimitExceeded:
        limited = agent(ScriptedEngine([chunks]), usage_limits=UsageLimits(output_tokens=limit))
        try:
            return await limited.run("go")
        except UsageLimitExceeded as error:
            return error

    outcome = anyio.run(run)
    if isinstance(outcome, UsageLimitExceeded):
        assert length > limit
        assert outcome.value == limit + 1
        assert outcome.transcript is not None
        assert outcome.transcript.messages[-1].text == "".join(chunks[: limit + 1])
    else:
        assert length <= limit
        assert outcome.output_text == "".join(chunks)


def test_the_docs_snippet_runs() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "budgets.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    done = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tool_calls", "4", "3", "9"]
