"""DeepSeek-V3.2 and DeepSeek-V4 against DeepSeek's own Python encoders (vLLM's copies in
``vllm/tokenizers/``), which have no Jinja template to compare with.

Slow only because importing the encoders imports vLLM (~10 s); no engine is started.

How the encoders are fed: the OpenAI-style messages a client sends (``reasoning`` as the
encoders name it, calls with argument objects, one ``tool`` message per result), the request's
tools attached to the first system message (a system message without text when there is none:
vLLM's V4 wrapper does exactly this, and it is the encoders' form for a system message that
carries tools), ``thinking_mode`` ``"thinking"`` or ``"chat"`` from the conversation, and the
encoders' defaults otherwise (``drop_thinking=True``; V4's ``reasoning_effort=None``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agentkit.profiles import get_profile
from agentkit.profiles._deepseek import DeepSeekDsmlTemplate
from agentkit.profiles._hf_template import chat_messages
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
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

pytestmark = pytest.mark.slow

V32 = get_profile("deepseek-v3.2")
V4 = get_profile("deepseek-v4")
BOS = "<｜begin▁of▁sentence｜>"


def _messages(conversation: Conversation, *, own_system: bool = False) -> list[dict[str, Any]]:
    """The conversation as the encoders take it; ``own_system``: the tools in a system message
    of their own in front (vLLM's V3.2 wrapper)."""
    messages = chat_messages(conversation.transcript, reasoning_key="reasoning")
    tools = [dict(t) for t in conversation.tools]
    if not tools:
        return messages
    if own_system or not messages or messages[0]["role"] != "system":
        messages.insert(0, {"role": "system"})
    messages[0]["tools"] = tools
    return messages


def _mode(conversation: Conversation) -> str:
    return "thinking" if conversation.thinking else "chat"


def v32_reference(conversation: Conversation, *, own_system: bool = False) -> str:
    from vllm.tokenizers.deepseek_v32_encoding import encode_messages

    messages = _messages(conversation, own_system=own_system)
    return str(encode_messages(messages, thinking_mode=_mode(conversation)))


def v4_reference(conversation: Conversation, **options: Any) -> str:
    from vllm.tokenizers.deepseek_v4_encoding import encode_messages

    messages = _messages(conversation)
    return str(encode_messages(messages, thinking_mode=_mode(conversation), **options))


def _call(id: str, key: str, **more: Any) -> ToolCallBlock:
    return ToolCallBlock(id=id, name="lookup", arguments={"key": key, **more})


def _result(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, name=call.name, content=content)


def _two_rounds(*, tools: bool = True) -> Conversation:
    """A tool loop of two rounds, then the next turn (V4 keeps both rounds' reasoning with
    tools, and, without tools, drops the first: its results are a user turn)."""
    first, second = _call("call_1", "Paris"), _call("call_2", "Oslo", limit=1)
    t = Transcript()
    t.add("system", "Be brief.")
    t.add("user", "Compare Paris and Oslo.")
    t.add("assistant", [ReasoningBlock(text="Paris first."), first])
    t.add("tool", [_result(first, "20C")])
    t.add("assistant", [ReasoningBlock(text="Now Oslo."), TextBlock(text="One more."), second])
    t.add("tool", [_result(second, "5C")])
    name = "two tool rounds" + ("" if tools else ", no tools offered")
    return Conversation(name, t, STANDARD_TOOLS if tools else ())


def _client_without_reasoning() -> Conversation:
    """A client that sends no reasoning back (Chat Completions clients drop
    ``reasoning_content``): turns opened with ``<think>`` are written ``<think></think>``."""
    first, second = _call("call_1", "Paris"), _call("call_2", "Oslo")
    t = Transcript()
    t.add("user", "Paris?")
    t.add("assistant", [first])
    t.add("tool", [_result(first, "20C")])
    t.add("assistant", [TextBlock(text="20C.")])
    t.add("user", "Oslo?")
    t.add("assistant", [second])
    t.add("tool", [_result(second, "5C")])
    return Conversation("client without reasoning", t, STANDARD_TOOLS)


def _conversations(profile: Any) -> list[Conversation]:
    return [
        *conversations_for(profile),
        _two_rounds(),
        _two_rounds(tools=False),
        _client_without_reasoning(),
    ]


def _check(expected: str, actual: str) -> None:
    difference = first_difference(expected, actual)
    assert difference is None, difference.describe(expected="encoder")


@pytest.mark.parametrize("conversation", _conversations(V32), ids=lambda c: c.name)
def test_v32_prompts_equal_the_encoder(conversation: Conversation) -> None:
    _check(v32_reference(conversation), profile_prompt(V32, conversation))


@pytest.mark.parametrize("conversation", _conversations(V4), ids=lambda c: c.name)
def test_v4_prompts_equal_the_encoder(conversation: Conversation) -> None:
    _check(v4_reference(conversation), profile_prompt(V4, conversation))


def test_the_thinking_switch_is_the_encoders_chat_mode() -> None:
    names = {c.name for c in conversations_for(V4) if not c.thinking}
    assert V32.thinking_switch
    assert V4.thinking_switch
    assert names == {
        "plain (thinking off)",
        "plain exchanges (thinking off)",
        "one tool call (thinking off)",
    }


def test_v4_replays_reasoning_exactly_when_tools_are_offered() -> None:
    assert V4.replay == "keep_with_tools"
    with_tools = profile_prompt(V4, _two_rounds())
    without = profile_prompt(V4, _two_rounds(tools=False))
    assert "<think>Paris first.</think>" in with_tools
    assert "<think>Now Oslo.</think>" in with_tools
    assert "Paris first." not in without
    assert "Now Oslo." not in without


def _section(version: str, conversation: Conversation) -> str:
    return DeepSeekDsmlTemplate(version).tools_section(conversation.tools)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "conversation",
    [c for c in _conversations(V32) if c.tools and c.transcript.messages[0].role == "system"],
    ids=lambda c: c.name,
)
def test_v32_tools_section_where_vllm_s_wrapper_puts_it(conversation: Conversation) -> None:
    """vLLM's V3.2 wrapper gives the tools a system message of their own in front of the
    caller's: the section comes first and the caller's system text follows it unseparated."""
    system = conversation.transcript.messages[0].text
    section = _section("v3.2", conversation)
    ours = profile_prompt(V32, conversation)
    vllm = ours.replace(f"{system}\n\n{section}", f"\n\n{section}{system}", 1)
    assert vllm != ours
    _check(v32_reference(conversation, own_system=True), vllm)


