"""The typed transcript: messages of ordered content blocks.

An assistant message keeps its blocks in generation order, so a turn that reasoned, called a
tool, reasoned again and called another tool stays four blocks in that order, and is replayed
that way. Every block the model produced remembers ``raw``, the exact text it was parsed from
(markers and the whitespace around them included): joining the ``raw`` of a message's blocks
gives back the model's output byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ContentBlock",
    "Message",
    "ReasoningBlock",
    "Role",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "Transcript",
]

Role = Literal["system", "user", "assistant", "tool"]


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReasoningBlock(_Block):
    """The model's reasoning ("thinking") between its delimiters."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    raw: str | None = None
    """The exact model output this block was parsed from, delimiters included."""
    signature: str | None = None
    """Opaque signature issued with the block by a server that signs reasoning."""


class TextBlock(_Block):
    """Plain text: the answer, or a user's or system's words."""

    type: Literal["text"] = "text"
    text: str
    raw: str | None = None
    """The exact model output, including leading whitespace that is formatting, not text."""


class ToolCallBlock(_Block):
    """One call of a tool, as the model wrote it."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The parsed arguments (empty when the call could not be parsed; see ``error``)."""
    raw: str | None = None
    """The exact model output of the call, delimiters included; kept even when malformed."""
    error: str | None = None
    """Why the call could not be parsed, or ``None`` for a well-formed call."""


class ToolResultBlock(_Block):
    """The outcome of one tool call, as the model will see it."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    original_content: str | None = None
    """The tool's full output when ``content`` was truncated for the model's context."""


ContentBlock = Annotated[
    ReasoningBlock | TextBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]


class Message(BaseModel):
    """One message: a role and its ordered content blocks."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    token_ids: list[int] | None = None
    """For assistant messages generated here: the exact token ids the model produced."""

    @property
    def text(self) -> str:
        """The message's text blocks joined, reasoning and tool traffic left out."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    @property
    def raw(self) -> str | None:
        """The model's exact output for this message, or ``None`` if any block lacks it."""
        parts: list[str] = []
        for block in self.content:
            raw = getattr(block, "raw", None)
            if raw is None:
                return None
            parts.append(raw)
        return "".join(parts)


class Transcript(BaseModel):
    """A conversation: an ordered list of messages. JSON round trips are lossless."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(default_factory=list)

    @classmethod
    def from_prompt(cls, prompt: str, *, system: str | None = None) -> Transcript:
        transcript = cls()
        if system is not None:
            transcript.add("system", system)
        transcript.add("user", prompt)
        return transcript

    def add(self, role: Role, content: str | Iterable[ContentBlock]) -> Message:
        """Append a message; a string becomes a single text block."""
        blocks: list[ContentBlock] = (
            [TextBlock(text=content)] if isinstance(content, str) else list(content)
        )
        message = Message(role=role, content=blocks)
        self.messages.append(message)
        return message

    def append(self, message: Message) -> None:
        self.messages.append(message)

    def __iter__(self) -> Iterator[Message]:  # type: ignore[override]
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def last_assistant(self) -> Message | None:
        for message in reversed(self.messages):
            if message.role == "assistant":
                return message
        return None
