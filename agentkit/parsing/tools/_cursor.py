"""Incremental parsing of a tool-call section, written as a grammar that reads top to bottom.

:class:`SectionCursor` runs a section's grammar as a generator over a buffer: a primitive that
needs more text yields, and the next ``feed`` resumes it. Each delta then costs time
proportional to its length (only a possible partial tag, or a short name still being read, is
ever held), and the grammar says what the format is rather than which state a stream is in.
A held name may turn out, feeds later, to be malformed, and the grammar's recovery may then
end the section inside it: the section hands the rest of the held text back
(``SectionStep.unread``) and the driver parses it again, as one feed would have.

Used by the tagged-value formats (DSML, MiniMax-M2, GLM, Qwen3-Coder), whose values
:meth:`SectionCursor.read_value` streams through :class:`._xml_values.ArgumentsWriter`.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    SectionEvent,
    SectionStep,
    ToolSection,
)
from agentkit.parsing._markers import find_first, partial_suffix_len
from agentkit.parsing.tools._xml_values import ArgumentsWriter

__all__ = ["Malformed", "Parse", "SectionCursor", "Truncated"]

T = TypeVar("T")
Parse = Generator[None, None, T]
"""A step of a section's grammar: yields while it waits for more text, returns its result."""

_SPACE = re.compile(r"\S")


class Truncated(Exception):
    """The output ended before the grammar step could complete. Everything is consumed."""


class Malformed(Exception):
    """The text breaks the format; the message tells the model what was expected."""


