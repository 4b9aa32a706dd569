"""Tool calls written as JSON objects: ``{"name": "f", "arguments": {...}}``, alone or in a list.

Hermes, Llama 3 JSON, Mistral (before v11) and Nemotron all write a call this way; they differ
in what surrounds the objects (tags, ``[``/``]``, ``;``) and are thin wrappers around:

* :class:`JsonCallReader`: one call object, scanned incrementally. The call starts when its
  ``"name"`` string closes and its ``arguments`` object streams as it is written;
  ``"parameters"`` is accepted for ``"arguments"`` (whichever comes first), missing or ``null``
  arguments are ``{}``, and arguments written as a JSON string holding an object are decoded.
* :class:`JsonCallList`: consecutive call objects, bracketed or separated by a literal.
* :class:`JsonCallSection`: a section that is one such list and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    CallStart,
    SectionEvent,
    SectionStep,
    ToolSection,
)
from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing._markers import MISMATCH, Expect
from agentkit.parsing._values import loads
from agentkit.parsing.tools._ledger import RawLedger

__all__ = ["JsonCallList", "JsonCallReader", "JsonCallSection", "ListStatus"]

_ARGUMENT_KEYS = ("arguments", "parameters")

ListStatus = Literal["more", "done", "failed"]


class JsonCallReader:
    """One ``{"name": ..., "arguments": {...}}`` object, fed in pieces.

    Emits ``CallStart`` when the name string closes and streams the arguments object (text
    that came before the name is sent right after ``CallStart``). ``accept`` vets the name:
    a rejected name starts no call, and the object ends as an error call.
    """

    def __init__(self, *, opened: bool = False, accept: Callable[[str], bool] | None = None):
        self._scanner = JsonObjectScanner(watch=("name", *_ARGUMENT_KEYS))
        self._parts: list[str] = []
        self._accept = accept
        self._name_parts: list[str] = []
        self._name_done = False
        self._name_error: str | None = None
        self.name: str | None = None
        self.rejected = False
        self._args_key: str | None = None
        self._args_object: bool | None = None
        self._args_done = False
        self._early: list[str] = []
        if opened:
            self._scanner.feed("{")
            self._parts.append("{")

    @property
    def done(self) -> bool:
        return self._scanner.done

    @property
    def error(self) -> str | None:
        return self._scanner.error

    @property
    def begun(self) -> bool:
        """Something other than whitespace was read (checked only when it matters)."""
        return any(part.strip() for part in self._parts)

    def feed(self, text: str, pos: int, events: list[SectionEvent]) -> int:
        """Scan from ``pos``; return where scanning stopped: just past the closing brace, at
        the first character that cannot belong to the object, or at the end of ``text``."""
        step = self._scanner.feed(text, pos)
        stop = step.end if step.end >= 0 else step.failed_at if step.failed_at >= 0 else len(text)
        self._parts.append(text[pos:stop])
        for member in step.members:
            if member.key == "name":
                if not self._name_done:
                    self._name_parts.append(member.text)
                    if member.complete:
                        self._read_name(events)
                continue
            if self._args_key is None:
                self._args_key = member.key
            if member.key != self._args_key or self._args_done:
                continue
            if self._args_object is None:
                self._args_object = member.text.startswith("{")
            if self._args_object:
                if self.name is not None:
                    events.append(CallArguments(member.text))
                elif not self.rejected:
                    self._early.append(member.text)
            self._args_done = member.complete
        return stop

    def _read_name(self, events: list[SectionEvent]) -> None:
        self._name_done = True
        try:
            name = loads("".join(self._name_parts))
        except json.JSONDecodeError:
            name = None
        if not isinstance(name, str) or not name.strip():
            self._name_error = 'the tool call\'s "name" must be a non-empty string'
            return
        if self._accept is not None and not self._accept(name):
            self.rejected = True
            self._early.clear()
            return
        self.name = name
        events.append(CallStart(name))
        if self._early:
            events.append(CallArguments("".join(self._early)))
            self._early.clear()

    def end(self, raw: str) -> list[SectionEvent]:
        """The events that close the call once its object is complete."""
        if self.rejected:
            return [CallEnd({}, raw, "not a tool call: the name is not one of the tools")]
        try:
            obj = loads("".join(self._parts))
        except json.JSONDecodeError as exc:
            where = f"(line {exc.lineno}, column {exc.colno})"
            return [CallEnd({}, raw, f"invalid JSON in tool call: {exc.msg} {where}", self.name)]
        if self.name is None:
            return [CallEnd({}, raw, self._name_error or 'the tool call has no "name"')]
        value = obj.get(self._args_key) if self._args_key is not None else None
        arguments, error = _arguments(value, self._args_key or "arguments")
        if error is not None:
            return [CallEnd({}, raw, error, self.name)]
        events: list[SectionEvent] = []
        if not self._args_object:  # nothing was streamed: send the whole object now
            events.append(CallArguments(json.dumps(arguments, ensure_ascii=False)))
        events.append(CallEnd(arguments, raw, name=self.name))
        return events

    def fail(self, raw: str, error: str) -> list[SectionEvent]:
        """The error call that ends an object that could not be read, owning ``raw``."""
        return [CallEnd({}, raw, error, name=self.name)]


def _arguments(value: Any, key: str) -> tuple[dict[str, Any], str | None]:
    if value is None:
        return {}, None
    if isinstance(value, str):  # some models JSON-encode the arguments object
        try:
            value = loads(value)
        except json.JSONDecodeError as exc:
            return {}, f'invalid JSON in tool call "{key}" string: {exc.msg}'
    if not isinstance(value, dict):
        return {}, f'tool call "{key}" must be a JSON object, not {type(value).__name__}'
    return value, None


_OPEN = 0
_ELEMENT = 1
_SEPARATOR = 2
_DONE = 3


class JsonCallList:
    """Consecutive JSON call objects: ``[{...}, {...}]`` or a lone ``{...}``
    (``start="array"``), or ``{...}; {...}`` without brackets (``start="object"``, with
    ``separator=";"``; ``opened`` when the first ``{`` was the section's marker).

    ``ends`` are literals that close an unbracketed list. ``leading`` marks a list opened by a
    leading marker: if its first object names no tool (or one ``accept`` refuses), the list
    ends there with :attr:`rejected` set.
    """

    def __init__(
        self,
        *,
        start: Literal["array", "object"] = "array",
        opened: bool = False,
        separator: str = ",",
        ends: Sequence[str] = (),
        leading: bool = False,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self._accept = accept
        self._leading = leading
        self._bracketed = start == "array"
        self._lone = False
        self._separator = separator
        self._ends = tuple(ends)
        self._state = _OPEN if start == "array" else _ELEMENT
        self._reader = JsonCallReader(opened=opened, accept=accept)
        self._expect = Expect(())
        self.calls = 0
        """Calls ended so far, errors included."""
        self.rejected = False
        self.error: str | None = None

    def feed(
        self, text: str, pos: int, ledger: RawLedger, events: list[SectionEvent]
    ) -> tuple[int, ListStatus]:
        """Scan from ``pos``. ``done``: the list ended just before the returned position;
        ``failed``: the character there cannot continue it (:attr:`error` says why, and
        :meth:`failure` makes the error call)."""
        n = len(text)
        while pos < n:
            if self._state == _OPEN:
                while pos < n and text[pos].isspace():
                    pos += 1
                if pos == n:
                    break
                if text[pos] == "[":
                    pos += 1
                    self._next_element()
                elif text[pos] == "{":
                    self._bracketed = False
                    self._lone = True
                    self._state = _ELEMENT
                else:
                    self.error = f"expected a JSON array or object, found {text[pos]!r}"
                    return pos, "failed"
            elif self._state == _ELEMENT:
                reader = self._reader
                pos = reader.feed(text, pos, events)
                if reader.done:
                    self.rejected = self._is_rejected()
                    events.extend(reader.end(ledger.cut(text, pos)))
                    self.calls += 1
                    if self.rejected or self._lone:
                        self._state = _DONE
                        return pos, "done"
                    self._state = _SEPARATOR
                    closers = (self._separator, "]") if self._bracketed else (self._separator,)
                    self._expect = Expect(closers + self._ends)
                elif reader.error is not None:
                    if not reader.begun and self._bracketed and text[pos] == "]":
                        self._state = _DONE
                        if self.calls:  # a trailing comma before the bracket
                            return pos + 1, "done"
                        self.error = "an empty list of tool calls"
                        return pos + 1, "failed"
                    if not reader.begun and self.calls and not self._bracketed:
                        return pos, "done"  # "; " then something else: the list is over
                    self.rejected = self._is_rejected()
                    self.error = f"invalid JSON in tool call: {reader.error}"
                    return pos, "failed"
            elif self._state == _SEPARATOR:
                pos, found = self._expect.feed(text, pos)
                if found is MISMATCH:  # the calls are complete: a missing "]" is forgiven
                    return pos, "done"
                if found == self._separator:
                    self._next_element()
                elif found is not None:
                    self._state = _DONE
                    return pos, "done"
            else:
                return pos, "done"
        return pos, "more"

    def _next_element(self) -> None:
        self._state = _ELEMENT
        self._reader = JsonCallReader(accept=None if self.calls else self._accept)

    def _is_rejected(self) -> bool:
        return self._leading and not self.calls and self._reader.name is None

    def failure(self, raw: str) -> list[SectionEvent]:
        """The error call that ends a failed list, owning ``raw``."""
        return self._reader.fail(raw, self.error or "no tool call after the tool-call marker")

    def finish(self, raw: str) -> tuple[list[SectionEvent], str]:
        """The output ended inside the list: its final events and the tail raw."""
        if self._state == _OPEN or (self._state == _ELEMENT and not self.calls):
            self.rejected = self._is_rejected()
            self.error = "no tool call after the tool-call marker"
            if self._reader.begun:
                self.error = "tool call truncated: the output ended inside its JSON object"
            return self.failure(raw), ""
        if self._state == _ELEMENT and self._reader.begun:
            self.error = "tool call truncated: the output ended inside its JSON object"
            return self.failure(raw), ""
        return [], raw  # every call is complete: a missing closer is forgiven


class JsonCallSection(ToolSection):
    """A section that is one :class:`JsonCallList` and nothing else: it ends where the list
    ends, or at the first character that cannot continue it (an error call keeps the bytes
    read so far; the rest goes back to the driver)."""

    def __init__(self, calls: JsonCallList) -> None:
        self._calls = calls
        self._ledger = RawLedger()
        self.rejected = False
        """Opened by a leading marker and not a tool call after all (see
        :attr:`JsonCallList.rejected`)."""

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        self._ledger.begin()
        pos, status = self._calls.feed(text, 0, self._ledger, events)
        if status == "more":
            self._ledger.keep(text)
            return SectionStep(events, consumed=len(text))
        self.rejected = self._calls.rejected
        if status == "failed":
            events.extend(self._calls.failure(self._ledger.cut(text, pos)))
        return SectionStep(events, consumed=pos, done=True, tail_raw=self._ledger.cut(text, pos))

    def finish(self) -> SectionStep:
        events, tail = self._calls.finish(self._ledger.rest())
        self.rejected = self._calls.rejected
        return SectionStep(events, done=True, tail_raw=tail)
