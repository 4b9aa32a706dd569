"""The tracer and the metric instruments of one :class:`Instrumentation`, made once.

Names follow the OpenTelemetry GenAI semantic conventions where they define one (span and
attribute names, ``gen_ai.client.*`` metrics); what they do not cover is prefixed
``agentkit.``. Imported only when instrumentation is on: it imports OpenTelemetry.
"""

from __future__ import annotations

import threading
from importlib.metadata import PackageNotFoundError, version

from opentelemetry import metrics, trace

from agentkit.telemetry._settings import Instrumentation

__all__ = ["Instruments", "instruments"]

SCOPE = "agentkit"

# Bucket boundaries the GenAI conventions advise for these histograms.
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_SECONDS_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_RATIO_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)


def _version() -> str:
    try:
        return version("agentkit")
    except PackageNotFoundError:  # run from a source tree
        return ""


class Instruments:
    """A tracer and the histograms a run records into."""

    def __init__(self, settings: Instrumentation) -> None:
        self.settings = settings
        self.tracer = trace.get_tracer(SCOPE, _version(), tracer_provider=settings.tracer_provider)
        meter = metrics.get_meter(SCOPE, _version(), meter_provider=settings.meter_provider)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model turn, by gen_ai.token.type (input, output).",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of each model turn, from the request to its last token.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )
        self.time_to_first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time from a model request to its first token, as the engine measured it.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )
        self.cache_hit_ratio = meter.create_histogram(
            "agentkit.client.token.cache_hit_ratio",
            unit="1",
            description="Share of each turn's prompt tokens served by the prefix cache.",
            explicit_bucket_boundaries_advisory=_RATIO_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            "agentkit.tool.duration",
            unit="s",
            description="Duration of each tool call, from its dispatch to its result.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )


_made: dict[int, tuple[Instrumentation, Instruments]] = {}
_lock = threading.Lock()


def instruments(settings: Instrumentation) -> Instruments:
    """The instruments for ``settings``, made on first use and kept for the process."""
    with _lock:
        made = _made.get(id(settings))
        if made is None or made[0] is not settings:
            made = (settings, Instruments(settings))
            _made[id(settings)] = made
        return made[1]