class SectionCursor(ToolSection):
    """A :class:`ToolSection` whose grammar is the generator :meth:`_parse`.

    The generator reads ``self._buf`` from ``self._pos`` through the primitives below and emits
    events with :meth:`emit` and :meth:`end_call`; it returns when the section is over. Bytes
    consumed since the last ``CallEnd`` are its raw text (or the section's ``tail_raw``).
    """

    def __init__(self) -> None:
        self._buf = ""
        self._pos = 0
        self._mark = 0
        """Start of the text in ``_buf`` not yet recorded in ``_raw``."""
        self._raw: list[str] = []
        self._events: list[SectionEvent] = []
        self._eof = False
        self._done = False
        self._grammar = self._parse()

    @abstractmethod
    def _parse(self) -> Parse[None]:
        """The section's grammar, from just after its start marker to its end."""

    # ToolSection ---------------------------------------------------------------------------

    def feed(self, text: str) -> SectionStep:
        if self._done:
            return SectionStep(done=True)
        self._raw.append(self._buf[self._mark : self._pos])
        self._buf = self._buf[self._pos :] + text
        self._pos = self._mark = 0
        self._resume()
        return self._step(len(text))

    def finish(self) -> SectionStep:
        if self._done:
            return SectionStep(done=True)
        self._eof = True
        self._resume()
        self._pos = len(self._buf)  # nothing can be handed back after the output ended
        return self._step(0)

    def _resume(self) -> None:
        try:
            next(self._grammar)
        except StopIteration:
            self._done = True
        if self._eof and not self._done:  # pragma: no cover - a grammar bug
            raise RuntimeError("section grammar waited for text after the output ended")

    def _step(self, fed: int) -> SectionStep:
        events, self._events = self._events, []
        if not self._done:
            return SectionStep(events, consumed=fed)
        left = len(self._buf) - self._pos
        tail_raw = self._take_raw()
        if left > fed:  # the section ended inside text held from earlier feeds
            unread = self._buf[self._pos : len(self._buf) - fed]
            return SectionStep(events, done=True, tail_raw=tail_raw, unread=unread)
        return SectionStep(events, consumed=fed - left, done=True, tail_raw=tail_raw)

    # events --------------------------------------------------------------------------------

    def emit(self, event: SectionEvent) -> None:
        self._events.append(event)

    def emit_arguments(self, fragment: str) -> None:
        if fragment:
            self._events.append(CallArguments(fragment))

    def end_call(
        self,
        arguments: dict[str, Any],
        error: str | None = None,
        name: str | None = None,
        *,
        leave: str = "",
    ) -> None:
        """End the call with the bytes consumed since the last one, but for ``leave``: the
        literal just consumed that opens the next call, which is that call's raw."""
        end = self._pos - len(leave)
        self._events.append(CallEnd(arguments, self._take_raw(end), error, name))

    def _take_raw(self, end: int | None = None) -> str:
        end = self._pos if end is None else end
        self._raw.append(self._buf[self._mark : end])
        self._mark = end
        raw = "".join(self._raw)
        self._raw = []
        return raw

    # grammar primitives --------------------------------------------------------------------

    def _truncated(self) -> Truncated:
        self._pos = len(self._buf)
        return Truncated()

    def skip_space(self) -> Parse[None]:
        """Consume whitespace up to the next other character."""
        while True:
            found = _SPACE.search(self._buf, self._pos)
            if found is not None:
                self._pos = found.start()
                return
            self._pos = len(self._buf)
            if self._eof:
                raise self._truncated()
            yield

    def expect(self, literals: Sequence[str]) -> Parse[str | None]:
        """Consume the literal the text continues with, or return ``None`` (consuming nothing)
        as soon as the text can be none of them."""
        while True:
            buf, pos = self._buf, self._pos
            for literal in literals:
                if buf.startswith(literal, pos):
                    self._pos = pos + len(literal)
                    return literal
            rest = len(buf) - pos
            if not any(rest < len(lit) and lit.startswith(buf[pos:]) for lit in literals):
                return None
            if self._eof:
                raise self._truncated()
            yield

    def found_instead(self, literals: Sequence[str]) -> str:
        """After :meth:`expect` returned ``None``: the text that ruled every literal out."""
        buf, pos = self._buf, self._pos
        size = 1
        while pos + size < len(buf) and any(
            lit.startswith(buf[pos : pos + size]) for lit in literals
        ):
            size += 1
        return buf[pos : pos + size]

    def read(
        self, literals: Sequence[str], *, limit: int, what: str, keep_end: bool = False
    ) -> Parse[tuple[str, str]]:
        """Read a short text (a name, a tag's attributes) up to the first of ``literals``.

        Returns the text and the literal, which is consumed unless ``keep_end``. Nothing is
        consumed until the literal is found, so a text over ``limit`` characters is rejected
        from its start, whatever the split.
        """
        scanned = 0
        longest = max(len(lit) for lit in literals)
        while True:
            buf, pos = self._buf, self._pos
            found = find_first(buf, literals, pos + scanned)
            if found is not None and found[0] - pos <= limit:
                at, literal = found
                self._pos = at if keep_end else at + len(literal)
                return buf[pos:at], literal
            if found is not None or len(buf) - pos > limit + longest:
                raise Malformed(f"{what} is longer than {limit} characters")
            if self._eof:
                raise self._truncated()
            scanned = max(0, len(buf) - pos - longest + 1)
            yield

    def pass_through(
        self, literals: Sequence[str], sink: Callable[[str], None] | None
    ) -> Parse[str]:
        """Hand the text before the first of ``literals`` to ``sink`` as it arrives, holding
        back only a possible partial literal; consume that literal and return it."""
        while True:
            buf, pos = self._buf, self._pos
            found = find_first(buf, literals, pos)
            if found is not None:
                at, literal = found
                if sink is not None and at > pos:
                    sink(buf[pos:at])
                self._pos = at + len(literal)
                return literal
            if self._eof:
                raise self._truncated()
            end = len(buf) - _held_back(buf, literals, pos)
            if sink is not None and end > pos:
                sink(buf[pos:end])
            self._pos = end
            yield

    def read_value(
        self,
        writer: ArgumentsWriter,
        key: str,
        types: frozenset[str],
        ends: Sequence[str],
        trim: Callable[[str], str] | None = None,
    ) -> Parse[str]:
        """Argument ``key``'s value, up to the first of ``ends`` (consumed and returned),
        streamed through ``writer`` as it is read; ``trim`` rewrites each piece first."""
        self.emit_arguments(writer.start(key, types))
        end = yield from self.pass_through(
            ends, lambda piece: self.emit_arguments(writer.add(trim(piece) if trim else piece))
        )
        self.emit_arguments(writer.end())
        return end


def _held_back(buf: str, literals: Sequence[str], pos: int) -> int:
    """:func:`partial_suffix_len`, answering the common case (no literal's first character near
    the end: most of a value's text) without trying every suffix."""
    end = len(buf)
    for literal in literals:
        if buf.find(literal[0], max(pos, end - len(literal) + 1)) != -1:
            return partial_suffix_len(buf, literals, pos)
    return 0
