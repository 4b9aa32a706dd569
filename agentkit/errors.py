"""agentkit's exceptions, one tree with a single root.

Two kinds of failure matter to an agent and are kept apart:

* a **tool error** is something the *model* did wrong or a tool that failed: it never stops
  a run. The runtime turns it into a ``tool_result`` block with ``is_error=True`` whose text
  tells the model what to fix, and the run goes on (in a test, ``raise_tool_errors=True``
  makes a tool's own crash raise its ``ToolExecutionError`` instead).
* a **run error** stops a run: the engine failed, the script ran out, the turn limit was hit.
  Where a transcript existed, the error carries it, so nothing produced so far is lost.

::

    AgentkitError
    ├── ConfigurationError          bad setup: unknown profile or parser, invalid tool definition
    ├── SideQueryError              a side query's answer could not be read (raw text kept;
    │                               defined in agentkit.side_queries)
    ├── ApprovalError               decisions that do not fit a paused run's state
    │                               (agentkit.approvals)
    ├── SessionError                a session store's failure (agentkit.sessions): not found,
    │                               exists, store error; SessionConflictError is also a RunError
    ├── ToolError                   model-visible; becomes an error tool_result
    │   ├── MalformedToolCallError  the call's text could not be parsed (raw text kept)
    │   ├── UnknownToolError        the model named a tool that is not registered
    │   ├── ToolArgumentsError      the arguments fail the tool's JSON schema
    │   ├── ToolTimeoutError        the tool ran past its timeout
    │   └── ToolExecutionError      the tool raised; the original exception is ``__cause__``
    └── RunError                    stops a run; carries the transcript so far
        ├── EngineError             the engine failed to produce output
        │   ├── EngineOverloaded    the engine refused the request for now (retry later)
        │   ├── ScriptExhaustedError  a ScriptedEngine received more requests than outputs
        │   └── ConstraintViolationError  a test engine's scripted output breaks the request's
        │                             constraints (agentkit.engine)
        ├── MaxTurnsExceeded        the model was still calling tools after ``max_turns`` turns
        ├── OutputValidationError   the final answer still failed ``output_type`` after retries
        ├── UsageLimitExceeded      a run's budget (``UsageLimits``) ran out; names the limit
        ├── RunCancelled            the run was cancelled outside the task reading its events
        ├── MCPServerError          an MCP server could not be started (agentkit.mcp)
        ├── SessionConflictError    another writer moved the session on (agentkit.sessions)
        └── ContextWindowExceeded   the prompt does not fit even after compaction
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkit.transcript import Transcript

__all__ = [
    "AgentkitError",
    "ConfigurationError",
    "ContextWindowExceeded",
    "EngineError",
    "EngineOverloaded",
    "MalformedToolCallError",
    "MaxTurnsExceeded",
    "OutputValidationError",
    "RunCancelled",
    "RunError",
    "ScriptExhaustedError",
    "ToolArgumentsError",
    "ToolError",
    "ToolExecutionError",
    "ToolTimeoutError",
    "UnknownToolError",
    "UsageLimitExceeded",
]


class AgentkitError(Exception):
    """Root of every error agentkit raises."""


class ConfigurationError(AgentkitError):
    """The library was set up wrongly: an unknown profile or parser, an invalid tool."""


class ToolError(AgentkitError):
    """A failure the model should see and can recover from.

    Never raised out of a run: the dispatcher turns it into an error ``tool_result``.
    """

    def __init__(self, message: str, *, call_id: str, tool_name: str) -> None:
        super().__init__(message)
        self.call_id = call_id
        self.tool_name = tool_name

    @property
    def message(self) -> str:
        return str(self.args[0])


class MalformedToolCallError(ToolError):
    """The model's tool call could not be parsed (invalid JSON, truncated at end of stream)."""

    def __init__(self, message: str, *, call_id: str, tool_name: str, raw: str) -> None:
        super().__init__(message, call_id=call_id, tool_name=tool_name)
        self.raw = raw


class UnknownToolError(ToolError):
    """The model called a tool name that is not registered with the agent."""


