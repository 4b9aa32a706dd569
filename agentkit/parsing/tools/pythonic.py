"""Pythonic tool calls (Llama 3.2/4, ToolACE and others): ``[f(a=1, b="x"), g()]``.

The output is a Python list of calls with keyword arguments whose values are Python literals
(strings with escapes and any quoting, numbers, ``True``/``False``/``None``, lists, tuples,
dicts). There is no marker: ``[`` opens a section only at the start of the output
(:attr:`PythonicToolSyntax.leading_markers`).

Each call starts as soon as ``name(`` is read. Arguments stream as JSON: ``{"key": `` when a
keyword is read, a plain string value piece by piece as it is written (escapes decoded), other
values whole when they end. Each value is checked once, when it ends, with
:func:`ast.literal_eval` (never ``eval``), so the total cost is linear in the output.

Anything that is not this grammar (positional arguments, expressions, ``[citation needed]``)
ends the section at the first character that proves it, with an error call holding the bytes
read so far; the rest goes back to the driver. If that happens before any call started, or
the name is not one of the tools (when schemas are given), the section sets
:attr:`rejected`: a driver that knows the flag keeps the ``[`` and those bytes as text.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
import warnings
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
from agentkit.parsing.tools.llama3 import RawLedger
from agentkit.transcript import ToolCallBlock

__all__ = ["PYTHONIC", "PythonicToolSyntax"]

_NOT_NAME = re.compile(r"[^\w.]")
_NOT_KEY = re.compile(r"[^\w]")
_CODE_SPECIAL = re.compile(r"[\[\](){}'\",]")
_STRING_SPECIAL = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_SIMPLE_ESCAPES = dict(
    zip("\n\r\\'\"abfnrtv", ["", "", "\\", "'", '"', *"\a\b\f\n\r\t\v"], strict=True)
)
_HEX_LENGTHS = {"x": 4, "u": 6, "U": 10}
_OCTAL = "01234567"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_MAX_WORD = 256

# Section states.
_CALL = 0  # expecting a call name, "]" (the list ended) or whitespace
_NAME = 1
_PAREN = 2
_ARG = 3  # expecting a keyword, ")" or whitespace
_KEY = 4
_EQUALS = 5
_VALUE = 6
_AFTER_CALL = 7


class PythonicToolSyntax(ToolSyntax):
    """A Python list of calls: ``[name(key=literal, ...), ...]``."""

    name = "pythonic"
    start_markers: tuple[str, ...] = ()
    leading_markers: tuple[str, ...] = ("[",)
    """Markers that open a section only at the start of the output (after whitespace)."""

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        leading = start_marker in self.leading_markers
        return _PythonicSection(leading, schemas.__contains__ if leading and schemas else None)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        # repr() of JSON data (dict, list, str, int, float, bool, None) is a Python literal
        rendered = (
            f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in calls
        )
        return f"[{', '.join(rendered)}]"


PYTHONIC = PythonicToolSyntax()


class _Failure(Exception):
    """The text is not a pythonic call list; ``pos`` is the first character that proves it."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


