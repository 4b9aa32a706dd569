"""Plain ``async for event in agent.stream(...)``, without ``async with``: the run in a task of
its own, stopped when the loop is left.

An async generator cannot own the run's task group here: breaking out of the loop leaves the
generator suspended, and the event loop finalises it later in *another* task, where leaving
the task group's cancel scope is an error that kills the program. So the plain path runs the
producer as a task that no cancel scope of the consumer's owns, and the iterator is an
object, not a generator: when the loop ends early (``break``, an exception, the iterator
dropped or :meth:`DetachedIteration.aclose` called) it cancels that task, which aborts the
engine request and cancels running tools as leaving ``async with`` does. The task holds no
reference to the iterator, so dropping the iterator is what stops it, at once in CPython.

Only asyncio has tasks that can be created outside every task group (:func:`supported`);
elsewhere the agent keeps its async generator, which is correct when the loop runs to the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

from agentkit._channel import EventChannel
from agentkit._logging import get_logger

__all__ = ["DetachedIteration", "supported"]

T = TypeVar("T")

_log = get_logger("agentkit.agent")


def supported() -> bool:
    """Whether the caller runs in an asyncio task (which can start a detached producer)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio event loop is running (trio)
        return False


class _Outcome:
    """What the producer task leaves for the iterator: shared, so that the task does not
    keep the iterator alive."""

    __slots__ = ("abandoned", "crash", "done")

    def __init__(self) -> None:
        self.crash: Exception | None = None
        self.done = anyio.Event()
        self.abandoned = False
        """The consumer stopped iterating: nobody will read ``crash``."""


async def _run_producer(
    produce: Callable[[EventChannel[T]], Awaitable[None]],
    channel: EventChannel[T],
    outcome: _Outcome,
) -> None:
    try:
        await produce(channel)
    except Exception as crash:
        # Not the run's own errors (the producer keeps those for the consumer): a bug or a
        # callback's failure. The consumer raises it; with no consumer left, it is logged.
        outcome.crash = crash
        if outcome.abandoned:
            _log.error("run_crashed_after_its_consumer_left", error=repr(crash))
    finally:
        outcome.done.set()


class DetachedIteration(Generic[T]):
    """Iterates what ``produce(channel)`` sends, ``produce`` running in its own task.

    ``end()`` is awaited once the producer has closed the channel; it raises to end the
    iteration with an error (the run's error, a cancellation) and returns to end it normally.
    The task starts at the first ``__anext__``.
    """

    def __init__(
        self,
        produce: Callable[[EventChannel[T]], Awaitable[None]],
        end: Callable[[], Awaitable[None]],
        *,
        name: str,
    ) -> None:
        self._produce = produce
        self._end = end
        self._name = name
        self._channel = EventChannel[T]()
        self._outcome = _Outcome()
        self._task: asyncio.Task[None] | None = None
        self._finished = False

    def __aiter__(self) -> DetachedIteration[T]:
        return self

    async def __anext__(self) -> T:
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                _run_producer(self._produce, self._channel, self._outcome), name=self._name
            )
        try:
            return await self._channel.receive()
        except anyio.EndOfStream:
            pass
        except BaseException:
            # The consumer itself was cancelled (or interrupted) while waiting: the run
            # stops with it.
            self._stop()
            raise
        self._finished = True
        await self._outcome.done.wait()
        if self._outcome.crash is not None:
            raise self._outcome.crash
        await self._end()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop the run (abort the engine request, cancel the tools) and wait until it has."""
        self._finished = True
        if self._task is None:
            return
        self._stop()
        with anyio.CancelScope(shield=True):
            await self._outcome.done.wait()

    def _stop(self) -> None:
        self._outcome.abandoned = True
        self._channel.discard()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # the event loop is already closed
                task.cancel(f"the consumer of {self._name} stopped iterating")

    def __del__(self) -> None:
        # The loop was left early (``break``) and the iterator dropped: stop the run now.
        if not self._finished:
            self._stop()
