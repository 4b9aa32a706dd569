"""Llama 3.1-3.3 prompts with JSON tool calls.

Reference: the ``chat_template`` of meta-llama/Llama-3.1-8B-Instruct (llama.cpp keeps it as
``models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja``), with its defaults: tools in the
first user message (``tools_in_user_message``), ``Environment: ipython`` in the system header
when there are tools, the knowledge cutoff and a date (``26 Jul 2024`` unless given, the
template's ``date_string``) in the system message. Messages are trimmed, as the template trims
them. A call is written as the template writes it, ``{"name": ..., "parameters": ...}`` alone
in its message (the template drops a tool-call message's text); a tool result is an ``ipython``
message holding the output as a JSON string (the template's ``tojson``: a string is iterable).

The template takes one call per message and raises on more; agentkit writes more as the
``llama3_json`` syntax renders them (``; `` between calls, the separator vLLM's
``llama3_json`` tool parser splits on). Reasoning blocks (Llama writes none; they come from
other models' turns) are kept as ``<think>...</think>`` text where they stand rather than
dropped.

vLLM's ``examples/tool_chat_template_llama3.1_json.jinja`` differs from the model's template,
which is followed here: it writes today's date (``strftime_now``), a default system message
when tools come without one, a space in ``value}. Do not use variables.`` and tool results as
``{"output": ...}``.
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


def _text(text: str, parts: list[str]) -> str:
    return text


def _no_text(text: str, parts: list[str]) -> str:
    """A call message's text: the template writes the call alone."""
    return ""


@dataclass(frozen=True, slots=True)
class Llama3Template(FamilyTemplate):
    """Llama 3.x Instruct. ``date`` is the template's ``date_string`` (its default unless
    given)."""

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
            f"{(system or '').strip()}{EOT}",
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
                    text=_no_text if message.tool_calls else _text,
                    calls=lambda calls, parts: syntax.render(calls),
                )
                if message.raw is None:
                    body = body.strip()
                out.append(f"{_header('assistant')}{body}{EOT}")
            elif message.role == "tool":
                for result in message.content:
                    if isinstance(result, ToolResultBlock):
                        out.append(f"{_header('ipython')}{to_json(result.content)}{EOT}")
            elif message.role == "user" and first_user and tools:
                first_user = False
                listed = "".join(f"{to_json(spec, indent=4)}\n\n" for spec in tools)
                out.append(
                    f"{_header('user')}Given the following functions, please respond with a JSON "
                    "for a function call with its proper arguments that best answers the given "
                    'prompt.\n\nRespond in the format {"name": function name, "parameters": '
                    "dictionary of argument name and its value}.Do not use variables.\n\n"
                    f"{listed}{message.text.strip()}{EOT}"
                )
            else:
                first_user = first_user and message.role != "user"
                out.append(f"{_header(message.role)}{message.text.strip()}{EOT}")
