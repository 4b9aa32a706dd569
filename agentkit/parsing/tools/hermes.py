"""Hermes-style tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

The format of Hermes 2/3, Qwen2.5 and Qwen3 (non-coder) and many fine-tunes. Each call is its
own section. The JSON is read incrementally (:class:`._json_calls.JsonCallReader`), so:

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

from agentkit.parsing._base import (
    CallEnd,
    JSONSchema,
    SectionEvent,
    SectionStep,
    ToolSection,
    ToolSyntax,
)
from agentkit.parsing._markers import MISMATCH, Expect, MarkerFinder
from agentkit.parsing.tools._json_calls import JsonCallReader
from agentkit.transcript import ToolCallBlock

__all__ = ["HERMES", "HermesToolSyntax"]

START = "<tool_call>"
END = "</tool_call>"
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
        self._reader = JsonCallReader()
        self._state = _JSON
        self._raw: list[str] = []
        self._after = Expect((END,))
        self._finder = MarkerFinder(END)
        self._error: str | None = None

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        pos = 0
        if self._state == _JSON:
            pos = self._reader.feed(text, 0, events)
            if self._reader.done:
                self._state = _AFTER
            elif self._reader.error is not None:
                self._skip(f"invalid JSON in tool call: {self._reader.error}")
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
        if self._state == _JSON:
            self._error = (
                f"{_TRUNCATED}: the output ended before its JSON object was complete "
                f"and before {END}"
            )
        return SectionStep(self._call_end("".join(self._raw)), done=True)

    def _skip(self, error: str) -> None:
        self._state = _SKIP
        self._error = error

    def _end(self, events: list[SectionEvent], text: str, end: int) -> SectionStep:
        events.extend(self._call_end("".join(self._raw) + text[:end]))
        return SectionStep(events, consumed=end, done=True)

    def _call_end(self, raw: str) -> list[SectionEvent]:
        """The call's final events: any argument text not streamed yet, then its end."""
        if self._error is not None:
            return [self._failed(raw, self._error)]
        events = self._reader.end(raw)
        end = events[-1]
        if isinstance(end, CallEnd) and end.error is not None:
            return [self._failed(raw, end.error)]
        return events

    def _failed(self, raw: str, error: str) -> CallEnd:
        if not error.startswith(_TRUNCATED):  # show a model that strayed from the format
            error += _FORMAT_HINT
        return CallEnd({}, raw, error, name=self._reader.name)
