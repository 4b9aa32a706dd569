"""How approvals run: holding calls during a turn, and settling them when a run resumes.

Calls to client tools (:class:`~agentkit.approvals.ClientTool`) are held by the same gate,
as ``kind="client_tool"``: one mechanism pauses a run for a person and for a client.

The agent loop knows three things of this module: :class:`ApprovalRules` (which calls need a
person, and who answers), :meth:`ApprovalRules.turn` (a wrapper around the turn's
:class:`~agentkit.tools.DispatchTurn` that starts, asks about or holds each call), and
:class:`Resumption` (a paused run's state and the decisions that settle it). The public types
are in :mod:`agentkit.approvals`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentkit._logging import get_logger
from agentkit.approvals import (
    ApprovalError,
    ApprovalHandler,
    ApprovalPolicy,
    Approve,
    ClientTool,
    Deny,
    PendingApproval,
    RunState,
    ToolOutput,
)
from agentkit.events import ToolCallComplete, ToolResultEvent
from agentkit.tools import Dispatcher, DispatchTurn, ResultCallback, ToolRegistry
from agentkit.transcript import Message, ToolCallBlock, ToolResultBlock, Transcript

__all__ = ["ApprovalRules", "ApprovalTurn", "Resumption"]

_log = get_logger("agentkit.approvals")


class ApprovalRules:
    """Which calls wait for a person (the tool's flag, or the policy), and who answers them
    in-process (the handler, if any)."""

    def __init__(
        self,
        registry: ToolRegistry,
        policy: bool | ApprovalPolicy = False,
        handler: ApprovalHandler | None = None,
    ) -> None:
        if not (isinstance(policy, bool) or callable(policy)):
            raise TypeError("requires_approval must be a bool or a function of the call")
        self._registry = registry
        self._policy = policy
        self.handler = handler

    def pending_for(self, call: ToolCallComplete) -> PendingApproval | None:
        """The approval ``call`` waits for, or ``None`` if it may run at once. Malformed calls
        and unknown tools never wait: there is nothing to approve, and the model should hear
        about its mistake at once."""
        if call.error is not None:
            return None
        tool = self._registry.get(call.name)
        if tool is None:
            return None
        if not tool.requires_approval and self._policy is False:
            return None
        pending = PendingApproval(
            id=call.id, name=call.name, arguments=call.arguments, description=tool.description
        )
        if tool.requires_approval or self._policy is True:
            return pending
        assert not isinstance(self._policy, bool)
        return pending if self._policy(pending) else None

    def turn(
        self,
        tools: DispatchTurn,
        on_result: ResultCallback,
        client_tools: Mapping[str, ClientTool] | None = None,
    ) -> ApprovalTurn:
        """A gate in front of ``tools`` for one model turn; calls of ``client_tools`` (by
        name) are always held for the run's caller."""
        return ApprovalTurn(self, tools, on_result, client_tools)


class ApprovalTurn:
    """The calls of one turn, each started, asked about or held.

    Use inside the turn's dispatcher block: ``async with rules.turn(tools, send) as gate``,
    then ``gate.start(call)`` for each parsed call. Leaving the block waits for the handler's
    answers (approved calls start in ``tools`` as soon as they are approved, so their
    timeouts start then too).
    """

    def __init__(
        self,
        rules: ApprovalRules,
        tools: DispatchTurn,
        on_result: ResultCallback,
        client_tools: Mapping[str, ClientTool] | None = None,
    ):
        self._rules = rules
        self._client = client_tools or {}
        self._tools = tools
        self._on_result = on_result
        self._order: list[str] = []
        self._seen: set[str] = set()
        self._held: dict[str, PendingApproval] = {}
        self._denied: dict[str, ToolResultBlock] = {}
        self._edited: dict[str, dict[str, Any]] = {}
        self._group: TaskGroup | None = None

    async def __aenter__(self) -> ApprovalTurn:
        if self._rules.handler is not None:
            self._group = anyio.create_task_group()
            await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        group = self._group
        if group is None:
            return
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            # The turn failed: nobody will act on the answers; let its error propagate.
            group.cancel_scope.cancel()
            with contextlib.suppress(BaseExceptionGroup):
                await group.__aexit__(None, None, None)
            return
        try:
            await group.__aexit__(exc_type, exc, traceback)
        except BaseExceptionGroup as failures:
            # A handler raised: the caller's own error, given as itself.
            if len(failures.exceptions) == 1:
                raise failures.exceptions[0] from None
            raise

    def start(self, call: ToolCallComplete) -> None:
        """Start ``call`` now, or ask the handler about it, or hold it."""
        if call.id in self._seen:
            self._tools.start(call)  # the dispatcher reports and ignores a repeated id
            return
        self._seen.add(call.id)
        self._order.append(call.id)
        client = self._client.get(call.name) if call.error is None else None
        if client is not None:  # the run's caller runs it: held, never asked about
            self._hold(
                PendingApproval(
                    id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    description=client.description,
                    kind="client_tool",
                )
            )
            return
        pending = self._rules.pending_for(call)
        if pending is None:
            self._tools.start(call)
        elif self._group is None:
            self._hold(pending)
        else:
            self._group.start_soon(self._ask, call, pending, name=f"approval:{call.id}")

    async def _ask(self, call: ToolCallComplete, pending: PendingApproval) -> None:
        handler = self._rules.handler
        assert handler is not None
        decision = await handler(pending)
        if isinstance(decision, Approve | Deny):
            _log.info("approval", call_id=call.id, tool=call.name, decision=decision.type)
        if decision is None:
            self._hold(pending)
        elif isinstance(decision, Approve):
            if decision.arguments is not None:
                self._edited[call.id] = dict(decision.arguments)
                call = call.model_copy(update={"arguments": dict(decision.arguments)})
            self._tools.start(call)
        elif isinstance(decision, Deny):
            block = denial(call.id, call.name, decision)
            self._denied[call.id] = block
            await self._on_result(result_event(block))
        else:
            raise TypeError(
                f"the approval handler returned {decision!r} for call {call.id!r}: "
                "return Approve(...), Deny(...) or None"
            )

    def _hold(self, pending: PendingApproval) -> None:
        _log.info("tool_call_held", call_id=pending.id, tool=pending.name)
        self._held[pending.id] = pending

    @property
    def held(self) -> list[PendingApproval]:
        """The calls held for a decision, in call order (once the block has exited)."""
        return [self._held[i] for i in self._order if i in self._held]

    def results(self, started: list[ToolResultBlock]) -> list[ToolResultBlock]:
        """The turn's results in call order: ``started`` (the dispatcher's) and denials;
        held calls have none yet."""
        by_id = {block.call_id: block for block in started}
        by_id.update(self._denied)
        return [
            edited_result(by_id[i], self._edited[i]) if i in self._edited else by_id[i]
            for i in self._order
            if i in by_id
        ]


class Resumption:
    """A paused run's state and the decisions for its pending calls, checked at once."""

    def __init__(
        self,
        state: RunState,
        decisions: Mapping[str, Approve | Deny | ToolOutput],
        *,
        profile: str,
    ) -> None:
        if state.profile != profile:
            raise ApprovalError(
                f"the run was paused with profile {state.profile!r}; resume it with an agent "
                f"of the same profile, not {profile!r}",
                state=state,
            )
        pending = {call.id for call in state.pending_approvals}
        missing = [call.id for call in state.pending_approvals if call.id not in decisions]
        if missing:
            raise ApprovalError(
                f"no decision for pending call(s) {', '.join(missing)}: every pending call "
                "needs Approve(...) or Deny(...)",
                state=state,
            )
        unknown = sorted(set(decisions) - pending)
        if unknown:
            raise ApprovalError(
                f"decision(s) for call(s) that are not pending: {', '.join(unknown)}",
                state=state,
            )
        kinds = {call.id: call.kind for call in state.pending_approvals}
        for call_id, decision in decisions.items():
            if not isinstance(decision, Approve | Deny | ToolOutput):
                raise ApprovalError(
                    f"the decision for call {call_id!r} is {decision!r}: use Approve, Deny "
                    "or ToolOutput",
                    state=state,
                )
            if isinstance(decision, Approve) and kinds[call_id] == "client_tool":
                raise ApprovalError(
                    f"call {call_id!r} is a client tool's: the agent cannot run it; give its "
                    "result as ToolOutput(...) (or Deny(...))",
                    state=state,
                )
        self._calls = _paused_calls(state)
        self.state = state
        self._decisions = dict(decisions)

    async def settle(
        self,
        dispatcher: Dispatcher,
        on_result: ResultCallback,
        for_context: Callable[[ToolResultBlock], ToolResultBlock],
    ) -> list[ToolResultBlock]:
        """Run the approved calls (the denied ones get their message as an error result);
        every result of the paused turn, in call order, as it enters the transcript."""
        ran: dict[str, ToolResultBlock] = {r.call_id: r for r in self.state.tool_results}
        edited: dict[str, dict[str, Any]] = {}
        async with dispatcher.turn(on_result=on_result) as tools:
            for pending in self.state.pending_approvals:
                decision = self._decisions[pending.id]
                _log.info("approval", call_id=pending.id, tool=pending.name, decision=decision.type)
                if isinstance(decision, Deny | ToolOutput):
                    block = (
                        denial(pending.id, pending.name, decision)
                        if isinstance(decision, Deny)
                        else ToolResultBlock(
                            call_id=pending.id,
                            name=pending.name,
                            content=decision.content,
                            is_error=decision.is_error,
                        )
                    )
                    ran[pending.id] = for_context(block)
                    await on_result(result_event(block))
                    continue
                arguments = pending.arguments
                if decision.arguments is not None:
                    arguments = edited[pending.id] = dict(decision.arguments)
                written = self._calls.get(pending.id)
                tools.start(
                    ToolCallComplete(
                        index=written[0] if written else 0,
                        id=pending.id,
                        name=pending.name,
                        arguments=arguments,
                        raw=(written[1].raw or "") if written else "",
                    )
                )
        for block in tools.results:
            if block.call_id in edited:
                block = edited_result(block, edited[block.call_id])
            ran[block.call_id] = for_context(block)
        order = [call_id for call_id in self._calls if call_id in ran]
        return [ran[call_id] for call_id in order]


def _paused_calls(state: RunState) -> dict[str, tuple[int, ToolCallBlock]]:
    """The paused turn's calls by id, in call order, with their block index."""
    message = _last_assistant(state.transcript)
    calls: dict[str, tuple[int, ToolCallBlock]] = {}
    if message is not None:
        for index, block in enumerate(message.content):
            if isinstance(block, ToolCallBlock) and block.id not in calls:
                calls[block.id] = (index, block)
    missing = [p.id for p in state.pending_approvals if p.id not in calls]
    if missing:
        raise ApprovalError(
            f"the state's transcript does not end with the paused turn: its last assistant "
            f"message has no call {', '.join(missing)}",
            state=state,
        )
    return calls


def _last_assistant(transcript: Transcript) -> Message | None:
    messages = transcript.messages
    return messages[-1] if messages and messages[-1].role == "assistant" else None


def denial(call_id: str, name: str, decision: Deny) -> ToolResultBlock:
    """The error result a denied call gets: the person's message, for the model."""
    text = "The user denied this tool call; it did not run."
    if decision.message:
        text += f" Their message: {decision.message}"
    return ToolResultBlock(call_id=call_id, name=name, content=text, is_error=True)


def edited_result(block: ToolResultBlock, arguments: dict[str, Any]) -> ToolResultBlock:
    """``block`` with a note first that says which arguments the person ran the call with,
    since the transcript keeps the model's call as it was written."""
    note = (
        "The user edited this call's arguments before it ran; it ran with "
        f"{json.dumps(arguments, ensure_ascii=False)}.\n"
    )
    return block.model_copy(update={"content": note + block.content})


def result_event(block: ToolResultBlock) -> ToolResultEvent:
    """The stream event of a result that needed no tool to run."""
    return ToolResultEvent(
        call_id=block.call_id,
        name=block.name,
        content=block.content,
        is_error=block.is_error,
        duration_s=0.0,
        result=block,
    )
