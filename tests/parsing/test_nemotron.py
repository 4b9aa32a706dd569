"""Nemotron ``<TOOLCALL>[...]</TOOLCALL>`` with ``<think>`` reasoning: a corpus under every split,
malformed sections, render/parse round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _linear_cost import section_meter, stream_in_chunks
from _parsing_helpers import (
    CHARS,
    Expected,
    call_lists,
    calls,
    check,
    content,
    corpus_tests,
    error_call,
    factory,
    reasoning_block,
    seeded_splits,
    soup_test,
    text_block,
    tool_call,
    tricky_arguments,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallComplete
from agentkit.parsing import get_reasoning_syntax, render_blocks
from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing.tools.nemotron import NEMOTRON_DECI
from agentkit.transcript import ToolCallBlock

THINK = get_reasoning_syntax("think")
MAKE = factory(THINK, NEMOTRON_DECI)


def section(*pairs: tuple[str, Any]) -> str:
    array = [{"name": n, "arguments": a} for n, a in pairs]
    return f"<TOOLCALL>{json.dumps(array, ensure_ascii=False)}</TOOLCALL>"


TRICKY = tricky_arguments("<TOOLCALL>[ a[0] ]} ", 'print("</TOOLCALL>")')

CORPUS: dict[str, tuple[str, Expected]] = {
    "one call": (
        section(("get_weather", {"city": "Paris"})),
        [tool_call("get_weather", {"city": "Paris"})],
    ),
    "reasoning, text, two calls, text": (
        "<think>\nTwo lookups.\n</think>\n\nOn it.\n"
        + section(("a", {"q": "x"}), ("b", {}))
        + "\nWaiting.",
        [
            reasoning_block("Two lookups.\n"),
            text_block("On it.\n"),
            tool_call("a", {"q": "x"}),
            tool_call("b", {}),
            text_block("Waiting."),
        ],
    ),
    "tricky arguments": (section(("write", TRICKY)), [tool_call("write", TRICKY)]),
    "pretty-printed": (
        '<TOOLCALL>[\n  {\n    "name": "f",\n    "arguments": {"a": 1}\n  }\n]\n</TOOLCALL>',
        [tool_call("f", {"a": 1})],
    ),
    "lone object": ('<TOOLCALL>{"name": "f", "arguments": {}}</TOOLCALL>', [tool_call("f", {})]),
    "arguments as a JSON string": (
        section(("f", json.dumps({"a": [1, 2]}))),
        [tool_call("f", {"a": [1, 2]})],
    ),
    "two sections": (
        section(("a", {})) + "\n" + section(("b", {"k": None})),
        [tool_call("a", {}), tool_call("b", {"k": None})],
    ),
    "marker-like text in text": (
        "Use <TOOLCALL without closing or </TOOLCALL> alone.",
        [text_block("Use <TOOLCALL without closing or </TOOLCALL> alone.")],
    ),
}


test_corpus_whole_and_by_character, test_corpus_random_splits = corpus_tests(MAKE, CORPUS)


def test_each_call_is_dispatched_before_the_section_ends() -> None:
    parser = MAKE()
    events = parser.feed('<TOOLCALL>[{"name": "a", "arguments": {}}')
    assert isinstance(events[-1], ToolCallComplete)
    assert events[-1].raw == '<TOOLCALL>[{"name": "a", "arguments": {}}'
    parser.feed(', {"name": "b", "arguments": {}}]</TOOLCALL>')
    parser.finish()
    assert parser.blocks[1].raw == ', {"name": "b", "arguments": {}}]</TOOLCALL>'  # type: ignore[union-attr]


def test_large_arguments_stream_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = \"</TOOLCALL>\" + '\\\\' # ]}\n" * 1500)[:32_000]
    meter = section_meter(monkeypatch, NEMOTRON_DECI, "<TOOLCALL>", (JsonObjectScanner, "feed"))
    streamed = stream_in_chunks(MAKE(), section(("write_file", {"content": value})), meter)
    assert streamed.arguments == {"content": value}


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
    error_call(MAKE, *MALFORMED[name])


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
    assert content(blocks)[-1] == text_block("ok")


@pytest.mark.parametrize("ending", ["", "]", "]\n", "]</TOOL", "</TOOLCALL>"])
def test_missing_closers_are_recovered(ending: str) -> None:
    output = '<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}' + ending
    (recovered,) = calls(check(MAKE, output))
    assert (recovered.arguments, recovered.error) == ({"a": 1}, None)


# -- render / parse ------------------------------------------------------------------------------

CALLS = call_lists(st.text(CHARS, min_size=1, max_size=10).filter(str.strip))


@settings(max_examples=60, deadline=None)
@given(blocks=CALLS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(blocks: list[Any], seed: int) -> None:
    output = render_blocks(blocks, THINK, NEMOTRON_DECI)
    parsed = check(MAKE, output, seeded_splits(output, seed))
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


test_any_output_keeps_every_byte_for_any_split = soup_test(MAKE, FRAGMENTS)
