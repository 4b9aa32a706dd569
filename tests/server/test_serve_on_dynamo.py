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
