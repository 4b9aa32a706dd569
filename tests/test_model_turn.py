"""One model turn behind both faces: an Agent's turn and the server's turn for the same
conversation send the same request, and request options merge by one rule everywhere."""

from __future__ import annotations

import dataclasses

import pytest
from _hermes import hermes

import agentkit
from agentkit._model_turn import ModelTurns, TurnOptions, request_options
from agentkit.engine import GenerationRequest, TokenizedScriptedEngine
from agentkit.errors import ConfigurationError
from agentkit.profiles import get_profile
from agentkit.server._runtime import ServerRuntime, TurnSpec
from agentkit.sessions import MemorySessionStore
from agentkit.transcript import Transcript

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")


@agentkit.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def engine(outputs: list[str]) -> TokenizedScriptedEngine:
    return TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])


def comparable(request: GenerationRequest) -> GenerationRequest:
    """The request without what only names it (its id, its conversation's, who asked)."""
    return dataclasses.replace(request, request_id=None, session_id=None, context=None)


@pytest.mark.parametrize("thinking", [True, False])
async def test_the_agent_and_the_server_send_the_same_request(thinking: bool) -> None:
    outputs = [
        "<think>\nAdd them.\n</think>\n\n" + hermes("add", a=2, b=3),
        "<think>\nDone.\n</think>\n\n5",
    ]
    if not thinking:
        outputs = [hermes("add", a=2, b=3), "5"]
    scripted = engine(outputs)
    agent = agentkit.Agent(
        scripted,
        tools=[add],
        profile="qwen3",
        system="Be brief.",
        max_tokens=64,
        temperature=0.3,
        top_p=0.9,
        stop=["END"],
        thinking=thinking,
        hints=agentkit.AgentHints(priority=4),
        request_options={"seed": 7},
    )
    await agent.run("What is 2 + 3?")
    assert len(scripted.requests) == 2

    server = engine(outputs)
    runtime = ServerRuntime(server, QWEN3)
    for sent in scripted.requests:
        assert sent.context is not None
        spec = TurnSpec(
            transcript=Transcript(messages=list(sent.context.messages)),
            tools=agent.registry.specs(),
            max_tokens=64,
            temperature=0.3,
            top_p=0.9,
            stop=["END"],
            thinking=thinking,
            hints=agentkit.AgentHints(priority=4),
            options={"seed": 7},
        )
        turn = runtime.start(spec, request_id="r")
        if thinking or sent is scripted.requests[0]:
            assert comparable(turn.request) == comparable(sent)
        else:
            # Known difference, not of the turn's making: the agent extends its previous
            # prompt, which closed an empty reasoning block before the first turn's output;
            # the server renders the history as the template does, without that block (its
            # requests carry no previous prompt). The rest is the same request.
            off = "<think>\n\n</think>\n\n"
            assert turn.request.prompt == sent.prompt.replace(off, "", 1)
            assert dataclasses.replace(
                comparable(turn.request), prompt="", prompt_token_ids=None
            ) == (dataclasses.replace(comparable(sent), prompt="", prompt_token_ids=None))
    # The second turn replays the first turn's generated tokens on both faces.
    first, second = scripted.requests
    assert first.prompt_token_ids is not None
    assert second.prompt_token_ids is not None
    assert second.prompt_token_ids[: len(first.prompt_token_ids)] == first.prompt_token_ids


async def test_the_agents_own_sampling_and_stop_strings_reach_the_engine() -> None:
    scripted = engine(["fine"])
    agent = agentkit.Agent(scripted, profile="qwen3", top_p=0.5, stop=["###"])
    await agent.run("hi")
    (request,) = scripted.requests
    assert request.top_p == 0.5
    assert list(request.stop) == [*QWEN3.stop, "###"]


def test_a_key_set_by_two_sources_is_an_error_whoever_asks() -> None:
    schemas = {"add": dict(add.parameters)}
    clash_with_hints = TurnOptions(
        hints=agentkit.AgentHints(priority=1), extra={"priority": 2, "seed": 1}
    )
    with pytest.raises(ConfigurationError, match="priority"):
        request_options(QWEN3, clash_with_hints, schemas, thinking=True)
    required = TurnOptions(tool_choice="required")
    needed = request_options(QWEN3, required, schemas, thinking=True)
    assert needed, "a required call is enforced by a backend option"
    clash = dataclasses.replace(required, extra=dict.fromkeys(needed))
    with pytest.raises(ConfigurationError, match="tool_choice"):
        request_options(QWEN3, clash, schemas, thinking=True)
    merged = request_options(
        QWEN3,
        TurnOptions(hints=agentkit.AgentHints(priority=1), extra={"seed": 1}),
        schemas,
        thinking=True,
    )
    assert merged == {"seed": 1}  # the hints travel typed, on GenerationRequest.hints


def test_the_server_refuses_a_clash_the_agent_refuses() -> None:
    runtime = ServerRuntime(engine([]), QWEN3)
    spec = TurnSpec(
        transcript=Transcript.from_prompt("hi"),
        hints=agentkit.AgentHints(priority=1),
        options={"priority": 2},
    )
    with pytest.raises(ConfigurationError, match="priority"):
        runtime.start(spec, request_id="r")


async def test_a_turn_stopped_before_its_final_usage_still_counts_its_output() -> None:
    scripted = engine(["a long answer that goes on and on"])
    turns = ModelTurns(scripted, QWEN3)
    prompt = turns.prompt(Transcript.from_prompt("hi"))
    turn = turns.start(prompt, TurnOptions(), request_id="r")
    seen = 0

    def stop_after_three(chunk: object) -> bool:
        nonlocal seen
        seen += 1
        return seen == 3

    async for _ in turn.stream(stop_after_three):
        pass
    assert len(turn.token_ids) >= 3
    assert turn.usage.output_tokens == len(turn.token_ids)


async def test_a_conversation_keeps_one_session_id_across_runs_and_side_queries() -> None:
    scripted = engine(["one", "two", '{"title": "Greetings"}', "three", "four"])
    agent = agentkit.Agent(scripted, profile="qwen3", system="Be brief.")
    first = await agent.run("hi")
    transcript = first.transcript
    transcript.add("user", "and then?")
    second = await agent.run(transcript)
    await agent.side_query("title", transcript=second.transcript)
    await agent.run("a different conversation")
    store = MemorySessionStore()
    await agent.run("hello", session=store.session("s1"))
    sessions = [request.session_id for request in scripted.requests]
    assert first.run_id != second.run_id
    assert sessions[0] == sessions[1] == sessions[2], "runs and side queries of one conversation"
    assert sessions[3] != sessions[0]
    assert sessions[4] not in sessions[:4], "an agentkit session names its own conversation"
    assert all(s is not None and s.startswith("conv_") for s in sessions)
