"""Approvals: a person decides before a tool call runs.

A call needs approval when its tool says so (``@tool(requires_approval=True)``) or the
agent's policy does (``Agent(requires_approval=policy)``, a function that sees each call).
Every other call still starts the moment it is parsed. A call that needs approval does not
start; what happens to it depends on the agent:

* with an ``approval_handler`` (an async callback, for a UI that can answer at once), the
  handler is asked while the model keeps generating, and the call runs, is denied, or is held
  as the handler decides;
* otherwise the call is held: the run ends at the end of the turn, once its other tools have
  finished, with a :class:`~agentkit.RunResult` whose ``pending_approvals`` lists the held
  calls and whose ``state`` (a :class:`RunState`) is plain JSON. ``agent.resume(state,
  decisions)`` continues the run, in this process or another one, with a fresh ``Agent``.

A decision is :class:`Approve` (optionally with edited arguments, validated against the
tool's schema like any call) or :class:`Deny` (with a message the model reads as the call's
error result). Time spent waiting for a person never counts against a tool's timeout: a call
starts, and its timeout with it, only once it is approved.

The transcript keeps the model's calls exactly as the model wrote them, so the prompt after a
resume extends the prompt before the pause token for token; when a person edited a call's
arguments, its result says so, so that the model knows what actually ran.

**Client tools** pause a run the same way. ``agent.stream(prompt, client_tools=[...])``
offers the model tools the agent does not run (:class:`ClientTool`: a name, a description, a
JSON schema): whoever called the agent runs them, as an OpenAI-style client does when
``agentkit serve --agent`` hosts the agent. A call to one is held like a call waiting for
approval (``PendingApproval.kind == "client_tool"``); the turn's own tools still run, and the
run pauses at the end of the turn. The caller settles it with :class:`ToolOutput` (the
result the tool gave) or :class:`Deny`; :class:`Approve` is refused, since the agent has no
such tool to run. A person may equally answer an approval with a :class:`ToolOutput` (they
ran the call themselves).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkit.errors import AgentkitError, ConfigurationError
from agentkit.events import TurnUsage
from agentkit.transcript import ToolResultBlock, Transcript

__all__ = [
    "ApprovalError",
    "ApprovalHandler",
    "ApprovalPolicy",
    "Approve",
    "ClientTool",
    "Decision",
    "Deny",
    "PendingApproval",
    "RunState",
    "ToolOutput",
]


class ClientTool(BaseModel):
    """A tool offered to the model that the agent does not run: its caller does.

    A call to it pauses the run at the end of its turn (see the module docstring); the
    arguments are not checked against ``parameters`` (the tool's owner checks them).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """The arguments' JSON schema, rendered into the prompt like an agent tool's."""

    @classmethod
    def from_spec(cls, spec: ClientTool | Mapping[str, Any]) -> ClientTool:
        """A client tool from itself or an OpenAI function spec (``{"type": "function",
        "function": {"name": ..., "description": ..., "parameters": ...}}``, or the inner
        ``function`` object)."""
        if isinstance(spec, ClientTool):
            return spec
        function = spec.get("function", spec)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise TypeError(f"a client tool needs a name: {dict(spec)!r}")
        parameters = function.get("parameters")
        return cls(
            name=function["name"],
            description=function.get("description") or "",
            parameters=dict(parameters) if isinstance(parameters, Mapping) else {"type": "object"},
        )

    def spec(self) -> dict[str, Any]:
        """The OpenAI function spec the prompt renders (as an agent tool's)."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


def check_client_tools(client_tools: Mapping[str, ClientTool], agent_tools: Iterable[str]) -> None:
    """:class:`~agentkit.errors.ConfigurationError` for a client tool named like one of the
    agent's tools: a call to that name would be ambiguous (whose tool runs?)."""
    clash = sorted(set(client_tools) & set(agent_tools))
    if clash:
        raise ConfigurationError(
            f"client tool(s) {', '.join(clash)} have the name of an agent tool; the agent "
            "runs its own tools, so a client tool needs another name"
        )


class PendingApproval(BaseModel):
    """A tool call the run paused on: waiting for a person's decision, or for the result of
    a client tool (``kind``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The call's id: the key of its decision."""
    name: str
    """The tool's name."""
    arguments: dict[str, Any]
    """The arguments as the model wrote them."""
    description: str
    """The tool's description, to show the person what the call does."""
    kind: Literal["approval", "client_tool"] = "approval"
    """``"approval"``: an agent tool waiting for a decision (:class:`Approve`, :class:`Deny`
    or :class:`ToolOutput`); ``"client_tool"``: a :class:`ClientTool` call, for its caller to
    run (:class:`ToolOutput` or :class:`Deny`)."""


class Approve(BaseModel):
    """Run the call, as the model wrote it or with ``arguments`` instead."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["approve"] = "approve"
    arguments: dict[str, Any] | None = None
    """Edited arguments to run the call with (checked against the tool's schema: arguments
    that fail it become an error result the model sees); ``None``: the model's own."""


class Deny(BaseModel):
    """Do not run the call; the model reads ``message`` as the call's error result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["deny"] = "deny"
    message: str = ""
    """Why, or what to do instead: words for the model (may be empty)."""


class ToolOutput(BaseModel):
    """The call already ran elsewhere (a client tool, or a person ran it): ``content`` is its
    result, as the model will read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["tool_output"] = "tool_output"
    content: str
    is_error: bool = False
    """The call failed: the model reads ``content`` as its error."""


Decision = Annotated[Approve | Deny | ToolOutput, Field(discriminator="type")]
"""The answer for one paused call (JSON: ``{"type": "approve" | "deny" | "tool_output",
...}``)."""

ApprovalPolicy = Callable[[PendingApproval], bool]
"""Sees each parsed call of a registered tool; ``True`` holds it for approval. It is called
while the model generates, so it must be quick and must not block."""

ApprovalHandler = Callable[[PendingApproval], Awaitable[Approve | Deny | None]]
"""Asked for each call that needs approval, while the model keeps generating (several calls'
handlers may run at once). It returns the decision, or ``None`` to hold the call: the run then
pauses at the end of the turn as it does without a handler."""


class ApprovalError(AgentkitError):
    """A resume that cannot go on: a pending call without a decision, a decision for a call
    that is not pending, or a state that does not belong to this agent. ``state`` is the
    state concerned."""

    def __init__(self, message: str, *, state: RunState) -> None:
        super().__init__(message)
        self.state = state


class RunState(BaseModel):
    """Everything a paused run needs to continue, as plain JSON.

    ``state.to_json()`` and ``RunState.from_json(text)`` round-trip it losslessly (the
    assistant messages keep the token ids the model generated, so a resumed run's prompt
    extends the paused run's prompts exactly).
    """

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """The format's version, so that a state saved by this release is recognised later."""
    run_id: str
    """The run's id; a resumed run keeps it."""
    profile: str
    """The name of the profile the run used; a resume must use the same."""
    transcript: Transcript
    """The conversation up to the paused turn's assistant message (its tool message is not
    in it yet: it is appended when every call of the turn has a result)."""
    turns: int
    """Model turns used so far (they count against the agent's ``max_turns``)."""
    usage: list[TurnUsage] = Field(default_factory=list)
    """What each of those turns cost."""
    tool_results: list[ToolResultBlock] = Field(default_factory=list)
    """Results of the paused turn's calls that already ran or were decided, as they will
    enter the transcript."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    """The calls waiting for a decision or a client's result, in call order."""
    client_tools: list[ClientTool] = Field(default_factory=list)
    """The run's client tools: a resumed run offers them again (the prompt stays the same)."""

    def to_json(self) -> str:
        """The state as JSON text (store it anywhere; see :meth:`from_json`)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, data: str | bytes) -> RunState:
        """A state from :meth:`to_json`'s text."""
        return cls.model_validate_json(data)
