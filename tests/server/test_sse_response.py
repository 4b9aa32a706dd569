"""EventStreamResponse: frames in order, what queued up written at once, pings while idle,
and a disconnect closes the producer."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from agentkit.server._sse import EventStreamResponse

pytestmark = pytest.mark.anyio


class _Client:
    """The ASGI side: records what the response sends; ``receive`` blocks until told to
    disconnect."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.disconnect = anyio.Event()
        self.body_sent = anyio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body":
            self.body_sent.set()

    @property
    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


async def test_frames_come_out_in_order_and_the_body_ends() -> None:
    async def frames() -> AsyncGenerator[bytes, None]:
        for i in range(5):
            yield f"data: {i}\n\n".encode()
            await anyio.lowlevel.checkpoint()

    client = _Client()
    response = EventStreamResponse(frames(), ping=lambda: b": ping\n\n", ping_interval=10)
    await response({}, client.receive, client.send)
    assert client.sent[0]["status"] == 200
    assert b"".join(client.bodies) == b"".join(f"data: {i}\n\n".encode() for i in range(5))
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_frames_that_queue_up_while_a_write_waits_go_out_in_one_write() -> None:
    release = anyio.Event()

    async def frames() -> AsyncGenerator[bytes, None]:
        yield b"a"
        await client.body_sent.wait()  # the first write is in progress (and held)
        for frame in (b"b", b"c", b"d"):
            yield frame
        release.set()

    client = _Client()
    original = client.send

    async def slow_send(message: dict[str, Any]) -> None:
        await original(message)
        if message.get("body") == b"a":
            await release.wait()  # a slow client: b, c, d queue up meanwhile

    response = EventStreamResponse(frames(), ping=lambda: b"", ping_interval=10)
    await response({}, client.receive, slow_send)
    assert client.bodies == [b"a", b"bcd", b""]


async def test_a_ping_is_written_while_nothing_comes() -> None:
    go_on = anyio.Event()

    async def frames() -> AsyncGenerator[bytes, None]:
        yield b"first"
        await go_on.wait()
        yield b"last"

    client = _Client()
    pings = 0

    def ping() -> bytes:
        nonlocal pings
        pings += 1
        if pings == 2:
            go_on.set()
        return b": ping\n\n"

    response = EventStreamResponse(frames(), ping=ping, ping_interval=0.01)
    await response({}, client.receive, client.send)
    bodies = client.bodies
    assert bodies[0] == b"first"
    assert bodies[-2:] == [b"last", b""]
    # Two pings at least (the second lets the producer go on; a loaded machine may add one).
    assert len(bodies[1:-2]) >= 2
    assert set(bodies[1:-2]) == {b": ping\n\n"}


async def test_a_disconnect_closes_the_producer_and_runs_the_cleanup() -> None:
    closed = anyio.Event()
    cleaned: list[str] = []

    async def frames() -> AsyncGenerator[bytes, None]:
        try:
            yield b"one"
            await anyio.sleep_forever()
            yield b"never"
        finally:
            closed.set()

    client = _Client()
    disconnected: list[bool] = []

    async def cleanup() -> None:
        cleaned.append("done")

    response = EventStreamResponse(
        frames(),
        ping=lambda: b"",
        ping_interval=10,
        on_disconnect=lambda: disconnected.append(True),
        cleanup=cleanup,
    )
    async with anyio.create_task_group() as group:
        group.start_soon(response, {}, client.receive, client.send)
        await client.body_sent.wait()
        client.disconnect.set()
    assert closed.is_set()
    assert disconnected == [True]
    assert cleaned == ["done"]
    assert b"never" not in b"".join(client.bodies)
