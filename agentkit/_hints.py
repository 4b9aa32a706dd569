"""Per-request scheduling hints: a leaf module, so that the engine interface can carry them.

:class:`AgentHints` travels typed on :attr:`agentkit.engine.GenerationRequest.hints`, set by
the model turn for :class:`~agentkit.Agent` and ``agentkit serve`` alike; each engine maps
what its backend takes and ignores the rest (no engine has to recognise an option in
``extra`` to read them).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentHints"]


class AgentHints(BaseModel):
    """Per-request scheduling hints, settable per agent, per run and over HTTP (an
    ``agent_hints`` object in the request body).

    They reach the engine as ``GenerationRequest.hints``; each engine maps what it can:

    * ``VLLMEngine``: ``priority``, vLLM's priority scheduling (lower runs earlier) when the
      engine was started with ``scheduling_policy="priority"``;
    * ``RemoteEngine`` (vLLM's server): ``priority`` as the body's ``priority``;
    * ``RemoteEngine(flavor="dynamo")``: ``nvext.agent_hints`` with ``priority`` (negated:
      higher is more important in Dynamo) and ``expected_output_tokens`` as ``osl`` (the
      router's load estimate).

    ``latency_sensitive`` is advisory: no engine sends it (vLLM has no place for it, and
    Dynamo's ``latency_sensitivity`` is a deprecated alias of the priority); it is kept for
    routers, logs and side queries (which are latency sensitive by nature).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    priority: int = 0
    latency_sensitive: bool = False
    expected_output_tokens: int | None = Field(default=None, ge=1)
