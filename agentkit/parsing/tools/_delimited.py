"""Machinery shared by the formats that write a section of header + JSON-object calls.

DeepSeek-V3, DeepSeek-V3.1 and Kimi K2 are one shape: a section of calls between literal
markers, each call a *header* (the name, perhaps an id) and a JSON object. A format is a
:class:`CallGrammar` (its markers, and how to read a header) and a way to write one call;
:class:`DelimitedToolSyntax` puts the two together. :class:`DelimitedCallSection` parses the
shape for any grammar, in one pass, each character looked at a bounded number of times:

* header: the text up to the grammar's ``header_end`` (or a ``{``); then ``CallStart``;
* prelude: whitespace and an optional fence line (```` ```json ````);
* arguments: a JSON object, scanned incrementally and streamed as ``CallArguments``;
* trailer: whitespace and an optional closing fence, then the call end marker: ``CallEnd``.

Markers inside a JSON string are text; outside one, the first character that cannot continue the
object (a ``<`` starting a marker, say) ends the JSON, and the call becomes an error that
reaches to the next marker. A call whose JSON is complete but whose end marker is missing (the
next call began, the section or the output ended) is recovered.

Known limitation (shared with Hermes): an unterminated JSON string swallows the rest of the
section into the call, which is then reported as truncated with its raw text kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    CallStart,
    JSONSchema,
    SectionEvent,
    SectionStep,
    ToolSection,
    ToolSyntax,
)
from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing._markers import partial_suffix_len
from agentkit.parsing._values import loads
from agentkit.transcript import ToolCallBlock

__all__ = [
    "CallGrammar",
    "DelimitedCallSection",
    "DelimitedToolSyntax",
    "HeaderParser",
    "MalformedHeader",
    "dump_arguments",
]

HeaderParser = Callable[[str], tuple[str, str | None]]
"""Reads a call's header: ``(name, id or None)``, or raises :class:`MalformedHeader`."""

_BETWEEN, _HEADER, _PRELUDE, _ARGS, _TRAILER, _DONE = range(6)
_PRELUDE_OK = re.compile(r"\s*(?:```[\w-]*\s*)?")
_TRAILER_JUNK = re.compile(r"[^\s`]")
_PREVIEW = 40
_TRUNCATED = {
    _BETWEEN: "the tool-call section ended without any call",
    _HEADER: "the output ended before the call's name was complete",
    _PRELUDE: "the output ended before the call's arguments began",
    _ARGS: "the output ended inside the call's JSON arguments (truncated)",
}


class MalformedHeader(ValueError):
    """A call header from which no function name can be read; the message says why."""


class CallGrammar:
    """The literal markers of one section-of-calls format, and how to read its headers.

    ``header_end`` closes the header and is part of it (DeepSeek-V3.1's separator, Kimi's
    argument marker, the newline after DeepSeek-V3's name); a ``{`` or a backtick also ends it.
    ``parse_header`` turns the header text into ``(name, id or None)`` or raises
    :class:`MalformedHeader`. ``shape`` tells the model, in words, what a call should look like.
    The first of ``section_begins`` and of ``section_ends`` are the ones rendered.
    """

    def __init__(
        self,
        *,
        section_begins: tuple[str, ...],
        section_ends: tuple[str, ...],
        call_begin: str,
        call_end: str,
        header_end: str,
        parse_header: HeaderParser,
        shape: str,
    ) -> None:
        self.section_begins = section_begins
        self.section_ends = section_ends
        self.call_begin = call_begin
        self.call_end = call_end
        self.parse_header = parse_header
        self.shape = shape
        interrupts = (call_begin, call_end, *section_ends)
        self.phases: dict[int, tuple[re.Pattern[str], tuple[str, ...]]] = {
            _BETWEEN: _searcher((call_begin, *section_ends)),
            _HEADER: _searcher((header_end, "{", "`", *interrupts)),
            _PRELUDE: _searcher(("{", *interrupts)),
            _TRAILER: _searcher(interrupts),
        }


