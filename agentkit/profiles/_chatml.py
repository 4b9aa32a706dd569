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
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["ChatMLTemplate", "hermes_tools_section", "qwen3_coder_tools_section"]

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


def _xml_function(spec: ToolSpec) -> str:
    function = spec.get("function", spec)
    parts = [f"<function>\n<name>{function['name']}</name>"]
    if function.get("description"):
        parts.append(f"<description>{function['description'].strip()}</description>")
    parts.append("<parameters>")
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required", ()))
    for key, schema in (parameters.get("properties") or {}).items():
        parts.append(f"<parameter>\n<name>{key}</name>")
        if "type" in schema:
            parts.append(f"<type>{schema['type']}</type>")
        if schema.get("description"):
            parts.append(f"<description>{schema['description'].strip()}</description>")
        extra = {k: v for k, v in schema.items() if k not in {"type", "description", "title"}}
        if extra:
            parts.append(f"<schema>{json.dumps(extra, ensure_ascii=False)}</schema>")
        if key in required:
            parts.append("<required>true</required>")
        parts.append("</parameter>")
    parts.append("</parameters>\n</function>")
    return "\n".join(parts)


def qwen3_coder_tools_section(tools: Sequence[ToolSpec]) -> str:
    """The tool instructions of Qwen3-Coder (XML function signatures, XML calls)."""
    functions = "\n".join(_xml_function(spec) for spec in tools)
    return (
        "# Tools\n\nYou have access to the following functions:\n\n"
        f"<tools>\n{functions}\n</tools>\n\n"
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


@dataclass(frozen=True, slots=True)
class ChatMLTemplate:
    """ChatML with Qwen-style reasoning and tool traffic.

    Assistant messages generated here (every block has ``raw``) are replayed verbatim; others
    are rendered canonically: ``<think>\\n...\\n</think>\\n\\n`` for reasoning, the tool
    syntax's own rendering for calls. Tool results go back as a user turn of
    ``<tool_response>`` blocks, in call order.
    """

    tool_syntax: ToolSyntax | None
    tools_section: Callable[[Sequence[ToolSpec]], str] = hermes_tools_section

    def render(
        self,
        transcript: Transcript,
        tools: Sequence[ToolSpec],
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        out: list[str] = []
        messages = list(transcript.messages)
        system = ""
        if messages and messages[0].role == "system":
            system = messages.pop(0).text
        if tools:
            system = (
                f"{system}\n\n{self.tools_section(tools)}" if system else self.tools_section(tools)
            )
        if system:
            out.append(f"{IM_START}system\n{system}{IM_END}\n")
        self._messages(messages, out)
        if add_generation_prompt:
            out.append(f"{IM_START}assistant\n")
        return "".join(out)

    @property
    def assistant_end(self) -> str:
        """What follows an assistant message's content: the stop token and a newline."""
        return f"{IM_END}\n"

    def render_continuation(self, transcript: Transcript, start: int) -> str:
        """The text of ``transcript.messages[start:]`` and the generation prompt, for a prompt
        whose earlier part (up to the end of an assistant message) is already built.

        ``render(t) == render(t_prefix) + raw + assistant_end + render_continuation(t, n)``
        whenever message ``n - 1`` is an assistant message generated here; the cost is
        proportional to the new messages, not to the history.
        """
        out: list[str] = []
        self._messages(transcript.messages[start:], out)
        out.append(f"{IM_START}assistant\n")
        return "".join(out)

    def _messages(self, messages: Sequence[Message], out: list[str]) -> None:
        i = 0
        while i < len(messages):
            message = messages[i]
            if message.role == "tool":
                results: list[ToolResultBlock] = []
                while i < len(messages) and messages[i].role == "tool":
                    results.extend(b for b in messages[i].content if isinstance(b, ToolResultBlock))
                    i += 1
                body = "\n".join(f"<tool_response>\n{r.content}\n</tool_response>" for r in results)
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
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                pending.append(block)
                continue
            if pending:
                parts.append(self._calls(pending, after=parts))
                pending = []
            if isinstance(block, ReasoningBlock):
                parts.append(f"<think>\n{block.text.strip(chr(10))}\n</think>\n\n")
            elif isinstance(block, TextBlock):
                parts.append(block.text)
        if pending:
            parts.append(self._calls(pending, after=parts))
        return "".join(parts)

    def _calls(self, calls: list[ToolCallBlock], *, after: list[str]) -> str:
        if self.tool_syntax is None:
            return ""
        # Qwen's templates put a newline between content and the first call.
        separate = bool(after) and not after[-1].endswith("\n")
        return ("\n" if separate else "") + self.tool_syntax.render(calls)
