"""Saying what is wrong with a call's arguments in words a model can act on.

The text ends up in a ``tool_result`` the model reads on its next turn, so each problem names
the field (``address.zip``, ``tags[2]``) and what was expected there, long values are cut
short, and the list is capped: a model drowning in forty errors fixes none of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaValidationError
from pydantic import ValidationError

__all__ = ["arguments_message", "pydantic_problems", "schema_problems"]

_MAX_PROBLEMS = 8
_MAX_LINE = 300
_MAX_VALUE = 80


def schema_problems(validator: Draft202012Validator, arguments: Any) -> list[str]:
    """One line per way ``arguments`` fails the validator's schema; empty when it passes."""
    return [line for error in validator.iter_errors(arguments) for line in _describe(error)]


def pydantic_problems(error: ValidationError) -> list[str]:
    """One line per pydantic error (those the JSON schema could not express)."""
    lines: list[str] = []
    for detail in error.errors(include_url=False):
        where = _path(detail["loc"])
        what = f"{detail['msg']} (got {_short(detail['input'])})"
        lines.append(_cut(f"{where}: {what}" if where else what))
    return lines


def arguments_message(tool_name: str, problems: list[str]) -> str:
    """The full text of a :class:`~agentkit.errors.ToolArgumentsError`."""
    shown = problems[:_MAX_PROBLEMS]
    lines = [f"Invalid arguments for tool {tool_name!r}:"]
    lines.extend(f"- {problem}" for problem in shown)
    if len(problems) > len(shown):
        lines.append(f"- ... and {len(problems) - len(shown)} more")
    lines.append("Call the tool again with arguments that match its parameters.")
    return "\n".join(lines)


def _describe(error: SchemaValidationError) -> list[str]:
    where = _path(error.absolute_path)
    if error.validator in ("anyOf", "oneOf") and error.context:
        # "matches none of the alternatives" helps nobody when the value had the right type
        # for one of them (the usual ``X | None``): report what is wrong inside that one.
        branches: dict[int | str, list[SchemaValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        plausible = [
            subs
            for subs in branches.values()
            if not any(not sub.relative_path and sub.validator in _SHAPE for sub in subs)
        ]
        if plausible:
            return [line for sub in plausible[0] for line in _describe(sub)]
        options = error.validator_value if isinstance(error.validator_value, list) else []
        forms = " | ".join(_form(option) for option in options)
        what = f"{_short(error.instance)} is none of the allowed forms: {forms}"
    elif error.validator == "additionalProperties" and error.validator_value is False:
        properties = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        allowed = ", ".join(properties) or "none"
        what = f"{error.message}; allowed properties: {allowed}"
    else:
        what = error.message
    return [_cut(f"{where}: {what}" if where else what)]


# Validators that reject a value's overall shape rather than something inside it.
_SHAPE = frozenset({"type", "const", "enum"})


def _form(schema: Any) -> str:
    """A short name for one alternative of ``anyOf``: its type, constant or enum."""
    if isinstance(schema, dict):
        if "const" in schema:
            return repr(schema["const"])
        if "enum" in schema:
            return f"one of {schema['enum']!r}"
        if "type" in schema:
            kind = schema["type"]
            return kind if isinstance(kind, str) else "/".join(map(str, kind))
    return _compact(schema)


def _path(parts: Iterable[str | int]) -> str:
    """``("address", "lines", 0)`` -> ``address.lines[0]``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _compact(schema: Any) -> str:
    """A schema without its prose, on one line: the shape of what was expected."""
    if isinstance(schema, dict):
        schema = {k: v for k, v in schema.items() if k not in ("description", "default")}
    return _cut(json.dumps(schema, ensure_ascii=False, separators=(",", ":")), _MAX_VALUE)


def _short(value: Any) -> str:
    return _cut(repr(value), _MAX_VALUE)


def _cut(text: str, limit: int = _MAX_LINE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
