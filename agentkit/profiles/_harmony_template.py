"""gpt-oss prompts in OpenAI's Harmony format.

Source: openai/gpt-oss-120b's ``chat_template.jinja`` (llama.cpp has carried a copy) and the
Harmony guide::

    <|start|>system<|message|>You are ChatGPT, ...# Valid channels: ...<|end|>
    <|start|>developer<|message|># Instructions\\n\\n...\\n\\n# Tools\\n\\n## functions\\n\\n
        namespace functions { ... } // namespace functions<|end|>
    <|start|>user<|message|>...<|end|>
    <|start|>assistant<|channel|>analysis<|message|>...<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json
        <|message|>{...}<|call|>
    <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>...<|end|>
    <|start|>assistant

Stop tokens and replay. The model ends a turn with ``<|call|>`` (after a call) or
``<|return|>`` (after a final answer); the template's history writes a final answer with
``<|end|>``. Replay here is exact instead: an assistant turn is ``<|start|>assistant`` + the
model's raw output, *including* its terminator, so :attr:`HarmonyTemplate.assistant_end` is empty
and the engine must keep special tokens in the text (Harmony's markers are special tokens).
A canonical turn (no raw) is :func:`agentkit.parsing.harmony.render` with a final
``<|return|>`` turned into the template's ``<|end|>``. The template also drops analysis messages
before the last final answer: that is the replay policy's decision here.

Unconfirmed details: the date line (the template uses ``strftime_now``; here it is fixed, so
prompts stay prefix-stable across days) and the TypeScript rendering of schemas beyond strings,
numbers, booleans, enums, arrays and nested objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit.parsing import harmony
from agentkit.profiles._family_common import FamilyTemplate, function_of, split_system
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ToolResultBlock

__all__ = ["HARMONY_STOPS", "HarmonyTemplate", "typescript_namespace"]

HARMONY_STOPS = ("<|return|>", "<|call|>")
_START = "<|start|>"
_END = "<|end|>"
_RETURN = "<|return|>"
_CALL = "<|call|>"


def _ts_type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(_ts_type(s) for s in schema[union])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}) for k in kind)
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        items = schema.get("items")
        return f"{_ts_type(items)}[]" if isinstance(items, Mapping) else "any[]"
    if kind == "object" and schema.get("properties"):
        return "{\n" + _ts_fields(schema) + "}"
    return "any"


def _ts_fields(schema: Mapping[str, Any]) -> str:
    required = set(schema.get("required") or ())
    lines: list[str] = []
    for key, spec in (schema.get("properties") or {}).items():
        if spec.get("description"):
            lines.append(f"// {spec['description']}\n")
        optional = "" if key in required else "?"
        default = ""
        if "default" in spec:
            value = spec["default"]
            # Enum defaults are written bare (``// default: celsius``), others as JSON.
            shown = value if "enum" in spec else json.dumps(value, ensure_ascii=False)
            default = f", // default: {shown}"
            lines.append(f"{key}{optional}: {_ts_type(spec)}{default}\n")
        else:
            lines.append(f"{key}{optional}: {_ts_type(spec)},\n")
    return "".join(lines)


def typescript_namespace(tools: Sequence[ToolSpec]) -> str:
    """The ``functions`` namespace of the developer message."""
    parts = ["namespace functions {\n\n"]
    for spec in tools:
        function = function_of(spec)
        parameters = function.get("parameters") or {}
        parts.append(f"// {function.get('description', '')}\ntype {function['name']} = (")
        if parameters.get("properties"):
            parts.append("_: {\n" + _ts_fields(parameters) + "}) => any;\n\n")
        else:
            parts.append(") => any;\n\n")
    parts.append("} // namespace functions")
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
        out = [f"{_START}system<|message|>{header}{_END}"]
        if system or tools:
            developer = f"# Instructions\n\n{system}\n\n" if system else ""
            if tools:
                developer += f"# Tools\n\n## functions\n\n{typescript_namespace(tools)}"
            out.append(f"{_START}developer<|message|>{developer}{_END}")
        return out, start

    @property
    def assistant_end(self) -> str:
        """Empty: what closes an assistant turn depends on the turn (see
        :meth:`assistant_end_for`)."""
        return ""

    def assistant_end_for(self, message: Message) -> str:
        """What follows a replayed turn's raw output: nothing when the output kept its
        terminator; otherwise (an engine strips the stop token from the text) ``<|call|>``
        after a call and ``<|end|>`` after a final answer, as the template writes history."""
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
                    raw = harmony.render(message.content)
                    if raw.endswith(_RETURN):
                        raw = raw[: -len(_RETURN)] + _END
                else:
                    raw += self.assistant_end_for(message)
                out.append(f"{_START}assistant{raw}")
            elif message.role == "tool":
                for r in message.content:
                    if isinstance(r, ToolResultBlock):
                        out.append(
                            f"{_START}functions.{r.name} to=assistant<|channel|>commentary"
                            f"<|message|>{r.content}{_END}"
                        )
            elif message.role == "user":
                out.append(f"{_START}user<|message|>{message.text}{_END}")
            else:
                out.append(f"{_START}developer<|message|>{message.text}{_END}")
