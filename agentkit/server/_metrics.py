"""``GET /metrics``: the server's metrics in Prometheus' text exposition format (0.0.4).

agentkit writes the format itself (counters ``*_total``, gauges, histograms with cumulative
``_bucket{le=...}``, ``_sum`` and ``_count``; ``# HELP`` and ``# TYPE`` lines; label values
escaped), so serving needs no ``prometheus_client``. Every update happens on the event loop,
so the metrics take no lock.

What is measured, and where:

* **Requests** (:class:`HttpMetrics`, ASGI middleware): each response by route template (not
  the raw path: ids in paths would grow the series without bound), method and status; the
  requests in flight. Refused requests (403, 415) and unknown paths (``route="unmatched"``)
  count too; a stream counts when it ends, with the status its headers had.
* **Turns** (:meth:`ServerMetrics.turn`, called by
  :class:`~agentkit.server._lifecycle.TurnWatch` once per accepted turn, however it ends):
  prompt, cached prompt and output tokens; time to first token as the engine measured it; the
  share of each turn's prompt served from the prefix cache, as a histogram, because the
  counters already give the overall ratio (``rate(cached) / rate(prompt)``) and only a
  per-turn distribution shows the turns that missed the cache.
* **Tool dispatch** (Chat's dispatch side channel): seconds from the turn's start to each
  ``tool_call_dispatch`` event. It has the origin of time to first token, so the two compare
  directly: how long after the model began a client could start each tool, instead of
  waiting for the end of the turn.
* **Early ends**: :class:`~agentkit.server._stats.ServerStats`' counters, and the model turns
  in flight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import fields

from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkit.server._stats import ServerStats

__all__ = ["CONTENT_TYPE", "Counter", "Gauge", "Histogram", "HttpMetrics", "ServerMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The media type of the text exposition format."""

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RATIO_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

_STATS = {
    "disconnects": "agentkit_client_disconnects_total",
    "stalled": "agentkit_stalled_clients_total",
    "cancelled": "agentkit_cancelled_requests_total",
    "aborted": "agentkit_aborted_generations_total",
    "aborted_output_tokens": "agentkit_aborted_output_tokens_total",
    "stream_failures": "agentkit_stream_failures_total",
}
"""Each :class:`ServerStats` counter's metric name (a test checks that none is missing)."""


def escape_label(value: str) -> str:
    """A label value as the format writes it: backslash, double quote, newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{escape_label(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Family:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)

    def header(self) -> list[str]:
        help_text = self.help.replace("\\", "\\\\").replace("\n", "\\n")
        return [f"# HELP {self.name} {help_text}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Family):
    """A value that only goes up, one per label combination (its name ends in ``_total``)."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1, *labels: str) -> None:
        self.values[labels] = self.values.get(labels, 0) + amount

    def lines(self) -> list[str]:
        values = self.values or ({(): 0} if not self.label_names else {})
        return [
            f"{self.name}{_labels(self.label_names, key)} {_number(value)}"
            for key, value in sorted(values.items())
        ]


