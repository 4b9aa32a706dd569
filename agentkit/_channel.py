"""The queue between a producer task and its one consumer: an agent run's events, or a
streaming response's SSE frames.

One event a token crosses it, so its cost is part of every token's. anyio's memory object
stream is general (many senders and receivers, back-pressure, cancellation points on every
call), and its ``receive`` checkpoints even when an item is waiting: one extra pass of the
event loop per token on top of the consumer's wake-up. This queue is what the run needs and
no more: unbounded (sending never waits, so the producer never yields per event), one
consumer, and a receive that returns a waiting item at once and sleeps only on an empty queue.

The consumer sleeps once a token (the producer's chunk wakes it), so its wait is the hot path
too: on asyncio it awaits a bare future of the running loop, which ``_wake`` resolves, rather
than a new ``anyio.Event`` (a backend look-up and an ``asyncio.Event`` with its own future and
waiter list, each time); ``bench/frontend.py`` measures the difference. Other backends (trio)
keep the ``anyio.Event``.
"""

from __future__ import annotations

import asyncio
from asyncio import get_running_loop
from collections import deque
from typing import Generic, TypeVar

import anyio

__all__ = ["EventChannel"]

T = TypeVar("T")


class EventChannel(Generic[T]):
    """An unbounded queue from one producer to one consumer.

    ``send_nowait`` never blocks. After :meth:`close` (the producer is done) the consumer
    drains what is queued, then :meth:`receive` raises :class:`anyio.EndOfStream`. After
    :meth:`discard` (the consumer is gone) items sent are dropped: no one can read them.
    """

    __slots__ = ("_closed", "_discarding", "_items", "_loop", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | anyio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The consumer's asyncio loop, found at its first wait; None on other backends."""
        self._closed = False
        self._discarding = False

    def send_nowait(self, item: T) -> None:
        if self._closed:
            raise anyio.ClosedResourceError("the channel is closed")
        if self._discarding:
            return
        self._items.append(item)
        self._wake()

    async def send(self, item: T) -> None:
        """:meth:`send_nowait`, for callers that take an async callback."""
        self.send_nowait(item)

    def close(self) -> None:
        """No more items: the consumer ends after the queued ones."""
        self._closed = True
        self._wake()

    def discard(self) -> None:
        """The consumer is gone: drop what is queued and what is sent from now on."""
        self._discarding = True
        self._items.clear()

    def drain(self) -> list[T]:
        """Every queued item, at once (possibly none)."""
        items = list(self._items)
        self._items.clear()
        return items

    async def receive(self) -> T:
        """The next item, waiting for one if none is queued."""
        while not self._items:
            if self._closed:
                raise anyio.EndOfStream
            await self._wait()
        return self._items.popleft()

    async def _wait(self) -> None:
        """Sleep until the next :meth:`_wake` (one consumer: one waiter at a time)."""
        loop = self._loop
        if loop is None:
            try:
                loop = self._loop = get_running_loop()
            except RuntimeError:  # not asyncio (trio): anyio's portable event
                event = anyio.Event()
                self._waiter = event
                await event.wait()
                return
        future: asyncio.Future[None] = loop.create_future()
        self._waiter = future
        try:
            await future
        finally:
            # Cancelled while waiting: a later wait must not find this (cancelled) future.
            if self._waiter is future:
                self._waiter = None

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        if isinstance(waiter, asyncio.Future):
            if not waiter.done():
                waiter.set_result(None)
        else:
            waiter.set()
