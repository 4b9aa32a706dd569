"""Pythonic tool calls (Llama 3.2/4, ToolACE and others): ``[f(a=1, b="x"), g()]``.

The output is a Python list of calls with keyword arguments whose values are Python literals
(strings with escapes and any quoting, numbers, ``True``/``False``/``None``, lists, tuples,
dicts). There is no marker: ``[`` opens a section only at the start of the output
(:attr:`PythonicToolSyntax.leading_markers`).

Each call starts as soon as ``name(`` is read. Arguments stream as JSON: ``{"key": `` when a
keyword is read, a plain string value piece by piece as it is written (escapes decoded), other
values whole when they end. Each value is checked once, when it ends, with
:func:`ast.literal_eval` (never ``eval``; see :mod:`._python_literals`), so the total cost is
linear in the output.

Anything that is not this grammar (positional arguments, expressions, ``[citation needed]``)
ends the section at the first character that proves it, with an error call holding the bytes
read so far; the rest goes back to the driver. If that happens before any call started, or
the name is not one of the tools (when schemas are given), the section sets
:attr:`rejected`: a driver that knows the flag keeps the ``[`` and those bytes as text.
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
from agentkit.parsing.tools._ledger import RawLedger
from agentkit.parsing.tools._python_literals import LiteralScanner, NotPythonic
from agentkit.transcript import ToolCallBlock

__all__ = ["PYTHONIC", "PythonicToolSyntax"]

_NOT_NAME = re.compile(r"[^\w.]")
_NOT_KEY = re.compile(r"[^\w]")
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


class _PythonicSection(ToolSection):
    def __init__(self, leading: bool, accept: Callable[[str], bool] | None) -> None:
        self._leading = leading
        self._accept = accept
        self._state = _CALL
        self._ledger = RawLedger()
        self._word: list[str] = []
        self._word_len = 0
        self._name: str | None = None
        self._key = ""
        self._started = False
        self._arguments: dict[str, Any] = {}
        self._keys = 0
        self._error: str | None = None
        self._value = LiteralScanner()
        self._calls = 0
        self.rejected = False
        """Opened by a leading ``[`` and not a tool call after all (see the module doc)."""

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        self._ledger.begin()
        try:
            pos = self._scan(text, events)
        except NotPythonic as failure:
            # The value's text scanned before the failure: a split with a feed boundary in
            # between has streamed it already, so every split must.
            self._send_value_text(events)
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
                self._send_value_text(events)
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
                    raise NotPythonic("expected a call such as name(key=value)", pos)
                self._state = _NAME
            elif state == _PAREN:
                if ch != "(":
                    raise NotPythonic(f"expected '(' after {self._name!r}", pos)
                pos = self._start_call(events, pos)
            elif state == _ARG:
                if ch == ")":
                    pos = self._end_call(events, text, pos + 1)
                elif ch.isidentifier():
                    self._state = _KEY
                else:
                    raise NotPythonic("expected a keyword argument (key=value) or ')'", pos)
            elif state == _EQUALS:
                if ch != "=":
                    raise NotPythonic(
                        f"expected '=' after {self._key!r} (keyword arguments only)", pos
                    )
                self._state = _VALUE
                self._value = LiteralScanner()
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

    def _send_value_text(self, events: list[SectionEvent]) -> None:
        piece = self._value.take_delta()
        if piece and self._error is None:
            events.append(CallArguments(piece))

    def _read_word(self, text: str, pos: int) -> int:
        pattern = _NOT_NAME if self._state == _NAME else _NOT_KEY
        match = pattern.search(text, pos)
        end = match.start() if match else len(text)
        # Too long at its (_MAX_WORD + 1)th character, wherever the feed ends.
        end = min(end, pos + _MAX_WORD + 1 - self._word_len)
        self._word.append(text[pos:end])
        self._word_len += end - pos
        if self._word_len > _MAX_WORD:
            raise NotPythonic("the name is too long", end)
        if match is not None:
            word = "".join(self._word)
            self._word.clear()
            self._word_len = 0
            if self._state == _NAME:
                self._name, self._state = word, _PAREN
            else:
                self._key, self._state = word, _EQUALS
        return end

    def _start_call(self, events: list[SectionEvent], pos: int) -> int:
        assert self._name is not None
        if self._accept is not None and not self._calls and not self._accept(self._name):
            raise NotPythonic("not a tool call: the name is not one of the tools", pos + 1)
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
