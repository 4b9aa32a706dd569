"""Nemotron ``<TOOLCALL>[...]</TOOLCALL>`` with ``<think>`` reasoning: a corpus under every split,
malformed sections, render/parse round trips."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallArgumentsDelta, ToolCallComplete
from agentkit.parsing import get_reasoning_syntax, render_blocks
from agentkit.parsing.tools.nemotron import NEMOTRON_DECI
from agentkit.transcript import ToolCallBlock

THINK = get_reasoning_syntax("think")
MAKE = factory(THINK, NEMOTRON_DECI)


def section(*pairs: tuple[str, Any]) -> str:
    array = [{"name": n, "arguments": a} for n, a in pairs]
    return f"<TOOLCALL>{json.dumps(array, ensure_ascii=False)}</TOOLCALL>"


def c(name: str, arguments: Any, error: str | None = None) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": arguments, "error": error}


TRICKY = {
    "code": 'print("</TOOLCALL>")\n\tif a[0] < b: pass  # <TOOLCALL>[ ]} ',
    "path": "C:\\Users\\me\\file.txt",
    "unicode": "héllo 🌍 中文 \u2028 end",
    "nested": {"and": [{"x": 1}, {"y": [True, None, 2.5, -3e-7]}], "empty": {}, "list": []},
    "quote": '"',
}

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "one call": (
        section(("get_weather", {"city": "Paris"})),
        [c("get_weather", {"city": "Paris"})],
    ),
    "reasoning, text, two calls, text": (
        "<think>\nTwo lookups.\n</think>\n\nOn it.\n"
        + section(("a", {"q": "x"}), ("b", {}))
        + "\nWaiting.",
        [
            {"type": "reasoning", "text": "Two lookups.\n"},
            {"type": "text", "text": "On it.\n"},
            c("a", {"q": "x"}),
            c("b", {}),
            {"type": "text", "text": "Waiting."},
        ],
    ),
    "tricky arguments": (section(("write", TRICKY)), [c("write", TRICKY)]),
    "pretty-printed": (
        '<TOOLCALL>[\n  {\n    "name": "f",\n    "arguments": {"a": 1}\n  }\n]\n</TOOLCALL>',
        [c("f", {"a": 1})],
    ),
    "lone object": ('<TOOLCALL>{"name": "f", "arguments": {}}</TOOLCALL>', [c("f", {})]),
    "arguments as a JSON string": (
        section(("f", json.dumps({"a": [1, 2]}))),
        [c("f", {"a": [1, 2]})],
    ),
    "two sections": (
        section(("a", {})) + "\n" + section(("b", {"k": None})),
        [c("a", {}), c("b", {"k": None})],
    ),
    "marker-like text in text": (
        "Use <TOOLCALL without closing or </TOOLCALL> alone.",
        [{"type": "text", "text": "Use <TOOLCALL without closing or </TOOLCALL> alone."}],
    ),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_whole_and_by_character(name: str) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output)) == expected


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_corpus_random_splits(name: str, data: st.DataObject) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output, data.draw(splits(output)))) == expected


def test_each_call_is_dispatched_before_the_section_ends() -> None:
    parser = MAKE()
    events = parser.feed('<TOOLCALL>[{"name": "a", "arguments": {}}')
    assert isinstance(events[-1], ToolCallComplete)
    assert events[-1].raw == '<TOOLCALL>[{"name": "a", "arguments": {}}'
    parser.feed(', {"name": "b", "arguments": {}}]</TOOLCALL>')
    parser.finish()
    assert parser.blocks[1].raw == ', {"name": "b", "arguments": {}}]</TOOLCALL>'  # type: ignore[union-attr]


def test_large_arguments_stream_linearly() -> None:
    value = ("x = \"</TOOLCALL>\" + '\\\\' # ]}\n" * 1500)[:32_000]
    output = section(("write_file", {"content": value}))
    parser = MAKE()
    streamed: list[str] = []
    start = time.perf_counter()
    for i in range(0, len(output), 3):
        events = parser.feed(output[i : i + 3])
        streamed += [e.delta for e in events if isinstance(e, ToolCallArgumentsDelta)]
    parser.finish()
    assert time.perf_counter() - start < 5
    assert json.loads("".join(streamed)) == {"content": value}


# -- malformed sections --------------------------------------------------------------------------

MALFORMED: dict[str, tuple[str, str, str]] = {
    # name: (output, expected error substring, call name)
    "truncated JSON": ('<TOOLCALL>[{"name": "f", "arguments": {"a": "b', "truncated", "f"),
    "nothing after the marker": ("Sure.<TOOLCALL>", "no tool call", ""),
    "empty array": ("<TOOLCALL>[]</TOOLCALL>", "empty list", ""),
    "broken JSON": ('<TOOLCALL>[{"name": "f", "arguments": {bad}]</TOOLCALL>', "invalid JSON", "f"),
    "invalid scalar": (
        '<TOOLCALL>[{"name": "f", "arguments": {"a": tru}}]</TOOLCALL>',
        "JSON",
        "f",
    ),
    "not JSON": ("<TOOLCALL>f(a=1)</TOOLCALL>", "expected a JSON array", ""),
    "missing name": ('<TOOLCALL>[{"arguments": {}}]</TOOLCALL>', 'no "name"', ""),
    "arguments not an object": (
        '<TOOLCALL>[{"name": "f", "arguments": 3}]</TOOLCALL>',
        "must be a JSON object",
        "f",
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


def test_a_broken_call_skips_to_the_end_marker_and_keeps_earlier_calls() -> None:
    output = (
        '<TOOLCALL>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {,}}]</TOOLCALL>ok'
    )
    blocks = check(MAKE, output)
    good, bad = calls(blocks)
    assert (good.name, good.error) == ("a", None)
    assert bad.name == "b"
    assert bad.error is not None
    assert bad.raw == ', {"name": "b", "arguments": {,}}]</TOOLCALL>'
    assert content(blocks)[-1] == {"type": "text", "text": "ok"}


@pytest.mark.parametrize("ending", ["", "]", "]\n", "]</TOOL", "</TOOLCALL>"])
def test_missing_closers_are_recovered(ending: str) -> None:
    output = '<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}' + ending
    (recovered,) = calls(check(MAKE, output))
    assert (recovered.arguments, recovered.error) == ({"a": 1}, None)


# -- render / parse ------------------------------------------------------------------------------

_CHARS = st.characters(blacklist_categories=("Cs",))
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_CHARS, max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
CALLS = st.lists(
    st.builds(
        lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
        st.text(_CHARS, min_size=1, max_size=10).filter(str.strip),
        st.dictionaries(st.text(_CHARS, max_size=8), JSON_VALUES, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(blocks=CALLS, data=st.data())
def test_render_then_parse_is_identity(blocks: list[Any], data: st.DataObject) -> None:
    output = render_blocks(blocks, THINK, NEMOTRON_DECI)
    parsed = check(MAKE, output, data.draw(splits(output)))
    assert content(parsed) == content(blocks)


def test_render_form() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é"})
    assert NEMOTRON_DECI.render([block, block]) == (
        '<TOOLCALL>[{"name": "f", "arguments": {"s": "é"}}, '
        '{"name": "f", "arguments": {"s": "é"}}]</TOOLCALL>'
    )


FRAGMENTS = [
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<TOOL",
    "</TOOL",
    "<think>",
    "</think>",
    '{"name": "f", "arguments": ',
    '{"a": ',
    '"x</TOOLCALL>"',
    "{}",
    "[",
    "]",
    "}",
    ", ",
    "\n",
    "text",
]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14), data=st.data())
def test_any_output_keeps_every_byte_for_any_split(parts: list[str], data: st.DataObject) -> None:
    output = "".join(parts)
    check(MAKE, output, data.draw(splits(output)))
