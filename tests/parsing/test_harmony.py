"""gpt-oss Harmony: realistic outputs under every split, malformed messages, render/parse."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from _linear_cost import WorkMeter, stream_in_chunks
from _parsing_helpers import (
    ARGUMENT_KEYS,
    ARGUMENT_VALUES,
    CHARS,
    Expected,
    calls,
    check,
    content,
    corpus_tests,
    error_call,
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

from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing.harmony import HarmonyParser, render
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock


def make() -> HarmonyParser:
    ids = itertools.count()
    return HarmonyParser(id_factory=lambda: f"call_{next(ids)}")


def analysis(text: str, *, first: bool = False) -> str:
    head = "" if first else "<|start|>assistant"
    return f"{head}<|channel|>analysis<|message|>{text}<|end|>"


def call(name: str, arguments: Any, *, first: bool = False, header: str | None = None) -> str:
    head = "" if first else "<|start|>assistant"
    header = header or f"<|channel|>commentary to=functions.{name} <|constrain|>json"
    return f"{head}{header}<|message|>{json.dumps(arguments, ensure_ascii=False)}<|call|>"


TRICKY = tricky_arguments("<|end|> <|start|>assistant", 'print("<|call|>")')

CORPUS: dict[str, tuple[str, Expected]] = {
    "reasoning then final answer": (
        analysis("The user asks 2+2. Easy.", first=True)
        + "<|start|>assistant<|channel|>final<|message|>2 + 2 = **4**.<|return|>",
        [reasoning_block("The user asks 2+2. Easy."), text_block("2 + 2 = **4**.")],
    ),
    "reasoning then call": (
        analysis("Need the weather in Oslo.", first=True) + call("get_weather", {"city": "Oslo"}),
        [reasoning_block("Need the weather in Oslo."), tool_call("get_weather", {"city": "Oslo"})],
    ),
    "recipient before the channel": (
        ' to=functions.lookup<|channel|>commentary json<|message|>{"id": 7}<|call|>',
        [tool_call("lookup", {"id": 7})],
    ),
    "recipient in the start header": (
        analysis("Look it up.", first=True)
        + '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"id": 7}'
        + "<|call|>",
        [reasoning_block("Look it up."), tool_call("lookup", {"id": 7})],
    ),
    "preamble then call": (
        "<|channel|>commentary<|message|>Checking both files.<|end|>"
        + call("read_file", {"path": "a.py"}),
        [text_block("Checking both files."), tool_call("read_file", {"path": "a.py"})],
    ),
    "tricky arguments": (
        call("write", TRICKY, first=True),
        [tool_call("write", TRICKY)],
    ),
    "raw newline inside a JSON string": (
        call("w", {}, first=True).replace("{}", '{"text": "line 1\nline 2"}'),
        [tool_call("w", {"text": "line 1\nline 2"})],
    ),
    "empty arguments": (call("now", {}, first=True), [tool_call("now", {})]),
    "no arguments at all": (
        "<|channel|>commentary to=functions.now <|constrain|>json<|message|><|call|>",
        [tool_call("now", {})],
    ),
    "interleaved reasoning and calls": (
        analysis("r0", first=True) + call("a", {"i": 0}) + analysis("r1") + call("b", {"i": 1}),
        [
            reasoning_block("r0"),
            tool_call("a", {"i": 0}),
            reasoning_block("r1"),
            tool_call("b", {"i": 1}),
        ],
    ),
    "final ends with <|end|>": (
        "<|channel|>final<|message|>Done.<|end|>",
        [text_block("Done.")],
    ),
    "marker-like text in content": (
        analysis("a<b, <|x|> and <|message|> and <|constrain|> stay; <| too", first=True)
        + "<|start|>assistant<|channel|>final<|message|>Use <think> or <|im_end|>.<|return|>",
        [
            reasoning_block("a<b, <|x|> and <|message|> and <|constrain|> stay; <| too"),
            text_block("Use <think> or <|im_end|>."),
        ],
    ),
    "whitespace between messages": (
        analysis("r", first=True)
        + "\n\n<|start|>assistant<|channel|>final<|message|>ok<|return|>\n",
        [reasoning_block("r"), text_block("ok")],
    ),
    "built-in tool recipient": (
        '<|channel|>analysis to=browser.search <|constrain|>json<|message|>{"query": "x"}<|call|>',
        [tool_call("browser.search", {"query": "x"})],
    ),
    "role written in the output": (
        "assistant<|channel|>final<|message|>Hi!<|return|>",
        [text_block("Hi!")],
    ),
    "plain text, no Harmony": ("Hello there!", [text_block("Hello there!")]),
    "plain text with lines": ("Hello\nthere.\n", [text_block("Hello\nthere.\n")]),
    "reasoning without its end marker": (
        "<|channel|>analysis<|message|>thinking<|start|>assistant<|channel|>final<|message|>hi",
        [reasoning_block("thinking"), text_block("hi")],
    ),
    "stray end marker between messages": (
        analysis("r", first=True) + "<|end|><|channel|>final<|message|>x<|return|>",
        [reasoning_block("r"), text_block("x")],
    ),
    "text between messages": (
        analysis("r", first=True) + "oops<|start|>assistant<|channel|>final<|message|>x<|return|>",
        [reasoning_block("r"), text_block("oops"), text_block("x")],
    ),
}


test_corpus_whole_and_by_character, test_corpus_random_splits = corpus_tests(make, CORPUS)


def test_blocks_own_their_messages() -> None:
    first = analysis("r", first=True)
    second = "\n<|start|>assistant<|channel|>final<|message|>ok<|return|>"
    blocks = check(make, first + second)
    assert [b.raw for b in blocks] == [first, second]  # type: ignore[union-attr]


def test_call_starts_at_the_message_and_streams() -> None:
    parser = make()
    head = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    events = parser.feed(head + '{"city": "Pa')
    assert [e.type for e in events] == ["tool_call_started", "tool_call_arguments_delta"]
    assert events[1].delta == '{"city": "Pa'  # type: ignore[union-attr]
    assert [e.type for e in parser.feed('ris"}<|ca')] == ["tool_call_arguments_delta"]
    (done,) = parser.feed("ll|>")
    assert done.type == "tool_call_complete"
    assert done.arguments == {"city": "Paris"}  # type: ignore[union-attr]


def test_text_is_released_at_once() -> None:
    parser = make()
    parser.feed("<|channel|>final<|message|>")
    (delta,) = parser.feed("Hello <")
    assert delta.text == "Hello "  # type: ignore[union-attr]
    assert parser._held == "<"  # may still become a marker
    (delta,) = parser.feed("b")
    assert delta.text == "<b"  # type: ignore[union-attr]
    assert parser.feed("<|ret") == []
    assert parser._held == "<|ret"
    (done,) = parser.feed("urn|>")
    assert done.type == "text_complete"
    assert done.text == "Hello <b"  # type: ignore[union-attr]


def test_large_arguments_stream_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = \"<|call|>\" + '\\\\' # }\n" * 1500)[:32_000]
    output = call("write_file", {"content": value}, first=True)
    meter = WorkMeter(monkeypatch, (HarmonyParser, "_run"), (JsonObjectScanner, "feed"))
    streamed = stream_in_chunks(make(), output, meter)
    assert len(streamed.at_half) > len(output) // 2 - 200  # streamed while written
    assert streamed.arguments == {"content": value}


# -- malformed output: errors the model can read, raw kept ----------------------------------------

HEAD = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
MALFORMED: dict[str, tuple[str, str, str]] = {
    # name: (output, expected error substring, call name)
    "truncated JSON": (HEAD + '{"a": "b', "truncated", "f"),
    "truncated header": ("<|channel|>commentary to=functions.f <|constr", "truncated", "f"),
    "invalid JSON": (HEAD + '{"a": tru}<|call|>', "invalid JSON", "f"),
    "not JSON": (
        "<|channel|>commentary to=python<|message|>print(1)<|call|>",
        "not a JSON object",
        "python",
    ),
    "text after the JSON": (HEAD + '{"a": 1} and more<|call|>', "unexpected text", "f"),
    "marker after the JSON": (HEAD + '{"a": 1}<|message|>x<|call|>', "unexpected", "f"),
    "no <|message|>": (
        '<|channel|>commentary to=functions.f json{"a": 1}<|call|>',
        "no arguments",
        "f",
    ),
    "unterminated string swallows the rest": (
        HEAD + '{"a": "oops}<|call|><|start|>assistant<|channel|>final<|message|>x',
        "truncated",
        "f",
    ),
    "empty recipient": ("<|channel|>commentary to=functions. json<|message|>{}<|call|>", "", ""),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    error_call(make, *MALFORMED[name])


@pytest.mark.parametrize("ending", ["", "\n", "<|ca", "<|call"])
def test_missing_call_marker_is_recovered(ending: str) -> None:
    output = HEAD + '{"city": "Paris"}' + ending
    (recovered,) = calls(check(make, output))
    assert recovered.error is None
    assert recovered.arguments == {"city": "Paris"}


def test_a_bad_call_does_not_spoil_the_next() -> None:
    output = HEAD + '{"a": }<|call|>' + call("g", {"k": "v"})
    first, second = calls(check(make, output))
    assert first.error is not None
    assert (second.name, second.arguments, second.error) == ("g", {"k": "v"}, None)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "<|channel|>analysis<|start|>assistant<|channel|>final<|message|>x",
            [reasoning_block(""), text_block("x")],
        ),
        ("<|channel|>analysis<|end|>", [reasoning_block("")]),
        ("<|channel|>final<|mess", [text_block("")]),
        ("", []),
        ("  \n", [text_block("  \n")]),
        ("<|end|>", [text_block("<|end|>")]),
    ],
)
def test_headers_without_content(output: str, expected: list[dict[str, Any]]) -> None:
    assert content(check(make, output)) == expected


def test_use_after_finish_is_an_error() -> None:
    parser = make()
    parser.finish()
    with pytest.raises(RuntimeError, match="finish"):
        parser.feed("x")


def test_default_ids_are_unique() -> None:
    blocks, _ = run(HarmonyParser, [call("a", {}, first=True) + call("b", {})])
    first, second = calls(blocks)
    assert first.id.startswith("call_")
    assert first.id != second.id


# -- render / parse ------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
MARKERS = ("<|start|>", "<|end|>", "<|channel|>", "<|return|>", "<|call|>", "<|message|>")
TEXT = st.text(st.sampled_from(list("ab <|>\n{}\"'\\é🌍")) | CHARS, max_size=30).filter(
    lambda s: not any(m in s for m in MARKERS)
)
BLOCKS = st.lists(
    TEXT.map(lambda s: ReasoningBlock(text=s))
    | TEXT.map(lambda s: TextBlock(text=s))
    | st.builds(
        lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
        NAMES,
        st.dictionaries(ARGUMENT_KEYS, ARGUMENT_VALUES, max_size=4),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(blocks=BLOCKS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(blocks: list[Any], seed: int) -> None:
    output = render(blocks)
    parsed = check(make, output, seeded_splits(output, seed))
    assert content(parsed) == content(blocks)
    assert render(parsed) == output
    assert "".join(b.raw for b in parsed) == output


def test_render_is_the_model_form() -> None:
    blocks = [
        ReasoningBlock(text="Need data."),
        TextBlock(text="Fetching."),
        ToolCallBlock(id="x", name="get", arguments={"k": "é"}),
    ]
    assert render(blocks) == (
        "<|channel|>analysis<|message|>Need data.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Fetching.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get <|constrain|>json"
        '<|message|>{"k": "é"}<|call|>'
    )
    assert render([TextBlock(text="Bye.")]) == "<|channel|>final<|message|>Bye.<|return|>"


def test_render_refuses_tool_results() -> None:
    with pytest.raises(ValueError, match="tool_result"):
        render([ToolResultBlock(call_id="x", name="f", content="1")])


FRAGMENTS = [
    *MARKERS,
    "<|constrain|>",
    "<|",
    "<|ca",
    "<",
    "assistant",
    " to=functions.f",
    " to=browser.search",
    "analysis",
    "final",
    "commentary",
    " json",
    '{"a": ',
    '"x<|call|>"',
    "[1, {}]",
    "}",
    "]",
    '\\"',
    "\n",
    " ",
    "text",
    "é🌍",
]


test_any_output_keeps_every_byte_for_any_split = soup_test(make, FRAGMENTS)
