"""A bounded set of worker threads for sync tools, and an account of those that time out.

A sync tool runs in a thread so that it cannot stall the event loop. Python cannot stop a
thread: when the call times out or is cancelled, the caller stops waiting (the call is
*abandoned*) but the function runs on until it returns, and its result is dropped. Each such
thread keeps its place in the pool until then, so a tool that hangs forever costs one thread
forever, never more: once every place is held, new calls wait for one (within their own
timeout) instead of piling up threads without limit.

Threads are daemon threads, one per call, named ``agentkit-tool <tool> <call id>`` so that a
stuck one is easy to find in a thread dump, and a process can exit while an abandoned tool is
still running. Each call runs in a copy of the caller's ``contextvars`` context.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

from agentkit.tools._log import tool_logger

__all__ = ["ThreadUse", "ToolThreads", "default_max_threads", "run_in_thread", "use_threads"]

T = TypeVar("T")

_log = tool_logger()


def default_max_threads() -> int:
    """The standard library's default for thread pools: ``min(32, CPUs + 4)``."""
    return min(32, (os.cpu_count() or 1) + 4)


class ToolThreads:
    """At most ``max_threads`` threads running sync tools, abandoned ones included.

    The counts are safe to read from any thread; they change as calls start and finish.
    """

    def __init__(self, max_threads: int | None = None) -> None:
        self._max = default_max_threads() if max_threads is None else max_threads
        self._lock = threading.Lock()
        self._running = 0
        self._abandoned = 0
        self._abandoned_total = 0
        self._waiters: list[_Wakeup] = []

    @property
    def max_threads(self) -> int:
        return self._max

    @property
    def running(self) -> int:
        """Threads running a tool now, abandoned ones included."""
        return self._running

    @property
    def abandoned(self) -> int:
        """Threads still running a call whose caller stopped waiting (timeout, cancel)."""
        return self._abandoned

    @property
    def abandoned_total(self) -> int:
        """Calls abandoned while their thread ran, since this pool was created."""
        return self._abandoned_total

    async def run(self, fn: Callable[[], T], *, name: str, use: ThreadUse | None = None) -> T:
        """Run ``fn`` in a thread of its own and return (or raise) what it does.

        Waits for a free place first when all are held. Cancelling the caller abandons the
        call: the thread runs on, is counted in :attr:`abandoned`, and a WARNING is logged.
        ``use``, when given, records how the call went (for the timeout's message).
        """
        if use is not None:
            use.waiting = True
        await self._acquire()
        if use is not None:
            use.waiting = False
        job = _Job(fn, contextvars.copy_context(), _Wakeup())
        thread = threading.Thread(target=self._work, args=(job,), name=name, daemon=True)
        try:
            thread.start()
        except BaseException:  # the system refused another thread
            for waiter in self._release():
                waiter.wake()
            raise
        try:
            await job.wakeup.event.wait()
        except BaseException:
            with self._lock:
                abandoned = not job.finished
                if abandoned:
                    job.abandoned = True
                    self._abandoned += 1
                    self._abandoned_total += 1
                    still_running = self._abandoned
            if abandoned:
                if use is not None:
                    use.abandoned = True
                _log.warning(
                    "tool_thread_abandoned",
                    thread=name,
                    tool=use.tool if use is not None else None,
                    call_id=use.call_id if use is not None else None,
                    abandoned_threads=still_running,
                    max_threads=self._max,
                )
            raise
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[return-value]

    async def _acquire(self) -> None:
        while True:
            with self._lock:
                if self._running < self._max:
                    self._running += 1
                    return
                waiter = _Wakeup()
                self._waiters.append(waiter)
            try:
                await waiter.event.wait()
            finally:
                with self._lock, suppress(ValueError):
                    self._waiters.remove(waiter)

    def _release(self) -> list[_Wakeup]:
        """Give a place back; the waiters to wake (each checks again for a free place)."""
        with self._lock:
            self._running -= 1
            waiters, self._waiters = self._waiters, []
        return waiters

    def _work(self, job: _Job[T]) -> None:
        try:
            job.value = job.context.run(job.fn)
        except BaseException as exc:  # handed to the caller, whatever it is
            job.error = exc
        with self._lock:
            job.finished = True
            if job.abandoned:
                self._abandoned -= 1
        waiters = self._release()
        if not job.abandoned:
            job.wakeup.wake()
        for waiter in waiters:
            waiter.wake()


@dataclass
class ThreadUse:
    """How one tool call used a thread: filled in by :meth:`ToolThreads.run`."""

    pool: ToolThreads
    tool: str
    call_id: str
    waiting: bool = False
    """The call is waiting for a free thread (every one is busy)."""
    abandoned: bool = False
    """The caller stopped waiting while the thread ran."""


_current_use: contextvars.ContextVar[ThreadUse | None] = contextvars.ContextVar(
    "agentkit_tool_thread_use", default=None
)
_default_pool: ToolThreads | None = None


@contextmanager
def use_threads(use: ThreadUse) -> Iterator[ThreadUse]:
    """Within the block, sync tools of this task run in ``use.pool`` and report to ``use``."""
    token = _current_use.set(use)
    try:
        yield use
    finally:
        _current_use.reset(token)


async def run_in_thread(fn: Callable[[], T], *, name: str) -> T:
    """Run a sync tool's function in the current dispatcher's threads, or in a shared
    default pool when the tool is invoked directly (``name`` names its thread then)."""
    global _default_pool
    use = _current_use.get()
    if use is not None:
        return await use.pool.run(fn, name=f"agentkit-tool {use.tool} {use.call_id}", use=use)
    if _default_pool is None:
        _default_pool = ToolThreads()
    return await _default_pool.run(fn, name=f"agentkit-tool {name}")


class _Wakeup:
    """An event set from another thread, in the event loop that waits on it."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self._token = anyio.lowlevel.current_token()

    def wake(self) -> None:
        # Scheduled without waiting (anyio's from_thread.run_sync would block this thread
        # until the loop runs it). The loop may have ended since (an abandoned call outliving
        # its run): then nobody is waiting and there is nothing to do.
        token = self._token
        with suppress(Exception):
            token.backend_class.run_sync_soon(self.event.set, (), token.native_token)


class _Job(Generic[T]):
    def __init__(self, fn: Callable[[], T], context: contextvars.Context, wakeup: _Wakeup):
        self.fn = fn
        self.context = context
        self.wakeup = wakeup
        self.value: T | None = None
        self.error: BaseException | None = None
        self.finished = False
        self.abandoned = False
