"""MiniMax-M2 tool calls: schema-typed values, streaming, recovery, render/parse round trips."""

from __future__ import annotations

from typing import Any

import pytest
from _parsing_helpers import (
    TAG_PIECES,
    calls,
    check,
    factory,
    json_values,
    run,
    soups,
    splits,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallArgumentsDelta
from agentkit.parsing.reasoning import THINK
from agentkit.parsing.tools.minimax_m2 import MINIMAX_M2
from agentkit.transcript import ToolCallBlock

START, END = "<minimax:tool_call>", "</minimax:tool_call>"

SCHEMAS: dict[str, Any] = {
    "write_file": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "mode": {"type": "integer"},
            "append": {"type": "boolean"},
        },
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "filters": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "score": {"type": "number"},
        },
    },
}


def section(*invokes: str) -> str:
    return f"{START}\n{''.join(invokes)}{END}"


def invoke(name: str, **params: str) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params.items())
    return f'<invoke name="{name}">\n{body}</invoke>\n'


CODE = "if a < b:\n    print(\"</p>\", '\\\\')  # ✓ 日本語\n</parameter\n"
CORPUS = [
    "Writing it now.\n\n"
    + section(
        invoke("write_file", path="out/a.txt", content=CODE, mode="420", append="false"),
        invoke("search", query='"exact phrase" \\d+', limit="null"),
    )
    + "\n\nBoth done.",
    "<think>\nfind things\n</think>\n\n"
    + section(
        invoke(
            "search",
            query="  padded\n",
            filters='{"lang": "py", "size": {"max": 10}}',
            tags='["a", "b"]',
            score="0.5",
        )
    ),
    section(invoke("write_file", path="", content="", mode="not a number")),
    section(invoke("now"), invoke("unknown_tool", x="[1, 2]")) + "\n" + section(invoke("now")),
]


def make() -> Any:
    return factory(THINK, MINIMAX_M2, schemas=SCHEMAS)


@pytest.mark.parametrize("output", CORPUS)
def test_corpus_is_chunk_invariant(output: str) -> None:
    check(make(), output)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_splits(data: st.DataObject) -> None:
    output = data.draw(st.sampled_from(CORPUS))
    check(make(), output, data.draw(splits(output)))


def test_values_are_typed_by_the_schema() -> None:
    found = [[(c.name, c.arguments, c.error) for c in calls(check(make(), o))] for o in CORPUS]
    assert found[0] == [
        ("write_file", {"path": "out/a.txt", "content": CODE, "mode": 420, "append": False}, None),
        ("search", {"query": '"exact phrase" \\d+', "limit": None}, None),
    ]
    assert found[1] == [
        (
            "search",
            {
                "query": "  padded\n",
                "filters": {"lang": "py", "size": {"max": 10}},
                "tags": ["a", "b"],
                "score": 0.5,
            },
            None,
        )
    ]
    # an integer that is not one stays text, for the schema check to report
    assert found[2] == [("write_file", {"path": "", "content": "", "mode": "not a number"}, None)]
    # a tool the schemas do not know: values are kept as written
    assert found[3] == [
        ("now", {}, None),
        ("unknown_tool", {"x": "[1, 2]"}, None),
        ("now", {}, None),
    ]


def test_string_values_stream_before_the_value_ends() -> None:
    parser = make()()
    parser.feed(f'{START}\n<invoke name="write_file">\n<parameter name="content">')
    deltas = [e for e in parser.feed("hello </para") if isinstance(e, ToolCallArgumentsDelta)]
    assert "".join(e.delta for e in deltas) == "hello "  # "</para" may be the closing tag
    deltas = [e for e in parser.feed("graph") if isinstance(e, ToolCallArgumentsDelta)]
    assert "".join(e.delta for e in deltas) == "</paragraph"


def test_typed_values_are_sent_when_complete() -> None:
    parser = make()()
    events = parser.feed(f'{START}\n<invoke name="write_file">\n<parameter name="mode">42')
    assert "".join(e.delta for e in events if isinstance(e, ToolCallArgumentsDelta)) == "{"
    events = parser.feed("</parameter>")
    assert [e.delta for e in events if isinstance(e, ToolCallArgumentsDelta)] == ['"mode": 42']


# --- malformed and truncated output ---------------------------------------------------------


def test_truncated_value() -> None:
    output = f'{START}\n<invoke name="write_file">\n<parameter name="content">abc'
    (call,) = calls(check(make(), output))
    assert call.name == "write_file"
    assert call.error is not None
    assert "'content'" in call.error
    assert call.raw == output


def test_missing_end_marker_after_a_complete_invoke() -> None:
    output = f"{START}\n" + invoke("search", query="q") + "\n"
    (call,) = calls(check(make(), output))
    assert (call.arguments, call.error) == ({"query": "q"}, None)


def test_broken_invoke_then_a_good_one() -> None:
    output = section(
        '<invoke name="search">\n<parameter name="query">x</parameter>\nstray</invoke>\n',
        invoke("now"),
    )
    bad, good = calls(check(make(), output))
    assert bad.error is not None
    assert "found 's'" in bad.error
    assert (good.name, good.error) == ("now", None)


def test_single_quoted_and_bare_attributes() -> None:
    output = section("<invoke name='now'>\n<parameter name=query>x</parameter>\n</invoke>\n")
    (call,) = calls(check(make(), output))
    assert (call.name, call.arguments) == ("now", {"query": "x"})


def test_empty_section() -> None:
    (call,) = calls(check(make(), "Ok.\n" + section()))
    assert call.raw == section()
    assert call.error is not None


# --- render ----------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,20}", fullmatch=True)
JSON_VALUES = json_values(st.text(), keys=st.text(max_size=5))
ARGUMENTS = st.dictionaries(
    NAMES,
    JSON_VALUES.filter(lambda v: not isinstance(v, str) or "</parameter>" not in v),
    max_size=4,
)


def schema_for(arguments: dict[str, Any]) -> dict[str, Any]:
    properties = {k: {"type": "string"} if isinstance(v, str) else {} for k, v in arguments.items()}
    return {"type": "object", "properties": properties}


@settings(max_examples=60, deadline=None)
@given(found=st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=3))
def test_render_parse_identity(found: list[tuple[str, dict[str, Any]]]) -> None:
    blocks = [ToolCallBlock(id="x", name=n, arguments=a) for n, a in found]
    schemas = {n: schema_for(a) for n, a in found}
    if len(schemas) < len(found):  # one schema per name: keep calls whose types agree
        blocks = [b for b in blocks if schema_for(b.arguments) == schemas[b.name]]
    parsed = calls(run(factory(None, MINIMAX_M2, schemas=schemas), [MINIMAX_M2.render(blocks)])[0])
    assert [(c.name, c.arguments, c.error) for c in parsed] == [
        (b.name, b.arguments, None) for b in blocks
    ]


def test_render_layout() -> None:
    call = ToolCallBlock(id="1", name="search", arguments={"query": "x", "tags": ["a"]})
    assert MINIMAX_M2.render([call]) == section(invoke("search", query="x", tags='["a"]'))


FRAGMENTS = [
    START,
    END,
    '<invoke name="search">',
    "<invoke name=",
    "</invoke>",
    '<parameter name="query">',
    '<parameter name="limit">',
    "</parameter>",
    "5",
    "x",
    *TAG_PIECES,
]


@settings(max_examples=80, deadline=None)
@given(output=soups(FRAGMENTS), data=st.data())
def test_fuzz_any_mix_of_fragments_keeps_every_invariant(output: str, data: st.DataObject) -> None:
    check(make(), output, data.draw(splits(output)))
