"""A server-sent-events response that keeps the connection alive and notices disconnects.

The model's events are produced by one task into a queue; the response task writes them out
(whatever has queued up since its last write, in one write), and writes a ``ping`` whenever
nothing came for ``ping_interval`` seconds. A client that disconnects cancels both: the
producer's engine stream is closed, which aborts the request in the engine. Nothing else is
left running.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing

import anyio
from starlette.types import Receive, Scope, Send

from agentkit._channel import EventChannel
from agentkit._logging import get_logger

__all__ = ["EventStreamResponse"]

_log = get_logger("agentkit.server")


class EventStreamResponse:
    """An ASGI response streaming ``chunks`` (SSE bytes), with ``ping()`` bytes while idle."""

    def __init__(
        self,
        chunks: AsyncGenerator[bytes, None],
        *,
        ping: Callable[[], bytes],
        ping_interval: float,
        on_disconnect: Callable[[], None] | None = None,
        cleanup: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._chunks = chunks
        self._ping = ping
        self._interval = ping_interval
        self._on_disconnect = on_disconnect
        self._cleanup = cleanup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._respond(receive, send)
        finally:
            # Whatever happened (a disconnect before the body even started included), the
            # model's stream is closed: no generation outlives its consumer.
            if self._cleanup is not None:
                with anyio.CancelScope(shield=True):
                    await self._cleanup()

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
        # One frame a token crosses this queue: sending never waits and a frame already
        # queued is taken without a pass of the event loop (see EventChannel).
        items = EventChannel[bytes]()
        async with anyio.create_task_group() as group:

            async def produce() -> None:
                try:
                    async with aclosing(self._chunks) as chunks:
                        async for chunk in chunks:
                            if chunk:
                                items.send_nowait(chunk)
                finally:
                    items.close()

            async def watch() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        _log.info("client disconnected; aborting the request")
                        if self._on_disconnect is not None:
                            self._on_disconnect()
                        group.cancel_scope.cancel()
                        return

            group.start_soon(produce)
            group.start_soon(watch)
            try:
                while True:
                    try:
                        body = await self._next_body(items)
                    except anyio.EndOfStream:
                        break
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            finally:
                items.discard()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()

    async def _next_body(self, items: EventChannel[bytes]) -> bytes:
        """What has queued up, joined; or the next frame, waiting for it; or a ping after
        ``ping_interval`` seconds with nothing. :class:`anyio.EndOfStream` at the end."""
        queued = items.drain()
        if queued:
            return b"".join(queued)
        with anyio.move_on_after(self._interval):
            first = await items.receive()
            return b"".join([first, *items.drain()])
        return self._ping()
