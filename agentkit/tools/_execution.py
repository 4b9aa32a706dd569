"""Running one tool call and saying how it went, whatever the tool does.

Everything a tool can do ends as an :class:`Outcome`: its output, or an error the model can
read. That includes ``BaseException`` subclasses that are not errors at all in the tool's
hands (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a ``CancelledError`` it
raised itself): a tool must not be able to end the event loop or the run. The one thing that
passes through is the caller's own cancellation, which is not the tool's to swallow.

A crash (the tool raised something other than a :class:`~agentkit.errors.ToolError`) keeps
the exception and its formatted traceback for the developer; the model sees only the
exception's type and message.
"""

from __future__ import annotations

import asyncio
import math
import traceback
from dataclasses import dataclass

import anyio

from agentkit.errors import ToolError, ToolExecutionError, ToolTimeoutError
from agentkit.events import ToolCallComplete
from agentkit.tools._blocking import watch_steps
from agentkit.tools._log import tool_logger
from agentkit.tools._output import clean_text, exception_text
from agentkit.tools._threads import ThreadUse, ToolThreads, use_threads
from agentkit.tools._tool import Tool

__all__ = ["DispatchStats", "LoopBlocks", "Outcome", "execute"]

_log = tool_logger()


@dataclass(frozen=True)
class DispatchStats:
    """What a :class:`~agentkit.tools.Dispatcher`'s tools are doing to its threads and loop.

    A thread cannot be stopped, so a sync tool that times out keeps running in the
    background; these counts make that visible (each abandonment is also logged).
    """

    max_threads: int
    """The most threads the dispatcher's sync tools may use at once."""
    threads_running: int = 0
    """Threads running a sync tool now, abandoned ones included."""
    threads_abandoned: int = 0
    """Threads still running a call that timed out or was cancelled (its result dropped)."""
    abandoned_total: int = 0
    """Calls abandoned while their thread ran, since the dispatcher was created."""
    loop_blocks: int = 0
    """Async tool calls that held the event loop longer than ``block_warning_after``."""


@dataclass(frozen=True)
class Outcome:
    """One call's result: ``content`` for the model, the rest for the developer."""

    content: str
    error: ToolError | None = None
    """Set when the call failed, in any way (the model's mistake or the tool's)."""
    crash: BaseException | None = None
    """What the tool itself raised, when it crashed (``error`` is then its wrapper)."""
    traceback: str | None = None
    """The crash's formatted traceback."""


class LoopBlocks:
    """A count of calls that blocked the event loop, shared by a dispatcher's calls."""

    def __init__(self) -> None:
        self.count = 0


async def execute(
    tool: Tool,
    call: ToolCallComplete,
    *,
    limit: float | None,
    threads: ToolThreads,
    block_warning_after: float | None,
    loop_blocks: LoopBlocks,
) -> Outcome:
    """Run ``call`` with ``tool`` within ``limit`` seconds (``None``: no limit); only the
    caller's own cancellation propagates."""

    def report_block(seconds: float) -> None:
        loop_blocks.count += 1
        _log.warning(
            "tool_blocked_event_loop",
            tool=tool.name,
            call_id=call.id,
            blocked_s=round(seconds, 6),
            threshold_s=block_warning_after,
        )

    use = ThreadUse(threads, tool.name, call.id)
    try:
        with use_threads(use), anyio.move_on_after(limit):
            running = tool.invoke(call.arguments, call_id=call.id)
            if block_warning_after is None:
                text = await running
            else:
                text = await watch_steps(running, block_warning_after, report_block)
            return Outcome(clean_text(text))
        # Only reached when the deadline cancelled the call.
        assert limit is not None
        error: ToolError = ToolTimeoutError(
            _timeout_text(tool.name, limit, use), call_id=call.id, tool_name=tool.name
        )
        return Outcome(error.message, error=error)
    except ToolError as exc:  # bad arguments, or the tool reporting a failure itself
        return Outcome(_tool_error_text(exc), error=exc)
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()) and _cancelled_from_outside():
            raise
        crash = ToolExecutionError(exception_text(exc), call_id=call.id, tool_name=tool.name)
        crash.__cause__ = exc
        return Outcome(crash.message, error=crash, crash=exc, traceback=_traceback_text(exc))


def _cancelled_from_outside() -> bool:
    """Whether the current task is being cancelled (an anyio scope around it, or a native
    asyncio ``Task.cancel()``), as opposed to a tool having raised ``CancelledError``."""
    if anyio.current_effective_deadline() == -math.inf:
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not running on asyncio
        return False
    return task is not None and task.cancelling() > 0


def _timeout_text(name: str, limit: float, use: ThreadUse) -> str:
    if use.waiting:
        busy = use.pool.max_threads
        return (
            f"Tool {name!r} timed out after {limit:g} seconds waiting for a worker thread "
            f"(all {busy} are busy) and did not run."
        )
    if use.abandoned:
        return (
            f"Tool {name!r} timed out after {limit:g} seconds. It could not be stopped: it "
            "may still complete in the background, and its result will be discarded."
        )
    return f"Tool {name!r} timed out after {limit:g} seconds and was cancelled."


def _tool_error_text(exc: ToolError) -> str:
    try:
        return clean_text(exc.message)
    except BaseException:  # a message object whose __str__ raises
        return exception_text(exc)


def _traceback_text(exc: BaseException) -> str | None:
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:
        return None
