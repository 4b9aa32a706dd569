"""RemoteEngine against fake OpenAI-compatible servers: no vLLM needed.

Failure modes need a real socket (refused connections, dropped connections, the server
seeing a client go away), so most tests run a small Starlette app under uvicorn in a thread.
Replica selection runs on ``httpx.MockTransport``, where taking a replica down is one flag.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from _harness import running
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import agentkit
from agentkit.engine import CharTokenizer, GenerationChunk, GenerationRequest
from agentkit.engine._remote import RemoteEngine
from agentkit.engine._replicas import ReplicaSet, normalise_url, session_key
from agentkit.errors import ConfigurationError, EngineError, EngineOverloaded
from agentkit.profiles import get_profile

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")
STOP = QWEN3.stop[0]
TOKENIZER = CharTokenizer([*QWEN3.special_tokens, STOP])
FAST: dict[str, Any] = {
    "backoff": 0.01,
    "connect_timeout": 2,
    "first_token_timeout": 5,
    "token_timeout": 5,
}


class Drop(Exception):
    """Raised inside the fake's stream: uvicorn then drops the connection mid-body."""


@dataclass
class Reply:
    """What the fake server does for one request."""

    text: str = "Hello world"
    status: int = 200
    finish_reason: str = "stop"
    stop_reason: str | int | None = None
    cached: int = 0
    token_ids: bool = True
    delay: float = 0.0
    stall_after: int | None = None
    """Tokens sent before stalling (keep-alive comments only) until the client leaves."""
    drop_after: int | None = None
    """Tokens sent before the connection is dropped."""
    endless: bool = False
    error_after: int | None = None
    """Tokens sent before an in-stream error event."""


@dataclass
class Fake:
    replies: list[Reply] = field(default_factory=list)
    default: Reply = field(default_factory=Reply)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    client_ports: list[int] = field(default_factory=list)
    disconnects: int = 0
    health_status: int = 200
    left: threading.Event = field(default_factory=threading.Event)

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            body = await request.json()
            self.bodies.append(body)
            self.headers.append(dict(request.headers))
            self.client_ports.append(request.client.port if request.client else 0)
            reply = self.replies.pop(0) if self.replies else self.default
            if reply.status != 200:
                return JSONResponse(
                    {"error": {"message": f"status {reply.status}", "code": reply.status}},
                    status_code=reply.status,
                )
            return StreamingResponse(self._stream(body, reply), media_type="text/event-stream")

        async def health(request: Request) -> Response:
            return Response(status_code=self.health_status)

        return Starlette(
            routes=[
                Route("/v1/completions", completions, methods=["POST"]),
                Route("/health", health),
            ]
        )

    async def _stream(self, body: dict[str, Any], reply: Reply) -> AsyncIterator[str]:
        prompt = body["prompt"]
        prompt_ids = prompt if isinstance(prompt, list) else TOKENIZER.encode(prompt)
        tokens = TOKENIZER.encode(reply.text)  # one token per event, as vLLM streams
        finished = False
        try:
            index = 0
            while index < len(tokens) or reply.endless:
                if reply.stall_after == index:
                    while True:  # keep-alive comments: they must not count as tokens
                        yield ": keep-alive\n\n"
                        await anyio.sleep(0.02)
                if reply.drop_after == index:
                    raise Drop
                if reply.error_after == index:
                    yield _data({"error": {"message": "KV cache transfer failed", "code": 500}})
                    yield "data: [DONE]\n\n"
                    return
                token = tokens[index % len(tokens)]
                text = TOKENIZER.decode([token])
                choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": None}
                if reply.token_ids:
                    choice["token_ids"] = [token]
                    if index == 0:
                        choice["prompt_token_ids"] = prompt_ids
                yield _data({"choices": [choice]})
                index += 1
                await anyio.sleep(reply.delay)
            final: dict[str, Any] = {
                "index": 0,
                "text": "",
                "finish_reason": reply.finish_reason,
                "stop_reason": reply.stop_reason,
            }
            if reply.token_ids:
                final["token_ids"] = TOKENIZER.encode(STOP) if reply.finish_reason == "stop" else []
            yield _data({"choices": [final]})
            usage = {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(TOKENIZER.encode(reply.text)) + 1,
                "total_tokens": 0,
                "prompt_tokens_details": {"cached_tokens": reply.cached},
            }
            yield _data({"choices": [], "usage": usage})
            yield "data: [DONE]\n\n"
            finished = True
        finally:
            if not finished:
                self.disconnects += 1
                self.left.set()


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


