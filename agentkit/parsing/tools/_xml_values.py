"""Values of the tool-call formats that write each argument as a tagged value.

DSML (``<｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>``), MiniMax-M2
(``<parameter name="k">v</parameter>``), GLM (``<arg_key>k</arg_key><arg_value>v</arg_value>``)
and Qwen3-Coder (``<parameter=k>v</parameter>``) share two problems, solved once here:

* **Typing a value.** String parameters are written verbatim, everything else as JSON. Which is
  which comes from the tool's JSON schema (:func:`parameter_types`, :func:`convert_value`), or
  from the format itself (DSML's ``string`` attribute).
* **Streaming the arguments.** A 30 KB file body must reach the caller while it is generated,
  as JSON text whose concatenation parses to the final arguments (:class:`ArgumentsWriter`).
  String values stream as JSON string fragments; other values are short and are sent whole
  when their closing tag arrives, once it is known whether they are JSON.

They parse their sections with :class:`~agentkit.parsing.tools._cursor.SectionCursor`.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Mapping
from typing import Any

from agentkit.parsing._base import JSONSchema
from agentkit.parsing._values import check_value

__all__ = [
    "ANY",
    "STRING",
    "ArgumentsWriter",
    "convert_value",
    "json_text",
    "parameter_types",
    "parse_attributes",
]

STRING: frozenset[str] = frozenset({"string"})
ANY: frozenset[str] = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)

_LITERAL_LIMIT = 100_000
"""Longest text given to :func:`ast.literal_eval`, which is slow on huge inputs."""
_ATTRIBUTES = re.compile(r"""(?:\s+[\w-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))*\s*""")
_ATTRIBUTE = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def parameter_types(tool_schema: JSONSchema | None, key: str) -> frozenset[str]:
    """The JSON types parameter ``key`` of a tool accepts.

    A parameter the schema does not describe (or a tool without a schema) is taken as a
    string: its text is kept exactly as written, which loses nothing. One the schema describes
    without saying its type (``{}``, a ``$ref``) accepts any JSON.
    """
    if not isinstance(tool_schema, Mapping):
        return STRING
    if "properties" not in tool_schema and isinstance(tool_schema.get("parameters"), Mapping):
        tool_schema = tool_schema["parameters"]  # an OpenAI-style function, not its parameters
    properties = tool_schema.get("properties")
    schema = properties.get(key) if isinstance(properties, Mapping) else None
    if schema is None:
        extra = tool_schema.get("additionalProperties")
        if not isinstance(extra, Mapping):
            return STRING
        schema = extra
    return _schema_types(schema) or ANY


def _schema_types(schema: Any) -> frozenset[str] | None:
    if not isinstance(schema, Mapping):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(t for t in declared if isinstance(t, str)) or None
    if "const" in schema:
        return frozenset({_json_type(schema["const"])})
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return frozenset(_json_type(value) for value in enum)
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            found: set[str] = set()
            for branch in branches:
                types = _schema_types(branch)
                if types is None:
                    return None
                found |= types
            return frozenset(found)
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def convert_value(text: str, types: frozenset[str]) -> Any:
    """The value of a parameter written as ``text``, for a parameter accepting ``types``.

    One rule for every tagged-value format:

    * a string parameter (or one the schema does not describe, see :func:`parameter_types`)
      is ``text`` verbatim;
    * any other reads the text as JSON, or as a Python literal (``True``, ``None``,
      ``{'a': 1}``, which models trained on Python-rendered templates write); text that is
      neither stays the string it is;
    * one described without a type (:data:`ANY`) takes whatever JSON the text holds;
    * a typed one takes a value of a type it accepts (``5.0`` is ``5`` for an integer). A value
      of another type, a JSON string included, is the text verbatim when the parameter accepts
      strings (so ``"x"`` keeps its quotes, as it would for a string parameter), and the value
      as read when it does not: the tool's schema check then tells the model what is wrong.
    """
    if types == STRING:
        return text
    parsed, value = _parse(text.strip())
    if not parsed:
        return text
    if types == ANY:
        return value
    kind = _json_type(value)
    if kind == "number" and "integer" in types and "number" not in types and value.is_integer():
        value, kind = int(value), "integer"
    accepted = kind != "string" and (kind in types or (kind == "integer" and "number" in types))
    return value if accepted or "string" not in types else text


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, check_value(json.loads(text, parse_constant=_reject_constant))
    except (ValueError, RecursionError):
        pass
    if len(text) > _LITERAL_LIMIT or not text:
        return False, None
    try:
        # Compiling model text can warn (an invalid escape, "1x"): the value is read the same
        # under any warnings filter, and nothing reaches the application's stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            literal = ast.literal_eval(text)
        return True, check_value(json.loads(json.dumps(literal, allow_nan=False)))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_text(value: Any) -> str:
    """A value as the JSON text the formats write (and the argument stream carries)."""
    return json.dumps(value, ensure_ascii=False)


class ArgumentsWriter:
    """One call's arguments, and the JSON text fragments that stream them as they are read.

    Joining every fragment returned (``open()``, then per value ``start``/``add``/``end``,
    then ``close()``) gives a JSON object equal to :attr:`arguments`.
    """

    __slots__ = ("_count", "_key", "_parts", "_types", "arguments")

    def __init__(self) -> None:
        self.arguments: dict[str, Any] = {}
        self._count = 0
        self._key = ""
        self._types = STRING
        self._parts: list[str] = []

    def open(self) -> str:
        return "{"

    def close(self) -> str:
        return "}"

    def start(self, key: str, types: frozenset[str]) -> str:
        """A value begins; a string value's opening is streamed at once."""
        self._key, self._types, self._parts = key, types, []
        return f'{self._separator()}{json_text(key)}: "' if types == STRING else ""

    def add(self, text: str) -> str:
        """More of the value's text, as it was written."""
        self._parts.append(text)
        return json_text(text)[1:-1] if self._types == STRING else ""

    def end(self) -> str:
        value = convert_value("".join(self._parts), self._types)
        self.arguments[self._key] = value
        if self._types == STRING:
            return '"'
        return f"{self._separator()}{json_text(self._key)}: {json_text(value)}"

    def _separator(self) -> str:
        self._count += 1
        return "" if self._count == 1 else ", "


def parse_attributes(text: str) -> dict[str, str] | None:
    """``' name="x" string="true"'`` -> ``{"name": "x", "string": "true"}``; ``None`` when
    the text is not a list of attributes (double, single or no quotes)."""
    if not _ATTRIBUTES.fullmatch(text) or (text and not text[0].isspace()):
        return None
    return {
        m[1]: next(g for g in m.groups()[1:] if g is not None) for m in _ATTRIBUTE.finditer(text)
    }
