"""Mistral ``[TOOL_CALLS]`` (pre-v11 JSON arrays and v11+ ``NAME[ARGS]{json}``) with ``[THINK]``
reasoning: a corpus under every split, malformed calls, render/parse round trips."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, run, splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallArgumentsDelta
from agentkit.parsing import render_blocks
from agentkit.parsing.reasoning.markers import MISTRAL as THINK
from agentkit.parsing.tools.mistral import MISTRAL, MISTRAL_LEGACY
from agentkit.transcript import ToolCallBlock

MAKE = factory(THINK, MISTRAL)


def v11(name: str, arguments: Any, call_id: str | None = None) -> str:
    ident = f"[CALL_ID]{call_id}" if call_id else ""
    return f"[TOOL_CALLS]{name}{ident}[ARGS]{json.dumps(arguments, ensure_ascii=False)}"


def legacy(*pairs: tuple[str, Any]) -> str:
    array = [{"name": n, "arguments": a} for n, a in pairs]
    return f"[TOOL_CALLS] {json.dumps(array, ensure_ascii=False)}"


def c(name: str, arguments: Any, error: str | None = None) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": arguments, "error": error}


TRICKY = {
    "code": 'print("[TOOL_CALLS]x[ARGS]{}")\n\tif a[0] < b: pass  # [/THINK] ]} ',
    "path": "C:\\Users\\me\\file.txt",
    "unicode": "héllo 🌍 中文 \u2028 end",
    "nested": {"and": [{"x": 1}, {"y": [True, None, 2.5, -3e-7]}], "empty": {}, "list": []},
    "quote": '"',
}

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "text only": ("Bonjour !", [{"type": "text", "text": "Bonjour !"}]),
    "v11 call": (v11("get_weather", {"city": "Paris"}), [c("get_weather", {"city": "Paris"})]),
    "v11 reasoning, text, two calls": (
        "[THINK]Two cities: two calls.[/THINK]Checking both."
        + v11("get_weather", {"city": "Paris"})
        + v11("get_weather", {"city": "Oslo"}),
        [
            {"type": "reasoning", "text": "Two cities: two calls."},
            {"type": "text", "text": "Checking both."},
            c("get_weather", {"city": "Paris"}),
            c("get_weather", {"city": "Oslo"}),
        ],
    ),
    "v11 with call ids": (
        v11("a", {"x": 1}, "abc123def") + v11("b", {}, "Z9y8X7w6V"),
        [c("a", {"x": 1}), c("b", {})],
    ),
    "v11 without [ARGS]": ('[TOOL_CALLS]lookup{"id": 7}', [c("lookup", {"id": 7})]),
    "v11 tricky arguments": (v11("write", TRICKY), [c("write", TRICKY)]),
    "v11 raw newline in a string": (
        '[TOOL_CALLS]w[ARGS]{"text": "a\nb"}',
        [c("w", {"text": "a\nb"})],
    ),
    "v11 empty arguments": (v11("now", {}), [c("now", {})]),
    "legacy array": (
        legacy(("a", {"q": "x y"}), ("b", TRICKY)),
        [c("a", {"q": "x y"}), c("b", TRICKY)],
    ),
    "legacy array with ids and text around": (
        'Sure.[TOOL_CALLS] [{"name": "f", "arguments": {"n": 1}, "id": "abc123def"}]\n\nDone?',
        [
            {"type": "text", "text": "Sure."},
            c("f", {"n": 1}),
            {"type": "text", "text": "Done?"},
        ],
    ),
    "legacy lone object": ('[TOOL_CALLS]{"name": "f", "arguments": {}}', [c("f", {})]),
    "legacy arguments before name": (
        '[TOOL_CALLS][{"arguments": {"k": [1]}, "name": "f"}]',
        [c("f", {"k": [1]})],
    ),
    "marker-like text in text": (
        "Use [TOOL_CALL] or [THINK without closing, a[0] and {json}.",
        [{"type": "text", "text": "Use [TOOL_CALL] or [THINK without closing, a[0] and {json}."}],
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


def test_large_arguments_stream_linearly() -> None:
    value = ("x = \"[TOOL_CALLS]\" + '\\\\' # }\n" * 1500)[:32_000]
    output = v11("write_file", {"content": value})
    parser = MAKE()
    streamed: list[str] = []
    start = time.perf_counter()
    for i in range(0, len(output), 3):
        events = parser.feed(output[i : i + 3])
        streamed += [e.delta for e in events if isinstance(e, ToolCallArgumentsDelta)]
    parser.finish()
    assert time.perf_counter() - start < 5
    assert json.loads("".join(streamed)) == {"content": value}


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
    output, message, call_name = MALFORMED[name]
    blocks = check(MAKE, output)
    bad = calls(blocks)[0]
    assert bad.error is not None
    assert message in bad.error
    assert bad.arguments == {}
    assert bad.name == call_name


def test_what_follows_a_broken_call_is_text() -> None:
    blocks = check(MAKE, "[TOOL_CALLS]Sorry, I cannot." + v11("f", {}))
    assert content(blocks)[1:] == [{"type": "text", "text": ", I cannot."}, c("f", {})]


def test_missing_array_close_is_forgiven() -> None:
    output = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}} and then'
    blocks = check(MAKE, output)
    assert content(blocks) == [c("f", {"a": 1}), {"type": "text", "text": "and then"}]


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
        st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.\-]{0,11}", fullmatch=True),
        st.dictionaries(st.text(_CHARS, max_size=8), JSON_VALUES, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.parametrize("syntax", [MISTRAL, MISTRAL_LEGACY], ids=["v11", "legacy"])
@settings(max_examples=40, deadline=None)
@given(blocks=CALLS, data=st.data())
def test_render_then_parse_is_identity(syntax: Any, blocks: list[Any], data: st.DataObject) -> None:
    output = render_blocks(blocks, THINK, syntax)
    parsed = check(factory(THINK, syntax), output, data.draw(splits(output)))
    assert content(parsed) == content(blocks)


def test_render_forms() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é"})
    assert MISTRAL.render([block, block]) == '[TOOL_CALLS]f[ARGS]{"s": "é"}' * 2
    assert MISTRAL_LEGACY.render([block]) == '[TOOL_CALLS] [{"name": "f", "arguments": {"s": "é"}}]'


def test_reasoning_syntax() -> None:
    blocks, _ = run(MAKE, ["[THINK]a[/THINK]b"])
    assert content(blocks) == [{"type": "reasoning", "text": "a"}, {"type": "text", "text": "b"}]


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


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14), data=st.data())
def test_any_output_keeps_every_byte_for_any_split(parts: list[str], data: st.DataObject) -> None:
    output = "".join(parts)
    check(MAKE, output, data.draw(splits(output)))
