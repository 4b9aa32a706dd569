"""Typed results: ``Agent(output_type=T)``, the answer parser, retries, and the constraint.

The constraint is an xgrammar structural tag; xgrammar compiles and checks it in the slow
suite (tests/slow/test_output_type_vllm.py). Here the document's shape is checked, and the
string its answer branch admits is instantiated and read back by the profile's own parser and
the output parser.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

import agentkit
from agentkit._tool_choice import tool_choice_options
from agentkit.engine import ScriptedEngine
from agentkit.errors import ConfigurationError, OutputValidationError, RunError
from agentkit.events import RunComplete
from agentkit.output import InvalidAnswer, OutputSchema, supports_structured_outputs
from agentkit.parsing import get_reasoning_syntax, get_tool_syntax, tool_call_constraint
from agentkit.transcript import Message, TextBlock, Transcript

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    city: str
    celsius: float
    sky: Literal["clear", "cloudy", "rain"]
    alerts: list[str] = Field(default_factory=list)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@agentkit.tool
def get_weather(city: str) -> dict[str, object]:
    """The weather in a city."""
    return {"city": city, "celsius": 21.5, "sky": "clear"}


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


PARIS = '{"city": "Paris", "celsius": 21.5, "sky": "clear"}'


def structural_tag(extra: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(extra["structured_outputs"]["structural_tag"])
    return document


# --- the answer parser --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output_type", "text", "expected"),
    [
        (Weather, PARIS, Weather(city="Paris", celsius=21.5, sky="clear")),
        (Point, '{"x": 1, "y": -2}', Point(1, -2)),
        (Person, '{"name": "Ada", "age": 36}', {"name": "Ada", "age": 36}),
        (int, "42", 42),
        (list[str], '["a", "b"]', ["a", "b"]),
        (bool, "true", True),
    ],
)
def test_each_kind_of_type_parses_from_json(output_type: Any, text: str, expected: Any) -> None:
    schema = OutputSchema(output_type)
    assert schema.parse(text) == expected
    assert schema.parse(f"\n  ```json\n{text}\n```\n") == expected
    assert schema.parse(f"```\n{text}\n```") == expected
    assert json.loads(json.dumps(schema.json_schema)) == schema.json_schema


def test_json_schemas_come_from_pydantic() -> None:
    assert OutputSchema(Weather).json_schema["required"] == ["city", "celsius", "sky"]
    assert OutputSchema(Point).json_schema["properties"]["x"] == {"title": "X", "type": "integer"}
    assert OutputSchema(Person).json_schema["required"] == ["name", "age"]
    assert OutputSchema(int).json_schema == {"type": "integer"}
    assert OutputSchema(list[str]).name == "list[str]"
    assert OutputSchema(Weather).name == "Weather"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        f"Here you go: {PARIS}",
        f"{PARIS} Hope that helps.",
        f"```json\n{PARIS}\n```\nHope that helps.",
        f"Sure!\n```json\n{PARIS}\n```",
        f"```json\n{PARIS}\n```\n```json\n{PARIS}\n```",
        f"```python\n{PARIS}\n```",
        "{'city': 'Paris', 'celsius': 21.5, 'sky': 'clear'}",
    ],
)
def test_nothing_looser_than_a_fence_and_whitespace(text: str) -> None:
    with pytest.raises(InvalidAnswer):
        OutputSchema(Weather).parse(text)


def test_problems_name_the_field_and_what_was_wrong() -> None:
    with pytest.raises(InvalidAnswer) as raised:
        OutputSchema(Weather).parse('{"city": "Paris", "celsius": "warm", "sky": "snow"}')
    problems = raised.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("celsius: ")
    assert '(got "warm")' in problems[0]
    assert problems[1].startswith("sky: ")
    assert "'clear'" in problems[1]
    with pytest.raises(InvalidAnswer) as raised:
        OutputSchema(Weather).parse('{"city": "Paris"}')
    assert raised.value.problems == ("celsius: Field required", "sky: Field required")
    with pytest.raises(InvalidAnswer) as raised:
        OutputSchema(Weather).parse("It is sunny.")
    (problem,) = raised.value.problems
    assert problem.startswith("the answer: Invalid JSON")


def test_a_type_without_a_json_schema_is_a_configuration_error() -> None:
    class Opaque:
        pass

    with pytest.raises(ConfigurationError, match="Opaque"):
        OutputSchema(Opaque)


weathers = st.builds(
    Weather,
    city=st.text(max_size=20),
    celsius=st.floats(allow_nan=False, allow_infinity=False),
    sky=st.sampled_from(["clear", "cloudy", "rain"]),
    alerts=st.lists(st.text(max_size=10), max_size=3),
)
spaces = st.text(alphabet=" \t\r\n", max_size=4)


@settings(max_examples=150, deadline=None)
@given(weathers, spaces, spaces, st.booleans(), st.booleans())
def test_property_any_value_round_trips(
    weather: Weather, before: str, after: str, fenced: bool, indent: bool
) -> None:
    text = weather.model_dump_json(indent=2 if indent else None)
    if fenced:
        text = f"```json\n{text}\n```"
    assert OutputSchema(Weather).parse(before + text + after) == weather


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_property_any_text_parses_or_fails_with_problems(text: str) -> None:
    schema = OutputSchema(Weather)
    problems: tuple[str, ...] = ()
    try:
        value = schema.parse(text)
    except InvalidAnswer as problem:
        problems = problem.problems
    else:
        assert isinstance(value, Weather)
        return
    assert problems
    assert all(isinstance(p, str) and p for p in problems)


@settings(max_examples=100, deadline=None)
@given(weathers, st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != ""))
def test_property_prose_before_the_answer_is_refused(weather: Weather, prose: str) -> None:
    with pytest.raises(InvalidAnswer):
        OutputSchema(Weather).parse(f"{prose.strip()} {weather.model_dump_json()}")


# --- the agent ----------------------------------------------------------------------------


async def test_a_typed_answer_after_a_tool_call() -> None:
    engine = ScriptedEngine(
        [
            "<think>\nLook it up.\n</think>\n\n" + call("get_weather", city="Paris"),
            "<think>\nIt is clear.\n</think>\n\n" + PARIS,
        ]
    )
    agent = agentkit.Agent(engine, tools=[get_weather], output_type=Weather, profile="qwen3")
    result = await agent.run("Weather in Paris?")
    assert result.output == Weather(city="Paris", celsius=21.5, sky="clear")
    assert result.output_text == PARIS
    assert len(engine.requests) == 2
    # The default ScriptedEngine cannot constrain, so the answer is validated only.
    assert all("structured_outputs" not in r.extra for r in engine.requests)


async def test_dataclass_typed_dict_and_plain_type_outputs() -> None:
    for output_type, answer, expected in [
        (Point, '```json\n{"x": 3, "y": 4}\n```', Point(3, 4)),
        (Person, '{"name": "Ada", "age": 36}', {"name": "Ada", "age": 36}),
        (list[int], "[1, 2, 3]", [1, 2, 3]),
    ]:
        engine = ScriptedEngine([answer])
        agent = agentkit.Agent(engine, output_type=output_type, profile="qwen3")
        assert (await agent.run("go")).output == expected


async def test_the_stream_and_its_run_complete_event_carry_the_output() -> None:
    engine = ScriptedEngine([PARIS])
    agent = agentkit.Agent(engine, output_type=Weather, profile="qwen3")
    async with agent.stream("go") as events:
        done = [e async for e in events if isinstance(e, RunComplete)]
    assert events.result.output == Weather(city="Paris", celsius=21.5, sky="clear")
    assert done[0].output == events.result.output
    assert done[0].output_text == PARIS


async def test_without_an_output_type_the_output_is_the_text() -> None:
    for output_type in (None, str):
        engine = ScriptedEngine(["Just text."])
        agent = agentkit.Agent(engine, system="Be brief.", output_type=output_type, profile="qwen3")
        result = await agent.run("go")
        assert result.output == result.output_text == "Just text."
        assert agent.system == "Be brief."
        assert agent.output_constraint is None


async def test_the_system_prompt_asks_for_json_matching_the_schema() -> None:
    engine = ScriptedEngine([PARIS, PARIS])
    agent = agentkit.Agent(
        engine, system="You report weather.", output_type=Weather, profile="qwen3"
    )
    await agent.run("go")
    prompt = engine.requests[0].prompt
    assert "You report weather.\n\nWhen you give your final answer" in prompt
    assert json.dumps(OutputSchema(Weather).json_schema) in prompt
    # Without a system prompt of its own, the instructions are the system prompt.
    bare = ScriptedEngine([PARIS])
    await agentkit.Agent(bare, output_type=Weather, profile="qwen3").run("go")
    assert "When you give your final answer" in bare.requests[0].prompt


async def test_an_invalid_answer_is_shown_to_the_model_which_tries_again() -> None:
    engine = ScriptedEngine(
        [
            '<think>\nok\n</think>\n\n{"city": "Paris", "celsius": "warm", "sky": "clear"}',
            "<think>\nA number, then.\n</think>\n\n" + PARIS,
        ]
    )
    agent = agentkit.Agent(engine, output_type=Weather, profile="qwen3")
    result = await agent.run("go")
    assert result.output.celsius == 21.5
    roles = [m.role for m in result.transcript.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    retry = result.transcript.messages[3]
    assert isinstance(retry.content[0], TextBlock)
    assert "not a valid Weather" in retry.content[0].text
    assert "- celsius: Input should be a valid number" in retry.content[0].text
    # The model sees it: the second prompt extends the first with the answer and the retry.
    second = engine.requests[1].prompt
    assert second.startswith(engine.requests[0].prompt)
    assert "not a valid Weather" in second
    assert len(result.usage.turns) == 2


async def test_retries_run_out_with_a_typed_error_that_keeps_the_transcript() -> None:
    engine = ScriptedEngine(["no JSON here", '{"city": 1}', PARIS])
    agent = agentkit.Agent(engine, output_type=Weather, output_retries=1, profile="qwen3")
    with pytest.raises(OutputValidationError) as raised:
        await agent.run("go")
    error = raised.value
    assert isinstance(error, RunError)
    assert error.attempts == 2
    assert error.raw == '{"city": 1}'
    assert error.output_type == "Weather"
    assert any(p.startswith("city: ") for p in error.problems)
    assert "after 2 attempt(s)" in str(error)
    assert error.transcript is not None
    roles = [m.role for m in error.transcript.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert len(engine.requests) == 2


async def test_no_retries_fails_on_the_first_invalid_answer() -> None:
    engine = ScriptedEngine(["nope"])
    agent = agentkit.Agent(engine, output_type=int, output_retries=0, profile="qwen3")
    with pytest.raises(OutputValidationError) as raised:
        await agent.run("go")
    assert raised.value.attempts == 1
    with pytest.raises(ValueError, match="output_retries"):
        agentkit.Agent(engine, output_type=int, output_retries=-1, profile="qwen3")


async def test_an_invalid_answer_on_the_last_turn_is_an_output_error() -> None:
    engine = ScriptedEngine([call("get_weather", city="Paris"), "It is sunny."])
    agent = agentkit.Agent(
        engine, tools=[get_weather], output_type=Weather, max_turns=2, profile="qwen3"
    )
    with pytest.raises(OutputValidationError) as raised:
        await agent.run("go")
    assert raised.value.attempts == 1
    assert raised.value.raw == "It is sunny."


# --- the constraint -----------------------------------------------------------------------


async def test_a_constrained_answer_keeps_reasoning_and_calls_open() -> None:
    engine = ScriptedEngine([call("get_weather", city="Paris"), PARIS])
    agent = agentkit.Agent(
        engine, tools=[get_weather], output_type=Weather, constrain_output=True, profile="qwen3"
    )
    result = await agent.run("go")
    assert result.output.city == "Paris"
    schema = OutputSchema(Weather).json_schema
    assert agent.output_constraint == schema
    for request in engine.requests:
        document = structural_tag(request.extra)
        assert document == tool_call_constraint(
            get_tool_syntax("hermes"),
            agent.registry.schemas(),
            reasoning=get_reasoning_syntax("think"),
            answer=schema,
        )
        reasoning, _, choice = document["format"]["elements"]
        assert reasoning["type"] == "optional"
        assert choice["type"] == "or"
        section, answer = choice["elements"]
        assert section["type"] == "tags_with_separator"
        assert answer == {
            "type": "json_schema",
            "json_schema": schema,
            "style": "json",
            "max_whitespace_cnt": 16,
        }


async def test_tool_choice_wins_on_the_first_turn_then_the_answer_is_constrained() -> None:
    engine = ScriptedEngine([call("get_weather", city="Paris"), PARIS])
    agent = agentkit.Agent(
        engine,
        tools=[get_weather],
        output_type=Weather,
        constrain_output=True,
        tool_choice="get_weather",
        profile="qwen3",
    )
    await agent.run("go")
    first, second = (json.dumps(structural_tag(r.extra)) for r in engine.requests)
    assert '"json_schema": {"properties": {"city"' not in first.replace("arguments", "")
    assert "Weather" not in first
    assert '"title": "Weather"' in second


async def test_tool_choice_none_constrains_to_the_answer_alone() -> None:
    engine = ScriptedEngine([PARIS])
    agent = agentkit.Agent(
        engine, tools=[get_weather], output_type=Weather, constrain_output=True, profile="qwen3"
    )
    await agent.run("go", tool_choice="none")
    (request,) = engine.requests
    assert request.extra["bad_words"] == ["<tool_call>"]
    elements = structural_tag(request.extra)["format"]["elements"]
    assert elements[-1]["type"] == "json_schema"
    assert "<tool_call>" not in json.dumps(elements)


async def test_without_tools_only_the_answer_is_admitted() -> None:
    engine = ScriptedEngine([PARIS])
    agent = agentkit.Agent(engine, output_type=Weather, constrain_output=True, profile="qwen3")
    await agent.run("go")
    elements = structural_tag(engine.requests[0].extra)["format"]["elements"]
    assert [e["type"] for e in elements] == ["optional", "regex", "json_schema"]


async def test_constraint_follows_the_engine_by_default() -> None:
    class Constraining(ScriptedEngine):
        supports_structured_outputs = True

    assert not supports_structured_outputs(ScriptedEngine([]))
    assert supports_structured_outputs(Constraining([]))
    assert supports_structured_outputs(agentkit.engine.VLLMEngine("org/model"))
    assert supports_structured_outputs(
        agentkit.engine.RemoteEngine("http://127.0.0.1:9", model="m")
    )
    engine = Constraining([PARIS])
    agent = agentkit.Agent(engine, output_type=Weather, profile="qwen3")
    await agent.run("go")
    assert "structural_tag" in engine.requests[0].extra["structured_outputs"]
    off = Constraining([PARIS])
    await agentkit.Agent(off, output_type=Weather, constrain_output=False, profile="qwen3").run(
        "go"
    )
    assert off.requests[0].extra == {}


def test_a_format_without_a_grammar_validates_only_unless_forced() -> None:
    class Constraining(ScriptedEngine):
        supports_structured_outputs = True

    pythonic = agentkit.Profile(
        name="p",
        description="",
        template=agentkit.get_profile("qwen3").template,
        tool_format="pythonic",
    )
    engine = Constraining([])
    agent = agentkit.Agent(engine, tools=[get_weather], profile=pythonic, output_type=Weather)
    assert agent.output_constraint is None
    with pytest.raises(ConfigurationError, match="pythonic"):
        agentkit.Agent(
            engine,
            tools=[get_weather],
            profile=pythonic,
            output_type=Weather,
            constrain_output=True,
        )
    # Without tools there is nothing to call, so the answer alone can be constrained.
    alone = agentkit.Agent(engine, profile=pythonic, output_type=Weather, constrain_output=True)
    assert alone.output_constraint is not None
    with pytest.raises(ConfigurationError, match="output_type"):
        agentkit.Agent(engine, constrain_output=True, profile="qwen3")


async def test_request_options_that_clash_with_the_constraint_are_refused() -> None:
    engine = ScriptedEngine([PARIS])
    agent = agentkit.Agent(
        engine,
        output_type=Weather,
        constrain_output=True,
        request_options={"structured_outputs": {"json": {}}},
        profile="qwen3",
    )
    with pytest.raises(ConfigurationError, match="constrain_output=False"):
        await agent.run("go")


def test_a_named_tool_takes_no_answer() -> None:
    with pytest.raises(ConfigurationError, match="named tool"):
        tool_call_constraint(
            get_tool_syntax("hermes"), {"f": {}}, name="f", answer={"type": "integer"}
        )
    with pytest.raises(ConfigurationError, match="at least one tool"):
        tool_call_constraint(None, {"f": {}})


# The string the answer branch admits, read back by the profile's parser and the output parser.


def answer_branch(node: dict[str, Any], reasoning: str, answer: str) -> str:
    kind = node["type"]
    if kind == "structural_tag":
        return answer_branch(node["format"], reasoning, answer)
    if kind == "sequence":
        return "".join(answer_branch(e, reasoning, answer) for e in node["elements"])
    if kind == "optional":
        return answer_branch(node["content"], reasoning, answer)
    if kind == "tag":
        return node["begin"] + answer_branch(node["content"], reasoning, answer) + node["end"]
    if kind == "any_text":
        assert not any(x in reasoning for x in node["excludes"])
        return reasoning
    if kind == "regex":
        assert node["pattern"] == r"\s{0,4}"
        return "\n\n"
    if kind == "or":
        (json_node,) = [e for e in node["elements"] if e["type"] == "json_schema"]
        return answer_branch(json_node, reasoning, answer)
    if kind == "json_schema":
        return answer
    raise AssertionError(f"unexpected node {kind}")


@pytest.mark.parametrize(
    ("profile", "thinking"),
    [
        ("qwen3", True),
        ("qwen3-coder", True),
        ("deepseek-r1", True),
        ("deepseek-v3.1", False),
        ("glm-4.5", True),
        ("kimi-k2", True),
        ("generic", True),
    ],
)
async def test_the_answer_branch_parses_as_reasoning_then_the_answer(
    profile: str, thinking: bool
) -> None:
    engine = ScriptedEngine([])
    agent = agentkit.Agent(
        engine,
        tools=[get_weather],
        profile=profile,
        output_type=Weather,
        constrain_output=True,
        thinking=thinking,
    )
    options = tool_choice_options(
        agent.profile,
        "auto",
        agent.registry.schemas(),
        thinking=agent.thinking,
        answer=agent.output_constraint,
    )
    text = answer_branch(structural_tag(options), "Paris is clear.", PARIS)
    parser = agent.profile.new_parser(agent.registry.schemas(), thinking=agent.thinking)
    parser.feed(text)
    parser.finish()
    message = Message(role="assistant", content=list(parser.blocks))
    assert not message.tool_calls
    assert OutputSchema(Weather).parse(message.text).city == "Paris"
    if agent.thinking and agent.profile.reasoning:
        reasoning = [b for b in parser.blocks if b.type == "reasoning"]
        assert [b.text.strip() for b in reasoning] == ["Paris is clear."]


async def test_a_transcript_prompt_with_its_own_system_message_is_left_alone() -> None:
    engine = ScriptedEngine([PARIS])
    transcript = Transcript.from_prompt("go", system="Mine.")
    agent = agentkit.Agent(engine, output_type=Weather, profile="qwen3")
    result = await agent.run(transcript)
    assert result.output.city == "Paris"
    first = result.transcript.messages[0]
    assert isinstance(first.content[0], TextBlock)
    assert first.content[0].text == "Mine."
