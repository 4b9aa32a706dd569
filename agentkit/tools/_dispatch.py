"""Running tool calls the moment the model finishes writing them.

A turn opens an anyio task group. Each complete call is started in it immediately, while the
caller keeps streaming the model, so a slow tool overlaps with the rest of generation and
with other tools. Results come back in call order (the order the model wrote the calls), the
order the transcript must replay, whatever order the tools finish in.

Nothing a model can do wrong escapes as an exception: a malformed call, an unknown tool,
bad arguments, a timeout or a tool that raised (even ``KeyboardInterrupt`` or
``SystemExit``) each becomes an error ``tool_result`` the model can read and recover from.
Only cancellation of the caller's own scope (and errors in the caller's ``on_result``
callback) propagate, because those are the caller's, not the model's; and, when the
dispatcher is built with ``raise_tool_errors=True`` (for tests), a tool's own crash, once
the turn's other tools have finished.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentkit.errors import (
    ConfigurationError,
    MalformedToolCallError,
    ToolError,
    ToolExecutionError,
    UnknownToolError,
)
from agentkit.events import ToolCallComplete, ToolResultEvent
from agentkit.tools._execution import DispatchStats, LoopBlocks, Outcome, execute
from agentkit.tools._log import tool_logger
from agentkit.tools._output import clean_text, exception_text
from agentkit.tools._registry import ToolRegistry
from agentkit.tools._threads import ToolThreads
from agentkit.tools._tool import Tool
from agentkit.tools._trace import CallSpan, CallTracer
from agentkit.transcript import ToolResultBlock

__all__ = ["DispatchStats", "DispatchTurn", "Dispatcher", "ResultCallback"]

ResultCallback = Callable[[ToolResultEvent], Awaitable[None]]
"""Awaited with each result as its tool finishes (completion order, one at a time)."""

_log = tool_logger()

_RAW_HEAD = 400
_RAW_TAIL = 120


class Dispatcher:
    """Runs the tools of a registry, one :meth:`turn` at a time or several concurrently.

    ``timeout`` (seconds, ``None`` for none) applies to each call whose tool sets no timeout
    of its own. ``max_concurrency`` caps how many tools run at once across every turn of
    this dispatcher; calls beyond it wait their turn, and their timeout starts only when
    they do.

    Sync tools run in at most ``max_threads`` threads (default ``min(32, CPUs + 4)``). A
    timeout cannot stop a thread: the call is abandoned, its thread keeps its place until
    the function returns, and :attr:`stats` counts it (with a WARNING log record). An async
    tool step that holds the event loop longer than ``block_warning_after`` seconds (which
    no timeout can interrupt) is logged as a WARNING; ``None`` turns that check off.

    ``raise_tool_errors=True`` is for tests: a tool that crashes (raises anything but a
    :class:`~agentkit.errors.ToolError`) makes the turn raise
    :class:`~agentkit.errors.ToolExecutionError`, chained to the tool's exception, once its
    other tools have finished. The model's own mistakes (unknown tool, bad arguments,
    malformed call) and timeouts stay error results either way.
    """

    def __init__(
        self,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]],
        *,
        timeout: float | None = 60.0,
        max_concurrency: int | None = None,
        max_threads: int | None = None,
        block_warning_after: float | None = 0.5,
        raise_tool_errors: bool = False,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError("max_concurrency must be at least 1 (or None for no limit)")
        if timeout is not None and not timeout > 0:
            raise ConfigurationError("timeout must be positive (or None for no limit)")
        if max_threads is not None and max_threads < 1:
            raise ConfigurationError("max_threads must be at least 1 (or None for the default)")
        if block_warning_after is not None and not block_warning_after > 0:
            raise ConfigurationError("block_warning_after must be positive (or None for off)")
        self._registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self._timeout = timeout
        self._max_concurrency = max_concurrency
        # Created on first use, inside the event loop that will wait on it.
        self._limiter: anyio.CapacityLimiter | None = None
        self._threads = ToolThreads(max_threads)
        self._block_warning_after = block_warning_after
        self._loop_blocks = LoopBlocks()
        self._raise_tool_errors = raise_tool_errors

    @property
    def registry(self) -> ToolRegistry:
        return self._registry

    @property
    def timeout(self) -> float | None:
        return self._timeout

    @property
    def max_concurrency(self) -> int | None:
        return self._max_concurrency

    @property
    def raise_tool_errors(self) -> bool:
        return self._raise_tool_errors

    @property
    def stats(self) -> DispatchStats:
        """Threads in use and abandoned, and event-loop blocks, as of now."""
        threads = self._threads
        return DispatchStats(
            max_threads=threads.max_threads,
            threads_running=threads.running,
            threads_abandoned=threads.abandoned,
            abandoned_total=threads.abandoned_total,
            loop_blocks=self._loop_blocks.count,
        )

    def turn(
        self, on_result: ResultCallback | None = None, *, trace: CallTracer | None = None
    ) -> DispatchTurn:
        """A context in which :meth:`DispatchTurn.start` launches calls as they complete;
        ``trace`` opens a span for each call as it starts (see ``agentkit.tools._trace``)."""
        return DispatchTurn(self, on_result, trace)

    async def run(
        self, calls: Iterable[ToolCallComplete], *, on_result: ResultCallback | None = None
    ) -> list[ToolResultBlock]:
        """Run calls that are all known up front; their results, in call order."""
        async with self.turn(on_result) as turn:
            for call in calls:
                turn.start(call)
        return turn.results

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self._max_concurrency is None:
            return contextlib.nullcontext()
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_concurrency)
        return self._limiter

    async def _execute(self, tool: Tool, call: ToolCallComplete) -> Outcome:
        return await execute(
            tool,
            call,
            limit=tool.timeout if tool.timeout is not None else self._timeout,
            threads=self._threads,
            block_warning_after=self._block_warning_after,
            loop_blocks=self._loop_blocks,
        )


class DispatchTurn:
    """The tool calls of one model turn. Use as ``async with dispatcher.turn() as turn``.

    Leaving the block waits for every started call. If the block raises, the calls still
    running are cancelled (nobody will read their results) and the exception propagates
    as it was raised, not wrapped in an exception group.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        on_result: ResultCallback | None,
        trace: CallTracer | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._on_result = on_result
        self._trace = trace
        self._group: TaskGroup | None = None
        self._closed = False
        self._slots: list[ToolResultBlock | None] = []
        self._ids: set[str] = set()
        self._callback_lock: anyio.Lock | None = None
        self._crashes: list[tuple[int, ToolExecutionError]] = []

    async def __aenter__(self) -> DispatchTurn:
        if self._group is not None or self._closed:
            raise RuntimeError("a DispatchTurn can only be entered once")
        self._callback_lock = anyio.Lock()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        group = self._group
        assert group is not None, "DispatchTurn exited without being entered"
        try:
            if exc is None or isinstance(exc, anyio.get_cancelled_exc_class()):
                await group.__aexit__(exc_type, exc, traceback)
                if exc is None:
                    self._raise_first_crash()
                return
            group.cancel_scope.cancel()
            # The caller's own error: let it propagate unchanged once the tools are stopped.
            with contextlib.suppress(BaseExceptionGroup):
                await group.__aexit__(None, None, None)
        except BaseExceptionGroup as failures:
            # Tools never raise, so these come from on_result; give the caller the error
            # itself rather than a group it has to unpack.
            if len(failures.exceptions) == 1:
                raise failures.exceptions[0] from None
            raise
        finally:
            self._closed = True

    def start(self, call: ToolCallComplete) -> None:
        """Start ``call`` now, without waiting; a repeated call id is ignored."""
        if self._group is None or self._closed:
            raise RuntimeError("start() is only allowed inside 'async with dispatcher.turn()'")
        if call.id in self._ids:
            _log.warning("tool_call_duplicate", call_id=call.id, tool=call.name)
            return
        self._ids.add(call.id)
        self._slots.append(None)
        slot = len(self._slots) - 1
        if self._trace is None:
            self._group.start_soon(self._run, slot, call, name=f"tool:{call.id}")
        else:  # the span starts now, at dispatch, and is current in the call's task
            span = self._trace(call)
            self._group.start_soon(self._run_traced, slot, call, span, name=f"tool:{call.id}")

    @property
    def results(self) -> list[ToolResultBlock]:
        """Every started call's result, in the order of :meth:`start`; after the block."""
        if not self._closed:
            raise RuntimeError("results are available once the turn's 'async with' has exited")
        return [result for result in self._slots if result is not None]

    def _raise_first_crash(self) -> None:
        """In test mode, the first crash in call order, as the turn's error."""
        if not self._dispatcher.raise_tool_errors or not self._crashes:
            return
        _, crash = min(self._crashes, key=lambda item: item[0])
        others = len(self._crashes) - 1
        more = f" ({others} more tool{'s' if others > 1 else ''} of the turn crashed too)"
        error = ToolExecutionError(
            f"tool {crash.tool_name!r} (call {crash.call_id}) raised "
            f"{exception_text(crash.__cause__ or crash)}{more if others else ''}",
            call_id=crash.call_id,
            tool_name=crash.tool_name,
        )
        raise error from crash.__cause__

    async def _run_traced(self, slot: int, call: ToolCallComplete, span: CallSpan) -> None:
        with span:
            error = await self._run(slot, call)
            span.finish(self._slots[slot], error)

    async def _run(self, slot: int, call: ToolCallComplete) -> ToolError | None:
        dispatcher = self._dispatcher
        outcome: Outcome
        if call.error is not None:
            started = time.perf_counter()
            malformed = MalformedToolCallError(
                _malformed_text(call), call_id=call.id, tool_name=call.name, raw=call.raw
            )
            outcome = Outcome(malformed.message, error=malformed)
        elif (tool := dispatcher.registry.get(call.name)) is None:
            started = time.perf_counter()
            unknown = UnknownToolError(
                _unknown_text(call.name, dispatcher.registry.names),
                call_id=call.id,
                tool_name=call.name,
            )
            outcome = Outcome(unknown.message, error=unknown)
        else:
            async with dispatcher._slot():
                started = time.perf_counter()
                outcome = await dispatcher._execute(tool, call)
        duration = time.perf_counter() - started
        error: ToolError | None = outcome.error
        content = clean_text(outcome.content)
        if outcome.crash is not None and isinstance(error, ToolExecutionError):
            self._crashes.append((slot, error))

        block = ToolResultBlock(
            call_id=call.id, name=call.name, content=content, is_error=error is not None
        )
        self._slots[slot] = block
        fields: dict[str, Any] = {"error": type(error).__name__} if error is not None else {}
        if outcome.crash is not None:
            # The tool's own bug: the developer's to see, with its traceback.
            fields["exc_info"] = outcome.crash
        log = _log.error if outcome.crash is not None else _log.info
        log(
            "tool_call",
            call_id=call.id,
            tool=call.name,
            duration_s=round(duration, 6),
            is_error=block.is_error,
            **fields,
        )
        if self._on_result is not None:
            event = ToolResultEvent(
                call_id=call.id,
                name=call.name,
                content=content,
                is_error=block.is_error,
                duration_s=duration,
                result=block,
                traceback=outcome.traceback,
            )
            assert self._callback_lock is not None
            async with self._callback_lock:
                await self._on_result(event)
        return error


def _malformed_text(call: ToolCallComplete) -> str:
    raw = call.raw
    if len(raw) > _RAW_HEAD + _RAW_TAIL:
        skipped = len(raw) - _RAW_HEAD - _RAW_TAIL
        raw = f"{raw[:_RAW_HEAD]}[... {skipped} characters ...]{raw[-_RAW_TAIL:]}"
    return (
        f"Malformed tool call: {call.error}\n"
        f"The call as written:\n{raw}\n"
        "Write the call again, complete and in the correct format."
    )


def _unknown_text(name: str, available: list[str]) -> str:
    if not available:
        return f"Unknown tool {name!r}: no tools are available."
    return f"Unknown tool {name!r}. Available tools: {', '.join(available)}."
