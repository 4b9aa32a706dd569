"""An incremental lexical scanner for one top-level JSON object.

A Hermes tool call is a JSON object between two tags. To dispatch the call the moment it is
complete, and to stream its ``arguments`` while the model is still writing them, the parser
must know, character by character, whether it is inside a string, behind a backslash, and how
deep in brackets it is. Re-parsing the text so far with :func:`json.loads` at every delta would
cost O(n²) over a turn; this scanner keeps that state instead, so each delta costs O(delta).

It validates only what it must to find the object's end and its top-level members (keys,
colons, commas, bracket pairing). The full grammar is checked once, by :func:`json.loads`, when
the object is complete.

Text of *watched* members is reported as it is scanned; with ``echo``, so is the text of the
whole object (a format whose arguments *are* the object, as DeepSeek's and Kimi's are). Raw
control characters inside strings (a literal newline, which models often write) are reported
escaped, so the reported text is strict JSON even when the model's text is only accepted by
``json.loads(strict=False)``.

:class:`JsonObjectStream` wraps an echoing scanner for formats whose call arguments are one
JSON object and nothing else (Mistral's ``[ARGS]{...}``, a Harmony message): it streams the
object as argument deltas and decodes it once, when it is complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from agentkit.parsing._values import loads

__all__ = ["JsonObjectScanner", "JsonObjectStream", "MemberText", "ScanStep"]

_STRING_SPECIAL = re.compile(r'["\\\x00-\x1f]')
_NESTED_SPECIAL = re.compile(r'[\[\]{}"<]')
_SCALAR_END = re.compile(r"[\s,}\]<]")

# Scanner states (outside strings; a string's own state is tracked by ``_in_string``).
_BEFORE = 0
_KEY_OR_END = 1
_KEY = 2
_COLON = 3
_VALUE_START = 4
_VALUE_STRING = 5
_VALUE_NESTED = 6
_VALUE_SCALAR = 7
_COMMA_OR_END = 8
_DONE = 9
_FAILED = 10

_CLOSERS = {"{": "}", "[": "]"}


@dataclass(frozen=True, slots=True)
class MemberText:
    """A piece of a watched member's value, as JSON text, in the order it was scanned."""

    key: str
    text: str
    complete: bool
    """This piece ends the value."""


@dataclass(slots=True)
class ScanStep:
    """What one :meth:`JsonObjectScanner.feed` found."""

    members: list[MemberText] = field(default_factory=list)
    end: int = -1
    """Index just past the object's closing brace, when it closed in this text."""
    failed_at: int = -1
    """Index of the character that cannot belong to the object, when one was found."""
    text: str = ""
    """With ``echo``: the text this feed scanned, as strict JSON."""


