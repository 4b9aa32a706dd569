"""Memoized rendering of a model's own chat template: a render after appended messages reuses
what the template's message loops wrote for the earlier ones, and its text is the template's,
byte for byte, for every reference template and any conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.errors import ConfigurationError
from agentkit.profiles import HFChatTemplate
from agentkit.profiles._template_loops import memoized_template
from agentkit.profiles._template_memo import RenderMemo
from agentkit.template_check import STANDARD_TOOLS, standard_conversations
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

REFERENCES = Path(__file__).resolve().parents[1].parent / "shared" / "reference-templates"
TEMPLATES = sorted(p.name for p in REFERENCES.glob("*.jinja"))
VARIABLES = {"bos_token": "<s>", "eos_token": "</s>"}


def test_the_reference_templates_are_there() -> None:
    assert len(TEMPLATES) >= 10, f"reference templates not found in {REFERENCES}"


def outcome(template: HFChatTemplate, view: Transcript, tools: Any, **options: Any) -> str:
    """The render, or the error it raised (both paths must agree on both)."""
    try:
        return template.render(view, tools, **options)
    except ConfigurationError as error:
        return f"ERROR {error}"


def growing(
    template: HFChatTemplate, transcript: Transcript, tools: Any, memo: RenderMemo, **options: Any
) -> None:
    """Render every prefix of ``transcript`` through one memo, each equal to a plain render."""
    messages = transcript.messages
    for n in range(1, len(messages) + 1):
        view = Transcript.model_construct(messages=messages[:n])
        expected = outcome(template, view, tools, **options)
        assert outcome(template, view, tools, memo=memo, **options) == expected, n


@pytest.mark.parametrize("name", TEMPLATES)
def test_standard_conversations_render_the_same_through_a_memo(name: str) -> None:
    template = HFChatTemplate(REFERENCES / name, profile=f"memo {name}", variables=VARIABLES)
    memo = RenderMemo()
    for conversation in standard_conversations():
        growing(template, conversation.transcript, conversation.tools, memo)


WORDS = st.text(alphabet='ab <|>_/\n"{}', max_size=10)
MARKERS = st.sampled_from(["<|im_end|>", "</think>", "<tool_response>", "[INST]", "\n\n"])
CONTENT = st.lists(st.one_of(WORDS, MARKERS), max_size=4).map("".join)
TOOL_NAMES = st.sampled_from(["lookup", "write_file"])


@st.composite
def turns(draw: st.DrawFn) -> list[Message]:
    """A conversation of any shape: system or not, user turns, assistant turns with reasoning,
    text and calls in any order, the calls' results, consecutive messages of one role."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message(role="system", content=[TextBlock(text=draw(CONTENT))]))
    count = 0
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "user"]))
        if kind == "user":
            messages.append(Message(role="user", content=[TextBlock(text=draw(CONTENT))]))
            continue
        blocks: list[Any] = []
        calls: list[ToolCallBlock] = []
        for part in draw(st.lists(st.sampled_from(["think", "text", "call"]), max_size=4)):
            if part == "think":
                blocks.append(ReasoningBlock(text=draw(CONTENT)))
            elif part == "text":
                blocks.append(TextBlock(text=draw(CONTENT)))
            else:
                count += 1
                call = ToolCallBlock(
                    id=f"call_{count}", name=draw(TOOL_NAMES), arguments={"key": draw(CONTENT)}
                )
                calls.append(call)
                blocks.append(call)
        messages.append(Message(role="assistant", content=blocks or [TextBlock(text="")]))
        if kind == "tools" and calls:
            results = [
                ToolResultBlock(call_id=c.id, name=c.name, content=draw(CONTENT)) for c in calls
            ]
            messages.append(Message(role="tool", content=results))
    return messages


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(TEMPLATES),
    messages=turns(),
    tools=st.booleans(),
    thinking=st.lists(st.booleans(), min_size=1, max_size=3),
)
def test_any_conversation_renders_the_same_through_a_memo(
    name: str, messages: list[Message], tools: bool, thinking: list[bool]
) -> None:
    """Every prefix of a random conversation, rendered through one memo (with thinking
    switched on and off between renders), equals the plain render, or fails the same way."""
    template = HFChatTemplate(REFERENCES / name, profile=f"memo {name}", variables=VARIABLES)
    memo = RenderMemo()
    transcript = Transcript.model_construct(messages=messages)
    for on in thinking:
        growing(template, transcript, STANDARD_TOOLS if tools else [], memo, thinking=on)


