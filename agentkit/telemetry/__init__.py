"""OpenTelemetry traces and metrics for agent runs (the ``otel`` extra).

``Agent(instrument=True)`` (or an :class:`Instrumentation`, for content capture and explicit
providers) traces each run of that agent; :func:`instrument_all` does it for every agent not
told otherwise. Each run is an ``invoke_agent`` span; each model turn a ``chat`` span with
its model, tokens (prompt, cached, output), time to first token and finish reason; each tool
call an ``execute_tool`` span that starts the moment the call is dispatched, so a trace shows
tools running while the model still generates. Names follow the OpenTelemetry GenAI semantic
conventions. See ``docs/tracing.md``.

Only ``opentelemetry-api`` is needed (add the SDK and an exporter to see anything). Nothing
here imports it until an instrumented run starts: ``import agentkit`` never does, and an
agent that is not instrumented costs nothing; an instrumented one costs a few spans per turn,
never work per token.
"""

from agentkit.telemetry._settings import Instrument as Instrument
from agentkit.telemetry._settings import Instrumentation as Instrumentation
from agentkit.telemetry._settings import instrument_all as instrument_all

__all__ = ["Instrument", "Instrumentation", "instrument_all"]
