"""From a Python signature to the JSON schema a model sees and the pydantic model that converts.

The schema is what the chat template renders into the prompt, so it is kept small and plain:
titles (pure noise to a model) are dropped and ``$defs`` references are inlined, because
small local models follow an inline ``{"enum": [...]}`` far better than a ``$ref`` they have
to resolve. Only a recursive type keeps its ``$defs``, where inlining cannot terminate.

Parameters become fields under private names (``p0``, ``p1``...) with the parameter's name as
alias: a tool may then have parameters called ``json``, ``copy`` or ``_id`` without clashing
with ``BaseModel``'s own attributes or its private-name rule.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model

from agentkit.errors import ConfigurationError

__all__ = ["FunctionSchema", "function_schema", "parse_docstring", "simplify_schema"]


@dataclass(frozen=True)
class FunctionSchema:
    """Everything derived from one function's signature and docstring."""

    model: type[BaseModel]
    """Validates the arguments and converts them to Python values (models, enums, ...)."""
    fields: tuple[tuple[str, str], ...]
    """``(parameter name, model field name)`` pairs, in signature order."""
    parameters: dict[str, Any]
    """The JSON schema of the arguments object."""
    description: str
    """The docstring's first paragraph."""


def function_schema(fn: Callable[..., Any], *, name: str) -> FunctionSchema:
    """Derive the argument schema and model of ``fn``; ``name`` is only used in messages.

    Raises :class:`ConfigurationError` for signatures a model cannot call with a JSON object
    (positional-only, ``*args``, ``**kwargs``) and for types pydantic cannot describe.
    """
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot read the signature of tool function {name!r}: {exc}"
        ) from exc

    summary, param_docs = parse_docstring(_docstring(fn))
    definitions: dict[str, Any] = {}
    fields: list[tuple[str, str]] = []
    for position, param in enumerate(signature.parameters.values()):
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            problem = f"positional-only parameter {param.name!r}"
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            problem = f"*{param.name}"
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            problem = f"**{param.name}"
        else:
            problem = None
        if problem is not None:
            raise ConfigurationError(
                f"tool function {name!r} has {problem}: a tool is called with a JSON object, "
                "so every parameter must be passable by keyword"
            )
        field_name = f"p{position}"
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        default = ... if param.default is inspect.Parameter.empty else param.default
        definitions[field_name] = (
            _annotate(annotation, alias=param.name, description=param_docs.get(param.name)),
            default,
        )
        fields.append((param.name, field_name))

    try:
        model = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **definitions,
        )
        raw_schema = model.model_json_schema()
    except (PydanticUserError, TypeError, NameError) as exc:
        raise ConfigurationError(
            f"cannot build a JSON schema for tool function {name!r}: {exc}"
        ) from exc

    body = simplify_schema(raw_schema)
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": body.get("properties", {}),
        "required": body.get("required", []),
        "additionalProperties": False,
    }
    if "$defs" in body:
        parameters["$defs"] = body["$defs"]
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:  # pragma: no cover - pydantic emits valid schemas
        raise ConfigurationError(
            f"tool function {name!r} produced an invalid JSON schema: {exc.message}"
        ) from exc
    return FunctionSchema(
        model=model, fields=tuple(fields), parameters=parameters, description=summary
    )


def _annotate(annotation: Any, *, alias: str, description: str | None) -> Any:
    """Attach alias and docstring description, letting the user's own ``Field`` win.

    Metadata later in ``Annotated`` overrides earlier, so the docstring's description goes
    first (an explicit ``Field(description=...)`` beats it) and the alias last (the field
    mapping depends on it).
    """
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
    else:
        base, metadata = annotation, []
    before = [Field(description=description)] if description else []
    return Annotated[(base, *before, *metadata, Field(alias=alias))]


def _docstring(fn: Callable[..., Any]) -> str | None:
    # A partial's own __doc__ describes functools.partial, not the tool.
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.getdoc(fn)


_ARGS_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
)
_OTHER_SECTIONS = (
    "Returns|Return|Yields|Yield|Raises|Examples|Example|Notes|Note|Attributes|See Also"
    "|Warnings|Warning|Todo|References"
)
_SECTION = re.compile(rf"^\s*({'|'.join(sorted(_ARGS_SECTIONS))}|{_OTHER_SECTIONS}):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its first paragraph and per-argument texts.

    The first paragraph is the tool's description; the ``Args:`` entries describe its
    parameters. Other sections (``Returns:``, ``Raises:``) are for programmers and are left
    out of what the model sees.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()

    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        summary.append(line.strip())

    params: dict[str, str] = {}
    index = 0
    while index < len(lines):
        header = _SECTION.match(lines[index])
        index += 1
        if header is None or header.group(1) not in _ARGS_SECTIONS:
            continue
        # cleandoc strips the indentation of everything after a docstring's first line, so
        # a header on that first line sits at the same indent as its entries.
        header_indent = -1 if index == 1 else _indent(lines[index - 1])
        entry_indent: int | None = None
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if not line.strip():
                index += 1
                continue
            indent = _indent(line)
            if indent <= header_indent:
                break
            if entry_indent is None:
                entry_indent = indent
            entry = _ENTRY.match(line.strip()) if indent == entry_indent else None
            if entry is not None:
                current = entry.group(1)
                params[current] = entry.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
            index += 1
    return " ".join(summary), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# JSON Schema keywords whose values are schemas, lists of schemas, or maps of schemas. Only
# these are walked, so a property *named* "title" or a default value holding "$ref" survives.
_ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_LIST = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_MAP = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_DEFS_PREFIX = "#/$defs/"


class _Recursive(Exception):
    """A ``$ref`` led back to a definition being inlined."""


def simplify_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop titles and inline ``$defs``; keep ``$defs`` (untitled) when a type is recursive."""
    defs: dict[str, Any] = schema.get("$defs", {})
    body = {key: value for key, value in schema.items() if key != "$defs"}
    try:
        result: dict[str, Any] = _walk(body, defs, inline=True, seen=())
    except _Recursive:
        result = _walk(schema, defs, inline=False, seen=())
    return result


def _walk(node: Any, defs: dict[str, Any], *, inline: bool, seen: tuple[str, ...]) -> Any:
    if not isinstance(node, dict):
        return node  # boolean schemas
    out: dict[str, Any] = {}
    ref = node.get("$ref")
    inlined = False
    if inline and isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
        target = ref[len(_DEFS_PREFIX) :]
        if target in seen or target not in defs:
            raise _Recursive(target)
        out.update(_walk(defs[target], defs, inline=True, seen=(*seen, target)))
        inlined = True
    for key, value in node.items():
        if key == "title" or (inlined and key == "$ref"):
            continue
        if inline and key == "discriminator":
            continue  # OpenAPI keyword whose mapping points into the $defs just removed
        if key in _ONE:
            out[key] = _walk(value, defs, inline=inline, seen=seen)
        elif key in _LIST and isinstance(value, list):
            out[key] = [_walk(item, defs, inline=inline, seen=seen) for item in value]
        elif key in _MAP and isinstance(value, dict):
            out[key] = {k: _walk(v, defs, inline=inline, seen=seen) for k, v in value.items()}
        else:
            out[key] = value
    return out
