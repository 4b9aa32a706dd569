"""Llama 3 JSON tool calls: sections opened by the leading ``{`` (JSON that is not a call stays
text) and by ``<|python_tag|>``, through the driver under any split; render/parse."""

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
    factory,
    seeded_splits,
    soup_test,
    text_block,
    tool_call,
    tricky_arguments,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing.tools.llama3 import LLAMA3_JSON
from agentkit.transcript import ToolCallBlock

MAKE = factory(None, LLAMA3_JSON)


def obj(name: str, arguments: Any, key: str = "parameters") -> str:
    return json.dumps({"name": name, key: arguments}, ensure_ascii=False)


TRICKY = tricky_arguments("}; {", 'print("<|python_tag|>")\n\tx = {"a": [1]}; y = 2')

# -- sections opened by the leading "{" ----------------------------------------------------------

LEADING: dict[str, tuple[str, Expected]] = {
    # (an expected call's error is a part of the actual one)
    "one call": (
        obj("get_weather", {"city": "Paris"}),
        [tool_call("get_weather", {"city": "Paris"})],
    ),
    "leading whitespace": ("\n " + obj("f", {}), [tool_call("f", {})]),
    "several calls": (
        obj("a", {"x": 1}) + "; " + obj("b", TRICKY, key="arguments") + ";" + obj("c", {}),
        [tool_call("a", {"x": 1}), tool_call("b", TRICKY), tool_call("c", {})],
    ),
    "type member and end token": (
        '{"type": "function", "name": "f", "parameters": {"k": "v"}}<|eom_id|>',
        [tool_call("f", {"k": "v"})],
    ),
    "raw newline in a string": (
        '{"name": "w", "parameters": {"t": "a\nb"}}',
        [tool_call("w", {"t": "a\nb"})],
    ),
    "text after the call": (
        obj("f", {}) + " and some words",
        [tool_call("f", {}), text_block("and some words")],
    ),
    "truncated": ('{"name": "f", "parameters": {"a": ', [tool_call("f", {}, "truncated")]),
    "invalid JSON": (
        '{"name": "f", "parameters": {"a": tru}}',
        [tool_call("f", {}, "invalid JSON")],
    ),
}


test_leading_sections, test_leading_sections_random_splits = corpus_tests(
    MAKE, LEADING, examples=10, partial_errors=True
)


def test_text_after_the_calls_goes_back_to_the_driver() -> None:
    output = obj("f", {}) + "; " + obj("g", {}) + "  \nThat was it."
    blocks = check(MAKE, output)
    assert [b.raw for b in blocks] == [
        obj("f", {}),
        "; " + obj("g", {}) + "  \n",
        "That was it.",
    ]
    assert content(blocks)[-1] == text_block("That was it.")


@pytest.mark.parametrize(
    ("output", "schemas"),
    [
        ('{"answer": 42}', None),
        ("{not json at all}", None),
        ('{"name": "Bob", "age": 3}', {"get_weather": {}}),
        ("{}", None),
    ],
)
def test_json_that_is_not_a_call_stays_text(output: str, schemas: Any) -> None:
    assert content(check(factory(None, LLAMA3_JSON, schemas=schemas), output)) == [
        text_block(output)
    ]


def test_known_tool_is_a_call() -> None:
    make = factory(None, LLAMA3_JSON, schemas={"get_weather": {}})
    assert content(check(make, obj("get_weather", {}))) == [tool_call("get_weather", {})]


def test_a_later_non_call_is_an_error_not_text() -> None:
    first, second = calls(check(MAKE, obj("f", {}) + '; {"x": 1}'))
    assert (first.name, first.error) == ("f", None)
    assert second.name == ""
    assert second.error is not None


# -- <|python_tag|> sections -----------------------------------------------------------------------

CORPUS: dict[str, tuple[str, Expected]] = {
    "python tag": (
        "<|python_tag|>" + obj("get_weather", {"city": "Paris"}),
        [tool_call("get_weather", {"city": "Paris"})],
    ),
    "text then tag, two calls": (
        "Let me check.\n<|python_tag|>" + obj("a", TRICKY) + "; " + obj("b", {}) + "<|eom_id|>",
        [text_block("Let me check.\n"), tool_call("a", TRICKY), tool_call("b", {})],
    ),
    "tag then non-JSON": (
        '<|python_tag|>brave_search.call(query="x")',
        [
            tool_call("", {}, "invalid JSON in tool call: expected '{' but found 'b'"),
            text_block('brave_search.call(query="x")'),
        ],
    ),
    "marker-like text": (
        "A <|python_ta g|> and {json}.",
        [text_block("A <|python_ta g|> and {json}.")],
    ),
}

test_python_tag_corpus, test_python_tag_corpus_random_splits = corpus_tests(MAKE, CORPUS)


def test_each_call_owns_its_separator() -> None:
    output = "<|python_tag|>" + obj("a", {}) + "; " + obj("b", {}) + "<|eom_id|>"
    assert [b.raw for b in calls(check(MAKE, output))] == [
        "<|python_tag|>" + obj("a", {}),
        "; " + obj("b", {}) + "<|eom_id|>",
    ]


def test_large_arguments_stream_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = \"<|eom_id|>\" + '\\\\' # }; {\n" * 1500)[:32_000]
    meter = section_meter(monkeypatch, LLAMA3_JSON, "{", (JsonObjectScanner, "feed"))
    streamed = stream_in_chunks(MAKE(), obj("write_file", {"content": value}), meter)
    assert len(streamed.at_half) > 16_000  # streamed while written
    assert streamed.arguments == {"content": value}


# -- render / parse ------------------------------------------------------------------------------

CALLS = call_lists(st.text(CHARS, min_size=1, max_size=10).filter(str.strip))


@settings(max_examples=60, deadline=None)
@given(blocks=CALLS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(blocks: list[ToolCallBlock], seed: int) -> None:
    output = LLAMA3_JSON.render(blocks)
    for text in (output, "<|python_tag|>" + output):
        assert content(check(MAKE, text, seeded_splits(text, seed))) == content(blocks)


def test_render_form() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é"})
    assert LLAMA3_JSON.render([block, block]) == (
        '{"name": "f", "parameters": {"s": "é"}}; {"name": "f", "parameters": {"s": "é"}}'
    )


FRAGMENTS = [
    "<|python_tag|>",
    "<|python_",
    "<|eom_id|>",
    '{"name": "f", "parameters": ',
    '"name": "g"',
    '{"a": ',
    '"x; }"',
    "{}",
    "[1]",
    "}",
    "; ",
    ", ",
    "\n",
    "text",
]


test_any_output_keeps_every_byte_for_any_split = soup_test(MAKE, FRAGMENTS)
test_any_leading_output_keeps_every_byte_for_any_split = soup_test(
    factory(None, LLAMA3_JSON, schemas={"f": {}}), FRAGMENTS, prefix="{"
)
