"""The deepseek-v4.1 profile without its encoder: lookup, layout, incremental rendering, the
calls it writes parsed back, the tool_choice grammar and the side-query tokens.

Its prompts are checked against DeepSeek-V4.1's own encoder in
``tests/slow/test_deepseek_v41_encoder.py`` (vLLM's copy, imported there only).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.errors import ConfigurationError
from agentkit.parsing import create_parser, get_tool_syntax, tool_call_constraint
from agentkit.profiles import get_profile, profile_for_model
from agentkit.profiles._deepseek_v41 import DeepSeekV41Template, calls_section
from agentkit.side_queries import side_query_prompts
from agentkit.template_check import STANDARD_TOOLS, Conversation, profile_prompt
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

PROFILE = get_profile("deepseek-v4.1")
TEMPLATE = PROFILE.template
assert isinstance(TEMPLATE, DeepSeekV41Template)
M = "｜DSML｜"
EFFORT = (
    "<｜System｜>Reasoning Effort: 75 "
    "(range 1-100, the higher the value, the more thorough the reasoning)\n\n"
)
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"


def _transcript(*messages: tuple[str, str | list[ContentBlock]]) -> Transcript:
    t = Transcript()
    for role, content in messages:
        t.add(role, content)  # type: ignore[arg-type]
    return t


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("deepseek-ai/DeepSeek-V4.1", "deepseek-v4.1"),
        ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek-v4.1"),
        ("/models/deepseek-v4-1-fp8", "deepseek-v4.1"),
        ("deepseek-v4.1", "deepseek-v4.1"),
        ("deepseek-ai/DeepSeek-V4", "deepseek-v4"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4"),
    ],
)
def test_served_names_pick_v41_and_still_v4(model: str, profile: str) -> None:
    assert profile_for_model(model).name == profile


def test_the_profile_names_its_formats_policy_and_reference() -> None:
    assert (PROFILE.reasoning, PROFILE.tool_format) == ("deepseek_v4", "deepseek_v41")
    assert PROFILE.replay == "keep_with_tools"
    assert PROFILE.thinking_switch
    assert PROFILE.stop == (EOS,)
    assert f"<{M} calls>" in PROFILE.special_tokens
    assert "deepseek_v41_encoding.py" in PROFILE.reference
    assert len(PROFILE.deviations) == 4


def test_head_system_token_effort_and_tools() -> None:
    user = _transcript(("user", "Hi."))
    assert TEMPLATE.render(user, []) == f"{BOS}{EFFORT}<｜User｜>Hi.<｜Assistant｜><think>"
    # chat mode: no effort, and no system part without a system message or tools
    assert TEMPLATE.render(user, [], thinking=False) == f"{BOS}<｜User｜>Hi.<｜Assistant｜></think>"
    system = _transcript(("system", "Be brief."), ("user", "Hi."))
    assert TEMPLATE.render(system, [], thinking=False).startswith(
        f"{BOS}<｜System｜>Be brief.<｜User｜>"
    )
    tools = TEMPLATE.render(user, list(STANDARD_TOOLS), thinking=False)
    assert tools.startswith(f"{BOS}<｜System｜>\n\n## Tools\n\n")
    assert f'writing a "<{M} calls>" block' in tools
    effort = DeepSeekV41Template(reasoning_effort=100).render(user, [])
    assert effort.startswith(f"{BOS}<｜System｜>Reasoning Effort: 100 (range")


@pytest.mark.parametrize("effort", [0, 101])
def test_an_effort_outside_1_to_100_is_a_configuration_error(effort: int) -> None:
    with pytest.raises(ConfigurationError, match="1-100"):
        DeepSeekV41Template(reasoning_effort=effort)


def test_system_messages_in_mid_conversation() -> None:
    t = _transcript(
        ("user", "Hi."),
        ("assistant", [ReasoningBlock(text="r"), TextBlock(text="Hello.")]),
        ("system", "Formal now."),
        ("user", "Bye."),
        ("system", "Be brief."),
    )
    assert TEMPLATE.render(t, []).removeprefix(BOS + EFFORT) == (
        f"<｜User｜>Hi.<｜Assistant｜><think>r</think>Hello.{EOS}"
        "<｜System｜>Formal now.<｜User｜>Bye.<｜System｜>Be brief.<｜Assistant｜><think>"
    )


def test_results_are_one_user_turn_in_call_order_and_calls_use_the_encoders_layout() -> None:
    a = ToolCallBlock(id="a", name="f", arguments={"x": "1", "y": [1]})
    b = ToolCallBlock(id="b", name="now")
    t = _transcript(
        ("user", "Go."),
        ("assistant", [ReasoningBlock(text="Two."), a, b]),
        ("tool", [ToolResultBlock(call_id="b", name="now", content="12:00")]),
        ("tool", [ToolResultBlock(call_id="a", name="f", content="done")]),
        ("user", "Quick."),
    )
    assert TEMPLATE.render(t, []).removeprefix(BOS + EFFORT) == (
        "<｜User｜>Go.<｜Assistant｜><think>Two.</think>\n\n"
        f"<{M} calls>\n"
        f'<{M} invoke name="f">\n'
        f'<{M} parameter name="x" string="true">1</{M} parameter>\n'
        f'<{M} parameter name="y" string="false">[1]</{M} parameter>\n'
        f"</{M} invoke>\n"
        f'<{M} invoke name="now">\n\n</{M} invoke>\n'
        f"</{M} calls>{EOS}"
        "<｜User｜><tool_result>done</tool_result>\n\n<tool_result>12:00</tool_result>\n\nQuick."
        "<｜Assistant｜><think>"
    )


def test_thinking_off_writes_no_reasoning() -> None:
    t = _transcript(
        ("user", "Hi."),
        ("assistant", [ReasoningBlock(text="r"), TextBlock(text="Hello.")]),
        ("user", "Bye."),
    )
    assert TEMPLATE.render(t, [], thinking=False) == (
        f"{BOS}<｜User｜>Hi.<｜Assistant｜></think>Hello.{EOS}<｜User｜>Bye.<｜Assistant｜></think>"
    )
    chat = DeepSeekV41Template(thinking=False)
    assert chat.render(t, []) == TEMPLATE.render(t, [], thinking=False)


def test_keep_with_tools_keeps_reasoning_only_with_tools() -> None:
    t = _transcript(
        ("user", "Hi."),
        ("assistant", [ReasoningBlock(text="r"), TextBlock(text="Hello.")]),
        ("user", "Bye."),
    )
    with_tools = profile_prompt(PROFILE, Conversation("t", t, STANDARD_TOOLS))
    without = profile_prompt(PROFILE, Conversation("t", t))
    assert "<｜Assistant｜><think>r</think>Hello." in with_tools
    assert "<｜Assistant｜></think>Hello." in without


def _generated(thinking: bool, output: str) -> Message:
    """The model's turn as the parser reads ``output``."""
    parser = create_parser("deepseek_v4", "deepseek_v41", thinking=thinking)
    parser.feed(output)
    parser.finish()
    message = Message(role="assistant", content=parser.blocks)
    assert message.raw == output
    return message


