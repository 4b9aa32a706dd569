"""A tool: a name, a description, a JSON schema, and something to run.

Most tools are typed Python functions (``@tool``), their schema derived from the signature.
Some exist only as a JSON schema, for example the tools an external harness declares in an
HTTP request; those are built directly from the schema and an async handler taking the
arguments dict. Both kinds are validated and invoked the same way, so the dispatcher needs
to know nothing about where a tool came from.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, overload

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from agentkit.errors import ConfigurationError, ToolArgumentsError, ToolError
from agentkit.tools._arguments import arguments_message, pydantic_problems, schema_problems
from agentkit.tools._output import to_text
from agentkit.tools._schema import FunctionSchema, function_schema
from agentkit.tools._threads import run_in_thread

__all__ = ["Tool", "ToolHandler", "tool"]

ToolHandler = Callable[[dict[str, Any]], Awaitable[object]]
"""What runs a schema-only tool: an async callable taking the validated arguments dict."""

# What the OpenAI and Anthropic APIs accept, plus the dots and colons of namespaced tools.
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class Tool:
    """A tool the model can call.

    Build one with :func:`tool` or :meth:`from_function` from a typed function, or directly
    as ``Tool(name, description, parameters, handler)`` from a JSON schema and an async
    callable that receives the arguments dict.

    ``timeout`` (seconds) overrides the dispatcher's default for this tool; ``None`` defers
    to the dispatcher and ``math.inf`` means no limit at all.

    ``requires_approval`` holds each call of the tool until a person approves it (see
    :mod:`agentkit.approvals`): the run pauses, or the agent's approval handler is asked.
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        handler: ToolHandler,
        *,
        timeout: float | None = None,
        requires_approval: bool = False,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"invalid tool name {name!r}: use 1-128 letters, digits, '_', '-', '.' or ':'"
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ConfigurationError(f"tool {name!r}: timeout must be a positive number or None")
        schema = copy.deepcopy(dict(parameters))
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ConfigurationError(
                f"tool {name!r} has an invalid parameters schema: {exc.message}"
            ) from exc
        self._name = name
        self._description = description
        self._parameters = schema
        self._validator = Draft202012Validator(schema)
        self._handler = handler
        self._timeout = None if timeout is None else float(timeout)
        self._function: Callable[..., Any] | None = None
        self._requires_approval = bool(requires_approval)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
    ) -> Tool:
        """Wrap a typed function, async or sync (sync ones run in a worker thread).

        The name defaults to the function's, the description to its docstring's first
        paragraph; parameter descriptions come from ``Annotated[..., Field(description=...)]``
        or, failing that, the docstring's ``Args:`` section.
        """
        tool_name = name if name is not None else getattr(fn, "__name__", None)
        if tool_name is None:
            raise ConfigurationError(f"{fn!r} has no __name__: pass name= to make it a tool")
        schema = function_schema(fn, name=tool_name)
        instance = cls(
            tool_name,
            description if description is not None else schema.description,
            schema.parameters,
            _FunctionHandler(fn, schema),
            timeout=timeout,
            requires_approval=requires_approval,
        )
        instance._function = fn
        return instance

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments object (a copy: the tool's own stays intact)."""
        return copy.deepcopy(self._parameters)

    @property
    def timeout(self) -> float | None:
        return self._timeout

    @property
    def requires_approval(self) -> bool:
        """Whether each call waits for a person's approval before it runs."""
        return self._requires_approval

    @property
    def function(self) -> Callable[..., Any] | None:
        """The wrapped function, or ``None`` for a tool built from a schema and handler."""
        return self._function

    def spec(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling shape, as chat templates expect it."""
        return {
            "type": "function",
            "function": {
                "name": self._name,
                "description": self._description,
                "parameters": self.parameters,
            },
        }

    async def invoke(self, arguments: Mapping[str, Any], *, call_id: str = "") -> str:
        """Validate ``arguments``, run the tool and return its output as text.

        Raises :class:`~agentkit.errors.ToolArgumentsError` (naming each bad field) when the
        arguments fail the schema or cannot be converted; whatever the tool itself raises
        propagates unchanged, for the dispatcher to report (a
        :class:`~agentkit.errors.ToolError` without a ``call_id`` gets this call's).
        """
        values = dict(arguments) if isinstance(arguments, Mapping) else arguments
        problems = schema_problems(self._validator, values)
        if problems:
            raise ToolArgumentsError(
                arguments_message(self._name, problems), call_id=call_id, tool_name=self._name
            )
        try:
            result = await self._handler(values)
        except _ConversionError as exc:
            raise ToolArgumentsError(
                arguments_message(self._name, exc.problems), call_id=call_id, tool_name=self._name
            ) from exc.__cause__
        except ToolError as exc:
            if not exc.call_id:  # a schema-only handler reporting a failure knows no call id
                exc.call_id = call_id
            raise
        return to_text(result)

    def __repr__(self) -> str:
        approval = ", requires_approval=True" if self._requires_approval else ""
        return f"Tool(name={self._name!r}, timeout={self._timeout!r}{approval})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a :class:`Tool`: ``@tool`` or ``@tool(name=..., timeout=...,
    requires_approval=True)``."""

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            function,
            name=name,
            description=description,
            timeout=timeout,
            requires_approval=requires_approval,
        )

    return decorate(fn) if fn is not None else decorate


class _ConversionError(Exception):
    """Arguments passed the JSON schema but not the pydantic model (custom validators...)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _FunctionHandler:
    """Runs a typed function from a JSON arguments dict."""

    def __init__(self, fn: Callable[..., Any], schema: FunctionSchema) -> None:
        self._fn = fn
        self._schema = schema
        self._is_async = _is_async_callable(fn)

    async def __call__(self, arguments: dict[str, Any]) -> object:
        try:
            model = self._schema.model.model_validate(arguments)
        except ValidationError as exc:
            raise _ConversionError(pydantic_problems(exc)) from exc
        kwargs = {param: getattr(model, field) for param, field in self._schema.fields}
        if self._is_async:
            result: object = await self._fn(**kwargs)
        else:
            # A thread cannot be cancelled: on timeout or cancellation the call is abandoned
            # (its result dropped, its thread counted until it returns; see _threads).
            result = await run_in_thread(
                functools.partial(self._fn, **kwargs), name=getattr(self._fn, "__name__", "tool")
            )
        if inspect.isawaitable(result):  # a sync wrapper around a coroutine function
            result = await result
        return result


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(call)
