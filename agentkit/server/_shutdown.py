"""The server's shutdown: stop taking turns, let those in flight finish within a bound, then
abort the rest, each in its API's own way.

When the HTTP server begins to shut down (SIGTERM: it has closed its listening sockets and
asked each open connection to close once its response is done), :meth:`Shutdown.begin` is
called and a drain starts:

1. **No new turn.** A request that asks for a slot from now on is refused with 503
   ``overloaded_error`` in its API's shape (retryable: clients try another replica).
2. **Turns in flight may finish** for up to ``timeout`` seconds (``--shutdown-timeout``).
3. **At the bound, each remaining turn is aborted** (:meth:`Abortable.abort`): its engine
   request is aborted; a stream gets its API's error frames (Anthropic's ``error`` event,
   Chat's error chunk and ``[DONE]``, Responses' ``response.failed``), never an end that
   looks finished; a request whose headers are not sent yet (non-streaming, or a stream
   waiting for its first token) is answered 503. A turn that reaches a slot after the drain
   ended (its request was being prepared) is aborted as it starts.
4. The aborted turns get ``wind_down`` seconds to deliver those frames to clients that read.

How the drain is started is the HTTP server's business (:mod:`._serve` hooks uvicorn's
connection shutdown); everything the server's requests need is here, so an app built
without ``agentkit serve`` can drain the same way (``await shutdown.drain()``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Protocol

import anyio

from agentkit._logging import get_logger
from agentkit.server._errors import ApiError

__all__ = ["SHUTTING_DOWN", "Abortable", "Shutdown"]

_log = get_logger("agentkit.server")

SHUTTING_DOWN = "the server is shutting down; retry the request"
"""What a client refused or aborted by a shutdown is told."""


class Abortable(Protocol):
    """A turn in flight that a shutdown can abort (:class:`~._lifecycle.TurnWatch`)."""

    def abort(self) -> None:
        """Abort the turn now: its engine request, and its response in the API's way."""


class Shutdown:
    """The drain of one server's turns (one per :class:`~._context.ServerConfig`).

    Args:
        timeout: seconds turns in flight may take to finish once the drain begins.
        wind_down: seconds the aborted turns then get to end (to send their error frames).
    """

    def __init__(self, timeout: float = 10.0, *, wind_down: float = 3.0) -> None:
        if timeout < 0 or wind_down < 0:
            raise ValueError("shutdown timeouts must be >= 0")
        self.timeout = timeout
        self.wind_down = wind_down
        self._in_flight = 0
        self._closing = False
        self._over = False
        self._turns: weakref.WeakSet[Abortable] = weakref.WeakSet()
        self._task: asyncio.Task[int] | None = None
        self._idle_event: anyio.Event | None = None

    @property
    def closing(self) -> bool:
        """Whether the drain has begun (no new turn is admitted)."""
        return self._closing

    @property
    def in_flight(self) -> int:
        """Turns admitted and not yet ended."""
        return self._in_flight

    def admit(self) -> Callable[[], None]:
        """Count a turn in flight; returns its (idempotent) end. 503 ``overloaded_error``
        once the drain has begun."""
        if self._closing:
            raise ApiError("overloaded_error", SHUTTING_DOWN, status=503)
        self._in_flight += 1
        ended = False

        def end() -> None:
            nonlocal ended
            if not ended:
                ended = True
                self._in_flight -= 1
                if not self._in_flight and self._idle_event is not None:
                    self._idle_event.set()

        return end

    def track(self, turn: Abortable) -> None:
        """Abort ``turn`` if the drain reaches its bound before ``turn`` ends (or now, if it
        has). Turns are held weakly: one that ends without :meth:`forget` is dropped."""
        if self._over:
            turn.abort()
        else:
            self._turns.add(turn)

    def forget(self, turn: Abortable) -> None:
        """``turn`` has ended: nothing to abort."""
        self._turns.discard(turn)

    def begin(self) -> None:
        """Start the drain in the running event loop (once; later calls do nothing). New
        turns are refused from now on, before the drain's task first runs."""
        if self._closing:
            return
        self._closing = True
        self._task = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self) -> int:
        """Refuse new turns, wait up to :attr:`timeout` seconds for those in flight, then
        abort the rest and wait up to :attr:`wind_down` seconds for them to end. Returns how
        many turns were aborted."""
        self._closing = True
        if self._in_flight:
            _log.info(
                "shutting down: waiting for turns in flight",
                turns=self._in_flight,
                timeout=self.timeout,
            )
        with anyio.move_on_after(self.timeout):
            await self._idle()
        self._over = True
        remaining = list(self._turns)
        self._turns.clear()
        if remaining:
            _log.warning(
                "shutting down: aborting the turns still in flight",
                turns=len(remaining),
                timeout=self.timeout,
            )
        for turn in remaining:
            turn.abort()
        with anyio.move_on_after(self.wind_down):
            await self._idle()
        return len(remaining)

    async def wait(self) -> None:
        """Wait for a drain :meth:`begin` started, if any, to end."""
        if self._task is not None:
            await self._task

    async def _idle(self) -> None:
        """Wait until no turn is in flight."""
        if self._in_flight:
            self._idle_event = anyio.Event()
            await self._idle_event.wait()
