"""Invoking a tool: validation messages a model can act on, typed arguments, text output."""

from __future__ import annotations

import dataclasses
import enum
import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from agentkit.errors import ConfigurationError, ToolArgumentsError
from agentkit.tools import Tool, tool
from agentkit.tools._tool import to_text

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int
    y: int


class Even(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even")
        return value


@tool
async def describe(
    point: Point, color: Color, path: list[Point], label: str | None = None
) -> dict[str, Any]:
    """Describe a point."""
    return {
        "types": [type(point).__name__, type(color).__name__, type(path[0]).__name__],
        "color": color.value,
        "label": label,
    }


async def _arguments_error(t: Tool, arguments: dict[str, Any]) -> ToolArgumentsError:
    with pytest.raises(ToolArgumentsError) as info:
        await t.invoke(arguments, call_id="call_7")
    return info.value


async def test_arguments_arrive_as_python_types() -> None:
    out = await describe.invoke(
        {"point": {"x": 1, "y": 2}, "color": "green", "path": [{"x": 0, "y": 0}]}
    )
    assert out == '{"types": ["Point", "Color", "Point"], "color": "green", "label": null}'


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where(x: int) -> str:
        return "worker" if threading.get_ident() != loop_thread else "event loop"

    assert await where.invoke({"x": 1}) == "worker"


async def test_async_callable_object_and_sync_wrapper_of_coroutine() -> None:
    class Adder:
        async def __call__(self, a: int, b: int) -> int:
            return a + b

    async def shout(word: str) -> str:
        return word.upper()

    @functools.wraps(shout)
    def wrapper(word: str) -> Awaitable[str]:
        return shout(word)

    assert await Tool.from_function(Adder(), name="add").invoke({"a": 2, "b": 3}) == "5"
    assert await Tool.from_function(wrapper).invoke({"word": "hi"}) == "HI"


async def test_missing_and_wrong_type_name_the_field() -> None:
    error = await _arguments_error(describe, {"point": {"x": "1", "y": 2}, "path": []})
    assert error.call_id == "call_7"
    assert error.tool_name == "describe"
    lines = error.message.splitlines()
    assert lines[0] == "Invalid arguments for tool 'describe':"
    assert "- point.x: '1' is not of type 'integer'" in lines
    assert "- 'color' is a required property" in lines
    assert lines[-1].startswith("Call the tool again")


async def test_enum_and_list_index_errors() -> None:
    error = await _arguments_error(
        describe, {"point": {"x": 1, "y": 2}, "color": "blue", "path": [{"x": 0, "y": 0}, 3]}
    )
    assert "- color: 'blue' is not one of ['red', 'green']" in error.message
    assert "- path[1]: 3 is not of type 'object'" in error.message


async def test_unexpected_argument_lists_allowed_ones() -> None:
    @tool
    def f(a: int, b: int = 0) -> None:
        pass

    error = await _arguments_error(f, {"a": 1, "c": 2})
    assert "('c' was unexpected); allowed properties: a, b" in error.message


async def test_optional_value_reports_the_inner_problem() -> None:
    @tool
    def f(point: Point | None = None, count: int | None = None) -> None:
        pass

    error = await _arguments_error(f, {"point": {"x": 1, "y": "2"}, "count": "3"})
    assert "- point.y: '2' is not of type 'integer'" in error.message
    assert "- count: '3' is none of the allowed forms: integer | null" in error.message


async def test_pydantic_only_failure_is_an_arguments_error() -> None:
    @tool
    def f(value: Even) -> int:
        return value.n

    error = await _arguments_error(f, {"value": {"n": 3}})
    assert "- value.n: Value error, must be even (got 3)" in error.message
    assert await f.invoke({"value": {"n": 4}}) == "4"


async def test_problem_list_is_capped() -> None:
    @tool
    def f(xs: list[int]) -> None:
        pass

    error = await _arguments_error(f, {"xs": ["a"] * 20})
    assert "- ... and 12 more" in error.message
    assert error.message.count("is not of type 'integer'") == 8


async def test_long_values_are_cut_in_messages() -> None:
    @tool
    def f(n: int) -> None:
        pass

    error = await _arguments_error(f, {"n": "x" * 10_000})
    assert len(error.message) < 500


async def test_non_object_arguments() -> None:
    @tool
    def f(n: int) -> None:
        pass

    error = await _arguments_error(f, [1])  # type: ignore[arg-type]
    assert "is not of type 'object'" in error.message


async def test_exceptions_from_the_tool_propagate_unchanged() -> None:
    @tool
    async def boom() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        await boom.invoke({})


@dataclasses.dataclass
class Pair:
    a: int
    b: str


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        (None, ""),
        ({"città": "Zürich", "n": [1, 2]}, '{"città": "Zürich", "n": [1, 2]}'),
        ([Point(x=1, y=2)], '[{"x": 1, "y": 2}]'),
        (Point(x=1, y=2), '{"x": 1, "y": 2}'),
        (Pair(1, "é"), '{"a": 1, "b": "é"}'),
        (42, "42"),
        (True, "true"),
        (Color.RED, '"red"'),
        (Opaque(), "opaque!"),
        ({"thing": Opaque()}, '{"thing": "opaque!"}'),
    ],
)
def test_to_text(value: object, text: str) -> None:
    assert to_text(value) == text


async def test_tool_from_schema_and_handler() -> None:
    seen: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return "ok"

    schema = {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    }
    shell = Tool("shell", "Run a command.", schema, handler, timeout=5)
    assert shell.function is None
    assert shell.parameters == schema
    assert shell.spec()["function"]["name"] == "shell"
    assert await shell.invoke({"cmd": "ls", "extra": True}, call_id="c") == "ok"
    assert seen == [{"cmd": "ls", "extra": True}]  # the schema allows extra properties
    error = await _arguments_error(shell, {})
    assert "'cmd' is a required property" in error.message
    assert seen == [{"cmd": "ls", "extra": True}]


def test_tool_from_schema_keeps_its_own_copy() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    handler: Callable[[dict[str, Any]], Awaitable[object]] = _noop
    built = Tool("t", "", schema, handler)
    schema["properties"]["x"] = {"type": "integer"}
    assert built.parameters == {"type": "object", "properties": {}}


def test_invalid_schema_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'bad'"):
        Tool("bad", "", {"type": "objekt"}, _noop)


def test_function_and_repr() -> None:
    def f(x: int) -> int:
        return x

    built = Tool.from_function(f, timeout=2)
    assert built.function is f
    assert repr(built) == "Tool(name='f', timeout=2.0)"


async def _noop(arguments: dict[str, Any]) -> None:
    return None
