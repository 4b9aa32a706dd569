"""DeepSeek-R1 and DeepSeek-V3.1 against their own Jinja templates.

V3.2 and V4 have no Jinja template: their references are DeepSeek's Python encoders inside
vLLM, compared in ``tests/slow/test_deepseek_encoders.py``.

How the references are fed. The templates are rendered as transformers renders them (sandboxed
Jinja, ``trim_blocks``/``lstrip_blocks``), with ``bos_token`` set. V3.1's template concatenates
a call's ``arguments`` as the string the client sent (it fails on an argument object), so it
gets them as ``json.dumps(arguments, ensure_ascii=False)``, the text agentkit writes; vLLM's R1
template runs them through ``tojson`` and gets the objects. vLLM's R1 template leaks its Jinja
indentation into the prompt; it is rendered with every tag trimming the whitespace around it
(everything it writes is in string literals), and a test checks that this removes whitespace
only.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from _references import template_path

from agentkit.profiles import dropped_reasoning, get_profile
from agentkit.profiles._deepseek import DeepSeekV31Template
from agentkit.profiles._hf_template import _environment, chat_messages
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    Render,
    conversations_for,
    first_difference,
    profile_prompt,
)
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

BOS = "<｜begin▁of▁sentence｜>"
ASSISTANT = "<｜Assistant｜>"
R1 = get_profile("deepseek-r1")
V31 = get_profile("deepseek-v3.1")


def _trimmed(text: str) -> str:
    """The template with every tag stripping the whitespace on both sides."""
    text = re.sub(r"\s*(\{[{%])-?", r"\1-", text)
    return re.sub(r"-?([%}]\})\s*", r"-\1", text)


@cache
def _compiled(name: str, trim: bool) -> Any:
    text = template_path(name).read_text(encoding="utf-8")
    return _environment().from_string(_trimmed(text) if trim else text)


def reference(name: str, *, trim: bool = False, string_arguments: bool = False) -> Render:
    """``name`` rendered for a conversation as transformers would render it (V3.1's own
    ``thinking`` variable follows the conversation)."""

    def render(conversation: Conversation) -> str:
        messages = chat_messages(conversation.transcript)
        if string_arguments:
            for message in messages:
                for call in message.get("tool_calls", []):
                    arguments = call["function"]["arguments"]
                    call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)
        return str(
            _compiled(name, trim).render(
                messages=messages,
                tools=[dict(t) for t in conversation.tools] or None,
                add_generation_prompt=True,
                bos_token=BOS,
                thinking=conversation.thinking,
                enable_thinking=conversation.thinking,
            )
        )

    return render


R1_JANUARY = reference("deepseek-r1.jinja")
R1_TOOLS = reference("deepseek-r1_vllm-tools.jinja", trim=True)
V31_TEMPLATE = reference("deepseek-v3.1.jinja", string_arguments=True)


def _two_rounds() -> Conversation:
    """A tool loop of two rounds: a call, its result, a call after the result, its result."""
    first = ToolCallBlock(id="call_1", name="lookup", arguments={"key": "Paris"})
    second = ToolCallBlock(id="call_2", name="lookup", arguments={"key": "Oslo", "limit": 1})
    t = Transcript()
    t.add("user", "Compare Paris and Oslo.")
    t.add("assistant", [ReasoningBlock(text="Paris first."), first])
    t.add("tool", [ToolResultBlock(call_id="call_1", name="lookup", content="20C")])
    t.add("assistant", [ReasoningBlock(text="Now Oslo."), TextBlock(text="One more."), second])
    t.add("tool", [ToolResultBlock(call_id="call_2", name="lookup", content="5C")])
    return Conversation("two tool rounds", t, STANDARD_TOOLS)


def _conversations(profile: Any) -> list[Conversation]:
    return [*conversations_for(profile), _two_rounds()]


def _has_calls(conversation: Conversation) -> bool:
    return any(m.tool_calls for m in conversation.transcript.messages)


def _check(expected: str, actual: str) -> None:
    difference = first_difference(expected, actual)
    assert difference is None, difference.describe()


# --- DeepSeek-R1 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "conversation",
    [c for c in _conversations(R1) if not _has_calls(c)],
    ids=lambda c: c.name,
)
def test_r1_prompts_equal_the_january_template(conversation: Conversation) -> None:
    """R1's own template has no tool section: it is the reference without tools."""
    plain = replace(conversation, tools=())
    _check(R1_JANUARY(plain), profile_prompt(R1, plain))


@pytest.mark.parametrize("conversation", _conversations(R1), ids=lambda c: c.name)
def test_r1_prompts_equal_the_vllm_tool_template_but_the_generation_prompt(
    conversation: Conversation,
) -> None:
    """The one difference: the January generation prompt ``<｜Assistant｜><think>\\n`` where
    R1-0528's ends with ``<｜Assistant｜>`` (after tool outputs neither writes one)."""
    expected = R1_TOOLS(conversation)
    if expected.endswith(ASSISTANT):
        expected += "<think>\n"
    else:
        assert expected.endswith("<｜tool▁outputs▁end｜>")
    _check(expected, profile_prompt(R1, conversation))


