"""ChatML prompts as the Qwen family renders them (``<|im_start|>role\\n...<|im_end|>``).

Written in Python rather than as a Jinja template because replay needs the transcript's
block structure: an assistant message produced here is replayed from its exact raw output,
so the next prompt begins with the previous prompt followed by what the model generated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentkit.parsing import ToolSyntax
from agentkit.profiles._family_common import FamilyTemplate, split_system, tool_results
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
)

__all__ = [
    "IM_END",
    "IM_START",
    "ChatMLTemplate",
    "hermes_tools_section",
    "nemotron_tools_section",
    "qwen3_coder_tools_section",
    "xml_call",
    "xml_call_value",
    "xml_calls",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"


def hermes_tools_section(tools: Sequence[ToolSpec]) -> str:
    """The tool instructions Qwen2.5/Qwen3 were trained with (JSON calls in ``<tool_call>``)."""
    lines = "\n".join(json.dumps(spec, ensure_ascii=False) for spec in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def _xml_extra(values: object, handled: set[str]) -> str:
    """Schema keys the signature has no tag for, one ``<key>value</key>`` each, as
    Qwen3-Coder's template writes them (JSON for objects and lists, Python's ``str`` for the
    rest: ``False``, ``3``)."""
    if not isinstance(values, dict):
        return ""
    parts = []
    for key, value in values.items():
        if key in handled:
            continue
        if isinstance(value, (dict, list, tuple)):
            text = json.dumps(value, ensure_ascii=False)
        else:
            text = str(value)
        parts.append(f"\n<{key}>{text}</{key}>")
    return "".join(parts)


def _xml_function(spec: ToolSpec, *, nemotron: bool) -> str:
    function = dict(spec.get("function", spec))
    parts = [f"\n<function>\n<name>{function['name']}</name>"]
    if "description" in function:
        parts.append(f"\n<description>{str(function['description']).strip()}</description>")
    parts.append("\n<parameters>")
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    # Nemotron-3's template writes a parameter's enum right after its description, and the
    # required list after the other schema keys; Qwen3-Coder's writes both where they stand.
    pinned = {"enum"} if nemotron else set()
    if isinstance(properties, dict):
        for key, schema in properties.items():
            parts.append(f"\n<parameter>\n<name>{key}</name>")
            if "type" in schema:
                parts.append(f"\n<type>{schema['type']}</type>")
            if "description" in schema:
                parts.append(f"\n<description>{str(schema['description']).strip()}</description>")
            if nemotron and "enum" in schema:
                parts.append(f"\n<enum>{json.dumps(schema['enum'], ensure_ascii=False)}</enum>")
            parts.append(_xml_extra(schema, {"name", "type", "description", *pinned}))
            parts.append("\n</parameter>")
    if nemotron:
        parts.append(_xml_extra(parameters, {"type", "properties", "required"}))
        if isinstance(parameters, dict) and "required" in parameters:
            required = json.dumps(parameters["required"], ensure_ascii=False)
            parts.append(f"\n<required>{required}</required>")
    else:
        parts.append(_xml_extra(parameters, {"type", "properties"}))
    parts.append("\n</parameters>")
    parts.append(_xml_extra(function, {"type", "name", "description", "parameters"}))
    parts.append("\n</function>")
    return "".join(parts)


_XML_CALL_FORMAT = (
    "If you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n"
    "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...>"
    "</function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with "
    "your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>"
)


def _xml_tools_section(tools: Sequence[ToolSpec], *, nemotron: bool) -> str:
    functions = "".join(_xml_function(spec, nemotron=nemotron) for spec in tools)
    return (
        "# Tools\n\nYou have access to the following functions:\n\n"
        f"<tools>{functions}\n</tools>\n\n{_XML_CALL_FORMAT}"
    )


def qwen3_coder_tools_section(tools: Sequence[ToolSpec]) -> str:
    """The tool instructions of Qwen3-Coder (XML function signatures, XML calls)."""
    return _xml_tools_section(tools, nemotron=False)


def nemotron_tools_section(tools: Sequence[ToolSpec]) -> str:
    """Nemotron-3's tool instructions: Qwen3-Coder's, with each parameter's ``enum`` after its
    description and the ``required`` list last."""
    return _xml_tools_section(tools, nemotron=True)


def xml_call_value(value: object) -> str:
    """An argument value as Qwen3-Coder's and Nemotron-3's templates write it: a string
    verbatim, an object or list as JSON, anything else as Python's ``str`` (``True``, ``None``,
    ``3``, ``1.5``), which the ``qwen3_coder`` parser reads back by the tool's schema."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def xml_call(call: ToolCallBlock) -> str:
    """One call in the XML form, as the templates write it (without a trailing newline)."""
    parts = [f"<tool_call>\n<function={call.name}>\n"]
    for key, value in call.arguments.items():
        parts.append(f"<parameter={key}>\n{xml_call_value(value)}\n</parameter>\n")
    parts.append("</function>\n</tool_call>")
    return "".join(parts)


