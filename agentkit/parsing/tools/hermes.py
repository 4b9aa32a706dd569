"""Hermes-style tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

The format of Hermes 2/3, Qwen2.5 and Qwen3 (non-coder) and many fine-tunes. Each call is its
own section. The JSON is scanned incrementally (:mod:`agentkit.parsing._json_stream`), so:

* the call starts as soon as its ``"name"`` string is closed;
* the ``arguments`` object is streamed as it is written (its JSON text, with raw control
  characters escaped, so the concatenated deltas are strict JSON equal to the arguments);
* the end of the call is the first ``</tool_call>`` *after the JSON object closes*: the same
  marker inside a JSON string argument does not end the call.

Tolerated: ``"parameters"`` instead of ``"arguments"`` (whichever comes first is used), missing
or ``null`` arguments (``{}``), and arguments written as a JSON string holding an object. A
complete object whose ``</tool_call>`` never came (the stream stopped) is recovered. Everything
else that does not parse becomes an error call the model can read, its raw text kept.

Known limitation: an unterminated JSON string swallows the rest of the output into the call
(reported as a truncated call, raw kept), because inside a string ``</tool_call>`` is text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
from agentkit.parsing._json_stream import JsonObjectScanner, MemberText
from agentkit.parsing._markers import MISMATCH, Expect, MarkerFinder
from agentkit.transcript import ToolCallBlock

__all__ = ["HERMES", "HermesToolSyntax"]

START = "<tool_call>"
END = "</tool_call>"
_ARGUMENT_KEYS = ("arguments", "parameters")
_TRUNCATED = "tool call truncated"
_FORMAT_HINT = f'. Write each call as {START}\n{{"name": "TOOL", "arguments": {{...}}}}\n{END}'

_JSON = 0
_AFTER = 1
_SKIP = 2


class HermesToolSyntax(ToolSyntax):
    """``<tool_call>`` + one JSON object + ``</tool_call>`` per call."""

    name = "hermes"
    start_markers = (START,)

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return _HermesSection()

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return "\n".join(
            f"{START}\n"
            f"{json.dumps({'name': c.name, 'arguments': c.arguments}, ensure_ascii=False)}\n"
            f"{END}"
            for c in calls
        )


HERMES = HermesToolSyntax()


class _HermesSection(ToolSection):
    def __init__(self) -> None:
        self._scanner = JsonObjectScanner(watch=("name", *_ARGUMENT_KEYS))
        self._state = _JSON
        self._raw: list[str] = []
        self._json_text = ""
        self._name_parts: list[str] = []
        self._name: str | None = None
        self._name_read = False
        self._name_error: str | None = None
        self._args_key: str | None = None
        self._args_kind: Literal["object", "other"] | None = None
        self._args_read = False
        self._early_deltas: list[str] = []
        """Argument text streamed before the name was known (``{"arguments": ..., "name"``)."""
        self._after = Expect((END,))
        self._finder = MarkerFinder(END)
        self._error: str | None = None

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        pos = 0
        if self._state == _JSON:
            scan = self._scanner.feed(text)
            self._on_members(scan.members, events)
            if scan.end >= 0:
                self._json_text = "".join(self._raw) + text[: scan.end]
                self._state = _AFTER
                pos = scan.end
            elif scan.failed_at >= 0:
                self._skip(f"invalid JSON in tool call: {self._scanner.error}")
                pos = scan.failed_at
        if self._state == _AFTER:
            pos, found = self._after.feed(text, pos)
            if found == END:
                return self._end(events, text, pos)
            if found is MISMATCH:
                self._finder = MarkerFinder(END, tail=self._after.matched)
                self._skip(
                    "unexpected text after the tool call's JSON object: write exactly one "
                    f"JSON object per {START} and close it with {END}"
                )
        if self._state == _SKIP:
            end = self._finder.find(text, pos)
            if end >= 0:
                return self._end(events, text, end)
        self._raw.append(text)
        return SectionStep(events, consumed=len(text))

    def finish(self) -> SectionStep:
        events: list[SectionEvent] = []
        if self._state == _JSON:
            self._error = (
                f"{_TRUNCATED}: the output ended before its JSON object was complete "
                f"and before {END}"
            )
        events.extend(self._call_end("".join(self._raw)))
        return SectionStep(events, done=True)

    def _skip(self, error: str) -> None:
        self._state = _SKIP
        self._error = error

    def _end(self, events: list[SectionEvent], text: str, end: int) -> SectionStep:
        events.extend(self._call_end("".join(self._raw) + text[:end]))
        return SectionStep(events, consumed=end, done=True)

    def _on_members(self, members: list[MemberText], events: list[SectionEvent]) -> None:
        for member in members:
            if member.key == "name":
                if not self._name_read:
                    self._name_parts.append(member.text)
                    if member.complete:
                        self._name_read = True
                        self._read_name(events)
                continue
            if self._args_key is None:
                self._args_key = member.key
            if member.key != self._args_key or self._args_read:
                continue
            if self._args_kind is None:
                self._args_kind = "object" if member.text.startswith("{") else "other"
            if self._args_kind == "object":
                self._delta(member.text, events)
            self._args_read = member.complete

    def _read_name(self, events: list[SectionEvent]) -> None:
        try:
            name = json.loads("".join(self._name_parts), strict=False)
        except json.JSONDecodeError:
            name = None
        if not isinstance(name, str) or not name.strip():
            self._name_error = 'the tool call\'s "name" must be a non-empty string'
            return
        self._name = name
        events.append(CallStart(name))
        if self._early_deltas:
            events.append(CallArguments("".join(self._early_deltas)))
            self._early_deltas.clear()

    def _delta(self, text: str, events: list[SectionEvent]) -> None:
        if self._name is None:
            self._early_deltas.append(text)
        else:
            events.append(CallArguments(text))

    def _call_end(self, raw: str) -> list[SectionEvent]:
        """The call's final events: any argument text not streamed yet, then its end."""
        if self._error is not None:
            return [self._failed(raw, self._error)]
        try:
            obj = json.loads(self._json_text, strict=False)
        except json.JSONDecodeError as exc:
            reason = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
            return [self._failed(raw, f"invalid JSON in tool call: {reason}")]
        if self._name is None:
            return [self._failed(raw, self._name_error or 'the tool call has no "name"')]
        value = obj.get(self._args_key) if self._args_key is not None else None
        arguments, problem = _arguments(value, self._args_key or "arguments")
        if problem is not None:
            return [self._failed(raw, problem)]
        events: list[SectionEvent] = []
        if self._args_kind != "object":  # nothing streamed: send the whole object now
            events.append(CallArguments(json.dumps(arguments, ensure_ascii=False)))
        events.append(CallEnd(arguments, raw, name=self._name))
        return events

    def _failed(self, raw: str, error: str) -> CallEnd:
        if not error.startswith(_TRUNCATED):  # show a model that strayed from the format
            error += _FORMAT_HINT
        return CallEnd({}, raw, error, name=self._name)


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
