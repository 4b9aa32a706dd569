"""tool_choice: the grammar of each call format, and how the agent applies a choice.

The grammars are xgrammar structural tags, compiled by vLLM; xgrammar itself is only in the
slow suite's environment, where tests/slow/test_tool_choice_grammar.py checks that it accepts
agentkit's canonical calls. Here each grammar is *instantiated*: the one string it admits for
given arguments is built by walking the document, and the format's own parser must read the
intended calls back from it. A wrong marker, separator or argument wrapper fails that.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.errors import ConfigurationError
from agentkit.parsing import (
    call_shape,
    create_parser,
    get_reasoning_syntax,
    get_tool_syntax,
    tool_call_constraint,
)
from agentkit.parsing.tools import tool_syntax_names
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock

pytestmark = pytest.mark.anyio

CONSTRAINED = sorted({get_tool_syntax(n).name for n in tool_syntax_names()} - {"pythonic"})

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
CLOCK: dict[str, Any] = {}


def _xml(style: str, arguments: dict[str, Any]) -> str:
    """Arguments in one of xgrammar's XML parameter styles, as a model would write them."""

    def value(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v)

    parts = []
    for key, v in arguments.items():
        if style == "qwen_xml":
            parts.append(f"<parameter={key}>\n{value(v)}\n</parameter>\n")
        elif style == "minimax_xml":
            parts.append(f'<parameter name="{key}">{value(v)}</parameter>\n')
        elif style in ("deepseek_xml", "deepseek_v4_1_xml"):
            string = "true" if isinstance(v, str) else "false"
            tag = "｜DSML｜parameter" if style == "deepseek_xml" else "｜DSML｜ parameter"
            parts.append(f'<{tag} name="{key}" string="{string}">{value(v)}</{tag}>\n')
        elif style == "glm_xml":
            parts.append(f"<arg_key>{key}</arg_key><arg_value>{value(v)}</arg_value>")
        else:
            raise AssertionError(style)
    return "".join(parts)


def instantiate(node: dict[str, Any], calls: list[tuple[str, dict[str, Any]]], text: str) -> str:
    """The string ``node`` admits when the calls are ``calls`` and free text is ``text``."""
    kind = node["type"]
    if kind == "structural_tag":
        return instantiate(node["format"], calls, text)
    if kind == "sequence":
        return "".join(instantiate(e, calls, text) for e in node["elements"])
    if kind == "const_string":
        return str(node["value"])
    if kind == "optional":
        return instantiate(node["content"], calls, text)
    if kind == "any_text":
        assert not any(x in text for x in node["excludes"])
        return text
    if kind == "regex":
        return {"[0-9]{1,3}": "0", "[a-zA-Z0-9_-]{1,64}": "a1B2c3D4e", r"\s{0,4}": "\n\n"}[
            node["pattern"]
        ]
    if kind == "tags_with_separator":
        assert node["at_least_one"]
        by_begin = {tag["begin"]: tag for tag in node["tags"]}
        pieces = []
        for name, arguments in calls:
            tag = next(t for b, t in by_begin.items() if f"{name}" in b)
            pieces.append(instantiate(tag, [(name, arguments)], text))
        return str(node["separator"]).join(pieces)
    if kind == "tag":
        assert len(calls) <= 1
        return node["begin"] + instantiate(node["content"], calls, text) + node["end"]
    if kind == "json_schema":
        ((_, arguments),) = calls
        if node["style"] == "json":
            return json.dumps(arguments, ensure_ascii=False)
        return _xml(node["style"], arguments)
    raise AssertionError(f"unexpected node {kind}")


def schemas_of(*names: str) -> dict[str, dict[str, Any]]:
    table = {"get_weather": WEATHER, "clock": CLOCK}
    return {n: table[n] for n in names}


