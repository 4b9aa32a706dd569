"""Kimi K2 prompts (K2-Instruct-0905, K2-Thinking).

Source: the ``chat_template`` of moonshotai/Kimi-K2-Thinking (llama.cpp keeps a copy as
``models/templates/moonshotai-Kimi-K2-Thinking.jinja``)::

    <|im_system|>tool_declare<|im_middle|>[tools as JSON]<|im_end|>
    <|im_system|>system<|im_middle|>...<|im_end|>
    <|im_user|>user<|im_middle|>...<|im_end|>
    <|im_assistant|>assistant<|im_middle|><think>...</think>content
        <|tool_calls_section_begin|>...<|tool_calls_section_end|><|im_end|>
    <|im_system|>NAME<|im_middle|>## Return of functions.NAME:IDX\\n...<|im_end|>

(no newlines between messages; the line breaks above are only for this page). A tool result's
role name is the tool's name, as the template writes a ``tool`` message that carries the
tool's ``name``; ``tool`` when the result has none.

Call ids: the template writes ``tool_call['id']`` as given, and the model was trained on its
own ``functions.NAME:IDX`` ids, ``IDX`` counting the calls of the whole conversation from 0
(its parser reads the function name out of the id). Those ids are replayed as they are. Any
other id (``call_...``, ``toolu_...`` from a client or another model) is written as
``functions.NAME:IDX`` with ``IDX`` the call's position among all calls of the conversation,
in the call and in its result alike: a deliberate difference from the template, which would
put the foreign id into the prompt (and Kimi models imitate it and lose the call format).
"""

from __future__ import annotations

import re
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


def kimi_ids(calls: Sequence[ToolCallBlock], first: int = 0) -> dict[str, str]:
    """Each call's id as Kimi writes it: its own when already ``functions.NAME:IDX``, else
    ``functions.NAME:N`` with ``N = first + k`` for the call at position ``k`` of its message
    (``first``: the calls of the conversation before this message)."""
    ids: dict[str, str] = {}
    for k, call in enumerate(calls):
        ids[call.id] = call.id if _is_kimi_id(call) else f"functions.{call.name}:{first + k}"
    return ids


def _is_kimi_id(call: ToolCallBlock) -> bool:
    match = _ID.fullmatch(call.id)
    return match is not None and match.group(1) == call.name


def _message_ids(messages: Sequence[Message], index: int) -> dict[str, str]:
    """The ids of the calls of ``messages[index]`` as Kimi writes them. Counting the calls
    before it (a walk of the history) happens only when one of its ids is not Kimi's own."""
    calls = messages[index].tool_calls
    if all(_is_kimi_id(call) for call in calls):
        return {call.id: call.id for call in calls}
    first = sum(len(m.tool_calls) for m in messages[:index] if m.role == "assistant")
    return kimi_ids(calls, first)


def _calling_message(messages: Sequence[Message], i: int) -> int | None:
    """The index of the assistant message whose calls the run of tool messages at ``i``
    answers (``None`` without one)."""
    j = i - 1
    while j >= 0 and messages[j].role == "tool":
        j -= 1
    return j if j >= 0 and messages[j].role == "assistant" else None


@dataclass(frozen=True, slots=True)
class KimiK2Template(FamilyTemplate):
    """Kimi K2. With ``thinking`` (K2-Thinking) a turn without reasoning is written with an
    empty ``<think></think>``, as the template writes history turns; without it (K2-Instruct)
    reasoning blocks, if any, still go in ``<think>...</think>``.

    The template drops reasoning up to the last assistant message without calls; here that is
    the replay policy's decision (``drop_on_plain_turns``: before the last user message, which
    differs only after a task interrupted before its answer).
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
                body = self._assistant(message, _message_ids(messages, index))
                out.append(f"{_ASSISTANT}assistant{_MIDDLE}{body}{IM_END}")
            elif message.role == "tool":
                calling = _calling_message(messages, index)
                ids = {} if calling is None else _message_ids(messages, calling)
                for result in message.content:
                    if isinstance(result, ToolResultBlock):
                        call_id = ids.get(result.call_id, result.call_id)
                        out.append(
                            f"{_SYSTEM}{result.name or 'tool'}{_MIDDLE}## Return of {call_id}\n"
                            f"{result.content}{IM_END}"
                        )
            elif message.role == "user":
                out.append(f"{_USER}user{_MIDDLE}{message.text}{IM_END}")
            else:
                out.append(f"{_SYSTEM}system{_MIDDLE}{message.text}{IM_END}")

    def _assistant(self, message: Message, ids: dict[str, str]) -> str:
        syntax = get_tool_syntax("kimi_k2")

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
