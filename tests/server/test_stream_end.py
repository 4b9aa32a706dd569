"""A stream never ends as if it were whole when its frames were cut short.

The response's writer ends the HTTP body when its producer of frames stops. A cancellation
(the server's shutdown, uvicorn's deadline) can reach the producer before the writer, which
then sees an ended producer and ends the body, though the adapter's frames stopped midway
and no error frames were written. ``TurnWatch.stream`` writes the farewell (a retryable
``overloaded_error``) before such an end. The race is a matter of scheduling, so the writer
here is a stand-in that ends the body at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from _serving import MODEL, QWEN3, Counting

from agentkit.server._context import ServerConfig, ServerContext
from agentkit.server._lifecycle import TurnWatch
from agentkit.server._runtime import ServerRuntime, TurnSpec
from agentkit.transcript import Transcript

pytestmark = pytest.mark.anyio


def error_frames(kind: str, message: str) -> bytes:
    return f"event: error\ndata: {kind}: {message}\n\n".encode()


async def frames() -> AsyncGenerator[bytes, None]:
    yield b"data: one\n\n"
    yield b"data: two\n\n"


async def test_a_body_ended_before_its_frames_are_whole_gets_the_farewell_first() -> None:
    engine = Counting(["Hello there."])
    runtime = ServerRuntime(engine, QWEN3)
    context = ServerContext(runtime, ServerConfig(model_name=MODEL))
    transcript = Transcript()
    transcript.add("user", "hi")
    turn = runtime.start(TurnSpec(transcript=transcript), request_id="msg_1")
    context.in_flight += 1

    def release() -> None:
        context.in_flight -= 1

    watch = TurnWatch(context, turn, release)
    stream = watch.stream(frames(), turn.events(), fail=error_frames, ping=lambda: b"")

    async def cut_writer(scope: Any, receive: Any, send: Any) -> None:
        """Ends the body after the first frame, as the writer does once it finds its
        producer stopped by a cancellation that reached it first."""
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    stream.response = cut_writer  # type: ignore[assignment]
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("not read")

    await stream({"type": "http"}, receive, send)
    bodies = [m["body"] for m in sent[1:]]
    farewell = error_frames("overloaded_error", "the server is shutting down; retry the request")
    assert bodies == [b"data: one\n\n", farewell, b""]
    assert sent[-1]["more_body"] is False
    assert context.stats.cancelled == 1
