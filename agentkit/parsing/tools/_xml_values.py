"""Machinery shared by the tool-call formats that write each argument as a tagged value.

DSML (``<｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>``), MiniMax-M2
(``<parameter name="k">v</parameter>``), GLM (``<arg_key>k</arg_key><arg_value>v</arg_value>``)
and Qwen3-Coder (``<parameter=k>v</parameter>``) share three problems, solved once here:

* **Typing a value.** String parameters are written verbatim, everything else as JSON. Which is
  which comes from the tool's JSON schema (:func:`parameter_types`, :func:`convert_value`), or
  from the format itself (DSML's ``string`` attribute).
* **Streaming the arguments.** A 30 KB file body must reach the caller while it is generated,
  as JSON text whose concatenation parses to the final arguments (:class:`ArgumentsWriter`).
  String values stream as JSON string fragments; other values are short and are sent whole
  when their closing tag arrives, once it is known whether they are JSON.
* **Parsing incrementally.** :class:`SectionCursor` runs a section's grammar as a generator
  over a buffer: a primitive that needs more text yields, and the next ``feed`` resumes it. The
  grammar then reads top to bottom, and each delta costs time proportional to its length (only
  a possible partial tag, or a short name still being read, is ever held).
"""

from __future__ import annotations

import ast
import json
import re
from abc import abstractmethod
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

from agentkit.parsing._base import (
    CallArguments,
    CallEnd,
    JSONSchema,
    SectionEvent,
    SectionStep,
    ToolSection,
)
from agentkit.parsing._markers import find_first, partial_suffix_len

__all__ = [
    "ANY",
    "STRING",
    "ArgumentsWriter",
    "Malformed",
    "Parse",
    "SectionCursor",
    "Truncated",
    "convert_value",
    "json_text",
    "parameter_types",
    "parse_attributes",
]

T = TypeVar("T")
Parse = Generator[None, None, T]
"""A step of a section's grammar: yields while it waits for more text, returns its result."""

STRING: frozenset[str] = frozenset({"string"})
ANY: frozenset[str] = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)

_LITERAL_LIMIT = 100_000
"""Longest text given to :func:`ast.literal_eval`, which is slow on huge inputs."""
_SPACE = re.compile(r"\S")
_ATTRIBUTES = re.compile(r"""(?:\s+[\w-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))*\s*""")
_ATTRIBUTE = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