@contextmanager
def serve(fake: Fake) -> Iterator[str]:
    with running(fake.app(), log_level="critical", timeout_graceful_shutdown=2) as url:
        yield url


_HELD: list[socket.socket] = []


@pytest.fixture(autouse=True, scope="module")
def _release_held_ports() -> Iterator[None]:
    """Close the ports :func:`refused_url` kept once this module's tests are done."""
    yield
    while _HELD:
        _HELD.pop().close()


def refused_url() -> str:
    """A local port bound but not listening: connections to it are refused at once, and no
    other process can take the port while the tests run (the socket is kept)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def request(prompt: str = "Hi", **kwargs: Any) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, **kwargs)


async def collect(engine: RemoteEngine, req: GenerationRequest) -> list[GenerationChunk]:
    with anyio.fail_after(10):
        return [chunk async for chunk in engine.generate(req)]


async def drain(engine: RemoteEngine, req: GenerationRequest, seen: list[str]) -> None:
    """Stream ``req``, keeping each chunk's text in ``seen`` (up to a failure)."""
    with anyio.fail_after(10):
        async for chunk in engine.generate(req):
            seen.append(chunk.text)


def text_of(chunks: Sequence[GenerationChunk]) -> str:
    return "".join(c.text for c in chunks)


# -- streaming and request mapping ----------------------------------------------------------


async def test_streams_text_token_ids_and_usage_with_cached_tokens() -> None:
    fake = Fake([Reply("Hello world", cached=3, stop_reason=STOP)])
    with serve(fake) as url:
        async with RemoteEngine(url + "/v1/", model="m", api_key="k", **FAST) as engine:
            chunks = await collect(engine, request(prompt_token_ids=[5, 6, 7, 8], max_tokens=9))
    assert text_of(chunks) == "Hello world"
    assert [t for c in chunks for t in c.token_ids] == TOKENIZER.encode("Hello world" + STOP)
    final = chunks[-1]
    assert final.finish_reason == "stop"
    assert final.stop_sequence == STOP
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.cached_prompt_tokens) == (4, 3)
    assert final.usage.output_tokens == len("Hello world") + 1
    assert final.usage.time_to_first_token_s is not None
    assert chunks[0].usage is not None  # early usage: the prompt's size
    assert chunks[0].usage.prompt_tokens == 4
    assert all(c.finish_reason is None for c in chunks[:-1])
    body = fake.bodies[0]
    assert body["prompt"] == [5, 6, 7, 8]  # the exact token ids, not the text
    assert body["model"] == "m"
    assert body["max_tokens"] == 9
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["skip_special_tokens"] is False
    assert body["include_stop_str_in_output"] is False
    assert body["return_token_ids"] is True
    assert fake.headers[0]["authorization"] == "Bearer k"


async def test_text_prompt_extra_options_and_a_server_without_token_ids() -> None:
    fake = Fake([Reply("plain", token_ids=False, finish_reason="length")])
    extra = {"session_id": "s1", "priority": 3, "structured_outputs": {"regex": "a+"}}
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            chunks = await collect(
                engine,
                request("Say it", temperature=0.5, top_p=0.9, stop=["END"], extra=extra),
            )
    assert text_of(chunks) == "plain"
    assert all(not c.token_ids for c in chunks)
    assert chunks[-1].finish_reason == "length"
    body = fake.bodies[0]
    assert body["prompt"] == "Say it"
    assert body["max_tokens"] == 1 << 30  # vLLM clamps it to the context; null would be 16
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.5, 0.9, ["END"])
    assert body["priority"] == 3
    assert body["structured_outputs"] == {"regex": "a+"}
    assert "session_id" not in body


