"""DeepSeek-V4.1's prompt: V4's turns with a system token, a numeric reasoning effort and the
spaced DSML dialect.

Source: DeepSeek-V4.1's encoder as vLLM copies it (``vllm/tokenizers/deepseek_v41_encoding.py``)
with vLLM's serving wrapper (``vllm/tokenizers/deepseek_v41.py``), whose choices are what a
served model renders: the request's tools go with the first system message (one is made, empty,
at the start when there is none), thinking is on unless the request turns it off, and the
reasoning effort is ``"high"`` (75) unless the request names another.

Layout. ``BOS``, then ``<｜System｜>`` + (thinking mode) ``Reasoning Effort: 75 (range 1-100,
...)\\n\\n`` + the system text + ``\\n\\n`` + tools section (V4's text, with V4.1's tags); the
system part is left out only in chat mode without a system message or tools. Each run of user
messages and tool results is one user turn, ``<｜User｜>`` + its parts joined by ``\\n\\n``
(results as ``<tool_result>...</tool_result>``, in call order). A system message later in the
conversation is ``<｜System｜>text``. Before an assistant turn, and as the generation prompt,
``<｜Assistant｜>`` + ``<think>`` (thinking mode, a turn that opens with reasoning) or
``</think>``. An assistant turn is ``reasoning</think>`` + content + ``\\n\\n`` + the calls
(``<｜DSML｜ calls>``, see :data:`~agentkit.parsing.tools.dsml.DEEPSEEK_V41`) + ``EOS``.

Thinking off (chat mode) has no effort line and no reasoning: the encoder writes no reasoning
in chat mode, so the template renders the transcript without its reasoning blocks.

Not supported (agentkit has no place for them): the ``developer`` and ``latest_reminder``
roles, ``response_format``, images, and the task tokens other than through
:mod:`agentkit.side_queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentkit.errors import ConfigurationError
from agentkit.parsing.tools.dsml import DEEPSEEK_V41
from agentkit.profiles._deepseek import ASSISTANT, BOS, END_THINK, EOS, THINK, USER
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
from agentkit.profiles._replay import has_reasoning, replay_view
from agentkit.transcript import Message, ToolCallBlock, ToolResultBlock, Transcript

__all__ = ["DEFAULT_REASONING_EFFORT", "SYSTEM", "DeepSeekV41Template"]

SYSTEM = "<｜System｜>"
DEFAULT_REASONING_EFFORT = 75
"""``"high"``, the encoder's and vLLM's default (``"low"`` is 50, ``"max"`` 100)."""

_TAGS = DEEPSEEK_V41.tags
_EFFORT = (
    "Reasoning Effort: {effort} "
    "(range 1-100, the higher the value, the more thorough the reasoning)\n\n"
)
_TOOLS = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "{_TAGS.start}" block like the following:

{_TAGS.start}
{_TAGS.invoke} name="$TOOL_NAME">
{_TAGS.parameter} name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE{_TAGS.parameter_end}
...
{_TAGS.invoke_end}
{_TAGS.invoke} name="$TOOL_NAME2">
...
{_TAGS.invoke_end}
{_TAGS.end}

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK}), you MUST output your complete reasoning inside {THINK}...{END_THINK} BEFORE any tool calls or final response.

Otherwise, output directly after {END_THINK} with tool calls or final response.

### Available Tool Schemas

{{schemas}}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""  # noqa: E501


def tools_section(tools: Sequence[ToolSpec]) -> str:
    schemas = "\n".join(to_json(function_of(spec)) for spec in tools)
    return _TOOLS.replace("{schemas}", schemas)


def _flag(value: object) -> str:
    return "true" if isinstance(value, str) else "false"


def calls_section(calls: Sequence[ToolCallBlock]) -> str:
    """The calls as the encoder writes them, with the ``\\n\\n`` before them: parameters joined
    by newlines inside ``<invoke>\\n...\\n</invoke>`` (a call without arguments is
    ``<invoke name="f">\\n\\n</invoke>``); with arguments this is ``DEEPSEEK_V41.render``."""
    invokes = []
    for call in calls:
        parameters = "\n".join(
            f'{_TAGS.parameter} name="{key}" string="{_flag(value)}">'
            f"{value if isinstance(value, str) else to_json(value)}{_TAGS.parameter_end}"
            for key, value in call.arguments.items()
        )
        invokes.append(f'{_TAGS.invoke} name="{call.name}">\n{parameters}\n{_TAGS.invoke_end}')
    return f"\n\n{_TAGS.start}\n" + "\n".join(invokes) + f"\n{_TAGS.end}"


def _reasoning(text: str, opened: bool) -> str:
    return f"{text}{END_THINK}" if opened else f"{THINK}{text}{END_THINK}"


def _text(text: str, parts: list[str]) -> str:
    return text


def _call_order(messages: Sequence[Message], i: int) -> dict[str, int]:
    """Call id -> position in the last assistant message with calls before ``i`` (the order the
    encoder sorts a turn's tool results into)."""
    for j in range(i - 1, -1, -1):
        calls = messages[j].tool_calls if messages[j].role == "assistant" else []
        if calls:
            return {call.id: k for k, call in enumerate(calls) if call.id}
    return {}


def _in_call_order(
    parts: list[str | ToolResultBlock], order: dict[str, int]
) -> list[str | ToolResultBlock]:
    """A turn's parts with its results sorted into call order, in the results' places."""
    results = [p for p in parts if isinstance(p, ToolResultBlock)]
    if len(results) < 2 or not order:
        return parts
    ordered = iter(sorted(results, key=lambda r: order.get(r.call_id, 0)))
    return [next(ordered) if isinstance(p, ToolResultBlock) else p for p in parts]


@dataclass(frozen=True, slots=True)
class DeepSeekV41Template(FamilyTemplate):
    """DeepSeek-V4.1 (see the module docstring for the layout and the source).

    ``thinking=False`` is chat mode for every request; otherwise a request decides
    (``render(..., thinking=False)``). ``reasoning_effort`` (1-100) is the number the thinking
    mode's first line states.
    """

    thinking: bool = True
    reasoning_effort: int = DEFAULT_REASONING_EFFORT

    def __post_init__(self) -> None:
        if not 1 <= self.reasoning_effort <= 100:
            raise ConfigurationError(
                f"DeepSeek-V4.1's reasoning effort is 1-100, not {self.reasoning_effort}"
            )

    @property
    def assistant_end(self) -> str:
        return EOS

    def _view(self, transcript: Transcript) -> Transcript:
        """Chat mode writes no reasoning: the transcript without its reasoning blocks."""
        if self.thinking:
            return transcript
        dropped = {i for i, m in enumerate(transcript.messages) if has_reasoning(m)}
        return replay_view(transcript, dropped)

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        out = [BOS]
        effort = _EFFORT.format(effort=self.reasoning_effort) if self.thinking else ""
        if effort or system is not None or tools:
            out.append(SYSTEM + effort + (system or ""))
        if tools:
            out.append("\n\n" + tools_section(tools))
        return out, start

    def _opener(self, following: Message | None, gen: bool) -> str:
        """``<｜Assistant｜>`` and ``<think>``/``</think>`` before the next assistant turn (or
        as the generation prompt); nothing before any other message."""
        if following is None:
            return (ASSISTANT + (THINK if self.thinking else END_THINK)) if gen else ""
        if following.role != "assistant":
            return ""
        return ASSISTANT + (
            THINK if self.thinking and opens_with_reasoning(following) else END_THINK
        )

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        n = len(messages)
        while i < n:
            message = messages[i]
            if message.role == "assistant":
                # The reasoning of a turn is always written as opened: ``<think>`` is the
                # opener's (or, for a turn right after another, absent, as in the encoder).
                body = canonical_assistant(
                    message,
                    reasoning=_reasoning,
                    text=_text,
                    calls=lambda calls, parts: calls_section(calls),
                    opened=self.thinking and opens_with_reasoning(message),
                )
                out.append(body + EOS)
                i += 1
                continue
            if message.role == "system":  # in mid-conversation (the first is in the head)
                out.append(SYSTEM + message.text)
                i += 1
            else:
                turn = i
                parts: list[str | ToolResultBlock] = []
                while i < n and messages[i].role in ("user", "tool"):
                    if messages[i].role == "tool":
                        results, i = tool_results(messages, i)
                        parts.extend(results)
                    else:
                        parts.append(messages[i].text)
                        i += 1
                parts = _in_call_order(parts, _call_order(messages, turn))
                out.append(
                    USER
                    + "\n\n".join(
                        p if isinstance(p, str) else f"<tool_result>{p.content}</tool_result>"
                        for p in parts
                    )
                )
            out.append(self._opener(messages[i] if i < n else None, gen))
