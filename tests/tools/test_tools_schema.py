"""The JSON schema a model sees for a typed function, and the signatures that are refused."""

from __future__ import annotations

import enum
import functools
from typing import Annotated, Any, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from agentkit.errors import ConfigurationError
from agentkit.tools import Tool, tool
from agentkit.tools._schema import parse_docstring


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(default="", description="City name")


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


def test_basic_types_and_required() -> None:
    @tool
    def f(a: str, b: int, c: float, d: bool) -> None:
        pass

    assert f.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"type": "number"},
            "d": {"type": "boolean"},
        },
        "required": ["a", "b", "c", "d"],
        "additionalProperties": False,
    }


def test_defaults_and_optional_are_not_required() -> None:
    @tool
    def f(query: str, limit: int = 10, cursor: str | None = None) -> None:
        pass

    assert f.parameters["required"] == ["query"]
    assert f.parameters["properties"]["limit"] == {"type": "integer", "default": 10}
    assert f.parameters["properties"]["cursor"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_no_parameters() -> None:
    @tool
    async def now() -> str:
        return "noon"

    assert now.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_annotated_field_description() -> None:
    @tool
    def f(path: Annotated[str, Field(description="File to read")]) -> None:
        pass

    assert f.parameters["properties"]["path"] == {"type": "string", "description": "File to read"}


def test_docstring_description_and_args() -> None:
    @tool
    def search(query: str, limit: int = 5) -> None:
        """Search the documentation
        for a phrase.

        Longer explanation the model does not need.

        Args:
            query: What to look for,
                possibly several words.
            limit (int): At most this many hits.

        Returns:
            The hits.
        """

    assert search.description == "Search the documentation for a phrase."
    props = search.parameters["properties"]
    assert props["query"]["description"] == "What to look for, possibly several words."
    assert props["limit"]["description"] == "At most this many hits."


def test_annotated_description_beats_docstring() -> None:
    @tool
    def f(x: Annotated[int, Field(description="from Field")]) -> None:
        """Do f.

        Args:
            x: from docstring
        """

    assert f.parameters["properties"]["x"]["description"] == "from Field"


def test_no_docstring_gives_empty_description() -> None:
    @tool
    def f(x: int) -> None:
        pass

    assert f.description == ""
    assert "description" not in f.parameters["properties"]["x"]


def test_decorator_overrides() -> None:
    @tool(name="lookup", description="Look it up.", timeout=3)
    async def f(x: int) -> None:
        """Ignored summary."""

    assert (f.name, f.description, f.timeout) == ("lookup", "Look it up.", 3.0)
    assert f.spec() == {
        "type": "function",
        "function": {"name": "lookup", "description": "Look it up.", "parameters": f.parameters},
    }


def test_enum_and_literal_are_inlined() -> None:
    @tool
    def f(unit: Unit = Unit.CELSIUS, mode: Literal["fast", "slow"] = "fast") -> None:
        pass

    props = f.parameters["properties"]
    assert props["unit"] == {
        "enum": ["celsius", "fahrenheit"],
        "type": "string",
        "default": "celsius",
    }
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert "$defs" not in f.parameters


def test_nested_model_is_inlined_without_titles() -> None:
    @tool
    def f(address: Address, tags: list[str], extra: dict[str, int]) -> None:
        pass

    props = f.parameters["properties"]
    assert props["address"] == {
        "description": "A postal address.",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string", "description": "City name", "default": ""},
        },
        "required": ["street"],
        "type": "object",
    }
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert "$defs" not in f.parameters
    assert "title" not in repr(f.parameters)


def test_recursive_model_keeps_valid_defs() -> None:
    @tool
    def f(root: TreeNode) -> None:
        pass

    assert f.parameters["properties"]["root"] == {"$ref": "#/$defs/TreeNode"}
    assert set(f.parameters["$defs"]) == {"TreeNode"}
    Draft202012Validator.check_schema(f.parameters)
    validator = Draft202012Validator(f.parameters)
    assert validator.is_valid({"root": {"value": 1, "children": [{"value": 2}]}})
    assert not validator.is_valid({"root": {"value": 1, "children": [{"value": "x"}]}})


