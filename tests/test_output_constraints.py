"""OutputConstraints: what a request's constraints say, and the checks a test engine can make
without a grammar engine. A check that rejects output a constrained model could produce would
break honest tests; one that accepts anything would hide broken scripts: both are tested."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.engine import ConstraintViolationError, OutputConstraints
from agentkit.errors import ConfigurationError, EngineError
from agentkit.parsing import get_reasoning_syntax, get_tool_syntax, tool_call_constraint
from agentkit.parsing.tools import tool_syntax_names
from agentkit.transcript import ToolCallBlock

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
TOOLS: dict[str, dict[str, Any]] = {"get_weather": WEATHER, "clock": {}}
CONSTRAINED = sorted({get_tool_syntax(n).name for n in tool_syntax_names()} - {"pythonic"})


def violation(constraints: OutputConstraints, output: str, **kw: Any) -> ConstraintViolationError:
    with pytest.raises(ConstraintViolationError) as caught:
        constraints.check(output, **kw)
    return caught.value


def test_reads_every_vllm_key_and_names_them() -> None:
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}
    extra = {
        "structured_outputs": {
            "json": json.dumps(WEATHER),
            "regex": "a+",
            "choice": ["yes", "no"],
            "grammar": "root ::= 'a'",
            "structural_tag": json.dumps(tag),
            "json_object": True,
        },
        "bad_words": ["<tool_call>"],
        "priority": 3,
    }
    got = OutputConstraints.from_extra(extra)
    assert got.json_schema == WEATHER
    assert (got.regex, got.choice, got.grammar) == ("a+", ("yes", "no"), "root ::= 'a'")
    assert got.structural_tag == tag
    assert got.json_object
    assert got.bad_words == ("<tool_call>",)
    assert got.names == (
        "structured_outputs.json",
        "structured_outputs.json_object",
        "structured_outputs.regex",
        "structured_outputs.choice",
        "structured_outputs.grammar",
        "structured_outputs.structural_tag",
        "bad_words",
    )
    assert not OutputConstraints.from_extra({"seed": 1})
    assert OutputConstraints.from_extra({"structured_outputs": {"json": WEATHER}}).json_schema


def test_a_constraint_document_that_is_not_json_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"structured_outputs\.structural_tag"):
        OutputConstraints.from_extra({"structured_outputs": {"structural_tag": "{not json"}})


def test_a_bad_word_anywhere_is_a_violation_naming_the_phrase() -> None:
    constraints = OutputConstraints(bad_words=("<tool_call>",))
    constraints.check("plain answer")
    error = violation(constraints, "ok <tool_call>{}", request_id="r-1")
    assert isinstance(error, EngineError)
    assert error.constraint == "bad_words"
    assert error.request_id == "r-1"
    assert error.output == "ok <tool_call>{}"
    assert "'<tool_call>'" in str(error)
    assert "offset 3" in str(error)
    # Even in an output cut short: the phrase was emitted all the same.
    assert violation(constraints, "<tool_call>", complete=False).constraint == "bad_words"


def test_json_must_parse_and_satisfy_the_schema() -> None:
    constraints = OutputConstraints(json_schema=WEATHER)
    constraints.check(' {"city": "Oslo", "days": 2}\n')
    assert "not JSON" in str(violation(constraints, "Oslo"))
    error = violation(constraints, '{"city": "Oslo", "days": "two"}')
    assert error.constraint == "structured_outputs.json"
    assert "days" in str(error)
    assert "top level" in str(violation(constraints, '{"days": 1}'))
    # A truncated output is not held to the schema.
    constraints.check('{"city": "Os', complete=False)


def test_json_object_regex_and_choice() -> None:
    only_object = OutputConstraints(json_object=True)
    only_object.check("{}")
    assert violation(only_object, "[1]").constraint == "structured_outputs.json_object"
    regex = OutputConstraints(regex=r"[0-9]{3}")
    regex.check("123")
    assert violation(regex, "1234").constraint == "structured_outputs.regex"
    choice = OutputConstraints(choice=("yes", "no"))
    choice.check("no")
    assert violation(choice, "maybe").constraint == "structured_outputs.choice"


def test_what_cannot_be_decided_here_is_recorded_only() -> None:
    OutputConstraints(grammar="root ::= 'a'").check("anything at all")
    OutputConstraints(regex="(?P<unclosed").check("anything")
    legacy = {"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], "triggers": ["<f"]}
    OutputConstraints(structural_tag=legacy).check("no call at all")


def call_blocks(names: list[str], city: str) -> list[ToolCallBlock]:
    arguments: dict[str, dict[str, Any]] = {"get_weather": {"city": city}, "clock": {}}
    return [
        ToolCallBlock(id=f"call_{i}", name=n, arguments=arguments[n]) for i, n in enumerate(names)
    ]


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(CONSTRAINED),
    named=st.booleans(),
    names=st.lists(st.sampled_from(["get_weather", "clock"]), min_size=1, max_size=3),
    city=st.text(st.characters(codec="utf-8", exclude_characters="<>&\"'\\"), max_size=12),
    reasoning=st.sampled_from(["", "<think>\nweigh it\n</think>\n\n"]),
)
def test_a_canonical_call_passes_the_tool_choice_grammar(
    fmt: str, named: bool, names: list[str], city: str, reasoning: str
) -> None:
    syntax = get_tool_syntax(fmt)
    if named:
        names = names[:1]
    document = tool_call_constraint(
        syntax, TOOLS, name=names[0] if named else None, reasoning=get_reasoning_syntax("think")
    )
    constraints = OutputConstraints(structural_tag=document)
    constraints.check(reasoning + syntax.render(call_blocks(names, city)))
    # Prose where the grammar wants a call is what a constrained model cannot write.
    error = violation(constraints, reasoning + f"The weather in {city} is fine.")
    assert error.constraint == "structured_outputs.structural_tag"


@pytest.mark.parametrize("fmt", CONSTRAINED)
def test_a_named_tool_grammar_rejects_a_call_of_another_tool(fmt: str) -> None:
    syntax = get_tool_syntax(fmt)
    document = tool_call_constraint(syntax, TOOLS, name="get_weather")
    with pytest.raises(ConstraintViolationError, match="get_weather"):
        OutputConstraints(structural_tag=document).check(syntax.render(call_blocks(["clock"], "")))


def test_reasoning_the_prompt_opened_must_be_closed() -> None:
    hermes = get_tool_syntax("hermes")
    document = tool_call_constraint(
        hermes, TOOLS, name="clock", reasoning=get_reasoning_syntax("deepseek_r1")
    )
    constraints = OutputConstraints(structural_tag=document)
    call = hermes.render(call_blocks(["clock"], ""))
    constraints.check("thinking...</think>\n" + call)
    with pytest.raises(ConstraintViolationError, match="</think>"):
        constraints.check(call)


def tag(fmt: dict[str, Any]) -> OutputConstraints:
    return OutputConstraints(structural_tag={"type": "structural_tag", "format": fmt})


def test_alternatives_and_triggers() -> None:
    either = tag(
        {
            "type": "or",
            "elements": [
                {"type": "const_string", "value": "<a>"},
                {"type": "sequence", "elements": [{"type": "const_string", "value": "<b>"}]},
            ],
        }
    )
    either.check("x <b> y")
    assert "any of ['<a>', '<b>']" in str(violation(either, "<c>"))
    # An alternative with nothing certain (free JSON) makes nothing mandatory.
    tag(
        {
            "type": "or",
            "elements": [
                {"type": "const_string", "value": "<a>"},
                {"type": "json_schema", "json_schema": {}},
            ],
        }
    ).check("{}")
    triggered = {"type": "triggered_tags", "triggers": ["<f="], "tags": []}
    tag(triggered).check("no call")
    with pytest.raises(ConstraintViolationError):
        tag({**triggered, "at_least_one": True}).check("no call")


@st.composite
def steps_and_an_output_meeting_them(draw: st.DrawFn) -> tuple[list[tuple[str, ...]], str]:
    piece = st.text(alphabet="ab<>", min_size=1, max_size=4)
    steps = draw(st.lists(st.lists(piece, min_size=1, max_size=3), max_size=5))
    output = ""
    for step in steps:
        output += draw(st.text(alphabet="ab<>", max_size=3)) + draw(st.sampled_from(step))
    return [tuple(s) for s in steps], output + draw(st.text(alphabet="ab<>", max_size=3))


@settings(max_examples=200, deadline=None)
@given(steps_and_an_output_meeting_them())
def test_the_order_search_finds_every_output_that_meets_the_steps(
    case: tuple[list[tuple[str, ...]], str],
) -> None:
    steps, output = case
    fmt = {
        "type": "sequence",
        "elements": [
            {"type": "or", "elements": [{"type": "const_string", "value": s} for s in step]}
            for step in steps
        ],
    }
    tag(fmt).check(output)
