"""Kimi K2 tool calls: the model's own call ids, a corpus under every split, the section parser
driven directly, malformed and truncated calls, render/parse round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _parsing_helpers import (
    calls,
    check,
    content,
    drive_section,
    factory,
    json_values,
    run,
    seeded_splits,
    soups,
    tricky_arguments,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallArgumentsDelta, ToolCallStarted
from agentkit.parsing import CallArguments, CallEnd, CallStart, render_blocks
from agentkit.parsing.reasoning import THINK
from agentkit.parsing.tools.kimi_k2 import (
    ARGUMENT_BEGIN,
    CALL_BEGIN,
    CALL_END,
    KIMI_K2,
    SECTION_BEGIN,
    SECTION_BEGIN_SINGULAR,
    SECTION_END,
    SECTION_END_SINGULAR,
)
from agentkit.transcript import ToolCallBlock

MAKE = factory(THINK, KIMI_K2)


def call(call_id: str, arguments: Any, *, ascii: bool = False) -> str:
    body = json.dumps(arguments, ensure_ascii=ascii)
    return f"{CALL_BEGIN}{call_id}{ARGUMENT_BEGIN}{body}{CALL_END}"


def section(*calls_text: str, begin: str = SECTION_BEGIN, end: str = SECTION_END) -> str:
    return begin + "".join(calls_text) + end


def ok(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments, "error": None}


TRICKY = tricky_arguments(
    '{"x": 1}', f"{CALL_END}{SECTION_END}{CALL_BEGIN}functions.x:9{ARGUMENT_BEGIN}<|tool_"
)
WEATHER = {"city": "Paris", "unit": "celsius"}

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "reasoning, text, two calls": (
        "<think>Need both cities.</think>\n\nChecking.\n"
        + section(
            call("functions.get_weather:0", WEATHER),
            call("functions.get_weather:1", {"city": "Oslo"}),
        ),
        [
            {"type": "reasoning", "text": "Need both cities."},
            {"type": "text", "text": "Checking.\n"},
            ok("functions.get_weather:0", "get_weather", WEATHER),
            ok("functions.get_weather:1", "get_weather", {"city": "Oslo"}),
        ],
    ),
    "tricky arguments, text after": (
        section(call("functions.write:3", TRICKY)) + "\nWritten.",
        [ok("functions.write:3", "write", TRICKY), {"type": "text", "text": "Written."}],
    ),
    "escaped unicode, empty arguments": (
        section(call("functions.say:4", TRICKY, ascii=True), call("functions.now:5", {})),
        [ok("functions.say:4", "say", TRICKY), ok("functions.now:5", "now", {})],
    ),
    "singular section markers, whitespace between calls": (
        section(
            call("functions.a:0", {"x": 1}),
            "\n",
            call("functions.b:1", {"y": [2]}),
            begin=SECTION_BEGIN_SINGULAR,
            end=SECTION_END_SINGULAR,
        ),
        [ok("functions.a:0", "a", {"x": 1}), ok("functions.b:1", "b", {"y": [2]})],
    ),
    "odd names and tolerated ids": (
        section(
            call("functions.ns.tool:name:12", {}),
            call(" search:7 ", {"q": "a"}),
            call("functions.lookup", {"k": 1}),
            f'{CALL_BEGIN}functions.raw:8{ARGUMENT_BEGIN} {{"t": "a\nb"}} {CALL_END}',
        ),
        [
            ok("functions.ns.tool:name:12", "ns.tool:name", {}),
            ok("search:7", "search", {"q": "a"}),
            ok("call_0", "lookup", {"k": 1}),
            ok("functions.raw:8", "raw", {"t": "a\nb"}),
        ],
    ),
}


def with_ids(blocks: list[Any]) -> list[dict[str, Any]]:
    return [b.model_dump(exclude={"raw", "signature"}) for b in blocks]


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_whole_and_by_character(name: str) -> None:
    output, expected = CORPUS[name]
    assert with_ids(check(MAKE, output)) == expected


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_corpus_random_splits(name: str, seed: int) -> None:
    output, expected = CORPUS[name]
    assert with_ids(check(MAKE, output, seeded_splits(output, seed))) == expected


def test_call_starts_with_its_id_and_arguments_stream() -> None:
    parser = MAKE()
    assert parser.feed(f"{SECTION_BEGIN}{CALL_BEGIN}functions.get_weather:0") == []
    events = parser.feed(f'{ARGUMENT_BEGIN}{{"city": "Pa')
    assert events == [
        ToolCallStarted(index=0, id="functions.get_weather:0", name="get_weather"),
        ToolCallArgumentsDelta(index=0, id="functions.get_weather:0", delta='{"city": "Pa'),
    ]
    assert [e.type for e in parser.feed('ris"}<|tool_call_')] == ["tool_call_arguments_delta"]
    assert [e.type for e in parser.feed("end|>")] == ["tool_call_complete"]


def test_section_events_driven_directly() -> None:
    body = call("functions.a:0", {"k": "v"}) + call("functions.b:1", {}) + SECTION_END
    for chunks in ([body + "after"], list(body + "after")):
        events, owned, rest = drive_section(KIMI_K2, SECTION_BEGIN, chunks)
        assert (owned, rest) == (body, "after")  # the calls' raw, then the end marker
        assert events == [
            CallStart("a", "functions.a:0"),
            CallArguments('{"k": "v"}'),
            CallEnd({"k": "v"}, call("functions.a:0", {"k": "v"}), name="a"),
            CallStart("b", "functions.b:1"),
            CallArguments("{}"),
            CallEnd({}, call("functions.b:1", {}), name="b"),
        ]


# -- malformed calls -----------------------------------------------------------------------------

MALFORMED: dict[str, tuple[str, str, str]] = {
    # name: (output, error substring, call name)
    "invalid JSON": (section(call("functions.f:0", {}).replace("{}", '{"a": }')), "JSON", "f"),
    "no name": (section(call("functions.:0", {})), "no function name", ""),
    "empty header": (section(call("", {})), "no function name", ""),
    "no argument marker": (
        section(f"{CALL_BEGIN}functions.f:0{CALL_END}"),
        "no arguments",
        "f",
    ),
    "arguments not an object": (
        section(f"{CALL_BEGIN}functions.f:0{ARGUMENT_BEGIN}[1]{CALL_END}"),
        "must be one JSON object",
        "f",
    ),
    "text after the arguments": (
        section(f'{CALL_BEGIN}functions.f:0{ARGUMENT_BEGIN}{{"a": 1}} and more{CALL_END}'),
        "unexpected text after",
        "f",
    ),
    "truncated inside the JSON": (
        f'Sure.{SECTION_BEGIN}{CALL_BEGIN}functions.f:0{ARGUMENT_BEGIN}{{"a": [1, ',
        "truncated",
        "f",
    ),
    "truncated inside the header": (
        f"{SECTION_BEGIN}{CALL_BEGIN}functions.get_wea",
        "name was complete",
        "",
    ),
    "empty section": (f"{SECTION_BEGIN}\n{SECTION_END}", "without any call", ""),
    "truncated after the section marker": (f"Sure.{SECTION_BEGIN}", "without any call", ""),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    output, message, call_name = MALFORMED[name]
    (bad,) = calls(check(MAKE, output))
    assert bad.error is not None
    assert message in bad.error, bad.error
    assert bad.arguments == {}
    assert bad.name == call_name
    assert output.endswith(bad.raw or "")


@pytest.mark.parametrize("ending", ["", " ", "<|tool_call_e", CALL_END, CALL_END + "<|tool_calls"])
def test_complete_json_without_closing_markers_is_recovered(ending: str) -> None:
    output = f'{SECTION_BEGIN}{CALL_BEGIN}functions.f:2{ARGUMENT_BEGIN}{{"a": 1}}{ending}'
    (recovered,) = calls(check(MAKE, output))
    assert recovered.error is None
    assert (recovered.id, recovered.name, recovered.arguments) == ("functions.f:2", "f", {"a": 1})


def test_bad_call_then_good_call_then_text() -> None:
    output = (
        section(
            f"{CALL_BEGIN}functions.a:0{ARGUMENT_BEGIN}{{oops}}{CALL_END}",
            call("functions.b:1", {"k": "v"}),
        )
        + "Retrying."
    )
    blocks = check(MAKE, output)
    assert [(b.type, getattr(b, "error", None) is None) for b in blocks] == [
        ("tool_call", False),
        ("tool_call", True),
        ("text", True),
    ]
    assert calls(blocks)[0].id == "functions.a:0"


def test_arguments_stream_as_strict_json() -> None:
    value = "line 1\nline 2 " + '<|tool_call_end|> \\ "é" ' * 300
    body = json.dumps({"t": value}, ensure_ascii=False).replace("\\n", "\n", 1)  # a raw newline
    output = section(f"{CALL_BEGIN}functions.w:0{ARGUMENT_BEGIN}{body}{CALL_END}")
    blocks, events = run(MAKE, [output[i : i + 5] for i in range(0, len(output), 5)])
    deltas = "".join(e.delta for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert json.loads(deltas) == calls(blocks)[0].arguments == {"t": value}


SOUP = [CALL_BEGIN, CALL_END, SECTION_BEGIN, SECTION_END, SECTION_BEGIN_SINGULAR, ARGUMENT_BEGIN]
SOUP += ["functions.f:0", "f", ":", "{", "}", '"', "\\", ",", "1", " ", "\n", "<", "|", "</think>"]


@settings(max_examples=40, deadline=None)
@given(output=soups(SOUP), seed=st.integers(0, 2**32))
def test_any_output_is_owned_and_split_invariant(output: str, seed: int) -> None:
    check(MAKE, output, seeded_splits(output, seed))


# -- render / parse ------------------------------------------------------------------------------

_SPECIAL = st.sampled_from(["<", "|", "\\", '"', "\n", "{", "}", ":", CALL_END, SECTION_END])
_STRINGS = st.lists(st.characters(exclude_categories=["Cs"]) | _SPECIAL, max_size=8).map("".join)
JSON_VALUES = json_values(_STRINGS, integers=st.integers(-(10**12), 10**12), max_leaves=6)
NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,15}", fullmatch=True)
IDS = st.one_of(st.just("call_abc"), st.integers(0, 99).map(str))


@st.composite
def call_lists(draw: st.DrawFn) -> list[ToolCallBlock]:
    blocks = []
    for name in draw(st.lists(NAMES, min_size=1, max_size=3)):
        suffix = draw(IDS)
        call_id = f"functions.{name}:{suffix}" if suffix.isdigit() else suffix
        arguments = draw(st.dictionaries(_STRINGS, JSON_VALUES, max_size=3))
        blocks.append(ToolCallBlock(id=call_id, name=name, arguments=arguments))
    return blocks


@settings(max_examples=30, deadline=None)
@given(blocks=call_lists(), seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(blocks: list[ToolCallBlock], seed: int) -> None:
    output = "Calling." + KIMI_K2.render(blocks) + "Done."
    parsed = check(MAKE, output, seeded_splits(output, seed))
    assert content(parsed)[1:-1] == content(blocks)
    expected_ids = [
        b.id if b.id.startswith("functions.") else f"functions.{b.name}:{i}"
        for i, b in enumerate(blocks)
    ]
    assert [b.id for b in calls(parsed)] == expected_ids
    assert render_blocks(parsed, THINK, KIMI_K2) == output
    assert KIMI_K2.render(calls(parsed)) == KIMI_K2.render(blocks)


def test_render_is_the_chat_template_form() -> None:
    blocks = [
        ToolCallBlock(id="functions.f:7", name="f", arguments={"s": "é", "n": [1]}),
        ToolCallBlock(id="call_x", name="g", arguments={}),
        ToolCallBlock(id="functions.other:2", name="h", arguments={}),
    ]
    assert KIMI_K2.render(blocks) == (
        f'{SECTION_BEGIN}{CALL_BEGIN}functions.f:7{ARGUMENT_BEGIN}{{"s": "é", "n": [1]}}'
        f"{CALL_END}{CALL_BEGIN}functions.g:1{ARGUMENT_BEGIN}{{}}{CALL_END}"
        f"{CALL_BEGIN}functions.h:2{ARGUMENT_BEGIN}{{}}{CALL_END}{SECTION_END}"
    )


def test_syntax_name_and_markers() -> None:
    assert KIMI_K2.name == "kimi_k2"
    assert KIMI_K2.start_markers == (SECTION_BEGIN, SECTION_BEGIN_SINGULAR)
