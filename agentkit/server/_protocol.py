"""uvicorn's HTTP/1.1 protocol with a deadline on each request's head.

uvicorn closes a connection idle between requests (``timeout_keep_alive``) but waits forever
for a request line and headers that never finish, so a client (or a thousand) can hold
connections open by sending nothing, or one byte a minute. Here each request's head — from
the connection's start, or from the first byte after the previous response — must arrive
within ``header_timeout`` seconds; otherwise the server answers 408 and closes. The body has
its own deadline, in the app (:func:`agentkit.server._intake.read_bytes`). A connection whose
response was sent before its request body was read (413, 408, an early error) is closed
``timeout_keep_alive`` seconds later, however much more body the client sends.

Imported only by ``agentkit serve`` (uvicorn and h11 are the ``serve`` extra's).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["guarded_protocol"]

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: 43\r\n\r\n"
    b"the request headers did not arrive in time\n"
)


class _GuardedH11Protocol(H11Protocol):
    header_timeout: float = 15.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_of: object = None
        self._linger: asyncio.TimerHandle | None = None
        """The request cycle current when the deadline was armed: a new one ends the wait."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self._head_deadline is not None and self.cycle is not self._head_of:
            self._disarm()  # the head is complete: the request runs

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        unread = self.conn.their_state is h11.SEND_BODY
        super().on_response_complete()
        if unread and not self.transport.is_closing():
            # Answered before its body was read: the client gets time to read the answer
            # (closing at once could reset the connection under it), then it is closed,
            # however much more body it sends.
            self._linger = self.loop.call_later(self.timeout_keep_alive, self._close)

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._head_of = self.cycle
        self._head_deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


def guarded_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class, giving each request's head ``header_timeout`` seconds
    (pass it as ``uvicorn.Config(http=...)``)."""
    return type(
        "GuardedH11Protocol", (_GuardedH11Protocol,), {"header_timeout": float(header_timeout)}
    )
