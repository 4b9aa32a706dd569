"""The dispatcher's tracing hook: one span per tool call, opened when the call starts.

A :data:`CallTracer` is called in :meth:`~agentkit.tools.DispatchTurn.start`, at the
moment the call is dispatched (often while the model is still generating), so the span's
start is the dispatch time. The span is then entered in the call's own task, so anything
the tool traces nests under it, and left when the call is done, cancelled included.
Without a tracer the dispatcher takes its untraced path and pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from agentkit.errors import ToolError
from agentkit.events import ToolCallComplete
from agentkit.transcript import ToolResultBlock

__all__ = ["CallSpan", "CallTracer"]


class CallSpan(Protocol):
    """One tool call's span: started already; current inside ``with``; ended on exit."""

    def __enter__(self) -> object: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

    def finish(self, result: ToolResultBlock | None, error: ToolError | None) -> None:
        """The call's result (``error`` when the model or the tool got it wrong)."""


CallTracer = Callable[[ToolCallComplete], CallSpan]
"""Opens the span of a call being dispatched now."""