def xml_calls(calls: Sequence[ToolCallBlock]) -> str:
    """Consecutive calls as Qwen3-Coder's template writes them (one newline between)."""
    return "\n".join(xml_call(call) for call in calls)


@dataclass(frozen=True, slots=True)
class ChatMLTemplate(FamilyTemplate):
    """ChatML with Qwen-style reasoning and tool traffic.

    Assistant messages generated here (every block has ``raw``) are replayed verbatim; others
    are rendered canonically: ``<think>\\n...\\n</think>\\n\\n`` for reasoning, the tool
    syntax's own rendering for calls. Tool results go back as a user turn of
    ``<tool_response>`` blocks, in call order.
    """

    tool_syntax: ToolSyntax | None
    tools_section: Callable[[Sequence[ToolSpec]], str] = hermes_tools_section
    default_system: str = ""
    """The system message the model's template writes when the transcript has none."""
    default_tools_system: str = ""
    """The same, only when there are tools (Qwen3-Coder)."""
    call_gap: str = "\n"
    """What separates text from the calls after it (trailing newlines of the text replaced)."""
    response_end: str = ""
    """What follows each ``</tool_response>`` (Qwen3-Coder: a newline); without it, the
    responses are joined by newlines."""
    thinking_off: str = ""
    """What follows the generation prompt when thinking is turned off (Qwen3: an empty
    ``<think>`` block, as its template writes with ``enable_thinking=False``)."""
    write_reasoning: bool = True
    """``False``: reasoning blocks are left out of the prompt (Qwen3-Coder, which does not
    reason: its template ignores ``reasoning_content``, so reasoning another model wrote earlier
    in the conversation is not shown to it)."""
    render_calls: Callable[[Sequence[ToolCallBlock]], str] | None = None
    """How a run of calls is written where the template writes them differently from the tool
    syntax's own rendering (Qwen3-Coder: Python's ``True``/``None``); ``None``: the syntax's."""

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        out: list[str] = []
        system, start = split_system(messages)
        if system is None:
            system = self.default_system or (self.default_tools_system if tools else "")
        if tools:
            system = (
                f"{system}\n\n{self.tools_section(tools)}" if system else self.tools_section(tools)
            )
        if system:
            out.append(f"{IM_START}system\n{system}{IM_END}\n")
        return out, start

    def _generation_prompt(self, thinking: bool) -> str:
        return f"{IM_START}assistant\n" + ("" if thinking else self.thinking_off)

    @property
    def assistant_end(self) -> str:
        """What follows an assistant message's content: the stop token and a newline."""
        return f"{IM_END}\n"

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        while i < len(messages):
            message = messages[i]
            if message.role == "tool":
                results, i = tool_results(messages, i)
                responses = [f"<tool_response>\n{r.content}\n</tool_response>" for r in results]
                if self.response_end:
                    body = "".join(r + self.response_end for r in responses)
                else:
                    body = "\n".join(responses)
                out.append(f"{IM_START}user\n{body}{IM_END}\n")
                continue
            if message.role == "assistant":
                out.append(f"{IM_START}assistant\n{self._assistant(message)}{self.assistant_end}")
            else:
                out.append(f"{IM_START}{message.role}\n{message.text}{IM_END}\n")
            i += 1

    def _assistant(self, message: Message) -> str:
        raw = message.raw
        if raw is not None:
            return raw
        parts: list[str] = []
        pending: list[ToolCallBlock] = []
        after_text = False
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                pending.append(block)
                continue
            if pending:
                parts.append(self._calls(pending, parts, after_text))
                pending = []
            after_text = isinstance(block, TextBlock)
            if isinstance(block, ReasoningBlock):
                if self.write_reasoning:
                    parts.append(f"<think>\n{block.text.strip(chr(10))}\n</think>\n\n")
            elif isinstance(block, TextBlock):
                parts.append(block.text)
        if pending:
            parts.append(self._calls(pending, parts, after_text))
        return "".join(parts)

    def _calls(self, calls: list[ToolCallBlock], parts: list[str], after_text: bool) -> str:
        if self.tool_syntax is None:
            return ""
        # Qwen's templates separate content from the first call (Qwen3: one newline,
        # Qwen3-Coder: the trimmed content, then two).
        if after_text and parts and parts[-1].strip():
            parts[-1] = parts[-1].rstrip("\n") + self.call_gap
        if self.render_calls is not None:
            return self.render_calls(calls)
        return self.tool_syntax.render(calls)
