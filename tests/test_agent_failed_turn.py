"""A failed turn keeps what the model produced and nothing more: an engine that fails before
any output leaves no empty assistant message to poison the next prompt."""

from __future__ import annotations

import pytest

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.errors import EngineError
from agentkit.transcript import Message, ReasoningBlock, TextBlock, Transcript

pytestmark = pytest.mark.anyio


async def _failed_transcript(first: list[str | BaseException]) -> Transcript:
    agent = agentkit.Agent(engine=ScriptedEngine([first]), profile="qwen3")
    with pytest.raises(EngineError) as info:
        await agent.run("hi")
    assert info.value.transcript is not None
    return info.value.transcript


async def test_an_engine_failure_before_any_output_appends_no_message() -> None:
    transcript = await _failed_transcript([RuntimeError("down")])
    assert [m.role for m in transcript.messages] == ["user"]


async def test_continuing_the_errors_transcript_renders_a_valid_prompt() -> None:
    transcript = await _failed_transcript([RuntimeError("down")])
    transcript.append(Message(role="user", content=[TextBlock(text="again")]))
    engine = ScriptedEngine(["hello"])
    result = await agentkit.Agent(engine=engine, profile="qwen3").run(transcript)
    assert result.output_text == "hello"
    prompt = engine.requests[0].prompt
    assert "<|im_start|>assistant\n<|im_end|>" not in prompt
    assert prompt.count("<|im_start|>assistant") == 1  # only the turn being generated
    # The same prompt as the conversation that never had the failed turn.
    clean = ScriptedEngine(["hello"])
    await agentkit.Agent(engine=clean, profile="qwen3").run(
        Transcript(
            messages=[
                Message(role="user", content=[TextBlock(text="hi")]),
                Message(role="user", content=[TextBlock(text="again")]),
            ]
        )
    )
    assert prompt == clean.requests[0].prompt


async def test_a_failure_after_some_output_keeps_it() -> None:
    transcript = await _failed_transcript(["<think>", "half", RuntimeError("down")])
    assert [m.role for m in transcript.messages] == ["user", "assistant"]
    assert transcript.messages[-1].content == [ReasoningBlock(text="half", raw="<think>half")]
