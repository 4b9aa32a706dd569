"""Llama 3 JSON tool calls: ``<|python_tag|>`` sections through the driver, and sections opened by
the leading ``{`` driven directly (as the driver will once it supports ``leading_markers``).

``drive_leading`` is also used by ``test_pythonic.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import CallArguments, CallEnd, CallStart, ToolSyntax
from agentkit.parsing._base import SectionEvent
from agentkit.parsing.tools.llama3 import LLAMA3_JSON
from agentkit.transcript import ToolCallBlock

MAKE = factory(None, LLAMA3_JSON)


@dataclass
class Driven:
    """What a section did with the text after its leading marker."""

    events: list[SectionEvent] = field(default_factory=list)
    consumed: int = 0
    tail: str = ""
    rejected: bool = False

    @property
    def calls(self) -> list[tuple[str | None, dict[str, Any], str | None]]:
        started: str | None = None
        out = []
        for event in self.events:
            if isinstance(event, CallStart):
                started = event.name
            elif isinstance(event, CallEnd):
                out.append((started, event.arguments, event.error))
                started = None
        return out


def _drive(
    syntax: ToolSyntax, marker: str, chunks: Sequence[str], schemas: Mapping[str, Any]
) -> Driven:
    section = syntax.new_section(marker, schemas)
    driven = Driven()
    for chunk in chunks:
        step = section.feed(chunk)
        driven.events += step.events
        driven.consumed += step.consumed
        if step.done:
            driven.tail = step.tail_raw
            break
        assert step.consumed == len(chunk)
    else:
        step = section.finish()
        driven.events += step.events
        driven.tail = step.tail_raw
    driven.rejected = bool(getattr(section, "rejected", False))
    merged: list[SectionEvent] = []
    for event in driven.events:
        if merged and isinstance(event, CallArguments) and isinstance(merged[-1], CallArguments):
            merged[-1] = CallArguments(merged[-1].delta + event.delta)
        else:
            merged.append(event)
    driven.events = merged
    return driven


def drive_leading(
    syntax: ToolSyntax,
    output: str,
    chunks: Sequence[str] | None = None,
    schemas: Mapping[str, Any] | None = None,
) -> Driven:
    """Drive the section ``output``'s leading marker opens, whole, by character and as
    ``chunks``; assert the results agree, every consumed byte is owned once and the argument
    deltas of each good call join into its arguments."""
    markers: tuple[str, ...] = syntax.leading_markers  # type: ignore[attr-defined]
    stripped = output.lstrip()
    (marker,) = [m for m in markers if stripped.startswith(m)]
    text = stripped[len(marker) :]
    results = [
        _drive(syntax, marker, split, schemas or {})
        for split in ([text], list(text), chunks if chunks is not None else [text])
    ]
    assert results[1] == results[0]
    assert results[2] == results[0]
    driven = results[0]
    raws = "".join(e.raw for e in driven.events if isinstance(e, CallEnd))
    assert marker + raws + driven.tail == marker + text[: driven.consumed]
    deltas: list[str] = []
    started = False
    for event in driven.events:
        if isinstance(event, CallStart):
            assert not started
            started, deltas = True, []
        elif isinstance(event, CallArguments):
            assert started, "arguments outside a call"
            deltas.append(event.delta)
        else:
            assert started or event.error is not None
            if event.error is None:
                assert json.loads("".join(deltas)) == event.arguments
            started = False
    return driven


def obj(name: str, arguments: Any, key: str = "parameters") -> str:
    return json.dumps({"name": name, key: arguments}, ensure_ascii=False)


def c(name: str, arguments: Any, error: str | None = None) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": arguments, "error": error}


TRICKY = {
    "code": 'print("<|python_tag|>")\n\tx = {"a": [1]}; y = 2  # }; {',
    "path": "C:\\Users\\me\\file.txt",
    "unicode": "héllo 🌍 中文 \u2028 end",
    "nested": {"and": [{"x": 1}, {"y": [True, None, 2.5, -3e-7]}], "empty": {}, "list": []},
    "quote": '"',
}

LEADING: dict[str, tuple[str, list[tuple[str | None, Any, str | None]]]] = {
    "one call": (obj("get_weather", {"city": "Paris"}), [("get_weather", {"city": "Paris"}, None)]),
    "leading whitespace": ("\n " + obj("f", {}), [("f", {}, None)]),
    "several calls": (
        obj("a", {"x": 1}) + "; " + obj("b", TRICKY, key="arguments") + ";" + obj("c", {}),
        [("a", {"x": 1}, None), ("b", TRICKY, None), ("c", {}, None)],
    ),
    "type member and end token": (
        '{"type": "function", "name": "f", "parameters": {"k": "v"}}<|eom_id|>',
        [("f", {"k": "v"}, None)],
    ),
    "raw newline in a string": (
        '{"name": "w", "parameters": {"t": "a\nb"}}',
        [("w", {"t": "a\nb"}, None)],
    ),
    "text after the call": (obj("f", {}) + " and some words", [("f", {}, None)]),
    "truncated": ('{"name": "f", "parameters": {"a": ', [("f", {}, "truncated")]),
    "invalid JSON": ('{"name": "f", "parameters": {"a": tru}}', [("f", {}, "invalid JSON")]),
}


@pytest.mark.parametrize("name", list(LEADING))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_leading_sections(name: str, data: st.DataObject) -> None:
    output, expected = LEADING[name]
    text = output.lstrip()[1:]
    driven = drive_leading(LLAMA3_JSON, output, data.draw(splits(text)))
    assert len(driven.calls) == len(expected)
    for (got_name, got_args, got_error), (want_name, want_args, want_error) in zip(
        driven.calls, expected, strict=True
    ):
        assert (got_name, got_args) == (want_name, want_args)
        assert (got_error is None) == (want_error is None)
        assert want_error is None or want_error in (got_error or "")
    assert not driven.rejected


def test_text_after_the_calls_goes_back_to_the_driver() -> None:
    output = obj("f", {}) + "; " + obj("g", {}) + "  \nThat was it."
    driven = drive_leading(LLAMA3_JSON, output)
    assert output[1 + driven.consumed :] == "That was it."
    assert driven.tail == "  \n"


@pytest.mark.parametrize(
    ("output", "schemas"),
    [
        ('{"answer": 42}', None),
        ("{not json at all}", None),
        ('{"name": "Bob", "age": 3}', {"get_weather": {}}),
        ("{}", None),
    ],
)
def test_json_that_is_not_a_call_is_rejected(output: str, schemas: Any) -> None:
    driven = drive_leading(LLAMA3_JSON, output, schemas=schemas)
    assert driven.rejected
    ((name, _, error),) = driven.calls
    assert name is None
    assert error is not None


def test_known_tool_is_not_rejected() -> None:
    driven = drive_leading(LLAMA3_JSON, obj("get_weather", {}), schemas={"get_weather": {}})
    assert not driven.rejected
    assert driven.calls == [("get_weather", {}, None)]


def test_a_later_non_call_is_an_error_not_a_rejection() -> None:
    driven = drive_leading(LLAMA3_JSON, obj("f", {}) + '; {"x": 1}')
    assert not driven.rejected
    assert [(n, e is None) for n, _, e in driven.calls] == [("f", True), (None, False)]


# -- <|python_tag|> sections, through the driver --------------------------------------------------

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "python tag": (
        "<|python_tag|>" + obj("get_weather", {"city": "Paris"}),
        [c("get_weather", {"city": "Paris"})],
    ),
    "text then tag, two calls": (
        "Let me check.\n<|python_tag|>" + obj("a", TRICKY) + "; " + obj("b", {}) + "<|eom_id|>",
        [{"type": "text", "text": "Let me check.\n"}, c("a", TRICKY), c("b", {})],
    ),
    "tag then non-JSON": (
        '<|python_tag|>brave_search.call(query="x")',
        [
            c("", {}, "invalid JSON in tool call: expected '{' but found 'b'"),
            {"type": "text", "text": 'brave_search.call(query="x")'},
        ],
    ),
    "marker-like text": (
        "A <|python_ta g|> and {json}.",
        [{"type": "text", "text": "A <|python_ta g|> and {json}."}],
    ),
}


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_python_tag_corpus(name: str, data: st.DataObject) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output)) == expected
    assert content(check(MAKE, output, data.draw(splits(output)))) == expected


def test_each_call_owns_its_separator() -> None:
    output = "<|python_tag|>" + obj("a", {}) + "; " + obj("b", {}) + "<|eom_id|>"
    assert [b.raw for b in calls(check(MAKE, output))] == [
        "<|python_tag|>" + obj("a", {}),
        "; " + obj("b", {}) + "<|eom_id|>",
    ]


def test_large_arguments_stream_linearly() -> None:
    value = ("x = \"<|eom_id|>\" + '\\\\' # }; {\n" * 1500)[:32_000]
    output = obj("write_file", {"content": value})
    start = time.perf_counter()
    driven = _drive(LLAMA3_JSON, "{", [output[i : i + 3] for i in range(1, len(output), 3)], {})
    assert time.perf_counter() - start < 5
    assert driven.calls == [("write_file", {"content": value}, None)]
    (delta,) = [e for e in driven.events if isinstance(e, CallArguments)]
    assert json.loads(delta.delta) == {"content": value}


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
def test_render_then_parse_is_identity(blocks: list[ToolCallBlock], data: st.DataObject) -> None:
    output = LLAMA3_JSON.render(blocks)
    driven = drive_leading(LLAMA3_JSON, output, data.draw(splits(output[1:])))
    assert driven.calls == [(b.name, b.arguments, None) for b in blocks]
    assert driven.consumed == len(output) - 1
    tagged = check(MAKE, "<|python_tag|>" + output)
    assert content(tagged) == content(blocks)


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


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14), data=st.data())
def test_any_output_keeps_every_byte_for_any_split(parts: list[str], data: st.DataObject) -> None:
    output = "".join(parts)
    check(MAKE, output, data.draw(splits(output)))
    leading = "{" + output
    drive_leading(LLAMA3_JSON, leading, data.draw(splits(output)), schemas={"f": {}})
