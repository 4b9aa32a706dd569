"""Shared checks for the parser tests: run a parser over any split, rebuild blocks from events."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from agentkit.events import (
    ParseEvent,
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
)
from agentkit.parsing import (
    CallsInReasoning,
    MarkerStreamParser,
    ReasoningSyntax,
    ToolSyntax,
)
from agentkit.transcript import ContentBlock, ToolCallBlock

ParserFactory = Callable[[], MarkerStreamParser]


def factory(
    reasoning: ReasoningSyntax | None,
    tools: ToolSyntax | None,
    *,
    schemas: Mapping[str, Any] | None = None,
    calls_in_reasoning: CallsInReasoning = "end_reasoning",
) -> ParserFactory:
    """A parser factory whose parsers number call ids ``call_0``, ``call_1``, ..."""

    def make() -> MarkerStreamParser:
        ids = itertools.count()
        return MarkerStreamParser(
            reasoning,
            tools,
            tool_schemas=schemas or {},
            calls_in_reasoning=calls_in_reasoning,
            id_factory=lambda: f"call_{next(ids)}",
        )

    return make


def run(make: ParserFactory, chunks: Iterable[str]) -> tuple[list[ContentBlock], list[ParseEvent]]:
    parser = make()
    events: list[ParseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return parser.blocks, events


def content(blocks: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    """Blocks without ``raw`` and ids: what a render/parse round trip must preserve."""
    return [block.model_dump(exclude={"raw", "id", "signature"}) for block in blocks]


def rebuild(events: Sequence[ParseEvent]) -> list[dict[str, Any]]:
    """The blocks a consumer of the events alone would build, checking the event grammar."""
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    deltas: list[str] = []
    for event in events:
        if current is None:
            assert event.index == len(blocks), f"{event!r} does not open block {len(blocks)}"
            if isinstance(event, ReasoningDelta | ReasoningComplete):
                current = {"type": "reasoning", "text": ""}
            elif isinstance(event, TextDelta | TextComplete):
                current = {"type": "text", "text": ""}
            else:
                assert isinstance(event, ToolCallStarted), f"a call must start first: {event!r}"
                current = {"type": "tool_call", "name": event.name, "call_id": event.id}
                continue
        assert event.index == len(blocks), f"{event!r} interleaves with block {len(blocks)}"
        if isinstance(event, ReasoningDelta | TextDelta):
            assert event.type.startswith(current["type"])
            deltas.append(event.text)
        elif isinstance(event, ReasoningComplete | TextComplete):
            assert event.type.startswith(current["type"])
            assert "".join(deltas) == event.text
            current["text"] = event.text
            blocks.append(current)
            current, deltas = None, []
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.id == current["call_id"]
            deltas.append(event.delta)
        else:
            assert isinstance(event, ToolCallComplete), f"unexpected {event!r}"
            assert event.id == current.pop("call_id")
            assert event.name == current["name"]
            if event.error is None:
                assert json.loads("".join(deltas)) == event.arguments, "deltas != arguments"
            current.update(arguments=event.arguments, error=event.error)
            blocks.append(current)
            current, deltas = None, []
    assert current is None, "a block was left open"
    return blocks


def structural(events: Sequence[ParseEvent]) -> list[ParseEvent]:
    """The events whose number and content do not depend on how the output was split."""
    return [e for e in events if not isinstance(e, TextDelta | ReasoningDelta)]


def merge_deltas(events: Sequence[ParseEvent]) -> list[Any]:
    """Events with consecutive argument deltas of one call joined (their split varies)."""
    merged: list[Any] = []
    for event in structural(events):
        last = merged[-1] if merged else None
        if (
            isinstance(event, ToolCallArgumentsDelta)
            and isinstance(last, tuple)
            and last[0] == event.id
        ):
            merged[-1] = (event.id, last[1] + event.delta)
        elif isinstance(event, ToolCallArgumentsDelta):
            merged.append((event.id, event.delta))
        else:
            merged.append(event)
    return merged


def check(
    make: ParserFactory, output: str, chunks: Sequence[str] | None = None
) -> list[ContentBlock]:
    """Parse ``output`` whole and as ``chunks`` (default: one character at a time); assert
    every invariant; return the blocks."""
    blocks, events = run(make, [output])
    assert "".join(b.raw or "" for b in blocks) == output
    assert all(b.raw is not None for b in blocks)
    expected = content(blocks)
    assert _rebuilt_matches(rebuild(events), expected)
    for split in [list(chunks) if chunks is not None else list(output)]:
        assert "".join(split) == output
        other_blocks, other_events = run(make, split)
        assert [b.model_dump() for b in other_blocks] == [b.model_dump() for b in blocks]
        assert merge_deltas(other_events) == merge_deltas(events)
        assert _rebuilt_matches(rebuild(other_events), expected)
    return blocks


def _rebuilt_matches(rebuilt: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    return rebuilt == [{k: v for k, v in b.items() if k != "id"} for b in expected]


@st.composite
def splits(draw: st.DrawFn, text: str) -> list[str]:
    """A random split of ``text`` into chunks of 1-12 characters (token-like)."""
    chunks: list[str] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 12))
        chunks.append(text[pos : pos + size])
        pos += size
    return chunks


def calls(blocks: Sequence[ContentBlock]) -> list[ToolCallBlock]:
    return [b for b in blocks if isinstance(b, ToolCallBlock)]