class ToolArgumentsError(ToolError):
    """The call's arguments do not satisfy the tool's JSON schema."""


class ToolTimeoutError(ToolError):
    """The tool did not finish within its timeout and was cancelled."""


class ToolExecutionError(ToolError):
    """The tool raised an exception; the original exception is chained as ``__cause__``."""


class RunError(AgentkitError):
    """A failure that stops the run. ``transcript`` holds everything produced before it."""

    def __init__(self, message: str, *, transcript: Transcript | None = None) -> None:
        super().__init__(message)
        self.transcript = transcript


class EngineError(RunError):
    """The engine could not produce output for a request."""

    def __init__(
        self,
        message: str,
        *,
        request_id: str | None = None,
        transcript: Transcript | None = None,
    ) -> None:
        super().__init__(message, transcript=transcript)
        self.request_id = request_id


class EngineOverloaded(EngineError):
    """The engine cannot take the request now (its queue is full); retrying later may work.
    HTTP adapters answer 529 ``overloaded_error``."""


class ScriptExhaustedError(EngineError):
    """A :class:`~agentkit.engine.ScriptedEngine` was asked for more outputs than it holds."""


class MaxTurnsExceeded(RunError):
    """The model was still calling tools when the agent's ``max_turns`` was reached."""

    def __init__(self, max_turns: int, *, transcript: Transcript | None = None) -> None:
        super().__init__(
            f"the model was still calling tools after max_turns={max_turns} turns",
            transcript=transcript,
        )
        self.max_turns = max_turns


class OutputValidationError(RunError):
    """The model's final answer did not validate against the agent's ``output_type``, and
    every retry it was given (each one showing it the problem) failed too.

    ``raw`` is the last answer's text, ``problems`` what was wrong with it (one line each),
    ``attempts`` how many answers failed; ``transcript`` holds them all and the retry
    messages between them.
    """

    def __init__(
        self,
        output_type: str,
        *,
        raw: str,
        problems: tuple[str, ...],
        attempts: int,
        transcript: Transcript | None = None,
    ) -> None:
        super().__init__(
            f"the final answer is not a valid {output_type} after {attempts} attempt(s): "
            + "; ".join(problems),
            transcript=transcript,
        )
        self.output_type = output_type
        self.raw = raw
        self.problems = problems
        self.attempts = attempts


class UsageLimitExceeded(RunError):
    """A limit of the run's :class:`~agentkit.budgets.UsageLimits` was reached.

    ``limit`` names it (``"output_tokens"``, ``"total_tokens"``, ``"tool_calls"``, ``"turns"``
    or ``"wall_time_s"``, the field's name); ``value`` is the usage that crossed it (or would
    have: the call not run, the request not started) and ``maximum`` the limit. The
    transcript keeps everything produced before the run stopped, the cut-short turn included.
    """

    def __init__(
        self,
        limit: str,
        value: float,
        maximum: float,
        *,
        transcript: Transcript | None = None,
    ) -> None:
        super().__init__(
            f"usage limit {limit}={maximum:g} reached ({value:g}); the run was stopped "
            "(raise the limit in UsageLimits, or continue from the error's transcript)",
            transcript=transcript,
        )
        self.limit = limit
        self.value = value
        self.maximum = maximum


class RunCancelled(RunError):
    """The run was cancelled by a task other than the one reading its events (the task that
    entered ``async with agent.stream(...)`` left it, or was cancelled). A consumer whose own
    scope was cancelled gets that cancellation instead; either way a cancelled run never ends
    looking finished."""


class ContextWindowExceeded(RunError):
    """The next prompt does not fit the model's context window, even with everything
    compaction may remove gone."""

    def __init__(
        self, prompt_tokens: int, limit: int, *, transcript: Transcript | None = None
    ) -> None:
        super().__init__(
            f"the prompt needs {prompt_tokens} tokens (output budget included) and the context "
            f"allows {limit}, after removing old reasoning and tool outputs; raise the "
            "profile's context_window, lower max_tokens, or start a new transcript",
            transcript=transcript,
        )
        self.prompt_tokens = prompt_tokens
        self.limit = limit
