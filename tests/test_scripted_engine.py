"""ScriptedEngine: a public feature, users test their agents with it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit.engine import (
    Engine,
    GenerationChunk,
    GenerationRequest,
    ScriptedEngine,
    ScriptedOutput,
    split_pseudo_tokens,
)
from agentkit.errors import EngineError, ScriptExhaustedError

pytestmark = pytest.mark.anyio


async def collect(engine: ScriptedEngine, prompt: str = "p") -> list[GenerationChunk]:
    return [c async for c in engine.generate(GenerationRequest(prompt=prompt))]


@given(st.text())
def test_pseudo_tokens_cover_the_text_exactly(text: str) -> None:
    pieces = split_pseudo_tokens(text)
    assert "".join(pieces) == text
    assert all(pieces)


def test_markers_arrive_split_as_from_a_tokenizer() -> None:
    assert split_pseudo_tokens("<tool_call>") == ["<too", "l_ca", "ll>"]


def test_is_an_engine() -> None:
    assert isinstance(ScriptedEngine([]), Engine)


async def test_streams_each_output_in_order_then_fails_clearly() -> None:
    engine = ScriptedEngine(["hello world", ["a", "b"]])
    first = await collect(engine)
    assert "".join(c.text for c in first) == "hello world"
    assert first[-1].finish_reason == "stop"
    assert first[-1].usage is not None
    second = await collect(engine)
    assert [c.text for c in second[:-1]] == ["a", "b"]
    assert engine.remaining == 0
    with pytest.raises(ScriptExhaustedError, match="request 3"):
        await collect(engine)
    assert [r.prompt for r in engine.requests] == ["p", "p", "p"]


async def test_failure_mid_stream_is_an_engine_error() -> None:
    engine = ScriptedEngine([["ok", ValueError("boom"), "never"]])
    got: list[str] = []

    async def drain() -> None:
        async for chunk in engine.generate(GenerationRequest(prompt="p")):
            got.append(chunk.text)

    with pytest.raises(EngineError, match="boom"):
        await drain()
    assert got == ["ok"]


async def test_finish_reason_and_usage() -> None:
    engine = ScriptedEngine([ScriptedOutput.of("cut sho", finish_reason="length"), "again"])
    chunks = await collect(engine, prompt="one two three")
    last = chunks[-1]
    assert last.finish_reason == "length"
    assert last.usage is not None
    assert last.usage.output_tokens == len(split_pseudo_tokens("cut sho"))
    assert last.usage.prompt_tokens == len(split_pseudo_tokens("one two three"))
    assert last.usage.cached_prompt_tokens == 0
    # A prompt that extends the previous prompt + output is served from the "cache".
    chunks = await collect(engine, prompt="one two three" + "cut sho" + " more")
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.cached_prompt_tokens >= 3


def test_negative_delay_is_rejected() -> None:
    with pytest.raises(ValueError, match="token_delay"):
        ScriptedEngine([], token_delay=-1)