@pytest.mark.parametrize("name", TEMPLATES)
@settings(max_examples=4, deadline=None)
@given(messages=turns())
def test_every_reference_template_renders_random_conversations_the_same(
    name: str, messages: list[Message]
) -> None:
    template = HFChatTemplate(REFERENCES / name, profile=f"memo {name}", variables=VARIABLES)
    growing(template, Transcript.model_construct(messages=messages), STANDARD_TOOLS, RenderMemo())


def test_qwen3s_history_is_reused_not_rendered_again() -> None:
    """The point of it: in a tool loop only the messages whose input changed are rendered
    (the new ones, the last one before them that read ``loop.last`` or the next message)."""
    template = HFChatTemplate(REFERENCES / "qwen3.jinja", profile="memo qwen3 reuse")
    memo = RenderMemo()
    messages = list(standard_conversations()[3].transcript.messages)  # a tool call and result
    for i in range(20):
        call = ToolCallBlock(id=f"c{i}", name="lookup", arguments={"key": str(i)})
        messages.append(Message(role="assistant", content=[ReasoningBlock(text="r"), call]))
        result = ToolResultBlock(call_id=f"c{i}", name="lookup", content="x")
        messages.append(Message(role="tool", content=[result]))
    transcript = Transcript.model_construct(messages=messages)
    template.render(transcript, STANDARD_TOOLS, memo=memo)
    rendered = memo.rendered
    call = ToolCallBlock(id="c20", name="lookup", arguments={"key": "last"})
    messages.append(Message(role="assistant", content=[ReasoningBlock(text="r"), call]))
    result = ToolResultBlock(call_id="c20", name="lookup", content="y")
    messages.append(Message(role="tool", content=[result]))
    transcript = Transcript.model_construct(messages=messages)
    plain = template.render(transcript, STANDARD_TOOLS)
    assert template.render(transcript, STANDARD_TOOLS, memo=memo) == plain
    # The two new messages, the last result (it read loop.last and the next message's role)
    # and the first message (``messages[loop.index0 - 1]`` is the last one there), not the
    # 43 messages again; the two tools are reused too.
    assert memo.rendered - rendered == 4
    assert memo.reused == 2 + 41
    # A new user message moves Qwen3's "last query": its whole history is rendered again.
    messages.append(Message(role="user", content=[TextBlock(text="Thanks.")]))
    transcript = Transcript.model_construct(messages=messages)
    before = memo.rendered
    assert template.render(transcript, STANDARD_TOOLS, memo=memo) == template.render(
        transcript, STANDARD_TOOLS
    )
    assert memo.rendered - before == len(messages)


def render_both(tmp_path: Path, source: str, conversations: list[list[str]]) -> RenderMemo:
    """Render each conversation (user messages) plainly and through one memo: equal."""
    path = tmp_path / "t.jinja"
    path.write_text(source, encoding="utf-8")
    template = HFChatTemplate(path, profile=f"memo {tmp_path.name}")
    memo = RenderMemo()
    pool: dict[str, Message] = {}  # one message object per text, as a transcript keeps them
    for texts in conversations:
        messages = [
            pool.setdefault(t, Message(role="user", content=[TextBlock(text=t)])) for t in texts
        ]
        transcript = Transcript.model_construct(messages=messages)
        assert template.render(transcript, [], memo=memo) == template.render(transcript, [])
    return memo


GROWING = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]


