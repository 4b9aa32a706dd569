"""DeepSeek-V3 and V3.1 tool calls: a corpus of realistic outputs under every split, the section
parser driven directly, malformed and truncated calls, linear cost, render/parse round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _linear_cost import WorkMeter, section_meter, stream_in_chunks
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

from agentkit.events import ToolCallArgumentsDelta
from agentkit.parsing import (
    CallArguments,
    CallEnd,
    CallStart,
    ToolSyntax,
    render_blocks,
)
from agentkit.parsing._base import SectionEvent
from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing.reasoning import DEEPSEEK_R1
from agentkit.parsing.tools.deepseek import (
    CALL_BEGIN,
    CALL_END,
    CALLS_BEGIN,
    CALLS_END,
    DEEPSEEK_V3,
    DEEPSEEK_V31,
    SEP,
)
from agentkit.transcript import TextBlock, ToolCallBlock

V3 = factory(None, DEEPSEEK_V3)
V31 = factory(None, DEEPSEEK_V31)
R1_V3 = factory(DEEPSEEK_R1, DEEPSEEK_V3)


def v3(name: str, arguments: Any, *, indent: int | None = None, ascii: bool = False) -> str:
    body = json.dumps(arguments, indent=indent, ensure_ascii=ascii)
    return f"{CALL_BEGIN}function{SEP}{name}\n```json\n{body}\n```{CALL_END}"


def v31(name: str, arguments: Any) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{json.dumps(arguments, ensure_ascii=False)}{CALL_END}"


def section(*calls_text: str, sep: str = "") -> str:
    return CALLS_BEGIN + sep.join(calls_text) + CALLS_END


def ok(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": arguments, "error": None}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


TRICKY = tricky_arguments(
    "``` json \\ done", f"{CALL_END}{CALLS_END}{CALL_BEGIN}{SEP}{CALLS_BEGIN} </think> <｜tool▁call"
)
WEATHER = {"city": "Paris", "unit": "celsius"}

CORPUS: dict[str, tuple[Any, str, list[dict[str, Any]]]] = {
    "v3: text, two calls, text": (
        V3,
        "Let me check both.\n\n"
        + section(v3("get_weather", WEATHER), v3("get_weather", {"city": "Oslo"}), sep="\n")
        + "\n\nDone.",
        [
            text("Let me check both.\n\n"),
            ok("get_weather", WEATHER),
            ok("get_weather", {"city": "Oslo"}),
            text("Done."),
        ],
    ),
    "v3: tricky arguments": (V3, section(v3("write", TRICKY)), [ok("write", TRICKY)]),
    "v3: escaped unicode, pretty-printed": (
        V3,
        section(v3("write", TRICKY, indent=2, ascii=True)),
        [ok("write", TRICKY)],
    ),
    "v3: raw newline and tab inside a string": (
        V3,
        section(f'{CALL_BEGIN}function{SEP}w\n```json\n{{"t": "a\nb\tc"}}\n```{CALL_END}'),
        [ok("w", {"t": "a\nb\tc"})],
    ),
    "v3: empty arguments, no separator": (
        V3,
        section(v3("now", {}), v3("now", {})),
        [ok("now", {}), ok("now", {})],
    ),
    "v3: r1 reasoning then calls": (
        R1_V3,
        "The user wants weather.\n</think>\n\n" + section(v3("get_weather", WEATHER)),
        [{"type": "reasoning", "text": "The user wants weather.\n"}, ok("get_weather", WEATHER)],
    ),
    "v3: tolerated shapes (no fence, no type, v3.1 style)": (
        V3,
        section(
            f'{CALL_BEGIN}function{SEP}a\n{{"x": 1}}{CALL_END}',
            f'{CALL_BEGIN}{SEP}b\n```\n{{"y": 2}}```{CALL_END}',
            f'{CALL_BEGIN}c{SEP}{{"z": 3}}{CALL_END}',
            sep=" \n",
        ),
        [ok("a", {"x": 1}), ok("b", {"y": 2}), ok("c", {"z": 3})],
    ),
    "v3: marker-like text outside a section": (
        V3,
        f"Tokens like {CALL_BEGIN} or {CALLS_END} and a < b are plain text.",
        [text(f"Tokens like {CALL_BEGIN} or {CALLS_END} and a < b are plain text.")],
    ),
    "v3.1: text, three calls, text": (
        V31,
        "Checking.\n"
        + section(v31("get_weather", WEATHER), v31("search", {"q": "a b"}), v31("now", {}))
        + "Then more.",
        [
            text("Checking.\n"),
            ok("get_weather", WEATHER),
            ok("search", {"q": "a b"}),
            ok("now", {}),
            text("Then more."),
        ],
    ),
    "v3.1: tricky arguments": (V31, section(v31("write", TRICKY)), [ok("write", TRICKY)]),
    "v3.1: whitespace around the JSON": (
        V31,
        section(f'{CALL_BEGIN} f {SEP}\n {{"a": [1, {{}}]}} \n{CALL_END}'),
        [ok("f", {"a": [1, {}]})],
    ),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_whole_and_by_character(name: str) -> None:
    make, output, expected = CORPUS[name]
    assert content(check(make, output)) == expected


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_corpus_random_splits(name: str, seed: int) -> None:
    make, output, expected = CORPUS[name]
    assert content(check(make, output, seeded_splits(output, seed))) == expected


def test_call_raws_partition_the_section() -> None:
    first, second = v3("a", {"x": 1}), v3("b", {})
    output = "Hi\n" + section(first, second, sep="\n") + "\nBye"
    blocks = check(V3, output)
    assert [getattr(b, "raw", None) for b in blocks] == [
        "Hi\n",
        CALLS_BEGIN + first,
        "\n" + second + CALLS_END,
        "\nBye",
    ]


def test_call_starts_when_its_name_is_complete_and_arguments_stream() -> None:
    parser = V3()
    assert parser.feed(f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}get_wea") == []
    started = parser.feed("ther\n```json\n")
    assert [(e.type, getattr(e, "name", None)) for e in started] == [
        ("tool_call_started", "get_weather")
    ]
    events = parser.feed('{"city": "Pa')
    assert [(e.type, getattr(e, "delta", None)) for e in events] == [
        ("tool_call_arguments_delta", '{"city": "Pa')
    ]
    assert [e.type for e in parser.feed('ris"}\n```<｜tool▁call▁')] == ["tool_call_arguments_delta"]
    assert [e.type for e in parser.feed("end｜>")] == ["tool_call_complete"]

    parser = V31()
    started = parser.feed(f"{CALLS_BEGIN}{CALL_BEGIN}search{SEP}")
    assert [(e.type, getattr(e, "name", None)) for e in started] == [
        ("tool_call_started", "search")
    ]


def test_raw_control_characters_are_escaped_in_deltas() -> None:
    output = section(f'{CALL_BEGIN}w{SEP}{{"t": "a\nb"}}{CALL_END}')
    _, events = run(V31, [output])
    deltas = "".join(e.delta for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert deltas == '{"t": "a\\nb"}'


# -- the section parser, driven directly ---------------------------------------------------------


def drive(chunks: list[str]) -> tuple[list[SectionEvent], str, str]:
    return drive_section(DEEPSEEK_V31, CALLS_BEGIN, chunks)


def test_section_events_and_ownership() -> None:
    body = v31("a", {"k": "v"}) + "\n" + v31("b", {}) + CALLS_END
    after = "\nThe rest."
    whole = drive([body + after])
    by_char = drive(list(body + after))
    assert (
        whole[0]
        == by_char[0]
        == [
            CallStart("a"),
            CallArguments('{"k": "v"}'),
            CallEnd({"k": "v"}, v31("a", {"k": "v"}), name="a"),
            CallStart("b"),
            CallArguments("{}"),
            CallEnd({}, "\n" + v31("b", {}), name="b"),
        ]
    )
    assert whole[1:] == by_char[1:] == (body, after)


def test_section_holds_back_only_a_possible_marker() -> None:
    parser = DEEPSEEK_V31.new_section(CALLS_BEGIN, {})
    first = f'{CALL_BEGIN}f{SEP}{{"a": 1}}<｜tool▁call'
    step = parser.feed(first)
    assert not step.done
    assert step.consumed == len(first)
    assert [type(e) for e in step.events] == [CallStart, CallArguments]
    step = parser.feed("▁end｜><｜tool▁calls▁end｜>tail")
    assert [type(e) for e in step.events] == [CallEnd]
    assert step.done
    assert step.tail_raw == CALLS_END
    assert step.consumed == len("▁end｜><｜tool▁calls▁end｜>")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("", "without any call"),
        (CALLS_END, "without any call"),
        ("  \n" + CALLS_END, "without any call"),
        (f"{CALL_BEGIN}f{SEP}", "arguments began"),
    ],
)
def test_section_without_a_call_owns_its_bytes(body: str, error: str) -> None:
    events, owned, rest = drive([body + "tail"] if body.endswith(CALLS_END) else [body])
    end = events[-1]
    assert isinstance(end, CallEnd)
    assert end.error is not None
    assert error in end.error
    assert owned == body
    assert rest in ("tail", "")


# -- malformed calls: errors the model can act on, raw kept --------------------------------------

MALFORMED: dict[str, tuple[Any, str, str, str]] = {
    # name: (parser, output, error substring, call name)
    "trailing comma": (V31, section(f'{CALL_BEGIN}a{SEP}{{"x": 1,}}{CALL_END}'), "JSON", "a"),
    "unescaped quotes": (
        V31,
        section(f'{CALL_BEGIN}sh{SEP}{{"cmd": "echo "hi""}}{CALL_END}'),
        "not valid JSON",
        "sh",
    ),
    "missing closing brace": (
        V3,
        section(f'{CALL_BEGIN}function{SEP}a\n```json\n{{"x": {{"y": 1}}\n```{CALL_END}'),
        "not valid JSON",
        "a",
    ),
    "no name (v3)": (
        V3,
        section(f"{CALL_BEGIN}function{SEP}\n```json\n{{}}\n```{CALL_END}"),
        "no function name",
        "",
    ),
    "no name (v3.1)": (V31, section(f"{CALL_BEGIN} {SEP}{{}}{CALL_END}"), "no function name", ""),
    "no arguments": (V31, section(f"{CALL_BEGIN}now{SEP}{CALL_END}"), "no arguments", "now"),
    "header cut by the end marker": (
        V3,
        section(f"{CALL_BEGIN}function{SEP}now{CALL_END}"),
        "no arguments",
        "now",
    ),
    "arguments not an object": (
        V31,
        section(f"{CALL_BEGIN}f{SEP}[1, 2]{CALL_END}"),
        "must be one JSON object",
        "f",
    ),
    "text before the arguments": (
        V31,
        section(f'{CALL_BEGIN}f{SEP}args: {{"a": 1}}{CALL_END}'),
        "unexpected text before",
        "f",
    ),
    "text after the arguments": (
        V31,
        section(f'{CALL_BEGIN}f{SEP}{{"a": 1}}}} {{"b": 2}}{CALL_END}'),
        "unexpected text after",
        "f",
    ),
    "bad number": (V31, section(f'{CALL_BEGIN}f{SEP}{{"a": 1.2.3}}{CALL_END}'), "JSON", "f"),
    "truncated inside the JSON": (V31, f'{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{"a": "b', "trunc", "f"),
    "truncated inside the name": (
        V3,
        f"Sure.\n{CALLS_BEGIN}{CALL_BEGIN}function{SEP}get_wea",
        "name was complete",
        "",
    ),
    "truncated after the start marker": (V3, f"Sure.\n{CALLS_BEGIN}", "without any call", ""),
    "empty section": (V31, f"{CALLS_BEGIN}{CALLS_END}", "without any call", ""),
    "unterminated string swallows the rest": (
        V31,
        section(f'{CALL_BEGIN}f{SEP}{{"a": "oops}}{CALL_END}') + "\nMore text.",
        "truncated",
        "f",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    make, output, message, call_name = MALFORMED[name]
    blocks = check(make, output)
    (bad,) = calls(blocks)
    assert bad.error is not None
    assert message in bad.error, bad.error
    assert bad.error.startswith("malformed tool call")
    assert bad.arguments == {}
    assert bad.name == call_name
    assert output.endswith(bad.raw or "")


@pytest.mark.parametrize(
    "ending",
    ["", "\n", "\n```", "\n```<｜tool▁call", f"\n```{CALL_END}", f"\n```{CALL_END}<｜tool"],
)
def test_complete_json_without_closing_markers_is_recovered(ending: str) -> None:
    output = f'Checking.\n{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n```json\n{{"a": 1}}{ending}'
    (call,) = calls(check(V3, output))
    assert call.error is None
    assert call.arguments == {"a": 1}
    assert call.name == "f"


def test_missing_call_end_before_the_next_call_or_the_section_end() -> None:
    output = f'{CALLS_BEGIN}{CALL_BEGIN}a{SEP}{{"x": 1}}{CALL_BEGIN}b{SEP}{{}}{CALLS_END}after'
    blocks = check(V31, output)
    assert content(blocks) == [ok("a", {"x": 1}), ok("b", {}), text("after")]


def test_one_bad_call_does_not_spoil_the_next() -> None:
    output = section(f"{CALL_BEGIN}a{SEP}{{,}}{CALL_END}", v31("b", {"k": "v"})) + "\nRetrying."
    first, second, after = check(V31, output)
    assert isinstance(first, ToolCallBlock)
    assert first.error is not None
    assert isinstance(second, ToolCallBlock)
    assert second.error is None
    assert second.arguments == {"k": "v"}
    assert isinstance(after, TextBlock)
    assert after.text == "Retrying."


SOUP = [CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP, "function", "f", "\n", "```json", "```"]
SOUP += ["{", "}", '"', "\\", ":", ",", "1", " ", "<", "｜", "[", '{"a": 1}', "</think>"]


@pytest.mark.parametrize("syntax", [DEEPSEEK_V3, DEEPSEEK_V31], ids=["v3", "v3.1"])
@settings(max_examples=40, deadline=None)
@given(output=soups(SOUP), seed=st.integers(0, 2**32))
def test_any_output_is_owned_and_split_invariant(
    syntax: ToolSyntax, output: str, seed: int
) -> None:
    check(factory(DEEPSEEK_R1, syntax), output, seeded_splits(output, seed))


# -- cost ----------------------------------------------------------------------------------------


def _meter(monkeypatch: pytest.MonkeyPatch) -> WorkMeter:
    return section_meter(
        monkeypatch,
        DEEPSEEK_V31,
        CALLS_BEGIN,
        (JsonObjectScanner, "feed"),
        # a section scans what it held back from the last feed and the new text
        section_work=lambda section, text: len(section._held) + len(text),
    )


def test_cost_per_delta_does_not_grow_with_the_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = _meter(monkeypatch)

    def tail_work(prefix_len: int) -> int:
        """Work to feed 2,000 argument characters one at a time after ``prefix_len``."""
        value = ('x = "<tag>" + "\\\\" # ```\n' * (prefix_len // 20 + 200))[: prefix_len + 2_000]
        output = section(v31("write_file", {"content": value}))
        cut = len(output) - 2_100  # 2,000 argument characters before the call's end
        parser = V31()
        parser.feed(output[:cut])
        before = meter.total
        for ch in output[cut : cut + 2_000]:
            parser.feed(ch)
        return meter.total - before

    assert 0 < tail_work(64_000) == tail_work(1_000)


def test_large_argument_streams_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("def f():\n    return '\"<｜tool▁call▁end｜>\"' \\\\ 🌍\n" * 700)[:32_000]
    output = section(v31("write_file", {"content": value}))
    streamed = stream_in_chunks(V31(), output, _meter(monkeypatch))
    assert streamed.arguments == {"content": value}
    (call,) = calls(streamed.blocks)
    assert call.arguments == {"content": value}


# -- render / parse ------------------------------------------------------------------------------


_CHARS = st.characters(exclude_categories=["Cs"])
_SPECIAL = st.sampled_from(
    ["<", "｜", "▁", "\\", '"', "\n", "```", "{", "}", CALL_END, CALLS_END, SEP]
)
_STRINGS = st.lists(_CHARS | _SPECIAL, max_size=8).map("".join)
JSON_VALUES = json_values(_STRINGS, integers=st.integers(-(10**12), 10**12), max_leaves=6)
ARGUMENTS = st.dictionaries(_STRINGS, JSON_VALUES, max_size=3)
NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,15}", fullmatch=True)
CALL_LISTS = st.lists(
    st.builds(lambda n, a: ToolCallBlock(id="x", name=n, arguments=a), NAMES, ARGUMENTS),
    min_size=1,
    max_size=3,
)


@pytest.mark.parametrize("syntax", [DEEPSEEK_V3, DEEPSEEK_V31], ids=["v3", "v3.1"])
@settings(max_examples=25, deadline=None)
@given(blocks=CALL_LISTS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(
    syntax: ToolSyntax, blocks: list[ToolCallBlock], seed: int
) -> None:
    make = factory(None, syntax)
    output = "Calling.\n" + syntax.render(blocks) + "\nDone."
    parsed = check(make, output, seeded_splits(output, seed))
    assert content(parsed) == [text("Calling.\n"), *content(blocks), text("Done.")]
    assert render_blocks(parsed, None, syntax) == output


def test_render_is_the_chat_template_form() -> None:
    a = ToolCallBlock(id="x", name="f", arguments={"s": "é", "n": [1]})
    b = ToolCallBlock(id="y", name="g", arguments={})
    assert DEEPSEEK_V3.render([a, b]) == (
        f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n```json\n"
        '{"s": "é", "n": [1]}\n```'
        f"{CALL_END}\n{CALL_BEGIN}function{SEP}g\n```json\n{{}}\n```{CALL_END}{CALLS_END}"
    )
    assert DEEPSEEK_V31.render([a, b]) == (
        f'{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{"s": "é", "n": [1]}}{CALL_END}'
        f"{CALL_BEGIN}g{SEP}{{}}{CALL_END}{CALLS_END}"
    )


def test_syntax_names() -> None:
    assert (DEEPSEEK_V3.name, DEEPSEEK_V31.name) == ("deepseek_v3", "deepseek_v31")
    assert DEEPSEEK_V3.start_markers == DEEPSEEK_V31.start_markers == (CALLS_BEGIN,)
