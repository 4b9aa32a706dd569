"""FunctionEngine: output computed from the request, so a test can react to what the tools
returned, and concurrent runs each get the answer meant for them."""

from __future__ import annotations

import json

import anyio
import pytest

import agentkit
from agentkit.engine import (
    ConstraintViolationError,
    Engine,
    FunctionEngine,
    GenerationRequest,
    ScriptedCall,
    ScriptedEngine,
    ScriptedOutput,
    split_pseudo_tokens,
)
from agentkit.errors import EngineError

pytestmark = pytest.mark.anyio

TEMPERATURES = {"Oslo": 4, "Rome": 21}


@agentkit.tool
async def temperature(city: str) -> int:
    """Degrees Celsius in a city."""
    await anyio.lowlevel.checkpoint()
    return TEMPERATURES[city]


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def weather_model(c: ScriptedCall) -> str:
    """Asks for the temperature of the city in the question, then reports it."""
    city = (c.first_user_text or "").removeprefix("Weather in ").rstrip("?")
    if not c.tool_results:
        return f"<think>\nI need {city}'s temperature.\n</think>\n\n" + call(
            "temperature", city=city
        )
    return f"{city}: {c.tool_results[0].content} C."


def test_is_an_engine() -> None:
    assert isinstance(FunctionEngine(weather_model), Engine)


async def test_decides_from_the_transcript() -> None:
    engine = FunctionEngine(weather_model)
    agent = agentkit.Agent(engine, tools=[temperature], profile="qwen3")
    result = await agent.run("Weather in Oslo?")
    assert result.output_text == "Oslo: 4 C."
    assert [c.turn for c in engine.calls] == [1, 2]
    assert engine.calls[0].tool_names == ["temperature"]


async def test_concurrent_runs_each_get_their_own_answers() -> None:
    agent = agentkit.Agent(FunctionEngine(weather_model), tools=[temperature], profile="qwen3")
    answers: dict[str, str] = {}

    async def ask(city: str) -> None:
        answers[city] = (await agent.run(f"Weather in {city}?")).output_text

    async with anyio.create_task_group() as group:
        for city in TEMPERATURES:
            group.start_soon(ask, city)
    assert answers == {"Oslo": "Oslo: 4 C.", "Rome": "Rome: 21 C."}


async def test_an_async_function_sees_run_turn_and_tool_choice() -> None:
    seen: list[tuple[str | None, int, str | None]] = []

    async def model(c: ScriptedCall) -> str:
        await anyio.lowlevel.checkpoint()
        seen.append((c.run_id, c.turn, c.tool_choice))
        return "done" if c.tool_results else call("temperature", city="Rome")

    agent = agentkit.Agent(
        FunctionEngine(model), tools=[temperature], tool_choice="temperature", profile="qwen3"
    )
    result = await agent.run("go")
    assert seen == [(result.run_id, 1, "temperature"), (result.run_id, 2, "auto")]


async def test_output_streams_as_from_the_scripted_engine() -> None:
    text = "<think>\nshort\n</think>\n\nA plain answer."
    function = FunctionEngine(lambda c: text)
    scripted = ScriptedEngine([text, text])
    request = GenerationRequest(prompt="the prompt")
    for engine in (function, scripted):
        chunks = [c async for c in engine.generate(request)]
        assert [c.text for c in chunks[:-1]] == split_pseudo_tokens(text)
        again = [c async for c in engine.generate(request)]
        assert again[-1].usage is not None
        assert again[-1].usage.cached_prompt_tokens == len(split_pseudo_tokens("the prompt"))


async def test_deltas_and_scripted_outputs_are_taken_as_given() -> None:
    outputs: list[list[str] | ScriptedOutput] = [
        ["a", "b"],
        ScriptedOutput.of("cut", finish_reason="length"),
    ]
    engine = FunctionEngine(lambda c: outputs[c.index])
    request = GenerationRequest(prompt="p")
    first = [c async for c in engine.generate(request)]
    assert [c.text for c in first] == ["a", "b", ""]
    second = [c async for c in engine.generate(request)]
    assert second[-1].finish_reason == "length"
    assert [(c.run_id, c.turn) for c in engine.calls] == [(None, 1), (None, 2)]


async def test_an_assertion_in_the_function_fails_as_itself() -> None:
    def model(c: ScriptedCall) -> str:
        assert c.tool_choice == "required", "the agent should insist on a tool"
        return "x"

    with pytest.raises(AssertionError, match="insist"):
        await agentkit.Agent(FunctionEngine(model), tools=[temperature], profile="qwen3").run("go")


async def test_a_function_that_returns_no_output_is_a_type_error() -> None:
    engine = FunctionEngine(lambda c: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="returned NoneType for request 1"):
        [c async for c in engine.generate(GenerationRequest(prompt="p"))]


async def test_an_engine_failure_is_scripted_as_an_output() -> None:
    engine = FunctionEngine(lambda c: ScriptedOutput(["par", RuntimeError("device lost")]))
    with pytest.raises(EngineError, match="device lost") as caught:
        await agentkit.Agent(engine, profile="qwen3").run("go")
    assert caught.value.transcript is not None


async def test_outputs_are_checked_against_the_request_constraints() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    options = {"structured_outputs": {"json": schema}}

    def model(c: ScriptedCall) -> str:
        assert c.constraints.json_schema == schema
        return '{"n": 3}'

    agent = agentkit.Agent(FunctionEngine(model), request_options=options, profile="qwen3")
    assert (await agent.run("count")).output_text == '{"n": 3}'
    wrong = agentkit.Agent(
        FunctionEngine(lambda c: '{"n": "three"}'), request_options=options, profile="qwen3"
    )
    with pytest.raises(ConstraintViolationError) as caught:
        await wrong.run("count")
    assert caught.value.constraint == "structured_outputs.json"
    lenient = FunctionEngine(lambda c: '{"n": "three"}', check_constraints=False)
    result = await agentkit.Agent(lenient, request_options=options, profile="qwen3").run("count")
    assert result.output_text == '{"n": "three"}'
