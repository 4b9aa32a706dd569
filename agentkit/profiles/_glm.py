"""GLM-4.5/4.6 and GLM-4.7 prompts (``[gMASK]<sop>``, ``<|system|>``, ``<|user|>``,
``<|assistant|>``, ``<|observation|>``).

Sources: the ``chat_template.jinja`` of zai-org/GLM-4.6 (GLM-4.5's format; llama.cpp keeps it
as ``models/templates/GLM-4.6.jinja``) and of GLM-4.7-Flash (``GLM-4.7-Flash.jinja``; GLM-4.7's
own was not found). The conformance tests compare the prompts with both.

Both templates write reasoning back only after the last user message: the profiles' default
replay is ``drop_on_plain_turns``. GLM-4.7's template keeps all of it with
``clear_thinking=False`` (the model's "preserved thinking"), which is ``replay="keep_all"``.

GLM-4.5 writes ``<|role|>\\n`` and newlines between the parts of an assistant turn
(``\\n<think>...</think>\\n content \\n<tool_call>...``); its generation prompt is a bare
``<|assistant|>``, and the model writes ``<think>`` itself. GLM-4.7 writes no newlines, and its
generation prompt ends with ``<think>`` (``</think>`` with thinking off), so the model starts
inside the reasoning block.

GLM has no end-of-message token: the model ends its turn by writing the next role marker
(``<|observation|>`` after calls, ``<|user|>`` otherwise), which are its stop tokens. So
:attr:`assistant_end` is empty and the continuation begins with that marker. Where the engine
returns the stop token among the generated ids, the incremental prompt must not add it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._family_common import (
    FamilyTemplate,
    canonical_assistant,
    opens_with_reasoning,
    to_json,
    tool_results,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ReasoningBlock, ToolCallBlock

__all__ = ["GLM_STOPS", "GlmTemplate"]

GLM_STOPS = ("<|user|>", "<|observation|>", "<|endoftext|>")

_TOOLS_HEAD = (
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query."
    "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
_TOOLS_TAIL_45 = (
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>"
)
_TOOLS_TAIL_47 = (
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
    "<arg_value>{arg-value-2}</arg_value>...</tool_call>"
)


@dataclass(frozen=True, slots=True)
class GlmTemplate(FamilyTemplate):
    """GLM-4.5/4.6 (``version="4.5"``) or GLM-4.7 (``version="4.7"``).

    With ``thinking=False`` (here, or for one request: the templates' ``enable_thinking=False``),
    GLM-4.5 user turns end with ``/nothink`` and the generation prompt with
    ``\\n<think></think>``; GLM-4.7's generation prompt ends with ``</think>``.
    """

    version: Literal["4.5", "4.7"]
    thinking: bool = True

    @property
    def _nl(self) -> str:
        return "\n" if self.version == "4.5" else ""

    def tools_section(self, tools: Sequence[ToolSpec]) -> str:
        lines = "".join(f"{to_json(spec)}\n" for spec in tools)
        tail = _TOOLS_TAIL_45 if self.version == "4.5" else _TOOLS_TAIL_47
        return f"{_TOOLS_HEAD}{lines}{tail}"

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        out = ["[gMASK]<sop>"]
        if tools:
            out.append(self.tools_section(tools))
        return out, 0

    @property
    def assistant_end(self) -> str:
        return ""

    def _generation_prompt(self, thinking: bool) -> str:
        thinking = thinking and self.thinking
        if self.version == "4.5":
            return "<|assistant|>" if thinking else "<|assistant|>\n<think></think>"
        return "<|assistant|>" + ("<think>" if thinking else "</think>")

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        nl = self._nl
        while i < len(messages):
            message = messages[i]
            if message.role == "tool":
                results, i = tool_results(messages, i)
                if self.version == "4.5":
                    body = "".join(
                        f"\n<tool_response>\n{r.content}\n</tool_response>" for r in results
                    )
                else:
                    body = "".join(f"<tool_response>{r.content}</tool_response>" for r in results)
                out.append(f"<|observation|>{body}")
                continue
            if message.role == "assistant":
                out.append("<|assistant|>" + self._assistant(message))
            elif message.role == "user":
                suffix = "/nothink" if self.version == "4.5" and not self.thinking else ""
                if message.text.endswith("/nothink"):
                    suffix = ""
                out.append(f"<|user|>{nl}{message.text}{suffix}")
            else:
                out.append(f"<|system|>{nl}{message.text}")
            i += 1

    def _assistant(self, message: Message) -> str:
        if self.version == "4.5":
            syntax = get_tool_syntax("glm45")
            body = canonical_assistant(
                message,
                reasoning=lambda text, opened: f"\n<think>{text.strip()}</think>",
                text=lambda text, parts: f"\n{text.strip()}" if text.strip() else "",
                calls=lambda calls, parts: "\n" + syntax.render(calls),
            )
            has_reasoning = any(isinstance(b, ReasoningBlock) for b in message.content)
            # Written by the template for a turn without reasoning, and by the generation
            # prompt itself with thinking off (so a generated turn follows it too).
            if not has_reasoning and (message.raw is None or not self.thinking):
                body = "\n<think></think>" + body
            return body
        syntax = get_tool_syntax("glm47")
        opened = self.thinking and opens_with_reasoning(message)

        def calls(pending: list[ToolCallBlock], parts: list[str]) -> str:
            return syntax.render(pending)

        body = canonical_assistant(
            message,
            reasoning=lambda text, first: (
                f"{text.strip()}</think>" if first else f"<think>{text.strip()}</think>"
            ),
            text=lambda text, parts: text.strip(),
            calls=calls,
            opened=opened,
        )
        return ("<think>" if opened else "</think>") + body
