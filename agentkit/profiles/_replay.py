"""Reasoning-replay policies: which reasoning blocks go back into the next prompt.

A model was trained to see its earlier reasoning in one way: kept in place, kept only when
the prompt offers tools (DeepSeek-V4), dropped once a task ended in an answer (DeepSeek-V3.2,
Qwen3), dropped always (DeepSeek-R1 and V3.1, whose templates never write reasoning back), or
however its own chat template decides. Getting it wrong is silent — the user sees reasoning
decoded correctly, but the next prompt is not what the model was trained on, and the prefix
cache misses where the prompt was rewritten. The policy is applied to a *view* of the
transcript (:func:`replay_view`); the transcript itself keeps everything.

Interleaved reasoning stays interleaved in every policy that keeps it: the view removes whole
reasoning blocks and never moves the others.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Literal, get_args

from agentkit.errors import ConfigurationError
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = [
    "TOOL_OUTPUT_REMOVED",
    "ReplayPolicy",
    "dropped_reasoning",
    "has_reasoning",
    "replay_view",
    "validate_replay_policy",
]

ReplayPolicy = Literal[
    "keep_all", "keep_with_tools", "drop_on_plain_turns", "drop_all", "template_native"
]
"""``keep_all``: every reasoning block replayed in place, across user turns.
``keep_with_tools``: ``keep_all`` when the prompt offers tools; without tools, only the
reasoning after the last user message or tool result is replayed (DeepSeek-V4's encoder, in
which tool results are user turns: its ``drop_thinking`` is off whenever tools are given).
``drop_on_plain_turns``: reasoning of the tasks that ended in an answer (every assistant message
before the last user message) is dropped; reasoning inside the current task is kept in place.
``drop_all``: no reasoning is replayed (the prompt is rebuilt after every turn with reasoning).
``template_native``: the model's own chat template gets the reasoning and decides."""

TOOL_OUTPUT_REMOVED = "[tool output removed to fit the context window: {chars} characters]"
"""What replaces a tool output that context compaction removed."""


def validate_replay_policy(policy: str) -> ReplayPolicy:
    """``policy`` if it names a replay policy; a :class:`ConfigurationError` otherwise."""
    for known in get_args(ReplayPolicy):
        if policy == known:
            return known  # type: ignore[no-any-return]
    raise ConfigurationError(
        f"unknown reasoning-replay policy {policy!r}; valid: {', '.join(get_args(ReplayPolicy))}"
    )


def has_reasoning(message: Message) -> bool:
    return message.role == "assistant" and any(
        isinstance(b, ReasoningBlock) for b in message.content
    )


def dropped_reasoning(
    transcript: Transcript, policy: ReplayPolicy, *, tools: bool = False
) -> set[int]:
    """Indexes of the messages whose reasoning ``policy`` leaves out of the next prompt;
    ``tools`` says whether the prompt offers tools (``keep_with_tools`` depends on it)."""
    messages = transcript.messages
    if policy in ("keep_all", "template_native") or (policy == "keep_with_tools" and tools):
        return set()
    if policy == "drop_all":
        return {i for i, m in enumerate(messages) if has_reasoning(m)}
    turns = ("user", "tool") if policy == "keep_with_tools" else ("user",)
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role in turns), -1)
    return {i for i in range(last_user) if has_reasoning(messages[i])}


def replay_view(
    transcript: Transcript,
    drop_reasoning: Collection[int] = (),
    remove_outputs: Iterable[tuple[int, int]] = (),
) -> Transcript:
    """``transcript`` as the next prompt shows it: the reasoning of the messages at
    ``drop_reasoning`` removed, and the tool outputs at ``remove_outputs`` ((message, block)
    indexes) replaced by :data:`TOOL_OUTPUT_REMOVED`. Unchanged messages are shared, not
    copied; an assistant message keeps the exact ``raw`` of the blocks that remain."""
    removed: dict[int, set[int]] = {}
    for message_index, block_index in remove_outputs:
        removed.setdefault(message_index, set()).add(block_index)
    if not drop_reasoning and not removed:
        return transcript
    messages = list(transcript.messages)
    for i in drop_reasoning:
        messages[i] = _without_reasoning(messages[i])
    for i, blocks in removed.items():
        message = messages[i]
        content = list(message.content)
        for j in blocks:
            block = content[j]
            if isinstance(block, ToolResultBlock):
                text = TOOL_OUTPUT_REMOVED.format(chars=len(block.content))
                content[j] = block.model_copy(update={"content": text})
        messages[i] = Message.model_construct(
            role=message.role, content=content, token_ids=message.token_ids
        )
    return Transcript.model_construct(messages=messages)


def _without_reasoning(message: Message) -> Message:
    """The message without its reasoning blocks; the newlines that separated a reasoning block
    from the text after it go with it (``<think>r</think>\n\nAnswer`` -> ``Answer``)."""
    content: list[ContentBlock] = []
    after_reasoning = False
    for block in message.content:
        if isinstance(block, ReasoningBlock):
            after_reasoning = True
            continue
        if after_reasoning and isinstance(block, TextBlock | ToolCallBlock):
            # The whitespace after a reasoning block is in the next block's raw.
            raw = block.raw.lstrip("\n") if block.raw is not None else None
            if isinstance(block, TextBlock):
                text = block.text.lstrip("\n")
                if not text and not raw:
                    continue
                block = block.model_copy(update={"text": text, "raw": raw})
            else:
                block = block.model_copy(update={"raw": raw})
        after_reasoning = False
        content.append(block)
    return Message.model_construct(role=message.role, content=content, token_ids=None)
