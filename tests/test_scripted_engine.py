"""ScriptedEngine: a public feature, users test their agents with it."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentkit
from agentkit.engine import (
    ConstraintViolationError,
    Engine,
    GenerationChunk,
    GenerationRequest,
    ScriptedEngine,
    ScriptedOutput,
    TokenizedScriptedEngine,
    split_pseudo_tokens,
)
from agentkit.errors import EngineError, ScriptExhaustedError

pytestmark = pytest.mark.anyio


async def collect(engine: ScriptedEngine, prompt: str = "p") -> list[GenerationChunk]:
    return [c async for c in engine.generate(GenerationRequest(prompt=prompt))]


@given(st.text())
def test_pseudo_tokens_cover_the_text_exactly(text: str) -> None:
    pieces = split_pseudo_tokens(text)
    assert "".join(pieces) == text
    assert all(pieces)


def test_markers_arrive_split_as_from_a_tokenizer() -> None:
    assert split_pseudo_tokens("<tool_call>") == ["<too", "l_ca", "ll>"]


def test_is_an_engine() -> None:
    assert isinstance(ScriptedEngine([]), Engine)


async def test_streams_each_output_in_order_then_fails_clearly() -> None:
    engine = ScriptedEngine(["hello world", ["a", "b"]])
    first = await collect(engine)
    assert "".join(c.text for c in first) == "hello world"
    assert first[-1].finish_reason == "stop"
    assert first[-1].usage is not None
    second = await collect(engine)
    assert [c.text for c in second[:-1]] == ["a", "b"]
    assert engine.remaining == 0
    with pytest.raises(ScriptExhaustedError, match="request 3"):
        await collect(engine)
    assert [r.prompt for r in engine.requests] == ["p", "p", "p"]


async def test_failure_mid_stream_is_an_engine_error() -> None:
    engine = ScriptedEngine([["ok", ValueError("boom"), "never"]])
    got: list[str] = []

    async def drain() -> None:
        async for chunk in engine.generate(GenerationRequest(prompt="p")):
            got.append(chunk.text)

    with pytest.raises(EngineError, match="boom"):
        await drain()
    assert got == ["ok"]


async def test_finish_reason_and_usage() -> None:
    engine = ScriptedEngine([ScriptedOutput.of("cut sho", finish_reason="length"), "again"])
    chunks = await collect(engine, prompt="one two three")
    last = chunks[-1]
    assert last.finish_reason == "length"
    assert last.usage is not None
    assert last.usage.output_tokens == len(split_pseudo_tokens("cut sho"))
    assert last.usage.prompt_tokens == len(split_pseudo_tokens("one two three"))
    assert last.usage.cached_prompt_tokens == 0
    # A prompt that extends the previous prompt + output is served from the "cache".
    chunks = await collect(engine, prompt="one two three" + "cut sho" + " more")
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.cached_prompt_tokens >= 3


def test_negative_delay_is_rejected() -> None:
    with pytest.raises(ValueError, match="token_delay"):
        ScriptedEngine([], token_delay=-1)


# --- what a test asserts on: calls, runs, constraints ---------------------------------------


@agentkit.tool
async def lookup(city: str) -> str:
    """Look a city up."""
    await anyio.lowlevel.checkpoint()
    return f"facts about {city}"


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_each_agent_request_is_recorded_with_its_run_turn_and_tool_choice() -> None:
    engine = ScriptedEngine([call("lookup", city="Oslo"), "Oslo is cold."])
    agent = agentkit.Agent(engine, tools=[lookup], tool_choice="required", profile="qwen3")
    result = await agent.run("Tell me about Oslo")
    first, second = engine.calls
    assert [c.request for c in engine.calls] == engine.requests
    assert (first.index, first.run_id, first.turn) == (0, result.run_id, 1)
    assert (second.index, second.run_id, second.turn) == (1, result.run_id, 2)
    assert (first.tool_choice, second.tool_choice) == ("required", "auto")
    assert first.constraints.names == ("structured_outputs.structural_tag",)
    assert not second.constraints
    assert first.tool_names == ["lookup"]
    assert first.first_user_text == "Tell me about Oslo"
    assert [b.content for b in second.tool_results] == ["facts about Oslo"]
    assert second.transcript.messages[-1].role == "tool"
    assert second.messages[1].tool_calls[0].arguments == {"city": "Oslo"}


async def test_requests_without_a_context_are_counted_as_one_run() -> None:
    engine = ScriptedEngine(["a", "b"])
    await collect(engine)
    await collect(engine)
    assert [(c.run_id, c.turn, c.tool_choice, c.messages) for c in engine.calls] == [
        (None, 1, None, ()),
        (None, 2, None, ()),
    ]


async def run_two_at_once(engine: ScriptedEngine) -> list[agentkit.RunResult]:
    agent = agentkit.Agent(engine, tools=[lookup], profile="qwen3")
    results: dict[str, agentkit.RunResult] = {}

    async def one(city: str) -> None:
        results[city] = await agent.run(f"Tell me about {city}")

    async with anyio.create_task_group() as group:
        group.start_soon(one, "Oslo")
        group.start_soon(one, "Rome")
    return [results["Oslo"], results["Rome"]]


SCRIPT = [call("lookup", city="Oslo"), "Done."]


def followed_the_script(result: agentkit.RunResult) -> bool:
    roles = [m.role for m in result.transcript.messages]
    return roles == ["user", "assistant", "tool", "assistant"] and result.output_text == "Done."


async def test_concurrent_runs_share_one_queue_and_take_each_others_outputs() -> None:
    engine = ScriptedEngine(SCRIPT * 2)
    results = await run_two_at_once(engine)
    assert not all(followed_the_script(r) for r in results)
    # The records show it: the first two outputs went to two different runs.
    assert engine.calls[0].run_id != engine.calls[1].run_id


async def test_per_run_scripts_give_each_concurrent_run_its_own_copy() -> None:
    engine = ScriptedEngine.per_run(SCRIPT)
    results = await run_two_at_once(engine)
    assert all(followed_the_script(r) for r in results)
    assert engine.remaining == 0
    assert sorted(c.turn for c in engine.calls) == [1, 1, 2, 2]


async def test_per_conversation_scripts_are_chosen_from_the_conversation() -> None:
    engine = ScriptedEngine.per_conversation(
        {
            "Tell me about Oslo": [call("lookup", city="Oslo"), "Oslo: cold."],
            "Tell me about Rome": ["Rome: warm."],
        }
    )
    oslo, rome = await run_two_at_once(engine)
    assert (oslo.output_text, rome.output_text) == ("Oslo: cold.", "Rome: warm.")
    with pytest.raises(ScriptExhaustedError, match="no script for conversation 'Paris'"):
        await agentkit.Agent(engine, profile="qwen3").run("Paris")


async def test_per_conversation_with_a_key_of_ones_own() -> None:
    engine = ScriptedEngine.per_conversation(
        {"short": ["brief"], "long": ["at length"]},
        key=lambda c: "short" if len(c.first_user_text or "") < 5 else "long",
    )
    agent = agentkit.Agent(engine, profile="qwen3")
    assert (await agent.run("hi")).output_text == "brief"
    assert (await agent.run("hello there")).output_text == "at length"


async def test_running_out_says_so_per_run_and_hints_at_sharing() -> None:
    agent = agentkit.Agent(ScriptedEngine.per_run(["one"]), profile="qwen3")
    await agent.run("x")
    await agent.run("y")  # a new run, a new copy
    with pytest.raises(ScriptExhaustedError, match="turn 1 of run"):
        await agentkit.Agent(ScriptedEngine.per_run([]), profile="qwen3").run("x")
    shared = ScriptedEngine([call("lookup", city="a"), call("lookup", city="b")])
    with pytest.raises(ExceptionGroup) as caught:
        await run_two_at_once(shared)
    errors = caught.value.exceptions
    assert errors
    assert all(isinstance(e, ScriptExhaustedError) for e in errors)
    assert "2 runs took outputs from this one shared script" in str(errors[0])


async def test_output_a_constrained_model_could_not_write_fails_the_run() -> None:
    engine = ScriptedEngine(["Sure: " + call("lookup", city="Oslo")])
    agent = agentkit.Agent(engine, tools=[lookup], tool_choice="none", profile="qwen3")
    with pytest.raises(ConstraintViolationError) as caught:
        await agent.run("x")
    assert caught.value.constraint == "bad_words"
    assert caught.value.transcript is not None  # a run error, carrying what there was


async def test_constraints_can_be_recorded_only() -> None:
    output = "Sure: " + call("lookup", city="Oslo")
    engine = ScriptedEngine([output], check_constraints=False)
    result = await agentkit.Agent(engine, tools=[lookup], tool_choice="none", profile="qwen3").run(
        "x"
    )
    assert result.output_text == output
    assert engine.calls[0].constraints.bad_words == ("<tool_call>",)


async def test_a_truncated_output_is_held_to_bad_words_only() -> None:
    request = GenerationRequest(prompt="p", extra={"structured_outputs": {"json": {}}})
    engine = ScriptedEngine([ScriptedOutput.of('{"cut', finish_reason="length"), '{"cut'])
    chunks = [c async for c in engine.generate(request)]
    assert chunks[-1].finish_reason == "length"
    with pytest.raises(ConstraintViolationError, match=r"structured_outputs\.json"):
        [c async for c in engine.generate(request)]


async def test_the_tokenized_engine_records_and_checks_when_asked() -> None:
    request = GenerationRequest(prompt="p", extra={"structured_outputs": {"choice": ["yes"]}})
    lenient = TokenizedScriptedEngine(["no"])
    assert "".join([c.text async for c in lenient.generate(request)]) == "no"
    assert lenient.calls[0].constraints.choice == ("yes",)
    strict = TokenizedScriptedEngine(["no"], check_constraints=True)
    with pytest.raises(ConstraintViolationError, match="choice"):
        [c async for c in strict.generate(request)]
