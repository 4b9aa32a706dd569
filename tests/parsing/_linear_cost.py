"""A clock-free check that a parser streams in linear time.

Tests never time things (performance is measured by the benchmarks in ``bench/``). Instead,
:class:`WorkMeter` counts the characters a parser's scanning layers are handed, and
:func:`stream_in_chunks` asserts that no feed's work grows with the output so far.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from agentkit.events import ParseEvent, ToolCallArgumentsDelta
from agentkit.parsing import MarkerStreamParser, StreamParser, ToolSyntax
from agentkit.transcript import ContentBlock


class WorkMeter:
    """Counts the characters handed to chosen scanning methods: a deterministic measure of a
    parser's work.

    Each method is counted as it is called: ``len(text) - pos`` for ``method(text, pos=0,
    ...)``, or what ``measure(obj, text, ...)`` says it will scan (with a buffer it keeps).
    """

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        *methods: tuple[type, str] | tuple[type, str, Callable[..., int]],
    ) -> None:
        self.by_method: dict[str, int] = {}
        for owner, name, *how in methods:
            key = f"{owner.__name__}.{name}"
            self.by_method[key] = 0
            measure = how[0] if how else _scanned
            monkeypatch.setattr(owner, name, self._counted(key, getattr(owner, name), measure))

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    def _counted(self, key: str, method: Callable[..., Any], measure: Callable[..., int]) -> Any:
        def counted(obj: object, text: str, *args: Any, **kwargs: Any) -> Any:
            self.by_method[key] += measure(obj, text, *args, **kwargs)
            return method(obj, text, *args, **kwargs)

        return counted


def _scanned(obj: object, text: str, *args: Any, **kwargs: Any) -> int:
    pos = args[0] if args and isinstance(args[0], int) else kwargs.get("pos", 0)
    return len(text) - pos


def section_meter(
    monkeypatch: pytest.MonkeyPatch,
    syntax: ToolSyntax,
    start_marker: str,
    *inner: tuple[type, str] | tuple[type, str, Callable[..., int]],
    section_work: Callable[..., int] | None = None,
) -> WorkMeter:
    """A :class:`WorkMeter` over the driver, ``syntax``'s sections (measured by
    ``section_work`` if they scan more than they are given) and the ``inner`` scanners."""
    section = type(syntax.new_section(start_marker, {}))
    feed = (section, "feed", section_work) if section_work else (section, "feed")
    return WorkMeter(monkeypatch, (MarkerStreamParser, "_run"), feed, *inner)


HELD = 32
"""More than any parser holds back between feeds (a partial marker, a short name)."""


@dataclass
class Streamed:
    """What :func:`stream_in_chunks` saw."""

    events: list[ParseEvent]
    blocks: list[ContentBlock]
    at_half: str
    """The argument text streamed by the time half the output was fed."""

    @property
    def arguments(self) -> Any:
        """The argument deltas, joined and decoded."""
        return json.loads(_deltas(self.events))


def stream_in_chunks(
    parser: StreamParser, output: str, meter: WorkMeter, size: int = 3
) -> Streamed:
    """Feed ``output`` ``size`` characters at a time, asserting that no feed's work grows with
    what came before: each metered method is handed the new delta and at most :data:`HELD`
    characters kept from earlier feeds. Over a long output, a parser that rescanned or rebuilt
    its text would fail this at once."""
    events: list[ParseEvent] = []
    at_half = ""
    worst = 0
    for i in range(0, len(output), size):
        before = meter.total
        events += parser.feed(output[i : i + size])
        worst = max(worst, meter.total - before)
        if not at_half and i + size >= len(output) // 2:
            at_half = _deltas(events)
    events += parser.finish()
    assert all(meter.by_method.values()), f"a metered method never ran: {meter.by_method}"
    assert worst <= len(meter.by_method) * (size + HELD)
    return Streamed(events, parser.blocks, at_half)


def _deltas(events: Sequence[ParseEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ToolCallArgumentsDelta))
