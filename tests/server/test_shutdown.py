"""SIGTERM on a real ``agentkit serve``: a drain with a bound (``--shutdown-timeout``).

The server stops accepting connections, lets the turns in flight finish for up to the bound,
then aborts the rest: each one's engine request is aborted, a stream ends with its API's
error event (never as if it were finished) and a request whose headers are not sent yet is
answered 503 in its API's error shape; the process then exits.

The model is a fake OpenAI-compatible replica in this process, behind ``--remote``, so the
test decides when each generation goes on: one stream is held until the server is draining
and then finishes, one stream and one non-streaming request never finish on their own, and
the replica sees which of its requests were closed early (the engine's abort).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest
from _harness import eventually, running
from _process import agentkit_serve
from _serving import API_NAMES, HEADERS, KEY, MODEL, PATHS, body, json_data, sse_events
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

BOUND = 3
"""``--shutdown-timeout``: the held stream finishes well within it, the others never would."""
EXIT_WITHIN = 60
"""A generous limit on the process's exit after SIGTERM (the bound plus a few seconds)."""


@dataclass
class Replica:
    """A fake model server: each request streams three tokens, then waits. A prompt asking
    to ``finish`` goes on once :attr:`release` is set; any other waits until its client (the
    agentkit server's engine) closes the request, which :attr:`closed` records."""

    release: threading.Event = field(default_factory=threading.Event)
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            prompt = (await request.json())["prompt"]
            kind = next(k for k in ("finish", "hold", "wait") if f"please {k}" in str(prompt))
            self.started.append(kind)
            return StreamingResponse(self._stream(kind), media_type="text/event-stream")

        async def health(request: Request) -> Response:
            return Response(status_code=200)

        async def models(request: Request) -> Response:
            return JSONResponse({"object": "list", "data": []})

        return Starlette(
            routes=[
                Route("/v1/completions", completions, methods=["POST"]),
                Route("/v1/models", models),
                Route("/health", health),
            ]
        )

    async def _stream(self, kind: str) -> AsyncIterator[str]:
        done = False
        try:
            for word in ("Hello", " there", ","):
                yield _choice(word, None)
            # A threading.Event (the test sets it from its thread): looked at, not awaited.
            while kind != "finish" or not self.release.is_set():  # noqa: ASYNC110
                await anyio.sleep(0.02)
            for word in (" all", " done."):
                yield _choice(word, None)
            yield _choice("", "stop")
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
            done = True
        finally:
            (self.finished if done else self.closed).append(kind)


def _choice(text: str, finish_reason: str | None) -> str:
    choice = {"index": 0, "text": text, "finish_reason": finish_reason}
    return f"data: {json.dumps({'choices': [choice]})}\n\n"


@contextlib.contextmanager
def serve(tmp_path: Path, *engine: str) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``agentkit serve`` on a free port with ``engine``'s options, until the block ends."""
    options = [
        *engine,
        "--profile=qwen3",
        f"--api-key={KEY}",
        f"--served-model-name={MODEL}",
        f"--shutdown-timeout={BOUND}",
    ]
    with agentkit_serve(tmp_path, *options) as served:
        yield served


def _scripted(tmp_path: Path, output: str) -> tuple[str, str]:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": output}) + "\n", encoding="utf-8")
    return "--engine=scripted", f"--script={script}"


def _refused(port: int) -> bool:
    """Whether the server has closed its listening socket (it is shutting down)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def _stream(url: str, api: str, text: str) -> bytes:
    """A streaming request's whole body (an error if the body is cut off)."""
    with (
        httpx.Client(base_url=url, headers=HEADERS, timeout=EXIT_WITHIN) as http,
        http.stream("POST", PATHS[api], json=body(api, stream=True, text=text)) as response,
    ):
        assert response.status_code == 200
        return response.read()


def _plain(url: str, api: str, text: str) -> httpx.Response:
    with httpx.Client(base_url=url, headers=HEADERS, timeout=EXIT_WITHIN) as http:
        return http.post(PATHS[api], json=body(api, stream=False, text=text))


