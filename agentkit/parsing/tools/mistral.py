"""Mistral tool calls, announced by the ``[TOOL_CALLS]`` special token.

Two generations of the format exist, and the section tells them apart by the first character
after the marker:

* tokenizers before v11 (Mistral-7B-Instruct-v0.3, Mixtral-8x22B, Mistral Nemo): one JSON
  array of ``{"name": ..., "arguments": {...}}`` objects (sometimes with an ``"id"``), e.g.
  ``[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}]``;
* v11 (Mistral Small 3.2, Magistral Small 2506): ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}``,
  the id being the model's own (nine letters and digits), and v13 (Magistral Small 2507+,
  Devstral Small 2507) without the id: ``[TOOL_CALLS]NAME[ARGS]{json}``; ``[TOOL_CALLS]`` is
  repeated before each call. Detokenized text that dropped ``[ARGS]`` (``NAME{json}``) is
  accepted too.

Parsing accepts every form whatever the syntax is called: the syntaxes differ in what they
render (and in the grammar that forces a call, :mod:`agentkit.parsing._constraints`).

A section ends where its JSON ends (there is no closing marker); the next ``[TOOL_CALLS]``
opens the next section. When the text after the marker is not a call, the section ends at the
first character that proves it (an error call keeps what was consumed) and the rest goes back
to the driver as text.

The JSON is scanned incrementally (a list through :mod:`._json_calls`, ``NAME[ARGS]{json}``
through :class:`~agentkit.parsing._json_stream.JsonObjectStream`), so argument deltas stream
as the model writes them and each delta costs time proportional to its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

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
from agentkit.parsing._json_stream import JsonObjectStream
from agentkit.parsing._markers import MISMATCH, Expect
from agentkit.parsing.tools._json_calls import JsonCallList
from agentkit.parsing.tools._ledger import RawLedger
from agentkit.transcript import ToolCallBlock

__all__ = ["MISTRAL", "MISTRAL_LEGACY", "MISTRAL_V11", "MistralToolSyntax"]

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"

_NOT_NAME = re.compile(r"[^\w.\-]")
_NOT_ID = re.compile(r"[^\w\-]")
_MAX_NAME = 256

# Section states.
_LEAD = 0
_NAME = 1
_AFTER_NAME = 2
_ID = 3
_AFTER_ID = 4
_ARGUMENTS = 5
_LIST = 6


class MistralToolSyntax(ToolSyntax):
    """``[TOOL_CALLS]NAME[ARGS]{json}`` (v13), ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}``
    (v11) or ``[TOOL_CALLS]`` + a JSON array of calls (before v11)."""

    name = "mistral"
    start_markers = (TOOL_CALLS,)

    def __init__(self, *, legacy: bool = False, call_ids: bool = False) -> None:
        if legacy and call_ids:
            raise ValueError("the pre-v11 array has no [CALL_ID] form")
        self.legacy = legacy
        """Render the pre-v11 JSON array instead of ``NAME[ARGS]{json}``."""
        self.call_ids = call_ids
        """Render each call's id as v11 does: ``NAME[CALL_ID]ID[ARGS]{json}``."""
        self.name = "mistral_legacy" if legacy else "mistral_v11" if call_ids else "mistral"

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return _MistralSection()

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        """The calls as the encoder writes them (mistral-common's instruct tokenizers: the
        arguments as ``json.dumps(..., ensure_ascii=False)``)."""
        if self.legacy:
            array = [{"name": c.name, "arguments": c.arguments} for c in calls]
            return f"{TOOL_CALLS} {json.dumps(array, ensure_ascii=False)}"
        return "".join(
            f"{TOOL_CALLS}{c.name}{f'{CALL_ID}{c.id}' if self.call_ids else ''}{ARGS}"
            f"{json.dumps(c.arguments, ensure_ascii=False)}"
            for c in calls
        )


MISTRAL = MistralToolSyntax()
"""The v13 rendering (``NAME[ARGS]{json}``); parsing accepts every generation."""

MISTRAL_V11 = MistralToolSyntax(call_ids=True)
"""The v11 rendering (``NAME[CALL_ID]ID[ARGS]{json}``); parsing accepts every generation."""

MISTRAL_LEGACY = MistralToolSyntax(legacy=True)
"""The pre-v11 rendering (``[TOOL_CALLS] [{...}]``); parsing accepts every generation."""


