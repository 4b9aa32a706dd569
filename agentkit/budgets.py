"""Budgets for a run: how much it may generate, call, request and take, at most.

``Agent(..., usage_limits=UsageLimits(output_tokens=2000, tool_calls=20, wall_time_s=60))``
applies to every run of the agent; ``agent.run(p, usage_limits=...)`` replaces them for one
run. A run that reaches a limit stops with :class:`~agentkit.errors.UsageLimitExceeded`,
which names the limit and keeps the transcript, the cut-short turn included, so nothing
produced is lost and the conversation can be continued.

Each limit is enforced as early as is correct (see ``docs/budgets.md``):

* ``output_tokens``: each request's ``max_tokens`` is capped to what is left, and the stream
  is stopped (the request aborted) once the run has generated more than the limit;
* ``total_tokens`` (prompt + output of every request, as the engine counts them): the cap
  takes the prompt into account when its length is known before the request;
* ``tool_calls``: a call beyond the limit is not started (it gets an error result saying so);
* ``turns``: a model request beyond the limit is not started;
* ``wall_time_s``: a deadline over the whole run; when it passes, the engine request is
  aborted and running tools are cancelled.

``Agent(max_turns=...)`` is separate: it ends a run whose model still calls tools after that
many turns, with :class:`~agentkit.errors.MaxTurnsExceeded`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LimitName", "UsageLimits"]

LimitName = Literal["output_tokens", "total_tokens", "tool_calls", "turns", "wall_time_s"]
"""The names :attr:`UsageLimitExceeded.limit <agentkit.errors.UsageLimitExceeded>` takes."""


class UsageLimits(BaseModel):
    """The most one run may use; ``None`` (the default for each) is no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output_tokens: int | None = Field(default=None, ge=1)
    """Tokens the model may generate over the whole run, every turn together."""
    total_tokens: int | None = Field(default=None, ge=1)
    """Prompt plus output tokens over the whole run (each request's whole prompt counts, as
    the engine processes it; cached prompt tokens included)."""
    tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls the run may start (malformed and unknown calls count: each is answered)."""
    turns: int | None = Field(default=None, ge=1)
    """Model requests the run may make."""
    wall_time_s: float | None = Field(default=None, gt=0)
    """Seconds the whole run may take, from its start to its last tool result."""
