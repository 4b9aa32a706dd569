"""What a run returns: its result and its token accounting (re-exported by ``agentkit.agent``)."""

from __future__ import annotations

from typing import Generic

from pydantic import BaseModel, ConfigDict, Field

from agentkit.approvals import PendingApproval, RunState
from agentkit.events import TurnUsage
from agentkit.output import OutputT
from agentkit.transcript import Transcript

__all__ = ["RunResult", "RunUsage"]


class RunUsage(BaseModel):
    """Token accounting for a whole run, turn by turn."""

    model_config = ConfigDict(frozen=True)

    turns: list[TurnUsage] = Field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def cached_prompt_tokens(self) -> int:
        return sum(t.cached_prompt_tokens for t in self.turns)

    @property
    def output_tokens(self) -> int:
        return sum(t.output_tokens for t in self.turns)


class RunResult(BaseModel, Generic[OutputT]):
    """What a finished (or paused) run produced."""

    transcript: Transcript
    output_text: str
    # Typed as the answer callers read; a run paused for approvals has none yet (``None``).
    output: OutputT = None  # type: ignore[assignment]
    """The final answer as the agent's ``output_type``, validated (``output_text`` when the
    agent has none); ``None`` only on a run paused for approvals (see ``paused``)."""
    usage: RunUsage
    run_id: str
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    """The calls waiting for a person's decision when the run paused (empty otherwise)."""
    state: RunState | None = None
    """What :meth:`Agent.resume` needs to continue a paused run (``None`` otherwise)."""

    @property
    def paused(self) -> bool:
        """Whether the run stopped for approvals (see :mod:`agentkit.approvals`)."""
        return bool(self.pending_approvals)