async def test_connections_are_pooled() -> None:
    fake = Fake()
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            for _ in range(3):
                assert text_of(await collect(engine, request())) == "Hello world"
    assert len(set(fake.client_ports)) == 1  # one connection, kept alive


async def test_extra_cannot_override_what_the_engine_controls() -> None:
    engine = RemoteEngine("http://127.0.0.1:9", model="m")
    with pytest.raises(ConfigurationError, match="stream"):
        await collect(engine, request(extra={"stream": False}))
    await engine.aclose()


async def test_encode_and_decode_exist_only_with_a_local_tokenizer() -> None:
    bare = RemoteEngine("http://localhost:8000", model="m")
    assert not hasattr(bare, "encode")
    assert not hasattr(bare, "decode")
    tokenized = RemoteEngine("http://localhost:8000", model="m", tokenizer=TOKENIZER)
    assert tokenized.encode(f"a{STOP}") == TOKENIZER.encode(f"a{STOP}")
    assert tokenized.decode(TOKENIZER.encode(f"a{STOP}")) == f"a{STOP}"
    await bare.aclose()
    await tokenized.aclose()


def test_hugging_face_style_tokenizer_gets_no_special_tokens_added() -> None:
    calls: list[dict[str, Any]] = []

    class HFLike:
        def encode(self, text: str, **kwargs: Any) -> list[int]:
            calls.append(kwargs)
            return [1]

        def decode(self, ids: Sequence[int], **kwargs: Any) -> str:
            calls.append(kwargs)
            return "x"

    engine = RemoteEngine("http://localhost:8000", model="m", tokenizer=HFLike())
    engine.encode("x")
    engine.decode([1])
    assert calls == [{"add_special_tokens": False}, {"skip_special_tokens": False}]


def test_configuration_is_checked_up_front() -> None:
    with pytest.raises(ConfigurationError, match="either base_url or base_urls"):
        RemoteEngine(model="m")
    with pytest.raises(ConfigurationError, match="invalid server URL"):
        RemoteEngine("localhost:8000", model="m")
    assert normalise_url("http://h:1/v1/") == "http://h:1"
    assert session_key("run_abc-3") == "run_abc"
    assert session_key("plain") == "plain"
    assert session_key("chatcmpl-Xy7") == "chatcmpl-Xy7"  # no numeric turn: its own
    assert session_key(None) is None


# -- failures before the first token: retried ------------------------------------------------


async def test_refused_connection_fails_with_an_error_naming_the_endpoint() -> None:
    url = refused_url()
    async with RemoteEngine(url, model="m", max_retries=2, **FAST) as engine:
        with pytest.raises(EngineError) as caught:
            await collect(engine, request(request_id="run_x-1"))
    assert not isinstance(caught.value, EngineOverloaded)
    assert f"{url}/v1/completions" in str(caught.value)
    assert "3 attempts" in str(caught.value)
    assert caught.value.request_id == "run_x-1"


async def test_a_refusing_replica_fails_over_to_the_next() -> None:
    fake = Fake()
    down = refused_url()
    with serve(fake) as url:
        async with RemoteEngine(base_urls=[down, url], model="m", **FAST) as engine:
            refusing = engine.replicas.replicas[0]
            # The refusing replica's port is random, and so is the rendezvous ranking: start
            # with a session that ranks it first, or no request might ever try it.
            first = next(
                key
                for key in (f"s{i}" for i in range(1000))
                if engine.replicas.ranked(key)[0] is refusing
            )
            for session in [first, "s1", "s2", "s3"]:
                chunks = await collect(engine, request(extra={"session_id": session}))
                assert text_of(chunks) == "Hello world"
            assert not refusing.is_up(time.monotonic())
    assert len(fake.bodies) == 4


async def test_503_then_recovers() -> None:
    fake = Fake([Reply(status=503), Reply(status=503), Reply("back")])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            chunks = await collect(engine, request())
    assert text_of(chunks) == "back"
    assert len(fake.bodies) == 3


async def test_overloaded_after_every_retry() -> None:
    fake = Fake(default=Reply(status=529))
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", max_retries=2, **FAST) as engine:
            with pytest.raises(EngineOverloaded, match=url):
                await collect(engine, request())
    assert len(fake.bodies) == 3


