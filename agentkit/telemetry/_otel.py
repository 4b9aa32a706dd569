"""Runs, model turns and tool calls as OpenTelemetry spans, with the GenAI metrics.

The tree of one run::

    invoke_agent {agent}            the run (current while it runs)
    ├── chat {model}                turn 1: from its request to the model's last token
    ├── execute_tool {tool}         started the moment the call was parsed, so while turn 1's
    ├── execute_tool {tool}         chat span is still open; linked to that chat span
    └── chat {model}                turn 2 ...

Tool spans are children of the run, not of the chat span, because they outlive it: the model
finishes its turn while the tools still run. ``agentkit.tool.dispatch_offset_s`` says when,
in the turn, each one was dispatched. Every span ends: the run's context manager ends what is
still open (a turn or a call cut short by an error or a cancellation) with an error status.

A model turn the server answers (``agentkit serve``) has no run: its ``chat`` span
(:func:`server_chat`) is the child of the HTTP request's W3C trace context (``traceparent``),
so a client's trace shows the model's turn under its own call.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from agentkit.engine import GenerationRequest
from agentkit.errors import ToolError
from agentkit.events import ToolCallComplete, TurnUsage
from agentkit.telemetry._content import (
    input_messages,
    output_messages,
    system_instructions,
    to_json,
)
from agentkit.telemetry._hooks import ChatTrace, RunInfo, RunTrace
from agentkit.telemetry._instruments import Instruments, instruments
from agentkit.telemetry._settings import Instrumentation
from agentkit.transcript import Message, ToolResultBlock

__all__ = ["OtelRunTrace", "attached_parent", "server_chat"]


def _fail(span: Span, error: BaseException | str) -> None:
    """Mark ``span`` failed: ``error.type`` and an error status."""
    name = error if isinstance(error, str) else type(error).__name__
    span.set_attribute("error.type", name)
    span.set_status(Status(StatusCode.ERROR, name))


class OtelRunTrace(RunTrace):
    """One run's spans and measurements."""

    def __init__(self, settings: Instrumentation, info: RunInfo) -> None:
        self._settings = settings
        self._info = info
        self._instruments: Instruments = instruments(settings)
        self._span: Span | None = None
        self._open: set[Span] = set()
        """Chat and tool spans started and not yet ended."""
        self._input_tokens = 0
        self._output_tokens = 0
        self._turns = 0

    def common(self, operation: str) -> dict[str, Any]:
        """The attributes every span and measurement of this run carries."""
        info = self._info
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": info.provider,
        }
        if info.model is not None:
            attributes["gen_ai.request.model"] = info.model
        return attributes

    @property
    def instruments(self) -> Instruments:
        return self._instruments

    @property
    def capture_content(self) -> bool:
        return self._settings.capture_content

    def start_child(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], links: Sequence[Link] = ()
    ) -> Span:
        """A span under the run's, tracked until it ends."""
        assert self._span is not None, "a run's spans start inside its run()"
        span = self._instruments.tracer.start_span(
            name,
            context=trace.set_span_in_context(self._span),
            kind=kind,
            attributes=attributes,
            links=links,
        )
        self._open.add(span)
        return span

    def end_child(self, span: Span) -> None:
        if span in self._open:
            self._open.discard(span)
            span.end()

    def count(self, usage: TurnUsage) -> None:
        self._turns += 1
        self._input_tokens += usage.prompt_tokens
        self._output_tokens += usage.output_tokens

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        info = self._info
        agent = self._settings.agent_name
        attributes = self.common("invoke_agent")
        attributes["agentkit.run_id"] = info.run_id
        attributes["agentkit.profile"] = info.profile
        if agent is not None:
            attributes["gen_ai.agent.name"] = agent
        span = self._instruments.tracer.start_span(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        self._span = span
        token = otel_context.attach(trace.set_span_in_context(span))
        failure: BaseException | None = None
        try:
            yield
        except BaseException as error:
            failure = error
            raise
        finally:
            otel_context.detach(token)
            for child in list(self._open):  # cut short by the error or the cancellation
                _fail(child, failure or "abandoned")
                self.end_child(child)
            span.set_attribute("gen_ai.usage.input_tokens", self._input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", self._output_tokens)
            span.set_attribute("agentkit.turns", self._turns)
            if failure is not None:
                if isinstance(failure, Exception):  # not a cancellation
                    span.record_exception(failure)
                _fail(span, failure)
            span.end()

    def chat(self, turn: int, request: GenerationRequest) -> ChatTrace:
        return OtelChatTrace(self, turn, request)


class OtelChatTrace(ChatTrace):
    """One model turn's ``chat`` span, and the tool spans it dispatches."""

    def __init__(self, run: OtelRunTrace, turn: int, request: GenerationRequest) -> None:
        self._run = run
        self._turn = turn
        self._started = time.perf_counter()
        attributes = run.common("chat")
        attributes["agentkit.turn"] = turn
        attributes["gen_ai.request.stream"] = True
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.top_p is not None:
            attributes["gen_ai.request.top_p"] = request.top_p
        if request.request_id is not None:
            attributes["agentkit.request_id"] = request.request_id
        if run.capture_content and request.context is not None:
            messages = request.context.messages
            attributes["gen_ai.input.messages"] = input_messages(messages)
            system = system_instructions(messages)
            if system is not None:
                attributes["gen_ai.system_instructions"] = system
        model = attributes.get("gen_ai.request.model")
        self._span = run.start_child(
            f"chat {model}" if model else "chat", SpanKind.CLIENT, attributes
        )
        self.tool_tracer = self._tool_span

    def end(
        self,
        *,
        finish_reason: str,
        usage: TurnUsage,
        message: Message,
        failure: Exception | str | None,
    ) -> None:
        run, span = self._run, self._span
        duration = time.perf_counter() - self._started
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_prompt_tokens)
        ttft = usage.time_to_first_token_s
        if ttft is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", ttft)
        span.set_attribute("agentkit.tool_calls", len(message.tool_calls))
        if run.capture_content:
            span.set_attribute("gen_ai.output.messages", output_messages(message, finish_reason))
        measured = run.common("chat")
        if failure is not None:
            _fail(span, failure)
            measured["error.type"] = failure if isinstance(failure, str) else type(failure).__name__
        tools = run.instruments
        tools.operation_duration.record(duration, measured)
        if ttft is not None:
            tools.time_to_first_chunk.record(ttft, measured)
        tools.token_usage.record(usage.prompt_tokens, {**measured, "gen_ai.token.type": "input"})
        tools.token_usage.record(usage.output_tokens, {**measured, "gen_ai.token.type": "output"})
        if usage.prompt_tokens > 0:
            tools.cache_hit_ratio.record(usage.cached_prompt_tokens / usage.prompt_tokens, measured)
        run.count(usage)
        run.end_child(span)

    def _tool_span(self, call: ToolCallComplete) -> OtelCallSpan:
        return OtelCallSpan(self._run, self, call)

    @property
    def span(self) -> Span:
        return self._span

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def started(self) -> float:
        return self._started


class _RequestParent(OtelRunTrace):
    """What a server turn's ``chat`` span hangs from: no run span, the HTTP request's trace
    context (or the current one)."""

    def __init__(self, settings: Instrumentation, info: RunInfo, parent: Context | None) -> None:
        super().__init__(settings, info)
        self._parent = parent

    def start_child(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], links: Sequence[Link] = ()
    ) -> Span:
        span = self.instruments.tracer.start_span(
            name, context=self._parent, kind=kind, attributes=attributes, links=links
        )
        self._open.add(span)
        return span


