"""The shutdown's drain inside the app (``ServerConfig.shutdown``), in every wire format,
for the requests whose headers are not sent yet when the bound passes: a stream still waiting
for its first token and a non-streaming request are answered 503 in the API's error shape and
their engine requests aborted; a request that comes once the drain has begun is refused.
``test_shutdown.py`` covers streams under SIGTERM on a real ``agentkit serve``."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncGenerator

import anyio
import httpx
import pytest
from _harness import eventually, running
from _serving import API_NAMES, HEADERS, PATHS, Counting, body, build

from agentkit.engine import GenerationChunk, GenerationRequest
from agentkit.server._shutdown import Shutdown


class Prefilling(Counting):
    """Every request waits before its first token until it is aborted (a long prefill)."""

    def __init__(self) -> None:
        super().__init__([])
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started = 0

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.loop = asyncio.get_running_loop()
        self.started += 1
        try:
            await anyio.sleep(3600)
        finally:
            self.aborted += 1
        yield GenerationChunk(text="never")  # pragma: no cover - the sleep is cancelled


def post(url: str, api: str, *, stream: bool) -> httpx.Response:
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as http:
        return http.post(PATHS[api], json=body(api, stream=stream))


def shutting_down(api: str, response: httpx.Response) -> bool:
    """Whether ``response`` is a 503 in ``api``'s error shape, saying the server shuts down."""
    data = response.json()
    if api == "anthropic":
        assert data["type"] == "error"
        assert data["error"]["type"] == "overloaded_error"
    else:
        assert data["error"]["type"] in ("overloaded_error", "server_error")
    return response.status_code == 503 and "shutting down" in data["error"]["message"]


@pytest.mark.parametrize("api", API_NAMES)
def test_turns_without_headers_sent_at_the_bound_are_answered_503(api: str) -> None:
    engine = Prefilling()
    shutdown = Shutdown(0.2)
    with (
        running(build(engine, shutdown=shutdown)) as url,
        concurrent.futures.ThreadPoolExecutor(2) as clients,
    ):
        streamed = clients.submit(post, url, api, stream=True)
        plain = clients.submit(post, url, api, stream=False)
        assert eventually(lambda: engine.started == 2)
        assert engine.loop is not None
        drained = asyncio.run_coroutine_threadsafe(shutdown.drain(), engine.loop)
        assert drained.result(timeout=20) == 2
        assert shutting_down(api, streamed.result(timeout=20))
        assert shutting_down(api, plain.result(timeout=20))
        late = post(url, api, stream=True)
        counted = httpx.get(url + "/v1/stats", headers=HEADERS).json()
    assert shutting_down(api, late)
    assert engine.started == 2  # the late request never reached the engine
    assert engine.aborted == 2
    assert (counted["cancelled"], counted["aborted"], counted["in_flight"]) == (2, 2, 0)


def test_a_drain_with_nothing_in_flight_ends_at_once_and_refuses_new_turns() -> None:
    shutdown = Shutdown(3600)
    assert anyio.run(shutdown.drain) == 0
    assert shutdown.closing
    with pytest.raises(Exception, match="shutting down") as refused:
        shutdown.admit()
    assert getattr(refused.value, "status", None) == 503


def test_begin_refuses_new_turns_at_once_and_drains_once() -> None:
    async def main() -> None:
        shutdown = Shutdown(3600)
        end = shutdown.admit()
        shutdown.begin()
        shutdown.begin()  # uvicorn asks every open connection: one drain
        with pytest.raises(Exception, match="shutting down"):
            shutdown.admit()
        end()  # the turn in flight ends: the drain is over without waiting for its bound
        with anyio.fail_after(10):
            await shutdown.wait()

    anyio.run(main)