async def test_a_connection_dropped_before_the_first_token_is_retried() -> None:
    fake = Fake([Reply(drop_after=0), Reply("second")])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            chunks = await collect(engine, request())
    assert text_of(chunks) == "second"
    assert len(fake.bodies) == 2


async def test_client_errors_are_not_retried() -> None:
    fake = Fake([Reply(status=400)])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            with pytest.raises(EngineError, match="HTTP 400: status 400"):
                await collect(engine, request())
            fake.replies = [Reply(status=404)]
            with pytest.raises(ConfigurationError, match="HTTP 404"):
                await collect(engine, request())
    assert len(fake.bodies) == 2


# -- failures after the first token: never retried -------------------------------------------


async def test_a_stall_after_the_first_token_times_out_without_duplicating_text() -> None:
    fake = Fake([Reply("one two three", stall_after=3)], default=Reply("again"))
    seen: list[str] = []
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **{**FAST, "token_timeout": 0.3}) as engine:
            with pytest.raises(EngineError, match="token_timeout") as caught:
                await drain(engine, request(), seen)
            assert url in str(caught.value)
            assert "not retried" in str(caught.value)
            with anyio.fail_after(5):
                await anyio.to_thread.run_sync(fake.left.wait)
    assert seen == ["o", "n", "e"]
    assert len(fake.bodies) == 1
    assert fake.disconnects == 1


async def test_no_first_token_in_time() -> None:
    fake = Fake([Reply(stall_after=0)])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **{**FAST, "first_token_timeout": 0.3}) as engine:
            with pytest.raises(EngineError, match="first_token_timeout"):
                await collect(engine, request())
    assert len(fake.bodies) == 1


async def test_a_connection_dropped_mid_stream_is_an_error_not_a_retry() -> None:
    fake = Fake([Reply("one two three", drop_after=7)], default=Reply("again"))
    seen: list[str] = []
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            with pytest.raises(EngineError, match=r"mid-stream|closed by the server") as caught:
                await drain(engine, request(), seen)
    assert url in str(caught.value)
    assert "".join(seen) == "one two"
    assert len(fake.bodies) == 1


async def test_an_error_event_mid_stream() -> None:
    fake = Fake([Reply("one two", error_after=3)])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            with pytest.raises(EngineError, match="KV cache transfer failed"):
                await collect(engine, request())
    assert len(fake.bodies) == 1


# -- cancellation ----------------------------------------------------------------------------


async def test_closing_the_stream_closes_the_connection() -> None:
    fake = Fake([Reply("tick ", endless=True, delay=0.01)])
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            with anyio.fail_after(10):
                async with aclosing(engine.generate(request())) as chunks:
                    async for chunk in chunks:
                        assert chunk.text
                        break
                await anyio.to_thread.run_sync(fake.left.wait)
    assert fake.disconnects == 1


async def test_cancelling_the_consumer_closes_the_connection() -> None:
    fake = Fake([Reply("tick ", endless=True, delay=0.01)])
    received = 0
    with serve(fake) as url:
        async with RemoteEngine(url, model="m", **FAST) as engine:
            # Cancelled from outside after a few chunks (not after a delay: the first chunk
            # can take long on a loaded machine).
            with anyio.CancelScope() as scope:
                async for _ in engine.generate(request()):
                    received += 1
                    if received == 3:
                        scope.cancel()
            assert scope.cancelled_caught
            with anyio.fail_after(5):
                await anyio.to_thread.run_sync(fake.left.wait)
    assert received > 0
    assert fake.disconnects == 1


# -- replicas --------------------------------------------------------------------------------


class Replicas:
    """MockTransport replicas ``http://r0`` ...: each answers a one-token stream naming
    itself, or refuses connections while it is down."""

    def __init__(self, count: int) -> None:
        self.urls = [f"http://r{i}" for i in range(count)]
        self.down: set[str] = set()
        self.hits: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        root = f"http://{request.url.host}"
        if root in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/health":
            return httpx.Response(200)
        self.hits.append(root)
        events = [
            {"choices": [{"index": 0, "text": root, "finish_reason": None}]},
            {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
        ]
        body = "".join(_data(e) for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    def engine(self) -> RemoteEngine:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handler))
        return RemoteEngine(base_urls=self.urls, model="m", http_client=client, **FAST)