class _PythonicSection(ToolSection):
    def __init__(self, leading: bool, accept: Callable[[str], bool] | None) -> None:
        self._leading = leading
        self._accept = accept
        self._state = _CALL
        self._ledger = RawLedger()
        self._word: list[str] = []
        self._name: str | None = None
        self._key = ""
        self._started = False
        self._arguments: dict[str, Any] = {}
        self._keys = 0
        self._error: str | None = None
        self._value = _Value()
        self._calls = 0
        self.rejected = False
        """Opened by a leading ``[`` and not a tool call after all (see the module doc)."""

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        self._ledger.begin()
        try:
            pos = self._scan(text, events)
        except _Failure as failure:
            return self._fail(events, text, failure.pos, str(failure))
        if pos >= 0:
            tail = self._ledger.cut(text, pos)
            return SectionStep(events, consumed=pos, done=True, tail_raw=tail)
        self._ledger.keep(text)
        return SectionStep(events, consumed=len(text))

    def finish(self) -> SectionStep:
        raw = self._ledger.rest()
        if self._state == _AFTER_CALL or (self._state == _CALL and self._calls):
            return SectionStep(done=True, tail_raw=raw)  # only "]" is missing
        self.rejected = self._leading and not self._calls and not self._started
        error = "tool call truncated: the output ended inside the call list"
        name = self._name if self._started else None
        return SectionStep([CallEnd({}, raw, error, name=name)], done=True)

    def _scan(self, text: str, events: list[SectionEvent]) -> int:
        """Advance through ``text``; the index just past the list's ``]``, or -1."""
        n = len(text)
        pos = 0
        while pos < n:
            state = self._state
            if state == _VALUE:
                pos = self._value.feed(text, pos)
                piece = self._value.take_delta()
                if piece and self._error is None:
                    events.append(CallArguments(piece))
                if self._value.closer is not None:
                    self._end_value(events)
                    if self._value.closer == ")":
                        pos = self._end_call(events, text, pos + 1)
                    else:
                        self._state = _ARG
                        pos += 1
                continue
            if state in (_NAME, _KEY):
                pos = self._read_word(text, pos)
                continue
            ch = text[pos]
            if ch.isspace():
                pos += 1
            elif state == _CALL:
                if ch == "]" and self._calls:
                    return pos + 1
                if not (ch.isidentifier()):
                    raise _Failure("expected a call such as name(key=value)", pos)
                self._state = _NAME
            elif state == _PAREN:
                if ch != "(":
                    raise _Failure(f"expected '(' after {self._name!r}", pos)
                pos = self._start_call(events, pos)
            elif state == _ARG:
                if ch == ")":
                    pos = self._end_call(events, text, pos + 1)
                elif ch.isidentifier():
                    self._state = _KEY
                else:
                    raise _Failure("expected a keyword argument (key=value) or ')'", pos)
            elif state == _EQUALS:
                if ch != "=":
                    raise _Failure(
                        f"expected '=' after {self._key!r} (keyword arguments only)", pos
                    )
                self._state = _VALUE
                self._value = _Value()
                if self._error is None:
                    prefix = ", " if self._keys else "{"
                    events.append(CallArguments(f"{prefix}{json.dumps(self._key)}: "))
                self._keys += 1
                pos += 1
            else:  # _AFTER_CALL
                if ch == "]":
                    return pos + 1
                if ch != ",":  # the calls are complete: a missing "]" is forgiven
                    return pos
                self._state = _CALL
                pos += 1
        return -1

    def _read_word(self, text: str, pos: int) -> int:
        pattern = _NOT_NAME if self._state == _NAME else _NOT_KEY
        match = pattern.search(text, pos)
        end = match.start() if match else len(text)
        self._word.append(text[pos:end])
        if sum(map(len, self._word)) > _MAX_WORD:
            raise _Failure("the name is too long", end)
        if match is not None:
            word = "".join(self._word)
            self._word.clear()
            if self._state == _NAME:
                self._name, self._state = word, _PAREN
            else:
                self._key, self._state = word, _EQUALS
        return end

    def _start_call(self, events: list[SectionEvent], pos: int) -> int:
        assert self._name is not None
        if self._accept is not None and not self._calls and not self._accept(self._name):
            raise _Failure("not a tool call: the name is not one of the tools", pos + 1)
        events.append(CallStart(self._name))
        self._started = True
        self._state = _ARG
        self._arguments = {}
        self._keys = 0
        self._error = None
        return pos + 1

    def _end_value(self, events: list[SectionEvent]) -> None:
        value, error = self._value.result()
        if error is None and self._key in self._arguments:
            error = f"keyword argument {self._key!r} repeated"
        if error is not None:
            self._error = self._error or f"argument {self._key!r}: {error}"
            return
        self._arguments[self._key] = value
        if self._error is None:
            events.append(CallArguments(self._value.final_delta(value)))

    def _end_call(self, events: list[SectionEvent], text: str, end: int) -> int:
        assert self._name is not None
        raw = self._ledger.cut(text, end)
        if self._error is None:
            events.append(CallArguments("}" if self._keys else "{}"))
            events.append(CallEnd(self._arguments, raw, name=self._name))
        else:
            events.append(
                CallEnd({}, raw, f"invalid pythonic tool call: {self._error}", self._name)
            )
        self._calls += 1
        self._started = False
        self._state = _AFTER_CALL
        return end

    def _fail(self, events: list[SectionEvent], text: str, pos: int, error: str) -> SectionStep:
        self.rejected = self._leading and not self._calls and not self._started
        name = self._name if self._started else None
        raw = self._ledger.cut(text, pos)
        events.append(CallEnd({}, raw, f"invalid pythonic tool call: {error}", name=name))
        return SectionStep(events, consumed=pos, done=True)


