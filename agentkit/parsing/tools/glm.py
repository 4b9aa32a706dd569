"""GLM-4.5/4.6 and GLM-4.7 tool calls: one call per ``<tool_call>``, arguments as key/value tags.

GLM-4.5 and 4.6 put each element on its own line::

    <tool_call>read_file
    <arg_key>path</arg_key>
    <arg_value>src/a.py</arg_value>
    </tool_call>

GLM-4.7 writes the same without the newlines
(``<tool_call>read_file<arg_key>path</arg_key><arg_value>src/a.py</arg_value></tool_call>``).
Both parse the same way (whitespace between elements is formatting); they differ in rendering.

The name ends at the first newline or ``<`` (``<arg_key>``, or ``</tool_call>`` for a call
without arguments). A value is typed by the tool's JSON schema: a string parameter verbatim,
anything else JSON (or the text itself when it is not JSON). String values stream as they are
generated.

Tolerated: a missing ``</tool_call>`` when the output stops after whole arguments (a stop
string that is cut from the output, for one): the call is completed. Anything else that breaks
the format is an error call the model can read; the parser skips to ``</tool_call>``.

Known limitation: a value cannot contain ``</arg_value>``; the first one ends it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentkit.parsing._base import CallStart, JSONSchema, ToolSection, ToolSyntax
from agentkit.parsing.tools._cursor import Malformed, Parse, SectionCursor, Truncated
from agentkit.parsing.tools._xml_values import ArgumentsWriter, json_text, parameter_types
from agentkit.transcript import ToolCallBlock

__all__ = ["GLM45", "GLM47", "GlmToolSyntax"]

START = "<tool_call>"
END = "</tool_call>"
KEY = "<arg_key>"
KEY_END = "</arg_key>"
VALUE = "<arg_value>"
VALUE_END = "</arg_value>"

_NAME_LIMIT = 256
_KEY_LIMIT = 256
_NAME = re.compile(r"[^\s<>{}\[\]\"'=,]+")
"""What a tool name may look like; anything else (JSON, prose) is not GLM's format."""


class GlmToolSyntax(ToolSyntax):
    """``<tool_call>NAME`` + ``<arg_key>``/``<arg_value>`` pairs + ``</tool_call>``."""

    start_markers = (START,)

    def __init__(self, name: str, *, newlines: bool) -> None:
        self.name = name
        self._newline = "\n" if newlines else ""

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return _GlmSection(schemas)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return self._newline.join(self._call(c.name, c.arguments) for c in calls)

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        nl = self._newline
        pairs = "".join(
            f"{KEY}{key}{KEY_END}{nl}{VALUE}{_value_text(value)}{VALUE_END}{nl}"
            for key, value in arguments.items()
        )
        return f"{START}{name}{nl}{pairs}{END}"

    def __repr__(self) -> str:
        return f"GlmToolSyntax({self.name!r})"


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


GLM45 = GlmToolSyntax("glm45", newlines=True)
GLM47 = GlmToolSyntax("glm47", newlines=False)

_EXAMPLE = f"{START}TOOL_NAME\n{KEY}PARAMETER{KEY_END}\n{VALUE}VALUE{VALUE_END}\n{END}"


class _GlmSection(SectionCursor):
    def __init__(self, schemas: Mapping[str, JSONSchema]) -> None:
        self._schemas = schemas
        super().__init__()

    def _parse(self) -> Parse[None]:
        name: str | None = None
        where = "the tool's name"
        try:
            yield from self.skip_space()
            text, _ = yield from self.read(
                ("\n", "<"), limit=_NAME_LIMIT, what="the tool name", keep_end=True
            )
            if not _NAME.fullmatch(text.strip()):
                found = text.strip()[:40]
                raise Malformed(f"expected the tool's name right after {START}, found {found!r}")
            name = text.strip()
            self.emit(CallStart(name))
            schema = self._schemas.get(name)
            writer = ArgumentsWriter()
            self.emit_arguments(writer.open())
            while True:
                try:
                    yield from self.skip_space()
                    found_tag = yield from self.expect((KEY, END))
                except Truncated:  # stopped between arguments: the call is whole
                    break
                if found_tag == END:
                    break
                if found_tag is None:
                    found = self.found_instead((KEY, END))
                    raise Malformed(f"expected {KEY} or {END} but found {found!r}")
                where = f"an argument name, before {KEY_END}"
                key, _ = yield from self.read((KEY_END,), limit=_KEY_LIMIT, what="an argument name")
                key = key.strip()
                if not key:
                    raise Malformed(f"{KEY}{KEY_END} needs the argument's name")
                where = f"argument {key!r}, before {VALUE}"
                yield from self.skip_space()
                if (yield from self.expect((VALUE,))) is None:
                    found = self.found_instead((VALUE,))
                    raise Malformed(f"expected {VALUE} after {KEY}{key}{KEY_END}, found {found!r}")
                where = f"the value of argument {key!r}, before {VALUE_END}"
                yield from self.read_value(writer, key, parameter_types(schema, key), (VALUE_END,))
            self.emit_arguments(writer.close())
            self.end_call(writer.arguments, name=name)
        except Malformed as exc:
            error = f"Malformed tool call: {exc}. Write each call as:\n{_EXAMPLE}"
            with contextlib.suppress(Truncated):
                yield from self.pass_through((END,), None)
            self.end_call({}, error, name)
        except Truncated:
            call = f"The tool call {name!r}" if name else "The tool call"
            error = (
                f"{call} was cut off: the output ended inside {where}. "
                f"Write the whole call again, closing it with {END}."
            )
            self.end_call({}, error, name)
