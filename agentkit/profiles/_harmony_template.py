"""gpt-oss prompts in OpenAI's Harmony format.

Reference: OpenAI's renderer, ``openai-harmony`` (``HarmonyEncodingName.HARMONY_GPT_OSS``,
``render_conversation_for_completion``), which vLLM's gpt-oss serving uses::

    <|start|>system<|message|>You are ChatGPT, ...# Valid channels: ...<|end|>
    <|start|>developer<|message|># Instructions\\n\\n...\\n\\n# Tools\\n\\n## functions\\n\\n
        namespace functions { ... } // namespace functions<|end|>
    <|start|>user<|message|>...<|end|>
    <|start|>assistant<|channel|>analysis<|message|>...<|end|>
    <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
    <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>...<|end|>
    <|start|>assistant

A turn not generated here (no ``raw``) is written as Harmony writes history: one message per
block, a call's recipient in the role part of the header (``assistant to=functions.NAME``) and
its content type ``json``, as the model's own chat template and vLLM pass it; a text block
before a call is a ``commentary`` preamble, any other a ``final`` message ending ``<|end|>``.
Tool schemas become Harmony's TypeScript namespace (:func:`typescript_namespace`, a port of
its ``json_schema_to_typescript``).

Stop tokens and replay. The model ends a turn with ``<|call|>`` (after a call) or
``<|return|>`` (after a final answer); history writes a final answer with ``<|end|>``. A
generated turn is replayed exactly: ``<|start|>assistant`` + the model's raw output (its header
form, ``<|channel|>commentary to=functions.NAME <|constrain|>json``, included) + its terminator,
``<|end|>`` for a final answer: the one token where the next prompt departs from the output.

The model's gpt-oss chat template (``chat_template.jinja``, which llama.cpp and transformers
render) differs from Harmony where Harmony is followed here: it writes only the first call of
an assistant message, JSON-quotes tool outputs, turns a preamble into an ``analysis`` message,
renders nested object schemas in its own way and ends an instructions-only developer message
with ``\\n\\n``. Which reasoning is replayed is the replay policy's decision
(``drop_on_plain_turns``: Harmony's guide, the template and vLLM drop analysis before the last
final answer).

The date line: the reference writes the date it renders on (the template ``strftime_now``,
vLLM today's date unless ``VLLM_SYSTEM_START_DATE``); here it is fixed (:attr:`date`), so
prompts stay prefix-stable across days.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit.profiles._family_common import FamilyTemplate, function_of, split_system
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["HARMONY_STOPS", "HarmonyTemplate", "history_messages", "typescript_namespace"]

HARMONY_STOPS = ("<|return|>", "<|call|>")
_START = "<|start|>"
_END = "<|end|>"
_RETURN = "<|return|>"
_CALL = "<|call|>"
_CHANNEL = "<|channel|>"
_MESSAGE = "<|message|>"


# --- tool schemas as TypeScript (Harmony's json_schema_to_typescript) --------------------------


def _value(value: Any) -> str:
    """A JSON value as serde_json displays it (compact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_enum(schema: Mapping[str, Any]) -> bool:
    enum = schema.get("enum")
    return isinstance(enum, list) and bool(enum)


def _default(schema: Mapping[str, Any], *, bare_enum_string: bool = True) -> str:
    """``default: ...`` as Harmony writes it: a string quoted unless the schema is an enum."""
    value = schema["default"]
    if isinstance(value, str) and not _is_enum(schema):
        return f'default: "{value}"'
    if isinstance(value, str) and bare_enum_string:
        return f"default: {value}"
    return f"default: {_value(value)}"


def _text(schema: Mapping[str, Any], key: str) -> str | None:
    value = schema.get(key)
    return value if isinstance(value, str) else None


def _nullable(variant: Any, rendered: str) -> str:
    if isinstance(variant, Mapping) and variant.get("nullable") is True and "null" not in rendered:
        return f"{rendered} | null"
    return rendered


def _variant_comments(
    variant: Any, skip_description: bool, property_description: str | None, bare: bool
) -> str:
    if not isinstance(variant, Mapping):
        return ""
    comments: list[str] = []
    description = _text(variant, "description")
    if not skip_description and description is not None and description != property_description:
        comments.append(description)
    if "default" in variant:
        comments.append(_default(variant, bare_enum_string=bare))
    return f" // {' '.join(comments)}" if comments else ""


def _typescript(schema: Any, indent: str) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        out = []
        for variant in one_of:
            out.append(f"\n{indent} | ")
            out.append(_nullable(variant, _typescript(variant, f"{indent}   ")))
            out.append(_variant_comments(variant, False, None, bare=False))
        return "".join(out)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if k == "integer" else k for k in kind if isinstance(k, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object(schema, indent)
    if kind == "string":
        enum = schema.get("enum")
        values = [f'"{v}"' for v in enum if isinstance(v, str)] if isinstance(enum, list) else []
        return " | ".join(values) if values else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        return f"{_typescript(schema['items'], indent)}[]" if "items" in schema else "Array<any>"
    return "any"


def _object(schema: Mapping[str, Any], indent: str) -> str:
    out: list[str] = []
    description = _text(schema, "description")
    if description is not None:
        out.append(f"{indent}// {description}\n")
    out.append("{\n")
    properties = schema.get("properties")
    required_list = schema.get("required")
    required = (
        {r for r in required_list if isinstance(r, str)}
        if isinstance(required_list, list)
        else set()
    )
    for key, spec in properties.items() if isinstance(properties, Mapping) else ():
        value: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
        optional = "" if key in required else "?"
        title = _text(value, "title")
        if title is not None:
            out.append(f"{indent}// {title}\n{indent}//\n")
        one_of = value.get("oneOf")
        property_description = _text(value, "description")
        if one_of is None and property_description is not None:
            out.append(f"{indent}// {property_description}\n")
        examples = value.get("examples")
        if isinstance(examples, list) and examples:
            out.append(f"{indent}// Examples:\n")
            out.extend(f'{indent}// - "{e}"\n' for e in examples if isinstance(e, str))
        if isinstance(one_of, list):
            first = one_of[0] if one_of else None
            skip = (
                property_description is not None
                and isinstance(first, Mapping)
                and _text(first, "description") == property_description
            )
            above = not skip and property_description is not None
            if above:
                out.append(f"{indent}// {property_description}\n")
            if "default" in value:
                out.append(f"{indent}// {_default(value)}\n")
            out.append(f"{indent}{key}{optional}:\n")
            for i, variant in enumerate(one_of):
                out.append(f"{indent} | ")
                out.append(_nullable(variant, _typescript(variant, f"{indent}   ")))
                out.append(
                    _variant_comments(variant, i == 0 and above, property_description, bare=True)
                )
                out.append("\n")
            out.append(f"{indent},\n")
            continue
        out.append(f"{indent}{key}{optional}: ")
        out.append(_nullable(value, _typescript(value, f"{indent}    ")))
        out.append(",")
        if one_of is None and "default" in value:
            out.append(f" // {_default(value)}")
        out.append("\n")
    out.append(f"{indent}}}")
    return "".join(out)


def _lines(text: str) -> list[str]:
    """``text`` split as Rust's ``str::lines`` splits it."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def typescript_namespace(tools: Sequence[ToolSpec]) -> str:
    """The ``functions`` section of the developer message, from ``## functions`` to
    ``} // namespace functions``."""
    parts = ["## functions\n", "namespace functions {\n"]
    for spec in tools:
        function = function_of(spec)
        parts.extend(f"// {line}" for line in _lines(str(function.get("description") or "")))
        parameters = function.get("parameters")
        if parameters is None:
            parts.append(f"type {function['name']} = () => any;\n")
        else:
            parts.append(f"type {function['name']} = (_: {_typescript(parameters, '')}) => any;\n")
    parts.append("} // namespace functions")
    return "\n".join(parts)


# --- history ----------------------------------------------------------------------------------


def history_messages(blocks: Sequence[ContentBlock]) -> str:
    """An assistant turn's blocks as Harmony writes them in history: one message per block,
    each with its ``<|start|>assistant`` header (the first one too)."""
    items = list(blocks)
    last_call = max((i for i, b in enumerate(items) if isinstance(b, ToolCallBlock)), default=-1)
    parts: list[str] = []
    for i, block in enumerate(items):
        if isinstance(block, ReasoningBlock):
            parts.append(f"{_START}assistant{_CHANNEL}analysis{_MESSAGE}{block.text}{_END}")
        elif isinstance(block, TextBlock):
            channel = "commentary" if i < last_call else "final"
            parts.append(f"{_START}assistant{_CHANNEL}{channel}{_MESSAGE}{block.text}{_END}")
        elif isinstance(block, ToolCallBlock):
            recipient = block.name if "." in block.name else f"functions.{block.name}"
            arguments = json.dumps(block.arguments, ensure_ascii=False)
            parts.append(
                f"{_START}assistant to={recipient}{_CHANNEL}commentary json{_MESSAGE}"
                f"{arguments}{_CALL}"
            )
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class HarmonyTemplate(FamilyTemplate):
    """gpt-oss (20b, 120b)."""

    reasoning_effort: str = "medium"
    date: str = "2025-08-05"

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        header = (
            "You are ChatGPT, a large language model trained by OpenAI.\n"
            f"Knowledge cutoff: 2024-06\nCurrent date: {self.date}\n\n"
            f"Reasoning: {self.reasoning_effort}\n\n"
            "# Valid channels: analysis, commentary, final. "
            "Channel must be included for every message."
        )
        if tools:
            header += "\nCalls to these tools must go to the commentary channel: 'functions'."
        out = [f"{_START}system{_MESSAGE}{header}{_END}"]
        sections: list[str] = []
        if system:
            sections += ["# Instructions", system]
        if tools:
            sections.append(f"# Tools\n\n{typescript_namespace(tools)}")
        if sections:
            developer = "\n\n".join(sections)
            out.append(f"{_START}developer{_MESSAGE}{developer}{_END}")
        return out, start

    @property
    def assistant_end(self) -> str:
        """Empty: what closes an assistant turn depends on the turn (see
        :meth:`assistant_end_for`)."""
        return ""

    def assistant_end_for(self, message: Message) -> str:
        """What follows a replayed turn's raw output: nothing when the output kept its
        terminator; otherwise (an engine strips the stop token from the text) ``<|call|>``
        after a call and ``<|end|>`` after a final answer, as history writes it."""
        raw = message.raw or ""
        if raw.endswith((_CALL, _RETURN, _END)):
            return ""
        return _CALL if message.tool_calls else _END

    def _generation_prompt(self, thinking: bool) -> str:
        return f"{_START}assistant"

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        for message in messages[i:]:
            if message.role == "assistant":
                raw = message.raw
                if raw is None:
                    out.append(history_messages(message.content))
                else:
                    out.append(f"{_START}assistant{raw}{self.assistant_end_for(message)}")
            elif message.role == "tool":
                for r in message.content:
                    if isinstance(r, ToolResultBlock):
                        out.append(
                            f"{_START}functions.{r.name} to=assistant{_CHANNEL}commentary"
                            f"{_MESSAGE}{r.content}{_END}"
                        )
            elif message.role == "user":
                out.append(f"{_START}user{_MESSAGE}{message.text}{_END}")
            else:
                out.append(f"{_START}developer{_MESSAGE}{message.text}{_END}")
