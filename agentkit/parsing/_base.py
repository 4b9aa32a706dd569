"""The contracts every output format implements.

A model's raw output is a stream of text deltas. A :class:`StreamParser` turns it into typed
parse events (:mod:`agentkit.events`) and, at the end, into the assistant message's ordered
content blocks. Most formats are a composition of two small pieces, driven by
:class:`~agentkit.parsing.MarkerStreamParser`:

* a :class:`ReasoningSyntax`: the start and end markers of a reasoning block;
* a :class:`ToolSyntax`: the markers that open a tool-call *section* in text, and a factory
  for :class:`ToolSection` objects that parse one section incrementally.

Formats that do not fit (gpt-oss Harmony channels, for one) implement :class:`StreamParser`
directly.

Byte ownership: every byte of the output belongs to exactly one block, and
``"".join(block.raw for block in parser.blocks)`` equals the output. Whitespace-only text that
separates two structures (``</think>\\n\\n<tool_call>``) is formatting: it is owned, as raw, by
the block that follows it (or by the last block, at the end of the output) and is not text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentkit.events import ParseEvent
from agentkit.transcript import ContentBlock, ToolCallBlock

__all__ = [
    "CallArguments",
    "CallEnd",
    "CallStart",
    "CallsInReasoning",
    "ReasoningSyntax",
    "SectionEvent",
    "SectionStep",
    "StreamParser",
    "ToolSection",
    "ToolSyntax",
]

JSONSchema = Mapping[str, Any]
CallsInReasoning = Literal["end_reasoning", "error"]
"""What to do when a tool-call section opens before the reasoning block is closed:
``end_reasoning`` closes the reasoning block there and parses the call as usual; ``error``
parses the call but marks it with an error the model sees (its raw text kept)."""


class StreamParser(Protocol):
    """Incremental parser of one model turn.

    ``feed`` may be called with any split of the output (one byte at a time, a token at a time,
    the whole output at once): the events and blocks are the same for every split. Text that
    cannot be the beginning of a marker is released at once; only a possible partial marker is
    held back. Each call costs time proportional to its delta.
    """

    def feed(self, delta: str) -> list[ParseEvent]:
        """Parse the next piece of output; return the events it completes, in order."""
        ...

    def finish(self) -> list[ParseEvent]:
        """Signal the end of the output: flush held text, close open blocks, recover or
        reject an unterminated tool call (as an error call that keeps its raw text)."""
        ...

    @property
    def blocks(self) -> list[ContentBlock]:
        """The blocks completed so far; after :meth:`finish`, all of them."""
        ...


@dataclass(frozen=True, slots=True)
class ReasoningSyntax:
    """A reasoning block delimited by two literal markers (``<think>`` ... ``</think>``)."""

    name: str
    start: str
    end: str
    starts_inside: bool = False
    """The prompt already opened the block (DeepSeek-R1, thinking-mode DeepSeek-V4): the
    output begins inside reasoning, and a missing end marker means it never left it."""

    def render(self, text: str) -> str:
        """Canonical text of one reasoning block."""
        return f"{self.start}{text}{self.end}"


@dataclass(frozen=True, slots=True)
class CallStart:
    """A section began a call. ``id`` is the model's own id where the format has one
    (Kimi K2's ``functions.NAME:IDX``); otherwise the driver assigns one."""

    name: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class CallArguments:
    """A fragment of the current call's arguments, as JSON text."""

    delta: str


@dataclass(frozen=True, slots=True)
class CallEnd:
    """The current call is complete.

    ``raw`` is every byte the section consumed since the previous ``CallEnd`` (or since the
    section began), up to and including this call's closing delimiter. ``error`` is set when
    the call could not be parsed; ``arguments`` is then ``{}`` (or what could be recovered).
    A ``CallEnd`` without a preceding ``CallStart`` is a call whose name was never read.
    """

    arguments: dict[str, Any]
    raw: str
    error: str | None = None
    name: str | None = None


SectionEvent = CallStart | CallArguments | CallEnd


@dataclass(slots=True)
class SectionStep:
    """What :meth:`ToolSection.feed` did with the text it was given.

    ``consumed`` is how many characters of that text the section took (all of it unless the
    section ended inside it). When ``done`` is true the section is over and the characters
    after ``consumed`` go back to the driver; ``tail_raw`` is what the section consumed after
    its last ``CallEnd`` (a section end marker, whitespace), owned by the last call.

    ``unread`` (with ``done``, and ``consumed == 0``) is text of *earlier* feeds that the
    section held without consuming and now hands back ahead of the new text: a section that
    reads a bounded name may only learn, a few feeds later, that it is malformed and that
    its section already ended inside the text it held. Parsing that text again keeps the
    result the same for every split of the output.
    """

    events: list[SectionEvent] = field(default_factory=list)
    consumed: int = 0
    done: bool = False
    tail_raw: str = ""
    unread: str = ""


class ToolSection(ABC):
    """Parses one tool-call section, from just after its start marker to its end.

    A section may hold one call (Hermes: one per ``<tool_call>``) or several (DeepSeek's
    ``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``). It must own every byte it consumes:
    a section that ends without completing a call reports a ``CallEnd`` with an error.

    A section opened by one of :attr:`ToolSyntax.leading_markers` may find that the output is
    not a tool call after all (a JSON answer, a Markdown list): it then ends with ``rejected``
    set and a single error ``CallEnd`` (no ``CallStart``), and the driver turns everything the
    section consumed back into text.
    """

    rejected: bool = False

    @abstractmethod
    def feed(self, text: str) -> SectionStep:
        """Consume the next text of the section."""

    @abstractmethod
    def finish(self) -> SectionStep:
        """The output ended inside the section: complete a call whose content is whole but
        whose closing marker is missing, or end it with an error that keeps the raw text."""


class ToolSyntax(ABC):
    """One tool-call format: where sections start, how to parse and render them."""

    name: str
    start_markers: tuple[str, ...]
    """Literal markers that open a section when they appear in text (or in reasoning)."""
    leading_markers: tuple[str, ...] = ()
    """Markers that open a section only at the very start of the output, after optional
    whitespace: formats whose calls are the whole output (Llama 3's ``{"name": ...}``,
    pythonic ``[f(x=1)]``)."""

    @abstractmethod
    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        """A parser for the section that ``start_marker`` just opened. ``schemas`` maps each
        tool name to its JSON schema, for formats whose values are typed by the schema."""

    @abstractmethod
    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        """Canonical text of consecutive calls (one section, or one section per call)."""
