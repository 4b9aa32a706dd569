"""NVIDIA Nemotron-3 prompts: ChatML whose generation prompt opens the reasoning block.

Source: the chat template of NVIDIA-Nemotron-3-Nano-30B-A3B (llama.cpp keeps it as
``models/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja``). What it does differently
from Qwen's ChatML:

* There is always a system turn, empty when the conversation has no system message and no
  tools. The tool section is Qwen3-Coder's, with each parameter's ``enum`` after its
  description and the ``required`` list last.
* The generation prompt ends with ``<think>\\n`` (the model starts inside its reasoning), or
  with an empty block, ``<think></think>``, when thinking is turned off.
* An assistant turn is ``<think>\\nREASONING\\n</think>\\n`` + its content, or
  ``<think></think>`` + content without reasoning, trimmed; its calls follow the content after
  one newline, each call followed by a newline (``</tool_call>\\n<|im_end|>``).
* By default (``truncate_history_thinking``) reasoning before the last user message is dropped:
  the ``drop_on_plain_turns`` replay policy. An answer without calls whose reasoning it dropped
  keeps the newline that followed ``</think>`` (``<think></think>\\nanswer``), one that never
  had reasoning does not (``<think></think>answer``). A transcript view no longer tells the two
  apart, so this template decides by the mode: with thinking on, every answer the model wrote
  had reasoning (the prompt opened the block), so one without any, before the last user
  message, is one whose reasoning was dropped.

Replay: a message generated in thinking mode (its first block is reasoning) is written as the
prompt's ``<think>\\n`` and its raw output; one generated with thinking off as
``<think></think>`` and its raw output; any other is rendered from its blocks, as the template
renders them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentkit.profiles._chatml import IM_END, IM_START, nemotron_tools_section, xml_call
from agentkit.profiles._family_common import (
    FamilyTemplate,
    opens_with_reasoning,
    split_system,
    tool_results,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = ["Nemotron3Template"]

EMPTY_THINK = "<think></think>"


@dataclass(frozen=True, slots=True)
class Nemotron3Template(FamilyTemplate):
    """Nemotron-3 (Nano): see the module docstring. ``thinking=False`` is the template's
    ``enable_thinking=False`` (also per request: ``render(..., thinking=False)``)."""

    thinking: bool = True

    @property
    def assistant_end(self) -> str:
        return f"{IM_END}\n"

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        parts = [system] if system else []
        if tools:
            parts.append(nemotron_tools_section(tools))
        body = "\n\n".join(parts)
        return [f"{IM_START}system\n{body}{IM_END}\n"], start

    def _generation_prompt(self, thinking: bool) -> str:
        return f"{IM_START}assistant\n" + ("<think>\n" if thinking else EMPTY_THINK)

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        thinking = self.thinking
        last_user = next(
            (j for j in range(len(messages) - 1, -1, -1) if messages[j].role == "user"), -1
        )
        while i < len(messages):
            message = messages[i]
            if message.role == "tool":
                results, i = tool_results(messages, i)
                body = "".join(f"<tool_response>\n{r.content}\n</tool_response>\n" for r in results)
                out.append(f"{IM_START}user\n{body}{IM_END}\n")
                continue
            if message.role == "assistant":
                # With thinking on, an earlier answer without reasoning had it dropped.
                dropped = thinking and i < last_user
                out.append(f"{IM_START}assistant\n{self._assistant(message, thinking, dropped)}")
                out.append(self.assistant_end)
            else:
                out.append(f"{IM_START}{message.role}\n{message.text}{IM_END}\n")
            i += 1

    def _assistant(self, message: Message, thinking: bool, dropped: bool) -> str:
        raw = message.raw
        if raw is not None:
            # Replayed after the generation prompt it followed. A message without reasoning
            # in thinking mode was not generated as it stands (its reasoning was dropped, and
            # the whitespace after it with it): the template's form, from its blocks.
            if opens_with_reasoning(message):
                return f"<think>\n{raw}"
            if not thinking and not any(isinstance(b, ReasoningBlock) for b in message.content):
                return EMPTY_THINK + raw
        return self._canonical(message, dropped)

    def _canonical(self, message: Message, dropped: bool) -> str:
        """The message as the template writes it. ``dropped``: the message is before the last
        user message in thinking mode, so if it has no reasoning, its reasoning was dropped
        (an answer then keeps the newline that followed ``</think>``)."""
        content = message.content
        parts: list[str] = []
        first = content[0] if content else None
        if not (isinstance(first, ReasoningBlock) and first.text.strip()):
            parts.append(EMPTY_THINK)
            if dropped and not message.tool_calls:
                parts.append("\n")
        pending: list[ToolCallBlock] = []
        for block in content:
            if isinstance(block, ToolCallBlock):
                pending.append(block)
                continue
            if pending:
                parts = [self._calls(pending, parts)]
                pending = []
            if isinstance(block, ReasoningBlock):
                if block.text.strip():
                    parts.append(f"<think>\n{block.text}\n</think>\n")
            elif isinstance(block, TextBlock):
                parts.append(block.text)
        if pending:
            return self._calls(pending, parts)
        return "".join(parts).rstrip()

    @staticmethod
    def _calls(calls: list[ToolCallBlock], parts: list[str]) -> str:
        """What comes before the calls, trimmed, a newline, then each call and a newline."""
        before = "".join(parts).rstrip()
        return before + "\n" + "".join(f"{xml_call(call)}\n" for call in calls)
