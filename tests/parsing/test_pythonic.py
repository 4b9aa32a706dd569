"""Pythonic tool calls ``[f(a=1), g()]``: sections opened by the leading ``[`` through the driver
under any split (a list that is not a call stays text), malformed lists, render/parse."""

from __future__ import annotations

from typing import Any

import pytest
from _linear_cost import section_meter, stream_in_chunks
from _parsing_helpers import (
    CHARS,
    Expected,
    call_lists,
    check,
    content,
    corpus_tests,
    factory,
    seeded_splits,
    soup_test,
    text_block,
    tool_call,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import CallArguments, CallStart
from agentkit.parsing.tools._python_literals import LiteralScanner
from agentkit.parsing.tools.pythonic import PYTHONIC
from agentkit.transcript import ToolCallBlock

MAKE = factory(None, PYTHONIC)

CORPUS: dict[str, tuple[str, Expected]] = {
    # (an expected call's error is a part of the actual one)
    "one call": ('[get_weather(city="Paris")]', [tool_call("get_weather", {"city": "Paris"})]),
    "several calls and types": (
        "[a(n=1, f=-2.5e3, b=True, z=None), b(), c(l=[1, (2, 3)], d={'k': [None]}, s='x')]",
        [
            tool_call("a", {"n": 1, "f": -2500.0, "b": True, "z": None}),
            tool_call("b", {}),
            tool_call("c", {"l": [1, [2, 3]], "d": {"k": [None]}, "s": "x"}),
        ],
    ),
    "string escapes": (
        r"""[w(s='it\'s "q"\n\t\x41\u00e9\U0001F30D\N{BULLET}\101\\ \z', e="")]""",
        [tool_call("w", {"s": 'it\'s "q"\n\tAé🌍•A\\ \\z', "e": ""})],
    ),
    "triple-quoted and raw strings": (
        '[w(t="""a "quoted" ""line""\nnext\\"""", r=r"\\d+\\"", u=u"é")]',
        [tool_call("w", {"t": 'a "quoted" ""line""\nnext"', "r": '\\d+\\"', "u": "é"})],
    ),
    "implicit concatenation": ('[f(a="x" "y" \'z\')]', [tool_call("f", {"a": "xyz"})]),
    "marker-like text in strings": (
        "[f(code='[g(a=1)], ) # \\'\"', other=\"]\")]",
        [tool_call("f", {"code": "[g(a=1)], ) # '\"", "other": "]"})],
    ),
    "unicode and whitespace": (
        "[ f( a = 'héllo 🌍 中文' ,b=[ ] , ) , g( ) , ]",
        [tool_call("f", {"a": "héllo 🌍 中文", "b": []}), tool_call("g", {})],
    ),
    "dotted name": ("[math.add(a=1)]", [tool_call("math.add", {"a": 1})]),
    "missing ]": ("[f(a=1)", [tool_call("f", {"a": 1})]),
    "truncated in a value": ("[f(a='abc", [tool_call("f", {}, "truncated")]),
    "broken after a streamed string": (
        "[f(a='x']",
        [tool_call("f", {}, "mismatched brackets"), text_block("]")],
    ),
    "truncated before a value": ("[f(a=", [tool_call("f", {}, "truncated")]),
    "expression value": ('[f(a="x" + "y")]', [tool_call("f", {}, "plain literal")]),
    "set value": ("[f(a={1, 2})]", [tool_call("f", {}, "not a JSON value")]),
    "bytes value": ("[f(a=b'x')]", [tool_call("f", {}, "not a JSON value")]),
    "call value": ("[f(a=open('x'))]", [tool_call("f", {}, "not a Python literal")]),
    "infinite float": ("[f(a=1e999)]", [tool_call("f", {}, "not a JSON number")]),
    "repeated keyword": ("[f(a=1, a=2)]", [tool_call("f", {}, "repeated")]),
    "int dict keys": ("[f(a={1: 2})]", [tool_call("f", {}, "keys must be strings")]),
    "positional argument": (
        "[f(1, 2)]",
        [tool_call("f", {}, "keyword argument"), text_block("1, 2)]")],
    ),
    "bad call then good": ("[f(a=1) g()]", [tool_call("f", {"a": 1}), text_block("g()]")]),
}


test_corpus, test_corpus_random_splits = corpus_tests(
    MAKE, CORPUS, examples=10, partial_errors=True
)


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
    ("output", "raws"),
    [("[f(a=1)]\nDone.", ["[f(a=1)]", "\nDone."]), ("[f(a=1) g()]", ["[f(a=1) ", "g()]"])],
)
def test_what_follows_the_calls_goes_back_to_the_driver(output: str, raws: list[str]) -> None:
    blocks = check(MAKE, output)
    assert [b.raw for b in blocks] == raws
    assert content(blocks)[1] == text_block(raws[1].strip())


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
def test_a_list_that_is_not_a_call_stays_text(output: str, schemas: Any) -> None:
    assert content(check(factory(None, PYTHONIC, schemas=schemas), output)) == [text_block(output)]


def test_known_tool_is_a_call() -> None:
    make = factory(None, PYTHONIC, schemas={"get_weather": {}})
    blocks = check(make, "[get_weather(city='x')]")
    assert content(blocks) == [tool_call("get_weather", {"city": "x"})]


def test_large_string_streams_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = '[f(a=1)]' + \"\\\\\" # )\n" * 1500)[:32_000]
    meter = section_meter(monkeypatch, PYTHONIC, "[", (LiteralScanner, "feed"))
    streamed = stream_in_chunks(MAKE(), f"[write_file(content={value!r})]", meter)
    assert len(streamed.at_half) > len(value) // 2 - 200  # streamed while written
    assert streamed.arguments == {"content": value}


# -- render / parse ------------------------------------------------------------------------------

IDENTIFIERS = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,9}", fullmatch=True)
CALLS = call_lists(IDENTIFIERS, keys=IDENTIFIERS)


@settings(max_examples=80, deadline=None)
@given(blocks=CALLS, seed=st.integers(0, 2**32))
def test_render_then_parse_is_identity(blocks: list[ToolCallBlock], seed: int) -> None:
    output = PYTHONIC.render(blocks)
    assert content(check(MAKE, output, seeded_splits(output, seed))) == content(blocks)


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
@given(value=st.text(CHARS, max_size=40), quote=st.sampled_from(["'", '"', "'''", '"""']))
def test_any_string_literal_streams_its_value(value: str, quote: str) -> None:
    literal = repr(value) if len(quote) == 1 else triple_quoted(value, quote)
    assert content(check(MAKE, f"[f(s={literal})]")) == [tool_call("f", {"s": value})]


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
    assert content(check(MAKE, f"[f(s={source})]")) == [tool_call("f", {"s": value})]


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


test_any_text_keeps_every_byte_for_any_split = soup_test(
    MAKE, FRAGMENTS, prefix="[", max_size=16, examples=300
)
