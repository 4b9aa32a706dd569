"""No parser ever raises: whatever the model writes, split however the engine streams it, every
parser (each profile's and each pair of formats the factory builds) produces blocks that keep
every byte, the same for every split. Malformed output becomes text or error calls.

The regression tests hold the minimal inputs of the bugs a marker-soup sweep found
(``_fuzz.py``, which also runs a bigger sweep as a script); the properties below draw from the
same soup.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest
from _fuzz import (
    FILLERS,
    FRAGMENTS,
    JSON_PIECES,
    MARKERS,
    PAIRS,
    RENDERED,
    TEXT_PIECES,
    Pair,
    soup,
    tokens,
)
from _parsing_helpers import calls, check, seeded_splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import create_parser
from agentkit.parsing._values import MAX_DEPTH
from agentkit.parsing.tools._xml_values import ANY, convert_value
from agentkit.transcript import ContentBlock, Message, ToolCallBlock, Transcript

# -- regressions ----------------------------------------------------------------------------

ISSUE_20 = (
    "<tool_call>r<arg_key>cread_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
    "<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
    "<function=get_weather>\n<parameter=city>\nOslo\n<parameter=metric>\nTrue\n</function>\n"
    '</tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
)


def test_the_issue_20_output_parses_when_its_last_character_comes_alone() -> None:
    """GLM read the argument name ``<arg_key>...`` without consuming it (a name over 256
    characters is refused from its start); the split made the refusal come one feed later,
    and the section's recovery then ended at a ``</tool_call>`` inside the text it had held,
    which it could not hand back: ``RuntimeError``. Now a section hands such text back
    (``SectionStep.unread``) and the driver parses it again."""
    blocks = check(Pair("glm45", "glm45").make, ISSUE_20, [ISSUE_20[:-1], ISSUE_20[-1:]])
    first = calls(blocks)[0]
    assert first.name == "r"
    assert first.error is not None
    assert "longer than 256 characters" in first.error
    assert (first.raw or "").endswith("</function>\n</tool_call>")


@pytest.mark.parametrize("tools", ["glm45", "glm47"])
def test_a_section_ending_inside_held_text_hands_it_back(tools: str) -> None:
    output = "<tool_call>f<arg_key>k</tool_call>" + "x" * 300
    blocks = check(Pair(None, tools).make, output)  # a character at a time
    assert [(b.type, b.raw) for b in blocks] == [
        ("tool_call", "<tool_call>f<arg_key>k</tool_call>"),
        ("text", "x" * 300),
    ]


@pytest.mark.parametrize("tools", ["mistral", "mistral_v11", "mistral_legacy"])
def test_a_mistral_name_is_too_long_at_the_same_character_for_every_split(tools: str) -> None:
    """The name's length was checked per feed: a long name that ended inside one feed was
    accepted (and failed later on), one fed in pieces was refused at 257 characters."""
    output = "[TOOL_CALLS]" + "x" * 300 + "<"
    blocks = check(Pair(None, tools).make, output)
    assert [(b.type, b.raw) for b in blocks] == [
        ("tool_call", "[TOOL_CALLS]" + "x" * 257),
        ("text", "x" * 43 + "<"),
    ]
    assert "too long" in (calls(blocks)[0].error or "")
    (call,) = calls(check(Pair(None, tools).make, "[TOOL_CALLS]" + "x" * 256 + "[ARGS]{}"))
    assert (call.name, call.error) == ("x" * 256, None)


def test_a_pythonic_name_is_too_long_at_the_same_character_for_every_split() -> None:
    output = "[f(a=1), " + "x" * 300 + "(a=1)]"
    blocks = check(Pair(None, "pythonic").make, output)
    assert [(b.type, len(b.raw or "")) for b in blocks] == [
        ("tool_call", len("[f(a=1)")),
        ("tool_call", len(", ") + 257),
        ("text", 43 + len("(a=1)]")),
    ]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


DEEP_CALLS = {
    "hermes": '<tool_call>{"name": "f", "arguments": {"x": DEEP}}</tool_call>',
    "llama3_json": '{"name": "f", "parameters": {"x": DEEP}}',
    "mistral": '[TOOL_CALLS]f[ARGS]{"x": DEEP}',
    "mistral_legacy": '[TOOL_CALLS] [{"name": "f", "arguments": {"x": DEEP}}]',
    "nemotron_deci": '<TOOLCALL>[{"name": "f", "arguments": {"x": DEEP}}]</TOOLCALL>',
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n"
    '```json\n{"x": DEEP}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
    '{"x": DEEP}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
    '<|tool_call_argument_begin|>{"x": DEEP}<|tool_call_end|><|tool_calls_section_end|>',
    "pythonic": "[f(x=DEEP)]",
    "qwen3_coder": "<tool_call>\n<function=f>\n<parameter=x>\nDEEP\n</parameter>\n</function>\n"
    "</tool_call>",
    "glm45": "<tool_call>f<arg_key>x</arg_key><arg_value>DEEP</arg_value></tool_call>",
    "minimax_m2": '<minimax:tool_call><invoke name="f"><parameter name="x">DEEP</parameter>'
    "</invoke></minimax:tool_call>",
    "deepseek_v4": '<｜DSML｜tool_calls><｜DSML｜invoke name="f"><｜DSML｜parameter name="x" '
    'string="false">DEEP</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>',
    "harmony": "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json"
    '<|message|>{"x": DEEP}<|call|>',
}
ANY_X = {"f": {"type": "object", "properties": {"x": {}}}}


def _parse_whole(tools: str, output: str) -> ToolCallBlock:
    """The one call in ``output``, parameter ``x`` typed as any JSON where that matters."""
    reasoning = "harmony" if tools == "harmony" else None
    parser = create_parser(reasoning, tools, tool_schemas=ANY_X)
    parser.feed(output)
    parser.finish()
    (call,) = calls(parser.blocks)
    return call


@pytest.mark.parametrize("tools", list(DEEP_CALLS))
@pytest.mark.parametrize("depth", [1000, 100_000])
def test_arguments_nested_deeper_than_json_can_decode_are_an_error_call(
    tools: str, depth: int
) -> None:
    """``json.loads`` raised ``RecursionError`` (not a decoding error) on a degenerate
    ``[[[[...`` a thousand levels deep, out of every JSON format's parser."""
    call = _parse_whole(tools, DEEP_CALLS[tools].replace("DEEP", _deep(depth)))
    assert call.name == "f"
    if call.error is None:  # a tagged value that is not JSON is the text itself
        assert call.arguments == {"x": _deep(depth)}
    else:
        assert call.arguments == {}
    _serialises(call)


@pytest.mark.parametrize("tools", list(DEEP_CALLS))
def test_arguments_a_transcript_could_not_serialise_are_refused(tools: str) -> None:
    """A value a few hundred levels deep decoded, and then the transcript could not be
    written (pydantic refuses to serialise it) or read back."""
    call = _parse_whole(tools, DEEP_CALLS[tools].replace("DEEP", _deep(300)))
    if call.error is not None:
        assert "nested more than" in call.error or "not a Python literal" in call.error
    else:
        assert call.arguments == {"x": _deep(300)}
    _serialises(call)


@pytest.mark.parametrize("tools", list(DEEP_CALLS))
def test_arguments_of_ordinary_depth_still_parse(tools: str) -> None:
    depth = MAX_DEPTH - 3  # the call's own object, its arguments and "x" are levels too
    call = _parse_whole(tools, DEEP_CALLS[tools].replace("DEEP", _deep(depth)))
    assert call.error is None
    value: Any = call.arguments["x"]
    for _ in range(depth - 1):
        (value,) = value
    assert value == []


@pytest.mark.parametrize("tools", list(DEEP_CALLS))
def test_a_lone_surrogate_escape_is_refused(tools: str) -> None:
    """``"\\ud800"`` (half of a pair the model never finished) decoded to a string that no
    UTF-8 writer can encode: the transcript could not be saved, nor the call sent to a
    client. It is an error call now (a tagged value: the text as written)."""
    call = _parse_whole(tools, DEEP_CALLS[tools].replace("DEEP", '"\\ud800"'))
    if call.error is not None:
        assert "lone surrogate" in call.error
        assert call.arguments == {}
    else:
        assert call.arguments == {"x": '"\\ud800"'}
    _serialises(call)
    if tools != "pythonic":  # in a Python literal, even a pair of escapes is two lone halves
        pair = _parse_whole(tools, DEEP_CALLS[tools].replace("DEEP", '"\\ud83d\\ude00"'))
        assert (pair.arguments, pair.error) == ({"x": "\U0001f600"}, None)


def _serialises(*blocks: ContentBlock) -> None:
    transcript = Transcript(messages=[Message(role="assistant", content=list(blocks))])
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript


def test_a_tagged_value_is_read_the_same_under_any_warnings_filter() -> None:
    """``ast.literal_eval`` warns on some model text (``"\\d"``, ``1x``): the warning reached
    the application's stderr, and under ``-W error`` it turned ``"\\d"`` (a string literal)
    into plain text."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert convert_value("1x", ANY) == "1x"
        assert convert_value('"\\d"', ANY) == "\\d"
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert convert_value('"\\d"', ANY) == "\\d"


# -- properties -----------------------------------------------------------------------------

_PIECES = st.one_of(
    st.sampled_from(MARKERS),
    st.sampled_from(FRAGMENTS),
    st.sampled_from(JSON_PIECES),
    st.sampled_from(TEXT_PIECES),
    st.sampled_from(FILLERS + tuple(RENDERED.values())),
)
_SOUPS = st.lists(_PIECES, max_size=25).map("".join)


@st.composite
def _outputs(draw: st.DrawFn, pair: Pair) -> str:
    """Marker soup, or the pair's own well-formed output with soup spliced in and cut short."""
    if draw(st.booleans()):
        return draw(_SOUPS)
    own = tokens(RENDERED.get(pair.tools or "", "") or RENDERED["hermes"])
    cut = draw(st.integers(0, len(own)))
    resume = draw(st.integers(cut, len(own)))
    end = draw(st.integers(resume, len(own)))
    return "".join(own[:cut]) + draw(_SOUPS) + "".join(own[resume:end])


@st.composite
def _chunkings(draw: st.DrawFn, output: str) -> list[str]:
    """A character at a time, the last character alone, a split anywhere, or token-like."""
    kind = draw(st.sampled_from(["characters", "last", "split", "tokens"]))
    if kind == "characters" or len(output) < 2:
        return list(output)
    if kind == "last":
        return [output[:-1], output[-1:]]
    if kind == "split":
        at = draw(st.integers(1, len(output) - 1))
        return [output[:at], output[at:]]
    return seeded_splits(output, draw(st.integers(0, 2**32)))


@settings(max_examples=1000, deadline=None)
@given(pair=st.sampled_from(PAIRS), data=st.data())
def test_no_parser_raises_or_loses_text_under_any_chunking(pair: Pair, data: st.DataObject) -> None:
    output = data.draw(_outputs(pair), label="output")
    _serialises(*check(pair.make, output, data.draw(_chunkings(output), label="chunks")))


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_every_pair_survives_its_own_soup(pair: Pair) -> None:
    """Every pair, once: a seeded soup of its own formats and everyone's markers, fed with
    its last character alone (the split of issue 20) and token-like."""
    index = PAIRS.index(pair)
    output = soup(random.Random(index), 12, pair.reasoning, pair.tools)
    check(pair.make, output, [output[:-1], output[-1:]])
    _serialises(*check(pair.make, output, seeded_splits(output, index)))
