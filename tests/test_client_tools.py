"""Client tools: offered to the model, run by the run's caller. A call to one pauses the run
after its turn (the turn's own tools finish first), through the approvals' machinery, and
``ToolOutput`` answers it on resume."""

from __future__ import annotations

import pytest
from _hermes import hermes

import agentkit
from agentkit.approvals import ApprovalError, ClientTool, Deny, RunState, ToolOutput
from agentkit.engine import ScriptedEngine, TokenizedScriptedEngine
from agentkit.errors import ConfigurationError
from agentkit.events import RunComplete, ToolResultEvent
from agentkit.profiles import get_profile
from agentkit.transcript import ToolResultBlock

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")

ASK = ClientTool(
    name="ask_user",
    description="Ask the person a question.",
    parameters={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
)

TURN_1 = (
    "<think>Look it up, then ask.</think>"
    + hermes("lookup", key="a")
    + hermes("ask_user", question="which one?")
)
TURN_2 = "<think>They said b.</think>It is b."


@agentkit.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent(outputs: list[str]) -> agentkit.Agent[str]:
    engine = TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])
    return agentkit.Agent(engine=engine, tools=[lookup], profile="qwen3")


async def test_a_client_tool_is_offered_and_its_call_pauses_the_run_after_the_turns_tools() -> None:
    runner = agent([TURN_1, TURN_2])
    events = []
    async with runner.stream("go", client_tools=[ASK]) as stream:
        async for event in stream:
            events.append(event)
    result = stream.result
    engine = runner.engine
    assert isinstance(engine, TokenizedScriptedEngine)
    assert "ask_user" in engine.requests[0].prompt  # offered in the prompt, like an agent tool
    assert len(engine.requests) == 1  # the run ended after the turn
    assert result.paused
    [pending] = result.pending_approvals
    assert (pending.kind, pending.name, pending.arguments) == (
        "client_tool",
        "ask_user",
        {"question": "which one?"},
    )
    assert pending.description == ASK.description
    [ran] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert ran.name == "lookup"  # the agent's own tool ran during the turn
    assert isinstance(events[-1], RunComplete)
    assert events[-1].paused
    state = result.state
    assert state is not None
    assert [r.content for r in state.tool_results] == ["value of a"]
    assert state.client_tools == [ASK]

    # The caller runs the tool and answers; the run goes on from the next turn, its prompt
    # extending the paused one token for token.
    again = RunState.from_json(state.to_json())
    resumed = await runner.resume(again, {pending.id: ToolOutput(content="b")})
    assert resumed.output_text == "It is b."
    tool_message = resumed.transcript.messages[-2]
    assert [
        (r.name, r.content) for r in tool_message.content if isinstance(r, ToolResultBlock)
    ] == [
        ("lookup", "value of a"),
        ("ask_user", "b"),
    ]
    first, second = engine.requests
    assert first.prompt_token_ids is not None
    assert second.prompt_token_ids is not None
    assert second.prompt_token_ids[: len(first.prompt_token_ids)] == first.prompt_token_ids
    assert "ask_user" in second.prompt  # still offered after the resume


async def test_an_openai_function_spec_is_a_client_tool_and_an_error_output_is_an_error() -> None:
    runner = agent([TURN_1, TURN_2])
    spec = {"type": "function", "function": ASK.model_dump()}
    paused = await runner.run("go", client_tools=[spec])
    assert paused.state is not None
    assert paused.state.client_tools == [ASK]
    [pending] = paused.pending_approvals
    resumed = await runner.resume(
        paused.state, {pending.id: ToolOutput(content="no answer", is_error=True)}
    )
    [result] = [
        r
        for r in resumed.transcript.messages[-2].content
        if isinstance(r, ToolResultBlock) and r.name == "ask_user"
    ]
    assert result.is_error
    assert result.content == "no answer"


async def test_a_client_tool_call_cannot_be_approved_but_can_be_denied() -> None:
    runner = agent([TURN_1, TURN_2])
    paused = await runner.run("go", client_tools=[ASK])
    assert paused.state is not None
    [pending] = paused.pending_approvals
    with pytest.raises(ApprovalError, match="client tool"):
        await runner.resume(paused.state, {pending.id: agentkit.Approve()})
    resumed = await runner.resume(paused.state, {pending.id: Deny(message="not now")})
    assert resumed.output_text == "It is b."


async def test_a_client_tool_named_like_an_agent_tool_is_refused() -> None:
    runner = agent([TURN_2])
    clash = ClientTool(name="lookup")
    with pytest.raises(ConfigurationError, match="lookup"):
        runner.stream("go", client_tools=[clash])
    with pytest.raises(ConfigurationError, match="distinct"):
        runner.stream("go", client_tools=[ASK, ASK])


async def test_tool_choice_may_name_a_client_tool() -> None:
    runner = agentkit.Agent(
        engine=ScriptedEngine([hermes("ask_user", question="?")]), profile="qwen3"
    )
    with pytest.raises(ConfigurationError):
        runner.stream("go", tool_choice="ask_user")  # not offered in this run
    paused = await runner.run("go", client_tools=[ASK], tool_choice="auto")
    assert [p.name for p in paused.pending_approvals] == ["ask_user"]


async def test_a_run_without_client_calls_is_not_paused() -> None:
    runner = agent([TURN_2])
    result = await runner.run("go", client_tools=[ASK])
    assert not result.paused
    assert result.output_text == "It is b."
