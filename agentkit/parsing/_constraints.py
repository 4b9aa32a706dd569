"""Structured-output constraints that make a model emit tool calls in its own format.

``tool_choice="required"`` or a named tool must hold even for a small model, so the request
carries a grammar: vLLM's structured outputs with an xgrammar *structural tag*, a JSON
document that composes constant strings, JSON-schema-typed arguments (in JSON or in one of the
XML argument styles) and free text. The grammar admits exactly what the format's parser reads:
optional reasoning first, then one section of calls (one call for a named tool, one or more
for ``required``), and nothing after it.

A typed final answer (``Agent(output_type=T)``) uses the same grammar with one more
alternative after the reasoning: the section of calls, or a JSON value matching ``T``'s
schema and nothing after it. The model still thinks freely and may still call tools; only what
it writes as its answer is held to the schema.

Each tool format's shape is written down here, next to the others, from the same canonical
renderings the parsers and ``ToolSyntax.render`` use; a test instantiates every shape and
parses the result back with the format's own parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentkit.errors import ConfigurationError
from agentkit.parsing._base import JSONSchema, ReasoningSyntax, ToolSyntax

__all__ = ["ArgumentStyle", "CallShape", "call_shape", "tool_call_constraint"]

ArgumentStyle = Literal[
    "json", "qwen_xml", "minimax_xml", "deepseek_xml", "deepseek_v4_1_xml", "glm_xml"
]
"""How a call's arguments are written: a JSON object, or one of the XML parameter styles
xgrammar knows (``<parameter=k>v</parameter>``, ``<parameter name="k">v</parameter>``,
DSML ``<｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>``, DeepSeek-V4.1's
DSML ``<｜DSML｜ parameter name="k" string="true">v</｜DSML｜ parameter>`` (xgrammar >= 0.2.8),
``<arg_key>k</arg_key><arg_value>v</arg_value>``)."""

Format = dict[str, Any]
"""One node of an xgrammar structural tag (``{"type": "sequence", "elements": [...]}``...)."""


@dataclass(frozen=True, slots=True)
class CallShape:
    """How one format writes a section of calls.

    A section is ``section_begin``, calls joined by ``separator``, ``section_end``; a call is
    ``begin`` (``{name}`` replaced by the tool's name), an optional call index (Kimi K2's
    ``functions.NAME:IDX``, Mistral v11's ``[CALL_ID]ID``: ``index_pattern``) followed by
    ``after_index``, the arguments in ``style``, ``end``.
    """

    begin: str
    end: str
    style: ArgumentStyle = "json"
    section_begin: str = ""
    section_end: str = ""
    separator: str = ""
    indexed: bool = False
    after_index: str = ""
    index_pattern: str = "[0-9]{1,3}"


_DEEPSEEK_SECTION = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")

_SHAPES: dict[str, CallShape] = {
    "hermes": CallShape(
        begin='<tool_call>\n{{"name": "{name}", "arguments": ',
        end="}\n</tool_call>",
        separator="\n",
    ),
    "qwen3_coder": CallShape(
        begin="<tool_call>\n<function={name}>\n",
        end="</function>\n</tool_call>",
        style="qwen_xml",
        separator="\n",
    ),
    "deepseek_v3": CallShape(
        begin="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n",
        end="\n```<｜tool▁call▁end｜>",
        section_begin=_DEEPSEEK_SECTION[0],
        section_end=_DEEPSEEK_SECTION[1],
        separator="\n",
    ),
    "deepseek_v31": CallShape(
        begin="<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>",
        end="<｜tool▁call▁end｜>",
        section_begin=_DEEPSEEK_SECTION[0],
        section_end=_DEEPSEEK_SECTION[1],
    ),
    "deepseek_v32": CallShape(
        begin='<｜DSML｜invoke name="{name}">\n',
        end="</｜DSML｜invoke>\n",
        style="deepseek_xml",
        section_begin="<｜DSML｜function_calls>\n",
        section_end="</｜DSML｜function_calls>",
    ),
    "deepseek_v4": CallShape(
        begin='<｜DSML｜invoke name="{name}">\n',
        end="</｜DSML｜invoke>\n",
        style="deepseek_xml",
        section_begin="<｜DSML｜tool_calls>\n",
        section_end="</｜DSML｜tool_calls>",
    ),
    "deepseek_v41": CallShape(
        begin='<｜DSML｜ invoke name="{name}">\n',
        end="</｜DSML｜ invoke>\n",
        style="deepseek_v4_1_xml",
        section_begin="<｜DSML｜ calls>\n",
        section_end="</｜DSML｜ calls>",
    ),
    "glm45": CallShape(
        begin="<tool_call>{name}\n", end="</tool_call>", style="glm_xml", separator="\n"
    ),
    "glm47": CallShape(begin="<tool_call>{name}", end="</tool_call>", style="glm_xml"),
    "kimi_k2": CallShape(
        begin="<|tool_call_begin|>functions.{name}:",
        end="<|tool_call_end|>",
        section_begin="<|tool_calls_section_begin|>",
        section_end="<|tool_calls_section_end|>",
        indexed=True,
        after_index="<|tool_call_argument_begin|>",
    ),
    "llama3_json": CallShape(begin='{{"name": "{name}", "parameters": ', end="}", separator="; "),
    "minimax_m2": CallShape(
        begin='<invoke name="{name}">\n',
        end="</invoke>\n",
        style="minimax_xml",
        section_begin="<minimax:tool_call>\n",
        section_end="</minimax:tool_call>",
    ),
    "mistral": CallShape(begin="[TOOL_CALLS]{name}[ARGS]", end=""),
    # v11 models write their own call id (nine letters and digits); rendered history may carry
    # other ids, so the pattern admits what the parser reads, bounded.
    "mistral_v11": CallShape(
        begin="[TOOL_CALLS]{name}[CALL_ID]",
        end="",
        indexed=True,
        after_index="[ARGS]",
        index_pattern="[a-zA-Z0-9_-]{1,64}",
    ),
    "mistral_legacy": CallShape(
        begin='{{"name": "{name}", "arguments": ',
        end="}",
        section_begin="[TOOL_CALLS] [",
        section_end="]",
        separator=", ",
    ),
    "nemotron_deci": CallShape(
        begin='{{"name": "{name}", "arguments": ',
        end="}",
        section_begin="<TOOLCALL>[",
        section_end="]</TOOLCALL>",
        separator=", ",
    ),
}


def call_shape(syntax: ToolSyntax) -> CallShape:
    """The shape of ``syntax``'s calls; a :class:`ConfigurationError` for formats that cannot
    be constrained this way (pythonic calls have no fixed argument encoding)."""
    shape = _SHAPES.get(syntax.name)
    if shape is None:
        raise ConfigurationError(
            f"tool_choice 'required', a named tool, or a constrained typed answer next to "
            f"tools needs a grammar for the {syntax.name!r} tool format, and agentkit has none; "
            f"formats with one: {', '.join(sorted(_SHAPES))}"
        )
    return shape


def tool_call_constraint(
    syntax: ToolSyntax | None,
    tools: Mapping[str, JSONSchema],
    *,
    name: str | None = None,
    reasoning: ReasoningSyntax | None = None,
    answer: JSONSchema | None = None,
    max_whitespace: int | None = 16,
) -> dict[str, Any]:
    """An xgrammar structural tag (for vLLM's ``structured_outputs.structural_tag``) that
    admits optional reasoning, then a section of calls to ``tools`` (name -> JSON schema of
    the arguments): exactly one call of ``name`` when given, otherwise one or more calls.

    ``answer`` (the JSON schema of a typed final answer) adds a second way to finish: after
    the reasoning, either the section of calls or one JSON value matching ``answer``, and
    nothing after either. Without tools (or without a tool ``syntax``) only the answer is
    admitted. A named tool forces a call, so it takes no ``answer``.

    ``max_whitespace`` bounds runs of whitespace inside arguments and the answer, so that a
    weak model cannot spend its whole budget on indentation.
    """
    if name is not None and answer is not None:
        raise ConfigurationError("a named tool call leaves no room for a typed answer")
    if answer is None and (syntax is None or not tools):
        raise ConfigurationError("a required tool call needs at least one tool")
    if name is not None and name not in tools:
        raise ConfigurationError(f"tool_choice names {name!r}, which is not one of the tools")
    alternatives: list[list[Format]] = []
    if syntax is not None and tools:
        alternatives.append(_section(call_shape(syntax), tools, name, max_whitespace))
    if answer is not None:
        alternatives.append([_json(answer, "json", max_whitespace)])
    if len(alternatives) == 1:
        body = alternatives[0]
    else:
        options = [
            {"type": "sequence", "elements": a} if len(a) > 1 else a[0] for a in alternatives
        ]
        body = [{"type": "or", "elements": options}]
    elements = [*_reasoning(reasoning), *body]
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}


def _section(
    shape: CallShape,
    tools: Mapping[str, JSONSchema],
    name: str | None,
    max_whitespace: int | None,
) -> list[Format]:
    """One section of calls: exactly one call of ``name``, or one or more of ``tools``."""
    if name is not None:
        calls: Format = _call(shape, name, tools[name], max_whitespace)
    else:
        calls = {
            "type": "tags_with_separator",
            "tags": [_call(shape, n, s, max_whitespace) for n, s in tools.items()],
            "separator": shape.separator,
            "at_least_one": True,
            "stop_after_first": False,
        }
    return [*_const(shape.section_begin), calls, *_const(shape.section_end)]


def _json(schema: JSONSchema, style: ArgumentStyle, max_whitespace: int | None) -> Format:
    node: Format = {"type": "json_schema", "json_schema": dict(schema), "style": style}
    if max_whitespace is not None:
        node["max_whitespace_cnt"] = max_whitespace
    return node


def _call(shape: CallShape, name: str, schema: JSONSchema, max_whitespace: int | None) -> Format:
    arguments = _json(_object_schema(schema), shape.style, max_whitespace)
    content = arguments
    if shape.indexed:
        content = {
            "type": "sequence",
            "elements": [
                {"type": "regex", "pattern": shape.index_pattern},
                *_const(shape.after_index),
                arguments,
            ],
        }
    return {
        "type": "tag",
        "begin": shape.begin.format(name=name),
        "content": content,
        "end": shape.end,
    }


def _object_schema(schema: JSONSchema) -> dict[str, Any]:
    """Arguments are always an object: a tool without parameters takes ``{}``."""
    if not schema:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    return dict(schema)


def _reasoning(reasoning: ReasoningSyntax | None) -> list[Format]:
    """Optional reasoning before the calls (required when the prompt already opened it)."""
    if reasoning is None:
        return []
    block: Format = {
        "type": "tag",
        "begin": "" if reasoning.starts_inside else reasoning.start,
        "content": {"type": "any_text", "excludes": [reasoning.end]},
        "end": reasoning.end,
    }
    if not reasoning.starts_inside:
        block = {"type": "optional", "content": block}
    return [block, {"type": "regex", "pattern": r"\s{0,4}"}]


def _const(value: str) -> list[Format]:
    return [{"type": "const_string", "value": value}] if value else []