@pytest.mark.parametrize("conversation", _conversations(R1), ids=lambda c: c.name)
def test_the_trimmed_vllm_r1_template_differs_only_in_whitespace(
    conversation: Conversation,
) -> None:
    leaky = reference("deepseek-r1_vllm-tools.jinja")(conversation)
    trimmed = R1_TOOLS(conversation)
    assert (leaky != trimmed) == _has_calls(conversation)  # it leaks around calls
    assert re.sub(r"\s", "", leaky) == re.sub(r"\s", "", trimmed)


def test_r1_keeps_the_current_task_s_reasoning_only_when_asked() -> None:
    """The default (drop_all) is the template's prompt; ``drop_on_plain_turns``, the caller's
    choice, keeps the current tool loop's reasoning after ``<｜Assistant｜>``, where the model
    wrote it."""
    conversation = _two_rounds()
    assert R1.replay == "drop_all"
    template = R1_TOOLS(conversation)
    kept = profile_prompt(replace(R1, replay="drop_on_plain_turns"), conversation)
    expected = template.replace(
        "Compare Paris and Oslo.<｜Assistant｜>",
        "Compare Paris and Oslo.<｜Assistant｜><think>\nParis first.</think>",
    ).replace(
        "<｜tool▁outputs▁end｜>One more.", "<｜tool▁outputs▁end｜><think>Now Oslo.</think>One more."
    )
    assert "<think>\nParis first.</think>" in expected
    assert "<think>Now Oslo.</think>" in expected
    _check(expected, kept)


# --- DeepSeek-V3.1 -----------------------------------------------------------------------------


def _with_tools_in_system(conversation: Conversation) -> Conversation:
    """The conversation without tools, the model card's tool section in its system message."""
    assert isinstance(V31.template, DeepSeekV31Template)
    section = V31.template.tools_section(conversation.tools)
    messages = list(conversation.transcript.messages)
    if messages and messages[0].role == "system":
        text = f"{messages[0].text}\n\n{section}"
        messages[0] = Message(role="system", content=[TextBlock(text=text)])
    else:
        messages.insert(0, Message(role="system", content=[TextBlock(text=section)]))
    return replace(conversation, transcript=Transcript(messages=messages), tools=())


@pytest.mark.parametrize("conversation", _conversations(V31), ids=lambda c: c.name)
def test_v31_prompts_equal_the_template(conversation: Conversation) -> None:
    """Without tools the template's prompt exactly; with tools, the template's prompt for the
    same conversation with the model card's tool section in the system message (the one
    difference: the template has no tool section of its own)."""
    expected = V31_TEMPLATE(conversation)
    if conversation.tools:
        assert "## Tools" not in expected
        expected = V31_TEMPLATE(_with_tools_in_system(conversation))
        assert "## Tools\nYou have access to the following tools:" in expected
    _check(expected, profile_prompt(V31, conversation))


@pytest.mark.parametrize("thinking", [True, False])
def test_v31_generation_prompt_follows_the_thinking_switch(thinking: bool) -> None:
    assert V31.thinking_switch
    conversation = Conversation(
        "plain", Transcript(messages=[Message(role="user", content=[TextBlock(text="Hi")])])
    )
    conversation = replace(conversation, thinking=thinking)
    prompt = profile_prompt(V31, conversation)
    assert prompt.endswith("<｜Assistant｜><think>" if thinking else "<｜Assistant｜></think>")
    _check(V31_TEMPLATE(conversation), prompt)


def test_v31_keeps_the_current_task_s_reasoning_only_when_asked() -> None:
    """The template opens every turn with ``</think>`` and writes no reasoning (default
    drop_all: its prompt); ``drop_on_plain_turns`` keeps the current loop's reasoning."""
    conversation = _two_rounds()
    assert V31.replay == "drop_all"
    template = V31_TEMPLATE(_with_tools_in_system(conversation))
    _check(template, profile_prompt(V31, conversation))
    kept = profile_prompt(replace(V31, replay="drop_on_plain_turns"), conversation)
    expected = template.replace(
        "<｜Assistant｜></think><｜tool▁calls▁begin｜>",
        "<｜Assistant｜><think>Paris first.</think><｜tool▁calls▁begin｜>",
    ).replace(
        "<｜tool▁output▁end｜>One more.", "<｜tool▁output▁end｜><think>Now Oslo.</think>One more."
    )
    assert "<think>Paris first.</think>" in expected
    assert "<think>Now Oslo.</think>" in expected
    _check(expected, kept)


# --- the replay policy V4 needs -----------------------------------------------------------------


def test_keep_with_tools_keeps_everything_with_tools_and_drops_before_the_last_turn_without() -> (
    None
):
    """DeepSeek-V4's encoder: ``drop_thinking`` is off when tools are given; without tools,
    reasoning goes before the last user turn, and tool results are user turns there."""
    transcript = _two_rounds().transcript
    assert dropped_reasoning(transcript, "keep_with_tools", tools=True) == set()
    assert dropped_reasoning(transcript, "keep_with_tools", tools=False) == {1, 3}
    assert dropped_reasoning(transcript, "drop_on_plain_turns") == set()
    assert dropped_reasoning(transcript, "drop_all") == {1, 3}
