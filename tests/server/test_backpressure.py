"""A streaming client that reads slowly slows its own generation: what is held for it stays
within the queue's bound, generation waits and resumes, and a client that reads nothing past
the stall deadline is dropped and its request aborted. A request the server cancels (shutting
down) is aborted and counted too.

The app is driven as an ASGI application by a client whose ``send`` blocks, so "reads
nothing" is exact, not left to the sizes of socket buffers.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from _serving import API_NAMES, HEADERS, PATHS, Counting, body, build
from starlette.applications import Starlette

from agentkit.server._frame_queue import FrameQueue

pytestmark = pytest.mark.anyio

QUEUE = 4096
SMALLEST_FRAME = 90
"""No wire format's frame for one token is smaller (Chat's is the smallest)."""
HELD = 2 * (QUEUE // SMALLEST_FRAME) + 64
"""The most tokens a client reading nothing can have generated for it: the queue's worth, a
blocked write's worth, and what the parser holds back."""


class StalledClient:
    """Sends one request; accepts the first write of the response, then reads nothing until
    ``reading`` is set (or leaves when ``leave`` is)."""

    def __init__(self, api: str, *, stream: bool = True, text: str = "hi") -> None:
        self.request = json.dumps(body(api, stream=stream, text=text)).encode()
        self.path = PATHS[api]
        self.sent: list[dict[str, Any]] = []
        self.reading = anyio.Event()
        self.leave = anyio.Event()
        self.blocked = anyio.Event()
        self._requested = False

    def scope(self) -> dict[str, Any]:
        headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
        headers += [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.request)).encode()),
        ]
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
        }

    async def receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": self.request, "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and len(self.bodies) > 1:
            self.blocked.set()
            await self.reading.wait()

    @property
    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]

    @property
    def complete(self) -> bool:
        return bool(self.sent) and self.sent[-1] == {
            "type": "http.response.body",
            "body": b"",
            "more_body": False,
        }

    async def run(self, app: Starlette) -> None:
        await app(self.scope(), self.receive, self.send)  # type: ignore[arg-type]


async def settle(engine: Counting) -> None:
    """Let everything run until the engine has produced nothing more for a good while (in
    passes of the event loop, not time)."""
    quiet, seen = 0, -1
    for _ in range(500_000):
        await anyio.lowlevel.checkpoint()
        if engine.produced == seen:
            quiet += 1
            if quiet >= 2000:
                return
        else:
            quiet, seen = 0, engine.produced


async def stats(app: Starlette) -> dict[str, int]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.get("/v1/stats", headers=HEADERS)
    data: dict[str, int] = response.json()
    return data


@pytest.mark.parametrize("api", API_NAMES)
async def test_a_client_reading_nothing_holds_only_the_queue(api: str) -> None:
    engine = Counting(["x" * 100_000])
    app = build(engine, stream_queue_bytes=QUEUE, stall_timeout=None)
    client = StalledClient(api)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(client.run, app)
            await client.blocked.wait()
            await settle(engine)
            held = engine.produced
            client.leave.set()
    assert held <= HELD, f"{held} tokens generated for a client that read nothing"
    assert engine.aborted == 1
    counted = await stats(app)
    assert counted["disconnects"] == 1
    assert counted["aborted_output_tokens"] == held


@pytest.mark.parametrize("api", API_NAMES)
async def test_generation_waits_for_a_slow_reader_and_resumes(api: str) -> None:
    engine = Counting(["y" * 3000])
    app = build(engine, stream_queue_bytes=QUEUE, stall_timeout=None)
    client = StalledClient(api)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(client.run, app)
            await client.blocked.wait()
            await settle(engine)
            assert engine.produced <= HELD
            client.reading.set()
    assert client.complete
    assert engine.finished == 1
    assert engine.aborted == 0
    assert b"".join(client.bodies).count(b"y") >= 3000


@pytest.mark.parametrize("api", API_NAMES)
async def test_a_reader_stalled_past_the_deadline_is_dropped(api: str) -> None:
    engine = Counting(["z" * 100_000])
    app = build(engine, stream_queue_bytes=QUEUE, stall_timeout=0.2)
    client = StalledClient(api)
    with anyio.fail_after(60):
        await client.run(app)  # returns by itself: the client is dropped
    assert not client.complete  # the body is left unfinished, never ended as if whole
    assert engine.aborted == 1
    counted = await stats(app)
    assert (counted["stalled"], counted["aborted"], counted["in_flight"]) == (1, 1, 0)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_request_the_server_cancels_is_aborted_and_counted(stream: bool) -> None:
    engine = Counting(["w" * 100_000])
    app = build(engine, stream_queue_bytes=QUEUE, stall_timeout=None)
    client = StalledClient("anthropic", stream=stream)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(client.run, app)
            while engine.produced < 10:
                await anyio.lowlevel.checkpoint()
            group.cancel_scope.cancel()  # as uvicorn does when its shutdown grace runs out
    assert engine.aborted == 1
    counted = await stats(app)
    assert (counted["cancelled"], counted["aborted"], counted["in_flight"]) == (1, 1, 0)


async def test_the_frame_queue_makes_the_producer_wait_when_full() -> None:
    queue = FrameQueue(10)
    await queue.put(b"12345")
    await queue.put(b"67890")  # reaches the limit: the next put waits
    assert queue.queued_bytes == 10
    put_done = anyio.Event()

    async def put_more() -> None:
        await queue.put(b"abc")
        put_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(put_more)
        for _ in range(100):
            await anyio.lowlevel.checkpoint()
        assert not put_done.is_set()
        assert queue.drain() == [b"12345", b"67890"]
        await put_done.wait()
    assert queue.queued_bytes == 3
    queue.close()
    assert await queue.receive() == b"abc"
    with pytest.raises(anyio.EndOfStream):
        await queue.receive()


async def test_the_frame_queue_lets_a_waiting_producer_go_when_discarded() -> None:
    queue = FrameQueue(4)
    await queue.put(b"full")
    async with anyio.create_task_group() as group:
        group.start_soon(queue.put, b"dropped")
        await anyio.lowlevel.checkpoint()
        queue.discard()
    assert queue.queued_bytes == 0
    assert queue.drain() == []


@pytest.mark.parametrize(
    ("api", "farewell"),
    [
        ("anthropic", b"overloaded_error"),
        ("chat", b"data: [DONE]"),
        ("responses", b"response.failed"),
    ],
)
async def test_a_stream_the_server_cancels_ends_with_an_error_a_client_can_retry(
    api: str, farewell: bytes
) -> None:
    engine = Counting(["v" * 100_000])
    app = build(engine, stream_queue_bytes=QUEUE, stall_timeout=None)
    client = StalledClient(api)
    client.reading.set()  # a client that reads: it is told why its stream ends
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(client.run, app)
            while engine.produced < 10:
                await anyio.lowlevel.checkpoint()
            group.cancel_scope.cancel()
    last = client.bodies[-1]
    assert farewell in last
    assert b"shutting down" in last
    assert not client.complete
    assert engine.aborted == 1