def test_parameter_named_title_survives_title_stripping() -> None:
    @tool
    def f(title: str) -> None:
        pass

    assert f.parameters["properties"] == {"title": {"type": "string"}}


def test_parameter_names_that_clash_with_basemodel() -> None:
    # "json" and "copy" are BaseModel attributes, "_id" a private name: all fine as tool args.
    @tool
    def f(json: str, copy: bool, _id: int) -> None:
        pass

    assert list(f.parameters["properties"]) == ["json", "copy", "_id"]


def test_unannotated_parameter_accepts_anything() -> None:
    @tool
    def f(x) -> None:  # type: ignore[no-untyped-def]
        pass

    assert f.parameters["properties"]["x"] == {}


def test_every_generated_schema_is_valid_2020_12() -> None:
    @tool
    def f(
        a: Address | None,
        b: list[Unit],
        c: tuple[int, str],
        d: Annotated[int, Field(ge=0, le=10)] = 3,
    ) -> None:
        pass

    Draft202012Validator.check_schema(f.parameters)
    assert f.parameters["properties"]["d"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 10,
        "default": 3,
    }


def test_parameters_returns_a_copy() -> None:
    @tool
    def f(x: int) -> None:
        pass

    f.parameters["properties"]["x"]["type"] = "string"
    f.spec()["function"]["parameters"]["required"].clear()
    assert f.parameters["properties"]["x"] == {"type": "integer"}
    assert f.parameters["required"] == ["x"]


def _positional_only(a: int, /) -> None:
    pass


def _var_positional(*args: int) -> None:
    pass


def _var_keyword(**kwargs: int) -> None:
    pass


@pytest.mark.parametrize(
    ("fn", "fragment"),
    [
        (_positional_only, "positional-only parameter 'a'"),
        (_var_positional, "*args"),
        (_var_keyword, "**kwargs"),
    ],
)
def test_unsupported_signatures_are_refused(fn: Any, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Tool.from_function(fn)
    assert fn.__name__ in str(info.value)
    assert fragment in str(info.value)


def test_unknown_forward_reference_is_a_configuration_error() -> None:
    def f(x: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(ConfigurationError, match="'f'"):
        Tool.from_function(f)


def test_type_without_schema_is_a_configuration_error() -> None:
    class Opaque:
        pass

    def f(x: Opaque) -> None:
        pass

    with pytest.raises(ConfigurationError, match="'f'"):
        Tool.from_function(f)


def test_partial_needs_a_name_and_keeps_the_function_docstring() -> None:
    def greet(greeting: str, name: str) -> str:
        """Greet someone."""
        return f"{greeting}, {name}"

    partial = functools.partial(greet, "hello")
    with pytest.raises(ConfigurationError, match="name="):
        Tool.from_function(partial)
    built = Tool.from_function(partial, name="hello")
    assert built.description == "Greet someone."
    assert built.parameters["required"] == ["name"]


@pytest.mark.parametrize("name", ["", "has space", "<lambda>", "x" * 129])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid tool name"):
        Tool.from_function(lambda: None, name=name)


@pytest.mark.parametrize("timeout", [0, -1.0, True])
def test_invalid_timeouts_are_refused(timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        Tool.from_function(lambda: None, name="f", timeout=timeout)


def test_lambda_without_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="invalid tool name"):
        Tool.from_function(lambda: None)


def test_parse_docstring_sections() -> None:
    summary, params = parse_docstring(
        """Summary line.

        Arguments:
            a: First.
            *b: Ignored star.

            c: After a blank line.
        Raises:
            d: not a parameter.
        """
    )
    assert summary == "Summary line."
    assert params == {"a": "First.", "b": "Ignored star.", "c": "After a blank line."}


def test_parse_docstring_without_summary() -> None:
    assert parse_docstring("Args:\n    x: The x.") == ("", {"x": "The x."})
    assert parse_docstring(None) == ("", {})
