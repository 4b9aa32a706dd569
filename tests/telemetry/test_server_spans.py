"""``agentkit serve``'s model turns as ``chat`` spans (the SDK's in-memory exporter): the same
attributes as an agent's turn, the child of the client's W3C ``traceparent`` when it sends
one, an error status when the turn fails, and nothing at all unless instrumentation is on. A
hosted agent's run keeps its own span tree, under the client's ``traceparent`` too."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from _otel_memory import Otel
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, TokenizedScriptedEngine
from agentkit.errors import EngineError
from agentkit.profiles import get_profile
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._hosted_routes import hosted_routes
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")
KEY = "test-key"
HEADERS = {"authorization": f"Bearer {KEY}", "x-api-key": KEY}
ANSWER = "<think>\nBrief.\n</think>\n\nHello there."
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Scripted(TokenizedScriptedEngine):
    """Qwen3's markers as tokens; fails after ``fail_after`` chunks when told to."""

    model = "org/served-model"

    def __init__(self, outputs: Sequence[str], *, fail_after: int | None = None) -> None:
        super().__init__(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])
        self._fail_after = fail_after

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        n = 0
        async for chunk in super().generate(request):
            if n == self._fail_after:
                raise EngineError("the engine died", request_id=request.request_id)
            n += 1
            yield chunk


@pytest.fixture
def otel() -> AsyncIterator[Otel]:
    otel = Otel()
    agentkit.telemetry.instrument_all(otel.settings())
    try:
        yield otel  # type: ignore[misc]
    finally:
        agentkit.telemetry.instrument_all(False)


@asynccontextmanager
async def served(engine: Scripted) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        ServerRuntime(engine, QWEN3),
        ServerConfig(model_name="served", api_key=KEY),
        adapters=[chat_routes, responses_routes_factory(Sealer(b"s" * 32))],
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=HEADERS
    ) as http:
        yield http


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "served", "messages": [{"role": "user", "content": "hi"}], **extra}


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_server_turn_is_a_chat_span_under_the_clients_traceparent(otel: Otel) -> None:
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    async with served(Scripted([ANSWER])) as http:
        response = await http.post(
            "/v1/chat/completions",
            json=_chat(max_tokens=64, temperature=0.5),
            headers={"traceparent": traceparent},
        )
    assert response.status_code == 200, response.text
    completion = response.json()
    (span,) = otel.named("chat")
    assert span.name == "chat org/served-model"
    assert span.context is not None
    assert f"{span.context.trace_id:032x}" == TRACE_ID  # the client's trace
    assert span.parent is not None
    assert f"{span.parent.span_id:016x}" == PARENT_ID  # under the client's span
    attributes = _attributes(span)
    usage = completion["usage"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "org/served-model"
    assert attributes["gen_ai.provider.name"] == "scripted"
    assert attributes["agentkit.request_id"] == completion["id"]
    assert attributes["gen_ai.request.max_tokens"] == 64
    assert attributes["gen_ai.request.temperature"] == 0.5
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"] > 0
    assert attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"] > 0
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == cached
    assert span.status.status_code is not StatusCode.ERROR


async def test_a_streamed_turn_without_traceparent_is_a_root_span_with_cached_tokens(
    otel: Otel,
) -> None:
    async with served(Scripted([ANSWER, ANSWER])) as http:
        first = await http.post("/v1/responses", json={"model": "served", "input": "hi"})
        assert first.status_code == 200, first.text
        second = await http.post(
            "/v1/responses",
            json={
                "model": "served",
                "input": "hi again",
                "previous_response_id": first.json()["id"],
                "stream": True,
            },
        )
        assert second.status_code == 200, second.text
    spans = otel.named("chat")
    assert len(spans) == 2
    assert all(span.parent is None for span in spans)
    assert spans[0].context is not None
    assert spans[1].context is not None
    assert spans[0].context.trace_id != spans[1].context.trace_id  # two traces
    later = _attributes(spans[1])
    assert later["gen_ai.response.finish_reasons"] == ("stop",)
    # The second turn's prompt extends the first: the scripted engine reports it cached.
    assert later["gen_ai.usage.cache_read.input_tokens"] > 0
    assert later["agentkit.request_id"].startswith("resp_")


async def test_a_turn_that_fails_after_the_200_ends_its_span_with_an_error(otel: Otel) -> None:
    async with served(Scripted([ANSWER], fail_after=3)) as http:
        response = await http.post("/v1/chat/completions", json=_chat(stream=True))
        assert response.status_code == 200
        assert "the engine died" in response.text
    (span,) = otel.named("chat")
    assert span.status.status_code is StatusCode.ERROR
    assert _attributes(span)["error.type"] == "EngineError"


async def test_server_turns_are_not_traced_unless_instrumentation_is_on() -> None:
    otel = Otel()
    agentkit.telemetry.instrument_all(False)
    async with served(Scripted([ANSWER])) as http:
        response = await http.post("/v1/chat/completions", json=_chat())
        assert response.status_code == 200
    assert otel.finished() == []


async def test_a_hosted_agents_run_is_traced_under_the_clients_traceparent(otel: Otel) -> None:
    agent = agentkit.Agent(engine=Scripted([ANSWER]), profile="qwen3")
    app = create_app(
        ServerRuntime(agent.engine, agent.profile),
        ServerConfig(model_name="hosted", api_key=KEY),
        adapters=[hosted_routes(agent)],
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=HEADERS
    ) as http:
        response = await http.post(
            "/v1/responses",
            json={"model": "hosted", "input": "hi", "stream": True},
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
        )
        assert response.status_code == 200, response.text
    (run,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    assert run.context is not None
    assert f"{run.context.trace_id:032x}" == TRACE_ID
    assert run.parent is not None
    assert f"{run.parent.span_id:016x}" == PARENT_ID
    assert chat.parent is not None
    assert chat.parent.span_id == run.context.span_id  # the agent's own tree, under the client
