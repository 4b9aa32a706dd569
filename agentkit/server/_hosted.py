"""Hosting a user's agent: ``agentkit serve --agent package.module:agent``.

The served thing is an :class:`~agentkit.Agent` (its engine, profile, tools and settings),
not a bare model. Each Responses or Chat Completions request is one *run* of that agent
(``agent.stream``), and the **ownership rule** decides where each tool call runs:

* the agent's own tools run on the server, each dispatched the moment its call is parsed
  (the agent loop does this); their calls and results are shown to the client as work the
  server did (Responses ``mcp_call`` items, Chat's ``agentkit_server_tool`` extension), never
  as calls for the client to run;
* the tools the client declares in its request are offered to the model as well, as
  :class:`~agentkit.approvals.ClientTool`\\ s: a call to one ends the run after that turn (once
  the turn's server-side tools have finished) and comes back as an ordinary function call
  (Responses ``function_call``, Chat ``tool_calls``); the client answers it as usual and the
  next request continues the conversation;
* a client tool named like an agent tool is a 400 (``invalid_request_error`` naming it).

**A run that reaches a limit.** A run stopped by its output-token budget (the agent's
``UsageLimits.output_tokens``) is answered as the APIs answer a response cut at its output
cap: Responses ``status: "incomplete"`` with ``incomplete_details.reason:
"max_output_tokens"``, Chat ``finish_reason: "length"``, with what was generated. Every other
limit (``max_turns``, the other usage limits, an answer failing ``output_type``) is an error
(:func:`~agentkit.server._lifecycle.api_error`: 422 ``invalid_request_error`` before the
stream, the API's error event after it, with a ``code`` naming the kind of limit).

This module holds what both wire formats share: loading the agent, the run (its events, the
record :class:`~agentkit.server._lifecycle.TurnWatch` guards), and :func:`answer_run`, the
request skeleton of :mod:`._exchange` for a run of many model turns. The wire mappings are
:mod:`._hosted_responses` and :mod:`._hosted_chat`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import Response

from agentkit._result import RunResult, RunUsage
from agentkit._tool_choice import ToolChoice
from agentkit.agent import Agent, AgentStream
from agentkit.approvals import ClientTool, RunState
from agentkit.budgets import UsageLimits
from agentkit.engine import Usage
from agentkit.errors import ConfigurationError, UsageLimitExceeded
from agentkit.events import AgentEvent, RunComplete, TurnComplete, TurnUsage
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._exchange import Answer, Started, answer_started
from agentkit.side_queries import AgentHints
from agentkit.telemetry._hooks import request_parent
from agentkit.transcript import Message, TextBlock, ToolResultBlock, Transcript

if TYPE_CHECKING:
    from agentkit.server._runtime import ModelTurn

__all__ = [
    "SERVER_LABEL",
    "HostedAgent",
    "HostedRun",
    "RunAnswer",
    "answer_run",
    "load_agent",
    "resolve_tool_choice",
]

SERVER_LABEL = "agentkit"
"""The ``server_label`` of the Responses ``mcp_call`` items that show the agent's tools."""


def load_agent(target: str) -> Agent[Any]:
    """The agent ``target`` names: ``package.module:attribute`` (importable from the current
    directory), the attribute an :class:`~agentkit.Agent` or a zero-argument callable that
    returns one. A :class:`~agentkit.errors.ConfigurationError` says what is wrong."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise ConfigurationError(
            f"--agent {target!r}: give it as package.module:attribute (e.g. myapp.agents:agent)"
        )
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` would: the project's own modules import
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigurationError(
            f"--agent {target!r}: cannot import {module_name}: {error}"
        ) from error
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigurationError(
                f"--agent {target!r}: {module_name} has no attribute {attribute!r}"
            ) from None
    if not isinstance(value, Agent) and callable(value):
        value = value()
    if not isinstance(value, Agent):
        raise ConfigurationError(
            f"--agent {target!r} is a {type(value).__name__}, not an agentkit.Agent (or a "
            "function of no arguments returning one)"
        )
    return value


def resolve_tool_choice(
    choice: object, names: Sequence[str], path: str = "tool_choice"
) -> ToolChoice:
    """The run's ``tool_choice`` from a request's (Responses' or Chat's shape). It applies to
    the run's first model turn, as :class:`~agentkit.Agent`'s does (later turns are
    ``"auto"``, so the run can end with an answer), and may name an agent tool or a client
    tool."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ApiError(
                "invalid_request_error", f"{path}: unknown tool_choice {choice!r}", param=path
            )
        return choice
    if isinstance(choice, Mapping):
        if choice.get("type") == "allowed_tools":
            mode = choice.get("mode", "auto")
            return "required" if mode == "required" else "auto"
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        if choice.get("type") == "function" and isinstance(name, str):
            if name not in names:
                raise ApiError(
                    "invalid_request_error",
                    f"{path}: {name!r} is neither one of the agent's tools nor in tools",
                    param=path,
                )
            return name
    raise ApiError("invalid_request_error", f"{path}: unsupported tool_choice", param=path)