class JsonObjectScanner:
    """Scans one JSON object fed in pieces; reports its end, its watched members and, with
    ``echo``, its own text (:attr:`ScanStep.text`)."""

    def __init__(self, watch: Collection[str] = (), *, echo: bool = False) -> None:
        self._watch = frozenset(watch)
        self._echo = echo
        self._echoed: list[str] = []
        self._echo_from = 0
        """Start of the fed text not yet in ``_echoed``."""
        self._state = _BEFORE
        self._in_string = False
        self._escape = False
        self._stack: list[str] = []
        self._key_parts: list[str] = []
        self._member: str | None = None
        self._chunk: list[str] = []
        self.error: str | None = None
        """Why the text is not a JSON object, once a character proved it."""

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def feed(self, text: str, pos: int = 0) -> ScanStep:
        """Scan ``text[pos:]``, stopping just after the object's closing brace."""
        step = ScanStep()
        n = len(text)
        i = self._echo_from = pos
        while i < n and self._state < _DONE:
            if self._in_string:
                i = self._scan_string(text, i, step)
                continue
            state = self._state
            ch = text[i]
            if state == _VALUE_NESTED:
                i = self._scan_nested(text, i, step)
            elif state == _VALUE_SCALAR:
                match = _SCALAR_END.search(text, i)
                j = match.start() if match else n
                self._emit(text[i:j])
                if match:
                    self._end_member(step)
                i = j
            elif ch.isspace():
                i += 1
            elif state == _BEFORE:
                i = self._expect(ch, "{", _KEY_OR_END, i)
            elif ch == "}" and state in (_KEY_OR_END, _COMMA_OR_END):
                self._state = _DONE
                i = step.end = i + 1
            elif state == _KEY_OR_END:
                if ch == '"':
                    self._in_string = True
                    self._state = _KEY
                    i += 1
                else:
                    i = self._fail(ch, "a key in double quotes or '}'", i)
            elif state == _COLON:
                i = self._expect(ch, ":", _VALUE_START, i)
            elif state == _VALUE_START:
                i = self._start_value(ch, i)
            elif ch == ",":  # _COMMA_OR_END
                self._state = _KEY_OR_END
                i += 1
            else:
                i = self._fail(ch, "',' or '}'", i)
        if self._state == _FAILED:
            step.failed_at = i
        self._flush(step, complete=False)
        if self._echo:
            self._echoed.append(text[self._echo_from : i])
            step.text = "".join(self._echoed)
            self._echoed.clear()
        return step

    def _expect(self, ch: str, want: str, then: int, i: int) -> int:
        if ch != want:
            return self._fail(ch, repr(want), i)
        self._state = then
        return i + 1

    def _fail(self, ch: str, wanted: str, i: int) -> int:
        self._state = _FAILED
        self.error = f"expected {wanted} but found {ch!r}"
        return i

    def _start_value(self, ch: str, i: int) -> int:
        if ch in ",:}]<":
            return self._fail(ch, "a value", i)
        raw_key = "".join(self._key_parts)
        self._key_parts.clear()
        try:
            key = json.loads(f'"{raw_key}"')
        except json.JSONDecodeError:  # a bad escape: json.loads of the object reports it
            key = raw_key
        self._member = key if key in self._watch else None
        self._emit(ch)
        if ch == '"':
            self._in_string = True
            self._state = _VALUE_STRING
        elif ch in _CLOSERS:
            self._stack.append(_CLOSERS[ch])
            self._state = _VALUE_NESTED
        else:
            self._state = _VALUE_SCALAR
        return i + 1

    def _scan_string(self, text: str, i: int, step: ScanStep) -> int:
        if self._escape:
            self._escape = False
            self._emit(text[i])
            return i + 1
        match = _STRING_SPECIAL.search(text, i)
        if match is None:
            self._emit(text[i:])
            return len(text)
        j = match.start()
        self._emit(text[i:j])
        ch = text[j]
        if ch == "\\":
            self._escape = True
            self._emit(ch)
        elif ch == '"':
            self._in_string = False
            if self._state == _KEY:
                self._state = _COLON
            else:
                self._emit(ch)
                if self._state == _VALUE_STRING:
                    self._end_member(step)
        else:  # a raw control character: legal for json.loads(strict=False) only
            escaped = json.dumps(ch)[1:-1]
            self._emit(escaped)
            if self._echo:
                self._echoed += (text[self._echo_from : j], escaped)
                self._echo_from = j + 1
        return j + 1

    def _scan_nested(self, text: str, i: int, step: ScanStep) -> int:
        match = _NESTED_SPECIAL.search(text, i)
        if match is None:
            self._emit(text[i:])
            return len(text)
        j = match.start()
        self._emit(text[i:j])
        ch = text[j]
        if ch == "<":  # never valid outside a string: the JSON was abandoned
            return self._fail(ch, "JSON", j)
        if ch == '"':
            self._in_string = True
        elif ch in _CLOSERS:
            self._stack.append(_CLOSERS[ch])
        elif ch != self._stack.pop():
            return self._fail(ch, "a matching bracket", j)
        self._emit(ch)
        if not self._stack:
            self._end_member(step)
        return j + 1

    def _emit(self, piece: str) -> None:
        if self._state == _KEY:
            self._key_parts.append(piece)
        elif self._member is not None and piece:
            self._chunk.append(piece)

    def _end_member(self, step: ScanStep) -> None:
        self._flush(step, complete=True)
        self._member = None
        self._state = _COMMA_OR_END

    def _flush(self, step: ScanStep, *, complete: bool) -> None:
        if self._member is not None and (self._chunk or complete):
            step.members.append(MemberText(self._member, "".join(self._chunk), complete))
            self._chunk.clear()


class JsonObjectStream:
    """One JSON object, fed in pieces: where it ends, and its text as argument deltas.

    The deltas are the scanner's echo (raw control characters in strings escaped, so they join
    into strict JSON), without the whitespace before the object. Each feed costs O(delta).
    """

    __slots__ = ("_begun", "_parts", "_pending", "_scanner")

    def __init__(self, *, opened: bool = False) -> None:
        self._scanner = JsonObjectScanner(echo=True)
        self._parts: list[str] = []
        self._pending = ""
        self._begun = opened
        if opened:  # the caller consumed the opening brace: it is the first delta
            self._pending = self._scanner.feed("{").text
            self._parts.append("{")

    @property
    def done(self) -> bool:
        return self._scanner.done

    @property
    def error(self) -> str | None:
        """Why the text is not a JSON object, once a character proved it."""
        return self._scanner.error

    def feed(self, text: str, pos: int) -> tuple[str, int]:
        """Scan from ``pos``: the delta text, and where scanning stopped (just past the
        closing brace, at the first character that cannot belong, or at the end)."""
        start = pos
        if not self._begun:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            self._begun = pos < len(text)
        step = self._scanner.feed(text, pos)
        stop = step.end if step.end >= 0 else step.failed_at if step.failed_at >= 0 else len(text)
        self._parts.append(text[start:stop])
        delta = self._pending + step.text
        self._pending = ""
        return delta, stop

    def value(self) -> tuple[dict[str, Any], str | None]:
        """The complete object, or an error."""
        try:
            value = loads("".join(self._parts))
        except json.JSONDecodeError as exc:
            return {}, f"invalid JSON arguments: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        return value, None
