"""Llama 3.1-3.3 prompts with JSON tool calls.

Source: the ``chat_template`` of meta-llama/Llama-3.1-8B-Instruct (vLLM keeps a variant as
``examples/tool_chat_template_llama3.1_json.jinja``), with its defaults: tools in the first
user message (``tools_in_user_message``), ``Environment: ipython`` in the system header when
there are tools, the knowledge cutoff and a date (``26 Jul 2024`` unless given) in the system
message. Tool results are ``ipython`` messages. Llama 3.1 itself takes one call per turn; more
are written as the ``llama3_json`` syntax renders them (``; `` between calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._family_common import (
    FamilyTemplate,
    canonical_assistant,
    split_system,
    to_json,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ToolResultBlock

__all__ = ["EOT", "Llama3Template"]

BOT = "<|begin_of_text|>"
EOT = "<|eot_id|>"


def _header(role: str) -> str:
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n"


@dataclass(frozen=True, slots=True)
class Llama3Template(FamilyTemplate):
    """Llama 3.x Instruct. Reasoning blocks (Llama has none of its own) are kept as
    ``<think>...</think>`` text rather than dropped."""

    date: str = "26 Jul 2024"

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        environment = "Environment: ipython\n" if tools else ""
        out = [
            BOT,
            _header("system"),
            f"{environment}Cutting Knowledge Date: December 2023\nToday Date: {self.date}\n\n",
            f"{system or ''}{EOT}",
        ]
        return out, start

    @property
    def assistant_end(self) -> str:
        return EOT

    def _generation_prompt(self, thinking: bool) -> str:
        return _header("assistant")

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        first_user = True
        syntax = get_tool_syntax("llama3_json")
        for message in messages[i:]:
            if message.role == "assistant":
                body = canonical_assistant(
                    message,
                    reasoning=lambda text, opened: f"<think>{text}</think>",
                    text=lambda text, parts: text,
                    calls=lambda calls, parts: syntax.render(calls),
                )
                out.append(f"{_header('assistant')}{body}{EOT}")
            elif message.role == "tool":
                for result in message.content:
                    if isinstance(result, ToolResultBlock):
                        out.append(f"{_header('ipython')}{result.content}{EOT}")
            elif message.role == "user" and first_user and tools:
                first_user = False
                listed = "".join(f"{to_json(spec, indent=4)}\n\n" for spec in tools)
                out.append(
                    f"{_header('user')}Given the following functions, please respond with a JSON "
                    "for a function call with its proper arguments that best answers the given "
                    'prompt.\n\nRespond in the format {"name": function name, "parameters": '
                    "dictionary of argument name and its value}.Do not use variables.\n\n"
                    f"{listed}{message.text}{EOT}"
                )
            else:
                first_user = first_user and message.role != "user"
                out.append(f"{_header(message.role)}{message.text}{EOT}")
