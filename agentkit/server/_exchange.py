"""One request skeleton for the three APIs: what every adapter does around a model turn.

An adapter (Anthropic Messages, Chat Completions, Responses) parses and converts its request
into a :class:`~agentkit.server._runtime.TurnSpec`, then hands the rest to
:func:`answer_turn` with a :class:`TurnAnswer`: the frames and the response body of its wire
format, nothing else. The skeleton holds what must not differ between them:

* the error mapping (:func:`api_error`, one mapping with the frames that end a failed
  stream, :func:`endpoint`): the API key, agentkit's errors (engine failures, a hosted
  run's limits) as the API's error kinds, statuses and codes, in the adapter's error shape;
* the slot: acquired before the turn starts, released exactly once however it ends;
* the turn's lifecycle (:class:`~agentkit.server._lifecycle.TurnWatch`): prompt rendering on
  a worker thread, the first event awaited before the 200 (so a failure during prefill is an
  HTTP error), a client that leaves before the body, mid-stream or during a non-streaming
  request aborts the engine request and frees the slot, a failure after the 200 ends the
  stream with the API's error frames;
* cache-break reporting (:func:`cache_breaks`);
* the turn's ``chat`` span when instrumentation is on
  (:func:`agentkit.telemetry._hooks.turn_trace`), parented to the request's W3C
  ``traceparent``.

The same skeleton answers a hosted agent's run of many model turns (``agentkit serve
--agent``, :mod:`._hosted`): :func:`answer_started` is :func:`answer_turn` once the work has
started, for any :class:`Answer` over any subject and events.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from agentkit._logging import get_logger
from agentkit.events import ParseEvent, ToolCallComplete
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._lifecycle import TurnWatch, api_error, client_gone
from agentkit.server._runtime import ModelTurn, TurnSpec
from agentkit.telemetry._hooks import ChatTrace, turn_trace

__all__ = [
    "Answer",
    "ErrorShape",
    "Started",
    "TurnAnswer",
    "answer_started",
    "answer_turn",
    "api_error",
    "cache_breaks",
    "endpoint",
]

_log = get_logger("agentkit.server")

ErrorShape = Callable[[ApiError], Response]
"""An API's error response for an :class:`ApiError` (its body shape, the error's status)."""

Handler = Callable[[Request], Awaitable[Response]]


def endpoint(
    context: ServerContext, handler: Handler, shape: ErrorShape, *, public: bool = False
) -> Handler:
    """``handler`` behind the API key (unless ``public``), its errors answered in ``shape``."""

    async def wrapped(request: Request) -> Response:
        try:
            if not public:
                context.authorize(request)
            return await handler(request)
        except Exception as error:
            mapped = api_error(error)
            if mapped is None:
                raise
            return shape(mapped)

    return wrapped


def cache_breaks(reasons: Sequence[str], **detail: Any) -> None:
    """Assistant turns a client sent back that could not be matched to what the model
    generated: each is rendered canonically, and the prompt stops extending the previous one
    at the first. One WARNING per request, however many turns (a long conversation from
    another server would otherwise log one record per turn), with how many and why the
    first did not match."""
    if reasons:
        _log.warning(
            "cache break: assistant turns are rendered canonically",
            turns=len(reasons),
            first=reasons[0],
            **detail,
        )


Subject = TypeVar("Subject")
"""What an answer is about: a :class:`ModelTurn`, or a hosted agent's run."""
Event = TypeVar("Event")


