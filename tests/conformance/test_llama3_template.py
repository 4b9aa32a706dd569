"""The llama3 profile against Llama 3.1's own chat template (``llama-3.1-instruct.jinja``, the
reference) and against vLLM's JSON tool template (``llama-3.1_vllm-json.jinja``, where the two
disagree the model's own is followed)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from _references import jinja_reference

from agentkit.errors import ConfigurationError
from agentkit.parsing import create_parser
from agentkit.profiles import get_profile
from agentkit.profiles._llama import Llama3Template
from agentkit.template_check import (
    STANDARD_TOOLS,
    SYSTEM,
    Conversation,
    conversations_for,
    first_difference,
    profile_prompt,
)
from agentkit.transcript import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

PROFILE = get_profile("llama3")
TEMPLATE = PROFILE.template
assert isinstance(TEMPLATE, Llama3Template)
BOS = "<|begin_of_text|>"


def model_template(**variables: Any) -> Any:
    return jinja_reference("llama-3.1-instruct.jinja", bos_token=BOS, **variables)


def vllm_template(**variables: Any) -> Any:
    return jinja_reference("llama-3.1_vllm-json.jinja", bos_token=BOS, **variables)


def _transcript(*messages: tuple[str, Any]) -> Transcript:
    t = Transcript()
    for role, content in messages:
        t.add(role, content)
    return t


OSLO = ToolCallBlock(id="c1", name="lookup", arguments={"key": "Oslo"})
WRITE = ToolCallBlock(
    id="c2",
    name="write_file",
    arguments={"path": "a.md", "content": 'Ünïcödé\n"x"', "options": {"tags": ["a"]}},
)


def _result(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, name=call.name, content=content)


def family_conversations() -> list[Conversation]:
    """Beyond the standard set: calls one per message (how a client writes a Llama 3.1
    conversation with two calls), whitespace the template trims, a JSON tool output."""
    return [
        Conversation(
            "one call per message",
            _transcript(
                ("system", SYSTEM),
                ("user", "Look Oslo up, then save a note."),
                ("assistant", [OSLO]),
                ("tool", [_result(OSLO, '{"values": ["5C"]}')]),
                ("assistant", [WRITE]),
                ("tool", [_result(WRITE, "written: 12 bytes\nok")]),
                ("assistant", [TextBlock(text="Oslo: 5C. Note saved.")]),
                ("user", "Thanks."),
            ),
            STANDARD_TOOLS,
        ),
        Conversation(
            "whitespace around messages",
            _transcript(
                ("system", "  Be brief.\n"),
                ("user", "\n Hi! \n"),
                ("assistant", [TextBlock(text=" Hello. \n")]),
                ("user", "Bye.\n\n"),
            ),
        ),
        Conversation(
            "whitespace around the first user message with tools",
            _transcript(("user", "\nWhat is in Oslo?  ")),
            STANDARD_TOOLS,
        ),
    ]


CONVERSATIONS = conversations_for(PROFILE) + family_conversations()
BY_NAME = {c.name: c for c in CONVERSATIONS}
PARALLEL = {"tools, results and a new user turn"}
"""Conversations the model's template cannot express: two calls in one message."""


@pytest.mark.parametrize(
    "conversation", [c for c in CONVERSATIONS if c.name not in PARALLEL], ids=lambda c: c.name
)
def test_llama3_prompts_equal_the_template(conversation: Conversation) -> None:
    difference = first_difference(
        model_template()(conversation), profile_prompt(PROFILE, conversation)
    )
    assert difference is None, difference.describe()


def test_the_profile_has_no_reasoning() -> None:
    assert PROFILE.reasoning is None
    for conversation in conversations_for(PROFILE):
        for message in conversation.transcript.messages:
            assert not any(isinstance(b, ReasoningBlock) for b in message.content)


def test_the_date_is_the_templates_date_string() -> None:
    """The template writes ``date_string`` (``26 Jul 2024`` by default); so does the profile
    (``Llama3Template.date``)."""
    conversation = BY_NAME["plain"]
    assert "Today Date: 26 Jul 2024\n" in profile_prompt(PROFILE, conversation)
    dated = Llama3Template(date="02 Dec 2026")
    prompt = dated.render(conversation.transcript, conversation.tools)
    assert "Today Date: 02 Dec 2026\n" in prompt
    assert model_template(date_string="02 Dec 2026")(conversation) == prompt


# --- what the template cannot express ---------------------------------------------------------


def test_two_calls_in_one_message_are_written_as_llama3_json_writes_them() -> None:
    """The template raises on more than one call per message; agentkit writes them joined by
    ``; `` (what the llama3_json parser reads back), without the message's text, as the
    template writes a call message."""
    conversation = BY_NAME["tools, results and a new user turn"]
    with pytest.raises(ConfigurationError, match="only supports single tool-calls"):
        model_template()(conversation)
    prompt = profile_prompt(PROFILE, conversation)
    calls = (
        '{"name": "lookup", "parameters": {"key": "Paris", "limit": 2}}; '
        '{"name": "write_file", "parameters": '
    )
    assert f"<|start_header_id|>assistant<|end_header_id|>\n\n{calls}" in prompt
    assert "Doing both now." not in prompt
    # The same conversation, one call per message, is the template's.
    messages = conversation.transcript.messages
    lookup, write = messages[2].tool_calls
    split = _transcript(
        (messages[0].role, messages[0].text),
        (messages[1].role, messages[1].text),
        ("assistant", [lookup]),
        ("tool", messages[3].content),
        ("assistant", [write]),
        ("tool", messages[4].content),
        ("assistant", messages[5].content),
        ("user", messages[6].text),
    )
    one_by_one = Conversation("split", split, conversation.tools)
    expected = model_template()(one_by_one)
    assert profile_prompt(PROFILE, one_by_one) == expected
    joined = calls.removesuffix('{"name": "write_file", "parameters": ').removesuffix("; ")
    assert prompt == expected.replace(
        joined + "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"
        '"{\\"values\\": [\\"20C\\", \\"sunny\\"]}"<|eot_id|>'
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        joined + "; ",
    ).replace(
        '<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"written',
        '<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"{\\"values\\": [\\"20C\\", '
        '\\"sunny\\"]}"<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"written',
    )


