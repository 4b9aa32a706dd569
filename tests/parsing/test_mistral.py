"""Mistral ``[TOOL_CALLS]`` (pre-v11 JSON arrays, v11 ``NAME[CALL_ID]ID[ARGS]{json}``, v13
``NAME[ARGS]{json}``) with ``[THINK]`` reasoning: a corpus under every split, malformed calls,
render/parse round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _linear_cost import section_meter, stream_in_chunks
from _parsing_helpers import (
    call_lists,
    calls,
    check,
    content,
    corpus_tests,
    error_call,
    factory,
    reasoning_block,
    run,
    seeded_splits,
    soup_test,
    text_block,
    tool_call,
    tricky_arguments,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import render_blocks
from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing.reasoning.markers import MISTRAL as THINK
from agentkit.parsing.tools.mistral import MISTRAL, MISTRAL_LEGACY, MISTRAL_V11
from agentkit.transcript import ToolCallBlock

MAKE = factory(THINK, MISTRAL)


def v11(name: str, arguments: Any, call_id: str | None = None) -> str:
    ident = f"[CALL_ID]{call_id}" if call_id else ""
    return f"[TOOL_CALLS]{name}{ident}[ARGS]{json.dumps(arguments, ensure_ascii=False)}"


def legacy(*pairs: tuple[str, Any]) -> str:
    array = [{"name": n, "arguments": a} for n, a in pairs]
    return f"[TOOL_CALLS] {json.dumps(array, ensure_ascii=False)}"


TRICKY = tricky_arguments("[/THINK] a[0] ]} ", 'print("[TOOL_CALLS]x[ARGS]{}")')

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "text only": ("Bonjour !", [text_block("Bonjour !")]),
    "v11 call": (
        v11("get_weather", {"city": "Paris"}),
        [tool_call("get_weather", {"city": "Paris"})],
    ),
    "v11 reasoning, text, two calls": (
        "[THINK]Two cities: two calls.[/THINK]Checking both."
        + v11("get_weather", {"city": "Paris"})
        + v11("get_weather", {"city": "Oslo"}),
        [
            reasoning_block("Two cities: two calls."),
            text_block("Checking both."),
            tool_call("get_weather", {"city": "Paris"}),
            tool_call("get_weather", {"city": "Oslo"}),
        ],
    ),
    "v11 with call ids": (
        v11("a", {"x": 1}, "abc123def") + v11("b", {}, "Z9y8X7w6V"),
        [tool_call("a", {"x": 1}), tool_call("b", {})],
    ),
    "v11 text, then calls with ids and tricky arguments": (
        "Checking."
        + v11("get_weather", {"city": "Paris"}, "a1B2c3D4e")
        + v11("write", TRICKY, "Z9y8X7w6V"),
        [
            text_block("Checking."),
            tool_call("get_weather", {"city": "Paris"}),
            tool_call("write", TRICKY),
        ],
    ),
    "v11 without [ARGS]": ('[TOOL_CALLS]lookup{"id": 7}', [tool_call("lookup", {"id": 7})]),
    "v11 tricky arguments": (v11("write", TRICKY), [tool_call("write", TRICKY)]),
    "v11 raw newline in a string": (
        '[TOOL_CALLS]w[ARGS]{"text": "a\nb"}',
        [tool_call("w", {"text": "a\nb"})],
    ),
    "v11 empty arguments": (v11("now", {}), [tool_call("now", {})]),
    "legacy array": (
        legacy(("a", {"q": "x y"}), ("b", TRICKY)),
        [tool_call("a", {"q": "x y"}), tool_call("b", TRICKY)],
    ),
    "legacy array with ids and text around": (
        'Sure.[TOOL_CALLS] [{"name": "f", "arguments": {"n": 1}, "id": "abc123def"}]\n\nDone?',
        [
            text_block("Sure."),
            tool_call("f", {"n": 1}),
            text_block("Done?"),
        ],
    ),
    "legacy lone object": ('[TOOL_CALLS]{"name": "f", "arguments": {}}', [tool_call("f", {})]),
    "legacy arguments before name": (
        '[TOOL_CALLS][{"arguments": {"k": [1]}, "name": "f"}]',
        [tool_call("f", {"k": [1]})],
    ),
    "marker-like text in text": (
        "Use [TOOL_CALL] or [THINK without closing, a[0] and {json}.",
        [text_block("Use [TOOL_CALL] or [THINK without closing, a[0] and {json}.")],
    ),
}


test_corpus_whole_and_by_character, test_corpus_random_splits = corpus_tests(MAKE, CORPUS)


def test_model_call_ids_are_kept() -> None:
    first, second = calls(check(MAKE, v11("a", {}, "abc123def") + v11("b", {})))
    assert first.id == "abc123def"
    assert second.id == "call_0"


def test_each_call_owns_its_marker() -> None:
    one, two = v11("a", {"x": 1}), v11("b", {})
    assert [b.raw for b in check(MAKE, one + "\n" + two)] == [one, "\n" + two]
    output = legacy(("a", {}), ("b", {})) + " ok"
    blocks = check(MAKE, output)
    assert [b.raw for b in blocks] == [
        '[TOOL_CALLS] [{"name": "a", "arguments": {}}',
        ', {"name": "b", "arguments": {}}]',
        " ok",
    ]


def test_call_starts_at_the_arguments_and_streams() -> None:
    parser = MAKE()
    assert parser.feed("[TOOL_CALLS]get_weather[AR") == []
    events = parser.feed('GS]{"city": "Pa')
    assert [e.type for e in events] == ["tool_call_started", "tool_call_arguments_delta"]
    assert [e.type for e in parser.feed('ris"')] == ["tool_call_arguments_delta"]
    assert [e.type for e in parser.feed("}")] == ["tool_call_arguments_delta", "tool_call_complete"]


def test_large_arguments_stream_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = \"[TOOL_CALLS]\" + '\\\\' # }\n" * 1500)[:32_000]
    meter = section_meter(monkeypatch, MISTRAL, "[TOOL_CALLS]", (JsonObjectScanner, "feed"))
    streamed = stream_in_chunks(MAKE(), v11("write_file", {"content": value}), meter)
    assert streamed.arguments == {"content": value}


# -- malformed calls -----------------------------------------------------------------------------

MALFORMED: dict[str, tuple[str, str, str]] = {
    # name: (output, expected error substring, call name)
    "truncated v11 arguments": ('[TOOL_CALLS]f[ARGS]{"a": "b', "truncated", "f"),
    "truncated before arguments": ("[TOOL_CALLS]get_wea", "truncated", ""),
    "truncated after name": ("[TOOL_CALLS]f[AR", "truncated", "f"),
    "truncated legacy array": ('[TOOL_CALLS][{"name": "f", "arguments": {"a', "truncated", "f"),
    "nothing after the marker": ("[TOOL_CALLS]", "truncated", ""),
    "invalid v11 JSON": ('[TOOL_CALLS]f[ARGS]{"a": tru}', "invalid JSON", "f"),
    "v11 arguments not an object": ("[TOOL_CALLS]f[ARGS][1, 2]", "invalid JSON arguments", "f"),
    "legacy arguments not an object": (
        '[TOOL_CALLS][{"name": "f", "arguments": [1]}]',
        "must be a JSON object",
        "f",
    ),
    "legacy missing name": ('[TOOL_CALLS][{"arguments": {}}]', 'no "name"', ""),
    "legacy empty array": ("[TOOL_CALLS][]", "empty list", ""),
    "legacy broken JSON": ('[TOOL_CALLS][{"name": "f", "arguments": {}]', "invalid JSON", "f"),
    "prose after the marker": ("[TOOL_CALLS]Sorry, I cannot.", "expected [ARGS]", "Sorry"),
    "no name": ('[TOOL_CALLS][ARGS]{"a": 1}', "invalid JSON", ""),
    "empty name": ('[TOOL_CALLS] {"arguments": {}}', 'no "name"', ""),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    error_call(MAKE, *MALFORMED[name])


def test_what_follows_a_broken_call_is_text() -> None:
    blocks = check(MAKE, "[TOOL_CALLS]Sorry, I cannot." + v11("f", {}))
    assert content(blocks)[1:] == [text_block(", I cannot."), tool_call("f", {})]


def test_missing_array_close_is_forgiven() -> None:
    output = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}} and then'
    blocks = check(MAKE, output)
    assert content(blocks) == [tool_call("f", {"a": 1}), text_block("and then")]


# -- render / parse ------------------------------------------------------------------------------

CALLS = call_lists(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.\-]{0,11}", fullmatch=True))


@pytest.mark.parametrize(
    "syntax", [MISTRAL, MISTRAL_V11, MISTRAL_LEGACY], ids=["v13", "v11", "legacy"]
)
@settings(max_examples=40, deadline=None)
@given(blocks=CALLS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(syntax: Any, blocks: list[Any], seed: int) -> None:
    output = render_blocks(blocks, THINK, syntax)
    parsed = check(factory(THINK, syntax), output, seeded_splits(output, seed))
    assert content(parsed) == content(blocks)


CALL_IDS = st.from_regex(r"[a-zA-Z0-9]{9}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(blocks=CALLS, ids=st.lists(CALL_IDS, min_size=8, max_size=8), seed=st.integers(0, 2**32))
def test_v11_render_then_parse_keeps_the_call_ids(
    blocks: list[Any], ids: list[str], seed: int
) -> None:
    """v11 writes each call's id after [CALL_ID]; the parser gives the call that id back, so a
    result written later answers the id the model wrote."""
    numbered = iter(ids)
    blocks = [
        b.model_copy(update={"id": next(numbered)}) if isinstance(b, ToolCallBlock) else b
        for b in blocks
    ]
    output = render_blocks(blocks, THINK, MISTRAL_V11)
    parsed = check(factory(THINK, MISTRAL_V11), output, seeded_splits(output, seed))
    assert [b.id for b in parsed if isinstance(b, ToolCallBlock)] == [
        b.id for b in blocks if isinstance(b, ToolCallBlock)
    ]


def test_v11_call_under_every_split() -> None:
    output = "Sure." + v11("lookup", {"key": "a]}[ARGS]"}, "a1B2c3D4e") + v11("now", {}, "x")
    for cut in range(len(output) + 1):
        for second in range(cut, len(output) + 1, 7):
            chunks = [output[:cut], output[cut:second], output[second:]]
            blocks = check(MAKE, output, [c for c in chunks if c])
            assert [b.id for b in calls(blocks)] == ["a1B2c3D4e", "x"]


def test_render_forms() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é"})
    assert MISTRAL.render([block, block]) == '[TOOL_CALLS]f[ARGS]{"s": "é"}' * 2
    assert MISTRAL_V11.render([block]) == '[TOOL_CALLS]f[CALL_ID]x[ARGS]{"s": "é"}'
    assert MISTRAL_LEGACY.render([block]) == '[TOOL_CALLS] [{"name": "f", "arguments": {"s": "é"}}]'
    assert (MISTRAL.name, MISTRAL_V11.name, MISTRAL_LEGACY.name) == (
        "mistral",
        "mistral_v11",
        "mistral_legacy",
    )


def test_reasoning_syntax() -> None:
    blocks, _ = run(MAKE, ["[THINK]a[/THINK]b"])
    assert content(blocks) == [reasoning_block("a"), text_block("b")]


FRAGMENTS = [
    "[TOOL_CALLS]",
    "[TOOL_CALLS] ",
    "[TOOL_",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "get_weather",
    "abc123def",
    '{"a": ',
    '"x]}"',
    '{"name": "f", "arguments": ',
    "{}",
    "[",
    "]",
    "}",
    ", ",
    "\n",
    "text",
    "<",
]


test_any_output_keeps_every_byte_for_any_split = soup_test(MAKE, FRAGMENTS)
