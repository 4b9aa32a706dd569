"""DeepSeek's DSML tool calls (DeepSeek-V3.2, V4, V4.1), and the invoke/parameter shape.

A DSML section holds one or more calls::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="read_file">
    <｜DSML｜parameter name="path" string="true">src/a.py</｜DSML｜parameter>
    <｜DSML｜parameter name="limit" string="false">20</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

DeepSeek-V4 writes ``tool_calls`` where V3.2 writes ``function_calls``. DeepSeek-V4.1 puts a
space after the marker in every tag, and names the section ``calls``::

    <｜DSML｜ calls>
    <｜DSML｜ invoke name="read_file">
    <｜DSML｜ parameter name="path" string="true">src/a.py</｜DSML｜ parameter>
    </｜DSML｜ invoke>
    </｜DSML｜ calls>

(its encoder, ``vllm/tokenizers/deepseek_v41_encoding.py``, and vLLM's ``deepseek_v41``
parser spell the tags so). Each dialect is its own syntax: one model's tags are plain text to
another's parser. A ``string="true"``
value is the argument verbatim (quotes, backslashes and newlines as written, nothing
unescaped); a ``string="false"`` value is JSON. In DeepSeek's tokenizer ``｜DSML｜`` is one token
but the tags are not (``<`` ``｜DSML｜`` `` calls`` ``>\n``: the ``>`` shares a token with the
newline after it), so a tag may arrive split anywhere: everything is parsed on text.

MiniMax-M2 uses the same shape with plain tags, so the parser here is generic over the tag
spelling (:class:`InvokeTags`); :mod:`.minimax_m2` only names its tags.

Tolerated: a missing section end marker (the calls before it stand), a missing ``</invoke>``
after whole parameters when the output stops there (the call is completed). Anything else
that breaks the format ends the call with an error the model can read; the parser then skips
to the next ``</invoke>`` (or the end of the section), so the calls after it still run.

Known limitation: a value cannot contain its own closing tag (``</｜DSML｜parameter>``); the
first one ends the value, as it does for DeepSeek's own parser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit.parsing._base import CallStart, JSONSchema, ToolSection, ToolSyntax
from agentkit.parsing.tools._cursor import Malformed, Parse, SectionCursor, Truncated
from agentkit.parsing.tools._xml_values import (
    ANY,
    STRING,
    ArgumentsWriter,
    json_text,
    parameter_types,
    parse_attributes,
)
from agentkit.transcript import ToolCallBlock

__all__ = ["DEEPSEEK_V4", "DEEPSEEK_V32", "DEEPSEEK_V41", "InvokeTags", "InvokeToolSyntax"]

_TAG_LIMIT = 512
"""Longest attribute text accepted in an ``invoke`` or ``parameter`` tag."""


@dataclass(frozen=True, slots=True)
class InvokeTags:
    """The spelling of one invoke/parameter format."""

    start: str
    end: str
    invoke: str
    """The opening of an invoke tag, before its attributes (``<invoke``)."""
    invoke_end: str
    parameter: str
    parameter_end: str
    string_attribute: bool = False
    """Parameters say ``string="true|false"`` (DSML); otherwise the tool's schema decides."""

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        """One section holding every call, in the layout the model was trained on."""
        return (
            f"{self.start}\n{''.join(self._invoke(c.name, c.arguments) for c in calls)}{self.end}"
        )

    def _invoke(self, name: str, arguments: Mapping[str, Any]) -> str:
        parameters = "".join(self._parameter(k, v) for k, v in arguments.items())
        return f'{self.invoke} name="{name}">\n{parameters}{self.invoke_end}\n'

    def _parameter(self, key: str, value: Any) -> str:
        is_string = isinstance(value, str)
        text = value if is_string else json_text(value)
        kind = f' string="{"true" if is_string else "false"}"' if self.string_attribute else ""
        return f'{self.parameter} name="{key}"{kind}>{text}{self.parameter_end}\n'

    @property
    def example(self) -> str:
        return self.render(
            [ToolCallBlock(id="", name="TOOL_NAME", arguments={"PARAMETER": "VALUE"})]
        )


class InvokeToolSyntax(ToolSyntax):
    """A format of sections of ``invoke`` elements holding ``parameter`` elements."""

    def __init__(self, name: str, tags: InvokeTags) -> None:
        self.name = name
        self.tags = tags
        self.start_markers = (tags.start,)

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        return InvokeSection(self.tags, schemas)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return self.tags.render(calls)

    def __repr__(self) -> str:
        return f"InvokeToolSyntax({self.name!r})"