class DelimitedToolSyntax(ToolSyntax):
    """A format of one section of calls: its grammar, and how it writes one call.

    ``render_call`` gets each call and its index in the section; ``separator`` goes between
    calls (DeepSeek-V3's newline).
    """

    def __init__(
        self,
        name: str,
        grammar: CallGrammar,
        render_call: Callable[[ToolCallBlock, int], str],
        *,
        separator: str = "",
    ) -> None:
        self.name = name
        self.grammar = grammar
        self.start_markers = grammar.section_begins
        self._render_call = render_call
        self._separator = separator

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return DelimitedCallSection(self.grammar)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        body = self._separator.join(self._render_call(c, i) for i, c in enumerate(calls))
        return f"{self.grammar.section_begins[0]}{body}{self.grammar.section_ends[0]}"

    def __repr__(self) -> str:
        return f"DelimitedToolSyntax({self.name!r})"


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """Canonical JSON text of a call's arguments, as the chat templates write it."""
    return json.dumps(arguments, ensure_ascii=False)


def _searcher(tokens: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex finding the earliest token, and the tokens a held-back suffix may begin."""
    pattern = re.compile("|".join(re.escape(t) for t in tokens))
    return pattern, tuple(t for t in tokens if len(t) > 1)


def _held_len(buf: str, pos: int, markers: tuple[str, ...]) -> int:
    """How much of the end of ``buf[pos:]`` may begin a marker (cheap when none can)."""
    longest = max(len(m) for m in markers)
    window = max(pos, len(buf) - longest + 1)
    starts = [i for i in (buf.find(lead, window) for lead in {m[0] for m in markers}) if i != -1]
    return partial_suffix_len(buf, markers, min(starts)) if starts else 0


class DelimitedCallSection(ToolSection):
    """One section of header + JSON-object calls, parsed incrementally (see the module doc)."""

    def __init__(self, grammar: CallGrammar) -> None:
        self._g = grammar
        self._phase = _BETWEEN
        self._held = ""
        """Consumed text at the end of the last feed that may begin a marker."""
        self._raw: list[str] = []
        """Everything consumed since the last ``CallEnd``."""
        self._calls = 0
        self._reset_call()

    def _reset_call(self) -> None:
        self._header: list[str] = []
        self._prelude: list[str] = []
        self._args: list[str] = []
        self._name: str | None = None
        self._error: str | None = None
        self._junk = ""
        self._scanner = JsonObjectScanner(echo=True)

    def feed(self, text: str) -> SectionStep:
        step = SectionStep()
        if self._phase == _DONE:  # fed after its end: hand everything back
            step.done = True
            return step
        held = len(self._held)
        buf = self._held + text
        self._held = ""
        pos = 0
        while pos < len(buf) and not step.done:
            if self._phase == _ARGS:
                pos = self._scan_arguments(buf, pos, step.events)
            else:
                pos = self._scan_markers(buf, pos, step)
        step.consumed = pos - held if step.done else len(text)
        return step

    def finish(self) -> SectionStep:
        step = SectionStep(done=True)
        if self._phase == _DONE:
            return step
        if self._held:  # a marker cut short is plain text, and never junk
            self._raw.append(self._held)
            self._held = ""
        if self._phase == _BETWEEN and self._calls:
            step.tail_raw = "".join(self._raw)
            self._raw = []
        else:
            self._fail(_TRUNCATED.get(self._phase))
            self._close(step.events)
        self._phase = _DONE
        return step

    # -- phases ------------------------------------------------------------------------

    def _scan_markers(self, buf: str, pos: int, step: SectionStep) -> int:
        pattern, markers = self._g.phases[self._phase]
        match = pattern.search(buf, pos)
        if match is None:
            stop = len(buf) - _held_len(buf, pos, markers)
            self._absorb(buf[pos:stop])
            self._held = buf[stop:]
            return len(buf)
        self._absorb(buf[pos : match.start()])
        token = match.group()
        if self._phase == _BETWEEN:
            return self._between(token, match, step)
        if self._phase == _HEADER:
            return self._header_end(token, match, step.events)
        if self._phase == _PRELUDE:
            return self._prelude_end(token, match)
        return self._trailer_end(token, match, step)

    def _between(self, token: str, match: re.Match[str], step: SectionStep) -> int:
        self._raw.append(token)
        if token == self._g.call_begin:
            self._phase = _HEADER
            return match.end()
        if self._calls == 0:
            self._fail(_TRUNCATED[_BETWEEN])
            self._close(step.events)
        else:
            step.tail_raw = "".join(self._raw)
            self._raw = []
        self._phase = _DONE
        step.done = True
        return match.end()

    def _header_end(self, token: str, match: re.Match[str], events: list[SectionEvent]) -> int:
        if token in ("{", "`"):  # no end marker: the prelude or the JSON starts here
            self._start_call(events)
            return match.start()
        if token not in self._g.phases[_TRAILER][1]:  # the header's own end marker
            self._raw.append(token)
            self._start_call(events)
            return match.end()
        self._start_call(events)  # a marker cut the call short: the trailer scan takes it
        self._fail("the call has no arguments")
        self._phase = _TRAILER
        return match.start()

    def _prelude_end(self, token: str, match: re.Match[str]) -> int:
        prelude = "".join(self._prelude)
        preview = prelude.strip()[:_PREVIEW]
        if token != "{":
            self._fail(
                f"the arguments must be one JSON object, not {preview!r}"
                if preview
                else "the call has no arguments"
            )
        elif not _PRELUDE_OK.fullmatch(prelude):
            self._fail(f"unexpected text before the JSON arguments: {preview!r}")
        self._phase = _TRAILER if self._error else _ARGS
        return match.start()

    def _trailer_end(self, token: str, match: re.Match[str], step: SectionStep) -> int:
        if token == self._g.call_end:
            self._raw.append(token)
            self._close(step.events)
            self._phase = _BETWEEN
            return match.end()
        self._close(step.events)  # no end marker: recovered if the JSON is whole
        if token == self._g.call_begin:
            self._raw.append(token)
            self._phase = _HEADER
        else:
            step.tail_raw = token
            self._phase = _DONE
            step.done = True
        return match.end()

    def _scan_arguments(self, buf: str, pos: int, events: list[SectionEvent]) -> int:
        scan = self._scanner.feed(buf, pos)
        end = scan.end if scan.end >= 0 else scan.failed_at if scan.failed_at >= 0 else len(buf)
        if end > pos:
            piece = buf[pos:end]
            self._raw.append(piece)
            self._args.append(piece)
        if scan.text:  # the arguments' text, as strict JSON
            events.append(CallArguments(scan.text))
        if scan.end >= 0:
            self._phase = _TRAILER
        elif scan.failed_at >= 0:
            self._fail(f"the arguments are not valid JSON: {self._scanner.error}")
            self._phase = _TRAILER
        return end

    # -- bookkeeping -------------------------------------------------------------------

    def _absorb(self, text: str) -> None:
        if not text:
            return
        self._raw.append(text)
        if self._phase == _HEADER:
            self._header.append(text)
        elif self._phase == _PRELUDE:
            self._prelude.append(text)
        elif self._phase == _TRAILER and len(self._junk) < _PREVIEW:
            start = 0 if self._junk else _first_junk(text)
            if start >= 0:  # kept split-independent: the first _PREVIEW characters of it
                self._junk += text[start : start + _PREVIEW - len(self._junk)]

    def _start_call(self, events: list[SectionEvent]) -> None:
        try:
            name, call_id = self._g.parse_header("".join(self._header))
        except MalformedHeader as exc:
            self._fail(str(exc))
            self._phase = _TRAILER
            return
        self._name = name
        events.append(CallStart(name, call_id))
        self._phase = _PRELUDE

    def _fail(self, error: str | None) -> None:
        if self._error is None:
            self._error = error

    def _close(self, events: list[SectionEvent]) -> None:
        raw = "".join(self._raw)
        self._raw = []
        error = self._error
        arguments: dict[str, Any] = {}
        if error is None:
            error, arguments = _decode(self._junk, "".join(self._args))
        if error is not None:
            subject = f"tool call {self._name!r}" if self._name else "tool call"
            error = f"malformed {subject}: {error}. {self._g.shape}"
        events.append(CallEnd(arguments, raw, error, name=self._name))
        self._calls += 1
        self._reset_call()


def _first_junk(text: str) -> int:
    match = _TRAILER_JUNK.search(text)
    return match.start() if match else -1


def _decode(junk: str, text: str) -> tuple[str | None, dict[str, Any]]:
    if junk:
        return f"unexpected text after the JSON arguments: {junk!r}", {}
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        return f"the arguments are not valid JSON: {exc.msg} (column {exc.colno})", {}
    if not isinstance(value, dict):
        return "the arguments must be a JSON object", {}
    return None, value