async def served_by(engine: RemoteEngine, request_id: str) -> str:
    return text_of(await collect(engine, request(request_id=request_id)))


async def test_affinity_keeps_each_session_on_its_replica_while_it_is_up() -> None:
    replicas = Replicas(3)
    engine = replicas.engine()
    sessions = [f"run_{i}" for i in range(12)]
    home = {s: await served_by(engine, f"{s}-0") for s in sessions}
    assert len(set(home.values())) > 1  # sessions spread over the replicas
    for turn in (1, 2):
        for s in sessions:
            assert await served_by(engine, f"{s}-{turn}") == home[s]

    lost = home[sessions[0]]
    replicas.down.add(lost)
    moved = {s: await served_by(engine, f"{s}-3") for s in sessions}
    for s in sessions:
        if home[s] == lost:
            assert moved[s] != lost  # failed over
        else:
            assert moved[s] == home[s]  # untouched by another replica's failure
    # The down replica is skipped for the cooldown: no connection attempt per request.
    hits_before = len(replicas.hits)
    assert await served_by(engine, f"{sessions[0]}-4") == moved[sessions[0]]
    assert len(replicas.hits) == hits_before + 1

    replicas.down.clear()
    assert await engine.health() == dict.fromkeys(replicas.urls, True)
    for s in sessions:  # back home once the replica is healthy again
        assert await served_by(engine, f"{s}-5") == home[s]
    await engine.aclose()


async def test_an_explicit_session_id_wins_over_the_request_id() -> None:
    replicas = Replicas(4)
    engine = replicas.engine()
    served = set()
    for i in range(8):
        req = request(request_id=f"other_{i}-0", extra={"session_id": "fixed"})
        served.add(text_of(await collect(engine, req)))
    assert len(served) == 1
    await engine.aclose()


async def test_health_reports_each_replica_and_start_needs_one_healthy() -> None:
    replicas = Replicas(2)
    engine = replicas.engine()
    replicas.down.add("http://r1")
    assert await engine.health() == {"http://r0": True, "http://r1": False}
    await engine.start()
    replicas.down.add("http://r0")
    with pytest.raises(EngineError, match="http://r0, http://r1"):
        await engine.start()
    await engine.aclose()


def test_rendezvous_ranking_is_stable_and_moves_only_the_lost_replicas_sessions() -> None:
    now = [0.0]
    full = ReplicaSet(["http://a", "http://b", "http://c"], cooldown=5, clock=lambda: now[0])
    first = {k: full.ranked(k)[0].url for k in map(str, range(100))}
    full.mark_down(full.replicas[1])
    for key, url in first.items():
        top = full.ranked(key)[0].url
        assert top == url if url != "http://b" else top != "http://b"
    now[0] = 6.0  # cooldown over: ranked first again
    assert {k: full.ranked(k)[0].url for k in first} == first


# -- the agent, end to end -------------------------------------------------------------------


def qwen_call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_an_agent_runs_end_to_end_over_the_remote_engine() -> None:
    calling = "<think>look it up</think>" + qwen_call("lookup", key="x")
    fake = Fake([Reply(calling), Reply("The value is 42.")])

    @agentkit.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return "42"

    with serve(fake) as url:
        async with RemoteEngine(url, model="m", tokenizer=TOKENIZER, **FAST) as engine:
            agent = agentkit.Agent(engine=engine, tools=[lookup], profile="qwen3")
            with anyio.fail_after(20):
                result = await agent.run("What is x?")
    assert result.output_text == "The value is 42."
    first, second = (body["prompt"] for body in fake.bodies)
    assert isinstance(first, list)
    assert isinstance(second, list)
    # Exact replay: turn 2's prompt is turn 1's prompt, then the model's own tokens.
    output = TOKENIZER.encode(calling + STOP)
    assert second[: len(first) + len(output)] == first + output
    request_ids = [h["x-request-id"] for h in fake.headers]
    assert len(set(request_ids)) == 2
    assert all(r.startswith(f"{result.run_id}-") for r in request_ids)