def parsed_calls(fmt: str, text: str, reasoning: str | None = None) -> list[ToolCallBlock]:
    parser = create_parser(reasoning, fmt, tool_schemas=schemas_of("get_weather", "clock"))
    parser.feed(text)
    parser.finish()
    return [b for b in parser.blocks if isinstance(b, ToolCallBlock)]


@pytest.mark.parametrize("fmt", CONSTRAINED)
def test_a_named_tool_grammar_admits_one_call_the_parser_reads(fmt: str) -> None:
    syntax = get_tool_syntax(fmt)
    document = tool_call_constraint(syntax, schemas_of("get_weather", "clock"), name="get_weather")
    assert json.loads(json.dumps(document)) == document  # plain JSON, as vLLM receives it
    arguments = {"city": "Paris", "days": 3}
    text = instantiate(document, [("get_weather", arguments)], "")
    calls = parsed_calls(fmt, text)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", arguments)]
    # Only the named tool's call is in the grammar.
    assert "clock" not in json.dumps(document)


@pytest.mark.parametrize("fmt", CONSTRAINED)
def test_the_required_grammar_admits_several_calls_in_one_section(fmt: str) -> None:
    syntax = get_tool_syntax(fmt)
    document = tool_call_constraint(syntax, schemas_of("get_weather", "clock"))
    calls_in = [("get_weather", {"city": "Oslo"}), ("clock", {}), ("get_weather", {"city": "Rome"})]
    text = instantiate(document, calls_in, "")
    assert text.count(call_shape(syntax).section_begin or "\x00") in (0, 1)
    calls = parsed_calls(fmt, text)
    assert [(c.name, c.arguments) for c in calls] == calls_in


@given(
    reasoning=st.text(
        st.characters(codec="utf-8", exclude_characters="<>"), min_size=1, max_size=40
    ).filter(lambda s: s.strip()),
    city=st.text(st.characters(codec="utf-8", exclude_characters="<>&\"'\\"), max_size=20),
)
def test_reasoning_may_come_first(reasoning: str, city: str) -> None:
    think = get_reasoning_syntax("think")
    for fmt in ("hermes", "qwen3_coder", "kimi_k2"):
        document = tool_call_constraint(
            get_tool_syntax(fmt), schemas_of("get_weather"), reasoning=think
        )
        text = instantiate(document, [("get_weather", {"city": city})], reasoning)
        parser = create_parser("think", fmt, tool_schemas=schemas_of("get_weather"))
        parser.feed(text)
        parser.finish()
        kinds = [type(b) for b in parser.blocks]
        assert kinds == [ReasoningBlock, ToolCallBlock], (fmt, text)
        assert parser.blocks[0].text.strip() == reasoning.strip()
        assert parser.blocks[1].arguments == {"city": city}


def test_reasoning_the_prompt_opened_must_be_closed_first() -> None:
    r1 = get_reasoning_syntax("deepseek_r1")
    assert r1.starts_inside
    document = tool_call_constraint(get_tool_syntax("hermes"), schemas_of("clock"), reasoning=r1)
    first = document["format"]["elements"][0]
    assert (first["type"], first["begin"], first["end"]) == ("tag", "", r1.end)


def test_formats_without_a_grammar_and_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="pythonic"):
        tool_call_constraint(get_tool_syntax("pythonic"), schemas_of("clock"))
    with pytest.raises(ConfigurationError, match="not one of the tools"):
        tool_call_constraint(get_tool_syntax("hermes"), schemas_of("clock"), name="nope")
    with pytest.raises(ConfigurationError, match="at least one tool"):
        tool_call_constraint(get_tool_syntax("hermes"), {})


def test_whitespace_inside_arguments_is_bounded_unless_asked_not_to() -> None:
    hermes = get_tool_syntax("hermes")
    bounded = json.dumps(tool_call_constraint(hermes, schemas_of("clock")))
    assert '"max_whitespace_cnt": 16' in bounded
    free = json.dumps(tool_call_constraint(hermes, schemas_of("clock"), max_whitespace=None))
    assert "max_whitespace_cnt" not in free


