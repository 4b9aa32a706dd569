"""Noticing an async tool that holds the event loop.

An async tool runs on the event loop, in steps: from one ``await`` that suspends to the next.
While a step runs nothing else does, not the model's stream, not other tools, and not the
timeout that should stop the tool: a deadline is only acted on when the loop gets control
back. So a blocking call inside an async tool (``time.sleep``, ``requests.get``, a long
computation) cannot be interrupted; the most the runtime can do is notice and say so.

:func:`watch_steps` drives a coroutine exactly as ``await`` would, timing each step, and
reports the first one that runs longer than a threshold (once per call, with its length).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["watch_steps"]

T = TypeVar("T")


def watch_steps(
    coroutine: Coroutine[Any, Any, T], threshold: float, report: Callable[[float], None]
) -> _Watched[T]:
    """An awaitable running ``coroutine`` that calls ``report(seconds)`` the first time one
    of its steps holds the loop for more than ``threshold`` seconds."""
    return _Watched(coroutine, threshold, report)


class _Watched(Generic[T]):
    def __init__(
        self,
        coroutine: Coroutine[Any, Any, T],
        threshold: float,
        report: Callable[[float], None],
    ) -> None:
        self._coroutine = coroutine
        self._threshold = threshold
        self._report: Callable[[float], None] | None = report

    def _timed(self, started: float) -> None:
        elapsed = time.perf_counter() - started
        if self._report is not None and elapsed > self._threshold:
            report, self._report = self._report, None
            report(elapsed)

    def __await__(self) -> Generator[Any, Any, T]:
        inner = self._coroutine.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                yielded = inner.send(sent) if thrown is None else inner.throw(thrown)
            except StopIteration as stop:
                self._timed(started)
                result: T = stop.value
                return result
            except BaseException:
                self._timed(started)
                raise
            self._timed(started)
            try:
                sent = yield yielded
                thrown = None
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # delivered to the tool, as `await` would
                sent, thrown = None, exc
