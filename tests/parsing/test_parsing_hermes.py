"""Hermes tool calls (Qwen2.5/Qwen3) with ``<think>`` reasoning: a corpus of realistic outputs,
every split of each, malformed calls, and render/parse round trips."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, json_values, run, splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import get_reasoning_syntax, get_tool_syntax
from agentkit.parsing.tools import HERMES
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock

THINK = get_reasoning_syntax("think")
MAKE = factory(THINK, HERMES)


def call(name: str, arguments: Any, *, key: str = "arguments") -> str:
    body = json.dumps({"name": name, key: arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


WEATHER = call("get_weather", {"city": "Paris", "unit": "celsius"})
TRICKY_ARGS = {
    "code": 'print("hi")\n\tif a < b and c > d: pass  # </tool_call> <think>',
    "path": "C:\\Users\\me\\file.txt",
    "unicode": "héllo 🌍 中文 \u2028 end",
    "nested": {"and": [{"x": 1}, {"y": [True, None, 2.5, -3e-7]}], "empty": {}, "list": []},
    "quote": '"',
    "backslash": "\\",
}

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "text only": ("Hello, world!", [{"type": "text", "text": "Hello, world!"}]),
    "reasoning then answer": (
        "<think>\nThe user wants 2+2.\n</think>\n\nThe answer is 4.",
        [
            {"type": "reasoning", "text": "The user wants 2+2.\n"},
            {"type": "text", "text": "The answer is 4."},
        ],
    ),
    "reasoning then call": (
        f"<think>\nI need the weather.\n</think>\n\n{WEATHER}",
        [
            {"type": "reasoning", "text": "I need the weather.\n"},
            {
                "type": "tool_call",
                "name": "get_weather",
                "arguments": {"city": "Paris", "unit": "celsius"},
                "error": None,
            },
        ],
    ),
    "text, two calls, text": (
        f"Let me check both cities.\n{WEATHER}\n{call('get_weather', {'city': 'Oslo'})}\n\n"
        "Waiting for results.",
        [
            {"type": "text", "text": "Let me check both cities.\n"},
            {
                "type": "tool_call",
                "name": "get_weather",
                "arguments": {"city": "Paris", "unit": "celsius"},
                "error": None,
            },
            {
                "type": "tool_call",
                "name": "get_weather",
                "arguments": {"city": "Oslo"},
                "error": None,
            },
            {"type": "text", "text": "Waiting for results."},
        ],
    ),
    "tricky arguments": (
        call("write", TRICKY_ARGS),
        [{"type": "tool_call", "name": "write", "arguments": TRICKY_ARGS, "error": None}],
    ),
    "escaped unicode arguments": (
        '<tool_call>\n{"name": "say", "arguments": {"t": "\\u00e9\\ud83c\\udf0d\\n\\"x\\""}}\n'
        "</tool_call>",
        [{"type": "tool_call", "name": "say", "arguments": {"t": 'é🌍\n"x"'}, "error": None}],
    ),
    "raw newlines inside a JSON string": (
        '<tool_call>\n{"name": "write", "arguments": {"text": "line 1\nline 2\t."}}\n</tool_call>',
        [
            {
                "type": "tool_call",
                "name": "write",
                "arguments": {"text": "line 1\nline 2\t."},
                "error": None,
            }
        ],
    ),
    "empty arguments": (
        '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
        [{"type": "tool_call", "name": "now", "arguments": {}, "error": None}],
    ),
    "no arguments key": (
        '<tool_call>{"name": "now"}</tool_call>',
        [{"type": "tool_call", "name": "now", "arguments": {}, "error": None}],
    ),
    "arguments before name": (
        '<tool_call>\n{"arguments": {"q": "a b"}, "name": "search"}\n</tool_call>',
        [{"type": "tool_call", "name": "search", "arguments": {"q": "a b"}, "error": None}],
    ),
    "parameters key": (
        call("search", {"q": "x"}, key="parameters"),
        [{"type": "tool_call", "name": "search", "arguments": {"q": "x"}, "error": None}],
    ),
    "arguments as a JSON string": (
        call("search", json.dumps({"q": "x", "n": 3})),
        [{"type": "tool_call", "name": "search", "arguments": {"q": "x", "n": 3}, "error": None}],
    ),
    "marker-like text in text": (
        "Compare a<b, use <thinking> tags, or </think> and <tool_call without closing.",
        [
            {
                "type": "text",
                "text": "Compare a<b, use <thinking> tags, or </think> and <tool_call without "
                "closing.",
            }
        ],
    ),
    "text then reasoning": (
        "Intro  \n<think>x</think>after",
        [
            {"type": "text", "text": "Intro  \n"},
            {"type": "reasoning", "text": "x"},
            {"type": "text", "text": "after"},
        ],
    ),
    "empty reasoning (non-thinking mode)": (
        "<think>\n\n</think>\n\nHi!",
        [{"type": "reasoning", "text": ""}, {"type": "text", "text": "Hi!"}],
    ),
    "interleaved reasoning and calls": (
        f"<think>r0</think>{call('a', {'i': 0})}<think>r1</think>{call('b', {'i': 1})}done",
        [
            {"type": "reasoning", "text": "r0"},
            {"type": "tool_call", "name": "a", "arguments": {"i": 0}, "error": None},
            {"type": "reasoning", "text": "r1"},
            {"type": "tool_call", "name": "b", "arguments": {"i": 1}, "error": None},
            {"type": "text", "text": "done"},
        ],
    ),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_whole_and_by_character(name: str) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output)) == expected


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_corpus_random_splits(name: str, data: st.DataObject) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output, data.draw(splits(output)))) == expected


def test_exact_interleaving_scenario() -> None:
    """<think>r0</think> call A <think>r1</think> call B text: five blocks, in order."""
    output = (
        "<think>r0</think>\n"
        + call("a", {"x": 1})
        + "\n<think>r1</think>\n"
        + call("b", {"y": 2})
        + "\nAll done."
    )
    blocks = check(MAKE, output)
    assert [type(b) for b in blocks] == [
        ReasoningBlock,
        ToolCallBlock,
        ReasoningBlock,
        ToolCallBlock,
        TextBlock,
    ]
    assert [getattr(b, "text", getattr(b, "name", None)) for b in blocks] == [
        "r0",
        "a",
        "r1",
        "b",
        "All done.",
    ]
    assert [b.id for b in calls(blocks)] == ["call_0", "call_1"]
    assert blocks[1].raw == "\n" + call("a", {"x": 1})


def test_call_starts_as_soon_as_its_name_is_known() -> None:
    parser = MAKE()
    events = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa')
    assert [e.type for e in events] == [
        "tool_call_started",
        "tool_call_arguments_delta",
    ]
    assert events[1].delta == '{"city": "Pa'  # type: ignore[union-attr]
    events = parser.feed('ris"}}\n</tool_')
    assert [e.type for e in events] == ["tool_call_arguments_delta"]
    events = parser.feed("call>")
    assert [e.type for e in events] == ["tool_call_complete"]


def test_raw_control_characters_are_escaped_in_deltas() -> None:
    output = '<tool_call>{"name": "w", "arguments": {"t": "a\nb"}}</tool_call>'
    _, events = run(MAKE, [output])
    deltas = "".join(e.delta for e in events if e.type == "tool_call_arguments_delta")  # type: ignore[union-attr]
    assert deltas == '{"t": "a\\nb"}'
    assert json.loads(deltas) == {"t": "a\nb"}


# -- malformed calls: errors the model can read, raw kept ----------------------------------------

MALFORMED: dict[str, tuple[str, str, str | None]] = {
    # name: (output, expected error substring, name of the call or None)
    "truncated inside the JSON": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa',
        "truncated",
        "get_weather",
    ),
    "truncated right after the marker": ("Sure.\n<tool_call>", "truncated", ""),
    "trailing comma": (
        '<tool_call>\n{"name": "a", "arguments": {"x": 1,}}\n</tool_call>',
        "invalid JSON in tool call",
        "a",
    ),
    "missing closing brace": (
        '<tool_call>\n{"name": "a", "arguments": {"x": 1}\n</tool_call>',
        "invalid JSON in tool call",
        "a",
    ),
    "not JSON at all": (
        "<tool_call>get_weather(city='Paris')</tool_call>",
        "invalid JSON in tool call",
        "",
    ),
    "empty call": ("<tool_call></tool_call>", "invalid JSON in tool call", ""),
    "missing name": ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"', ""),
    "name not a string": ('<tool_call>{"name": 7}</tool_call>', '"name"', ""),
    "arguments not an object": (
        '<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>',
        "must be a JSON object",
        "a",
    ),
    "text after the JSON object": (
        '<tool_call>{"name": "a", "arguments": {}}}\n</tool_call>',
        "unexpected text after",
        "a",
    ),
    "two objects in one call": (
        '<tool_call>{"name": "a", "arguments": {}} {"name": "b", "arguments": {}}</tool_call>',
        "exactly one JSON object",
        "a",
    ),
    "unterminated string swallows the rest": (
        '<tool_call>{"name": "a", "arguments": {"x": "oops}}</tool_call>\nMore text.',
        "truncated",
        "a",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    output, message, call_name = MALFORMED[name]
    blocks = check(MAKE, output)
    (bad,) = calls(blocks)
    assert bad.error is not None
    assert message in bad.error
    assert bad.arguments == {}
    assert bad.name == call_name
    assert output.endswith(bad.raw or "")


def test_text_after_a_broken_call_is_kept_as_text() -> None:
    output = '<tool_call>\n{"name": "a", "arguments": {"x": 1}\n</tool_call>\n\nLet me retry.'
    blocks = check(MAKE, output)
    assert [b.type for b in blocks] == ["tool_call", "text"]
    assert content(blocks)[1] == {"type": "text", "text": "Let me retry."}


@pytest.mark.parametrize(
    "ending", ["", "\n", "\n</tool", "\n</tool_call"], ids=["none", "newline", "partial", "almost"]
)
def test_missing_closing_tag_is_recovered(ending: str) -> None:
    output = (
        "Checking.\n"
        + call("get_weather", {"city": "Paris"}).removesuffix("\n</tool_call>")
        + ending
    )
    blocks = check(MAKE, output)
    (recovered,) = calls(blocks)
    assert recovered.error is None
    assert recovered.arguments == {"city": "Paris"}


def test_one_bad_call_does_not_spoil_the_next() -> None:
    output = '<tool_call>{"name": "a", "arguments": {,}}</tool_call>\n' + call("b", {"k": "v"})
    blocks = check(MAKE, output)
    first, second = calls(blocks)
    assert first.error is not None
    assert second.error is None
    assert second.arguments == {"k": "v"}


# -- render / parse ------------------------------------------------------------------------------

_CHARS = st.characters(blacklist_categories=("Cs",))
JSON_VALUES = json_values(
    st.text(_CHARS, max_size=12),
    keys=st.text(_CHARS, max_size=6),
    integers=st.integers(-(10**12), 10**12),
)
NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
MARKERS = ("<think>", "</think>", "<tool_call>")


def _text(min_size: int) -> st.SearchStrategy[str]:
    alphabet = st.sampled_from(list("ab <>/\n\t{}\"'\\é🌍_")) | _CHARS
    return st.text(alphabet, min_size=min_size, max_size=30).filter(
        lambda t: not t[:1].isspace() and not any(m in t for m in MARKERS)
    )


def block_lists(
    reasoning_first: bool = False,
) -> st.SearchStrategy[list[ReasoningBlock | TextBlock | ToolCallBlock]]:
    reasoning = _text(0).map(lambda t: ReasoningBlock(text=t))
    text = _text(1).map(lambda t: TextBlock(text=t))
    tool = st.builds(
        lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
        NAMES,
        st.dictionaries(st.text(_CHARS, max_size=8), JSON_VALUES, max_size=4),
    )

    def valid(blocks: list[Any]) -> bool:
        adjacent_text = any(
            isinstance(a, TextBlock) and isinstance(b, TextBlock)
            for a, b in itertools.pairwise(blocks)
        )
        return not adjacent_text and (
            not reasoning_first or (bool(blocks) and isinstance(blocks[0], ReasoningBlock))
        )

    return st.lists(reasoning | text | tool, max_size=6).filter(valid)


@settings(max_examples=50, deadline=None)
@given(blocks=block_lists(), data=st.data())
def test_render_then_parse_is_identity(blocks: list[Any], data: st.DataObject) -> None:
    from agentkit.parsing import render_blocks

    output = render_blocks(blocks, THINK, HERMES)
    parsed = check(MAKE, output, data.draw(splits(output)))
    assert content(parsed) == content(blocks)
    assert render_blocks(parsed, THINK, HERMES) == output  # exact: raw, byte for byte
    assert render_blocks(parsed, THINK, HERMES, exact=False) == output


def test_render_is_the_chat_template_form() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é", "n": [1]})
    assert HERMES.render([block, block]) == (
        '<tool_call>\n{"name": "f", "arguments": {"s": "é", "n": [1]}}\n</tool_call>\n'
        '<tool_call>\n{"name": "f", "arguments": {"s": "é", "n": [1]}}\n</tool_call>'
    )


def test_registry_aliases() -> None:
    assert get_tool_syntax("hermes") is HERMES
    assert get_tool_syntax("Qwen2.5") is HERMES
    assert get_tool_syntax("qwen25") is HERMES
