"""Pieces the family templates share: the system prompt, runs of tool results, and the
canonical rendering of an assistant message's blocks in generation order.

Every family template follows the same two rules as :class:`~agentkit.profiles.ChatMLTemplate`:
an assistant message whose blocks all remember ``raw`` is replayed verbatim (the model's exact
output), and any other is rendered from its blocks in order, so interleaved reasoning and calls
stay interleaved. Dropping old reasoning is not a template's business: the replay policy removes
reasoning blocks before rendering.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, cast

from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = [
    "CallsRenderer",
    "FamilyTemplate",
    "canonical_assistant",
    "function_of",
    "opens_with_reasoning",
    "preceding_calls",
    "split_system",
    "to_json",
    "tool_results",
]

CallsRenderer = Callable[[list[ToolCallBlock], list[str]], str]
"""Renders a run of consecutive calls, given the parts of the message rendered so far."""


def to_json(value: Any, *, indent: int | None = None) -> str:
    """JSON as the chat templates write it (``tojson`` in transformers, ``json.dumps`` in
    DeepSeek's encoders): non-ASCII kept, keys in their given order, ``", "``/``": "``."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def function_of(spec: ToolSpec) -> dict[str, Any]:
    """The ``function`` part of an OpenAI tool spec (a bare function spec passes through)."""
    function = spec.get("function", spec)
    return dict(function)


def split_system(messages: Sequence[Message]) -> tuple[str | None, int]:
    """The leading system message's text (``None`` without one) and the index after it."""
    if messages and messages[0].role == "system":
        return messages[0].text, 1
    return None, 0


def tool_results(messages: Sequence[Message], i: int) -> tuple[list[ToolResultBlock], int]:
    """The results of the run of tool messages starting at ``i``, and the index after it."""
    results: list[ToolResultBlock] = []
    while i < len(messages) and messages[i].role == "tool":
        results.extend(b for b in messages[i].content if isinstance(b, ToolResultBlock))
        i += 1
    return results, i


def preceding_calls(messages: Sequence[Message], i: int) -> list[ToolCallBlock]:
    """The calls of the assistant message before the run of tool messages around ``i``."""
    j = i - 1
    while j >= 0 and messages[j].role == "tool":
        j -= 1
    return messages[j].tool_calls if j >= 0 and messages[j].role == "assistant" else []


def opens_with_reasoning(message: Message | None) -> bool:
    """Whether an assistant message begins inside reasoning.

    Families whose prompt opens the reasoning block (``<think>`` at the end of the generation
    prompt) write that opener before such a message and a closed block (``</think>``) before
    any other: a message generated in thinking mode (whose first block is reasoning, even an
    empty one) replays after the same opener it was generated after, and one whose reasoning
    the replay policy removed gets the template's form for a turn without reasoning.
    """
    return (
        message is not None
        and message.role == "assistant"
        and bool(message.content)
        and isinstance(message.content[0], ReasoningBlock)
    )


def canonical_assistant(
    message: Message,
    *,
    reasoning: Callable[[str, bool], str],
    text: Callable[[str, list[str]], str],
    calls: CallsRenderer,
    opened: bool = False,
) -> str:
    """The model-format text of an assistant message: ``message.raw`` when every block has it,
    otherwise each block rendered in order (consecutive calls together).

    ``reasoning(text, opened)`` renders one reasoning block; ``opened`` is true for the first
    block when the prompt already wrote the start marker. ``text`` and ``calls`` get the parts
    rendered so far, for separators that depend on what came before.
    """
    raw = message.raw
    if raw is not None:
        return raw
    parts: list[str] = []
    pending: list[ToolCallBlock] = []
    for index, block in enumerate(message.content):
        if isinstance(block, ToolCallBlock):
            pending.append(block)
            continue
        if pending:
            parts.append(calls(pending, parts))
            pending = []
        if isinstance(block, ReasoningBlock):
            parts.append(reasoning(block.text, opened and index == 0))
        elif isinstance(block, TextBlock):
            parts.append(text(block.text, parts))
    if pending:
        parts.append(calls(pending, parts))
    return "".join(parts)


class FamilyTemplate(ABC):
    """The outline every family template renders by: a head (what precedes the
    conversation), the messages from an index, then the generation prompt.

    ``render`` writes the head and the messages after the ones it consumed; ``render_continuation``
    only the messages from ``start``, so a prompt built up to the end of an assistant message
    grows by the cost of the new messages. Subclasses are frozen dataclasses and say
    ``assistant_end`` themselves.
    """

    __slots__ = ()

    @abstractmethod
    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        """The parts before the conversation, and the index of the first message they leave."""

    @abstractmethod
    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        """Append ``messages[i:]`` to ``out``. ``tools`` is empty for a continuation; ``gen``
        says whether a generation prompt follows (for families that write it in the loop)."""

    def _generation_prompt(self, thinking: bool) -> str:
        """What ends the prompt when the model is to answer (after the messages); ``thinking``
        is false when the request turned thinking off (see :attr:`Profile.thinking_switch`)."""
        return ""

    def _mode(self, thinking: bool) -> FamilyTemplate:
        """The template that renders a request: itself, or, when the request turned thinking
        off and the template has a mode switch (a ``thinking`` field), its ``thinking=False``
        form (the model's chat mode: DeepSeek, GLM, Nemotron-3)."""
        if thinking or not getattr(self, "thinking", False):
            return self
        mode: FamilyTemplate = dataclasses.replace(cast(Any, self), thinking=False)
        return mode

    def _view(self, transcript: Transcript) -> Transcript:
        """What this mode renders of the transcript (all of it, unless a template says)."""
        return transcript

    def render(
        self,
        transcript: Transcript,
        tools: Sequence[ToolSpec],
        *,
        add_generation_prompt: bool = True,
        thinking: bool = True,
    ) -> str:
        mode = self._mode(thinking)
        messages = mode._view(transcript).messages
        out, start = mode._head(messages, tools)
        mode._messages(messages, start, out, tools, add_generation_prompt)
        if add_generation_prompt:
            out.append(mode._generation_prompt(thinking))
        return "".join(out)

    def render_continuation(
        self, transcript: Transcript, start: int, *, thinking: bool = True
    ) -> str:
        """The text of ``transcript.messages[start:]`` and the generation prompt, for a prompt
        whose earlier part (up to the end of an assistant message) is already built.

        ``render(t) == render(t_prefix) + raw + assistant_end + render_continuation(t, n)``
        whenever message ``n - 1`` is an assistant message generated here; the cost is
        proportional to the new messages, not to the history.
        """
        mode = self._mode(thinking)
        out: list[str] = []
        mode._messages(mode._view(transcript).messages, start, out, (), True)
        out.append(mode._generation_prompt(thinking))
        return "".join(out)
