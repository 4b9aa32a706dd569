"""Qwen3-Coder XML tool calls: schema-typed values, streaming, malformed calls, round trips."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, run, splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import get_reasoning_syntax, get_tool_syntax, render_blocks
from agentkit.parsing.tools import QWEN3_CODER
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock

THINK = get_reasoning_syntax("think")
SCHEMAS: dict[str, Any] = {
    "write_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "threshold": {"type": "number"},
            "exact": {"type": "boolean"},
            "filters": {"type": "object"},
            "tags": {"type": "array"},
            "cursor": {"type": ["string", "null"]},
            "mode": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
    },
    # An OpenAI-style function spec is accepted as well as a bare parameters schema.
    "spec_style": {"name": "spec_style", "parameters": {"properties": {"n": {"type": "integer"}}}},
}
MAKE = factory(THINK, QWEN3_CODER, schemas=SCHEMAS)


def call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


CODE = "def f(a, b):\n    return a < b and \"</x>\" != '\\\\n'  # 😀 ünïcode </tool_call>\n"

CORPUS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "reasoning, call, text": (
        "<think>\nI'll write the file.\n</think>\n\n"
        + call("write_file", path="src/app.py", content=CODE)
        + "\n\nWritten.",
        [
            {"type": "reasoning", "text": "I'll write the file.\n"},
            {
                "type": "tool_call",
                "name": "write_file",
                "arguments": {"path": "src/app.py", "content": CODE},
                "error": None,
            },
            {"type": "text", "text": "Written."},
        ],
    ),
    "typed values": (
        call(
            "search",
            query="  spaced  ",
            limit="10",
            threshold="0.5",
            exact="True",
            filters='{"lang": "py", "n": [1, 2]}',
            tags="['a', 'b']",
            cursor="null",
            mode="None",
        ),
        [
            {
                "type": "tool_call",
                "name": "search",
                "arguments": {
                    "query": "  spaced  ",
                    "limit": 10,
                    "threshold": 0.5,
                    "exact": True,
                    "filters": {"lang": "py", "n": [1, 2]},
                    "tags": ["a", "b"],
                    "cursor": None,  # null is allowed, so "null" means null
                    "mode": None,
                },
                "error": None,
            }
        ],
    ),
    "values that do not convert stay strings": (
        call("search", limit="ten", exact="maybe", unknown="42", threshold="NaN", cursor="42"),
        [
            {
                "type": "tool_call",
                "name": "search",
                "arguments": {
                    "limit": "ten",
                    "exact": "maybe",
                    "unknown": "42",
                    "threshold": "NaN",
                    "cursor": "42",
                },
                "error": None,
            }
        ],
    ),
    "unknown tool keeps strings": (
        call("mystery", a="1", b="[1]"),
        [
            {
                "type": "tool_call",
                "name": "mystery",
                "arguments": {"a": "1", "b": "[1]"},
                "error": None,
            }
        ],
    ),
    "function spec schema": (
        call("spec_style", n="3"),
        [{"type": "tool_call", "name": "spec_style", "arguments": {"n": 3}, "error": None}],
    ),
    "two calls and text between": (
        "Reading.\n"
        + call("write_file", path="a")
        + "\n"
        + call("write_file", path="b", content="")
        + "\nok",
        [
            {"type": "text", "text": "Reading.\n"},
            {"type": "tool_call", "name": "write_file", "arguments": {"path": "a"}, "error": None},
            {
                "type": "tool_call",
                "name": "write_file",
                "arguments": {"path": "b", "content": ""},
                "error": None,
            },
            {"type": "text", "text": "ok"},
        ],
    ),
    "no parameters": (
        "<tool_call>\n<function=now>\n</function>\n</tool_call>",
        [{"type": "tool_call", "name": "now", "arguments": {}, "error": None}],
    ),
    "value with surrounding blank lines": (
        call("write_file", content="\nbody\n"),
        [
            {
                "type": "tool_call",
                "name": "write_file",
                "arguments": {"content": "\nbody\n"},
                "error": None,
            }
        ],
    ),
    "value without newlines": (
        "<tool_call><function=write_file><parameter=path>x.py</parameter></function></tool_call>",
        [{"type": "tool_call", "name": "write_file", "arguments": {"path": "x.py"}, "error": None}],
    ),
    "missing </parameter> tags": (
        "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n<parameter=content>\nx\n"
        "</function>\n</tool_call>",
        [
            {
                "type": "tool_call",
                "name": "write_file",
                "arguments": {"path": "a.py", "content": "x"},
                "error": None,
            }
        ],
    ),
    "two functions in one section": (
        "<tool_call>\n<function=a>\n</function>\n<function=b>\n<parameter=k>\nv\n</parameter>\n"
        "</function>\n</tool_call>",
        [
            {"type": "tool_call", "name": "a", "arguments": {}, "error": None},
            {"type": "tool_call", "name": "b", "arguments": {"k": "v"}, "error": None},
        ],
    ),
    "missing </function>": (
        "<tool_call>\n<function=a>\n<parameter=k>\nv\n</parameter>\n</tool_call>",
        [{"type": "tool_call", "name": "a", "arguments": {"k": "v"}, "error": None}],
    ),
    "interleaved reasoning and calls": (
        "<think>r0</think>" + call("a", i="0") + "<think>r1</think>" + call("b", i="1") + "end",
        [
            {"type": "reasoning", "text": "r0"},
            {"type": "tool_call", "name": "a", "arguments": {"i": "0"}, "error": None},
            {"type": "reasoning", "text": "r1"},
            {"type": "tool_call", "name": "b", "arguments": {"i": "1"}, "error": None},
            {"type": "text", "text": "end"},
        ],
    ),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_whole_and_by_character(name: str) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output)) == expected


@pytest.mark.parametrize("name", list(CORPUS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_corpus_random_splits(name: str, data: st.DataObject) -> None:
    output, expected = CORPUS[name]
    assert content(check(MAKE, output, data.draw(splits(output)))) == expected


def test_string_values_stream_as_they_arrive() -> None:
    parser = MAKE()
    events = parser.feed("<tool_call>\n<function=write_file>\n<parameter=content>\nline one\n")
    deltas = "".join(e.delta for e in events if e.type == "tool_call_arguments_delta")  # type: ignore[union-attr]
    assert deltas == '{"content": "line one'  # the newline may be the one before the tag
    events = parser.feed("line two\n</param")
    deltas = "".join(e.delta for e in events if e.type == "tool_call_arguments_delta")  # type: ignore[union-attr]
    assert deltas == "\\nline two"
    events = parser.feed("eter>\n<parameter=path>\nx\n</parameter>\n</function>")
    deltas = "".join(e.delta for e in events if e.type == "tool_call_arguments_delta")  # type: ignore[union-attr]
    assert deltas == '", "path": "x"}'


def test_typed_values_are_sent_whole_when_the_parameter_closes() -> None:
    parser = MAKE()
    events = parser.feed("<tool_call>\n<function=search>\n<parameter=limit>\n12")
    assert [e.delta for e in events if e.type == "tool_call_arguments_delta"] == ["{"]  # type: ignore[union-attr]
    events = parser.feed("\n</parameter>\n")
    assert [e.delta for e in events if e.type == "tool_call_arguments_delta"] == ['"limit": 12']  # type: ignore[union-attr]


def test_values_follow_the_rule_of_every_tagged_format() -> None:
    """The rule of MiniMax-M2, DSML and GLM (``convert_value``): a parameter described without
    a type takes any JSON; JSON of another type than the parameter's is its text verbatim where
    strings are accepted, and the value as read where they are not (the schema check reports
    it to the model)."""
    properties = {"any": {}, "ref": {"$ref": "#/$defs/X"}, "n": {"type": "integer"}}
    properties["s"] = {"type": ["string", "null"]}
    make = factory(None, QWEN3_CODER, schemas={"f": {"type": "object", "properties": properties}})
    output = call("f", any='{"k": [1]}', ref="plain text", n="[1]", s='"quoted"')
    (found,) = calls(check(make, output))
    assert found.arguments == {"any": {"k": [1]}, "ref": "plain text", "n": [1], "s": '"quoted"'}


MALFORMED: dict[str, tuple[str, str, str]] = {
    "truncated in a value": (
        "<tool_call>\n<function=write_file>\n<parameter=content>\nhalf a li",
        "truncated",
        "write_file",
    ),
    "truncated in the function tag": ("<tool_call>\n<function=wri", "truncated", ""),
    "truncated after the marker": ("text <tool_call>", "truncated", ""),
    "JSON instead of XML": (
        '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>',
        "expected <function=",
        "",
    ),
    "newline in the function name": (
        "<tool_call>\n<function=a\nb>\n</function>\n</tool_call>",
        "malformed <function=",
        "",
    ),
    "text between parameters": (
        "<tool_call>\n<function=a>\nhello\n</function>\n</tool_call>",
        "expected <parameter=",
        "a",
    ),
    "name over the limit": (
        "<tool_call>\n<function=" + "f" * 1100 + ">\n</function>\n</tool_call>",
        "longer than 1024",
        "",
    ),
    "text after the function": (
        "<tool_call>\n<function=a>\n</function>\noops</tool_call>",
        "unexpected text after </function>",
        "a",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_an_error_with_raw(name: str) -> None:
    output, message, call_name = MALFORMED[name]
    blocks = check(MAKE, output)
    (bad,) = calls(blocks)
    assert bad.error is not None
    assert message in bad.error
    assert bad.arguments == {}
    assert bad.name == call_name


@pytest.mark.parametrize("ending", ["", "\n", "\n</tool_"])
def test_missing_closing_tag_is_recovered(ending: str) -> None:
    output = call("write_file", path="a.py").removesuffix("\n</tool_call>") + ending
    (recovered,) = calls(check(MAKE, output))
    assert recovered.error is None
    assert recovered.arguments == {"path": "a.py"}


def test_first_parameter_end_closes_the_value() -> None:
    """Documented limitation: a value cannot contain ``</parameter>``."""
    output = call("write_file", content="a</parameter>b")
    blocks, _ = run(MAKE, [output])
    (bad,) = calls(blocks)
    assert bad.error is not None  # "b" is unexpected text inside the function


# -- render / parse ------------------------------------------------------------------------------

_CHARS = st.characters(blacklist_categories=("Cs",))
_VALUE_ENDS = ("</parameter>", "<parameter=", "</function>")
MARKERS = ("<think>", "</think>", "<tool_call>")
KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,9}", fullmatch=True)
STRING_VALUES = st.text(st.sampled_from(list("ab <>/=\n\t\"'\\é")) | _CHARS, max_size=25).filter(
    lambda v: not any(end in v for end in _VALUE_ENDS)
)
TYPED_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "integer": st.integers(-(10**9), 10**9),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
    "array": st.lists(st.integers() | st.text(_CHARS, max_size=5), max_size=3),
    "object": st.dictionaries(st.text(_CHARS, max_size=5), st.integers(), max_size=3),
    "string": STRING_VALUES,
}
TYPED_SCHEMA = {
    "typed": {"type": "object", "properties": {t: {"type": t} for t in TYPED_VALUES}},
}


def _text(min_size: int) -> st.SearchStrategy[str]:
    alphabet = st.sampled_from(list("ab <>/\n{}=")) | _CHARS
    return st.text(alphabet, min_size=min_size, max_size=25).filter(
        lambda t: not t[:1].isspace() and not any(m in t for m in MARKERS)
    )


def _valid(blocks: list[Any]) -> bool:
    return not any(
        isinstance(a, TextBlock) and isinstance(b, TextBlock) for a, b in itertools.pairwise(blocks)
    )


untyped_call = st.builds(
    lambda n, a: ToolCallBlock(id="x", name=n, arguments=a),
    KEYS,
    st.dictionaries(KEYS, STRING_VALUES, max_size=4),
)
typed_call = st.fixed_dictionaries({}, optional=dict(TYPED_VALUES.items())).map(
    lambda a: ToolCallBlock(id="x", name="typed", arguments=a)
)
any_block = (
    _text(0).map(lambda t: ReasoningBlock(text=t))
    | _text(1).map(lambda t: TextBlock(text=t))
    | untyped_call
    | typed_call
)


@settings(max_examples=40, deadline=None)
@given(blocks=st.lists(any_block, max_size=6).filter(_valid), data=st.data())
def test_render_then_parse_is_identity(blocks: list[Any], data: st.DataObject) -> None:
    output = render_blocks(blocks, THINK, QWEN3_CODER)
    make = factory(THINK, QWEN3_CODER, schemas=TYPED_SCHEMA)
    parsed = check(make, output, data.draw(splits(output)))
    assert content(parsed) == content(blocks)
    assert render_blocks(parsed, THINK, QWEN3_CODER, exact=False) == output


def test_render_is_the_chat_template_form() -> None:
    block = ToolCallBlock(id="x", name="f", arguments={"s": "a\nb", "n": 1, "o": {"k": [True]}})
    assert QWEN3_CODER.render([block]) == (
        "<tool_call>\n<function=f>\n"
        "<parameter=s>\na\nb\n</parameter>\n"
        "<parameter=n>\n1\n</parameter>\n"
        '<parameter=o>\n{"k": [true]}\n</parameter>\n'
        "</function>\n</tool_call>"
    )


def test_registry_aliases() -> None:
    assert get_tool_syntax("qwen3_coder") is QWEN3_CODER
    assert get_tool_syntax("qwen3-coder") is QWEN3_CODER
    assert json.loads(json.dumps(QWEN3_CODER.start_markers)) == ["<tool_call>"]
