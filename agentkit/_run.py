"""One run of an agent: render → generate → parse → dispatch → append → repeat.

:class:`AgentStream` owns a run's loop (``agentkit.agent`` re-exports it). Each tool starts
the moment its call's closing delimiter is parsed, while the model is still generating the
rest of the turn; results are appended in call order once the turn's tools have all
finished, and the next turn begins.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

import anyio
from anyio.abc import TaskGroup

from agentkit._approval_run import Resumption
from agentkit._budget import RunBudget
from agentkit._channel import EventChannel
from agentkit._detached import DetachedIteration
from agentkit._detached import supported as detached_supported
from agentkit._logging import bind_run, get_logger
from agentkit._model_turn import ModelTurns, TurnOptions, conversation_id
from agentkit._result import RunResult, RunUsage
from agentkit._tool_choice import ToolChoice, validate_tool_choice
from agentkit.approvals import ClientTool, PendingApproval, RunState, check_client_tools
from agentkit.budgets import UsageLimits
from agentkit.engine import RequestContext
from agentkit.errors import (
    AgentkitError,
    EngineError,
    MaxTurnsExceeded,
    RunCancelled,
    RunError,
)
from agentkit.events import (
    AgentEvent,
    ContextCompacted,
    ParseEvent,
    RunComplete,
    ToolCallComplete,
    TurnComplete,
    TurnUsage,
)
from agentkit.output import OutputChecker, OutputRetry, OutputT
from agentkit.side_queries import AgentHints
from agentkit.telemetry._hooks import run_trace
from agentkit.transcript import Message, ToolResultBlock, Transcript
from agentkit.truncation import truncate

if TYPE_CHECKING:  # agentkit.sessions is not imported by `import agentkit`
    from agentkit.agent import Agent
    from agentkit.sessions import Session, SessionRun

__all__ = ["AgentStream"]

_log = get_logger("agentkit.agent")


class AgentStream(Generic[OutputT]):
    """One run of an agent, as a stream of events. See :meth:`Agent.stream`."""

    def __init__(
        self,
        agent: Agent[OutputT],
        transcript: Transcript,
        *,
        tool_choice: ToolChoice = "auto",
        hints: AgentHints | None = None,
        resume: Resumption | None = None,
        usage_limits: UsageLimits | None = None,
        session: Session | None = None,
        client_tools: Sequence[ClientTool] = (),
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> None:
        self._agent = agent
        self._temperature = agent.temperature if temperature is None else temperature
        self._top_p = agent.top_p if top_p is None else top_p
        """This run's sampling: the caller's, or the agent's."""
        self._client_tools = {t.name: t for t in client_tools}
        """Tools offered to the model that the run's caller runs (see agentkit.approvals)."""
        self._budget = RunBudget(agent.usage_limits if usage_limits is None else usage_limits)
        self._tool_choice = tool_choice
        self._hints = hints or agent.hints
        self.transcript = transcript
        self._session: SessionRun | None = (
            None if session is None else session.open_run(transcript, resumed=resume is not None)
        )
        """The run's hold on its session: loads into ``transcript``, saves each turn."""
        self._conversation_id: str | None = None
        self.run_id = resume.state.run_id if resume else f"run_{uuid.uuid4().hex[:16]}"
        self._usage: list[TurnUsage] = list(resume.state.usage) if resume else []
        self._resume = resume
        self._held: tuple[list[PendingApproval], list[ToolResultBlock]] | None = None
        """The calls the last turn held for approval, and the results it has."""
        self._result: RunResult[OutputT] | None = None
        self._output = OutputChecker(agent.output_schema, retries=agent.output_retries)
        self._error: AgentkitError | None = None
        self._task_group: TaskGroup | None = None
        self._channel: EventChannel[AgentEvent] | None = None
        self._done = False
        self._cancelled = False
        self._turns = self._new_turns()
        self._trace = run_trace(
            agent.instrument, run_id=self.run_id, engine=agent.engine, profile=agent.profile.name
        )

    def _new_turns(self) -> ModelTurns:
        agent = self._agent
        return ModelTurns(
            agent.engine,
            agent.profile,
            [*agent.registry.specs(), *(t.spec() for t in self._client_tools.values())],
            replay=agent.replay,
            reserve_tokens=agent.max_tokens or 0,
            thinking=agent.thinking,
        )

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's result, once the stream has been consumed to its end."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            if self._cancelled:
                raise self._cancellation()
            raise RuntimeError("the run has not finished: consume the stream first")
        return self._result

    async def __aenter__(self) -> AgentStream[OutputT]:
        self._channel = channel = EventChannel[AgentEvent]()
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._produce, channel)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        assert self._channel is not None
        if not self._done:
            self._task_group.cancel_scope.cancel()
        try:
            if isinstance(exc, Exception):
                # An ordinary exception from the body (the run's own error re-raised by the
                # event iterator, or the caller's): the run is stopped above; let the exception
                # propagate as itself rather than wrapped in the task group's ExceptionGroup.
                await self._task_group.__aexit__(None, None, None)
                return None
            return await self._task_group.__aexit__(exc_type, exc, tb)
        finally:
            self._channel.discard()

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._task_group is not None:
            return self._events()
        if detached_supported():
            # Plain ``async for`` without ``async with``: see agentkit._detached.
            return DetachedIteration(self._produce, self._end_of_stream, name=self.run_id)
        return self._owned_iteration()

    async def _owned_iteration(self) -> AsyncIterator[AgentEvent]:
        # Outside asyncio only: correct when the loop runs to its end (a ``break`` leaves the
        # generator to be finalised in another task).
        async with self:
            async for event in self._events():
                yield event

    async def _events(self) -> AsyncIterator[AgentEvent]:
        channel = self._channel
        assert channel is not None
        while True:
            try:
                event = await channel.receive()
            except anyio.EndOfStream:
                break
            yield event
        await self._end_of_stream()

    async def _end_of_stream(self) -> None:
        """The producer closed the channel: end the iteration the way the run ended.

        A producer that ended with neither a result nor an error was cancelled (or crashed,
        which cancels the task group, the consumer's scope included). The consumer may have
        drained the queue without reaching a checkpoint, so it checks its own scope here and
        raises that cancellation; a consumer outside the cancelled scope gets
        :class:`~agentkit.errors.RunCancelled`. A cancelled run never ends looking finished.
        """
        if self._error is not None:
            self._done = True
            raise self._error
        if self._result is not None:
            self._done = True
            return
        await anyio.lowlevel.checkpoint()
        raise self._cancellation()

    def _cancellation(self) -> RunCancelled:
        return RunCancelled("the run was cancelled before it finished", transcript=self.transcript)

    async def _run_unobserved(self) -> RunResult[OutputT]:
        """The whole run in the caller's task, its events dropped: what :meth:`Agent.run`
        does. With no consumer there is no producer task either, so a token costs no task
        switch beyond the engine's own."""
        channel = EventChannel[AgentEvent]()
        channel.discard()
        await self._produce(channel)
        self._done = True
        return self.result

    async def _produce(self, send: EventChannel[AgentEvent]) -> None:
        try:
            async with (
                self._session or nullcontext(),  # the session's lock, for the whole run
                self._agent.registry.running(),  # toolsets (MCP servers) started and listed
            ):
                with bind_run(self.run_id), self._trace.run():  # logs' run_id; spans
                    self._result = await self._loop(send)
        except AgentkitError as error:
            if isinstance(error, RunError) and error.transcript is None:
                error.transcript = self.transcript
            self._error = error
        except anyio.get_cancelled_exc_class():
            self._cancelled = True
            raise
        finally:
            send.close()

    async def _loop(self, send: EventChannel[AgentEvent]) -> RunResult[OutputT]:
        agent = self._agent
        if agent.registry.toolsets:  # their tools are listed only now: the prompt offers them
            self._turns = self._new_turns()
            check_client_tools(self._client_tools, agent.registry.names)
            validate_tool_choice(self._tool_choice, [*agent.registry.names, *self._client_tools])
        self._budget.start()
        first = 1
        if self._resume is not None:
            results = await self._resume.settle(agent.dispatcher, send.send, self._for_context)
            self.transcript.append(Message(role="tool", content=list(results)))
            first = self._resume.state.turns + 1
            await self._save_turn()
        for turn in range(first, agent.max_turns + 1):
            message = await self._turn(turn, send)
            if self._held is not None:
                return await self._pause(turn, send, *self._held)
            await self._save_turn()
            if not message.tool_calls:
                output_text = message.text
                output = self._output.check(output_text, last_turn=turn == agent.max_turns)
                if isinstance(output, OutputRetry):
                    self.transcript.append(output.message)  # the model sees why, and retries
                    continue
                await send.send(
                    RunComplete(
                        turns=turn,
                        output_text=output_text,
                        output=output,
                        transcript=self.transcript,
                    )
                )
                return RunResult[Any](
                    transcript=self.transcript,
                    output_text=output_text,
                    output=output,
                    usage=RunUsage(turns=list(self._usage)),
                    run_id=self.run_id,
                )
        raise MaxTurnsExceeded(agent.max_turns, transcript=self.transcript)

    async def _save_turn(self) -> None:
        """Write the turn just completed (its assistant message, its tool results, and the
        user messages before it) to the run's session, in one transaction. Called only once a
        turn's tools have all finished: a turn cut short is never written."""
        if self._session is not None:
            await self._session.save()

    async def _pause(
        self,
        turn: int,
        send: EventChannel[AgentEvent],
        pending: list[PendingApproval],
        results: list[ToolResultBlock],
    ) -> RunResult[OutputT]:
        """End the run at a turn that holds calls for approval, with what resuming needs."""
        state = RunState(
            run_id=self.run_id,
            profile=self._agent.profile.name,
            transcript=self.transcript,
            turns=turn,
            usage=list(self._usage),
            tool_results=results,
            pending_approvals=pending,
            client_tools=list(self._client_tools.values()),
        )
        await send.send(
            RunComplete(turns=turn, output_text="", transcript=self.transcript, paused=True)
        )
        return RunResult(
            transcript=self.transcript,
            output_text="",
            usage=RunUsage(turns=list(self._usage)),
            run_id=self.run_id,
            pending_approvals=pending,
            state=state,
        )

    async def _turn(self, turn: int, send: EventChannel[AgentEvent]) -> Message:
        """One model request and its tools. Returns the assistant message it produced."""
        agent = self._agent
        started = time.perf_counter()
        choice = self._tool_choice if turn == 1 else "auto"
        turns = self._turns
        prompt = turns.prompt(self.transcript)
        budget = self._budget
        budget.before_request(None if prompt.token_ids is None else len(prompt.token_ids))
        if prompt.compaction is not None:
            c = prompt.compaction
            await send.send(
                ContextCompacted(
                    turn=turn,
                    reasoning_blocks=c.reasoning_blocks,
                    tool_outputs=c.tool_outputs,
                    tokens_before=c.tokens_before,
                    tokens_after=c.tokens_after,
                )
            )
        options = agent.request_options
        if callable(options):
            options = options(turn, self.transcript)
        model_turn = turns.start(
            prompt,
            TurnOptions(
                tool_choice=choice,
                max_tokens=budget.max_tokens(agent.max_tokens),
                temperature=self._temperature,
                top_p=self._top_p,
                stop=agent.stop,
                hints=self._hints,
                extra=options or {},
                answer=agent.output_constraint,
            ),
            request_id=f"{self.run_id}-{turn}",
            context=RequestContext(self.run_id, turn, tuple(self.transcript), turns.tools, choice),
            session_id=self._conversation(),
        )
        request = model_turn.request
        chat = self._trace.chat(turn, request)
        failure: EngineError | None = None

        async with (
            budget.tools(),  # outermost: the run's deadline cancels the turn's tools
            agent.dispatcher.turn(on_result=send.send, trace=chat.tool_tracer) as tools,
            agent.approvals.turn(tools, send.send, self._client_tools) as gate,
        ):

            def publish(events: list[ParseEvent]) -> None:
                # The channel is unbounded: sending never blocks, and not yielding to the event
                # loop once per event keeps the per-token cost down (the engine's stream yields).
                for event in events:
                    if isinstance(event, ToolCallComplete) and budget.allow_call():
                        gate.start(event)  # runs it now, or asks about it, or holds it
                    send.send_nowait(event)

            try:
                # The deadline's scope is outside aclosing: the request is aborted, then the
                # turn goes on to keep what was produced. A limit reached (tokens, tool
                # calls) ends the stream, which aborts the request.
                async with (
                    budget.generation(),
                    aclosing(model_turn.stream(budget.watch)) as batches,
                ):
                    async for events in batches:
                        publish(events)
            except EngineError as error:
                failure = error
            finish_reason = "error" if failure is not None else model_turn.finish_reason
            if budget.stop is not None and finish_reason == "stop":
                finish_reason = "abort"
            usage = model_turn.usage
            budget.arm_tools()
            # Whatever the model produced so far is kept, even when the engine failed; a
            # turn cut short before any output leaves no empty message behind.
            events, message = model_turn.finish()
            publish(events)
            if message.content or (failure is None and budget.stop is None):
                self.transcript.append(message)
                turns.record(self.transcript, message)
            agent.format_watch.check(message, tools_offered=choice != "none")
            turn_usage = TurnUsage(
                prompt_tokens=usage.prompt_tokens,
                cached_prompt_tokens=usage.cached_prompt_tokens,
                output_tokens=usage.output_tokens,
                time_to_first_token_s=usage.time_to_first_token_s,
            )
            self._usage.append(turn_usage)
            budget.end_turn(usage, finish_reason)
            chat.end(
                finish_reason=finish_reason, usage=turn_usage, message=message, failure=failure
            )
            if failure is None:
                await send.send(
                    TurnComplete(
                        turn=turn,
                        finish_reason=finish_reason,
                        tool_calls=len(message.tool_calls),
                        usage=turn_usage,
                        prompt_rebuilt=prompt.rebuilt,
                        duration_s=time.perf_counter() - started,
                    )
                )
        results = [self._for_context(r) for r in gate.results(tools.results)]
        stop = budget.stop if failure is None else None
        if stop is not None:
            results = budget.settle_calls(message.tool_calls, results)
        if gate.held and failure is None and stop is None:
            self._held = (gate.held, results)  # the tool message waits for the decisions
        elif results:
            self.transcript.append(Message(role="tool", content=list(results)))
        _log.info(
            "turn",
            run_id=self.run_id,
            turn=turn,
            finish_reason=finish_reason,
            tool_calls=len(message.tool_calls),
            prompt_tokens=turn_usage.prompt_tokens,
            cached_prompt_tokens=turn_usage.cached_prompt_tokens,
            output_tokens=turn_usage.output_tokens,
            time_to_first_token_s=turn_usage.time_to_first_token_s,
            duration_s=round(time.perf_counter() - started, 6),
        )
        if failure is not None:
            failure.transcript = self.transcript
            raise failure
        if stop is not None:
            stop.transcript = self.transcript
            raise stop
        return message

    def _conversation(self) -> str:
        """The conversation's session id, for engines that keep a conversation on the worker
        holding its cache: the agentkit session's id, else the conversation's start, so that
        a later run continuing this transcript (and a side query on it) lands there too."""
        if self._conversation_id is None:
            key = self._session.session.id if self._session is not None else None
            self._conversation_id = conversation_id(self.transcript, self._turns.tools, key=key)
        return self._conversation_id

    def _for_context(self, result: ToolResultBlock) -> ToolResultBlock:
        """The result as the model sees it: truncated by the agent's policy, the full output
        kept in ``original_content``."""
        policy = self._agent.truncation
        if policy is None:
            return result
        engine = self._agent.engine
        cut = truncate(
            result.content,
            policy,
            encode=getattr(engine, "encode", None),
            decode=getattr(engine, "decode", None),
        )
        if not cut.truncated:
            return result
        return result.model_copy(update={"content": cut.text, "original_content": result.content})
