"""A server-sent-events response that keeps the connection alive, notices disconnects, holds
generation back for slow readers and ends every failure with an error event.

The model's events are produced by one task into a bounded queue; the response task writes
them out (whatever has queued up since its last write, in one write), and writes a ``ping``
whenever nothing came for ``ping_interval`` seconds. What ends a response early:

* The client disconnects: both tasks are cancelled, the producer's engine stream is closed,
  which aborts the request in the engine.
* The client stops reading: the queue fills, and generation waits for it (a client that reads
  nothing holds at most the queue's bytes, not its whole output). A single write that waits
  longer than ``stall_timeout`` drops the client the same way as a disconnect.
* The server cancels the response (shutting down): the same, from outside; a client still
  reading is first sent ``farewell()``, the wire format's error frames (a retryable one).
* The producer fails: ``fail(error)`` is written, the frames that end the stream in the wire
  format's own way, so the client reports an error rather than a normal end.

``on_abort(reason)`` hears about each early end; ``cleanup`` runs whatever happened.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing

import anyio
from starlette.types import Message, Receive, Scope, Send

from agentkit._logging import get_logger
from agentkit.server._frame_queue import FrameQueue
from agentkit.server._stats import AbortReason

__all__ = ["DEFAULT_QUEUE_BYTES", "EventStreamResponse"]

_log = get_logger("agentkit.server")

DEFAULT_QUEUE_BYTES = 64 * 1024
"""How far generation may run ahead of a client's reading, in bytes of frames."""
_FAREWELL_WAIT = 1.0
"""Seconds the farewell frames of a cancelled stream may wait for the client."""


class EventStreamResponse:
    """An ASGI response streaming ``chunks`` (SSE bytes), with ``ping()`` bytes while idle.

    Args:
        chunks: the frames, in order.
        ping: a keep-alive frame, written after ``ping_interval`` seconds with nothing.
        fail: the frames that end the stream after ``chunks`` raised the given exception;
            ``None`` lets the exception propagate (the connection is then cut).
        farewell: the frames sent (if the client takes them at once) when the server cancels
            the response, shutting down.
        on_disconnect: called when the client disconnects.
        on_abort: called with the reason when the response ends before it is complete.
        cleanup: awaited at the end, whatever happened (shielded from cancellation).
        queue_bytes: how many bytes of frames may wait for the client.
        stall_timeout: seconds one write may wait for the client before it is dropped;
            ``None``: no limit.
    """

    def __init__(
        self,
        chunks: AsyncGenerator[bytes, None],
        *,
        ping: Callable[[], bytes],
        ping_interval: float,
        fail: Callable[[Exception], bytes] | None = None,
        farewell: Callable[[], bytes] | None = None,
        on_disconnect: Callable[[], None] | None = None,
        on_abort: Callable[[AbortReason], None] | None = None,
        cleanup: Callable[[], Awaitable[None]] | None = None,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        stall_timeout: float | None = None,
    ) -> None:
        self._chunks = chunks
        self._ping = ping
        self._interval = ping_interval
        self._fail = fail
        self._farewell = farewell
        self._on_disconnect = on_disconnect
        self._on_abort = on_abort
        self._cleanup = cleanup
        self._queue_bytes = queue_bytes
        self._stall_timeout = stall_timeout
        self._ended: AbortReason | None = None
        self._complete = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._respond(receive, send)
        except anyio.get_cancelled_exc_class():
            self._end_early("cancelled")
            raise
        finally:
            # Whatever happened (a disconnect before the body even started included), the
            # model's stream is closed: no generation outlives its consumer.
            if self._cleanup is not None:
                with anyio.CancelScope(shield=True):
                    await self._cleanup()

    def _end_early(self, reason: AbortReason) -> None:
        if self._complete or self._ended is not None:
            return
        self._ended = reason
        if self._on_abort is not None:
            self._on_abort(reason)

    async def _respond(self, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        frames = FrameQueue(self._queue_bytes)
        async with anyio.create_task_group() as group:

            async def produce() -> None:
                try:
                    async with aclosing(self._chunks) as chunks:
                        async for chunk in chunks:
                            if chunk:
                                await frames.put(chunk)
                except Exception as error:
                    if self._fail is None:
                        raise
                    await frames.put(self._fail(error))
                finally:
                    frames.close()

            async def watch() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        _log.debug("client disconnected; aborting the request")
                        if self._on_disconnect is not None:
                            self._on_disconnect()
                        self._end_early("disconnect")
                        group.cancel_scope.cancel()
                        return

            group.start_soon(produce)
            group.start_soon(watch)
            try:
                while True:
                    try:
                        body = await self._next_body(frames)
                    except anyio.EndOfStream:
                        break
                    message = {"type": "http.response.body", "body": body, "more_body": True}
                    if not await self._write(send, message):
                        # Dropped: the response is left incomplete (the server then closes
                        # the connection), never ended as if it were whole.
                        self._end_early("stalled")
                        group.cancel_scope.cancel()
                        return
            except anyio.get_cancelled_exc_class():
                # Noted at once, before the tasks wind down: a server whose shutdown grace
                # ran out exits soon after it cancels (a disconnect was noted already).
                self._end_early("cancelled")
                if self._ended == "cancelled":
                    await self._say_farewell(send)
                raise
            finally:
                frames.discard()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self._complete = True
            group.cancel_scope.cancel()

    async def _say_farewell(self, send: Send) -> None:
        """Tell a client whose stream the server cancels why it ends, if it reads at once
        (a client that stopped reading is not waited for)."""
        if self._farewell is None:
            return
        body = self._farewell()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_FAREWELL_WAIT):
            await send({"type": "http.response.body", "body": body, "more_body": True})

    async def _write(self, send: Send, message: Message) -> bool:
        """Send ``message``; ``False`` if the client took longer than the stall deadline."""
        with anyio.move_on_after(self._stall_timeout) as waited:
            await send(message)
        if waited.cancelled_caught:
            _log.warning(
                "a streaming client stopped reading; dropping it", stall_timeout=self._stall_timeout
            )
            return False
        return True

    async def _next_body(self, frames: FrameQueue) -> bytes:
        """What has queued up, joined; or the next frame, waiting for it; or a ping after
        ``ping_interval`` seconds with nothing. :class:`anyio.EndOfStream` at the end."""
        queued = frames.drain()
        if queued:
            return b"".join(queued)
        with anyio.move_on_after(self._interval):
            first = await frames.receive()
            return b"".join([first, *frames.drain()])
        return self._ping()