def server_chat(
    settings: Instrumentation,
    info: RunInfo,
    request: GenerationRequest,
    headers: Mapping[str, str],
) -> OtelChatTrace:
    """The ``chat`` span of one server turn, the child of the trace context that ``headers``
    carry (W3C ``traceparent`` / ``tracestate``, read by the global propagator), or of the
    current span when they carry none."""
    return OtelChatTrace(_RequestParent(settings, info, _request_context(headers)), 1, request)


def _request_context(headers: Mapping[str, str]) -> Context | None:
    """The trace context ``headers`` carry (W3C ``traceparent`` / ``tracestate``, read by the
    global propagator), or ``None`` without a ``traceparent``."""
    if "traceparent" not in headers:
        return None
    carrier = {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}
    return propagate.extract(carrier)


@contextlib.contextmanager
def attached_parent(headers: Mapping[str, str]) -> Iterator[None]:
    """The trace context ``headers`` carry is the current one while inside."""
    parent = _request_context(headers)
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


class OtelCallSpan:
    """One tool call's ``execute_tool`` span (see :class:`agentkit.tools._trace.CallSpan`)."""

    def __init__(self, run: OtelRunTrace, chat: OtelChatTrace, call: ToolCallComplete) -> None:
        self._run = run
        self._started = now = time.perf_counter()
        self._tool = call.name
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "agentkit.turn": chat.turn,
            "agentkit.tool.dispatch_offset_s": now - chat.started,
        }
        if run.capture_content:
            attributes["gen_ai.tool.call.arguments"] = to_json(call.arguments)
        self._span = run.start_child(
            f"execute_tool {call.name}",
            SpanKind.INTERNAL,
            attributes,
            [Link(chat.span.get_span_context())],
        )
        self._error: str | None = None
        self._token: Token[Context] | None = None

    def __enter__(self) -> OtelCallSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
        span = self._span
        if exc is not None:
            _fail(span, exc)
            self._error = type(exc).__name__
        measured: dict[str, Any] = {"gen_ai.tool.name": self._tool}
        if self._error is not None:
            measured["error.type"] = self._error
        self._run.instruments.tool_duration.record(time.perf_counter() - self._started, measured)
        self._run.end_child(span)

    def finish(self, result: ToolResultBlock | None, error: ToolError | None) -> None:
        span = self._span
        if result is not None and self._run.capture_content:
            span.set_attribute("gen_ai.tool.call.result", result.content)
        if error is not None:
            crash = error.__cause__
            if crash is not None:
                span.record_exception(crash)
            _fail(span, error)
            self._error = type(error).__name__
