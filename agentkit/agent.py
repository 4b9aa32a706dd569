"""The agent: a model (engine + profile), tools, and the controls over its runs.

:class:`Agent` holds the configuration; each run is an :class:`AgentStream`
(``agentkit._run``), and returns a :class:`RunResult` (``agentkit._result``), all three
importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal

from agentkit._agent_profile import agent_profile
from agentkit._approval_run import ApprovalRules, Resumption
from agentkit._format_watch import FormatWatch
from agentkit._logging import get_logger
from agentkit._prompt import check_replay_policy
from agentkit._result import RunResult, RunUsage
from agentkit._run import AgentStream
from agentkit._tool_choice import ToolChoice, tool_choice_options, validate_tool_choice
from agentkit.approvals import (
    ApprovalHandler,
    ApprovalPolicy,
    Approve,
    ClientTool,
    Deny,
    RunState,
    ToolOutput,
    check_client_tools,
)
from agentkit.budgets import UsageLimits
from agentkit.engine import Engine
from agentkit.errors import ConfigurationError
from agentkit.output import OutputT, answer_constraint, output_schema, system_prompt
from agentkit.profiles import Profile, ReplayPolicy
from agentkit.profiles._replay import validate_replay_policy
from agentkit.side_queries import (
    AgentHints,
    SideQueryError,
    SideQueryKind,
    SideQueryResult,
    run_side_queries,
    run_side_query,
)
from agentkit.telemetry._settings import Instrument
from agentkit.telemetry._settings import validate as validate_instrument
from agentkit.tools import Dispatcher, Tool, ToolRegistry, Toolset
from agentkit.transcript import Message, TextBlock, Transcript
from agentkit.truncation import TruncationPolicy

if TYPE_CHECKING:  # agentkit.sessions is not imported by `import agentkit`
    from agentkit.sessions import Session

__all__ = ["Agent", "AgentStream", "RequestOptions", "RunResult", "RunUsage"]

RequestOptions = Mapping[str, Any] | Callable[[int, Transcript], Mapping[str, Any]]
"""Per-request backend options: a fixed mapping, or ``f(turn, transcript) -> mapping``."""

_log = get_logger("agentkit.agent")


class Agent(Generic[OutputT]):
    """An agent: a model (engine + profile), tools, and the loop that connects them.

    Args:
        engine: where model output comes from; one engine can serve many agents at once.
        tools: tools (``@agentkit.tool`` functions, :class:`~agentkit.tools.Tool` objects or
            plain functions) the model may call, and toolsets such as
            :class:`agentkit.mcp.MCPServer`: a run starts each one not already running (and
            closes it when the run ends) and offers the tools it lists for the whole run.
        profile: the model family's profile (name, alias or object; a model id such as
            ``"Qwen/Qwen3-8B"`` is looked up with
            :func:`~agentkit.profiles.profile_for_model`): parsers and prompt template.
            ``None``: found from the engine's model name (``VLLMEngine``, ``RemoteEngine``),
            as ``agentkit run`` finds it, and logged; an engine without one
            (``ScriptedEngine``) needs it named. A turn offered tools whose text holds a call
            in another profile's format logs one warning per agent naming that profile.
        system: system prompt used when a run starts from a plain string.
        max_turns: model requests per run; a run still calling tools after this many turns
            raises :class:`~agentkit.errors.MaxTurnsExceeded` (carrying the transcript).
        max_tokens: output token limit per turn.
        temperature: sampling temperature (``None``: the engine's default).
        top_p: nucleus-sampling mass (``None``: the engine's default).
        stop: stop strings of your own, after the profile's; the output ends before the
            first one the model writes.
        tool_timeout: seconds a tool may run (a tool's own ``timeout`` wins).
        max_concurrency: how many tools may run at once (``None``: no limit).
        raise_tool_errors: for tests: a tool that crashes (raises anything but a
            :class:`~agentkit.errors.ToolError`) makes the run raise
            :class:`~agentkit.errors.ToolExecutionError`, chained to the tool's exception,
            once the turn's other tools have finished, instead of showing the model an error
            result and going on. The model's own mistakes (unknown tool, bad arguments,
            malformed call) and timeouts stay error results the model sees.
        request_options: backend options for every request (``GenerationRequest.extra``:
            structured outputs, logit bias, priority, seed, ...), or a function of the turn
            number and the transcript that returns them, for options that vary per turn.
        tool_choice: ``"auto"`` (the model decides), ``"required"`` (at least one call),
            ``"none"`` (no calls) or a tool's name (one call of that tool). It applies to the
            first model turn of each run; later turns are ``"auto"``, so that the run can end
            with an answer. ``"required"`` and a name constrain the output to the profile's
            call format with structured outputs (an engine that supports them is needed:
            ``VLLMEngine``); ``"none"`` keeps call markup as text. The prompt is the same for
            every choice, so it does not cost prefix-cache reuse.
        output_type: the type of the final answer (a pydantic model, a dataclass, a
            ``TypedDict`` or a plain type such as ``int`` or ``list[str]``): the system
            prompt asks for it as JSON, and ``RunResult.output`` is the validated value.
            ``None`` or ``str``: plain text. See ``docs/typed-output.md``.
        output_retries: how many answers that fail ``output_type`` the model may correct
            (each time it sees what was wrong); the next failure, or one on the last of
            ``max_turns``, raises :class:`~agentkit.errors.OutputValidationError`.
        constrain_output: whether the final answer is also constrained to ``output_type``'s
            schema with structured outputs (after the reasoning; tool calls stay allowed).
            ``None``: where the engine supports them (``VLLMEngine``, ``RemoteEngine``) and
            the profile's call format has a grammar; ``True``: always (a
            ``ConfigurationError`` where it cannot be built); ``False``: validate only.
        replay: the reasoning-replay policy (``keep_all``, ``drop_on_plain_turns``,
            ``keep_with_tools``, ``drop_all``, ``template_native``); default: the profile's,
            which follows what the model's own template does.
        truncation: how tool outputs are cut before they enter the model's context
            (a :class:`~agentkit.truncation.TruncationPolicy` or ``{"mode": "tokens" |
            "bytes" | "lines", "limit": N}``); ``None``: the profile's; ``False``: never.
            Events and ``ToolResultBlock.original_content`` keep the full output.
        hints: scheduling hints for every request (``priority`` goes to vLLM's priority
            scheduling; ``latency_sensitive`` and ``expected_output_tokens`` are advisory);
            a run's own hints win.
        thinking: ``False`` turns the model's thinking off where its template has a switch
            (``Profile.thinking_switch``: the prompt is what the template writes with
            ``enable_thinking=False``, and the parser expects no reasoning block).
        requires_approval: ``True`` holds every tool call for a person's approval; a
            function of the call (:data:`~agentkit.approvals.ApprovalPolicy`) holds the calls
            it returns ``True`` for. Tools marked ``@tool(requires_approval=True)`` always wait.
            See :mod:`agentkit.approvals`.
        approval_handler: an async callback that decides held calls in-process, while the
            model keeps generating; without one (or when it returns ``None``) the run pauses
            with ``RunResult.pending_approvals`` and :meth:`resume` continues it.
        usage_limits: the most each run may use (output and total tokens, tool calls,
            turns, wall time; see :mod:`agentkit.budgets`); a run that reaches one raises
            :class:`~agentkit.errors.UsageLimitExceeded` with the transcript so far. A run's
            own ``usage_limits`` replace these.
        instrument: OpenTelemetry spans and metrics for each run (``invoke_agent``, a
            ``chat`` span per model turn, an ``execute_tool`` span per call; see
            ``docs/tracing.md``): ``True``, an :class:`~agentkit.telemetry.Instrumentation`
            (content capture, providers), ``False`` (never), or ``None``: as
            :func:`agentkit.telemetry.instrument_all` says (off unless it was called).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        tools: Iterable[Tool | Callable[..., Any] | Toolset] = (),
        profile: str | Profile | None = None,
        system: str | None = None,
        max_turns: int = 10,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] = (),
        tool_timeout: float | None = 60.0,
        max_concurrency: int | None = None,
        raise_tool_errors: bool = False,
        request_options: RequestOptions | None = None,
        tool_choice: ToolChoice = "auto",
        output_type: type[OutputT] | None = None,
        output_retries: int = 2,
        constrain_output: bool | None = None,
        replay: ReplayPolicy | None = None,
        truncation: TruncationPolicy | Mapping[str, Any] | Literal[False] | None = None,
        hints: AgentHints | None = None,
        thinking: bool = True,
        requires_approval: bool | ApprovalPolicy = False,
        approval_handler: ApprovalHandler | None = None,
        usage_limits: UsageLimits | None = None,
        instrument: Instrument = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.engine = engine
        self.profile = agent_profile(engine, profile)
        self.registry = ToolRegistry(tools)
        self.system = system
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.stop = tuple(stop)
        self.request_options = request_options
        self._check_tool_choice(tool_choice)
        self.tool_choice = tool_choice
        self.hints = hints or AgentHints()
        self.thinking = thinking or not self.profile.thinking_switch
        """Whether the model thinks (``False`` only where the profile has a switch)."""
        if output_retries < 0:
            raise ValueError("output_retries must be at least 0")
        self.output_schema = output_schema(output_type)
        self.output_retries = output_retries
        self.system = system_prompt(system, self.output_schema)
        self.output_constraint = answer_constraint(
            self.output_schema,
            constrain_output,
            engine=engine,
            profile=self.profile,
            tools=self.registry.schemas(),
            thinking=self.thinking,
        )
        """The JSON schema final answers are constrained to, or ``None`` (validated only)."""
        self.replay: ReplayPolicy = check_replay_policy(
            self.profile, validate_replay_policy(replay or self.profile.replay)
        )
        self.truncation = (
            None
            if truncation is False
            else TruncationPolicy.parse(truncation)
            if truncation is not None
            else self.profile.truncation
        )
        tokenizes = callable(getattr(engine, "encode", None)) and callable(
            getattr(engine, "decode", None)
        )
        if self.truncation is not None and self.truncation.mode == "tokens" and not tokenizes:
            raise ConfigurationError(
                "token truncation of tool outputs needs the model's tokenizer, and this "
                "engine has none (no encode/decode); use mode 'bytes' or 'lines'"
            )
        self.dispatcher = Dispatcher(
            self.registry,
            timeout=tool_timeout,
            max_concurrency=max_concurrency,
            raise_tool_errors=raise_tool_errors,
        )
        self.approvals = ApprovalRules(self.registry, requires_approval, approval_handler)
        self.usage_limits = usage_limits
        self.format_watch = FormatWatch(self.profile, self.registry.names)
        self.instrument = validate_instrument(instrument)

    def stream(
        self,
        prompt: str | Transcript,
        *,
        tool_choice: ToolChoice | None = None,
        hints: AgentHints | None = None,
        usage_limits: UsageLimits | None = None,
        session: Session | None = None,
        client_tools: Sequence[ClientTool | Mapping[str, Any]] = (),
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> AgentStream[OutputT]:
        """Run the agent, yielding typed events as they happen.

        Use it as ``async with agent.stream(p) as events: async for event in events: ...``,
        or as a plain ``async for event in agent.stream(p)``. Leaving either early (``break``,
        an exception) stops the run: the model request is aborted and running tools are
        cancelled. A run cancelled from any task surfaces as cancelled, never as a stream that
        ended. ``tool_choice``, ``usage_limits``, ``temperature`` and ``top_p`` override the
        agent's for this run (``None``: the agent's).

        With a ``session`` (:mod:`agentkit.sessions`) the run continues the stored
        conversation, ``prompt`` appended as its new user message, and writes each model turn
        to the session once the turn and its tools are complete (one atomic write per turn);
        runs on one session in this process take turns.

        ``client_tools`` (:class:`~agentkit.approvals.ClientTool`, or OpenAI function specs)
        are offered to the model for this run, but the agent does not run them: a turn that
        calls one runs its own tools, then the run pauses with the call in
        ``result.pending_approvals`` (``kind="client_tool"``), for the caller to run and
        answer with :meth:`resume` and a :class:`~agentkit.approvals.ToolOutput`. A client
        tool named like an agent tool is a :class:`~agentkit.errors.ConfigurationError`.
        """
        clients = self._client_tools(client_tools)
        if tool_choice is None:
            tool_choice = self.tool_choice
        else:
            self._check_tool_choice(tool_choice, clients)
        return AgentStream(
            self,
            self._start_transcript(prompt),
            tool_choice=tool_choice,
            hints=hints,
            usage_limits=usage_limits,
            session=session,
            client_tools=clients,
            temperature=temperature,
            top_p=top_p,
        )

    async def run(
        self,
        prompt: str | Transcript,
        *,
        tool_choice: ToolChoice | None = None,
        hints: AgentHints | None = None,
        usage_limits: UsageLimits | None = None,
        session: Session | None = None,
        client_tools: Sequence[ClientTool | Mapping[str, Any]] = (),
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent to completion and return its result (see :meth:`stream`)."""
        stream = self.stream(
            prompt,
            tool_choice=tool_choice,
            hints=hints,
            usage_limits=usage_limits,
            session=session,
            client_tools=client_tools,
            temperature=temperature,
            top_p=top_p,
        )
        return await stream._run_unobserved()

    def resume_stream(
        self,
        state: RunState,
        decisions: Mapping[str, Approve | Deny | ToolOutput],
        *,
        hints: AgentHints | None = None,
        session: Session | None = None,
    ) -> AgentStream[OutputT]:
        """Continue a paused run, as a stream (see :meth:`resume`)."""
        resumption = Resumption(state, decisions, profile=self.profile.name)
        return AgentStream(
            self,
            state.transcript.model_copy(deep=True),
            hints=hints,
            resume=resumption,
            session=session,
            client_tools=self._client_tools(state.client_tools),
        )

    async def resume(
        self,
        state: RunState,
        decisions: Mapping[str, Approve | Deny | ToolOutput],
        *,
        hints: AgentHints | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Continue a paused run: settle each pending call by its decision (keyed by call
        id; a client tool's call by its :class:`~agentkit.approvals.ToolOutput`), append the
        paused turn's results in call order, and go on from the next turn (offering the
        state's client tools again).
        ``state`` may come from another process (:meth:`RunState.from_json`); this agent
        needs the same profile and tools. A run paused on a ``session`` resumes on it (its
        stored conversation must still be the start of the state's transcript)."""
        stream = self.resume_stream(state, decisions, hints=hints, session=session)
        return await stream._run_unobserved()

    async def side_query(
        self,
        kind: SideQueryKind,
        *,
        transcript: Transcript,
        urls: Sequence[str] | None = None,
        hints: AgentHints | None = None,
    ) -> SideQueryResult:
        """A small judgement task (``title``, ``domain``, ``action``...) on ``transcript``'s
        exact prompt, so the engine's prefix cache serves all of it; the transcript is not
        changed (see :mod:`agentkit.side_queries`)."""
        return await run_side_query(
            self.engine,
            self.profile,
            transcript,
            kind,
            tools=self.registry.specs(),
            replay=self.replay,
            urls=urls,
            hints=hints or self.hints,
        )

    async def side_queries(
        self,
        kinds: Sequence[SideQueryKind],
        *,
        transcript: Transcript,
        urls: Sequence[str] | None = None,
        hints: AgentHints | None = None,
    ) -> dict[SideQueryKind, SideQueryResult | SideQueryError]:
        """Several side queries at once, concurrently on the engine."""
        return await run_side_queries(
            self.engine,
            self.profile,
            transcript,
            kinds,
            tools=self.registry.specs(),
            replay=self.replay,
            urls=urls,
            hints=hints or self.hints,
        )

    def _check_tool_choice(
        self, choice: ToolChoice, client_tools: Sequence[ClientTool] = ()
    ) -> None:
        """Fail at once, not at the first request, for a choice this agent cannot honour
        (with toolsets, whose tools are known once a run lists them: at the run's start)."""
        names = [*self.registry.names, *(t.name for t in client_tools)]
        if self.registry.toolsets and choice not in names:
            return
        validate_tool_choice(choice, names)
        schemas = {**self.registry.schemas(), **{t.name: t.parameters for t in client_tools}}
        tool_choice_options(self.profile, choice, schemas)

    def _client_tools(self, tools: Sequence[ClientTool | Mapping[str, Any]]) -> list[ClientTool]:
        """The run's client tools, checked: unique names, none an agent tool's."""
        clients = [ClientTool.from_spec(t) for t in tools]
        by_name = {t.name: t for t in clients}
        if len(by_name) != len(clients):
            raise ConfigurationError("client tools need distinct names")
        check_client_tools(by_name, self.registry.names)
        return clients

    def _start_transcript(self, prompt: str | Transcript) -> Transcript:
        if isinstance(prompt, str):
            return Transcript.from_prompt(prompt, system=self.system)
        transcript = prompt.model_copy(deep=True)
        if self.system is not None and not (
            transcript.messages and transcript.messages[0].role == "system"
        ):
            transcript.messages.insert(
                0, Message(role="system", content=[TextBlock(text=self.system)])
            )
        return transcript