@dataclass(slots=True)
class _Named:
    request_id: str


@dataclass(slots=True)
class _Record:
    """What :class:`TurnWatch` reads of the turn it guards, kept for a whole run: its id, the
    last message once the run is over, and the usage of its model turns added up."""

    request: _Named
    message: Message | None = None
    token_ids: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    prompt_tokens: int | None = None
    cached_prompt_tokens: int = 0


class HostedRun:
    """One request's run of the hosted agent: its events (an async generator that stops the
    run, aborting the engine request and cancelling running tools, when it is closed) and
    what the run produced."""

    def __init__(
        self,
        hosted: HostedAgent,
        stream: AgentStream[Any],
        run_id: str,
        client_tools: Sequence[ClientTool],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.hosted = hosted
        self.stream = stream
        self.run_id = run_id
        self._headers: Mapping[str, str] = headers or {}
        """The HTTP request's headers: its ``traceparent`` parents the run's spans."""
        self.record = _Record(_Named(run_id))
        self.last_finish_reason: str | None = None
        """The finish reason of the run's last model turn."""
        self.cut: UsageLimitExceeded | None = None
        """The output-token budget stopped the run (it is answered as incomplete, not as a
        failure; see the module docstring)."""
        self._turns: list[TurnUsage] = []
        self._output_tokens = 0
        self._client_names = frozenset(t.name for t in client_tools)
        self.first_message = len(stream.transcript.messages)
        """Where the run's own messages begin in its transcript."""

    @property
    def result(self) -> RunResult[Any]:
        return self.stream.result

    @property
    def usage(self) -> RunUsage:
        """The run's model turns' usage (a run cut by its budget has no result)."""
        return RunUsage(turns=self._turns)

    @property
    def state(self) -> RunState | None:
        """The paused run's state (its pending calls), or ``None``."""
        return None if self.cut is not None else self.result.state

    @property
    def paused(self) -> bool:
        return self.cut is None and self.result.paused

    def is_client_call(self, name: str) -> bool:
        """Whether a call of ``name`` goes back to the client (one of its tools)."""
        return name in self._client_names

    def for_model(self, result: ToolResultBlock) -> ToolResultBlock:
        """A result as the model reads it (the agent's truncation applied): what the client
        is shown, so that sending it back renders the same prompt."""
        return self.stream._for_context(result)

    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        iterator = aiter(self.stream)
        try:
            # The run starts at its first event: its spans under the request's trace, if any.
            with request_parent(self._headers, self.hosted.agent.instrument):
                event = await anext(iterator, None)
            while event is not None:
                self._note(event)
                yield event
                event = await anext(iterator, None)
        except UsageLimitExceeded as error:
            if error.limit != "output_tokens":
                raise
            self.cut = error
            self.last_finish_reason = "length"  # cut at the output budget, whatever the engine said
            generated = self.generated()
            self.record.message = generated[-1] if generated else None
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()  # stops the run: engine request aborted, tools cancelled
        self._remember()

    def _note(self, event: AgentEvent) -> None:
        record = self.record
        if isinstance(event, TurnComplete):
            self.last_finish_reason = event.finish_reason
            usage = event.usage
            self._turns.append(usage)
            record.prompt_tokens = usage.prompt_tokens  # the last turn's: the whole context
            record.cached_prompt_tokens = usage.cached_prompt_tokens
            self._output_tokens += usage.output_tokens
            record.usage = Usage(
                prompt_tokens=usage.prompt_tokens,
                cached_prompt_tokens=usage.cached_prompt_tokens,
                output_tokens=self._output_tokens,
                time_to_first_token_s=record.usage.time_to_first_token_s
                or usage.time_to_first_token_s,
            )
        elif isinstance(event, RunComplete):
            generated = self.generated()
            record.message = generated[-1] if generated else None

    def generated(self) -> list[Message]:
        """The assistant messages this run generated, in order."""
        messages = self.stream.transcript.messages[self.first_message :]
        return [m for m in messages if m.role == "assistant"]

    def _remember(self) -> None:
        """Keep each generated turn for exact replay when the client sends it back."""
        for message in self.generated():
            if message.raw is not None and message.token_ids is not None:
                self.hosted.turns.remember(message)


class HostedAgent:
    """The served agent and what its requests share.

    Args:
        agent: the agent.
        context: the server's context (its runtime holds the turn store).
    """

    def __init__(self, agent: Agent[Any], context: ServerContext) -> None:
        holds = any(t.requires_approval for t in agent.registry) or (
            getattr(agent.approvals, "_policy", False) is not False
        )
        if holds and agent.approvals.handler is None:
            raise ConfigurationError(
                "the hosted agent holds tool calls for approval but has no approval_handler: "
                "over HTTP nobody could answer them; give it an approval_handler"
            )
        self.agent = agent
        self.context = context
        self.turns = context.runtime.turns

    @property
    def tool_names(self) -> list[str]:
        return list(self.agent.registry.names)

    def usage_limits(self, max_output_tokens: int | None) -> UsageLimits | None:
        """The run's limits: the agent's, with a request's ``max_output_tokens`` as the run's
        output-token budget (every model turn of the run together, as the APIs bound one
        response; the agent's own budget, if smaller, still applies). ``None``: the agent's."""
        if max_output_tokens is None:
            return None
        limits = self.agent.usage_limits or UsageLimits()
        own = limits.output_tokens
        budget = max_output_tokens if own is None else min(own, max_output_tokens)
        return limits.model_copy(update={"output_tokens": budget})

    def sampling(self, temperature: float | None, top_p: float | None) -> dict[str, Any]:
        """The sampling a request's run uses, as its response echoes it: the request's
        ``temperature`` and ``top_p`` where it gives them, the agent's otherwise."""
        agent = self.agent
        return {
            "temperature": agent.temperature if temperature is None else temperature,
            "top_p": agent.top_p if top_p is None else top_p,
        }

    def client_tools(
        self, specs: Sequence[Mapping[str, Any]], path: str = "tools"
    ) -> list[ClientTool]:
        """The request's tools as client tools; a name clash with an agent tool is a 400."""
        clients = [ClientTool.from_spec(spec) for spec in specs]
        own = set(self.agent.registry.names)
        for i, tool in enumerate(clients):
            if tool.name in own:
                raise ApiError(
                    "invalid_request_error",
                    f"{path}.{i}: {tool.name!r} is the name of one of the agent's own tools, "
                    "which run on the server; give the client tool another name",
                    param=f"{path}.{i}",
                )
        return clients

    def transcript(self, transcript: Transcript) -> Transcript:
        """The conversation a request sent, under the agent's own system prompt: the client's
        system text (instructions, system messages) follows the agent's, in one message."""
        system = self.agent.system
        if system is None:
            return transcript
        messages = transcript.messages
        if messages and messages[0].role == "system":
            first = messages[0]
            text = "".join(b.text for b in first.content if isinstance(b, TextBlock))
            merged = f"{system}\n\n{text}" if text else system
            messages[0] = Message(role="system", content=[TextBlock(text=merged)])
        else:
            messages.insert(0, Message(role="system", content=[TextBlock(text=system)]))
        return transcript

    def start(
        self,
        transcript: Transcript,
        *,
        client_tools: Sequence[ClientTool],
        tool_choice: ToolChoice,
        hints: AgentHints | None,
        run_id: str,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HostedRun:
        """A run of the agent on ``transcript`` (it starts when its events are read), with the
        request's sampling fields (see :meth:`sampling`); ``headers``: the HTTP request's
        (a W3C ``traceparent`` there parents the run's spans)."""
        try:
            stream = self.agent.stream(
                self.transcript(transcript),
                client_tools=client_tools,
                tool_choice=tool_choice,
                hints=hints,
                usage_limits=self.usage_limits(max_output_tokens),
                temperature=temperature,
                top_p=top_p,
            )
        except ConfigurationError as error:
            raise ApiError("invalid_request_error", str(error)) from error
        return HostedRun(self, stream, run_id, client_tools, headers)


class RunAnswer(Answer["HostedRun", AgentEvent]):
    """What one API writes for a hosted run: stream frames, or the whole response (as
    :class:`~agentkit.server._exchange.TurnAnswer` does for one model turn). A non-streaming
    answer builds its state from the same :meth:`event` calls."""

    def collect(self, event: AgentEvent) -> None:
        self.event(event)


async def answer_run(
    context: ServerContext,
    request: Request,
    prepare: Callable[[], HostedRun],
    answer: RunAnswer,
    *,
    stream: bool,
) -> Response:
    """Run the agent for ``request`` and answer with ``answer``'s frames, through the request
    skeleton (:func:`~agentkit.server._exchange.answer_started`: the slot, the first event
    before the 200, disconnects, failures after the 200, the server's shutdown).

    :class:`~agentkit.server._lifecycle.TurnWatch` guards the run as it guards one turn: it
    reads only a turn's id, last message and usage, which :class:`HostedRun` keeps for the
    whole run in its record (hence the cast).
    """

    async def start() -> Started[HostedRun]:
        run = prepare()
        return Started(run, cast("ModelTurn", run.record), run.events())

    return await answer_started(context, request, start, answer, stream=stream)