def _finished(api: str, raw: bytes) -> bool:
    """Whether a stream ended as complete in ``api``'s terms, with no error."""
    events = sse_events(raw)
    if api == "anthropic":
        return events[-1][0] == "message_stop" and all(e[0] != "error" for e in events)
    if api == "chat":
        chunks = [json_data(e) for e in events[:-1]]
        return (
            events[-1][1] == "[DONE]"
            and not any("error" in c for c in chunks)
            and chunks[-1]["choices"][0]["finish_reason"] == "stop"
        )
    return json_data(events[-1])["type"] == "response.completed"


def _failed_as_overloaded(api: str, raw: bytes) -> bool:
    """Whether a stream ended with ``api``'s error event, saying the server shuts down."""
    events = sse_events(raw)
    if api == "anthropic":
        last = json_data(events[-1])
        return events[-1][0] == "error" and last["error"]["type"] == "overloaded_error"
    if api == "chat":
        error = json_data(events[-2])["error"]
        return events[-1][1] == "[DONE]" and "shutting down" in error["message"]
    last = json_data(events[-1])
    return last["type"] == "response.failed" and "shutting down" in str(last["response"])


def _refused_body(api: str, response: httpx.Response) -> bool:
    """Whether ``response`` is a 503 in ``api``'s error shape, saying the server shuts down."""
    data = response.json()
    if api == "anthropic":
        error = data["error"] if data.get("type") == "error" else {}
    else:
        error = data.get("error", {})
    return response.status_code == 503 and "shutting down" in error.get("message", "")


@pytest.mark.parametrize("api", API_NAMES)
def test_sigterm_lets_turns_finish_within_the_bound_and_aborts_the_rest(
    tmp_path: Path, api: str
) -> None:
    replica = Replica()
    with (
        running(replica.app()) as upstream,
        serve(tmp_path, f"--remote={upstream}", "--model=fake") as (process, port, log),
        concurrent.futures.ThreadPoolExecutor(3) as clients,
    ):
        url = f"http://127.0.0.1:{port}"
        held = clients.submit(_stream, url, api, "please finish")
        endless = clients.submit(_stream, url, api, "please hold")
        waiting = clients.submit(_plain, url, api, "please wait")
        assert eventually(lambda: len(replica.started) == 3, timeout=30), replica.started

        process.send_signal(signal.SIGTERM)
        # Draining: no new connection is accepted; then the held generation goes on.
        assert eventually(lambda: _refused(port), timeout=30), (
            "the server still accepts connections"
        )
        replica.release.set()

        finished = held.result(timeout=EXIT_WITHIN)
        aborted = endless.result(timeout=EXIT_WITHIN)
        refused = waiting.result(timeout=EXIT_WITHIN)
        try:
            process.wait(timeout=EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"agentkit serve did not exit on SIGTERM:\n{log.read_text()}")
        output = log.read_text()
    assert _finished(api, finished), finished[-600:]
    assert _failed_as_overloaded(api, aborted), aborted[-600:]
    assert _refused_body(api, refused), refused.text
    # The engine requests of the two turns still in flight at the bound were closed.
    assert sorted(replica.closed) == ["hold", "wait"]
    assert replica.finished == ["finish"]
    assert "aborting the turns still in flight" in output
    assert "turns=2" in output


def test_sigterm_with_a_stalled_reader_exits(tmp_path: Path) -> None:
    with serve(tmp_path, *_scripted(tmp_path, "x" * 300_000)) as (process, port, log):
        payload = json.dumps(
            {
                "model": MODEL,
                "max_tokens": 1_000_000,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-api-key: {KEY}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        ).encode()
        with socket.socket() as client:
            # A small receive buffer, then no reading: the server's writes back up at once.
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.connect(("127.0.0.1", port))
            client.sendall(head + payload)
            assert client.recv(4096).startswith(b"HTTP/1.1 200")
            time.sleep(1)  # let generation run into the full buffers
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"agentkit serve did not exit on SIGTERM:\n{log.read_text()}")
        output = log.read_text()
    assert "request aborted" in output
    assert "reason='cancelled'" in output