# --- the agent ---------------------------------------------------------------------------


@agentkit.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@agentkit.tool
def clock() -> str:
    """The time."""
    return "12:00"


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def structural_tag(extra: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(extra["structured_outputs"]["structural_tag"])
    return document


async def test_required_constrains_the_first_turn_only() -> None:
    engine = ScriptedEngine([call("clock"), "It is noon."])
    agent = agentkit.Agent(
        engine, tools=[get_weather, clock], tool_choice="required", profile="qwen3"
    )
    result = await agent.run("time?")
    assert result.output_text == "It is noon."
    first, second = engine.requests
    document = structural_tag(first.extra)
    assert document == tool_call_constraint(
        get_tool_syntax("hermes"),
        agent.registry.schemas(),
        reasoning=get_reasoning_syntax("think"),
    )
    assert second.extra == {}
    # The prompt does not depend on the choice: the prefix cache is unaffected.
    plain = ScriptedEngine([call("clock"), "It is noon."])
    await agentkit.Agent(plain, tools=[get_weather, clock], profile="qwen3").run("time?")
    assert [r.prompt for r in plain.requests] == [r.prompt for r in engine.requests]


async def test_a_named_tool_is_the_only_call_in_the_grammar() -> None:
    # Only the grammar is asserted on: the script (hermes calls) need not fit it.
    engine = ScriptedEngine([call("get_weather", city="Oslo"), "Sunny."], check_constraints=False)
    agent = agentkit.Agent(engine, tools=[get_weather, clock], profile="qwen3-coder")
    await agent.run("weather?", tool_choice="get_weather")
    text = json.dumps(structural_tag(engine.requests[0].extra))
    assert "<function=get_weather>" in text
    assert "clock" not in text
    assert '"qwen_xml"' in text


async def test_none_keeps_call_markup_as_text_and_runs_nothing() -> None:
    ran: list[str] = []

    @agentkit.tool
    def probe() -> str:
        """Records that it ran."""
        ran.append("probe")
        return "ran"

    output = "Sure: " + call("probe")
    # An engine that ignores bad_words, to show the parser still runs nothing.
    engine = ScriptedEngine([output], check_constraints=False)
    agent = agentkit.Agent(engine, tools=[probe], tool_choice="none", profile="qwen3")
    result = await agent.run("go")
    assert ran == []
    assert engine.requests[0].extra == {"bad_words": ["<tool_call>"]}
    (message,) = [m for m in result.transcript.messages if m.role == "assistant"]
    assert [(type(b), b.text) for b in message.content] == [(TextBlock, output)]
    assert result.output_text == output


async def test_invalid_choices_fail_before_any_request() -> None:
    engine = ScriptedEngine([])
    with pytest.raises(ConfigurationError, match="neither"):
        agentkit.Agent(engine, tools=[clock], tool_choice="get_weather", profile="qwen3")
    with pytest.raises(ConfigurationError, match="at least one tool"):
        agentkit.Agent(engine, tool_choice="required", profile="qwen3")
    pythonic = agentkit.Profile(
        name="p",
        description="",
        template=agentkit.get_profile("qwen3").template,
        tool_format="pythonic",
    )
    with pytest.raises(ConfigurationError, match="pythonic"):
        agentkit.Agent(engine, tools=[clock], profile=pythonic, tool_choice="required")
    agent = agentkit.Agent(engine, tools=[clock], profile="qwen3")
    with pytest.raises(ConfigurationError, match="neither"):
        agent.stream("x", tool_choice="nope")
    assert engine.requests == []


async def test_a_clash_with_request_options_is_a_typed_error() -> None:
    engine = ScriptedEngine([call("clock")])
    agent = agentkit.Agent(
        engine,
        tools=[clock],
        tool_choice="required",
        request_options={"structured_outputs": {"regex": "x"}},
        profile="qwen3",
    )
    with pytest.raises(ConfigurationError, match="structured_outputs"):
        await agent.run("x")
