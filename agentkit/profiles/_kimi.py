"""Kimi K2 prompts (K2-Instruct-0905, K2-Thinking).

Source: the ``chat_template`` of moonshotai/Kimi-K2-Thinking (llama.cpp keeps a copy as
``models/templates/moonshotai-Kimi-K2-Thinking.jinja``)::

    <|im_system|>tool_declare<|im_middle|>[tools as JSON]<|im_end|>
    <|im_system|>system<|im_middle|>...<|im_end|>
    <|im_user|>user<|im_middle|>...<|im_end|>
    <|im_assistant|>assistant<|im_middle|><think>...</think>content
        <|tool_calls_section_begin|>...<|tool_calls_section_end|><|im_end|>
    <|im_system|>tool<|im_middle|>## Return of functions.NAME:IDX\\n...<|im_end|>

(no newlines between messages; the line breaks above are only for this page).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._family_common import (
    FamilyTemplate,
    canonical_assistant,
    preceding_calls,
    split_system,
    to_json,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ToolCallBlock, ToolResultBlock

__all__ = ["IM_END", "KimiK2Template"]

IM_END = "<|im_end|>"
_SYSTEM = "<|im_system|>"
_USER = "<|im_user|>"
_ASSISTANT = "<|im_assistant|>"
_MIDDLE = "<|im_middle|>"
_ID = re.compile(r"functions\.(.+):\d+")
DEFAULT_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."
"""K2-Thinking's and K2-Instruct-0905's default (the first K2-Instruct said "You are a helpful
assistant")."""


def kimi_ids(calls: Sequence[ToolCallBlock]) -> dict[str, str]:
    """Each call's id as Kimi writes it: its own when already ``functions.NAME:IDX``, else
    ``functions.NAME:k`` with ``k`` the call's position in its message."""
    ids: dict[str, str] = {}
    for k, call in enumerate(calls):
        match = _ID.fullmatch(call.id)
        ok = match is not None and match.group(1) == call.name
        ids[call.id] = call.id if ok else f"functions.{call.name}:{k}"
    return ids


@dataclass(frozen=True, slots=True)
class KimiK2Template(FamilyTemplate):
    """Kimi K2. With ``thinking`` (K2-Thinking) a turn without reasoning is written with an
    empty ``<think></think>``, as the template writes history turns; without it (K2-Instruct)
    reasoning blocks, if any, still go in ``<think>...</think>``.

    The template drops reasoning before the last plain assistant turn; here that is the replay
    policy's decision.
    """

    thinking: bool = True

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        out: list[str] = []
        if tools:
            out.append(f"{_SYSTEM}tool_declare{_MIDDLE}{to_json(list(tools))}{IM_END}")
        system, _ = split_system(messages)
        if system is None:
            out.append(f"{_SYSTEM}system{_MIDDLE}{DEFAULT_SYSTEM}{IM_END}")
        return out, 0

    @property
    def assistant_end(self) -> str:
        return IM_END

    def _generation_prompt(self, thinking: bool) -> str:
        return f"{_ASSISTANT}assistant{_MIDDLE}"

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        for index in range(i, len(messages)):
            message = messages[index]
            if message.role == "assistant":
                out.append(f"{_ASSISTANT}assistant{_MIDDLE}{self._assistant(message)}{IM_END}")
            elif message.role == "tool":
                ids = kimi_ids(preceding_calls(messages, index))
                for result in message.content:
                    if isinstance(result, ToolResultBlock):
                        call_id = ids.get(result.call_id, result.call_id)
                        out.append(
                            f"{_SYSTEM}tool{_MIDDLE}## Return of {call_id}\n"
                            f"{result.content}{IM_END}"
                        )
            elif message.role == "user":
                out.append(f"{_USER}user{_MIDDLE}{message.text}{IM_END}")
            else:
                out.append(f"{_SYSTEM}system{_MIDDLE}{message.text}{IM_END}")

    def _assistant(self, message: Message) -> str:
        syntax = get_tool_syntax("kimi_k2")
        ids = kimi_ids(message.tool_calls)

        def calls(pending: list[ToolCallBlock], parts: list[str]) -> str:
            return syntax.render([c.model_copy(update={"id": ids[c.id]}) for c in pending])

        body = canonical_assistant(
            message,
            reasoning=lambda text, opened: f"<think>{text}</think>",
            text=lambda text, parts: text,
            calls=calls,
        )
        if (
            message.raw is None
            and self.thinking
            and not any(b.type == "reasoning" for b in message.content)
        ):
            body = "<think></think>" + body
        return body
