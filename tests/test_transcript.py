"""The typed transcript: block order, raw text, lossless JSON."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
blocks = st.one_of(
    st.builds(ReasoningBlock, text=st.text(), raw=st.none() | st.text()),
    st.builds(TextBlock, text=st.text(), raw=st.none() | st.text()),
    st.builds(
        ToolCallBlock,
        id=st.text(min_size=1),
        name=st.text(),
        arguments=st.dictionaries(st.text(), json_values, max_size=4),
        raw=st.none() | st.text(),
        error=st.none() | st.text(),
    ),
    st.builds(
        ToolResultBlock,
        call_id=st.text(min_size=1),
        name=st.text(),
        content=st.text(),
        is_error=st.booleans(),
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(blocks, max_size=5),
    token_ids=st.none() | st.lists(st.integers(min_value=0, max_value=2**31), max_size=5),
)


@given(st.builds(Transcript, messages=st.lists(messages, max_size=4)))
def test_json_round_trip_is_lossless(transcript: Transcript) -> None:
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript


def test_interleaved_blocks_keep_their_order() -> None:
    content = [
        ReasoningBlock(text="r0", raw="<think>r0</think>"),
        ToolCallBlock(id="c0", name="a", raw="<tool_call>a</tool_call>"),
        ReasoningBlock(text="r1", raw="<think>r1</think>"),
        ToolCallBlock(id="c1", name="b", raw="<tool_call>b</tool_call>"),
    ]
    message = Message(role="assistant", content=content)
    restored = Message.model_validate_json(message.model_dump_json())
    assert [b.type for b in restored.content] == [
        "reasoning",
        "tool_call",
        "reasoning",
        "tool_call",
    ]
    assert (
        restored.raw
        == "<think>r0</think><tool_call>a</tool_call><think>r1</think><tool_call>b</tool_call>"
    )
    assert [c.id for c in restored.tool_calls] == ["c0", "c1"]


def test_raw_is_none_when_a_block_was_not_generated_here() -> None:
    message = Message(role="assistant", content=[TextBlock(text="typed by hand")])
    assert message.raw is None
    assert message.text == "typed by hand"


def test_from_prompt_and_add() -> None:
    transcript = Transcript.from_prompt("hi", system="sys")
    transcript.add("assistant", [TextBlock(text="hello")])
    assert [m.role for m in transcript] == ["system", "user", "assistant"]
    assert transcript.last_assistant is not None
    assert transcript.last_assistant.text == "hello"
    assert len(transcript) == 3
