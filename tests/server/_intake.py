"""What the request-boundary tests share: an app with every endpoint on a scripted engine (no
API key unless asked), valid bodies per endpoint, and checks of each API's error shape and
stream ending."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import httpx
from starlette.applications import Starlette

from agentkit.engine import ScriptedOutput, TokenizedScriptedEngine
from agentkit.engine._scripted import scripted_output
from agentkit.profiles import get_profile
from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer
from agentkit.server._signing import ThinkingSigner

QWEN3 = get_profile("qwen3")
MODEL = "m"
OUTPUT = (
    "<think>\nOk.\n</think>\n\nHello."
    '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
)
OPENAI_PATHS = ("/v1/chat/completions", "/v1/responses")
GENERATION_PATHS = ("/v1/messages", "/v1/chat/completions", "/v1/responses")
TOOL_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


class Endless(TokenizedScriptedEngine):
    """A scripted engine that never runs out of answers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__([OUTPUT], specials=QWEN3.special_tokens, stop=QWEN3.stop[0], **kwargs)

    async def _output_for(self, call: Any) -> ScriptedOutput:
        return scripted_output(OUTPUT)


def build(**config: Any) -> Starlette:
    """Every endpoint over an endless scripted engine; ``config`` sets :class:`ServerConfig`."""
    # No context window, as `agentkit serve --engine scripted` runs: its tokens are characters.
    profile = dataclasses.replace(QWEN3, context_window=None)
    runtime = ServerRuntime(Endless(), profile, id_factory=new_tool_use_id, **_runtime(config))
    return create_app(
        runtime,
        ServerConfig(**{"model_name": MODEL, **config}),
        signer=ThinkingSigner(b"k" * 32),
        adapters=[chat_routes, responses_routes_factory(Sealer(b"s" * 32))],
    )


def _runtime(config: dict[str, Any]) -> dict[str, Any]:
    log = config.pop("log_prompts", None)
    return {"log_prompts": log} if log is not None else {}


def client(app: Starlette, **headers: str) -> httpx.AsyncClient:
    """An in-process client addressed to ``localhost``."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=headers
    )


def valid_body(path: str, *, stream: bool = False) -> dict[str, Any]:
    """A valid request for ``path`` (with a tool, a tool call and its result), a new copy
    each time."""
    body: dict[str, Any] = json.loads(json.dumps(_valid_body(path, stream=stream)))
    return body


def _valid_body(path: str, *, stream: bool) -> dict[str, Any]:
    if path in ("/v1/messages", "/v1/messages/count_tokens"):
        body: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 50,
            "system": [{"type": "text", "text": "Be brief."}],
            "tools": [{"name": "f", "description": "F.", "input_schema": TOOL_SCHEMA}],
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Calling."},
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}],
                },
            ],
        }
        if path == "/v1/messages":
            body["stream"] = stream
        else:
            del body["max_tokens"]
        return body
    if path == "/v1/chat/completions":
        return {
            "model": MODEL,
            "stream": stream,
            "temperature": 0.5,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": TOOL_SCHEMA}}],
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": "Calling.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"a": 1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "2"},
            ],
        }
    if path == "/v1/responses":
        return {
            "model": MODEL,
            "stream": stream,
            "store": False,
            "instructions": "Be brief.",
            "tools": [
                {"type": "function", "name": "f", "parameters": TOOL_SCHEMA},
                {
                    "type": "namespace",
                    "name": "ns",
                    "tools": [{"type": "function", "name": "g", "parameters": TOOL_SCHEMA}],
                },
            ],
            "tool_choice": {"type": "function", "name": "f"},
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
                {"type": "function_call_output", "call_id": "c1", "output": "2"},
            ],
        }
    if path == "/v1/tokenize":
        return {"prompt": "hi there"}
    if path == "/v1/detokenize":
        return {"tokens": [104, 105]}
    raise ValueError(path)


ALL_PATHS = (
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/tokenize",
    "/v1/detokenize",
)


def error_of(path: str, response: httpx.Response) -> dict[str, Any]:
    """The error object of an error response, after checking it has ``path``'s API's shape
    (Anthropic: ``{"type": "error", "error": {"type", "message"}}``; OpenAI: ``{"error":
    {"message", "type", "param", "code"}}``)."""
    data = response.json()
    assert isinstance(data, Mapping), data
    error = data["error"]
    assert isinstance(error["message"], str), data
    assert error["message"], data
    assert isinstance(error["type"], str), data
    if path in OPENAI_PATHS:
        assert set(error) >= {"message", "type", "param", "code"}, data
    else:
        assert data["type"] == "error", data
    return dict(error)


def sse_events(raw: str) -> list[tuple[str | None, str]]:
    """``(event name, data)`` per server-sent event (comments left out)."""
    events: list[tuple[str | None, str]] = []
    for frame in raw.split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in re.split(r"\r\n|\r|\n", frame):  # SSE's line ends only (not U+0085)
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            events.append((name, "\n".join(data)))
    return events


def assert_stream_ends(path: str, raw: str) -> None:
    """A 200 stream of ``path`` ends with its API's terminal event, or its error event."""
    events = sse_events(raw)
    assert events, raw
    name, data = events[-1]
    if path == "/v1/chat/completions":
        assert data == "[DONE]", raw[-500:]
        return
    payload = json.loads(data)
    if path == "/v1/messages":
        assert name in ("message_stop", "error"), raw[-500:]
        assert payload["type"] == name
    else:
        assert payload["type"] in (
            "response.completed",
            "response.incomplete",
            "response.failed",
            "error",
        ), raw[-500:]