# --- values -----------------------------------------------------------------------------------


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

    A string parameter is ``text`` verbatim. Otherwise the text is read as JSON (or as a
    Python literal, ``True``/``None``/``{'a': 1}``, which models trained on Python-rendered
    templates write). Text that is neither, or a value of a type the parameter refuses while it
    accepts strings, stays the string it is; the tool's schema check then says what is wrong.
    """
    if types == STRING:
        return text
    parsed, value = _parse(text.strip())
    if not parsed:
        return text
    kind = _json_type(value)
    if kind == "number" and "integer" in types and "number" not in types and value.is_integer():
        value, kind = int(value), "integer"
    if kind in types or (kind == "integer" and "number" in types) or "string" not in types:
        return value
    return text


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        pass
    if len(text) > _LITERAL_LIMIT or not text:
        return False, None
    try:
        literal = ast.literal_eval(text)
        return True, json.loads(json.dumps(literal, allow_nan=False))
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


# --- incremental parsing ----------------------------------------------------------------------


class Truncated(Exception):
    """The output ended before the grammar step could complete. Everything is consumed."""


class Malformed(Exception):
    """The text breaks the format; the message tells the model what was expected."""


class SectionCursor(ToolSection):
    """A :class:`ToolSection` whose grammar is the generator :meth:`_parse`.

    The generator reads ``self._buf`` from ``self._pos`` through the primitives below and emits
    events with :meth:`emit` and :meth:`end_call`; it returns when the section is over. Bytes
    consumed since the last ``CallEnd`` are its raw text (or the section's ``tail_raw``).
    """

    def __init__(self) -> None:
        self._buf = ""
        self._pos = 0
        self._mark = 0
        """Start of the text in ``_buf`` not yet recorded in ``_raw``."""
        self._raw: list[str] = []
        self._events: list[SectionEvent] = []
        self._eof = False
        self._done = False
        self._grammar = self._parse()

    @abstractmethod
    def _parse(self) -> Parse[None]:
        """The section's grammar, from just after its start marker to its end."""

    # ToolSection ---------------------------------------------------------------------------

    def feed(self, text: str) -> SectionStep:
        if self._done:
            return SectionStep(done=True)
        self._raw.append(self._buf[self._mark : self._pos])
        self._buf = self._buf[self._pos :] + text
        self._pos = self._mark = 0
        self._resume()
        return self._step(len(text))

    def finish(self) -> SectionStep:
        if self._done:
            return SectionStep(done=True)
        self._eof = True
        self._resume()
        self._pos = len(self._buf)  # nothing can be handed back after the output ended
        return self._step(0)

    def _resume(self) -> None:
        try:
            next(self._grammar)
        except StopIteration:
            self._done = True
        if self._eof and not self._done:  # pragma: no cover - a grammar bug
            raise RuntimeError("section grammar waited for text after the output ended")

    def _step(self, fed: int) -> SectionStep:
        events, self._events = self._events, []
        if not self._done:
            return SectionStep(events, consumed=fed)
        left = len(self._buf) - self._pos
        if left > fed:  # pragma: no cover - a grammar bug
            raise RuntimeError("a section may only hand back text it was just given")
        return SectionStep(events, consumed=fed - left, done=True, tail_raw=self._take_raw())

    # events --------------------------------------------------------------------------------

    def emit(self, event: SectionEvent) -> None:
        self._events.append(event)

    def emit_arguments(self, fragment: str) -> None:
        if fragment:
            self._events.append(CallArguments(fragment))

    def end_call(
        self, arguments: dict[str, Any], error: str | None = None, name: str | None = None
    ) -> None:
        self._events.append(CallEnd(arguments, self._take_raw(), error, name))

    def _take_raw(self) -> str:
        self._raw.append(self._buf[self._mark : self._pos])
        self._mark = self._pos
        raw = "".join(self._raw)
        self._raw = []
        return raw

    # grammar primitives --------------------------------------------------------------------

    def _truncated(self) -> Truncated:
        self._pos = len(self._buf)
        return Truncated()

    def skip_space(self) -> Parse[None]:
        """Consume whitespace up to the next other character."""
        while True:
            found = _SPACE.search(self._buf, self._pos)
            if found is not None:
                self._pos = found.start()
                return
            self._pos = len(self._buf)
            if self._eof:
                raise self._truncated()
            yield

    def expect(self, literals: Sequence[str]) -> Parse[str | None]:
        """Consume the literal the text continues with, or return ``None`` (consuming nothing)
        as soon as the text can be none of them."""
        while True:
            buf, pos = self._buf, self._pos
            for literal in literals:
                if buf.startswith(literal, pos):
                    self._pos = pos + len(literal)
                    return literal
            rest = len(buf) - pos
            if not any(rest < len(lit) and lit.startswith(buf[pos:]) for lit in literals):
                return None
            if self._eof:
                raise self._truncated()
            yield

    def found_instead(self, literals: Sequence[str]) -> str:
        """After :meth:`expect` returned ``None``: the text that ruled every literal out."""
        buf, pos = self._buf, self._pos
        size = 1
        while pos + size < len(buf) and any(
            lit.startswith(buf[pos : pos + size]) for lit in literals
        ):
            size += 1
        return buf[pos : pos + size]

    def read(
        self, literals: Sequence[str], *, limit: int, what: str, keep_end: bool = False
    ) -> Parse[tuple[str, str]]:
        """Read a short text (a name, a tag's attributes) up to the first of ``literals``.

        Returns the text and the literal, which is consumed unless ``keep_end``. Nothing is
        consumed until the literal is found, so a text over ``limit`` characters is rejected
        from its start, whatever the split.
        """
        scanned = 0
        longest = max(len(lit) for lit in literals)
        while True:
            buf, pos = self._buf, self._pos
            found = find_first(buf, literals, pos + scanned)
            if found is not None and found[0] - pos <= limit:
                at, literal = found
                self._pos = at if keep_end else at + len(literal)
                return buf[pos:at], literal
            if found is not None or len(buf) - pos > limit + longest:
                raise Malformed(f"{what} is longer than {limit} characters")
            if self._eof:
                raise self._truncated()
            scanned = max(0, len(buf) - pos - longest + 1)
            yield

    def pass_through(
        self, literals: Sequence[str], sink: Callable[[str], None] | None
    ) -> Parse[str]:
        """Hand the text before the first of ``literals`` to ``sink`` as it arrives, holding
        back only a possible partial literal; consume that literal and return it."""
        while True:
            buf, pos = self._buf, self._pos
            found = find_first(buf, literals, pos)
            if found is not None:
                at, literal = found
                if sink is not None and at > pos:
                    sink(buf[pos:at])
                self._pos = at + len(literal)
                return literal
            if self._eof:
                raise self._truncated()
            end = len(buf) - _held_back(buf, literals, pos)
            if sink is not None and end > pos:
                sink(buf[pos:end])
            self._pos = end
            yield


def _held_back(buf: str, literals: Sequence[str], pos: int) -> int:
    """:func:`partial_suffix_len`, answering the common case (no literal's first character near
    the end: most of a value's text) without trying every suffix."""
    end = len(buf)
    for literal in literals:
        if buf.find(literal[0], max(pos, end - len(literal) + 1)) != -1:
            return partial_suffix_len(buf, literals, pos)
    return 0
