"""Mistral prompts for tokenizers v11 and v13, as mistral-common's instruct encoders write them.

The reference is ``mistral-common`` (``InstructTokenizerV11`` / ``InstructTokenizerV13`` after
the request normalizer both versions share), which is what vLLM runs for these models; llama.cpp's
``Mistral-Small-3.2-24B-Instruct-2506.jinja`` agrees with v11 where it can express a
conversation. Both versions write::

    <s>[SYSTEM_PROMPT]...[/SYSTEM_PROMPT][AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS]
    [INST]...[/INST]answer</s>[INST]...[/INST]text[TOOL_CALLS]...</s>[TOOL_RESULTS]...

with system messages in place, consecutive user messages joined by a blank line, an
assistant's text before its calls and one ``</s>`` after both. They differ in three places:

* calls: v11 ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{json}``, v13 ``[TOOL_CALLS]NAME[ARGS]{json}``;
* results: v11 ``[TOOL_RESULTS]ID[TOOL_CONTENT]...[/TOOL_RESULTS]``, v13
  ``[TOOL_RESULTS]...[/TOOL_RESULTS]`` (both in the order of the calls they answer);
* tools: v11 writes ``[AVAILABLE_TOOLS]`` before the *last* user message, v13 before the
  first. So a new user message moves v11's block: :meth:`MistralTemplate.rewrites_history`
  says so, and the prompt builder renders that prompt whole (the prefix cache keeps what
  came before the block's old place), as the model was trained to see it.

v13 writes reasoning (Magistral) as ``[THINK]...[/THINK]`` and keeps it in every turn; v11 has
no reasoning form (mistral-common refuses a ``ThinkChunk`` before v13), so a v11 prompt leaves
reasoning blocks out. Neither adds anything after ``[/INST]`` or ``[/TOOL_RESULTS]``: whether
Magistral thinks is up to its system prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._family_common import (
    FamilyTemplate,
    canonical_assistant,
    function_of,
    preceding_calls,
    to_json,
    tool_results,
)
from agentkit.profiles._profile import ToolSpec
from agentkit.transcript import Message, ReasoningBlock, ToolResultBlock, Transcript

__all__ = ["EOS", "MistralTemplate"]

EOS = "</s>"

MistralVersion = Literal["v11", "v13"]


def _tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool as mistral-common's ``Tool`` model dumps it: these three keys, in this order."""
    function = function_of(spec)
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {}),
        },
    }


@dataclass(frozen=True, slots=True)
class MistralTemplate(FamilyTemplate):
    """Mistral's instruct format of tokenizer ``version`` (``"v11"`` or ``"v13"``)."""

    version: MistralVersion = "v13"

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        return ["<s>"], 0

    @property
    def assistant_end(self) -> str:
        return EOS

    def rewrites_history(self, transcript: Transcript, start: int) -> str | None:
        """Why a prompt with tools cannot extend the last one at message ``start``: v11's
        tools block stands before the last user message, so a new one moves it."""
        if self.version == "v11" and any(m.role == "user" for m in transcript.messages[start:]):
            return (
                "the chat template moves [AVAILABLE_TOOLS] before the last user message "
                "(Mistral v11)"
            )
        return None

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        # A continuation starts after an assistant message, past the first user message, and
        # gets no tools: the tools section is written in the whole render (v13: before the
        # first user message; v11: before the last, see rewrites_history).
        pending_tools = bool(tools)
        n = len(messages)
        last_user = max((k for k in range(n) if messages[k].role == "user"), default=-1)
        while i < n:
            message = messages[i]
            if message.role == "user":
                texts = []
                run = i
                while i < n and messages[i].role == "user":
                    texts.append(messages[i].text)
                    i += 1
                here = self.version != "v11" or run <= last_user < i
                if pending_tools and here:
                    tools_json = to_json([_tool(t) for t in tools])
                    out.append(f"[AVAILABLE_TOOLS]{tools_json}[/AVAILABLE_TOOLS]")
                    pending_tools = False
                joined = "\n\n".join(t for t in texts if t)
                out.append(f"[INST]{joined}[/INST]")
                continue
            if message.role == "tool":
                results, end = tool_results(messages, i)
                out.extend(self._results(results, messages, i))
                i = end
                continue
            if message.role == "assistant":
                out.append(self._assistant(message) + EOS)
            else:
                out.append(f"[SYSTEM_PROMPT]{message.text}[/SYSTEM_PROMPT]")
            i += 1

    def _assistant(self, message: Message) -> str:
        syntax = get_tool_syntax("mistral_v11" if self.version == "v11" else "mistral")
        thinks = self.version != "v11" and any(
            isinstance(b, ReasoningBlock) for b in message.content
        )
        return canonical_assistant(
            message,
            reasoning=lambda text, opened: (
                f"[THINK]{text}[/THINK]" if self.version != "v11" else ""
            ),
            # Content that is a plain string loses its trailing spaces in the encoder.
            text=lambda text, parts: text if thinks else text.rstrip(" "),
            calls=lambda calls, parts: syntax.render(calls),
        )

    def _results(
        self, results: list[ToolResultBlock], messages: Sequence[Message], i: int
    ) -> list[str]:
        # The normalizer (v11's and v13's) orders a run of results by the calls they answer.
        order = {call.id: k for k, call in enumerate(preceding_calls(messages, i))}
        ordered = sorted(
            enumerate(results), key=lambda kr: (order.get(kr[1].call_id, len(order)), kr[0])
        )
        if self.version == "v11":
            return [
                f"[TOOL_RESULTS]{r.call_id}[TOOL_CONTENT]{r.content}[/TOOL_RESULTS]"
                for _, r in ordered
            ]
        return [f"[TOOL_RESULTS]{r.content}[/TOOL_RESULTS]" for _, r in ordered]
