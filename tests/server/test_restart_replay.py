"""Exact replay across a server restart, on the Messages and Chat Completions APIs.

Each "process" is an app made by ``build_app`` (what ``agentkit serve`` runs) with its
lifespan entered and left, so the turn store is opened and closed as on a real start and
shutdown. The restart builds a new app, a new runtime and a new store over the same file, with
the same sealing key. The engine outlives the restart, as a ``--remote`` vLLM behind a
restarted ``agentkit serve`` does, so its prefix cache shows what the second prompt reuses.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.server._serve import ServeOptions, build_app
from agentkit.server._signing import ThinkingSigner

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")
SEALING_KEY = "s" * 32
FIRST = (
    "<think>\nRead it first.\n</think>\n\n"
    + "<tool_call>\n"
    + json.dumps({"name": "Read", "arguments": {"file_path": "/tmp/a.txt"}})
    + "\n</tool_call>"
    + "\n<think>\nAnd the other.\n</think>\n\n"
    + "<tool_call>\n"
    + json.dumps({"name": "Read", "arguments": {"file_path": "/tmp/b.txt"}})
    + "\n</tool_call>"
)
SECOND = "<think>\nBoth read.\n</think>\n\nThey say A and B."
SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}},
    "required": ["file_path"],
}


@pytest.fixture(autouse=True)
def sealing_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The key thinking signatures derive from, as a deployment configures it."""
    monkeypatch.setenv("AGENTKIT_SEALING_KEY", SEALING_KEY)
    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path / "cache"))


@asynccontextmanager
async def process(
    engine: TokenizedScriptedEngine, store: Path | None
) -> AsyncIterator[httpx.AsyncClient]:
    """One server process: started, serving a client, then shut down."""
    app, _, _ = build_app(
        ServeOptions(model="Qwen/Qwen3-8B", profile="qwen3", engine=engine, turn_store=store)
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        yield client


def engine() -> TokenizedScriptedEngine:
    return TokenizedScriptedEngine(
        [FIRST, SECOND], specials=QWEN3.special_tokens, stop=QWEN3.stop[0]
    )


def extends(engine: TokenizedScriptedEngine) -> bool:
    """Whether the second prompt begins with the first prompt and the exact generated tokens
    (the stop token included)."""
    r1, r2 = engine.requests
    assert r1.prompt_token_ids is not None
    assert r2.prompt_token_ids is not None
    generated = engine.encode(FIRST) + engine.encode(QWEN3.stop[0])
    history = [*r1.prompt_token_ids, *generated]
    return r2.prompt_token_ids[: len(history)] == history


def history_length(engine: TokenizedScriptedEngine) -> int:
    prompt = engine.requests[0].prompt_token_ids
    assert prompt is not None
    return len(prompt) + len(engine.encode(FIRST) + engine.encode(QWEN3.stop[0]))


async def messages_round_trip(
    engine: TokenizedScriptedEngine, store: Path | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Turn 1, a restart, turn 2 sending turn 1 back as the Anthropic SDK does."""
    request: dict[str, Any] = {
        "model": "m",
        "max_tokens": 200,
        "system": "You read files.",
        "tools": [{"name": "Read", "description": "Read a file.", "input_schema": SCHEMA}],
        "thinking": {"type": "adaptive"},
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read a and b."}]
    async with process(engine, store) as client:
        response = await client.post("/v1/messages", json={**request, "messages": messages})
        assert response.status_code == 200, response.text
        turn = response.json()
    uses = [b for b in turn["content"] if b["type"] == "tool_use"]
    messages += [
        {"role": "assistant", "content": turn["content"]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "A"},
                {"type": "tool_result", "tool_use_id": uses[1]["id"], "content": "B"},
            ],
        },
    ]
    async with process(engine, store) as client:
        response = await client.post("/v1/messages", json={**request, "messages": messages})
        assert response.status_code == 200, response.text
    return turn, response.json()


async def chat_round_trip(engine: TokenizedScriptedEngine, store: Path | None) -> dict[str, Any]:
    """Turn 1, a restart, turn 2 sending turn 1 back as the OpenAI SDK does: one message,
    its two reasoning blocks joined in ``reasoning_content`` (the projection)."""
    tool = {
        "type": "function",
        "function": {"name": "Read", "description": "Read a file.", "parameters": SCHEMA},
    }
    request: dict[str, Any] = {"model": "m", "tools": [tool]}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You read files."},
        {"role": "user", "content": "Read a and b."},
    ]
    async with process(engine, store) as client:
        response = await client.post("/v1/chat/completions", json={**request, "messages": messages})
        assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    assert "Read it first." in message["reasoning_content"]
    assert "And the other." in message["reasoning_content"]
    calls = message["tool_calls"]
    messages += [
        {
            "role": "assistant",
            "content": message["content"],
            "reasoning_content": message["reasoning_content"],
            "tool_calls": calls,
        },
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "A"},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": "B"},
    ]
    async with process(engine, store) as client:
        response = await client.post("/v1/chat/completions", json={**request, "messages": messages})
        assert response.status_code == 200, response.text
    final: dict[str, Any] = response.json()
    return final


async def test_messages_replay_token_exact_after_a_restart(tmp_path: Path) -> None:
    scripted = engine()
    turn, final = await messages_round_trip(scripted, tmp_path / "turns.sqlite")
    assert final["content"][-1]["text"] == "They say A and B."
    assert extends(scripted)
    assert final["usage"]["cache_read_input_tokens"] == history_length(scripted)
    # The restarted server still recognises the signatures it gave before the restart.
    signer = ThinkingSigner.persistent()
    thinking = [b for b in turn["content"] if b["type"] == "thinking"]
    assert all(signer.verify(b["thinking"], b["signature"]) for b in thinking)


async def test_chat_replays_token_exact_after_a_restart(tmp_path: Path) -> None:
    scripted = engine()
    final = await chat_round_trip(scripted, tmp_path / "turns.sqlite")
    assert final["choices"][0]["message"]["content"] == "They say A and B."
    assert extends(scripted)
    cached = final["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == history_length(scripted)


async def test_a_memory_store_forgets_the_turns_on_restart() -> None:
    """The control: the same round trips with ``--turn-store memory`` lose exact replay
    (the turns are rendered canonically), which is what the file store prevents."""
    scripted = engine()
    _, final = await messages_round_trip(scripted, None)
    assert not extends(scripted)
    assert final["usage"]["cache_read_input_tokens"] < history_length(scripted)
    scripted = engine()
    await chat_round_trip(scripted, None)
    assert not extends(scripted)
