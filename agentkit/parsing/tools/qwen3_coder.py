"""Qwen3-Coder tool calls: XML-like tags with one value per parameter.

::

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    value
    </parameter>
    </function>
    </tool_call>

Values are not JSON: a string is written verbatim (no escaping) between one leading and one
trailing newline, which are stripped. Other values are typed by the tool's JSON schema: a
parameter whose type is integer, number, boolean, null, object or array is parsed as JSON
(Python literals such as ``True``/``None`` are tolerated, as Qwen's own template writes them);
if the schema does not know the parameter, or the value does not parse as the declared type, the
value is kept as a string and the tool's schema validation reports it to the model.

Arguments are streamed as JSON text: ``{"KEY": `` when a parameter opens; a string-typed value
(or one the schema does not type) streamed character by character as escaped JSON, holding
back only a possible closing tag and one newline; other values when the parameter closes; ``}``
at ``</function>``.

Limitations (documented choices): a value ends at the first ``</parameter>``, ``<parameter=`` or
``</function>`` (the last two accept a model that forgot ``</parameter>``), so a string value
containing one of those literals is cut there. Several ``<function=`` blocks inside one
``<tool_call>`` are parsed as several calls. ``</tool_call>`` right after the parameters is
accepted as closing the function too.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    CallStart,
    JSONSchema,
    SectionEvent,
    SectionStep,
    ToolSection,
    ToolSyntax,
)
from agentkit.parsing._markers import (
    MISMATCH,
    Expect,
    MarkerFinder,
    find_first,
    partial_suffix_len,
)
from agentkit.transcript import ToolCallBlock

__all__ = ["QWEN3_CODER", "Qwen3CoderToolSyntax"]

START = "<tool_call>"
END = "</tool_call>"
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
_VALUE_ENDS = (PARAMETER_END, PARAMETER, FUNCTION_END)
_NAME_STOP = re.compile(r"[>\n<]")
_TRUNCATED = "tool call truncated"
_FORMAT_HINT = (
    f". Write each call as {START}\n{FUNCTION}TOOL>\n{PARAMETER}NAME>\nVALUE\n{PARAMETER_END}\n"
    f"{FUNCTION_END}\n{END}"
)
_LITERAL_LIMIT = 100_000
"""Longest value given to :func:`ast.literal_eval` (which is slow on huge inputs)."""

_BEFORE_FUNCTION = 0
_FUNCTION_NAME = 1
_IN_FUNCTION = 2
_PARAMETER_NAME = 3
_VALUE = 4
_AFTER_FUNCTION = 5
_SKIP = 6


class Qwen3CoderToolSyntax(ToolSyntax):
    """``<tool_call>`` + ``<function=NAME>`` + ``<parameter=KEY>`` blocks, typed by schema."""

    name = "qwen3_coder"
    start_markers = (START,)

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return _Qwen3CoderSection(schemas)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return "\n".join(_render_call(call) for call in calls)


QWEN3_CODER = Qwen3CoderToolSyntax()


def _render_call(call: ToolCallBlock) -> str:
    parts = [START, "\n", FUNCTION, call.name, ">\n"]
    for key, value in call.arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts += [PARAMETER, key, ">\n", text, "\n", PARAMETER_END, "\n"]
    parts += [FUNCTION_END, "\n", END]
    return "".join(parts)


class _Qwen3CoderSection(ToolSection):
    def __init__(self, schemas: Mapping[str, JSONSchema]) -> None:
        self._schemas = schemas
        self._state = _BEFORE_FUNCTION
        self._expect = Expect((FUNCTION,))
        self._finder = MarkerFinder(END)
        self._error: str | None = None
        self._raw: list[str] = []
        """Text consumed since the last call ended (in earlier feeds)."""
        self._name_parts: list[str] = []
        self._name: str | None = None
        self._properties: Mapping[str, Any] = {}
        self._arguments: dict[str, Any] = {}
        """Values by key; a repeated key keeps its last value, as ``json.loads`` would."""
        self._parameters = 0
        self._key = ""
        self._types: tuple[str, ...] | None = None
        self._value_parts: list[str] = []
        self._value_started = False
        self._held_newline = False
        self._tail = ""

    def feed(self, text: str) -> SectionStep:
        events: list[SectionEvent] = []
        n = len(text)
        pos = 0
        seg = 0  # where the current call's raw starts in text
        while pos < n:
            state = self._state
            if state in (_BEFORE_FUNCTION, _IN_FUNCTION, _AFTER_FUNCTION):
                pos, tag = self._expect.feed(text, pos)
                if tag is None:
                    break
                if tag is MISMATCH:
                    self._skip(_MISMATCH_ERRORS[state], self._expect.matched)
                elif tag == END:
                    if state == _IN_FUNCTION:  # </function> forgotten: accept
                        events.append(CallArguments("}"))
                    events.append(self._call_end(self._take_raw(text, seg, pos)))
                    return SectionStep(events, consumed=pos, done=True)
                elif tag == FUNCTION and state == _AFTER_FUNCTION:
                    raw = self._take_raw(text, seg, pos)
                    events.append(self._call_end(raw[: -len(FUNCTION)]))
                    self._raw.append(FUNCTION)
                    seg = pos
                    self._state = _FUNCTION_NAME
                else:
                    self._on_tag(str(tag), events)
            elif state in (_FUNCTION_NAME, _PARAMETER_NAME):
                pos = self._read_name(text, pos, events)
            elif state == _VALUE:
                pos = self._read_value(text, pos, events)
            else:
                end = self._finder.find(text, pos)
                if end < 0:
                    break
                events.append(self._call_end(self._take_raw(text, seg, end)))
                return SectionStep(events, consumed=end, done=True)
        self._raw.append(text[seg:])
        return SectionStep(events, consumed=n)

    def finish(self) -> SectionStep:
        if self._state != _AFTER_FUNCTION and self._error is None:
            where = f"in parameter {self._key!r}" if self._state == _VALUE else "in the call"
            self._error = f"{_TRUNCATED}: the output ended {where}, before {FUNCTION_END} and {END}"
        return SectionStep([self._call_end("".join(self._raw))], done=True)

    def _take_raw(self, text: str, seg: int, end: int) -> str:
        raw = "".join(self._raw) + text[seg:end]
        self._raw.clear()
        return raw

    def _skip(self, error: str, tail: str = "") -> None:
        self._state = _SKIP
        self._error = error
        self._finder = MarkerFinder(END, tail)

    def _on_tag(self, tag: str, events: list[SectionEvent]) -> None:
        if tag == FUNCTION:
            self._state = _FUNCTION_NAME
        elif tag == PARAMETER:
            self._state = _PARAMETER_NAME
        else:  # </function>
            events.append(CallArguments("}"))
            self._state = _AFTER_FUNCTION
            self._expect = Expect((FUNCTION, END))

    def _call_end(self, raw: str) -> CallEnd:
        name, arguments, error = self._name, self._arguments, self._error
        self._name, self._arguments, self._error = None, {}, None
        self._parameters = 0
        if error is not None:
            if not error.startswith(_TRUNCATED):  # show a model that strayed from the format
                error += _FORMAT_HINT
            return CallEnd({}, raw, error, name=name)
        return CallEnd(arguments, raw, name=name)

    def _read_name(self, text: str, pos: int, events: list[SectionEvent]) -> int:
        match = _NAME_STOP.search(text, pos)
        if match is None:
            self._name_parts.append(text[pos:])
            return len(text)
        j = match.start()
        self._name_parts.append(text[pos:j])
        name = "".join(self._name_parts).strip()
        self._name_parts.clear()
        tag = FUNCTION if self._state == _FUNCTION_NAME else PARAMETER
        if text[j] != ">" or not name:
            self._skip(f"malformed {tag}...> tag: expected a name, then '>'")
            return j
        if self._state == _FUNCTION_NAME:
            self._start_function(name, events)
        else:
            self._start_parameter(name, events)
        return j + 1

    def _start_function(self, name: str, events: list[SectionEvent]) -> None:
        self._name = name
        self._properties = _properties(self._schemas.get(name))
        events.append(CallStart(name))
        events.append(CallArguments("{"))
        self._state = _IN_FUNCTION
        self._expect = Expect((PARAMETER, FUNCTION_END, END))

    def _start_parameter(self, key: str, events: list[SectionEvent]) -> None:
        opening = ", " if self._parameters else ""
        self._parameters += 1
        self._key = key
        self._types = _schema_types(self._properties.get(key))
        opening += json.dumps(key, ensure_ascii=False) + ": "
        events.append(CallArguments(opening + '"' if self._streams else opening))
        self._value_parts = []
        self._value_started = False
        self._held_newline = False
        self._tail = ""
        self._state = _VALUE

    @property
    def _streams(self) -> bool:
        """The value is a string whatever it holds, so it can be streamed as it comes."""
        return self._types is None or set(self._types) == {"string"}

    def _read_value(self, text: str, pos: int, events: list[SectionEvent]) -> int:
        tail = self._tail
        window = tail + text[pos:] if tail else text[pos:]
        hit = find_first(window, _VALUE_ENDS)
        if hit is None:
            keep = partial_suffix_len(window, _VALUE_ENDS)
            self._value_piece(window[: len(window) - keep], events)
            self._tail = window[len(window) - keep :]
            return len(text)
        at, end = hit
        self._value_piece(window[:at], events)
        self._tail = ""
        self._end_value(events)
        if end == PARAMETER_END:
            self._state = _IN_FUNCTION
            self._expect = Expect((PARAMETER, FUNCTION_END, END))
        else:
            self._on_tag(end, events)
        return pos + at + len(end) - len(tail)

    def _value_piece(self, piece: str, events: list[SectionEvent]) -> None:
        if not piece:
            return
        if not self._value_started:  # one leading newline is formatting
            self._value_started = True
            piece = piece.removeprefix("\n")
        if self._held_newline:
            piece = "\n" + piece
            self._held_newline = False
        if piece.endswith("\n"):  # may be the trailing newline before the closing tag
            piece = piece[:-1]
            self._held_newline = True
        if piece:
            self._value_parts.append(piece)
            if self._streams:
                events.append(CallArguments(json.dumps(piece, ensure_ascii=False)[1:-1]))

    def _end_value(self, events: list[SectionEvent]) -> None:
        value = "".join(self._value_parts)
        types = self._types
        if types is None or self._streams:
            self._arguments[self._key] = value
            events.append(CallArguments('"'))
            return
        converted = _convert(value, types)
        self._arguments[self._key] = converted
        events.append(CallArguments(json.dumps(converted, ensure_ascii=False)))


_MISMATCH_ERRORS = {
    _BEFORE_FUNCTION: f"expected {FUNCTION}NAME> after {START}",
    _IN_FUNCTION: f"expected {PARAMETER}NAME>, {FUNCTION_END} or {END} inside the function",
    _AFTER_FUNCTION: f"unexpected text after {FUNCTION_END}: close the call with {END}",
}


def _properties(schema: JSONSchema | None) -> Mapping[str, Any]:
    """The ``properties`` of a tool's parameters schema (or of an OpenAI-style function)."""
    if not isinstance(schema, Mapping):
        return {}
    if "properties" not in schema and isinstance(schema.get("parameters"), Mapping):
        schema = schema["parameters"]
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _schema_types(schema: Any) -> tuple[str, ...] | None:
    """The JSON types a parameter schema allows, or ``None`` when it does not say."""
    if not isinstance(schema, Mapping):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return (declared,)
    if isinstance(declared, list) and declared and all(isinstance(t, str) for t in declared):
        return tuple(declared)
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            types: list[str] = []
            for option in options:
                option_types = _schema_types(option)
                if option_types is None:
                    return None
                types.extend(option_types)
            return tuple(types)
    return None


def _convert(value: str, types: tuple[str, ...]) -> Any:
    """``value`` as the first JSON value of a declared type it parses to, else verbatim."""
    ok, parsed = _parse(value.strip())
    if not ok:
        return value
    if isinstance(parsed, float) and parsed.is_integer() and "number" not in types:
        parsed = int(parsed)  # 5.0 for an integer parameter
    return parsed if _has_type(parsed, types) else value


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        pass
    if len(text) > _LITERAL_LIMIT:
        return False, None
    try:  # Python literals: True, None, {'a': 1}, as Qwen's template writes them
        literal = ast.literal_eval(text)
        return True, json.loads(json.dumps(literal, allow_nan=False))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _has_type(value: Any, types: tuple[str, ...]) -> bool:
    """Whether ``value`` has one of the non-string ``types`` (strings stay verbatim)."""
    checks = {
        "null": value is None,
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }
    return any(checks.get(t, False) for t in types)