@pytest.mark.parametrize("thinking", [True, False])
def test_each_prompt_is_the_last_one_plus_the_output_plus_the_new_messages(thinking: bool) -> None:
    tools = list(STANDARD_TOOLS)
    t = _transcript(("system", "Be brief."), ("user", "Look Paris up."))
    reasoning = "Look it up.</think>" if thinking else ""
    outputs = [
        f"{reasoning}\n\n"
        + calls_section([ToolCallBlock(id="", name="lookup", arguments={"key": "Paris"})]).lstrip(),
        f"{reasoning}20C.",
        f"{reasoning}Bye.",
    ]
    follow: list[tuple[str, Any]] = [
        ("tool", None),
        ("system", "Answer in French."),
        ("user", "Merci."),
    ]
    for output, (role, content) in zip(outputs, follow, strict=True):
        prompt = TEMPLATE.render(t, tools, thinking=thinking)
        message = _generated(thinking, output)
        t.append(message)
        n = len(t.messages)
        if role == "tool":
            (call,) = message.tool_calls
            t.add("tool", [ToolResultBlock(call_id=call.id, name=call.name, content="20C")])
        else:
            t.add(role, content)
        assert TEMPLATE.render(t, tools, thinking=thinking) == (
            prompt + output + EOS + TEMPLATE.render_continuation(t, n, thinking=thinking)
        )


NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,20}", fullmatch=True)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
).filter(lambda v: not isinstance(v, str) or f"</{M} parameter>" not in v)
CALLS = st.lists(
    st.builds(
        lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
        NAMES,
        st.dictionaries(NAMES, VALUES, max_size=4),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(found=CALLS, text=st.sampled_from(["", "Sure."]))
def test_the_calls_the_template_writes_parse_back(found: list[ToolCallBlock], text: str) -> None:
    content: list[ContentBlock] = [ReasoningBlock(text="r")]
    content += [TextBlock(text=text)] if text else []
    t = _transcript(("user", "Go."), ("assistant", [*content, *found]))
    prompt = TEMPLATE.render(t, [], add_generation_prompt=False)
    output = prompt.split("<｜Assistant｜><think>", 1)[1].removesuffix(EOS)
    parser = create_parser("deepseek_v4", "deepseek_v41")
    for char in output:
        parser.feed(char)
    parser.finish()
    calls = [b for b in parser.blocks if isinstance(b, ToolCallBlock)]
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        (c.name, c.arguments, None) for c in found
    ]


def test_tool_choice_grammar_is_in_v41s_own_format() -> None:
    syntax = get_tool_syntax(PROFILE.tool_format or "")
    document = json.dumps(tool_call_constraint(syntax, {"f": {}}, name="f"), ensure_ascii=False)
    assert f'"<{M} calls>\\n"' in document
    assert f'<{M} invoke name=\\"f\\">\\n' in document
    assert '"deepseek_v4_1_xml"' in document
    assert "tool_calls" not in document


@pytest.mark.parametrize(
    ("kind", "ending"),
    [
        ("action", "<｜User｜>Hi.<｜Assistant｜><think><｜action｜>"),
        ("query", "<｜User｜>Hi.<｜query｜>"),
        ("title", f"Hello.{EOS}<｜title｜>"),
    ],
)
def test_side_queries_use_v4s_task_tokens(kind: str, ending: str) -> None:
    t = _transcript(("user", "Hi."))
    if kind == "title":
        t.add("assistant", [ReasoningBlock(text="r"), TextBlock(text="Hello.")])
    [prompt] = side_query_prompts(PROFILE, object(), t, kind)  # type: ignore[arg-type]
    assert prompt.text.endswith(ending)
    assert prompt.text.startswith(BOS + EFFORT)


def test_replace_keeps_the_template_a_v41_template() -> None:
    profile = replace(PROFILE, template=DeepSeekV41Template(reasoning_effort=50))
    assert "Reasoning Effort: 50 " in profile.render(_transcript(("user", "Hi.")))
