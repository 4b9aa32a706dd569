"""The bounded queue between a stream's generation and the client's connection.

Generation runs ahead of the client by at most ``limit`` bytes: past that, :meth:`put` waits
until the writer has taken what is queued, so a client that reads slowly slows its own
generation instead of having it produced and held in memory (a client reading nothing would
otherwise hold its whole output here). Below the limit a frame goes in without a pass of the
event loop, and the writer takes everything queued in one :meth:`drain`, as
:class:`~agentkit._channel.EventChannel` does for agent streams: one frame a token crosses it.
"""

from __future__ import annotations

from collections import deque

import anyio

__all__ = ["FrameQueue"]


class FrameQueue:
    """Frames (bytes) from one producer to one consumer, at most ``limit`` bytes queued (and
    one frame more: a frame larger than the limit still goes through an empty queue)."""

    __slots__ = ("_closed", "_discarding", "_frames", "_limit", "_readable", "_size", "_writable")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the queue limit must be at least 1 byte, not {limit}")
        self._limit = limit
        self._frames: deque[bytes] = deque()
        self._size = 0
        self._closed = False
        self._discarding = False
        self._readable: anyio.Event | None = None
        self._writable: anyio.Event | None = None

    @property
    def queued_bytes(self) -> int:
        return self._size

    async def put(self, frame: bytes) -> None:
        """Queue ``frame``, first waiting while the queue is full."""
        if self._closed:
            raise anyio.ClosedResourceError("the frame queue is closed")
        while self._size >= self._limit and not self._discarding:
            if self._writable is None:
                self._writable = anyio.Event()
            await self._writable.wait()
        if self._discarding:
            return
        self._frames.append(frame)
        self._size += len(frame)
        self._wake_reader()

    def close(self) -> None:
        """No more frames: the consumer ends after the queued ones."""
        self._closed = True
        self._wake_reader()

    def discard(self) -> None:
        """The consumer is gone: drop what is queued, and what is put from now on."""
        self._discarding = True
        self._frames.clear()
        self._size = 0
        self._wake_writer()

    def drain(self) -> list[bytes]:
        """Every queued frame, at once (possibly none); the producer may go on."""
        frames = list(self._frames)
        self._frames.clear()
        self._size = 0
        self._wake_writer()
        return frames

    async def receive(self) -> bytes:
        """The next frame, waiting for one; :class:`anyio.EndOfStream` once closed and empty."""
        while not self._frames:
            if self._closed:
                raise anyio.EndOfStream
            if self._readable is None:
                self._readable = anyio.Event()
            await self._readable.wait()
        frame = self._frames.popleft()
        self._size -= len(frame)
        if self._size < self._limit:
            self._wake_writer()
        return frame

    def _wake_reader(self) -> None:
        event, self._readable = self._readable, None
        if event is not None:
            event.set()

    def _wake_writer(self) -> None:
        event, self._writable = self._writable, None
        if event is not None:
            event.set()
