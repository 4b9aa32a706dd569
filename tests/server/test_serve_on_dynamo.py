"""``agentkit serve`` over ``RemoteEngine(flavor="dynamo")``: what reaches the frontend.

The app runs in process over a RemoteEngine whose HTTP client reaches the fake Dynamo
frontend (``_fake_dynamo``); each test reads the bodies and headers the frontend received.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _fake_dynamo import FakeDynamo, engine_for
from starlette.applications import Starlette

from agentkit.profiles import get_profile
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes
from agentkit.server._runtime import ServerRuntime

pytestmark = pytest.mark.anyio

PATHS = ["/v1/messages", "/v1/chat/completions", "/v1/responses"]


def serve(fake: FakeDynamo) -> Starlette:
    runtime = ServerRuntime(engine_for(fake), get_profile("qwen3"))
    config = ServerConfig(model_name="tiny")
    return create_app(runtime, config, adapters=[chat_routes, responses_routes])


async def post(
    application: Starlette, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return await client.post(path, json=body, headers=headers)


def ask(path: str, text: str = "hi") -> dict[str, Any]:
    if path == "/v1/responses":
        return {"model": "tiny", "input": text}
    return {"model": "tiny", "max_tokens": 20, "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("path", PATHS)
async def test_the_bodys_agent_hints_reach_dynamo_as_nvext_agent_hints(path: str) -> None:
    fake = FakeDynamo(outputs=["Hello."])
    hints = {"priority": 2, "expected_output_tokens": 64, "latency_sensitive": True}
    response = await post(serve(fake), path, {**ask(path), "agent_hints": hints})
    assert response.status_code == 200, response.text
    (body,) = fake.bodies
    assert body["nvext"]["agent_hints"] == {"priority": -2, "osl": 64}


def conversation(path: str, *texts: str, key: str | None = None) -> dict[str, Any]:
    """A request whose history alternates user and assistant messages, from ``texts``."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(texts)
    ]
    body: dict[str, Any]
    if path == "/v1/responses":
        body = {"model": "tiny", "input": messages}
    else:
        body = {"model": "tiny", "max_tokens": 20, "messages": messages}
    if path == "/v1/messages":
        body["system"] = "Be brief."
    if key is not None:
        if path == "/v1/messages":
            body["metadata"] = {"user_id": key}
        else:
            body["prompt_cache_key"] = key
    return body


async def sessions(path: str, *bodies: dict[str, Any]) -> list[str | None]:
    fake = FakeDynamo(outputs=["Hello."])
    application = serve(fake)
    for body in bodies:
        response = await post(application, path, body)
        assert response.status_code == 200, response.text
    return [headers.get("x-dynamo-session-id") for headers in fake.headers]


@pytest.mark.parametrize("path", PATHS)
async def test_a_conversations_turns_share_a_dynamo_session_without_a_client_key(
    path: str,
) -> None:
    first, second, other = await sessions(
        path,
        conversation(path, "What is 2 + 2?"),
        conversation(path, "What is 2 + 2?", "4.", "And 3 + 3?"),
        conversation(path, "Name a colour."),
    )
    assert first is not None
    assert first.startswith("conv_")
    assert second == first
    assert other is not None
    assert other != first


@pytest.mark.parametrize("path", PATHS)
async def test_the_clients_conversation_key_is_the_session(path: str) -> None:
    """Codex's ``prompt_cache_key`` and Claude Code's ``metadata.user_id`` name the
    conversation, whatever its first message; the key itself does not travel upstream."""
    first, second, other = await sessions(
        path,
        conversation(path, "What is 2 + 2?", key="thread-1"),
        conversation(path, "Summarise: what is 2 + 2?", key="thread-1"),
        conversation(path, "What is 2 + 2?", key="thread-2"),
    )
    assert first == second
    assert other != first
    assert "thread-1" not in str(first)