class Gauge(_Family):
    """A value that goes up and down (no labels: the server's gauges are single values)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, help_text)
        self.value: float = 0

    def lines(self) -> list[str]:
        return [f"{self.name} {_number(self.value)}"]


class Histogram(_Family):
    """Observations counted into cumulative buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: Iterable[float]) -> None:
        super().__init__(name, help_text)
        self.bounds = tuple(sorted(buckets))
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        self.sum += value
        self.count += 1

    def lines(self) -> list[str]:
        out = []
        cumulative = 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            cumulative += count
            # Bounds as floats ("1.0"), as Prometheus' own clients write them.
            out.append(f'{self.name}_bucket{{le="{float(bound)!r}"}} {cumulative}')
        out.append(f'{self.name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{self.name}_sum {_number(self.sum)}")
        out.append(f"{self.name}_count {self.count}")
        return out


class ServerMetrics:
    """The server's metric families and what updates them (see the module docstring)."""

    def __init__(self) -> None:
        self.requests = Counter(
            "agentkit_http_requests_total",
            "HTTP responses by route template, method and status.",
            ("route", "method", "status"),
        )
        self.requests_in_flight = Gauge(
            "agentkit_http_requests_in_flight", "HTTP requests being answered now."
        )
        self.turns_in_flight = Gauge(
            "agentkit_turns_in_flight", "Model turns (generation requests) in flight now."
        )
        self.time_to_first_token = Histogram(
            "agentkit_time_to_first_token_seconds",
            "Seconds from a turn's generation start to its first token (engine-measured).",
            _LATENCY_BUCKETS,
        )
        self.prompt_tokens = Counter(
            "agentkit_prompt_tokens_total", "Prompt tokens of the turns generated."
        )
        self.cached_prompt_tokens = Counter(
            "agentkit_cached_prompt_tokens_total",
            "Prompt tokens served from the engine's prefix cache.",
        )
        self.output_tokens = Counter(
            "agentkit_output_tokens_total", "Tokens generated (aborted turns included)."
        )
        self.cached_ratio = Histogram(
            "agentkit_cached_prompt_ratio",
            "Per turn: the share of its prompt tokens served from the prefix cache.",
            _RATIO_BUCKETS,
        )
        self.tool_dispatch = Histogram(
            "agentkit_tool_dispatch_latency_seconds",
            "Chat dispatch side channel: seconds from the turn's start to each "
            "tool_call_dispatch event.",
            _LATENCY_BUCKETS,
        )

    def request(self, route: str, method: str, status: int) -> None:
        """Count one response (``method`` outside HTTP's usual ones counts as ``OTHER``)."""
        method = method if method in _METHODS else "OTHER"
        self.requests.inc(1, route, method, str(status))

    def turn(
        self,
        *,
        prompt_tokens: int,
        cached_prompt_tokens: int,
        output_tokens: int,
        time_to_first_token: float | None,
    ) -> None:
        """Record one finished (or aborted) turn's tokens and latency."""
        self.prompt_tokens.inc(prompt_tokens)
        self.cached_prompt_tokens.inc(cached_prompt_tokens)
        self.output_tokens.inc(output_tokens)
        if prompt_tokens > 0:
            self.cached_ratio.observe(min(1.0, cached_prompt_tokens / prompt_tokens))
        if time_to_first_token is not None:
            self.time_to_first_token.observe(time_to_first_token)

    def render(self, stats: ServerStats, *, turns_in_flight: int) -> str:
        """Every metric in the text exposition format, ``stats``' counters included."""
        self.turns_in_flight.value = turns_in_flight
        families: list[_Family] = [
            self.requests,
            self.requests_in_flight,
            self.turns_in_flight,
            self.time_to_first_token,
            self.prompt_tokens,
            self.cached_prompt_tokens,
            self.output_tokens,
            self.cached_ratio,
            self.tool_dispatch,
        ]
        for field in fields(stats):
            counter = Counter(_STATS[field.name], _stats_help(field.name))
            counter.inc(getattr(stats, field.name))
            families.append(counter)
        lines = [line for family in families for line in (*family.header(), *family.lines())]
        return "\n".join(lines) + "\n"


def _stats_help(name: str) -> str:
    return {
        "disconnects": "Clients that left before their response was complete.",
        "stalled": "Streaming clients dropped for reading nothing past the stall deadline.",
        "cancelled": "Requests the server cancelled before their response was complete.",
        "aborted": "Generations stopped before their end (disconnect, stall, cancel).",
        "aborted_output_tokens": "Tokens the aborted generations had produced.",
        "stream_failures": "Streams that failed after their headers were sent.",
    }[name]


class HttpMetrics:
    """ASGI middleware counting every HTTP response and the requests in flight.

    Args:
        app: the application behind it.
        metrics: where to count.
        routes: the app's routes, whose path templates label the requests.
    """

    def __init__(self, app: ASGIApp, *, metrics: ServerMetrics, routes: Sequence[BaseRoute]):
        self.app = app
        self.metrics = metrics
        self.routes = routes

    def _route(self, scope: Scope) -> str:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE and isinstance(route, Route):
                return route.path
        return "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = self._route(scope)
        status = 500  # what the client gets if the app raises before answering

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        gauge = self.metrics.requests_in_flight
        gauge.value += 1
        try:
            await self.app(scope, receive, counting_send)
        finally:
            gauge.value -= 1
            self.metrics.request(route, scope["method"], status)
