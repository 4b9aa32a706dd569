"""Python literals as pythonic tool calls write them, scanned as they arrive.

A keyword argument's value (``'it\\'s'``, ``r"C:\\x"``, ``[1, (2, 3)]``, ``{'k': None}``) is
scanned by :class:`LiteralScanner` only for its extent: brackets, strings and escapes, up to the
``,`` or ``)`` that ends it. What it means is decided once, when it ends, by
:func:`ast.literal_eval` (never ``eval``), so the cost stays linear in the output. A value that
is one plain string literal (or several, implicitly concatenated) is also streamed as JSON
string text while it is written, its escapes decoded as Python decodes them.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
import warnings
from typing import Any

from agentkit.parsing._values import unfit_reason

__all__ = ["LiteralScanner", "NotPythonic"]

_CODE_SPECIAL = re.compile(r"[\[\](){}'\",]")
_STRING_SPECIAL = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_SIMPLE_ESCAPES = dict(
    zip("\n\r\\'\"abfnrtv", ["", "", "\\", "'", '"', *"\a\b\f\n\r\t\v"], strict=True)
)
_HEX_LENGTHS = {"x": 4, "u": 6, "U": 10}
_OCTAL = "01234567"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class NotPythonic(Exception):
    """The text is not a pythonic call list; ``pos`` is the first character that proves it."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


class LiteralScanner:
    """One keyword argument's value, scanned up to the ``,`` or ``)`` that ends it (see the
    module doc): :meth:`take_delta` is the JSON text streamed so far, :meth:`result` the value
    once it has ended."""

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
            raise NotPythonic("mismatched brackets in a value", end)
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
        reason = unfit_reason(value)
        if reason is not None:
            return None, reason
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
