"""MiniMax-M2 prompts (``]~!b[``, ``]~b]system``, ``]~b]user``, ``]~b]ai``, ``]~b]tool``,
``[e~[``).

Source: MiniMaxAI/MiniMax-M2's ``chat_template.jinja`` as llama.cpp keeps it
(``models/templates/MiniMax-M2.jinja``; Unsloth's copy changes only how the template splits
``</think>`` out of a content string). The generation prompt is ``]~b]ai\\n<think>\\n``: the model
starts inside the reasoning block, and a turn with reasoning is written
``<think>\\nREASONING\\n</think>\\n\\n`` + content + ``\\n<minimax:tool_call>...``.

The template writes reasoning back only after the last user message (within the current task):
the profile's default replay is ``drop_on_plain_turns``; ``replay="keep_all"`` is an opt-in that
keeps earlier tasks' reasoning in the same form, which the template never writes. A system
message after the first, which the template leaves out, is written as a user turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._family_common import (
    FamilyTemplate,
    canonical_assistant,
    function_of,
    opens_with_reasoning,
    split_system,
    to_json,
    tool_results,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ToolCallBlock

__all__ = ["END", "MiniMaxM2Template"]

END = "[e~["
DEFAULT_SYSTEM = "You are a helpful assistant."
_OPEN = "<think>\n"


def _tools_section(tools: Sequence[ToolSpec]) -> str:
    listed = "".join(f"<tool>{to_json(function_of(spec))}</tool>\n" for spec in tools)
    return (
        "\n\n# Tools\nYou may call one or more tools to assist with the user query.\n"
        "Here are the tools available in JSONSchema format:\n\n<tools>\n"
        f"{listed}</tools>\n\n"
        "When making tool calls, use XML format to invoke tools and pass parameters:\n\n"
        '<minimax:tool_call>\n<invoke name="tool-name-1">\n'
        '<parameter name="param-key-1">param-value-1</parameter>\n'
        '<parameter name="param-key-2">param-value-2</parameter>\n...\n</invoke>\n'
        "</minimax:tool_call>"
    )


@dataclass(frozen=True, slots=True)
class MiniMaxM2Template(FamilyTemplate):
    """MiniMax-M2 (and M2.1/M2.5, which keep its format)."""

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        out = [f"]~!b[]~b]system\n{system or DEFAULT_SYSTEM}"]
        if tools:
            out.append(_tools_section(tools))
        out.append(f"{END}\n")
        return out, start

    @property
    def assistant_end(self) -> str:
        return f"{END}\n"

    def _generation_prompt(self, thinking: bool) -> str:
        return f"]~b]ai\n{_OPEN}"

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
                body = "".join(f"\n<response>{r.content}</response>" for r in results)
                out.append(f"]~b]tool{body}{END}\n")
                continue
            if message.role == "assistant":
                out.append(f"]~b]ai\n{self._assistant(message)}{END}\n")
            else:
                # A later system message: the template leaves it out; written as user's.
                out.append(f"]~b]user\n{message.text}{END}\n")
            i += 1

    def _assistant(self, message: Message) -> str:
        syntax = get_tool_syntax("minimax_m2")
        opened = opens_with_reasoning(message)

        def calls(pending: list[ToolCallBlock], parts: list[str]) -> str:
            return "\n" + syntax.render(pending)

        body = canonical_assistant(
            message,
            reasoning=lambda text, first: (
                f"{text.strip(chr(10))}\n</think>\n\n"
                if first
                else f"{_OPEN}{text.strip(chr(10))}\n</think>\n\n"
            ),
            text=lambda text, parts: text,
            calls=calls,
            opened=opened,
        )
        return (_OPEN if opened else "") + body