class Answer(Generic[Subject, Event]):
    """What one API writes for a model turn (:class:`TurnAnswer`) or a hosted agent's run:
    stream frames, or the whole response.

    Streaming: :meth:`start`, :meth:`event` per parse event, :meth:`finish`; a failure after
    the 200 ends the stream with :meth:`fail`'s frames; :meth:`ping` keeps an idle stream
    alive. Not streaming: :meth:`collect` per event, then :meth:`complete`.
    """

    dispatches = False
    """Whether the stream announces each complete tool call for dispatch (the watch then
    measures the dispatch latency)."""

    def start(self, turn: Subject) -> bytes:
        raise NotImplementedError

    def event(self, event: Event) -> bytes:
        raise NotImplementedError

    def finish(self, turn: Subject) -> bytes:
        raise NotImplementedError

    def fail(self, kind: str, message: str) -> bytes:
        raise NotImplementedError

    def fail_with(self, error: ApiError) -> bytes:
        """The frames that end the stream after ``error`` (:func:`api_error`'s mapping of the
        failure): :meth:`fail`'s, unless the wire format also carries the error's ``code``."""
        return self.fail(error.kind, error.message)

    def ping(self) -> bytes:
        return b": ping\n\n"

    def ends_turn(self, event: Event) -> bool:
        """Whether the answer ends after ``event`` (the generation is then aborted)."""
        return False

    def collect(self, event: Event) -> None:
        """A non-streaming answer sees each event here."""

    def complete(self, turn: Subject) -> Response:
        """The non-streaming response, once the turn is over."""
        raise NotImplementedError


class TurnAnswer(Answer[ModelTurn, ParseEvent]):
    """What one API writes for a model turn (see :class:`Answer`)."""


@dataclass(frozen=True, slots=True)
class Started(Generic[Subject]):
    """Work that has started: what the answer is about, what :class:`TurnWatch` guards (the
    turn, or a record with its fields), and its events (not yet read)."""

    subject: Subject
    watched: ModelTurn
    events: AsyncGenerator[Any, None]
    trace: ChatTrace | None = None
    """The model turn's ``chat`` span, when instrumentation is on (a hosted run's turns are
    traced by the agent's own instrumentation)."""


async def answer_turn(
    context: ServerContext,
    request: Request,
    spec: TurnSpec,
    answer: TurnAnswer,
    *,
    turn_id: str,
    stream: bool,
) -> Response:
    """Run ``spec``'s model turn for ``request`` and answer it with ``answer``'s frames."""

    async def start() -> Started[ModelTurn]:
        # Rendering (and tokenizing) the prompt is CPU work: a worker thread does it.
        runtime = context.runtime
        turn = await context.work(functools.partial(runtime.start, spec, request_id=turn_id))
        trace = turn_trace(
            turn.request,
            engine=runtime.engine,
            profile=runtime.profile.name,
            headers=request.headers,
        )
        return Started(turn, turn, turn.events(), trace)

    return await answer_started(context, request, start, answer, stream=stream)


async def answer_started(
    context: ServerContext,
    request: Request,
    start: Callable[[], Awaitable[Started[Subject]]],
    answer: Answer[Subject, Any],
    *,
    stream: bool,
) -> Response:
    """Answer ``request`` with the work ``start`` starts (once the request's slot is taken)
    and ``answer``'s frames: the skeleton of :func:`answer_turn`."""
    release = context.acquire()
    try:
        started = await start()
        turn = started.subject
        watch = TurnWatch(context, started.watched, release, started.trace)
        events = started.events
        if not stream:
            try:
                return await _complete(turn, events, watch, request, answer)
            finally:
                release()
        present, first = await watch.first_event(request.receive, events)
        if not present:  # the client left while its prompt was queued or prefilled
            release()
            return client_gone()
    except BaseException:
        release()
        raise

    def frames(event: Any) -> bytes:
        if answer.dispatches and isinstance(event, ToolCallComplete):
            watch.dispatched()  # its dispatch announcement is in these frames
        return answer.event(event)

    async def body() -> AsyncGenerator[bytes, None]:
        yield answer.start(turn)
        if first is not None:
            yield frames(first)
            done = answer.ends_turn(first)
            while not done:
                event = await anext(events, None)
                if event is None:
                    break
                yield frames(event)
                done = answer.ends_turn(event)
        yield answer.finish(turn)

    # A failure from here on ends the stream with the API's error frames (TurnWatch).
    return watch.stream(  # type: ignore[return-value]
        body(), events, fail=answer.fail, ping=answer.ping, fail_with=answer.fail_with
    )


async def _complete(
    turn: Subject,
    events: AsyncGenerator[Any, None],
    watch: TurnWatch,
    request: Request,
    answer: Answer[Subject, Any],
) -> Response:
    async def generate() -> None:
        async with aclosing(events):
            async for event in events:
                answer.collect(event)
                if answer.ends_turn(event):
                    break

    if not await watch.complete(request.receive, generate):
        return client_gone()
    return answer.complete(turn)
