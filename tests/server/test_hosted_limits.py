"""A hosted agent's run that reaches one of its limits, over Responses and Chat, streamed and
not: its output-token budget ends the answer as the APIs end one cut at its output cap
(Responses ``incomplete`` with ``max_output_tokens``, Chat ``finish_reason: "length"``); every
other limit is an error that names it, with a ``code`` a client can act on (422 before the
stream, the API's error event after it), never an opaque internal server error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest
from _hosted_app import KEY, SCRIPT, RecordingEngine, clock, weather

import agentkit
from agentkit.budgets import UsageLimits
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._hosted_routes import hosted_routes
from agentkit.server._runtime import ServerRuntime

pytestmark = pytest.mark.anyio

TEXT = "It is 21 degrees Celsius in Paris at 12:00, and sunny."
ANSWER = f"<think>\nShort.\n</think>\n\n{TEXT}"


def limited(outputs: Sequence[str] = SCRIPT, **settings: Any) -> agentkit.Agent[str]:
    return agentkit.Agent(
        engine=RecordingEngine(outputs),
        tools=[weather, clock],
        profile="qwen3",
        system="You help with the weather.",
        **settings,
    )


@asynccontextmanager
async def client(agent: agentkit.Agent[str]) -> AsyncIterator[openai.AsyncOpenAI]:
    runtime = ServerRuntime(agent.engine, agent.profile)
    app = create_app(
        runtime,
        ServerConfig(model_name="hosted", api_key=KEY),
        adapters=[hosted_routes(agent)],
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as http:
        yield openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key=KEY, http_client=http, max_retries=0
        )


# -- errors ----------------------------------------------------------------------------------


async def test_max_turns_after_the_stream_began_is_a_failed_response_naming_the_limit() -> None:
    async with client(limited(max_turns=1)) as sdk:
        stream = await sdk.responses.create(model="hosted", input="Weather?", stream=True)
        events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert "response.mcp_call.completed" in kinds  # the run's first turn streamed
    assert kinds[-1] == "response.failed"
    response = events[-1].response  # type: ignore[union-attr]
    assert response.status == "failed"
    assert response.error is not None
    assert response.error.code == "max_turns_exceeded"
    assert "max_turns=1" in response.error.message
    assert "internal server error" not in response.error.message


async def test_max_turns_without_streaming_is_a_422_with_its_code() -> None:
    async with client(limited(max_turns=1)) as sdk:
        with pytest.raises(openai.UnprocessableEntityError) as raised:
            await sdk.responses.create(model="hosted", input="Weather?")
    assert raised.value.status_code == 422
    assert raised.value.code == "max_turns_exceeded"
    assert "max_turns=1" in raised.value.message


async def test_chat_stream_ends_with_an_error_chunk_naming_the_usage_limit() -> None:
    async with client(limited(usage_limits=UsageLimits(tool_calls=1))) as sdk:
        stream = await sdk.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "Weather?"}], stream=True
        )
        with pytest.raises(openai.APIError) as raised:
            async for _ in stream:
                pass
    assert raised.value.code == "usage_limit_exceeded"
    assert "tool_calls=1" in raised.value.message


async def test_chat_without_streaming_is_a_422_naming_max_turns() -> None:
    async with client(limited(max_turns=1)) as sdk:
        with pytest.raises(openai.UnprocessableEntityError) as raised:
            await sdk.chat.completions.create(
                model="hosted", messages=[{"role": "user", "content": "Weather?"}]
            )
    assert raised.value.code == "max_turns_exceeded"
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"


# -- the output budget -----------------------------------------------------------------------


async def test_the_output_budget_ends_a_streamed_response_as_incomplete() -> None:
    agent = limited([ANSWER], usage_limits=UsageLimits(output_tokens=12))
    async with client(agent) as sdk:
        stream = await sdk.responses.create(model="hosted", input="Weather?", stream=True)
        events = [event async for event in stream]
    last = events[-1]
    assert last.type == "response.incomplete"
    response = last.response
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.error is None
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text  # what was generated before the cap is kept


async def test_the_output_budget_without_streaming_is_an_incomplete_response() -> None:
    agent = limited([ANSWER], usage_limits=UsageLimits(output_tokens=12))
    async with client(agent) as sdk:
        response = await sdk.responses.create(model="hosted", input="Weather?")
        assert response.status == "incomplete"
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == "max_output_tokens"
        assert response.output_text
        assert TEXT.startswith(response.output_text)
        stored = await sdk.responses.retrieve(response.id)
        assert stored.status == "incomplete"


async def test_the_output_budget_ends_a_chat_answer_with_length() -> None:
    agent = limited([ANSWER, ANSWER], usage_limits=UsageLimits(output_tokens=12))
    async with client(agent) as sdk:
        completion = await sdk.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "Weather?"}]
        )
        assert completion.choices[0].finish_reason == "length"
        content = completion.choices[0].message.content
        assert content
        assert TEXT.startswith(content)
        stream = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "length"
    assert chunks[-1].usage is not None  # the usage chunk follows, as for a complete answer


# -- the request's sampling fields -----------------------------------------------------------


async def test_a_requests_max_output_tokens_is_the_runs_output_budget() -> None:
    agent = limited([ANSWER])
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        response = await sdk.responses.create(
            model="hosted", input="Weather?", max_output_tokens=12
        )
    assert engine.requests[0].max_tokens == 12  # the first turn may use the whole budget
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.max_output_tokens == 12


async def test_the_agents_own_budget_still_applies_under_a_larger_request() -> None:
    agent = limited([ANSWER], max_tokens=500, usage_limits=UsageLimits(output_tokens=9))
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        completion = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather?"}],
            max_completion_tokens=1000,
        )
    assert engine.requests[0].max_tokens == 9
    assert completion.choices[0].finish_reason == "length"


async def test_a_budget_spans_the_runs_turns() -> None:
    # The first turn (two server tools) takes part of the budget; the next turn gets the rest.
    agent = limited([*SCRIPT[:1], ANSWER], max_tokens=4000)
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        response = await sdk.responses.create(
            model="hosted", input="Weather?", max_output_tokens=2000
        )
    assert response.status == "completed"
    first = len(engine.encode(SCRIPT[0])) + 1  # its tokens and the stop token
    assert engine.requests[0].max_tokens == 2000
    assert engine.requests[1].max_tokens == 2000 - first


async def test_a_requests_temperature_and_top_p_apply_to_its_run_the_agents_otherwise() -> None:
    agent = limited([ANSWER, ANSWER, ANSWER, ANSWER], temperature=0.7, top_p=0.9)
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        given = await sdk.responses.create(
            model="hosted", input="Weather?", temperature=0.2, top_p=0.5
        )
        left = await sdk.responses.create(model="hosted", input="Weather?")
        await sdk.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "Hi"}], temperature=0.0
        )
        await sdk.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "Hi"}]
        )
    sampled = [(r.temperature, r.top_p) for r in engine.requests]
    assert sampled == [(0.2, 0.5), (0.7, 0.9), (0.0, 0.9), (0.7, 0.9)]
    # Each response echoes what applied to its run.
    assert (given.temperature, given.top_p) == (0.2, 0.5)
    assert (left.temperature, left.top_p) == (0.7, 0.9)
