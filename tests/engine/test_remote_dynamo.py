"""RemoteEngine(flavor="dynamo") against a fake of Dynamo 1.6.1's frontend.

The fake does what the real frontend was seen doing (``ai-dynamo==1.6.1``; the end-to-end
test ``tests/e2e/test_dynamo.py`` runs the real one): it refuses body fields it does not know
with HTTP 400, takes a prompt of token ids as is, returns output ids only as ``logprobs``
tokens written ``token_id:<id>`` (when asked with ``return_tokens_as_token_ids``), lists the
context length as ``context_window``, and reads agent hints from ``nvext.agent_hints`` and the
session from the ``x-dynamo-session-id`` header.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from _hermes import hermes

import agentkit
from agentkit.engine import CharTokenizer, GenerationChunk, GenerationRequest, RequestContext
from agentkit.engine._remote import RemoteEngine
from agentkit.errors import ConfigurationError, EngineError
from agentkit.profiles import get_profile

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")
STOP = QWEN3.stop[0]
TOKENIZER = CharTokenizer([*QWEN3.special_tokens, STOP])
URL = "http://dynamo.test:8000"

ACCEPTED = frozenset(
    {
        "model",
        "prompt",
        "stream",
        "stream_options",
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "stop_token_ids",
        "seed",
        "logit_bias",
        "n",
        "echo",
        "skip_special_tokens",
        "include_stop_str_in_output",
        "logprobs",
        "return_tokens_as_token_ids",
        "guided_regex",
        "guided_json",
        "guided_grammar",
        "guided_choice",
        "nvext",
    }
)
"""Body fields the fake accepts; Dynamo 1.6.1 refused ``return_token_ids``,
``add_special_tokens``, ``priority`` and ``structured_outputs`` with a 400."""


@dataclass
class FakeDynamo:
    outputs: list[str] = field(default_factory=lambda: ["Hello world"])
    cached: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny", "context_window": 4096}]})
        body = json.loads(request.content)
        unknown = sorted(set(body) - ACCEPTED)
        if unknown:
            names = ", ".join(f"`{name}`" for name in unknown)
            return httpx.Response(
                400,
                json={
                    "message": f"Validation: Unsupported parameter(s): {names}",
                    "type": "Bad Request",
                    "code": 400,
                },
            )
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        text = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        return httpx.Response(
            200,
            content=self._events(body, text).encode(),
            headers={"content-type": "text/event-stream"},
        )

    def _events(self, body: dict[str, Any], text: str) -> str:
        prompt = body["prompt"]
        prompt_ids = prompt if isinstance(prompt, list) else TOKENIZER.encode(prompt)
        as_ids = body.get("logprobs") is not None and body.get("return_tokens_as_token_ids")
        tokens = TOKENIZER.encode(text)
        events: list[dict[str, Any]] = []

        def choice(token: int, piece: str, finish: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"text": piece, "index": 0}
            if as_ids:
                name = f"token_id:{token}"
                out["logprobs"] = {
                    "tokens": [name],
                    "token_logprobs": [0.0],
                    "top_logprobs": [{name: 0.0}],
                    "text_offset": [],
                }
            if finish:
                out["finish_reason"] = finish
            return out

        for token in tokens:
            events.append({"choices": [choice(token, TOKENIZER.decode([token]))]})
        # The end-of-turn token ends the output: a hidden stop, no text.
        events.append({"choices": [choice(TOKENIZER.encode(STOP)[0], "", "stop")]})
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(tokens) + 1,
            "total_tokens": len(prompt_ids) + len(tokens) + 1,
            "prompt_tokens_details": {"audio_tokens": None, "cached_tokens": self.cached},
        }
        events.append({"choices": [], "usage": usage})
        lines = [f"data: {json.dumps(event)}\n\n" for event in events]
        return "".join(lines) + "data: [DONE]\n\n"


def engine_for(fake: FakeDynamo, **kwargs: Any) -> RemoteEngine:
    client = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    options: dict[str, Any] = {"model": "tiny", "tokenizer": TOKENIZER, "flavor": "dynamo"}
    return RemoteEngine(URL, http_client=client, **{**options, **kwargs})


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
            hints=agentkit.AgentHints(priority=4),
            request_options={"agent_hints": agentkit.AgentHints(expected_output_tokens=50)},
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
    assert sessions == {result.run_id}
    hints = {"priority": -4, "osl": 50}
    assert [body["nvext"]["agent_hints"] for body in fake.bodies] == [hints] * 2
