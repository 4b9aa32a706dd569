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
trailing newline, which are stripped. Other values are typed by the tool's JSON schema, by the
rule of every tagged-value format (:func:`._xml_values.convert_value`): a string parameter, or
one the schema does not describe, is its text verbatim; others are read as JSON or as a Python
literal (``True``/``None``, as Qwen's own template writes them), and the tool's schema
validation reports a value of the wrong type to the model.

Arguments are streamed as JSON text: ``{`` when the function opens; a string value streamed as
escaped JSON as it is written, holding back only a possible closing tag and one newline; other
values, with their key, when the parameter closes; ``}`` at ``</function>``.

Limitations (documented choices): a value ends at the first ``</parameter>``, ``<parameter=`` or
``</function>`` (the last two accept a model that forgot ``</parameter>``), so a string value
containing one of those literals is cut there. Several ``<function=`` blocks inside one
``<tool_call>`` are parsed as several calls. ``</tool_call>`` right after the parameters is
accepted as closing the function too. A function or parameter name longer than 1,024
characters is malformed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from agentkit.parsing._base import CallStart, JSONSchema, ToolSection, ToolSyntax
from agentkit.parsing.tools._cursor import Malformed, Parse, SectionCursor, Truncated
from agentkit.parsing.tools._xml_values import ArgumentsWriter, json_text, parameter_types
from agentkit.transcript import ToolCallBlock

__all__ = ["QWEN3_CODER", "Qwen3CoderToolSyntax"]

START = "<tool_call>"
END = "</tool_call>"
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
_VALUE_ENDS = (PARAMETER_END, PARAMETER, FUNCTION_END)
_IN_FUNCTION = (PARAMETER, FUNCTION_END, END)
_NAME_ENDS = (">", "\n", "<")
_NAME_LIMIT = 1024
"""Longest function or parameter name read (real ones are under 64 characters); a longer one
is malformed rather than held back while it grows."""
_TRUNCATED = "tool call truncated"
_FORMAT_HINT = (
    f". Write each call as {START}\n{FUNCTION}TOOL>\n{PARAMETER}NAME>\nVALUE\n{PARAMETER_END}\n"
    f"{FUNCTION_END}\n{END}"
)


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
        text = value if isinstance(value, str) else json_text(value)
        parts += [PARAMETER, key, ">\n", text, "\n", PARAMETER_END, "\n"]
    parts += [FUNCTION_END, "\n", END]
    return "".join(parts)


class _Qwen3CoderSection(SectionCursor):
    """One ``<tool_call>``: its functions, each a call. A call that breaks the format is an
    error, and the rest of the section, up to ``</tool_call>``, belongs to it."""

    def __init__(self, schemas: Mapping[str, JSONSchema]) -> None:
        self._schemas = schemas
        super().__init__()

    def _parse(self) -> Parse[None]:
        name: str | None = None
        where = "in the call"
        try:
            if (yield from self._tag((FUNCTION,))) is None:
                raise Malformed(f"expected {FUNCTION}NAME> after {START}")
            while True:  # one function, after its <function=
                name = yield from self._name(FUNCTION)
                self.emit(CallStart(name))
                schema = self._schemas.get(name)
                writer = ArgumentsWriter()
                self.emit_arguments(writer.open())
                tag = yield from self._tag(_IN_FUNCTION)
                while tag == PARAMETER:
                    key = yield from self._name(PARAMETER)
                    where = f"in parameter {key!r}"
                    types = parameter_types(schema, key)
                    tag = yield from self.read_value(writer, key, types, _VALUE_ENDS, _Trim())
                    where = "in the call"
                    if tag == PARAMETER_END:
                        tag = yield from self._tag(_IN_FUNCTION)
                if tag is None:
                    raise Malformed(
                        f"expected {PARAMETER}NAME>, {FUNCTION_END} or {END} inside the function"
                    )
                self.emit_arguments(writer.close())
                if tag == FUNCTION_END:
                    try:
                        tag = yield from self._tag((FUNCTION, END))
                    except Truncated:  # the output stopped after a whole function
                        tag = END
                if tag is None:
                    raise Malformed(
                        f"unexpected text after {FUNCTION_END}: close the call with {END}"
                    )
                if tag == END:
                    self.end_call(writer.arguments, name=name)
                    return
                self.end_call(writer.arguments, name=name, leave=FUNCTION)  # the next function
                name = None
        except Malformed as exc:
            with contextlib.suppress(Truncated):
                yield from self.pass_through((END,), None)
            self.end_call({}, f"{exc}{_FORMAT_HINT}", name)
        except Truncated:
            error = f"{_TRUNCATED}: the output ended {where}, before {FUNCTION_END} and {END}"
            self.end_call({}, error, name)

    def _tag(self, tags: Sequence[str]) -> Parse[str | None]:
        """The tag that comes next, after whitespace; ``None`` when it is none of ``tags``."""
        yield from self.skip_space()
        return (yield from self.expect(tags))

    def _name(self, tag: str) -> Parse[str]:
        """The name after ``<function=`` or ``<parameter=``, and its ``>``."""
        what = f"the name in {tag}...>"
        text, end = yield from self.read(_NAME_ENDS, limit=_NAME_LIMIT, what=what, keep_end=True)
        name = text.strip()
        if end != ">" or not name:
            raise Malformed(f"malformed {tag}...> tag: expected a name, then '>'")
        yield from self.expect((">",))
        return name


class _Trim:
    """Drops the newline after a value's opening tag and the one before its closing tag,
    from a value given in pieces, whatever the split."""

    __slots__ = ("_held", "_started")

    def __init__(self) -> None:
        self._started = False
        self._held = False
        """The last piece ended with a newline, held back: it may be the one to drop."""

    def __call__(self, piece: str) -> str:
        if not self._started:
            self._started = True
            piece = piece.removeprefix("\n")
        if self._held:
            piece = "\n" + piece
            self._held = False
        if piece.endswith("\n"):
            piece = piece[:-1]
            self._held = True
        return piece
