"""The driver that composes a reasoning syntax and a tool syntax into one stream parser.

:class:`MarkerStreamParser` owns the modes (text, reasoning, tool section) and decides which
block owns each byte; formats only describe their markers (:class:`ReasoningSyntax`) and parse
the inside of a tool section (:class:`ToolSection`). Keeping mode switching here, once, is what
lets a reasoning format and a tool format compose without fighting over the same bytes.

Rules worth knowing (they are the ones a transcript needs to replay a turn exactly):

* Text that cannot begin a marker is released at once; only the longest suffix that could be a
  partial marker is held back, so the result is the same for every split of the output.
* Whitespace that opens a text segment (after a marker or at the start) is *formatting*: it
  goes into the ``raw`` of the block that follows (the text block, or the next reasoning block
  or tool call, or the last block at the end), never into ``text``. Likewise the whitespace
  right after a reasoning start marker (``<think>\\n``) is raw, not reasoning text. Trailing
  whitespace is text.
* A tool-call section that opens inside reasoning either closes the reasoning block there
  (``calls_in_reasoning="end_reasoning"``, and the parser continues in text mode after the
  section) or is parsed as an error call and reasoning resumes after it (``"error"``).
* With ``ReasoningSyntax.starts_inside`` (DeepSeek-R1: the prompt opened ``<think>``), the
  output starts in reasoning; a start marker the model writes anyway is part of the block's
  raw; if the end marker never comes, the whole output is reasoning.
* A call's ``raw`` starts with the whitespace before its section and the section's start
  marker (for the section's first call). A section's ``tail_raw`` (an end marker after its
  last call, as in DeepSeek's ``<｜tool▁calls▁end｜>``) may arrive in a later delta than the
  call's ``ToolCallComplete``; it is added to that call's *block* only, so the events never
  depend on the split and the blocks' raw still adds up to the output. Whitespace that ends
  the output is likewise added to the last block at :meth:`~MarkerStreamParser.finish`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal, get_args

from agentkit.errors import ConfigurationError
from agentkit.events import (
    ParseEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
)
from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    CallsInReasoning,
    CallStart,
    JSONSchema,
    ReasoningSyntax,
    SectionStep,
    ToolSection,
    ToolSyntax,
)
from agentkit.parsing._markers import partial_suffix_len
from agentkit.parsing._turn import TurnParser

__all__ = ["MarkerStreamParser"]

_Mode = Literal["text", "reasoning", "tool"]


class _OpenBlock:
    """A text or reasoning block still receiving text."""

    __slots__ = ("has_text", "index", "kind", "raw", "text")

    def __init__(self, kind: Literal["text", "reasoning"], index: int, raw: list[str]) -> None:
        self.kind = kind
        self.index = index
        self.raw = raw
        self.text: list[str] = []
        self.has_text = False


class _OpenCall:
    __slots__ = ("id", "index", "name")

    def __init__(self, call_id: str, name: str, index: int) -> None:
        self.id = call_id
        self.name = name
        self.index = index


class MarkerStreamParser(TurnParser):
    """A :class:`~agentkit.parsing.StreamParser` for formats made of literal markers.

    ``tool_schemas`` maps tool names to JSON schemas, for tool formats whose argument values
    are typed by the schema. ``id_factory`` makes ids for calls whose format carries none.
    """

    def __init__(
        self,
        reasoning: ReasoningSyntax | None,
        tools: ToolSyntax | None,
        *,
        tool_schemas: Mapping[str, JSONSchema] = MappingProxyType({}),
        calls_in_reasoning: CallsInReasoning = "end_reasoning",
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        if calls_in_reasoning not in get_args(CallsInReasoning):
            raise ConfigurationError(
                f"calls_in_reasoning must be one of {get_args(CallsInReasoning)}, "
                f"not {calls_in_reasoning!r}"
            )
        super().__init__(id_factory)
        self._reasoning = reasoning
        self._tools = tools
        self._schemas = tool_schemas
        self._calls_in_reasoning = calls_in_reasoning
        tool_markers = tools.start_markers if tools is not None else ()
        self._tool_markers = frozenset(tool_markers)
        self._text_markers = ((reasoning.start,) if reasoning else ()) + tool_markers
        self._reasoning_markers = ((reasoning.end,) if reasoning else ()) + tool_markers
        if any(not marker for marker in (*self._text_markers, *self._reasoning_markers)):
            raise ConfigurationError("parser markers must be non-empty strings")

        self._leading = tools.leading_markers if tools is not None else ()
        """Markers that open a section only at the start of the output; cleared once any
        non-whitespace has been seen."""
        inside = reasoning is not None and reasoning.starts_inside
        self._mode: _Mode = "reasoning" if inside else "text"
        self._initial_inside = inside
        """Still at the start of a ``starts_inside`` output, where a start marker is raw."""
        self._open: _OpenBlock | None = None

        self._section: ToolSection | None = None
        self._section_prefix: str | None = None
        """Pending whitespace + start marker, owned by the section's first call."""
        self._section_in_reasoning = False
        self._section_last: int | None = None
        self._call: _OpenCall | None = None

    def _finish(self, out: list[ParseEvent]) -> None:
        if self._section is not None:
            step = self._section.finish()
            if not self._reject(step, out):
                self._apply(step, out, done=True)
            self._end_section()
        if self._held:  # a partial marker that never completed is plain content
            self._content(self._held, out)
            self._held = ""
        self._close_block(out)

    # -- scanning ------------------------------------------------------------------------

    def _run(self, buf: str, out: list[ParseEvent]) -> None:
        """Process ``buf`` (held text + the new delta) to its end, across mode changes."""
        n = len(buf)
        pos = 0
        found: dict[str, int] = {}  # marker -> next position in buf (-1: none), for O(n)
        while pos < n:
            if self._mode == "tool":
                pos, unread = self._feed_section(buf, pos, out)
                if unread:  # the section handed back text it held: parse it again
                    buf, pos, n = unread + buf[pos:], 0, len(unread) + n - pos
                    found.clear()
                continue
            if self._leading and self._mode == "text":
                pos, hold = self._scan_leading(buf, pos, out)
                if hold:
                    self._held = buf[pos:]
                    return
                continue
            if self._initial_inside:
                pos, hold = self._scan_initial(buf, pos, out)
                if hold:
                    self._held = buf[pos:]
                    return
                continue
            markers = self._text_markers if self._mode == "text" else self._reasoning_markers
            hit = self._find(buf, pos, markers, found)
            if hit is None or self._may_extend(buf, hit, markers):
                stop = hit[0] if hit is not None else n - partial_suffix_len(buf, markers, pos)
                self._content(buf[pos:stop], out)
                self._held = buf[stop:]
                return
            at, marker = hit
            self._content(buf[pos:at], out)
            pos = at + len(marker)
            self._on_marker(marker, out)

    @staticmethod
    def _find(
        buf: str, pos: int, markers: Sequence[str], found: dict[str, int]
    ) -> tuple[int, str] | None:
        best, best_marker = -1, ""
        for marker in markers:
            at = found.get(marker)
            if at is None or 0 <= at < pos:
                at = found[marker] = buf.find(marker, pos)
            if at != -1 and (
                best == -1 or at < best or (at == best and len(marker) > len(best_marker))
            ):
                best, best_marker = at, marker
        return None if best == -1 else (best, best_marker)

    @staticmethod
    def _may_extend(buf: str, hit: tuple[int, str], markers: Sequence[str]) -> bool:
        """A marker found at the very end may still grow into a longer marker it prefixes."""
        at, marker = hit
        rest = len(buf) - at
        return any(
            len(other) > rest and other.startswith(buf[at:])
            for other in markers
            if other != marker and other.startswith(marker)
        )

    def _scan_initial(self, buf: str, pos: int, out: list[ParseEvent]) -> tuple[int, bool]:
        """At the start of a ``starts_inside`` output: consume a redundant start marker."""
        assert self._reasoning is not None
        start = self._reasoning.start
        n = len(buf)
        j = pos
        while j < n and buf[j].isspace():
            j += 1
        self._content(buf[pos:j], out)  # whitespace only: formatting
        if j == n:
            return n, False
        if buf.startswith(start, j):
            self._initial_inside = False
            self._open_block("reasoning", start)
            return j + len(start), False
        if n - j < len(start) and start.startswith(buf[j:]):
            return j, True
        self._initial_inside = False
        return j, False

    def _scan_leading(self, buf: str, pos: int, out: list[ParseEvent]) -> tuple[int, bool]:
        """At the start of the output: open a section on a leading marker, if one is there."""
        n = len(buf)
        j = pos
        while j < n and buf[j].isspace():
            j += 1
        self._content(buf[pos:j], out)  # whitespace only: formatting
        if j == n:
            return n, False
        for marker in self._leading:
            if buf.startswith(marker, j):
                self._leading = ()
                self._start_section(marker, in_reasoning=False)
                return j + len(marker), False
        if any(n - j < len(m) and m.startswith(buf[j:]) for m in self._leading):
            return j, True
        self._leading = ()
        return j, False

    def _on_marker(self, marker: str, out: list[ParseEvent]) -> None:
        if marker in self._tool_markers:
            in_reasoning = self._mode == "reasoning"
            self._close_block(out)
            self._start_section(marker, in_reasoning)
        elif self._mode == "text":  # reasoning start
            self._close_block(out)
            self._open_block("reasoning", marker)
            self._mode = "reasoning"
        else:  # reasoning end
            block = self._open or self._open_block("reasoning", "")
            block.raw.append(marker)
            self._close_block(out)
            self._mode = "text"

    # -- text and reasoning blocks -------------------------------------------------------

    def _content(self, piece: str, out: list[ParseEvent]) -> None:
        if not piece:
            return
        block = self._open
        if block is None or not block.has_text:
            stripped = piece.lstrip()
            if len(stripped) < len(piece):
                lead = piece[: len(piece) - len(stripped)]
                (block.raw if block is not None else self._pending).append(lead)
            if not stripped:
                return
            if block is None:
                block = self._open_block("text" if self._mode == "text" else "reasoning", "")
            block.has_text = True
            piece = stripped
        block.raw.append(piece)
        block.text.append(piece)
        if block.kind == "text":
            out.append(TextDelta(index=block.index, text=piece))
        else:
            out.append(ReasoningDelta(index=block.index, text=piece))

    def _open_block(self, kind: Literal["text", "reasoning"], marker: str) -> _OpenBlock:
        raw = self._pending[:]
        self._pending.clear()
        if marker:
            raw.append(marker)
        self._open = _OpenBlock(kind, len(self._blocks), raw)
        return self._open

    def _close_block(self, out: list[ParseEvent]) -> None:
        block = self._open
        if block is None:
            return
        self._open = None
        self._add_content(block.kind, block.index, "".join(block.text), "".join(block.raw), out)

    # -- tool sections -------------------------------------------------------------------

    def _start_section(self, marker: str, in_reasoning: bool) -> None:
        assert self._tools is not None
        self._section = self._tools.new_section(marker, self._schemas)
        self._section_prefix = "".join(self._pending) + marker
        self._pending.clear()
        self._section_in_reasoning = in_reasoning
        self._section_last = None
        self._mode = "tool"

    def _feed_section(self, buf: str, pos: int, out: list[ParseEvent]) -> tuple[int, str]:
        """Feed ``buf[pos:]`` to the open section; return where parsing goes on in ``buf``
        and the held text the section handed back, to parse before it."""
        assert self._section is not None
        text = buf[pos:] if pos else buf
        step = self._section.feed(text)
        if not step.done:
            if step.consumed != len(text):
                raise RuntimeError(
                    f"{type(self._section).__name__} consumed {step.consumed} of "
                    f"{len(text)} characters without ending its section"
                )
            self._apply(step, out, done=False)
            return len(buf), ""
        if not self._reject(step, out):
            self._apply(step, out, done=True)
        self._end_section()
        return pos + step.consumed, step.unread

    def _reject(self, step: SectionStep, out: list[ParseEvent]) -> bool:
        """A leading-marker section that found no tool call: its bytes become text."""
        assert self._section is not None
        if not self._section.rejected:
            return False
        if self._call is not None:
            raise RuntimeError("a tool section rejected itself after starting a call")
        raws = [e.raw for e in step.events if isinstance(e, CallEnd)]
        text = (self._section_prefix or "") + "".join(raws) + step.tail_raw
        self._section_prefix = None
        self._mode = "text"
        self._content(text, out)
        return True

    def _apply(self, step: SectionStep, out: list[ParseEvent], *, done: bool) -> None:
        for event in step.events:
            if isinstance(event, CallStart):
                if self._call is not None:
                    raise RuntimeError("a tool section started a call before ending the last")
                self._start_call(event.name, event.id, out)
            elif isinstance(event, CallArguments):
                call = self._call
                if call is None:
                    raise RuntimeError("a tool section sent arguments outside a call")
                out.append(ToolCallArgumentsDelta(index=call.index, id=call.id, delta=event.delta))
            else:
                self._end_call(event, out)
        if not done:
            return
        if self._call is not None:
            error = "the tool-call section ended before the call was complete"
            self._end_call(CallEnd({}, "", error), out)
        # The section's tail (its end marker) arrives after the last call completed, perhaps
        # in a later delta: it joins that block's raw, never the (already sent) event's, so
        # events do not depend on how the output was split.
        if not step.tail_raw:
            return
        if self._section_last is not None:
            last = self._blocks[self._section_last]
            self._blocks[self._section_last] = last.model_copy(
                update={"raw": (last.raw or "") + step.tail_raw}
            )
        elif self._section_prefix is not None:
            self._section_prefix += step.tail_raw

    def _start_call(self, name: str, call_id: str | None, out: list[ParseEvent]) -> _OpenCall:
        call = _OpenCall(call_id or self._id_factory(), name, len(self._blocks))
        self._call = call
        out.append(ToolCallStarted(index=call.index, id=call.id, name=call.name))
        return call

    def _end_call(self, end: CallEnd, out: list[ParseEvent]) -> None:
        call = self._call or self._start_call(end.name or "", None, out)
        self._call = None
        raw = end.raw
        if self._section_prefix is not None:
            raw = self._section_prefix + raw
            self._section_prefix = None
        error = end.error
        if self._section_in_reasoning and self._calls_in_reasoning == "error":
            assert self._reasoning is not None
            note = (
                "this tool call was written inside the reasoning block: close the reasoning "
                f"with {self._reasoning.end} before calling a tool"
            )
            error = note if error is None else f"{note}; the call was also malformed: {error}"
        self._section_last = len(self._blocks)
        self._add_call(call.index, call.id, call.name, end.arguments, raw, error, out)

    def _end_section(self) -> None:
        if self._section_prefix is not None:  # the section produced no call at all
            self._pending.append(self._section_prefix)
        resume = self._section_in_reasoning and self._calls_in_reasoning == "error"
        self._mode = "reasoning" if resume else "text"
        self._section = None
        self._section_prefix = None
        self._section_last = None
