"""OpenTelemetry SDK providers with in-memory exporters, for asserting on spans and metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit.telemetry import Instrumentation

# A Qwen-format turn writing two calls, then more text: the calls are dispatched while the
# model still generates the rest.
TWO_CALLS = (
    '<tool_call>\n{"name": "first", "arguments": {"x": 1}}\n</tool_call>\n'
    '<tool_call>\n{"name": "second", "arguments": {"x": 2}}\n</tool_call>\n'
    "and a few more words after the calls"
)


@dataclass
class Otel:
    """Providers that keep what they receive, and the settings that point at them."""

    spans: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def settings(self, **options: Any) -> Instrumentation:
        return Instrumentation(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def finished(self) -> list[ReadableSpan]:
        """Every ended span, in start order."""
        return sorted(self.spans.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def points(self, metric: str) -> Sequence[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for found in scope.metrics:
                    if found.name == metric:
                        return [
                            p for p in found.data.data_points if isinstance(p, HistogramDataPoint)
                        ]
        return []