class InvokeSection(SectionCursor):
    """One section, from just after its start marker to just after its end marker."""

    def __init__(self, tags: InvokeTags, schemas: Mapping[str, JSONSchema]) -> None:
        self._tags = tags
        self._schemas = schemas
        super().__init__()

    def _parse(self) -> Parse[None]:
        tags = self._tags
        calls = 0
        while True:
            try:
                yield from self.skip_space()
                found = yield from self.expect((tags.invoke, tags.end))
            except Truncated:  # the end marker is missing: the calls so far stand
                if calls == 0:
                    where = f'the section, before its first {tags.invoke} name="...">'
                    self.end_call({}, self._truncated_error(None, where))
                return
            if found == tags.end:
                if calls == 0:
                    self.end_call({}, self._no_call())
                return
            calls += 1
            if found is None:
                wanted = (
                    f'{tags.invoke} name="...">' if calls == 1 else f"{tags.invoke} or {tags.end}"
                )
                found_text = self.found_instead((tags.invoke, tags.end))
                error = self._malformed(self._unexpected(wanted, found_text))
                if not (yield from self._skip(error, None)):
                    return
            elif not (yield from self._invoke()):
                return

    def _invoke(self) -> Parse[bool]:
        """One call, after its ``<invoke``; ``False`` when the section ended with it."""
        tags = self._tags
        name: str | None = None
        where = f"its {tags.invoke} tag"
        try:
            text, _ = yield from self.read((">",), limit=_TAG_LIMIT, what=f"the {tags.invoke} tag")
            name = _attribute(text, "name")
            if not name:
                raise Malformed(f'the {tags.invoke} tag needs a name="..." attribute')
            self.emit(CallStart(name))
            schema = self._schemas.get(name)
            writer = ArgumentsWriter()
            self.emit_arguments(writer.open())
            while True:
                try:
                    yield from self.skip_space()
                    found = yield from self.expect((tags.parameter, tags.invoke_end))
                except Truncated:  # stopped between parameters: the call is whole
                    self.emit_arguments(writer.close())
                    self.end_call(writer.arguments, name=name)
                    return False
                if found == tags.invoke_end:
                    self.emit_arguments(writer.close())
                    self.end_call(writer.arguments, name=name)
                    return True
                if found is None:
                    wanted = f"{tags.parameter} or {tags.invoke_end}"
                    found_text = self.found_instead((tags.parameter, tags.invoke_end))
                    raise Malformed(self._unexpected(wanted, found_text))
                where = f"a {tags.parameter} tag"
                text, _ = yield from self.read(
                    (">",), limit=_TAG_LIMIT, what=f"the {tags.parameter} tag"
                )
                key = _attribute(text, "name")
                if not key:
                    raise Malformed(f'each {tags.parameter} tag needs a name="..." attribute')
                where = f"the value of parameter {key!r}, before {tags.parameter_end}"
                types = self._types(schema, key, text)
                yield from self.read_value(writer, key, types, (tags.parameter_end,))
        except Malformed as exc:
            return (yield from self._skip(self._malformed(str(exc)), name))
        except Truncated:
            self.end_call({}, self._truncated_error(name, where), name)
            return False

    def _types(self, schema: JSONSchema | None, key: str, tag: str) -> frozenset[str]:
        if self._tags.string_attribute:
            flag = _attribute(tag, "string")
            if flag == "true":
                return STRING
            if flag == "false":
                return ANY
        return parameter_types(schema, key)

    def _skip(self, error: str, name: str | None) -> Parse[bool]:
        """Skip a broken call up to its ``</invoke>`` (or the section's end) and report it."""
        try:
            found = yield from self.pass_through((self._tags.invoke_end, self._tags.end), None)
        except Truncated:
            self.end_call({}, error, name)
            return False
        self.end_call({}, error, name)
        return found == self._tags.invoke_end

    def _no_call(self) -> str:
        tags = self._tags
        return self._malformed(f'the {tags.start} section holds no {tags.invoke} name="..."> call')

    def _unexpected(self, wanted: str, found: str) -> str:
        return f"expected {wanted} but found {found!r}"

    def _malformed(self, problem: str) -> str:
        return f"Malformed tool call: {problem}. Write each call as:\n{self._tags.example}"

    def _truncated_error(self, name: str | None, where: str) -> str:
        call = f"The tool call {name!r}" if name else "The tool call"
        return (
            f"{call} was cut off: the output ended inside {where}. Write the whole call "
            f"again, closing it with {self._tags.invoke_end} and {self._tags.end}."
        )


def _attribute(tag_text: str, key: str) -> str | None:
    attributes = parse_attributes(tag_text)
    return None if attributes is None else attributes.get(key)


def _dsml(section: str, gap: str = "") -> InvokeTags:
    """DSML tags: ``<｜DSML｜{gap}{name}``, ``gap`` being what follows the marker (V4.1: a
    space)."""
    mark = f"｜DSML｜{gap}"
    return InvokeTags(
        start=f"<{mark}{section}>",
        end=f"</{mark}{section}>",
        invoke=f"<{mark}invoke",
        invoke_end=f"</{mark}invoke>",
        parameter=f"<{mark}parameter",
        parameter_end=f"</{mark}parameter>",
        string_attribute=True,
    )


DEEPSEEK_V32 = InvokeToolSyntax("deepseek_v32", _dsml("function_calls"))
DEEPSEEK_V4 = InvokeToolSyntax("deepseek_v4", _dsml("tool_calls"))
DEEPSEEK_V41 = InvokeToolSyntax("deepseek_v41", _dsml("calls", gap=" "))
