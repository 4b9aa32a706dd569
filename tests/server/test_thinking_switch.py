"""A request that turns thinking off gets the profile's empty reasoning block at the end of
the prompt (Qwen3's template with enable_thinking=False); the history before it is unchanged,
and a profile without a switch is left alone."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from starlette.applications import Starlette

import agentkit
from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import Profile, get_profile
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes
from agentkit.server._runtime import ServerRuntime

pytestmark = pytest.mark.anyio

OFF = "<think>\n\n</think>\n\n"


def app(profile: Profile, outputs: list[str]) -> tuple[Starlette, TokenizedScriptedEngine]:
    engine = TokenizedScriptedEngine(outputs, specials=profile.special_tokens, stop=profile.stop[0])
    runtime = ServerRuntime(engine, profile)
    config = ServerConfig(model_name="m")
    return create_app(runtime, config, adapters=[chat_routes, responses_routes]), engine


async def post(application: Starlette, path: str, body: dict[str, object]) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return await client.post(path, json=body)


@pytest.mark.parametrize(
    ("path", "off", "on"),
    [
        (
            "/v1/messages",
            {"thinking": {"type": "disabled"}},
            {"thinking": {"type": "enabled", "budget_tokens": 100}},
        ),
        ("/v1/chat/completions", {"reasoning_effort": "none"}, {"reasoning_effort": "high"}),
        ("/v1/responses", {"reasoning": {"effort": "minimal"}}, {"reasoning": {"effort": "low"}}),
    ],
)
async def test_thinking_off_closes_an_empty_block_in_the_generation_prompt(
    path: str, off: dict[str, object], on: dict[str, object]
) -> None:
    application, engine = app(get_profile("qwen3"), ["Answer.", "Answer."])
    if path == "/v1/responses":
        base: dict[str, object] = {"model": "m", "input": "hi"}
    else:
        base = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    assert (await post(application, path, {**base, **off})).status_code == 200
    assert (await post(application, path, {**base, **on})).status_code == 200
    closed, thinking = engine.requests
    assert closed.prompt == thinking.prompt + OFF
    assert closed.prompt_token_ids == (thinking.prompt_token_ids or []) + engine.encode(OFF)


async def test_a_profile_without_a_switch_is_left_alone() -> None:
    profile = dataclasses.replace(get_profile("qwen3"), name="no-switch", thinking_switch=False)
    application, engine = app(profile, ["a", "b"])
    base = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    await post(application, "/v1/messages", {**base, "thinking": {"type": "disabled"}})
    await post(application, "/v1/messages", base)
    first, second = engine.requests
    assert first.prompt == second.prompt


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/v1/responses"])
async def test_agent_hints_in_the_body_reach_the_engine(path: str) -> None:
    application, engine = app(get_profile("qwen3"), ["Answer."])
    if path == "/v1/responses":
        body: dict[str, object] = {"model": "m", "input": "hi"}
    else:
        body = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    hints = {"priority": -3, "latency_sensitive": True, "expected_output_tokens": 50}
    assert (await post(application, path, {**body, "agent_hints": hints})).status_code == 200
    (request,) = engine.requests
    assert request.hints == agentkit.AgentHints.model_validate(hints)
    assert request.extra == {}
    bad = await post(application, path, {**body, "agent_hints": {"priority": "soon"}})
    assert bad.status_code == 400
    assert "agent_hints.priority" in bad.text
