"""Llama 3.1-3.3 JSON tool calls: ``{"name": "f", "parameters": {...}}``.

The model writes the call as the whole output, optionally after ``<|python_tag|>``; several
calls are separated by ``;``. ``"arguments"`` is accepted for ``"parameters"``, and extra
members (``"type": "function"``) are ignored. Because a call usually has no marker of its
own, ``{`` opens a section only at the very start of the output (:attr:`leading_markers`);
``<|python_tag|>`` opens one anywhere. A trailing ``<|eom_id|>``/``<|eot_id|>`` is consumed
as the end of the section.

A section opened by the leading ``{`` may turn out to be an ordinary JSON answer. It then
ends with an error call and sets :attr:`JsonCallSection.rejected`, telling a driver that knows
the flag that the marker and the section's bytes are better kept as text. With tool schemas,
a name that is not one of the tools rejects it too.

The module also holds the JSON-call helpers shared by the other JSON formats (Mistral,
Nemotron, Harmony): :class:`RawLedger`, :class:`JsonObjectStream`, :class:`JsonCallReader`
and :class:`JsonCallList`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

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
from agentkit.parsing._markers import MISMATCH, Expect
from agentkit.transcript import ToolCallBlock

__all__ = [
    "LLAMA3_JSON",
    "JsonCallList",
    "JsonCallReader",
    "JsonCallSection",
    "JsonObjectStream",
    "Llama3JsonToolSyntax",
    "RawLedger",
]

PYTHON_TAG = "<|python_tag|>"
EOM = "<|eom_id|>"
EOT = "<|eot_id|>"
_ARGUMENT_KEYS = ("arguments", "parameters")

ListStatus = Literal["more", "done", "failed"]


class RawLedger:
    """The raw text a section consumed since its last ``CallEnd``, kept across feeds."""

    __slots__ = ("_parts", "_start")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._start = 0

    def begin(self) -> None:
        """A new feed starts; its text is not in the ledger yet."""
        self._start = 0

    def cut(self, text: str, end: int) -> str:
        """Everything up to ``text[:end]``, handed out (to a ``CallEnd`` or ``tail_raw``)."""
        raw = "".join(self._parts) + text[self._start : end]
        self._parts.clear()
        self._start = end
        return raw

    def keep(self, text: str) -> None:
        """The feed ended without ending the section: remember the rest of ``text``."""
        self._parts.append(text[self._start :])
        self._start = len(text)

    def rest(self) -> str:
        raw = "".join(self._parts)
        self._parts.clear()
        return raw


class JsonObjectStream:
    """One JSON object, fed in pieces: where it ends, and its text as argument deltas.

    Two scanners run side by side: one finds the end of the object, the other (reading it as
    the value of a watched member) re-emits its text with raw control characters escaped, so
    the deltas join into strict JSON. Both cost O(delta).
    """

    __slots__ = ("_bounds", "_parts", "_pending", "_text", "done", "error")

    def __init__(self, *, opened: bool = False) -> None:
        self._bounds = JsonObjectScanner()
        self._text = JsonObjectScanner(watch=("v",))
        self._text.feed('{"v":')
        self._parts: list[str] = []
        self._pending = ""
        self.done = False
        self.error: str | None = None
        if opened:  # the caller consumed the opening brace: it is the first delta
            self._bounds.feed("{")
            self._pending = "".join(m.text for m in self._text.feed("{").members)
            self._parts.append("{")

    def feed(self, text: str, pos: int) -> tuple[str, int]:
        """Scan from ``pos``: the delta text, and where scanning stopped (just past the
        closing brace, at the first character that cannot belong, or at the end)."""
        step = self._bounds.feed(text, pos)
        stop = step.end if step.end >= 0 else step.failed_at if step.failed_at >= 0 else len(text)
        self.done = self._bounds.done
        self.error = self._bounds.error
        piece = text[pos:stop]
        self._parts.append(piece)
        delta = self._pending + "".join(m.text for m in self._text.feed(piece).members)
        self._pending = ""
        return delta, stop

    def value(self) -> tuple[dict[str, Any], str | None]:
        """The complete object, or an error."""
        try:
            value = json.loads("".join(self._parts), strict=False)
        except json.JSONDecodeError as exc:
            return {}, f"invalid JSON arguments: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        return value, None


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
        """Scan from ``pos``; return where scanning stopped (see :class:`JsonObjectStream`)."""
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
            name = json.loads("".join(self._name_parts), strict=False)
        except json.JSONDecodeError:
            return
        if not isinstance(name, str) or not name.strip():
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
            obj = json.loads("".join(self._parts), strict=False)
        except json.JSONDecodeError as exc:
            where = f"(line {exc.lineno}, column {exc.colno})"
            return [CallEnd({}, raw, f"invalid JSON in tool call: {exc.msg} {where}", self.name)]
        if self.name is None:
            return [CallEnd({}, raw, 'the tool call has no "name" string')]
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
        return [CallEnd({}, raw, error, name=self.name)]


def _arguments(value: Any, key: str) -> tuple[dict[str, Any], str | None]:
    if value is None:
        return {}, None
    if isinstance(value, str):  # some models JSON-encode the arguments object
        try:
            value = json.loads(value, strict=False)
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


class Llama3JsonToolSyntax(ToolSyntax):
    """``{"name": ..., "parameters": {...}}``, optionally after ``<|python_tag|>``."""

    name = "llama3_json"
    start_markers = (PYTHON_TAG,)
    leading_markers: tuple[str, ...] = ("{",)
    """Markers that open a section only at the start of the output (after whitespace)."""

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        leading = start_marker in self.leading_markers
        calls = JsonCallList(
            start="object",
            opened=leading,
            separator=";",
            ends=(EOM, EOT),
            leading=leading,
            accept=schemas.__contains__ if leading and schemas else None,
        )
        return JsonCallSection(calls)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return "; ".join(
            json.dumps({"name": c.name, "parameters": c.arguments}, ensure_ascii=False)
            for c in calls
        )


LLAMA3_JSON = Llama3JsonToolSyntax()


class JsonCallSection(ToolSection):
    """A section that is one :class:`JsonCallList` and nothing else: it ends where the list
    ends, or at the first character that cannot continue it (an error call keeps the bytes
    read so far; the rest goes back to the driver)."""

    def __init__(self, calls: JsonCallList) -> None:
        self._calls = calls
        self._ledger = RawLedger()
        self.rejected = False
        """Opened by a leading marker and not a tool call after all (see the module doc)."""

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
