"""The typing and streaming helpers every tagged-value format shares (:mod:`._xml_values`):
MiniMax-M2, DSML, GLM and Qwen3-Coder read a parameter's value by the same rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkit.parsing.tools._xml_values import (
    ANY,
    STRING,
    ArgumentsWriter,
    convert_value,
    parameter_types,
    parse_attributes,
)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, STRING),
        ({"type": ["integer", "null"]}, frozenset({"integer", "null"})),
        ({"enum": ["a", "b"]}, STRING),
        ({"const": 3}, frozenset({"integer"})),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, frozenset({"string", "null"})),
        ({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}, ANY),
        ({}, ANY),
    ],
)
def test_parameter_types(schema: dict[str, Any], expected: frozenset[str]) -> None:
    assert parameter_types({"type": "object", "properties": {"p": schema}}, "p") == expected


def test_parameter_types_for_unknown_parameters() -> None:
    assert parameter_types(None, "p") == STRING
    assert parameter_types({"properties": {}}, "p") == STRING
    assert parameter_types({"additionalProperties": {"type": "integer"}}, "p") == {"integer"}
    function = {"name": "f", "parameters": {"properties": {"p": {"type": "boolean"}}}}
    assert parameter_types(function, "p") == {"boolean"}


@pytest.mark.parametrize(
    ("text", "types", "expected"),
    [
        (" 12 ", frozenset({"integer"}), 12),
        ("12.0", frozenset({"integer"}), 12),
        ("True", frozenset({"boolean"}), True),
        ("{'a': None}", frozenset({"object"}), {"a": None}),
        ("NaN", frozenset({"number"}), "NaN"),
        ("12", frozenset({"string", "null"}), "12"),
        ("null", frozenset({"string", "null"}), None),
        ('"x"', STRING, '"x"'),
        ('"x"', ANY, "x"),
        ("", frozenset({"integer"}), ""),
        # the rule for values of another type than the parameter's
        ('"x"', frozenset({"string", "null"}), '"x"'),  # strings accepted: verbatim
        ("[1]", frozenset({"integer", "string"}), "[1]"),
        ("[1]", frozenset({"integer"}), [1]),  # strings refused: as read, for the schema check
        ('"5"', frozenset({"integer", "null"}), "5"),
        ("2.5", frozenset({"integer"}), 2.5),
        ("{'a': 1}", ANY, {"a": 1}),  # described without a type: any JSON
        ("a b", ANY, "a b"),
    ],
)
def test_convert_value(text: str, types: frozenset[str], expected: Any) -> None:
    assert convert_value(text, types) == expected
    assert type(convert_value(text, types)) is type(expected)


def test_arguments_writer_fragments_are_the_arguments() -> None:
    writer = ArgumentsWriter()
    parts = [writer.open(), writer.start("s", STRING), writer.add('a"\n'), writer.add("\\")]
    parts += [writer.end(), writer.start("n", ANY), writer.add("[1,"), writer.add(" 2]")]
    parts += [writer.end(), writer.close()]
    assert json.loads("".join(parts)) == writer.arguments == {"s": 'a"\n\\', "n": [1, 2]}


def test_parse_attributes() -> None:
    assert parse_attributes(" name=\"a b\" string='true' x=1 ") == {
        "name": "a b",
        "string": "true",
        "x": "1",
    }
    assert parse_attributes("") == {}
    assert parse_attributes('name="a"') is None  # must be separated from the tag name
    assert parse_attributes(' name="a" junk') is None