def test_a_call_message_drops_its_text_as_the_template_does() -> None:
    conversation = Conversation(
        "text and a call",
        _transcript(
            ("user", "Oslo?"),
            ("assistant", [TextBlock(text="Let me look."), OSLO]),
            ("tool", [_result(OSLO, "5C")]),
        ),
        STANDARD_TOOLS,
    )
    prompt = profile_prompt(PROFILE, conversation)
    assert prompt == model_template()(conversation)
    assert "Let me look." not in prompt
    assert '\n\n{"name": "lookup", "parameters": {"key": "Oslo"}}<|eot_id|>' in prompt


def test_tool_outputs_are_json_strings() -> None:
    """The template's ``tojson`` for a string output (a string is ``iterable`` in Jinja)."""
    prompt = profile_prompt(PROFILE, BY_NAME["one tool call"])
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n"5 degrees"<|eot_id|>' in prompt


# --- vLLM's JSON tool template ----------------------------------------------------------------

_VLLM_SPACE = "dictionary of argument name and its value}. Do not use variables."
_MODEL_SPACE = "dictionary of argument name and its value}.Do not use variables."
_VLLM_DEFAULT_SYSTEM = (
    "You are a helpful assistant with tool calling capabilities. Only reply with a tool call "
    "if the function exists in the library provided by the user. If it doesn't exist, just "
    "reply directly in natural language. When you receive a tool call response, use the "
    "output to format an answer to the original user question."
)


def _as_vllm_writes_it(conversation: Conversation, prompt: str) -> str:
    """The profile's prompt with vLLM's template's differences applied: the space after
    ``value}.``, the default system message with tools, ``{"output": ...}`` tool results."""
    prompt = prompt.replace(_MODEL_SPACE, _VLLM_SPACE)
    messages = conversation.transcript.messages
    if conversation.tools and not (messages and messages[0].role == "system"):
        prompt = prompt.replace("\n\n<|eot_id|>", f"\n\n{_VLLM_DEFAULT_SYSTEM}<|eot_id|>", 1)
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                quoted = json.dumps(block.content, ensure_ascii=False)
                wrapped = json.dumps({"output": block.content}, ensure_ascii=False)
                prompt = prompt.replace(f"\n\n{quoted}<|eot_id|>", f"\n\n{wrapped}<|eot_id|>")
    return prompt


@pytest.mark.parametrize(
    "conversation", [c for c in CONVERSATIONS if c.name not in PARALLEL], ids=lambda c: c.name
)
def test_vllms_template_differs_only_as_named(conversation: Conversation) -> None:
    vllm = vllm_template(date_string="26 Jul 2024")(conversation)
    assert vllm == _as_vllm_writes_it(conversation, profile_prompt(PROFILE, conversation))


def test_vllms_template_writes_todays_date() -> None:
    conversation = BY_NAME["plain"]
    for _ in range(2):  # a render across midnight sees two days: try again
        today = datetime.date.today().strftime("%d %b %Y")
        vllm = vllm_template()(conversation)
        if datetime.date.today().strftime("%d %b %Y") == today:
            break
    assert f"Today Date: {today}\n" in vllm
    assert "Today Date: 26 Jul 2024\n" in profile_prompt(PROFILE, conversation)


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda c: c.name)
def test_calls_parse_back(conversation: Conversation) -> None:
    """What the template writes for a call message is output the llama3_json parser reads
    back as the same calls."""
    for message in conversation.transcript.messages:
        if message.role != "assistant" or not message.tool_calls:
            continue
        t = Transcript(messages=[message])
        body = TEMPLATE.render(t, [], add_generation_prompt=False)
        body = body.split("<|end_header_id|>\n\n")[-1].removesuffix("<|eot_id|>")
        parser = create_parser(None, "llama3_json")
        parser.feed(body)
        parser.finish()
        parsed = [(b.name, b.arguments, b.error) for b in parser.blocks if b.type == "tool_call"]
        assert parsed == [(c.name, c.arguments, None) for c in message.tool_calls]


def test_reasoning_from_other_models_is_kept_as_think_text() -> None:
    """Llama writes no reasoning; a transcript from a reasoning model keeps its blocks as
    ``<think>`` text in place (replay keep_all), where the template ignores them."""
    conversation = Conversation(
        "reasoning",
        _transcript(
            ("user", "Hi"),
            ("assistant", [ReasoningBlock(text="Greet."), TextBlock(text="Hello.")]),
            ("user", "Oslo?"),
            ("assistant", [ReasoningBlock(text="Look."), OSLO]),
            ("tool", [_result(OSLO, "5C")]),
        ),
        STANDARD_TOOLS,
    )
    assert PROFILE.replay == "keep_all"
    prompt = profile_prompt(PROFILE, conversation)
    template = model_template()(conversation)
    assert prompt == template.replace("\n\nHello.", "\n\n<think>Greet.</think>Hello.").replace(
        '\n\n{"name": "lookup"', '\n\n<think>Look.</think>{"name": "lookup"'
    )
