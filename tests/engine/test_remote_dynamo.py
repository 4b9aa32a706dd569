"""RemoteEngine(flavor="dynamo") against a fake of Dynamo 1.6.1's frontend (``_fake_dynamo``)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from _fake_dynamo import STOP, TOKENIZER, URL, FakeDynamo, engine_for
from _hermes import hermes

import agentkit
from agentkit._model_turn import conversation_id
from agentkit.engine import GenerationChunk, GenerationRequest, RequestContext
from agentkit.engine._remote import RemoteEngine
from agentkit.errors import ConfigurationError, EngineError

pytestmark = pytest.mark.anyio


async def collect(engine: RemoteEngine, request: GenerationRequest) -> list[GenerationChunk]:
    with anyio.fail_after(10):
        return [chunk async for chunk in engine.generate(request)]


async def test_the_vllm_body_is_refused_by_dynamo() -> None:
    """Why the flavor exists: Dynamo 1.6.1 refuses vLLM's own fields."""
    fake = FakeDynamo()
    engine = engine_for(fake, flavor="vllm", max_retries=0)
    with pytest.raises(EngineError, match="Unsupported parameter"):
        await collect(engine, GenerationRequest(prompt="Hi", prompt_token_ids=[5, 6, 7]))


async def test_exact_prompt_ids_in_and_output_ids_back_through_logprobs() -> None:
    fake = FakeDynamo(outputs=["Hi there"], cached=16)
    engine = engine_for(fake)
    chunks = await collect(engine, GenerationRequest(prompt="ignored", prompt_token_ids=[5, 6, 7]))
    (body,) = fake.bodies
    assert body["prompt"] == [5, 6, 7]
    assert body["logprobs"] == 0
    assert body["return_tokens_as_token_ids"] is True
    assert body["skip_special_tokens"] is False
    assert body["max_tokens"] == 4096  # the listed context_window: "no limit"
    assert "return_token_ids" not in body
    assert "add_special_tokens" not in body
    ids = [token for chunk in chunks for token in chunk.token_ids]
    assert ids == TOKENIZER.encode("Hi there" + STOP)
    assert "".join(chunk.text for chunk in chunks) == "Hi there"
    final = chunks[-1]
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert final.usage.prompt_tokens == 3
    assert final.usage.cached_prompt_tokens == 16


async def test_priority_and_hints_go_to_nvext_agent_hints() -> None:
    fake = FakeDynamo()
    engine = engine_for(fake, speculative_prefill=True)
    hints = agentkit.AgentHints(priority=2, expected_output_tokens=300, latency_sensitive=True)
    await collect(
        engine,
        GenerationRequest(prompt="Hi", prompt_token_ids=[1], extra={"agent_hints": hints}),
    )
    await collect(
        engine,
        GenerationRequest(
            prompt="Hi",
            prompt_token_ids=[1],
            extra={"priority": -1, "speculative_prefill": False},
        ),
    )
    first, second = fake.bodies
    assert "priority" not in first
    # agentkit's priority follows vLLM (lower runs earlier); Dynamo's is the opposite.
    assert first["nvext"]["agent_hints"] == {
        "priority": -2,
        "osl": 300,
        "speculative_prefill": True,
    }
    assert second["nvext"]["agent_hints"] == {"priority": 1}


async def test_no_hints_no_nvext() -> None:
    fake = FakeDynamo()
    await collect(engine_for(fake), GenerationRequest(prompt="Hi", prompt_token_ids=[1]))
    assert "nvext" not in fake.bodies[0]


async def test_structured_outputs_become_guided_fields() -> None:
    fake = FakeDynamo()
    engine = engine_for(fake)
    extra = {"structured_outputs": {"regex": "a+"}}
    await collect(engine, GenerationRequest(prompt="Hi", prompt_token_ids=[1], extra=extra))
    assert fake.bodies[0]["guided_regex"] == "a+"
    assert "structured_outputs" not in fake.bodies[0]
    with pytest.raises(ConfigurationError, match="no Dynamo equivalent"):
        await collect(
            engine,
            GenerationRequest(prompt="Hi", extra={"structured_outputs": {"structural_tag": "{}"}}),
        )


async def test_bad_agent_hints_are_a_configuration_error() -> None:
    engine = engine_for(FakeDynamo())
    with pytest.raises(ConfigurationError, match="unknown field"):
        await collect(engine, GenerationRequest(prompt="Hi", extra={"agent_hints": {"osl": 5}}))


