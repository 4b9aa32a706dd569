"""What instrumentation an agent's runs get: per agent, or a process-wide default.

Nothing here imports OpenTelemetry: an agent that is not instrumented never loads it, and
an instrumented one loads it when its first run starts.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from agentkit._distribution import pip_install
from agentkit.errors import ConfigurationError

__all__ = ["Instrument", "Instrumentation", "check", "instrument_all", "resolve", "validate"]


@dataclass(frozen=True)
class Instrumentation:
    """How an agent's runs are traced and measured with OpenTelemetry.

    Args:
        capture_content: whether spans carry the conversation itself: the chat span's
            ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
            ``gen_ai.system_instructions`` and the tool span's ``gen_ai.tool.call.arguments``
            / ``gen_ai.tool.call.result``. Off by default: prompts, answers and tool data are
            often private, and large.
        tracer_provider: where spans go (an ``opentelemetry.trace.TracerProvider``);
            ``None``: the global one, as ``opentelemetry.trace.set_tracer_provider`` set it.
        meter_provider: where metrics go (an ``opentelemetry.metrics.MeterProvider``);
            ``None``: the global one.
        agent_name: ``gen_ai.agent.name``, also in the run span's name
            (``invoke_agent {agent_name}``); ``None``: not set (the span is ``invoke_agent``).
    """

    capture_content: bool = False
    tracer_provider: Any = None
    meter_provider: Any = None
    agent_name: str | None = None


Instrument = bool | Instrumentation | None
"""``Agent(instrument=...)``: ``True`` (default settings), an :class:`Instrumentation`,
``False`` (off even under :func:`instrument_all`) or ``None`` (the process-wide default)."""

_default: Instrumentation | None = None


def instrument_all(instrument: bool | Instrumentation = True) -> None:
    """Instrument every agent that was not given ``instrument=`` (``False`` stops it).

    It applies to runs that start after the call, agents created earlier included.
    """
    global _default
    _default = check(instrument)


def check(instrument: Instrument) -> Instrumentation | None:
    """The settings ``instrument`` stands for, without the process-wide default; fails at
    once (not at the first run) when OpenTelemetry is missing."""
    if instrument is None or instrument is False:
        return None
    if importlib.util.find_spec("opentelemetry.trace") is None:
        raise ConfigurationError(
            f"instrumenting an agent needs OpenTelemetry: {pip_install('otel')} "
            "(and opentelemetry-sdk with an exporter to see the spans)"
        )
    return Instrumentation() if instrument is True else instrument


def resolve(instrument: Instrument) -> Instrumentation | None:
    """The settings a run uses: the agent's own, else the process-wide default."""
    if instrument is None:
        return _default
    return check(instrument)


def validate(instrument: Instrument) -> Instrument:
    """An agent's ``instrument=`` as it keeps it: checked now, ``True`` made explicit, and
    ``None`` (follow :func:`instrument_all`) told apart from ``False`` (never)."""
    if instrument is None or instrument is False:
        return instrument
    return check(instrument)