class _Value:
    """One keyword argument's value, scanned up to the ``,`` or ``)`` that ends it.

    Only the extent of the value is tracked here (brackets, strings, escapes); what it means
    is decided once, by :func:`ast.literal_eval`, when it ends. A value that is one plain
    string literal (or several, implicitly concatenated) is also streamed as JSON string
    text while it is written.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._stack: list[str] = []
        self._quote = ""  # inside a string (or its opening quotes): the quote character
        self._triple = False
        self._run = 0  # quotes in a row: opening ('' or '''), or closing a triple
        self._escape = ""  # the escape sequence being read
        self._after_cr = False  # Python reads \r\n (and a lone \r) in source as \n
        self._tail = ""  # the last characters of code before a quote: a string prefix?
        self._stream: bool | None = None  # None until the first token of the value
        self._opened = False  # the streamed JSON string's opening quote was sent
        self._diverged = False  # something other than plain strings followed them
        self._deltas: list[str] = []
        self.closer: str | None = None

    def feed(self, text: str, pos: int) -> int:
        """Scan from ``pos``; return the index of the closing ``,``/``)``, or ``len(text)``."""
        start = pos
        n = len(text)
        while pos < n and self.closer is None:
            if self._run:
                pos = self._quotes(text, pos)
            elif self._quote:
                pos = self._in_string(text, pos)
            else:
                pos = self._in_code(text, pos)
        self._parts.append(text[start:pos])
        return pos

    def _in_code(self, text: str, pos: int) -> int:
        match = _CODE_SPECIAL.search(text, pos)
        end = match.start() if match else len(text)
        if end > pos:
            code = text[pos:end]
            if code.strip():
                self._token(streamable=False)
            self._tail = (self._tail + code)[-3:]
        if match is None:
            return end
        ch = text[end]
        tail, self._tail = self._tail, ""
        if ch in "'\"":
            prefixed = bool(tail) and tail[-1].isalpha()
            self._token(streamable=not prefixed)
            self._quote, self._run = ch, 1
        elif ch in _CLOSERS:
            self._token(streamable=False)
            self._stack.append(_CLOSERS[ch])
        elif not self._stack and ch in ",)":
            self.closer = ch
            return end
        elif ch in ")]}" and (not self._stack or self._stack.pop() != ch):
            raise _Failure("mismatched brackets in a value", end)
        return end + 1

    def _token(self, *, streamable: bool) -> None:
        if self._stream is None:
            self._stream = streamable
        elif self._stream and not streamable:
            self._diverged = True

    def _quotes(self, text: str, pos: int) -> int:
        """Resolve a run of quote characters: how a string opens, or a triple one closes."""
        ch = text[pos]
        if ch == self._quote:
            self._run += 1
            if self._run == 3 and self._triple:
                self._close()
            elif self._run == 3:
                self._triple, self._run = True, 0
                self._open()
            return pos + 1
        if self._triple:  # one or two quotes inside a triple-quoted string are content
            self._content(self._quote * self._run)
            self._run = 0
        elif self._run == 2:  # '' : an empty string, then code again
            self._open()
            self._close()
        else:  # a one-quote string begins with this character
            self._run = 0
            self._open()
        return pos

    def _in_string(self, text: str, pos: int) -> int:
        if self._escape:
            return self._escape_char(text, pos)
        match = _STRING_SPECIAL[self._quote].search(text, pos)
        end = match.start() if match else len(text)
        self._source(text[pos:end])
        if match is None:
            return end
        if text[end] == "\\":
            self._escape = "\\"
        elif self._triple:
            self._run = 1
        else:
            self._close()
        return end + 1

    def _escape_char(self, text: str, pos: int) -> int:
        esc, ch = self._escape, text[pos]
        if len(esc) == 1:
            if ch in _HEX_LENGTHS or ch == "N" or ch in _OCTAL:
                self._escape = esc + ch
            else:
                self._escape = ""
                self._content(_SIMPLE_ESCAPES.get(ch, "\\" + ch))
                self._after_cr = ch == "\r"  # a line continuation written with \r\n
            return pos + 1
        kind = esc[1]
        if kind in _OCTAL:
            if ch in _OCTAL and len(esc) < 4:
                self._escape = esc + ch
                return pos + 1
            self._escape = ""
            self._content(chr(int(esc[1:], 8)))
            return pos  # this character is not part of the escape
        if ch in "\\'\"\n" or (kind != "N" and ch not in _HEX_DIGITS) or len(esc) > 100:
            self._escape = ""  # a broken escape: literal_eval rejects the value at its end
            self._content(esc)
            return pos
        esc += ch
        if len(esc) == _HEX_LENGTHS.get(kind, 0) or (kind == "N" and ch == "}"):
            self._content(_decode_escape(esc))
            esc = ""
        self._escape = esc
        return pos + 1

    def _open(self) -> None:
        if self._stream and not self._diverged and not self._opened:
            self._opened = True
            self._deltas.append('"')

    def _source(self, piece: str) -> None:
        """String content as written: its line endings are read the way Python reads them."""
        if self._after_cr and piece.startswith("\n"):
            piece = piece[1:]
        if piece:
            self._after_cr = piece.endswith("\r")
            self._content(piece.replace("\r\n", "\n").replace("\r", "\n"), source=True)

    def _content(self, piece: str, *, source: bool = False) -> None:
        if not source:
            self._after_cr = False
        if piece and self._stream and not self._diverged:
            self._deltas.append(json.dumps(piece, ensure_ascii=False)[1:-1])

    def _close(self) -> None:
        self._quote, self._triple, self._run = "", False, 0

    def take_delta(self) -> str:
        piece = "".join(self._deltas)
        self._deltas.clear()
        return piece

    def result(self) -> tuple[Any, str | None]:
        """The value as JSON data, or why it is not a supported literal."""
        source = "".join(self._parts).strip()
        if not source:
            return None, "missing value"
        if self._diverged:
            return None, f"a string must be a plain literal, not an expression: {source[:80]!r}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes are kept verbatim
                value = ast.literal_eval(source)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None, f"not a Python literal: {source[:80]!r}"
        try:
            return _jsonable(value), None
        except ValueError as exc:
            return None, str(exc)

    def final_delta(self, value: Any) -> str:
        """The JSON text still owed for ``value`` once it is complete."""
        if self._stream:
            return '"'  # the content was streamed
        return json.dumps(value, ensure_ascii=False)


def _decode_escape(esc: str) -> str:
    kind = esc[1]
    try:
        if kind == "N":
            return unicodedata.lookup(esc[3:-1])
        return chr(int(esc[2:], 16))
    except (ValueError, KeyError):
        return esc  # not valid: literal_eval rejects the value when it ends


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data; ``ValueError`` for what JSON cannot hold."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a JSON number")
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("dictionary keys must be strings")
        return {k: _jsonable(v) for k, v in value.items()}
    raise ValueError(f"a {type(value).__name__} is not a JSON value")
