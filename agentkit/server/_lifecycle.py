"""One model turn's response, whatever the client does: the guard every adapter puts around it.

The three wire formats differ in their frames, not in what can go wrong after a request is
accepted, so one :class:`TurnWatch` handles it for all of them:

* **The client leaves.** Streaming or not, the connection is watched while the model
  generates; a disconnect cancels the generation, which closes the engine stream and aborts
  the request, so no work outlives its client and its slot is released at once.
* **The client stops reading** (streaming): generation waits for it behind a bounded queue,
  and a client that reads nothing past the stall deadline is dropped and its request aborted
  (:class:`~agentkit.server._sse.EventStreamResponse`).
* **The server shuts down** (:mod:`._shutdown`): a turn still in flight at the shutdown's
  bound is aborted the same way; a streaming client is told so with the wire format's
  ``overloaded_error`` frames, a client whose headers are not sent yet gets a 503 in its
  API's shape (``overloaded_error``), and both retry. A request cancelled from outside
  (uvicorn's backstop deadline) is aborted too; a stream still says farewell the same way.
* **The turn fails after the 200**: the stream ends with the wire format's own error frames
  (given by the adapter as ``fail(kind, message)``), never as if it were complete.

Every early end is counted in :class:`~agentkit.server._stats.ServerStats`; one that threw
generated tokens away is logged at WARNING, with how many. Every turn, however it ends, is
recorded once in :class:`~agentkit.server._metrics.ServerMetrics` (tokens, time to first
token) and, when instrumentation is on, ends its ``chat`` span (:mod:`agentkit.telemetry`).
Records name the turn by ``turn_id`` (the engine's request id, the response's id):
``request_id`` is the HTTP request's, bound for every record by
:class:`~agentkit.server._request_ids.RequestIds`.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import aclosing

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from agentkit._logging import get_logger
from agentkit.errors import (
    AgentkitError,
    ConfigurationError,
    ContextWindowExceeded,
    EngineError,
    EngineOverloaded,
    MaxTurnsExceeded,
    OutputValidationError,
    UsageLimitExceeded,
)
from agentkit.events import ParseEvent, TurnUsage
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._runtime import ModelTurn, first_event
from agentkit.server._shutdown import SHUTTING_DOWN
from agentkit.server._sse import EventStreamResponse
from agentkit.server._stats import AbortReason
from agentkit.telemetry._hooks import ChatTrace
from agentkit.transcript import Message as TranscriptMessage

__all__ = ["TurnWatch", "api_error", "client_gone", "failure"]

_log = get_logger("agentkit.server")

_END_WAIT = 1.0
"""Seconds the end of a stream aborted by a shutdown may wait for the client."""


def api_error(error: Exception) -> ApiError | None:
    """``error`` as the API error a client gets, or ``None`` for an error that is a bug (before
    the 200 it propagates: a 500 from the framework, logged with its traceback). The one
    mapping of agentkit's errors to the APIs' error kinds, statuses and codes: an HTTP error
    before the 200, the API's error frames after it (:func:`failure`).

    A hosted agent's run stopped by one of its limits (``max_turns``, its ``UsageLimits``, an
    answer that failed its ``output_type``) is a 422 ``invalid_request_error``: the request
    was read and worked on, the agent cannot finish it within its limits, and repeating it
    unchanged would stop the same way (a 5xx would invite the SDKs' automatic retries). The
    ``code`` names the kind of limit, the message the limit and its value."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, ContextWindowExceeded):
        return ApiError("invalid_request_error", str(error), code="context_length_exceeded")
    if isinstance(error, ConfigurationError):
        return ApiError("invalid_request_error", str(error))
    if isinstance(error, EngineOverloaded):
        return ApiError("overloaded_error", str(error))
    if isinstance(error, EngineError):
        return ApiError("api_error", str(error))
    if isinstance(error, MaxTurnsExceeded):
        return _stopped(
            f"the model was still calling tools after the agent's max_turns={error.max_turns} "
            "turns",
            "max_turns_exceeded",
        )
    if isinstance(error, UsageLimitExceeded):
        return _stopped(
            f"the run reached the agent's usage limit {error.limit}={error.maximum:g} "
            f"({error.value:g})",
            "usage_limit_exceeded",
        )
    if isinstance(error, OutputValidationError):
        return _stopped(
            f"the agent's final answer is not a valid {error.output_type} after "
            f"{error.attempts} attempt(s): " + "; ".join(error.problems),
            "output_validation_failed",
        )
    return None


def _stopped(message: str, code: str) -> ApiError:
    return ApiError(
        "invalid_request_error", f"the agent's run stopped: {message}", status=422, code=code
    )


def failure(error: Exception) -> ApiError:
    """What a client is told for ``error`` after the 200 (:func:`api_error`). A failure
    agentkit did not foresee is named by its type only: its message may hold what a client
    should not see (paths, internals)."""
    mapped = api_error(error)
    if mapped is not None:
        return mapped
    return ApiError(
        "api_error",
        f"internal server error ({type(error).__name__}); the response ended early",
    )


class TurnWatch:
    """Guards one accepted request's turn until its response is complete.

    Args:
        context: the server's context (its settings and counters).
        turn: the turn being answered.
        release: releases the request's slot (idempotent); called when the turn is over.
        trace: the turn's ``chat`` span (:func:`agentkit.telemetry._hooks.turn_trace`),
            ended once with the turn's usage and finish reason, or ``None``.

    The server's shutdown aborts the turn through :meth:`abort` if it is still in flight at
    the shutdown's bound.
    """

    def __init__(
        self,
        context: ServerContext,
        turn: ModelTurn,
        release: Callable[[], None],
        trace: ChatTrace | None = None,
    ) -> None:
        self._context = context
        self._turn = turn
        self._release = release
        self._trace = trace
        self._failure: Exception | str | None = None
        """What ended the turn early: its error, or the reason it was cut short."""
        self._ended = False
        self._recorded = False
        self._started = time.monotonic()
        self._aborted = False
        """The server's shutdown aborted the turn."""
        self._scope: anyio.CancelScope | None = None
        """What :meth:`abort` cancels: the phase running now (generating without headers
        sent, or streaming)."""
        self._shutdown = context.config.shutdown
        self._shutdown.track(self)

    def abort(self) -> None:
        """Abort the turn (the server is shutting down): the phase running now is cancelled,
        which aborts the engine request, and answers as :meth:`complete` and :meth:`stream`
        say; a phase that starts later is cancelled at once."""
        self._aborted = True
        if self._scope is not None:
            self._scope.cancel()

    @contextlib.contextmanager
    def _abortable(self) -> Iterator[anyio.CancelScope]:
        """A scope :meth:`abort` cancels (at once, if the turn is aborted already)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._aborted:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    def _over(self) -> None:
        """The turn's last phase ended: the shutdown has nothing to abort."""
        self._shutdown.forget(self)

    def _record(self) -> None:
        """Record the turn's tokens and time to first token in the metrics (once). A turn
        the engine produced nothing for (aborted while queued) records none."""
        if self._recorded:
            return
        self._recorded = True
        turn = self._turn
        usage = turn.usage
        if self._trace is not None:
            self._end_trace(self._trace)
        if turn.message is None and not turn.token_ids and not usage.prompt_tokens:
            return
        self._context.metrics.turn(
            prompt_tokens=turn.prompt_tokens or 0,
            cached_prompt_tokens=turn.cached_prompt_tokens,
            # The engine's count once it reported one; the ids seen so far if it was cut off.
            output_tokens=max(len(turn.token_ids), usage.output_tokens),
            time_to_first_token=usage.time_to_first_token_s,
        )

    def _end_trace(self, trace: ChatTrace) -> None:
        turn = self._turn
        usage = turn.usage
        failure = self._failure
        if turn.message is not None:
            finish_reason = turn.finish_reason
        else:
            finish_reason = "error" if isinstance(failure, Exception) else "abort"
        trace.end(
            finish_reason=finish_reason,
            usage=TurnUsage(
                prompt_tokens=turn.prompt_tokens or usage.prompt_tokens,
                cached_prompt_tokens=turn.cached_prompt_tokens,
                output_tokens=max(len(turn.token_ids), usage.output_tokens),
                time_to_first_token_s=usage.time_to_first_token_s,
            ),
            message=turn.message or TranscriptMessage(role="assistant"),
            failure=failure,
        )

    def dispatched(self) -> None:
        """A ``tool_call_dispatch`` event is being sent (Chat's dispatch side channel): its
        latency from the turn's start goes into the metrics."""
        self._context.metrics.tool_dispatch.observe(time.monotonic() - self._started)

    def ended_early(self, reason: AbortReason) -> None:
        """Count (and log) a response that ended before it was complete (once)."""
        if self._ended:
            return
        self._ended = True
        if self._failure is None:
            self._failure = reason
        stats = self._context.stats
        stats.count_early_end(reason)
        self._record()
        turn = self._turn
        turn_id = turn.request.request_id
        if turn.message is not None:  # generation had finished; only the delivery was cut
            _log.info("response ended early", reason=reason, turn_id=turn_id)
            return
        tokens = len(turn.token_ids) or turn.usage.output_tokens
        stats.count_abort(tokens)
        log = _log.warning if tokens else _log.info
        log("request aborted", reason=reason, turn_id=turn_id, output_tokens=tokens)

    async def complete(
        self, receive: Receive, work: Callable[[], Awaitable[None]], *, final: bool = True
    ) -> bool:
        """Run ``work`` (a non-streaming turn's generation) while watching the connection:
        ``False`` if the client left first (``work`` is then cancelled, which aborts the
        request). Exceptions from ``work`` propagate unchanged. ``final``: the turn is over
        when ``work`` is (``False`` while waiting for a streamed turn's first event).

        A shutdown that aborts the turn meanwhile cancels ``work`` too and raises
        :class:`ApiError` ``overloaded_error`` with status 503: no header is sent yet, so
        the client gets its API's error body."""
        try:
            present = await self._complete(receive, work, final=final)
        except BaseException:
            self._over()
            raise
        if final or not present:
            self._over()
        return present

    async def _complete(
        self, receive: Receive, work: Callable[[], Awaitable[None]], *, final: bool
    ) -> bool:
        left = False
        error: BaseException | None = None
        with self._abortable():
            left, error = await self._watched(receive, work)
        if error is not None:
            if isinstance(error, Exception):
                self._failure = error
            self._record()
            raise error
        if self._aborted and not left:
            self.ended_early("cancelled")  # counted already if work had started
            raise ApiError("overloaded_error", SHUTTING_DOWN, status=503)
        if left:
            self.ended_early("disconnect")
        elif final:
            self._record()
        return not left

    async def _watched(
        self, receive: Receive, work: Callable[[], Awaitable[None]]
    ) -> tuple[bool, BaseException | None]:
        """Run ``work`` while watching the connection: whether the client left, and the
        exception ``work`` raised."""
        left = False
        error: BaseException | None = None
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    nonlocal left
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    left = True
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                try:
                    await work()
                except Exception as raised:
                    error = raised
                except anyio.get_cancelled_exc_class():
                    if not left:  # noted at once: a server shutting down exits soon after
                        self.ended_early("cancelled")
                    raise
                group.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            self.ended_early("cancelled")
            raise
        return left, error

    async def first_event(
        self, receive: Receive, events: AsyncGenerator[ParseEvent, None]
    ) -> tuple[bool, ParseEvent | None]:
        """Wait for a streamed turn's first event (see :func:`first_event`) while watching
        the connection: ``(False, None)`` if the client left first (the request is then
        aborted: its prompt may be waiting behind others, or long to prefill)."""
        first: ParseEvent | None = None

        async def begin() -> None:
            nonlocal first
            first = await first_event(events)

        present = await self.complete(receive, begin, final=False)
        if not present:
            await events.aclose()
        return present, first

    def stream(
        self,
        frames: AsyncGenerator[bytes, None],
        events: AsyncGenerator[ParseEvent, None],
        *,
        fail: Callable[[str, str], bytes],
        ping: Callable[[], bytes],
        fail_with: Callable[[ApiError], bytes] | None = None,
    ) -> _AbortableStream:
        """The streaming response writing ``frames`` (the adapter's, which read ``events``);
        ``fail(kind, message)`` gives the frames that end the stream after a failure, and
        those of ``overloaded_error`` end a stream the server aborts (shutting down). An
        adapter whose error frames carry more than the kind and message (a ``code``) gives
        ``fail_with``, which then writes the failure's frames from the whole
        :class:`ApiError`. When it ends, however it ends, ``events`` is closed and the slot
        released."""
        config = self._context.config
        stats = self._context.stats
        turn_id = self._turn.request.request_id

        stream = _AbortableStream(self, fail)

        def failed(error: Exception) -> bytes:
            stats.stream_failures += 1
            self._failure = error
            mapped = failure(error)
            if isinstance(error, AgentkitError | ApiError):
                _log.warning(
                    "the stream failed", turn_id=turn_id, kind=mapped.kind, error=mapped.message
                )
            else:
                _log.error(
                    "the stream failed unexpectedly",
                    turn_id=turn_id,
                    error=repr(error),
                    traceback="".join(traceback.format_exception(error)),
                )
            if fail_with is not None:
                return stream.told(fail_with(mapped))
            return stream.told(fail(mapped.kind, mapped.message))

        async def cleanup() -> None:
            try:
                await events.aclose()
            finally:
                self._record()
                self._release()

        stream.response = EventStreamResponse(
            stream.whole(frames),
            ping=ping,
            ping_interval=config.ping_interval,
            fail=failed,
            farewell=stream.farewell,
            on_abort=self.ended_early,
            cleanup=cleanup,
            queue_bytes=config.stream_queue_bytes,
            stall_timeout=config.stall_timeout,
        )
        return stream


class _AbortableStream:
    """An :class:`EventStreamResponse` that the server's shutdown can abort (see
    :meth:`TurnWatch.abort`); an ASGI app, as the response it wraps.

    Aborted, the response writes its farewell (the ``overloaded_error`` frames) and closes
    the engine stream; the HTTP body is then ended, so the client reads an error event and
    a complete body rather than a broken connection. When no farewell was written (the
    client left, or the cancellation came from outside) nothing more is sent.

    A body is never ended as if it were whole when it is not: should the response's writer
    end it while the adapter's frames were cut short and no error frames were written (a
    cancellation that reached the producer of frames before the writer), the farewell is
    written first.
    """

    __slots__ = ("_fail", "_said", "_watch", "_whole", "response")

    def __init__(self, watch: TurnWatch, fail: Callable[[str, str], bytes]) -> None:
        self._watch = watch
        self._fail = fail
        self._whole = False
        """The adapter's frames ran to their end."""
        self._said = False
        """Error frames were written: a failure's, or the farewell."""
        self.response: EventStreamResponse | None = None

    async def whole(self, frames: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
        """``frames``, noting whether they ran to their end."""
        async with aclosing(frames):
            async for frame in frames:
                yield frame
        self._whole = True

    def told(self, frames: bytes) -> bytes:
        """``frames`` (error frames) are being written."""
        self._said = True
        return frames

    def farewell(self) -> bytes:
        """The frames that end a stream the server stops: a retryable ``overloaded_error``."""
        return self.told(self._fail("overloaded_error", SHUTTING_DOWN))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self.response
        assert response is not None, "TurnWatch.stream sets the response"
        watch = self._watch

        async def sending(message: Message) -> None:
            if (
                message["type"] == "http.response.body"
                and not message.get("more_body", False)
                and not (self._whole or self._said)
            ):
                watch.ended_early("cancelled")
                cut: Message = {"type": "http.response.body", "body": self.farewell()}
                await send({**cut, "more_body": True})
            await send(message)

        try:
            with watch._abortable() as cancel:
                await response(scope, receive, sending)
        finally:
            watch._over()
        if cancel.cancelled_caught and self._said:
            end: Message = {"type": "http.response.body", "body": b"", "more_body": False}
            with anyio.move_on_after(_END_WAIT), contextlib.suppress(OSError):
                await send(end)


def client_gone() -> Response:
    """The answer to a non-streaming request whose client left: nobody reads it. 499 is the
    status proxies log for a client that closed its request."""
    return Response(status_code=499)
