"""Pythonic tool calls ``[f(a=1), g()]``: sections opened by the leading ``[`` driven directly (as
the driver will once it supports ``leading_markers``), malformed lists, render/parse."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _parsing_helpers import splits
from hypothesis import given, settings
from hypothesis import strategies as st
from test_llama3 import drive_leading

from agentkit.parsing import CallArguments, CallStart
from agentkit.parsing.tools.pythonic import PYTHONIC
from agentkit.transcript import ToolCallBlock

Expected = list[tuple[str | None, Any, str | None]]

CORPUS: dict[str, tuple[str, Expected]] = {
    "one call": ('[get_weather(city="Paris")]', [("get_weather", {"city": "Paris"}, None)]),
    "several calls and types": (
        "[a(n=1, f=-2.5e3, b=True, z=None), b(), c(l=[1, (2, 3)], d={'k': [None]}, s='x')]",
        [
            ("a", {"n": 1, "f": -2500.0, "b": True, "z": None}, None),
            ("b", {}, None),
            ("c", {"l": [1, [2, 3]], "d": {"k": [None]}, "s": "x"}, None),
        ],
    ),
    "string escapes": (
        r"""[w(s='it\'s "q"\n\t\x41\u00e9\U0001F30D\N{BULLET}\101\\ \z', e="")]""",
        [("w", {"s": 'it\'s "q"\n\tAé🌍•A\\ \\z', "e": ""}, None)],
    ),
    "triple-quoted and raw strings": (
        '[w(t="""a "quoted" ""line""\nnext\\"""", r=r"\\d+\\"", u=u"é")]',
        [("w", {"t": 'a "quoted" ""line""\nnext"', "r": '\\d+\\"', "u": "é"}, None)],
    ),
    "implicit concatenation": ('[f(a="x" "y" \'z\')]', [("f", {"a": "xyz"}, None)]),
    "marker-like text in strings": (
        "[f(code='[g(a=1)], ) # \\'\"', other=\"]\")]",
        [("f", {"code": "[g(a=1)], ) # '\"", "other": "]"}, None)],
    ),
    "unicode and whitespace": (
        "[ f( a = 'héllo 🌍 中文' ,b=[ ] , ) , g( ) , ]",
        [("f", {"a": "héllo 🌍 中文", "b": []}, None), ("g", {}, None)],
    ),
    "dotted name": ("[math.add(a=1)]", [("math.add", {"a": 1}, None)]),
    "missing ]": ("[f(a=1)", [("f", {"a": 1}, None)]),
    "truncated in a value": ("[f(a='abc", [("f", {}, "truncated")]),
    "truncated before a value": ("[f(a=", [("f", {}, "truncated")]),
    "expression value": ('[f(a="x" + "y")]', [("f", {}, "plain literal")]),
    "set value": ("[f(a={1, 2})]", [("f", {}, "not a JSON value")]),
    "bytes value": ("[f(a=b'x')]", [("f", {}, "not a JSON value")]),
    "call value": ("[f(a=open('x'))]", [("f", {}, "not a Python literal")]),
    "infinite float": ("[f(a=1e999)]", [("f", {}, "not a JSON number")]),
    "repeated keyword": ("[f(a=1, a=2)]", [("f", {}, "repeated")]),
    "int dict keys": ("[f(a={1: 2})]", [("f", {}, "keys must be strings")]),
    "positional argument": ("[f(1, 2)]", [("f", {}, "keyword argument")]),
    "bad call then good": ("[f(a=1) g()]", [("f", {"a": 1}, None)]),
}


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_corpus(name: str, data: st.DataObject) -> None:
    output, expected = CORPUS[name]
    driven = drive_leading(PYTHONIC, output, data.draw(splits(output[1:])))
    assert len(driven.calls) == len(expected), driven.calls
    for got, want in zip(driven.calls, expected, strict=True):
        assert got[:2] == want[:2]
        assert (got[2] is None) == (want[2] is None), got[2]
        assert want[2] is None or want[2] in (got[2] or "")
    assert not driven.rejected


def test_arguments_stream_while_written() -> None:
    section = PYTHONIC.new_section("[", {})
    events = section.feed("write(path='a.txt', text='hello ")
    assert events.events[0] == CallStart("write")
    assert "".join(e.delta for e in events.events if isinstance(e, CallArguments)) == (
        '{"path": "a.txt", "text": "hello '
    )
    step = section.feed("wor\\nld')]")
    assert "".join(e.delta for e in step.events if isinstance(e, CallArguments)) == 'wor\\nld"}'
    assert step.done


@pytest.mark.parametrize(
    ("output", "rest", "tail"),
    [("[f(a=1)]\nDone.", "\nDone.", "]"), ("[f(a=1) g()]", "g()]", " ")],
)
def test_what_follows_the_calls_goes_back_to_the_driver(output: str, rest: str, tail: str) -> None:
    driven = drive_leading(PYTHONIC, output)
    assert output[1 + driven.consumed :] == rest
    assert driven.tail == tail


@pytest.mark.parametrize(
    ("output", "schemas"),
    [
        ("[citation needed]", None),
        ("[1, 2, 3] are numbers", None),
        ("[]", None),
        ("[see(a=1)] above", {"get_weather": {}}),
        ("[x", None),
    ],
)
def test_a_list_that_is_not_a_call_is_rejected(output: str, schemas: Any) -> None:
    driven = drive_leading(PYTHONIC, output, schemas=schemas)
    assert driven.rejected
    ((name, _, error),) = driven.calls
    assert name is None
    assert error is not None


def test_known_tool_is_not_rejected() -> None:
    driven = drive_leading(PYTHONIC, "[get_weather(city='x')]", schemas={"get_weather": {}})
    assert not driven.rejected
    assert driven.calls == [("get_weather", {"city": "x"}, None)]


def test_large_string_streams_linearly() -> None:
    value = ("x = '[f(a=1)]' + \"\\\\\" # )\n" * 1500)[:32_000]
    output = f"[write_file(content={value!r})]"
    section = PYTHONIC.new_section("[", {})
    deltas: list[str] = []
    start = time.perf_counter()
    for i in range(1, len(output), 3):
        step = section.feed(output[i : i + 3])
        deltas += [e.delta for e in step.events if isinstance(e, CallArguments)]
        if i == len(output) // 2 // 3 * 3 + 1:
            assert len("".join(deltas)) > len(value) // 2 - 200
    assert time.perf_counter() - start < 5
    assert json.loads("".join(deltas)) == {"content": value}


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
IDENTIFIERS = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,9}", fullmatch=True)
CALLS = st.lists(
    st.builds(
        lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
        IDENTIFIERS,
        st.dictionaries(IDENTIFIERS, JSON_VALUES, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(blocks=CALLS, data=st.data())
def test_render_then_parse_is_identity(blocks: list[ToolCallBlock], data: st.DataObject) -> None:
    output = PYTHONIC.render(blocks)
    driven = drive_leading(PYTHONIC, output, data.draw(splits(output[1:])))
    assert driven.calls == [(b.name, b.arguments, None) for b in blocks]
    assert driven.consumed == len(output) - 1


def triple_quoted(value: str, quote: str) -> str:
    """``value`` in a triple-quoted literal, with raw newlines where possible."""
    body = []
    for ch in value:
        if ch in ("\\", quote[0]):
            body.append("\\" + ch)
        elif ch == "\n" or ch.isprintable():
            body.append(ch)
        else:
            body.append(repr(ch)[1:-1])
    return quote + "".join(body) + quote


@settings(max_examples=80, deadline=None)
@given(value=st.text(_CHARS, max_size=40), quote=st.sampled_from(["'", '"', "'''", '"""']))
def test_any_string_literal_streams_its_value(value: str, quote: str) -> None:
    literal = repr(value) if len(quote) == 1 else triple_quoted(value, quote)
    driven = drive_leading(PYTHONIC, f"[f(s={literal})]")
    assert driven.calls == [("f", {"s": value}, None)]


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ('"""a\rb"""', "a\nb"),
        ('"""a\r\nb"""', "a\nb"),
        ('"""a\\\r\nb"""', "ab"),
        ('"""a\\\nb"""', "ab"),
        ('"a\\rb"', "a\rb"),
        ("'''x\r'''", "x\n"),
    ],
)
def test_line_endings_are_read_as_python_reads_them(source: str, value: str) -> None:
    driven = drive_leading(PYTHONIC, f"[f(s={source})]")
    assert driven.calls == [("f", {"s": value}, None)]


def test_render_form() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "é'", "n": [None, True]})
    assert PYTHONIC.render([block, block]) == (
        '[f(s="é\'", n=[None, True]), f(s="é\'", n=[None, True])]'
    )


FRAGMENTS = [
    "f(",
    "get_weather",
    "(",
    ")",
    "a=",
    "b =",
    "'x'",
    '"y"',
    "'''t'''",
    "'",
    '"',
    "\\",
    "\\n",
    "\\x4",
    "1",
    "True",
    "[",
    "]",
    "{",
    "}",
    ", ",
    " ",
    "\n",
    "é",
]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=16), data=st.data())
def test_any_text_keeps_every_byte_for_any_split(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    drive_leading(PYTHONIC, "[" + text, data.draw(splits(text)))
