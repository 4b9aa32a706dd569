"""Typed stream events, discriminated by ``type``.

The same event types feed the Python API (``async for event in agent.stream(...)``) and the
HTTP adapters, which only translate them into a wire format.

Two families:

* **Parse events** come out of a :class:`~agentkit.parsing.StreamParser` while the model
  generates. Each names ``index``, the position of its block in the assistant message being
  generated (as Anthropic's ``content_block`` index does), so a consumer can rebuild the
  blocks in order from the events alone.
* **Run events** come from the agent loop: tool results, turn and run boundaries.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkit.transcript import ToolResultBlock, Transcript

__all__ = [
    "AgentEvent",
    "ContextCompacted",
    "ParseEvent",
    "ReasoningComplete",
    "ReasoningDelta",
    "RunComplete",
    "TextComplete",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallComplete",
    "ToolCallStarted",
    "ToolResultEvent",
    "TurnComplete",
    "TurnUsage",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasoningDelta(_Event):
    """A piece of reasoning text, streamed as soon as it cannot be part of a marker."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    index: int
    text: str


class ReasoningComplete(_Event):
    """A reasoning block closed (its end marker was parsed, or the turn ended inside it)."""

    type: Literal["reasoning_complete"] = "reasoning_complete"
    index: int
    text: str


class TextDelta(_Event):
    """A piece of answer text."""

    type: Literal["text_delta"] = "text_delta"
    index: int
    text: str


class TextComplete(_Event):
    """A text block ended: a marker followed it, or the turn ended."""

    type: Literal["text_complete"] = "text_complete"
    index: int
    text: str


class ToolCallStarted(_Event):
    """The model began a tool call; its name is known, its arguments are still coming."""

    type: Literal["tool_call_started"] = "tool_call_started"
    index: int
    id: str
    name: str


class ToolCallArgumentsDelta(_Event):
    """A fragment of the call's arguments as JSON text.

    Concatenating every fragment of one call gives a JSON object equal to the arguments
    of its ``tool_call_complete`` (for a call that parsed).
    """

    type: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"
    index: int
    id: str
    delta: str


class ToolCallComplete(_Event):
    """The call's closing delimiter was parsed: the moment the tool is dispatched.

    ``error`` is set when the call could not be parsed (invalid JSON, truncated at the end
    of the stream); ``raw`` always holds the exact text the model produced for the call.
    """

    type: Literal["tool_call_complete"] = "tool_call_complete"
    index: int
    id: str
    name: str
    arguments: dict[str, Any]
    raw: str
    error: str | None = None


ParseEvent = Annotated[
    ReasoningDelta
    | ReasoningComplete
    | TextDelta
    | TextComplete
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallComplete,
    Field(discriminator="type"),
]


class ToolResultEvent(_Event):
    """A tool finished (successfully or not).

    Emitted as each tool finishes, so results of concurrent calls may arrive out of call
    order; the transcript still records them in call order. ``content`` is the tool's full
    output, before any truncation for the model's context.
    """

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool
    duration_s: float
    result: ToolResultBlock
    traceback: str | None = None
    """When the tool crashed (raised anything but a ``ToolError``): the exception's formatted
    traceback, for the developer. The model never sees it: ``content`` and ``result`` hold
    only the exception's type and message."""


class TurnUsage(BaseModel):
    """What one request to the engine cost."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    output_tokens: int = 0
    time_to_first_token_s: float | None = None


class TurnComplete(_Event):
    """The model finished one turn; its tools (if any) are running or done."""

    type: Literal["turn_complete"] = "turn_complete"
    turn: int
    finish_reason: str
    tool_calls: int
    usage: TurnUsage
    prompt_rebuilt: str | None = None
    """Why this turn's prompt did not extend the previous prompt and output (the replay
    policy dropped reasoning, context compaction, an engine without a tokenizer...), or
    ``None`` when it did: then the prefix cache can cover the whole history."""
    duration_s: float = 0.0
    """Seconds from the turn's start (building its prompt) to the model's last token; the
    turn's tools may still be running."""


class ContextCompacted(_Event):
    """The next prompt would not fit the context window, so old reasoning and then old tool
    outputs were removed from it (the transcript keeps them)."""

    type: Literal["context_compacted"] = "context_compacted"
    turn: int
    reasoning_blocks: int
    tool_outputs: int
    tokens_before: int
    tokens_after: int


class RunComplete(_Event):
    """The run ended with a turn that called no tools, or paused for approvals."""

    type: Literal["run_complete"] = "run_complete"
    turns: int
    output_text: str
    transcript: Transcript
    output: Any = None
    """The validated final answer, as the agent's ``output_type`` (``output_text`` when it
    has none; ``None`` when the run paused)."""
    paused: bool = False
    """The run stopped at a turn with calls held for a person's approval (``output_text`` is
    empty): the stream's ``result`` has ``pending_approvals`` and the ``state`` to resume
    (see :mod:`agentkit.approvals`)."""


AgentEvent = Annotated[
    ReasoningDelta
    | ReasoningComplete
    | TextDelta
    | TextComplete
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallComplete
    | ToolResultEvent
    | TurnComplete
    | ContextCompacted
    | RunComplete,
    Field(discriminator="type"),
]
