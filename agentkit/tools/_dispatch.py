"""Running tool calls the moment the model finishes writing them.

A turn opens an anyio task group. Each complete call is started in it immediately, while the
caller keeps streaming the model, so a slow tool overlaps with the rest of generation and
with other tools. Results come back in call order (the order the model wrote the calls), the
order the transcript must replay, whatever order the tools finish in.

Nothing a model can do wrong escapes as an exception: a malformed call, an unknown tool,
bad arguments, a timeout or a tool that raised each becomes an error ``tool_result`` the
model can read and recover from. Only cancellation of the caller's own scope (and errors in
the caller's ``on_result`` callback) propagate, because those are the caller's, not the
model's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentkit._logging import get_logger
from agentkit.errors import (
    ConfigurationError,
    MalformedToolCallError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
    UnknownToolError,
)
from agentkit.events import ToolCallComplete, ToolResultEvent
from agentkit.tools._registry import ToolRegistry
from agentkit.tools._tool import Tool
from agentkit.transcript import ToolResultBlock

__all__ = ["DispatchTurn", "Dispatcher", "ResultCallback"]

ResultCallback = Callable[[ToolResultEvent], Awaitable[None]]
"""Awaited with each result as its tool finishes (completion order, one at a time)."""

_log = get_logger("agentkit.tools")

_RAW_HEAD = 400
_RAW_TAIL = 120


class Dispatcher:
    """Runs the tools of a registry, one :meth:`turn` at a time or several concurrently.

    ``timeout`` (seconds, ``None`` for none) applies to each call whose tool sets no timeout
    of its own. ``max_concurrency`` caps how many tools run at once across every turn of
    this dispatcher; calls beyond it wait their turn, and their timeout starts only when
    they do.
    """

    def __init__(
        self,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]],
        *,
        timeout: float | None = 60.0,
        max_concurrency: int | None = None,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError("max_concurrency must be at least 1 (or None for no limit)")
        if timeout is not None and not timeout > 0:
            raise ConfigurationError("timeout must be positive (or None for no limit)")
        self._registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self._timeout = timeout
        self._max_concurrency = max_concurrency
        # Created on first use, inside the event loop that will wait on it.
        self._limiter: anyio.CapacityLimiter | None = None

    @property
    def registry(self) -> ToolRegistry:
        return self._registry

    @property
    def timeout(self) -> float | None:
        return self._timeout

    @property
    def max_concurrency(self) -> int | None:
        return self._max_concurrency

    def turn(self, on_result: ResultCallback | None = None) -> DispatchTurn:
        """A context in which :meth:`DispatchTurn.start` launches calls as they complete."""
        return DispatchTurn(self, on_result)

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

    async def _execute(self, tool: Tool, call: ToolCallComplete) -> tuple[str, ToolError | None]:
        limit = tool.timeout if tool.timeout is not None else self._timeout
        try:
            with anyio.move_on_after(limit):
                return await tool.invoke(call.arguments, call_id=call.id), None
            # Only reached when the deadline cancelled the tool.
            error: ToolError = ToolTimeoutError(
                f"Tool {tool.name!r} timed out after {limit:g} seconds and was cancelled.",
                call_id=call.id,
                tool_name=tool.name,
            )
        except ToolError as exc:  # bad arguments, or a tool reporting a failure itself
            error = exc
        except Exception as exc:
            error = ToolExecutionError(_exception_text(exc), call_id=call.id, tool_name=tool.name)
            error.__cause__ = exc
        return error.message, error


class DispatchTurn:
    """The tool calls of one model turn. Use as ``async with dispatcher.turn() as turn``.

    Leaving the block waits for every started call. If the block raises, the calls still
    running are cancelled (nobody will read their results) and the exception propagates
    as it was raised, not wrapped in an exception group.
    """

    def __init__(self, dispatcher: Dispatcher, on_result: ResultCallback | None) -> None:
        self._dispatcher = dispatcher
        self._on_result = on_result
        self._group: TaskGroup | None = None
        self._closed = False
        self._slots: list[ToolResultBlock | None] = []
        self._ids: set[str] = set()
        self._callback_lock: anyio.Lock | None = None

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
        self._group.start_soon(self._run, len(self._slots) - 1, call, name=f"tool:{call.id}")

    @property
    def results(self) -> list[ToolResultBlock]:
        """Every started call's result, in the order of :meth:`start`; after the block."""
        if not self._closed:
            raise RuntimeError("results are available once the turn's 'async with' has exited")
        return [result for result in self._slots if result is not None]

    async def _run(self, slot: int, call: ToolCallComplete) -> None:
        dispatcher = self._dispatcher
        error: ToolError | None
        if call.error is not None:
            started = time.perf_counter()
            error = MalformedToolCallError(
                _malformed_text(call), call_id=call.id, tool_name=call.name, raw=call.raw
            )
            content = error.message
        elif (tool := dispatcher.registry.get(call.name)) is None:
            started = time.perf_counter()
            error = UnknownToolError(
                _unknown_text(call.name, dispatcher.registry.names),
                call_id=call.id,
                tool_name=call.name,
            )
            content = error.message
        else:
            async with dispatcher._slot():
                started = time.perf_counter()
                content, error = await dispatcher._execute(tool, call)
        duration = time.perf_counter() - started

        block = ToolResultBlock(
            call_id=call.id, name=call.name, content=content, is_error=error is not None
        )
        self._slots[slot] = block
        fields: dict[str, Any] = {"error": type(error).__name__} if error is not None else {}
        _log.info(
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
            )
            assert self._callback_lock is not None
            async with self._callback_lock:
                await self._on_result(event)


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


def _exception_text(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
