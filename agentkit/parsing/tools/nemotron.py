"""NVIDIA Nemotron (Llama-Nemotron "Deci" family) tool calls:
``<TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>``.

One section holds a JSON array of calls; each call is dispatched as soon as its object closes,
before the array or the section does. A lone object without brackets is accepted. A call whose
JSON is broken ends as an error call, and the section then skips to ``</TOOLCALL>`` (those
bytes stay in that call's raw text). A section whose calls are all complete but whose
``</TOOLCALL>`` never came (the stream stopped) is recovered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from agentkit.parsing._base import (
    JSONSchema,
    SectionEvent,
    SectionStep,
    ToolSection,
    ToolSyntax,
)
from agentkit.parsing._markers import MISMATCH, Expect, MarkerFinder
from agentkit.parsing.tools._json_calls import JsonCallList
from agentkit.parsing.tools._ledger import RawLedger
from agentkit.transcript import ToolCallBlock

__all__ = ["NEMOTRON_DECI", "NemotronToolSyntax"]

START = "<TOOLCALL>"
END = "</TOOLCALL>"

_LIST = 0
_CLOSE = 1
_SKIP = 2


class NemotronToolSyntax(ToolSyntax):
    """``<TOOLCALL>`` + a JSON array of ``{"name", "arguments"}`` + ``</TOOLCALL>``."""

    name = "nemotron_deci"
    start_markers = (START,)

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return _NemotronSection()

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        array = [{"name": c.name, "arguments": c.arguments} for c in calls]
        return f"{START}{json.dumps(array, ensure_ascii=False)}{END}"


NEMOTRON_DECI = NemotronToolSyntax()


class _NemotronSection(ToolSection):
    def __init__(self) -> None:
        self._state = _LIST
        self._ledger = RawLedger()
        self._list = JsonCallList()
        self._close = Expect((END,))
        self._finder = MarkerFinder(END)

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        self._ledger.begin()
        pos = 0
        if self._state == _LIST:
            pos, status = self._list.feed(text, pos, self._ledger, events)
            if status == "done":
                self._state = _CLOSE
            elif status == "failed":
                self._state = _SKIP
        if self._state == _CLOSE:
            pos, found = self._close.feed(text, pos)
            if found == END:
                return self._done(events, text, pos)
            if found is MISMATCH:  # the calls are complete; what follows is not ours
                return self._done(events, text, pos)
        if self._state == _SKIP:
            end = self._finder.find(text, pos)
            if end >= 0:
                events.extend(self._list.failure(self._ledger.cut(text, end)))
                return SectionStep(events, consumed=end, done=True)
        self._ledger.keep(text)
        return SectionStep(events, consumed=len(text))

    def finish(self) -> SectionStep:
        raw = self._ledger.rest()
        if self._state == _LIST:
            events, tail = self._list.finish(raw)
            return SectionStep(events, done=True, tail_raw=tail)
        if self._state == _SKIP:
            return SectionStep(self._list.failure(raw), done=True)
        return SectionStep(done=True, tail_raw=raw)

    def _done(self, events: list[SectionEvent], text: str, pos: int) -> SectionStep:
        return SectionStep(events, consumed=pos, done=True, tail_raw=self._ledger.cut(text, pos))