@pytest.mark.parametrize(
    "source",
    [
        # Reads the next and previous message, loop.last, loop.length and revindex.
        "{% for m in messages %}{{ m.content }}{% if not loop.last %}"
        "{{ messages[loop.index0 + 1].content }}{% endif %}{{ messages[loop.index0 - 1].content }}"
        "{{ loop.length }}{{ loop.revindex }}{{ loop.nextitem is defined }};{% endfor %}",
        # A namespace attribute computed over all messages before the loop.
        "{% set ns = namespace(last=0) %}{% for m in messages %}{% set ns.last = loop.index0 %}"
        "{% endfor %}{% for m in messages %}{{ loop.index0 == ns.last }}{% endfor %}",
        # A stateful helper made before the loop: its loop is rendered every time.
        "{% set sep = joiner('|') %}{% for m in messages %}{{ sep() }}{{ m.content }}{% endfor %}",
        # The namespace changes inside the loop: not rewritten.
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{{ ns.n }}{% endfor %}{{ ns.n }}",
        # Break, cycle, changed, a filter test, an else block, a recursive loop.
        "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m.content }}"
        "{% endfor %}",
        "{% for m in messages %}{{ loop.cycle('x', 'y') }}{{ loop.changed(m.role) }}{% endfor %}",
        "{% for m in messages if m.content != 'b' %}{{ m.content }}{% else %}none{% endfor %}",
        "{% for m in messages recursive %}{{ m.content }}{% endfor %}",
        # A macro defined before the loop, and a nested loop with its own ``loop``.
        "{% macro show(m) %}<{{ m.content }}>{% endmacro %}{% for m in messages %}{{ show(m) }}"
        "{% for c in m.content %}{{ loop.last }}{% endfor %}{% endfor %}",
        # The neighbours through the loop, over a list and over iterators.
        "{% for m in messages %}{% if not loop.first %}{{ loop.previtem.content }}{% endif %}-"
        "{% if not loop.last %}{{ loop.nextitem.content }}{% endif %}{{ loop.revindex0 }}"
        "{% endfor %}",
        "{% for m in messages | reverse %}{{ m.content }}{{ loop.last }}{{ loop.length }}"
        "{{ loop.previtem is defined }}{% endfor %}",
        "{% for m in messages | selectattr('content') %}{{ m.content }}{{ loop.nextitem }}"
        "{{ messages[loop.index] is defined }}{% endfor %}",
        # Whitespace control around the loop body.
        "{%- for m in messages %}\n  {{- m.content }}\n{% endfor %}\n",
    ],
)
def test_hand_written_loops_render_the_same(tmp_path: Path, source: str) -> None:
    render_both(tmp_path, source, [*GROWING, ["x"], ["x", "b", "c"], *GROWING])


def test_a_loop_reading_only_its_own_message_is_reused(tmp_path: Path) -> None:
    memo = render_both(
        tmp_path, "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}", GROWING
    )
    assert (memo.rendered, memo.reused) == (4, 6)


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        ("{% for m in messages %}{{ m.content }}{% endfor %}", 1),
        ("{% if x %}{% for m in messages %}{{ m }}{% endfor %}{% endif %}", 1),
        ("{% set ns = namespace(a=1) %}{% for m in messages %}{% set ns.a = 2 %}{% endfor %}", 0),
        ("{% for m in messages %}{{ strftime_now('%Y') }}{% endfor %}", 0),
        ("{% for m in messages %}{{ [1, 2] | random }}{% endfor %}", 0),
        ("{% for m in messages %}{% continue %}{% endfor %}", 0),
        ("{% for m in messages %}{% for c in m %}{% break %}{% endfor %}{% endfor %}", 1),
        ("{% for a, b in messages %}{{ a }}{% endfor %}", 0),
        ("{% for m in messages %}{% include 'x' %}{% endfor %}", 0),
    ],
)
def test_which_loops_are_rewritten(source: str, rewritten: int) -> None:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(extensions=[loopcontrols])
    env.globals["strftime_now"] = lambda format: format
    _, plans = memoized_template(env, source)
    assert len(plans) == rewritten


def test_the_prompt_builder_renders_through_its_memo(tmp_path: Path) -> None:
    """The native path's prompts in a tool loop: each the template's text, extending the last,
    with the history's iterations reused from the builder's memo."""
    from agentkit._prompt import PromptBuilder
    from agentkit.engine import TokenizedScriptedEngine
    from agentkit.profiles import get_profile, native_profile

    profile = native_profile(REFERENCES / "qwen3.jinja", base=get_profile("qwen3"))
    engine = TokenizedScriptedEngine([], specials=get_profile("qwen3").special_tokens)
    builder = PromptBuilder(profile, engine, [dict(t) for t in STANDARD_TOOLS])
    transcript = Transcript.from_prompt("Go.", system="Be brief.")
    for i in range(6):
        prompt = builder.next_prompt(transcript)
        assert prompt.text == profile.template.render(transcript, STANDARD_TOOLS)
        assert prompt.rebuilt is None or i == 0
        call = json.dumps({"name": "lookup", "arguments": {"key": str(i)}})
        output = f"<think>\nStep {i}.\n</think>\n\n<tool_call>\n{call}\n</tool_call>"
        parser = profile.new_parser({"lookup": {}})
        parser.feed(output)
        parser.finish()
        ids = [*engine.encode(output), *engine.encode("<|im_end|>")]
        message = Message(role="assistant", content=list(parser.blocks), token_ids=ids)
        transcript.append(message)
        builder.record(transcript, message)
        result = ToolResultBlock(call_id=message.tool_calls[0].id, name="lookup", content="x")
        transcript.add("tool", [result])
    memo = builder._memo
    assert memo.reused > memo.rendered > 0