class _MistralSection(ToolSection):
    def __init__(self) -> None:
        self._state = _LEAD
        self._ledger = RawLedger()
        self._word: list[str] = []
        self._word_len = 0
        self._name = ""
        self._call_id: str | None = None
        self._expect = Expect(())
        self._args: JsonObjectStream | None = None
        self._list = JsonCallList()

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        self._ledger.begin()
        pos, n = 0, len(text)
        while pos < n:
            state = self._state
            if state == _LEAD:
                while pos < n and text[pos].isspace():
                    pos += 1
                if pos < n:
                    self._state = _LIST if text[pos] in "[{" else _NAME
            elif state == _LIST:
                pos, status = self._list.feed(text, pos, self._ledger, events)
                if status == "failed":
                    events.extend(self._list.failure(self._ledger.cut(text, pos)))
                    return SectionStep(events, consumed=pos, done=True)
                if status == "done":
                    tail = self._ledger.cut(text, pos)
                    return SectionStep(events, consumed=pos, done=True, tail_raw=tail)
            elif state in (_NAME, _ID):
                pos = self._read_word(text, pos)
                if self._word_len > _MAX_NAME:
                    return self._fail(events, text, pos, "the tool name or id is too long")
            elif state in (_AFTER_NAME, _AFTER_ID):
                pos, found = self._expect.feed(text, pos)
                if found is MISMATCH:
                    wanted = f"{ARGS} and a JSON object after the tool name"
                    return self._fail(events, text, pos, f"expected {wanted}")
                if found == CALL_ID:
                    self._state = _ID
                elif found is not None:
                    self._start_arguments(found == "{", events)
            else:  # _ARGUMENTS
                assert self._args is not None
                delta, pos = self._args.feed(text, pos)
                if delta and self._name:
                    events.append(CallArguments(delta))
                if self._args.done:
                    return self._end_call(events, text, pos)
                if self._args.error is not None:
                    error = f"invalid JSON arguments: {self._args.error}"
                    return self._fail(events, text, pos, error)
        self._ledger.keep(text)
        return SectionStep(events, consumed=n)

    def finish(self) -> SectionStep:
        raw = self._ledger.rest()
        if self._state == _LIST:
            events, tail = self._list.finish(raw)
            return SectionStep(events, done=True, tail_raw=tail)
        where = "inside its JSON arguments" if self._state == _ARGUMENTS else "before its arguments"
        error = f"tool call truncated: the output ended {where}"
        return SectionStep([CallEnd({}, raw, error, name=self._name or None)], done=True)

    def _read_word(self, text: str, pos: int) -> int:
        """Accumulate the tool name (or call id) up to the first character outside it."""
        pattern = _NOT_NAME if self._state == _NAME else _NOT_ID
        match = pattern.search(text, pos)
        end = match.start() if match else len(text)
        # The word is too long at its (_MAX_NAME + 1)th character, wherever the feed ends.
        end = min(end, pos + _MAX_NAME + 1 - self._word_len)
        self._word.append(text[pos:end])
        self._word_len += end - pos
        if match is None or self._word_len > _MAX_NAME:
            return end
        word = "".join(self._word)
        self._word.clear()
        self._word_len = 0
        if self._state == _NAME:
            self._name = word
            self._state = _AFTER_NAME
            self._expect = Expect((ARGS, CALL_ID, "{"))
        else:
            self._call_id = word or None
            self._state = _AFTER_ID
            self._expect = Expect((ARGS, "{"))
        return end

    def _start_arguments(self, opened: bool, events: list[SectionEvent]) -> None:
        self._state = _ARGUMENTS
        self._args = JsonObjectStream(opened=opened)
        if self._name:  # a nameless call is reported when it ends
            events.append(CallStart(self._name, self._call_id))

    def _end_call(self, events: list[SectionEvent], text: str, pos: int) -> SectionStep:
        assert self._args is not None
        raw = self._ledger.cut(text, pos)
        arguments, error = self._args.value()
        if not self._name:
            events.append(CallEnd({}, raw, f"malformed {TOOL_CALLS} call: it has no tool name"))
        else:
            events.append(CallEnd(arguments, raw, error, name=self._name))
        return SectionStep(events, consumed=pos, done=True)

    def _fail(self, events: list[SectionEvent], text: str, pos: int, error: str) -> SectionStep:
        raw = self._ledger.cut(text, pos)
        name = self._name or None
        events.append(CallEnd({}, raw, f"malformed {TOOL_CALLS} call: {error}", name=name))
        return SectionStep(events, consumed=pos, done=True)
