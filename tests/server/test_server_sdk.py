"""The server end to end over HTTP, with the official ``anthropic`` SDK as the client.

A real uvicorn server runs in a thread on 127.0.0.1 with a tokenizing scripted engine; the
tests talk to it as Claude Code's SDK would.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from _harness import running

from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    ScriptedOutput,
    TokenizedScriptedEngine,
)
from agentkit.errors import EngineError, EngineOverloaded
from agentkit.profiles import get_profile
from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._runtime import ServerRuntime
from agentkit.server._signing import ThinkingSigner

QWEN3 = get_profile("qwen3")
KEY = "test-key"
READ = {
    "name": "Read",
    "description": "Read a file.",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
}


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


class Recording(TokenizedScriptedEngine):
    """Counts streams that were closed before they finished (aborted requests)."""

    def __init__(self, outputs: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0], **kwargs)
        self.aborted = 0

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        finished = False
        try:
            async for chunk in super().generate(request):
                if chunk.finish_reason is not None:
                    finished = True
                yield chunk
        finally:
            if not finished:
                self.aborted += 1


@contextmanager
def serve(
    outputs: Sequence[Any],
    tmp_path: Path,
    *,
    token_delay: float = 0.0,
    **config: Any,
) -> Iterator[tuple[str, Recording]]:
    engine = Recording(outputs, token_delay=token_delay)
    runtime = ServerRuntime(
        engine, QWEN3, log_prompts=tmp_path / "prompts", id_factory=new_tool_use_id
    )
    settings = {"model_name": "org/served-model", "api_key": KEY, **config}
    app = create_app(runtime, ServerConfig(**settings), signer=ThinkingSigner(b"k" * 32))
    with running(app) as url:
        try:
            yield url, engine
        finally:
            while _CLIENTS:
                _CLIENTS.pop().close()


_CLIENTS: list[anthropic.Anthropic] = []


def client(url: str, **kwargs: Any) -> anthropic.Anthropic:
    """An SDK client, closed (its connections too) before the server stops."""
    sdk = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0, **kwargs)
    _CLIENTS.append(sdk)
    return sdk


def prompts(tmp_path: Path) -> list[str]:
    return [p.read_text() for p in sorted((tmp_path / "prompts").glob("*.txt"))]


def test_a_plain_answer_streaming_and_not(tmp_path: Path) -> None:
    with serve(["Hello there.", "Hello again."], tmp_path) as (url, _):
        sdk = client(url)
        message = sdk.messages.create(
            model="org/served-model",
            max_tokens=50,
            messages=[{"role": "user", "content": "hi"}],
        )
        assert [b.type for b in message.content] == ["text"]
        assert message.content[0].text == "Hello there."  # type: ignore[union-attr]
        assert message.stop_reason == "end_turn"
        assert message.usage.input_tokens > 0
        with sdk.messages.stream(
            model="org/served-model",
            max_tokens=50,
            messages=[{"role": "user", "content": "hi again"}],
        ) as stream:
            streamed = stream.get_final_message()
        assert streamed.content[0].text == "Hello again."  # type: ignore[union-attr]
        assert streamed.usage.output_tokens > 0


def test_a_two_turn_tool_round_trip_replays_the_exact_tokens(tmp_path: Path) -> None:
    first = (
        "<think>\nRead it first.\n</think>\n\n"
        + call("Read", file_path="/tmp/a.txt")
        + "\n<think>\nAnd the other.\n</think>\n\n"
        + call("Read", file_path="/tmp/b.txt")
    )
    second = "<think>\nBoth read.\n</think>\n\nThey say A and B."
    with serve([first, second], tmp_path) as (url, engine):
        sdk = client(url)
        request: dict[str, Any] = {
            "model": "org/served-model",
            "max_tokens": 200,
            "system": "You read files.",
            "tools": [READ],
            "thinking": {"type": "adaptive"},
        }
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read a and b."}]
        with sdk.messages.stream(messages=messages, **request) as stream:  # type: ignore[arg-type]
            turn = stream.get_final_message()
        assert [b.type for b in turn.content] == ["thinking", "tool_use", "thinking", "tool_use"]
        assert turn.stop_reason == "tool_use"
        uses = [b for b in turn.content if b.type == "tool_use"]
        assert [u.input for u in uses] == [{"file_path": "/tmp/a.txt"}, {"file_path": "/tmp/b.txt"}]
        assert all(u.id.startswith("toolu_") for u in uses)
        thinking = [b for b in turn.content if b.type == "thinking"]
        assert all(t.signature.startswith("ak1.") for t in thinking)
        # The client sends the turn back as blocks, with the results.
        messages.append({"role": "assistant", "content": [b.model_dump() for b in turn.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0].id, "content": "A"},
                    {
                        "type": "tool_result",
                        "tool_use_id": uses[1].id,
                        "content": [{"type": "text", "text": "B"}],
                    },
                ],
            }
        )
        final = sdk.messages.create(messages=messages, **request)  # type: ignore[arg-type]
        assert final.content[-1].text == "They say A and B."  # type: ignore[union-attr]
        assert final.stop_reason == "end_turn"
        # The second prompt is the first prompt, the exact generated tokens (the stop token
        # included), then only the new text: the prefix cache covers the whole history.
        r1, r2 = engine.requests
        assert r1.prompt_token_ids is not None
        assert r2.prompt_token_ids is not None
        generated = engine.encode(first) + engine.encode(QWEN3.stop[0])
        assert r2.prompt_token_ids[: len(r1.prompt_token_ids) + len(generated)] == [
            *r1.prompt_token_ids,
            *generated,
        ]
        assert final.usage.cache_read_input_tokens == len(r1.prompt_token_ids) + len(generated)
        # Interleaved order survives in the rendered prompt.
        text = prompts(tmp_path)[1]
        order = [
            text.index(s) for s in ("Read it first.", "/tmp/a.txt", "And the other.", "/tmp/b.txt")
        ]
        assert order == sorted(order)


def test_an_edited_turn_is_rendered_canonically(tmp_path: Path) -> None:
    first = "<think>\nx\n</think>\n\n" + call("Read", file_path="/tmp/a.txt")
    with serve([first, "ok"], tmp_path) as (url, engine):
        sdk = client(url)
        turn = sdk.messages.create(
            model="m",
            max_tokens=50,
            tools=[READ],
            messages=[{"role": "user", "content": "go"}],  # type: ignore[list-item]
        )
        blocks = [b.model_dump() for b in turn.content]
        blocks[0]["thinking"] = "edited"
        use = next(b for b in turn.content if b.type == "tool_use")
        sdk.messages.create(
            model="m",
            max_tokens=50,
            tools=[READ],  # type: ignore[list-item]
            messages=[
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": blocks},  # type: ignore[typeddict-item]
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "A"}],
                },
            ],
        )
        assert "edited" in prompts(tmp_path)[1]
        r1, r2 = engine.requests
        assert r1.prompt_token_ids is not None
        assert r2.prompt_token_ids is not None
        assert r2.prompt_token_ids[: len(r1.prompt_token_ids)] == r1.prompt_token_ids


def test_count_tokens_is_the_rendered_prompt(tmp_path: Path) -> None:
    with serve(["ok"], tmp_path) as (url, engine):
        sdk = client(url)
        request: dict[str, Any] = {
            "model": "m",
            "system": "Be brief.",
            "tools": [READ],
            "messages": [{"role": "user", "content": "count me"}],
        }
        counted = sdk.messages.count_tokens(**request)
        sdk.messages.create(max_tokens=10, **request)
        (sent,) = engine.requests
        assert sent.prompt_token_ids is not None
        assert counted.input_tokens == len(sent.prompt_token_ids)


def test_billing_header_lines_do_not_change_the_prompt(tmp_path: Path) -> None:
    with serve(["a", "b", "c"], tmp_path) as (url, engine):
        sdk = client(url)
        for line in (
            "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=sdk-cli;",
            "x-anthropic-billing-header: cc_version=2.1.198.ab1; cc_entrypoint=cli; cch=4f2a;",
        ):
            sdk.messages.create(
                model="m",
                max_tokens=10,
                system=[{"type": "text", "text": line}, {"type": "text", "text": "You code."}],
                messages=[{"role": "user", "content": "hi"}],
            )
        first, second = engine.requests
        assert first.prompt_token_ids == second.prompt_token_ids
        assert "billing" not in first.prompt


def test_models_health_and_query_strings(tmp_path: Path) -> None:
    with serve([], tmp_path) as (url, _):
        sdk = client(url)
        assert [m.id for m in sdk.models.list()] == ["org/served-model"]
        assert sdk.models.retrieve("org/served-model").id == "org/served-model"
        with pytest.raises(anthropic.NotFoundError):
            sdk.models.retrieve("org/other")
        assert httpx.head(url + "/").status_code == 200
        assert httpx.get(url + "/?beta=true").json()["status"] == "ok"
        tokens = httpx.post(
            url + "/v1/tokenize", json={"prompt": "<|im_start|>hi"}, headers={"x-api-key": KEY}
        ).json()
        assert tokens["count"] == 3
        text = httpx.post(
            url + "/v1/detokenize", json={"tokens": tokens["tokens"]}, headers={"x-api-key": KEY}
        ).json()
        assert text == {"prompt": "<|im_start|>hi"}


def test_every_error_status(tmp_path: Path) -> None:
    outputs: list[Any] = [
        ScriptedOutput([EngineOverloaded("queue full")]),
        ScriptedOutput(["partial ", EngineError("the engine died")]),
        "slow " * 40,
    ]
    with serve(
        outputs, tmp_path, max_request_bytes=20_000, max_concurrency=1, token_delay=0.01
    ) as (url, engine):
        sdk = client(url)
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(anthropic.BadRequestError) as bad:
            sdk.messages.create(model="m", max_tokens=10, messages=[])
        assert bad.value.status_code == 400
        assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        with pytest.raises(anthropic.AuthenticationError):
            client(url, default_headers={"x-api-key": "wrong"}).with_options(
                api_key="wrong"
            ).messages.create(
                model="m",
                max_tokens=10,
                messages=messages,  # type: ignore[arg-type]
            )
        with pytest.raises(anthropic.NotFoundError):
            sdk.get("/v1/nowhere", cast_to=object)
        with pytest.raises(anthropic.APIStatusError) as large:
            sdk.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x" * 30_000}]
            )
        assert large.value.status_code == 413
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            sdk.messages.create(model="m", max_tokens=10, messages=messages)  # type: ignore[arg-type]
        assert overloaded.value.status_code == 529
        # A failure after output has streamed: an error event, after the partial text.
        seen: list[str] = []

        def consume() -> None:
            with sdk.messages.stream(model="m", max_tokens=10, messages=messages) as stream:  # type: ignore[arg-type]
                seen.extend(stream.text_stream)

        with pytest.raises(anthropic.APIStatusError, match="the engine died"):
            consume()
        assert "".join(seen) == "partial "
        # 429 while another request is in flight (max_concurrency=1).
        with httpx.Client(base_url=url, headers={"x-api-key": KEY}) as http:
            body = {"model": "m", "max_tokens": 100, "stream": True, "messages": messages}
            with http.stream("POST", "/v1/messages", json=body) as slow:
                assert slow.status_code == 200
                chunks = slow.iter_bytes()  # kept: a dropped iterator closes the response
                next(chunks)
                busy = http.post("/v1/messages", json={**body, "stream": False})
                assert busy.status_code == 429, busy.text
                assert busy.json()["error"]["type"] == "rate_limit_error"

        # Then the script is exhausted: 500 with a clear message. The server frees the slow
        # request's slot when it notices the disconnect, which may be after the next request
        # arrives: a 429 until then (bounded wait).
        def create_when_free() -> None:
            deadline = time.monotonic() + 10
            while True:
                try:
                    sdk.messages.create(model="m", max_tokens=10, messages=messages)  # type: ignore[arg-type]
                    return
                except anthropic.RateLimitError:
                    assert time.monotonic() < deadline, "the disconnected request kept its slot"
                    time.sleep(0.02)

        with pytest.raises(anthropic.InternalServerError, match="no output left"):
            create_when_free()
        assert engine.aborted >= 1


def test_a_client_disconnect_aborts_generation(tmp_path: Path) -> None:
    with serve(["word " * 500], tmp_path, token_delay=0.005) as (url, engine):
        with httpx.Client(base_url=url, headers={"x-api-key": KEY}) as http:
            body = {
                "model": "m",
                "max_tokens": 1000,
                "stream": True,
                "messages": [{"role": "user", "content": "go"}],
            }
            with http.stream("POST", "/v1/messages", json=body) as response:
                for chunk in response.iter_bytes():
                    if b"text_delta" in chunk:
                        break
        deadline = time.monotonic() + 5
        while engine.aborted == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.aborted == 1


def test_binding_beyond_loopback_needs_a_key() -> None:
    from agentkit.errors import ConfigurationError
    from agentkit.server._serve import check_bind

    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "secret")
    with pytest.raises(ConfigurationError, match="api-key"):
        check_bind("0.0.0.0", None)
