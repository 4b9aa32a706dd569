"""A client that leaves stops its generation, streaming or not, in every wire format; the
server counts it (``GET /v1/stats``) and says at WARNING what the abort threw away."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable

import anyio
import httpx
import pytest
from _harness import running
from _serving import API_NAMES, HEADERS, PATHS, Counting, body, build

from agentkit.engine import GenerationChunk, GenerationRequest

LONG = "word " * 4000
"""20,000 tokens (the scripted tokenizer's tokens are characters): minutes at the delay below,
unless the request is aborted."""


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within a generous deadline (it should at once)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def stats(url: str) -> dict[str, int]:
    response = httpx.get(url + "/v1/stats", headers=HEADERS)
    assert response.status_code == 200, response.text
    data: dict[str, int] = response.json()
    return data


@pytest.mark.parametrize("api", API_NAMES)
def test_a_non_streaming_client_that_leaves_aborts_its_generation(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Counting([LONG], token_delay=0.005)
    caplog.set_level(logging.INFO, logger="agentkit.server")
    with running(build(engine)) as url:
        # The client gives up waiting: its connection closes while the model generates.
        timeout = httpx.Timeout(10, read=0.3)
        http = httpx.Client(base_url=url, headers=HEADERS, timeout=timeout)
        with http, pytest.raises(httpx.ReadTimeout):
            http.post(PATHS[api], json=body(api, stream=False))
        assert eventually(lambda: engine.aborted == 1), "the generation went on"
        assert eventually(lambda: stats(url)["in_flight"] == 0)
        counted = stats(url)
    assert engine.finished == 0
    assert counted["disconnects"] == 1
    assert counted["aborted"] == 1
    assert counted["aborted_output_tokens"] > 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("request aborted" in r.getMessage() for r in warnings)
    assert any("reason='disconnect'" in r.getMessage() for r in warnings)


@pytest.mark.parametrize("api", API_NAMES)
def test_a_streaming_client_that_leaves_is_counted_too(api: str) -> None:
    engine = Counting([LONG], token_delay=0.005)
    with running(build(engine)) as url:
        http = httpx.Client(base_url=url, headers=HEADERS, timeout=10)
        with http, http.stream("POST", PATHS[api], json=body(api, stream=True)) as response:
            assert response.status_code == 200
            next(response.iter_bytes())
        assert eventually(lambda: engine.aborted == 1)
        assert eventually(lambda: stats(url)["aborted"] == 1)
        counted = stats(url)
    assert counted["disconnects"] == 1
    assert counted["in_flight"] == 0


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


class SlowPrefill(Counting):
    """A prompt that takes forever to prefill (or a request queued behind others): no token
    comes until the request is aborted."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        try:
            await anyio.sleep(3600)
        finally:
            self.aborted += 1
        yield GenerationChunk(text="never")  # pragma: no cover - the sleep is cancelled


@pytest.mark.parametrize("api", API_NAMES)
def test_a_streaming_client_that_leaves_before_the_first_token_aborts_it(api: str) -> None:
    engine = SlowPrefill([])
    with running(build(engine)) as url:
        timeout = httpx.Timeout(10, read=0.3)
        http = httpx.Client(base_url=url, headers=HEADERS, timeout=timeout)
        with http, pytest.raises(httpx.ReadTimeout):
            http.post(PATHS[api], json=body(api, stream=True))
        assert eventually(lambda: engine.aborted == 1), "the request waited on"
        assert eventually(lambda: stats(url)["in_flight"] == 0)
        counted = stats(url)
    assert (counted["disconnects"], counted["aborted"]) == (1, 1)
