"""What the :class:`~agentkit.parsing.StreamParser` implementations share: one turn's life.

A parser takes deltas until :meth:`~TurnParser.finish`, and refuses them after (a parser
parses one turn). Between feeds it holds back the end of a delta that may begin a marker;
formatting whitespace waits in ``_pending`` for the block that follows it, or goes to the last
block when the output ends. Completed blocks and the events that announce them are made here,
so that both drivers (:class:`~agentkit.parsing.MarkerStreamParser` and the whole-stream
formats, such as :class:`~agentkit.parsing.harmony.HarmonyParser`) report them the same way.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal

from agentkit.events import (
    ParseEvent,
    ReasoningComplete,
    TextComplete,
    TextDelta,
    ToolCallComplete,
)
from agentkit.transcript import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = ["TurnParser"]


def _default_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


class TurnParser(ABC):
    """The lifecycle and block bookkeeping of a parser of one model turn.

    Subclasses scan in :meth:`_run` (held text + the new delta) and close what is still open
    in :meth:`_finish`. ``id_factory`` makes ids for calls whose format carries none.
    """

    def __init__(self, id_factory: Callable[[], str] | None) -> None:
        self._id_factory = id_factory or _default_id
        self._held = ""
        """The end of the last delta, held back because it may begin a marker."""
        self._pending: list[str] = []
        """Formatting raw (whitespace between structures, a stray end marker) owned by the
        next block."""
        self._blocks: list[ReasoningBlock | TextBlock | ToolCallBlock] = []
        self._finished = False

    @property
    def blocks(self) -> list[ContentBlock]:
        return list(self._blocks)

    def feed(self, delta: str) -> list[ParseEvent]:
        self._check_live("feed")
        out: list[ParseEvent] = []
        if delta:
            buf = self._held + delta
            self._held = ""
            self._run(buf, out)
        return out

    def finish(self) -> list[ParseEvent]:
        self._check_live("finish")
        self._finished = True
        out: list[ParseEvent] = []
        self._finish(out)
        if self._pending:
            extra = "".join(self._pending)
            self._pending.clear()
            if self._blocks:
                last = self._blocks[-1]
                self._blocks[-1] = last.model_copy(update={"raw": (last.raw or "") + extra})
            else:  # whitespace-only output: keep it as text so that nothing is lost
                out += [TextDelta(index=0, text=extra), TextComplete(index=0, text=extra)]
                self._blocks.append(TextBlock(text=extra, raw=extra))
        return out

    @abstractmethod
    def _run(self, buf: str, out: list[ParseEvent]) -> None:
        """Process ``buf`` (held text + the new delta) to its end, holding back in
        ``_held`` only what may begin a marker."""

    @abstractmethod
    def _finish(self, out: list[ParseEvent]) -> None:
        """The output ended: flush held text and close what is open (the formatting still
        pending is then given to the last block)."""

    def _check_live(self, method: str) -> None:
        if self._finished:
            raise RuntimeError(
                f"{type(self).__name__}.{method}() called after finish(): "
                "a parser parses one model turn; create a new one for the next turn"
            )

    def _add_content(
        self,
        kind: Literal["text", "reasoning"],
        index: int,
        text: str,
        raw: str,
        out: list[ParseEvent],
    ) -> None:
        """Complete a text or reasoning block."""
        if kind == "text":
            self._blocks.append(TextBlock(text=text, raw=raw))
            out.append(TextComplete(index=index, text=text))
        else:
            self._blocks.append(ReasoningBlock(text=text, raw=raw))
            out.append(ReasoningComplete(index=index, text=text))

    def _add_call(
        self,
        index: int,
        call_id: str,
        name: str,
        arguments: dict[str, Any],
        raw: str,
        error: str | None,
        out: list[ParseEvent],
    ) -> None:
        """Complete a tool call block."""
        block = ToolCallBlock(id=call_id, name=name, arguments=arguments, raw=raw, error=error)
        self._blocks.append(block)
        out.append(
            ToolCallComplete(
                index=index,
                id=call_id,
                name=name,
                arguments=block.arguments,
                raw=raw,
                error=error,
            )
        )
