"""The agent loop's side of tracing: a run, its model turns, their tool calls; and the
server's model turns (``agentkit serve``), each a ``chat`` span of its own.

:class:`RunTrace` and :class:`ChatTrace` here do nothing; they are what an agent that is not
instrumented gets, so the loop calls them unconditionally and pays a few no-op calls per
turn (never per token). :func:`run_trace` and :func:`turn_trace` return the OpenTelemetry
implementation (:mod:`agentkit.telemetry._otel`, imported only then) when instrumentation is
on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from agentkit.engine import GenerationRequest
from agentkit.events import TurnUsage
from agentkit.telemetry._settings import Instrument, resolve
from agentkit.tools._trace import CallTracer
from agentkit.transcript import Message

__all__ = ["ChatTrace", "RunInfo", "RunTrace", "request_parent", "run_trace", "turn_trace"]


class ChatTrace:
    """One model turn (the ``chat`` span); this base class records nothing."""

    tool_tracer: CallTracer | None = None
    """What the turn's dispatcher opens each tool call's span with (``None``: untraced)."""

    def end(
        self,
        *,
        finish_reason: str,
        usage: TurnUsage,
        message: Message,
        failure: Exception | str | None,
    ) -> None:
        """The model's part of the turn is over (its tools may still be running).
        ``failure``: the error that ended it, or why it was cut short (``"disconnect"``)."""


_NO_CHAT = ChatTrace()


class RunTrace:
    """One run (the ``invoke_agent`` span); this base class records nothing."""

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Around the whole run: ends every span of it, with an error status when the run
        raises or is cancelled."""
        yield

    def chat(self, turn: int, request: GenerationRequest) -> ChatTrace:
        """A model turn starts, with ``request``."""
        return _NO_CHAT


_NO_RUN = RunTrace()


class RunInfo:
    """What a run's spans say about the agent, gathered once per instrumented run."""

    __slots__ = ("model", "profile", "provider", "run_id")

    def __init__(self, *, run_id: str, engine: object, profile: str) -> None:
        self.run_id = run_id
        model = getattr(engine, "model", None)
        self.model: str | None = model if isinstance(model, str) and model else None
        """``gen_ai.request.model``: the engine's model name, where it has one."""
        name = type(engine).__name__.lower()
        self.provider = name.removesuffix("engine") or name
        """``gen_ai.provider.name``: the engine backend (``vllm``, ``remote``, ``scripted``)."""
        self.profile = profile


def run_trace(instrument: Instrument, *, run_id: str, engine: object, profile: str) -> RunTrace:
    """The trace of one run: OpenTelemetry spans and metrics when instrumentation is on
    (the agent's own setting, else :func:`~agentkit.telemetry.instrument_all`'s)."""
    settings = resolve(instrument)
    if settings is None:
        return _NO_RUN
    from agentkit.telemetry._otel import OtelRunTrace

    return OtelRunTrace(settings, RunInfo(run_id=run_id, engine=engine, profile=profile))


def turn_trace(
    request: GenerationRequest,
    *,
    engine: object,
    profile: str,
    headers: Mapping[str, str],
) -> ChatTrace:
    """The trace of one of the server's model turns (``agentkit serve``, no agent around
    it): when :func:`~agentkit.telemetry.instrument_all` is on, a ``chat`` span with the
    attributes of an agent's turn, the child of the trace the request's W3C ``traceparent``
    header names (``headers``: the HTTP request's), or of the current span without one."""
    settings = resolve(None)
    if settings is None:
        return _NO_CHAT
    from agentkit.telemetry._otel import server_chat

    info = RunInfo(run_id=request.request_id or "", engine=engine, profile=profile)
    return server_chat(settings, info, request, headers)


@contextlib.contextmanager
def request_parent(headers: Mapping[str, str], instrument: Instrument = None) -> Iterator[None]:
    """While inside, the trace that an HTTP request's W3C ``traceparent`` header names is the
    current context, so an agent run started here (a hosted agent's, ``agentkit serve
    --agent``) has its ``invoke_agent`` span under the client's. Nothing happens when the
    run is not instrumented (``instrument``: the agent's setting) or the request carries no
    ``traceparent``."""
    if "traceparent" not in headers or resolve(instrument) is None:
        yield
        return
    from agentkit.telemetry._otel import attached_parent

    with attached_parent(headers):
        yield