async def test_the_session_header_is_the_run_or_the_explicit_session() -> None:
    fake = FakeDynamo()
    engine = engine_for(fake)
    context = RequestContext(run_id="run_abc", turn=1)
    await collect(engine, GenerationRequest(prompt="Hi", request_id="x-1", context=context))
    await collect(engine, GenerationRequest(prompt="Hi", request_id="run_def-3"))
    await collect(
        engine,
        GenerationRequest(prompt="Hi", context=context, extra={"session_id": "conv-9"}),
    )
    # A request id that is not an agent's run and turn names no session: no header (Dynamo
    # would bind a one-off id to a worker), and ids sharing a prefix are not one session.
    await collect(engine, GenerationRequest(prompt="Hi", request_id="chatcmpl-Xy7"))
    sessions = [headers.get("x-dynamo-session-id") for headers in fake.headers]
    assert sessions == ["run_abc", "run_def", "conv-9", None]


async def test_the_vllm_flavor_sends_no_session_header_and_a_top_level_priority() -> None:
    seen: list[tuple[dict[str, Any], dict[str, str]]] = []

    def vllm(request: httpx.Request) -> httpx.Response:
        seen.append((json.loads(request.content), dict(request.headers)))
        events = [
            {"choices": [{"index": 0, "text": "ok", "token_ids": [7]}]},
            {"choices": [{"index": 0, "text": "", "token_ids": [], "finish_reason": "stop"}]},
        ]
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, content=text.encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(vllm))
    engine = RemoteEngine(URL, model="m", http_client=client)
    extra = {"agent_hints": {"priority": 3}, "max_tokens": 5}
    await collect(engine, GenerationRequest(prompt="Hi", request_id="run_a-1", extra=extra))
    ((body, headers),) = seen
    assert body["priority"] == 3
    assert "agent_hints" not in body
    assert "nvext" not in body
    assert "x-dynamo-session-id" not in headers


def test_an_unknown_flavor_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="flavor"):
        RemoteEngine(URL, model="m", flavor="sglang")  # type: ignore[arg-type]


async def test_an_agent_keeps_one_session_hints_and_exact_replay_on_dynamo() -> None:
    calling = "<think>look it up</think>" + hermes("lookup", key="x")
    fake = FakeDynamo(outputs=[calling, "The value is 42."])

    @agentkit.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return "42"

    async with engine_for(fake) as engine:
        agent = agentkit.Agent(
            engine=engine,
            tools=[lookup],
            profile="qwen3",
            hints=agentkit.AgentHints(priority=4, expected_output_tokens=50),
        )
        with anyio.fail_after(20):
            result = await agent.run("What is x?")
    assert result.output_text == "The value is 42."
    first, second = (body["prompt"] for body in fake.bodies)
    # Exact replay: turn 2's prompt is turn 1's, then the ids the model produced (which came
    # back only as logprobs tokens), so the worker's prefix cache covers all of turn 1.
    output = TOKENIZER.encode(calling + STOP)
    assert second[: len(first) + len(output)] == first + output
    sessions = {headers["x-dynamo-session-id"] for headers in fake.headers}
    # One session for the conversation (the agent names it by its start, so that a later
    # run continuing it lands on the same worker).
    assert sessions == {conversation_id(result.transcript, agent.registry.specs())}
    hints = {"priority": -4, "osl": 50}
    assert [body["nvext"]["agent_hints"] for body in fake.bodies] == [hints] * 2


async def test_an_agents_expected_output_tokens_reach_dynamo_as_osl() -> None:
    fake = FakeDynamo(outputs=["Fine."])
    async with engine_for(fake) as engine:
        agent = agentkit.Agent(
            engine=engine, profile="qwen3", hints=agentkit.AgentHints(expected_output_tokens=64)
        )
        with anyio.fail_after(20):
            await agent.run("How are you?")
    (body,) = fake.bodies
    assert body["nvext"]["agent_hints"] == {"osl": 64}


async def test_request_options_agent_hints_still_override_the_typed_hints() -> None:
    """The older way (``request_options={"agent_hints": ...}``) still works: each field it
    sets overrides the agent's hint of that name, the rest stand."""
    fake = FakeDynamo(outputs=["Fine."])
    async with engine_for(fake) as engine:
        agent = agentkit.Agent(
            engine=engine,
            profile="qwen3",
            hints=agentkit.AgentHints(priority=3, expected_output_tokens=10),
            request_options={"agent_hints": agentkit.AgentHints(expected_output_tokens=50)},
        )
        with anyio.fail_after(20):
            await agent.run("How are you?")
    assert fake.bodies[0]["nvext"]["agent_hints"] == {"priority": -3, "osl": 50}


async def test_the_vllm_flavor_sends_the_typed_hints_priority() -> None:
    seen: list[dict[str, Any]] = []

    def vllm(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        events = [{"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]}]
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, content=text.encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(vllm))
    engine = RemoteEngine(URL, model="m", http_client=client)
    hints = agentkit.AgentHints(priority=-2, expected_output_tokens=8)
    await collect(engine, GenerationRequest(prompt="Hi", hints=hints))
    ((body,),) = [seen]
    assert body["priority"] == -2
    assert "nvext" not in body
