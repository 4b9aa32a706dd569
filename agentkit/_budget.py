"""Enforcing a run's :class:`~agentkit.budgets.UsageLimits`: the agent loop's meter.

The loop asks it before each request (:meth:`RunBudget.before_request`: turns, tokens left,
time left), caps the request (:meth:`RunBudget.max_tokens`), sees each chunk where a limit
needs it (:attr:`RunBudget.watch`) and each tool call about to start (:meth:`RunBudget.allow_call`),
and closes the turn's accounts (:meth:`RunBudget.end_turn`). Once a limit is reached,
:attr:`RunBudget.stop` holds the error that ends the run; the loop stops the stream, starts
no more tools, keeps what the turn produced and raises it.

The wall-time deadline is enforced with cancel scopes: :meth:`RunBudget.generation` around the
engine stream (its cancellation aborts the request, and the loop goes on to record the partial
turn) and :meth:`RunBudget.tools` around the turn's tool calls (armed once generation is over,
so that the deadline cancels the tools still running).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import TracebackType

import anyio

from agentkit.budgets import LimitName, UsageLimits
from agentkit.engine import GenerationChunk, Usage
from agentkit.errors import UsageLimitExceeded
from agentkit.transcript import ToolCallBlock, ToolResultBlock

__all__ = ["RunBudget"]


class _Scope:
    """A cancel scope usable in an ``async with`` list, that tells the budget when the
    deadline (not another cancellation) stopped what it wraps."""

    def __init__(self, budget: RunBudget, deadline: float) -> None:
        self._budget = budget
        self.scope = anyio.CancelScope(deadline=deadline)

    async def __aenter__(self) -> _Scope:
        self.scope.__enter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        swallowed = bool(self.scope.__exit__(exc_type, exc, tb))
        if self.scope.cancelled_caught:
            self._budget.out_of_time()
        return swallowed


class RunBudget:
    """One run's usage against its limits (no limits: every check passes)."""

    def __init__(self, limits: UsageLimits | None) -> None:
        self.limits = limits or UsageLimits()
        self.stop: UsageLimitExceeded | None = None
        """The limit that ends the run, once one is reached."""
        self.turns = 0
        self.tool_calls = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self._started = 0.0
        self._deadline = math.inf
        self._turn_output = 0
        self._turn_prompt: int | None = None
        self._turn_cap: LimitName | None = None
        self._tools: _Scope | None = None

    def start(self) -> None:
        """The run starts now: the wall-time deadline counts from here."""
        self._started = anyio.current_time()
        wall = self.limits.wall_time_s
        self._deadline = math.inf if wall is None else self._started + wall

    @property
    def deadline(self) -> float:
        """The run's deadline on anyio's clock (``inf``: none)."""
        return self._deadline

    def before_request(self, prompt_tokens: int | None) -> None:
        """Raise :class:`UsageLimitExceeded` when the next request must not start: the turns
        are used up, no output token is left, or the deadline has passed. ``prompt_tokens``:
        the request's prompt length, when known before it is sent."""
        limits = self.limits
        if limits.turns is not None and self.turns >= limits.turns:
            raise UsageLimitExceeded("turns", self.turns + 1, limits.turns)
        if limits.output_tokens is not None and self.output_tokens >= limits.output_tokens:
            raise UsageLimitExceeded("output_tokens", self.output_tokens, limits.output_tokens)
        if limits.total_tokens is not None:
            needed = self.total_tokens + (prompt_tokens or 0)
            if needed >= limits.total_tokens:
                raise UsageLimitExceeded("total_tokens", needed, limits.total_tokens)
        if anyio.current_time() >= self._deadline:
            raise self._out_of_time_error()
        self.turns += 1
        self._turn_output = 0
        self._turn_prompt = prompt_tokens

    def max_tokens(self, requested: int | None) -> int | None:
        """The request's ``max_tokens``: the agent's, capped to the output tokens left (and
        to the total tokens left, when the prompt's length is known)."""
        self._turn_cap = None
        cap = requested
        for name, left in self._left():
            if cap is None or left < cap:
                cap, self._turn_cap = left, name
        return cap

    def _left(self) -> list[tuple[LimitName, int]]:
        limits = self.limits
        left: list[tuple[LimitName, int]] = []
        if limits.output_tokens is not None:
            left.append(("output_tokens", limits.output_tokens - self.output_tokens))
        if limits.total_tokens is not None and self._turn_prompt is not None:
            left.append(
                ("total_tokens", limits.total_tokens - self.total_tokens - self._turn_prompt)
            )
        return left

    @property
    def counts_chunks(self) -> bool:
        """Whether :meth:`on_chunk` must see each chunk: only a token limit needs it."""
        return self.limits.output_tokens is not None or self.limits.total_tokens is not None

    @property
    def watch(self) -> Callable[[GenerationChunk], bool] | None:
        """What the model turn calls after each chunk (``True``: a limit is reached, the stream
        stops and its request is aborted), or ``None`` when no limit can be reached
        mid-stream, so a run without token or tool-call limits pays nothing per token."""
        if self.counts_chunks:
            return self._count_chunk
        if self.limits.tool_calls is not None:
            return self._stopped
        return None

    def _count_chunk(self, chunk: GenerationChunk) -> bool:
        self.on_chunk(chunk)
        return self.stop is not None

    def _stopped(self, chunk: GenerationChunk) -> bool:
        return self.stop is not None

    def on_chunk(self, chunk: GenerationChunk) -> None:
        """Count a chunk's output tokens (its ids, else one per piece of text) and note the
        prompt's length when the engine reports it early; a limit crossed sets :attr:`stop`."""
        self._turn_output += len(chunk.token_ids) or (1 if chunk.text else 0)
        if chunk.usage is not None and chunk.usage.prompt_tokens:
            self._turn_prompt = chunk.usage.prompt_tokens
        if self.stop is not None:
            return
        limits = self.limits
        output = self.output_tokens + self._turn_output
        if limits.output_tokens is not None and output > limits.output_tokens:
            self.stop = UsageLimitExceeded("output_tokens", output, limits.output_tokens)
            return
        if limits.total_tokens is not None and self._turn_prompt is not None:
            total = self.total_tokens + self._turn_prompt + self._turn_output
            if total > limits.total_tokens:
                self.stop = UsageLimitExceeded("total_tokens", total, limits.total_tokens)

    def allow_call(self) -> bool:
        """Whether a tool call may start now: not once the run is stopping, nor beyond the
        ``tool_calls`` limit (which then stops the run)."""
        if self.stop is not None:
            return False
        limit = self.limits.tool_calls
        if limit is not None and self.tool_calls >= limit:
            self.stop = UsageLimitExceeded("tool_calls", self.tool_calls + 1, limit)
            return False
        self.tool_calls += 1
        return True

    def end_turn(self, usage: Usage, finish_reason: str) -> None:
        """Close the turn's accounts with the engine's own counts where it gave them; a turn
        that went over a limit, or that the capped ``max_tokens`` cut short, sets :attr:`stop`."""
        output = usage.output_tokens or self._turn_output
        prompt = usage.prompt_tokens or self._turn_prompt or 0
        self.output_tokens += output
        self.total_tokens += prompt + output
        if self.stop is not None:
            return
        limits = self.limits
        if limits.output_tokens is not None and self.output_tokens > limits.output_tokens:
            self.stop = UsageLimitExceeded(
                "output_tokens", self.output_tokens, limits.output_tokens
            )
        elif limits.total_tokens is not None and self.total_tokens > limits.total_tokens:
            self.stop = UsageLimitExceeded("total_tokens", self.total_tokens, limits.total_tokens)
        elif finish_reason == "length" and self._turn_cap is not None:
            # The engine stopped at the budget's cap: the model wanted more than was left.
            maximum = getattr(limits, self._turn_cap)
            value = self.output_tokens if self._turn_cap == "output_tokens" else self.total_tokens
            self.stop = UsageLimitExceeded(self._turn_cap, value, maximum)

    def generation(self) -> _Scope:
        """The scope for the engine stream: the deadline aborts it, and the loop goes on."""
        return _Scope(self, self._deadline)

    def tools(self) -> _Scope:
        """The scope for the turn's tool calls; :meth:`arm_tools` sets its deadline."""
        self._tools = _Scope(self, math.inf)
        return self._tools

    def arm_tools(self) -> None:
        """Generation is over: from now on the deadline cancels the turn's running tools."""
        if self._tools is not None:
            self._tools.scope.deadline = self._deadline

    def out_of_time(self) -> None:
        if self.stop is None:
            self.stop = self._out_of_time_error()

    def _out_of_time_error(self) -> UsageLimitExceeded:
        wall = self.limits.wall_time_s
        assert wall is not None
        return UsageLimitExceeded("wall_time_s", anyio.current_time() - self._started, wall)

    def settle_calls(
        self, calls: Sequence[ToolCallBlock], results: Sequence[ToolResultBlock]
    ) -> list[ToolResultBlock]:
        """The turn's results in call order, with an error result for each call the stopping
        run did not run or finish, so the transcript stays one a model can continue."""
        stop = self.stop
        assert stop is not None
        by_id = {r.call_id: r for r in results}
        settled = list(results)
        for call in calls:
            if call.id not in by_id:
                by_id[call.id] = block = ToolResultBlock(
                    call_id=call.id,
                    name=call.name,
                    content=f"Not run: the run reached its usage limit {stop.limit}.",
                    is_error=True,
                )
                settled.append(block)
        order = {call.id: i for i, call in enumerate(calls)}
        return sorted(settled, key=lambda r: order.get(r.call_id, len(order)))