def test_v4_reasoning_effort_is_the_encoder_default() -> None:
    """vLLM's wrapper asks for ``high`` in thinking mode; its paragraph then leads the prompt."""
    from vllm.tokenizers.deepseek_v4_encoding import REASONING_EFFORT_PROMPTS

    conversation = conversations_for(V4)[0]
    ours = profile_prompt(V4, conversation)
    assert REASONING_EFFORT_PROMPTS["low"] == ""
    high = BOS + REASONING_EFFORT_PROMPTS["high"] + ours.removeprefix(BOS)
    _check(v4_reference(conversation, reasoning_effort="high"), high)


def test_v32_keep_all_writes_old_reasoning_in_place() -> None:
    """``keep_all`` (the caller's choice) keeps the finished tasks' reasoning, which the
    encoder cannot write: exactly the encoder's prompt with those blocks opened in place."""
    conversation = next(c for c in conversations_for(V32) if c.name == "plain exchanges")
    kept = profile_prompt(replace(V32, replay="keep_all"), conversation)
    expected = (
        v32_reference(conversation)
        .replace("></think>2 is prime.", "><think>Two is prime.</think>2 is prime.")
        .replace("></think>4 is even.", "><think>Even: four.</think>4 is even.")
    )
    assert "<think>Two is prime.</think>" in expected
    assert "<think>Even: four.</think>" in expected
    _check(expected, kept)


def test_v4_keep_all_without_tools_is_the_encoder_keeping_thinking() -> None:
    conversation = _two_rounds(tools=False)
    kept = profile_prompt(replace(V4, replay="keep_all"), conversation)
    _check(v4_reference(conversation, drop_thinking=False), kept)


def test_v4_message_order_of_a_user_turn_after_results() -> None:
    """A user message right after tool results joins their user turn (merge_tool_messages)."""
    first = _call("call_1", "Paris")
    t = Transcript()
    t.add("user", "Paris?")
    t.add("assistant", [ReasoningBlock(text="Look."), first])
    t.add("tool", [_result(first, "20C")])
    t.add("user", "Also Oslo.")
    conversation = Conversation("results then user", t, STANDARD_TOOLS)
    prompt = profile_prompt(V4, conversation)
    assert "<tool_result>20C</tool_result>\n\nAlso Oslo.<｜Assistant｜><think>" in prompt
    _check(v4_reference(conversation), prompt)
    messages = [Message(role="user", content=[TextBlock(text="x")])]
    assert profile_prompt(V4, Conversation("x", Transcript(messages=messages))).endswith("<think>")
