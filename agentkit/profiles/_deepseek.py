"""DeepSeek prompts: R1, V3.1 (``<｜tool▁calls▁begin｜>`` calls) and V3.2, V4 (DSML calls).

Sources. V3.2 and V4 ship no Jinja template but a Python encoder
(``encoding/encoding_dsv32.py`` in deepseek-ai/DeepSeek-V3.2, and DeepSeek-V4's encoder as vLLM
copies it in ``vllm/tokenizers/deepseek_v4_encoding.py``); V3.1's template is its
``tokenizer_config.json`` (llama.cpp keeps a copy as
``models/templates/deepseek-ai-DeepSeek-V3.1.jinja``); R1's is its ``tokenizer_config.json``.

Reasoning. In thinking mode the generation prompt ends with ``<think>``, so the model's output
starts inside the reasoning block (the ``starts_inside`` reasoning syntaxes). Which earlier
reasoning the templates write back differs per model, and the profiles' replay policies follow
it: R1's and V3.1's templates write none (``drop_all``), V3.2's encoder writes the reasoning after
the last user message (``drop_on_plain_turns``), V4's all of it when tools are offered and
otherwise only after the last user or tool-result turn (``keep_with_tools``). A message whose
first block is reasoning is written after ``<think>``; V3.1 writes any other after ``</think>``
and R1 after ``<｜Assistant｜>``; V3.2 and V4 write ``<think></think>`` where their encoders open
the block (see :class:`DeepSeekDsmlTemplate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

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
from agentkit.transcript import Message, ToolCallBlock, ToolResultBlock

__all__ = [
    "BOS",
    "EOS",
    "DeepSeekDsmlTemplate",
    "DeepSeekR1Template",
    "DeepSeekV31Template",
]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK = "<think>"
END_THINK = "</think>"
DSML = "｜DSML｜"

_V32_TOOLS = f"""## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<{DSML}function_calls>" block like the following as part of your reply to the user:
<{DSML}function_calls>
<{DSML}invoke name="$FUNCTION_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$FUNCTION_NAME2">
...
</{DSML}invoke>
</{DSML}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<{DSML}function_calls>
...
</{DSML}function_calls>
<function_results>
...
</function_results>
{THINK}...thinking about results{END_THINK}
Here are the functions available in JSONSchema format:
<functions>
{{schemas}}
</functions>
"""  # noqa: E501

_V4_TOOLS = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{DSML}tool_calls>" block like the following:

<{DSML}tool_calls>
<{DSML}invoke name="$TOOL_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$TOOL_NAME2">
...
</{DSML}invoke>
</{DSML}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK}), you MUST output your complete reasoning inside {THINK}...{END_THINK} BEFORE any tool calls or final response.

Otherwise, output directly after {END_THINK} with tool calls or final response.

### Available Tool Schemas

{{schemas}}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""  # noqa: E501


def _reasoning(text: str, opened: bool) -> str:
    return f"{text}{END_THINK}" if opened else f"{THINK}{text}{END_THINK}"


def _text(text: str, parts: list[str]) -> str:
    return text


def _assistant(
    message: Message, render_calls: Callable[[Sequence[ToolCallBlock]], str], opened: bool
) -> str:
    """An assistant turn as every DeepSeek writes it: the canonical blocks (reasoning closed by
    ``</think>``), then ``EOS``. After an opened block (``<think>`` written before the turn) a
    turn without reasoning closes it at once, as the encoders write empty reasoning."""
    body = canonical_assistant(
        message,
        reasoning=_reasoning,
        text=_text,
        calls=lambda calls, parts: render_calls(calls),
        opened=opened,
    )
    if opened and not opens_with_reasoning(message):
        body = END_THINK + body
    return body + EOS


def _turns(messages: Sequence[Message], i: int) -> Iterator[tuple[Message, list[ToolResultBlock]]]:
    """The messages from ``i`` as V3.1 and R1 write them: system messages skipped (their text
    is in the head), a run of tool messages as one, with its results (empty for the rest)."""
    while i < len(messages):
        message = messages[i]
        results: list[ToolResultBlock] = []
        if message.role == "tool":
            results, i = tool_results(messages, i)
        else:
            i += 1
        if message.role != "system":
            yield message, results


class _DeepSeekTemplate(FamilyTemplate):
    """What the DeepSeek templates share: turns end with ``EOS``, and the generation prompt is
    written by the message loop (it depends on the last message).

    The templates with a mode switch (a ``thinking`` field: V3.1, V3.2, V4) render a request
    that turned thinking off as their chat mode (``thinking_mode="chat"``, the template's
    ``thinking=false``): every turn, and the generation prompt, opened with ``</think>``.
    """

    __slots__ = ()

    @property
    def assistant_end(self) -> str:
        return EOS


def _flag(value: object) -> str:
    return "true" if isinstance(value, str) else "false"


def dsml_calls(block: str, calls: Sequence[ToolCallBlock]) -> str:
    """A DSML section as DeepSeek's encoders write it, with the ``\\n\\n`` before it.

    Written here rather than through the tool syntax's ``render`` because the encoders join
    parameters with newlines *inside* ``<invoke>...\\n</invoke>``: a call without arguments is
    ``<invoke name="f">\\n\\n</invoke>``. With arguments the two agree byte for byte.
    """
    invokes = []
    for call in calls:
        parameters = "\n".join(
            f'<{DSML}parameter name="{key}" string="{_flag(value)}">'
            f"{value if isinstance(value, str) else to_json(value)}</{DSML}parameter>"
            for key, value in call.arguments.items()
        )
        invokes.append(f'<{DSML}invoke name="{call.name}">\n{parameters}\n</{DSML}invoke>')
    body = "\n".join(invokes)
    return f"\n\n<{DSML}{block}>\n{body}\n</{DSML}{block}>"


@dataclass(frozen=True, slots=True)
class DeepSeekDsmlTemplate(_DeepSeekTemplate):
    """DeepSeek-V3.2 (``version="v3.2"``) and DeepSeek-V4 (``version="v4"``), as their encoders
    write a conversation (``encode_messages``).

    Layout (both): ``BOS`` + system text + ``\\n\\n`` + tools section (the encoders' form for
    tools given with the system message; without one, an empty system text), then per turn
    ``<｜User｜>...<｜Assistant｜>`` + ``<think>`` or ``</think>``, the assistant's
    ``reasoning</think>content`` + ``\\n\\n`` + DSML calls + ``EOS``. Tool results differ:
    V3.2 writes ``\\n\\n<function_results>\\n<result>...</result>\\n</function_results>``
    + ``\\n\\n<think>`` straight after the assistant's ``EOS``; V4 writes a user turn of
    ``<tool_result>...</tool_result>`` parts joined by ``\\n\\n`` (a user message right after the
    results joins the same turn, as V4's ``merge_tool_messages`` does).

    Openers, in thinking mode (chat mode writes ``</think>`` everywhere): ``<think>`` at the
    last user turn and after it (V3.2: the last user message, then each run of results; V4:
    the last user or results turn, where the encoders keep reasoning), and before every turn
    when V4's prompt offers tools (its encoder then keeps all reasoning); ``</think>`` before
    the turns whose reasoning the encoders drop. A turn the replay policy left its reasoning
    (``keep_all``, an explicit choice) is written after ``<think>`` wherever it is; one without
    reasoning after ``<think>`` is ``<think></think>content``, as the encoders write it. A
    continuation gets no tools, and opens only turns after the last user turn, where V4 writes
    ``<think>`` either way.

    Deviations from the encoders, deliberate: reasoning kept before the last user turn (only
    under a policy the caller chose) is replayed in place, which the encoders cannot express;
    V4's ``reasoning_effort`` prefix (vLLM's wrapper asks for ``"high"`` in thinking mode; the
    encoder's own default, ``"low"``, writes nothing) and task tokens are not written.
    """

    version: Literal["v3.2", "v4"]
    thinking: bool = True

    @property
    def _block(self) -> str:
        return "function_calls" if self.version == "v3.2" else "tool_calls"

    def tools_section(self, tools: Sequence[ToolSpec]) -> str:
        schemas = "\n".join(to_json(function_of(spec)) for spec in tools)
        template = _V32_TOOLS if self.version == "v3.2" else _V4_TOOLS
        return template.replace("{schemas}", schemas)

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system, start = split_system(messages)
        out = [BOS, system or ""]
        if tools:
            out.append("\n\n" + self.tools_section(tools))
        return out, start

    def _last_turn(self, messages: Sequence[Message]) -> int:
        """The index of the last user turn (V4: tool results are user turns too)."""
        roles = ("user",) if self.version == "v3.2" else ("user", "tool")
        return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role in roles), -1)

    def _opener(self, following: Message | None, last: bool, tools: bool) -> str:
        """``<think>`` or ``</think>``: what the prompt writes before the next assistant turn
        (``last``: the turn being closed is the last user turn or after it)."""
        if not self.thinking:
            return END_THINK
        if following is None or last or (tools and self.version == "v4"):
            return THINK
        return THINK if opens_with_reasoning(following) else END_THINK

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        n = len(messages)
        last_turn = self._last_turn(messages)
        opener = ""  # the opener written since the last assistant turn
        while i < n:
            message = messages[i]
            if message.role == "assistant":
                opened = opener == THINK
                out.append(_assistant(message, partial(dsml_calls, self._block), opened))
                opener = ""
                i += 1
                continue
            if message.role == "system" and self.version == "v3.2":
                out.append(message.text)  # a system message in mid-conversation: its text
                i += 1
                continue
            if self.version == "v3.2" and message.role == "tool":
                results, i = tool_results(messages, i)
                body = "".join(f"\n<result>{r.content}</result>" for r in results)
                out.append(f"\n\n<function_results>{body}\n</function_results>")
                prefix = "\n\n"
            elif self.version == "v3.2":
                out.append(f"{USER}{message.text}")
                i += 1
                prefix = ASSISTANT
            else:  # V4: a run of tool results and user messages is one user turn
                parts: list[str] = []
                while i < n and messages[i].role in ("user", "tool", "system"):
                    if messages[i].role == "tool":
                        results, i = tool_results(messages, i)
                        parts.extend(f"<tool_result>{r.content}</tool_result>" for r in results)
                    elif messages[i].role == "system" and not parts:
                        break
                    else:
                        parts.append(messages[i].text)
                        i += 1
                if not parts:  # a system message in mid-conversation: its text
                    out.append(message.text)
                    i += 1
                    continue
                out.append(USER + "\n\n".join(parts))
                prefix = ASSISTANT
            following = messages[i] if i < n else None
            if following is not None or gen:
                opener = self._opener(following, i - 1 >= last_turn, bool(tools))
                out.append(prefix + opener)


def _v31_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool section of DeepSeek-V3.1's model card ("Toolcall"), in the system prompt.

    Not part of the Jinja template (which leaves tools to the caller); the model card gives
    this text for the system prompt.
    """
    lines = ["## Tools", "You have access to the following tools:"]
    for spec in tools:
        function = function_of(spec)
        lines.append(
            f"\n### {function['name']}\nDescription: {function.get('description', '')}\n\n"
            f"Parameters: {to_json(function.get('parameters', {}))}"
        )
    lines.append(
        "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>"
        "tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\n"
        "Where:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
        "- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
        "Parameters Schema\n"
        "- For multiple tool calls, chain them directly without separators or spaces"
    )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class DeepSeekV31Template(_DeepSeekTemplate):
    """DeepSeek-V3.1 (and V3.1-Terminus): ``<｜User｜>...<｜Assistant｜>`` + ``<think>`` or
    ``</think>``, calls ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}
    <｜tool▁call▁end｜><｜tool▁calls▁end｜>`` after the content, results
    ``<｜tool▁output▁begin｜>...<｜tool▁output▁end｜>`` straight after the assistant's ``EOS``,
    and the next assistant turn straight after the results (no ``<｜Assistant｜>``, no opener:
    the template adds no generation prompt after tool output).

    The template writes no reasoning back (``reasoning_content`` is ignored, and a turn is
    opened with ``</think>``): the profile replays none by default. Reasoning a caller chose to
    keep is written ``<think>reasoning</think>`` in place. The template has no tool section;
    :meth:`tools_section` is the model card's, appended to the system text.
    """

    thinking: bool = True

    def tools_section(self, tools: Sequence[ToolSpec]) -> str:
        """The model card's tool section (the template has none), appended to the system
        text."""
        return _v31_tools(tools)

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        systems = [m.text for m in messages if m.role == "system"]
        system = "\n\n".join(systems)
        if tools:
            section = self.tools_section(tools)
            system = f"{system}\n\n{section}" if system else section
        return [BOS, system], 0

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        syntax = get_tool_syntax("deepseek_v31")
        after_user = False
        for message, results in _turns(messages, i):
            if message.role == "user":
                out.append(f"{USER}{message.text}")
                after_user = True
            elif message.role == "tool":
                out.extend(
                    f"<｜tool▁output▁begin｜>{r.content}<｜tool▁output▁end｜>" for r in results
                )
                after_user = False
            else:
                opened = False
                if after_user:
                    opened = self.thinking and opens_with_reasoning(message)
                    out.append(ASSISTANT + (THINK if opened else END_THINK))
                out.append(_assistant(message, syntax.render, opened))
                after_user = False
        if gen and after_user:
            out.append(ASSISTANT + (THINK if self.thinking else END_THINK))


_R1_TOOLS = (
    "You are a helpful assistant with tool calling capabilities. When a tool call is needed, "
    "you MUST use the following format to issue the call:\n"
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME\n"
    '```json\n{"param1": "value1", "param2": "value2"}\n```<｜tool▁call▁end｜>'
    "<｜tool▁calls▁end｜>\n\nMake sure the JSON is valid.## Tools\n\n### Function\n\n"
    "You have the following functions available:\n\n"
)


@dataclass(frozen=True, slots=True)
class DeepSeekR1Template(_DeepSeekTemplate):
    """DeepSeek-R1 (and R1-0528): ``<｜User｜>...<｜Assistant｜><think>\\n`` as the generation
    prompt; assistant turns ``<｜Assistant｜>content<｜end▁of▁sentence｜>``; V3-style calls
    (``function<｜tool▁sep｜>NAME\\n```json ... ```\\n``); results
    ``<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>...<｜tool▁output▁end｜>`` (later ones after
    ``\\n``) + ``<｜tool▁outputs▁end｜>``, the next turn straight after them.

    R1's own template has no tool section: the one here is vLLM's
    ``examples/tool_chat_template_deepseekr1.jinja`` (after SGLang's), appended to the system
    text. A turn written right after ``<think>\\n`` begins inside reasoning; its first reasoning
    block is then ``text</think>`` (the raw output, replayed, is exactly that).

    The templates write no reasoning back (a turn is its text after ``</think>``): the profile
    replays none by default, and a block a caller chose to keep is written in place. The
    generation prompt is the January form also where vLLM's R1-0528 tool template ends with
    ``<｜Assistant｜>``.
    """

    def _head(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> tuple[list[str], int]:
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        if tools:
            section = _R1_TOOLS + "".join(f"\n```json\n{to_json(spec)}\n```\n" for spec in tools)
            system = f"{system}\n\n{section}"
        return [BOS, system], 0

    def _messages(
        self,
        messages: Sequence[Message],
        i: int,
        out: list[str],
        tools: Sequence[ToolSpec],
        gen: bool,
    ) -> None:
        syntax = get_tool_syntax("deepseek_v3")
        after_tool = False
        for message, results in _turns(messages, i):
            if message.role == "user":
                out.append(f"{USER}{message.text}")
                after_tool = False
            elif message.role == "tool":
                outputs = "\n".join(
                    f"<｜tool▁output▁begin｜>{r.content}<｜tool▁output▁end｜>" for r in results
                )
                out.append(f"<｜tool▁outputs▁begin｜>{outputs}<｜tool▁outputs▁end｜>")
                after_tool = True
            else:
                opened = opens_with_reasoning(message)
                if not after_tool:
                    out.append(ASSISTANT + (f"{THINK}\n" if opened else ""))
                out.append(_assistant(message, syntax.render, opened and not after_tool))
                after_tool = False
        if gen and not after_tool and messages and messages[-1].role != "assistant":
            out.append(f"{ASSISTANT}{THINK}\n")
