"""Mistral prompts for tokenizers v7 and later (Mistral Small 3.1+, Magistral, Devstral).

Source: mistral-common's v7/v11 instruct encoding, as the published templates render it (llama.cpp
keeps ``models/templates/mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja``)::

    <s>[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS]
    [INST]...[/INST]answer</s>[INST]...[/INST][TOOL_CALLS]NAME[ARGS]{...}</s>
    [TOOL_RESULTS]...[/TOOL_RESULTS]answer</s>

Deviation: mistral-common puts ``[AVAILABLE_TOOLS]`` before the *last* user message, which
moves it every turn; here it stays before the first, so the prompt stays prefix-stable.
Reasoning (Magistral) is ``[THINK]...[/THINK]``.
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

__all__ = ["EOS", "MistralTemplate"]

EOS = "</s>"


@dataclass(frozen=True, slots=True)
class MistralTemplate(FamilyTemplate):
    """Mistral with ``[TOOL_CALLS]NAME[ARGS]{json}`` calls (tokenizer v11+)."""

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        out = ["<s>"]
        if system is not None:
            out.append(f"[SYSTEM_PROMPT]{system}[/SYSTEM_PROMPT]")
        if tools:
            out.append(f"[AVAILABLE_TOOLS]{to_json(list(tools))}[/AVAILABLE_TOOLS]")
        return out, start

    @property
    def assistant_end(self) -> str:
        return EOS

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        syntax = get_tool_syntax("mistral")
        for message in messages[i:]:
            if message.role == "assistant":
                body = canonical_assistant(
                    message,
                    reasoning=lambda text, opened: f"[THINK]{text}[/THINK]",
                    text=lambda text, parts: text,
                    calls=lambda calls, parts: syntax.render(calls),
                )
                out.append(body + EOS)
            elif message.role == "tool":
                out.extend(
                    f"[TOOL_RESULTS]{r.content}[/TOOL_RESULTS]"
                    for r in message.content
                    if isinstance(r, ToolResultBlock)
                )
            elif message.role == "user":
                out.append(f"[INST]{message.text}[/INST]")
            else:
                out.append(f"[SYSTEM_PROMPT]{message.text}[/SYSTEM_PROMPT]")
