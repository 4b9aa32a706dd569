"""A client that leaves stops its generation, streaming or not, in every wire format; the
server counts it (``GET /v1/stats``) and says at WARNING what the abort threw away.

The matrix below leaves at each of the three moments a client can leave (before a stream's
first byte, mid-stream, during a non-streaming request) on each API, and checks what the
departure must leave behind: nothing. The engine request is aborted, the request's slot is
free at once (with ``max_concurrency=1`` the next request is answered, not refused with 429),
and the server holds no asyncio task and no file descriptor more than before the request.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator
from typing import Any, Literal

import anyio
import httpx
import pytest
from _harness import eventually, running
from _serving import API_NAMES, HEADERS, PATHS, Counting, body, build

from agentkit.engine import GenerationChunk, GenerationRequest

LONG = "word " * 4000
"""20,000 tokens (the scripted tokenizer's tokens are characters): minutes at the delay below,
unless the request is aborted."""

Moment = Literal["before-body", "mid-stream", "non-streaming"]
MOMENTS: tuple[Moment, ...] = ("before-body", "mid-stream", "non-streaming")


def stats(url: str) -> dict[str, int]:
    response = httpx.get(url + "/v1/stats", headers=HEADERS)
    assert response.status_code == 200, response.text
    data: dict[str, int] = response.json()
    return data


class Watched(Counting):
    """:class:`Counting`, which also keeps the server's event loop (to list its tasks) and,
    after ``hang_next`` is set, holds the next request before any token until it is aborted:
    a prompt that takes long to prefill, or one queued behind others."""

    def __init__(self, outputs: list[str], **options: Any) -> None:
        super().__init__(outputs, **options)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hang_next = False

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.loop = asyncio.get_running_loop()
        if self.hang_next:
            self.hang_next = False
            try:
                await anyio.sleep(3600)
            finally:
                self.aborted += 1
        async for chunk in super().generate(request):
            yield chunk

    def tasks(self) -> set[asyncio.Task[Any]]:
        """The server loop's tasks now (from the test's thread, asked on the loop)."""
        loop = self.loop
        assert loop is not None, "no request reached the engine yet"

        async def snapshot() -> set[asyncio.Task[Any]]:
            return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

        return asyncio.run_coroutine_threadsafe(snapshot(), loop).result(timeout=10)


def open_descriptors() -> int:
    """This process's open file descriptors: the server runs in a thread of it."""
    return len(os.listdir("/proc/self/fd"))


def leave(url: str, api: str, moment: Moment) -> None:
    """Send a request on ``api`` and leave at ``moment``; the client's socket is closed when
    this returns."""
    # A short read timeout is how a client gives up waiting: its connection then closes.
    timeout = httpx.Timeout(10, read=0.3)
    with httpx.Client(base_url=url, headers=HEADERS, timeout=timeout) as http:
        if moment == "mid-stream":
            with http.stream("POST", PATHS[api], json=body(api, stream=True)) as response:
                assert response.status_code == 200
                next(response.iter_bytes())
            return
        with pytest.raises(httpx.ReadTimeout):
            http.post(PATHS[api], json=body(api, stream=moment == "before-body"))


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("api", API_NAMES)
def test_a_client_that_leaves_leaves_nothing_behind(
    api: str, moment: Moment, caplog: pytest.LogCaptureFixture
) -> None:
    # The request that hangs before its first token takes no output from the script.
    outputs = ["Warm.", "Next."] if moment == "before-body" else ["Warm.", LONG, "Next."]
    engine = Watched(outputs, token_delay=0.005)
    caplog.set_level(logging.INFO, logger="agentkit.server")
    with running(build(engine, max_concurrency=1)) as url:
        # A first request whole, so that whatever the server creates once (threads, the
        # loop's own tasks) exists before the counts are taken.
        with httpx.Client(base_url=url, headers=HEADERS, timeout=10) as http:
            warm = http.post(PATHS[api], json=body(api, stream=False))
            assert warm.status_code == 200, warm.text
        assert eventually(lambda: stats(url)["in_flight"] == 0)
        tasks = engine.tasks()
        descriptors = open_descriptors()
        if moment == "before-body":
            engine.hang_next = True

        leave(url, api, moment)
        assert eventually(lambda: engine.aborted == 1), "the generation went on"

        # At once, with max_concurrency=1: the slot is free, the next request is answered.
        with httpx.Client(base_url=url, headers=HEADERS, timeout=10) as http:
            following = http.post(PATHS[api], json=body(api, stream=False))
        assert following.status_code == 200, following.text
        assert engine.finished == 2
        assert engine.aborted == 1

        assert eventually(lambda: not engine.tasks() - tasks), engine.tasks() - tasks
        assert eventually(lambda: open_descriptors() <= descriptors), (
            f"{open_descriptors()} descriptors open, {descriptors} before the request"
        )
        counted = stats(url)
    assert counted["in_flight"] == 0
    assert (counted["disconnects"], counted["aborted"]) == (1, 1)
    if moment != "before-body":  # tokens were thrown away: a WARNING says how many
        assert counted["aborted_output_tokens"] > 0
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("request aborted" in m and "reason='disconnect'" in m for m in warnings)


def test_a_client_that_waits_gets_its_answer_and_nothing_is_counted() -> None:
    engine = Counting(["Hello there.", "Hello again."])
    with running(build(engine)) as url:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=10) as http:
            plain = http.post(PATHS["anthropic"], json=body("anthropic", stream=False))
            streamed = http.post(PATHS["chat"], json=body("chat", stream=True))
        assert plain.status_code == 200
        assert plain.json()["content"][0]["text"] == "Hello there."
        assert streamed.text.endswith("data: [DONE]\n\n")
        counted = stats(url)
    assert engine.aborted == 0
    assert counted == {
        "in_flight": 0,
        "disconnects": 0,
        "stalled": 0,
        "cancelled": 0,
        "aborted": 0,
        "aborted_output_tokens": 0,
        "stream_failures": 0,
    }


def test_stats_need_the_api_key() -> None:
    with running(build(Counting([]))) as url:
        assert httpx.get(url + "/v1/stats").status_code == 401
