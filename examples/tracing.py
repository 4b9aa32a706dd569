"""Tracing: an agent's run as OpenTelemetry spans, tools overlapping the model's generation.

The model (scripted: it replays what a Qwen3 model would write, a few milliseconds a token)
asks for the weather in two cities, then keeps writing. Each tool starts the moment its
call is complete in the stream, so the trace shows both `execute_tool` spans starting inside
the first `chat` span, and running side by side. Spans go to the OpenTelemetry SDK's
in-memory exporter (swap in an OTLP exporter to send them to Jaeger, Tempo, Honeycomb...);
this prints the tree with each span's start and end, in milliseconds from the run's start,
and the metrics the run recorded.

Needs `opentelemetry-sdk` (the `dev` extra has it; the `otel` extra brings only the API):

    python examples/tracing.py
"""

from __future__ import annotations

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.telemetry import Instrumentation


@agentkit.tool
async def weather(city: str) -> str:
    """Today's weather in a city."""
    await anyio.sleep(0.15)  # a slow web service
    return {"Paris": "sunny, 21 °C", "Oslo": "rain, 9 °C"}.get(city, "unknown")


SCRIPT = [
    "<think>\nTwo cities: I will look both up at once.\n</think>\n\n"
    '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    "Looking up both cities now; the answer follows once the results are in.",
    "<think>\nParis is warm, Oslo is wet.\n</think>\n\n"
    "Paris is sunny at 21 °C; in Oslo it rains, 9 °C.",
]


def print_tree(spans: list[ReadableSpan]) -> None:
    """Each span under its parent, with its start and end in ms from the root's start."""
    root = next(s for s in spans if s.parent is None)
    origin = root.start_time or 0

    def ms(ns: int | None) -> str:
        return f"{((ns or 0) - origin) / 1e6:7.1f}"

    def describe(span: ReadableSpan) -> str:
        a = dict(span.attributes or {})
        if span.name.startswith("chat"):
            return (
                f"turn {a['agentkit.turn']}: {a['gen_ai.usage.input_tokens']} in "
                f"({a['gen_ai.usage.cache_read.input_tokens']} cached), "
                f"{a['gen_ai.usage.output_tokens']} out, "
                f"finish {a['gen_ai.response.finish_reasons'][0]}"  # type: ignore[index]
            )
        if span.name.startswith("execute_tool"):
            offset = float(a["agentkit.tool.dispatch_offset_s"])  # type: ignore[arg-type]
            return f"{a['gen_ai.tool.call.id']}, dispatched {offset * 1e3:.0f} ms into its turn"
        return f"{a['agentkit.run_id']}, {a['agentkit.turns']} turns"

    print(f"{'span':<28} {'start':>7} {'end':>7}  (ms from the run's start)")
    children = sorted((s for s in spans if s.parent is not None), key=lambda s: s.start_time or 0)
    for index, span in enumerate([root, *children]):
        branch = "" if index == 0 else ("└─ " if index == len(children) else "├─ ")
        print(
            f"{branch + span.name:<28} {ms(span.start_time)} {ms(span.end_time)}  {describe(span)}"
        )


def print_metrics(reader: InMemoryMetricReader) -> None:
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        keys = ("gen_ai.token.type", "gen_ai.tool.name")
                        label = ", ".join(
                            str(point.attributes[k]) for k in keys if k in point.attributes
                        )
                        print(
                            f"{metric.name:<45} {label:<8} n={point.count} "
                            f"sum={point.sum:.3f} {metric.unit}"
                        )


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    agent = agentkit.Agent(
        ScriptedEngine(SCRIPT, token_delay=0.003),
        tools=[weather],
        profile="qwen3",
        instrument=Instrumentation(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[reader]),
            agent_name="forecaster",
        ),
    )
    result = await agent.run("What is the weather in Paris and in Oslo?")
    print(result.output_text, end="\n\n")

    finished = list(spans.get_finished_spans())
    print_tree(finished)
    first_chat = next(s for s in finished if s.name.startswith("chat"))
    tools = [s for s in finished if s.name.startswith("execute_tool")]
    assert first_chat.end_time is not None
    assert all((t.start_time or 0) < first_chat.end_time for t in tools)
    print("\nBoth tools started while the model was still writing turn 1.\n")
    print_metrics(reader)


if __name__ == "__main__":
    anyio.run(main)
