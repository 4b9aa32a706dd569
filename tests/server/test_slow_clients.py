"""Connections that never finish their request are not held: a real server on 127.0.0.1 with
the protocol ``agentkit serve`` runs (:mod:`agentkit.server._protocol`), raw sockets, bounded
waits. Deadlines are short here; every wait below is bounded by a socket timeout far longer
than the deadline it checks."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import httpx
import pytest
from _harness import running
from _intake import build, valid_body

from agentkit.server._protocol import guarded_protocol
from agentkit.server._serve import ServeOptions, uvicorn_config

HEAD_DEADLINE = 0.5
WAIT = 15.0
"""The longest any socket read below may block (a deadline missed fails, never hangs)."""


@contextmanager
def server(**config: object) -> Iterator[tuple[str, int]]:
    app = build(**config)
    settings = {"http": guarded_protocol(HEAD_DEADLINE), "timeout_keep_alive": 1}
    with running(app, **settings) as url:
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (``TimeoutError`` if it
    keeps it open past ``WAIT``)."""
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not piece:
            return data
        data += piece


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with server() as address, closing(connect(address)) as sock:
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize(
    "head",
    [b"POST /v1/messa", b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Ty"],
)
def test_an_unfinished_head_is_closed(head: bytes) -> None:
    with server() as address, closing(connect(address)) as sock:
        sock.sendall(head)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_trickling_headers_do_not_extend_the_deadline() -> None:
    head = b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 200
    with server() as address, closing(connect(address)) as sock:
        sock.settimeout(0.05)
        closed = False
        for byte in head:  # one byte each 0.05 s: 12 s in all, far past the deadline
            try:
                sock.sendall(bytes([byte]))
                closed = sock.recv(65536) == b"" or closed
            except TimeoutError:
                continue
            except OSError:
                closed = True
            if closed:
                break
        assert closed


def test_a_body_shorter_than_its_content_length_gets_408_and_the_connection_closes() -> None:
    head = (
        b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with server(body_timeout=0.5) as address, closing(connect(address)) as sock:
        sock.sendall(head + b'{"model": ')
        answer = read_until_closed(sock)
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 408 ")
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["type"] == "error"
    assert "did not arrive" in body["error"]["message"]


def test_many_idle_connections_are_all_closed() -> None:
    with server() as address:
        socks = [connect(address) for _ in range(200)]
        try:
            answers = [read_until_closed(sock) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers)


def test_a_slow_body_after_a_prompt_head_is_served() -> None:
    """The head's deadline ends with the head: a body taking longer is the body's deadline's
    business (here long enough)."""
    body = json.dumps(valid_body("/v1/tokenize")).encode()
    head = (
        b"POST /v1/tokenize HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )
    with server(body_timeout=WAIT) as address, closing(connect(address)) as sock:
        sock.sendall(head)
        for i in range(0, len(body), 4):
            sock.sendall(body[i : i + 4])
            time.sleep(HEAD_DEADLINE * 3 / len(body) * 4)  # 1.5 s in all
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_kept_alive_connections_serve_several_requests() -> None:
    with server() as (host, port), httpx.Client(base_url=f"http://{host}:{port}") as http:
        for _ in range(3):
            response = http.post("/v1/tokenize", json=valid_body("/v1/tokenize"))
            assert response.status_code == 200
            time.sleep(HEAD_DEADLINE * 1.5)  # idle between requests: keep-alive, not the head


def test_serve_runs_uvicorn_with_the_deadlines() -> None:
    options = ServeOptions(header_timeout=3.0, keep_alive_timeout=7, shutdown_timeout=9)
    config = uvicorn_config(build(), options, host="127.0.0.1", port=1)
    assert config.timeout_keep_alive == 7
    # The app drains its turns within 9 s (see test_shutdown.py); uvicorn's own deadline is
    # the backstop a few seconds after.
    assert 9 < config.timeout_graceful_shutdown <= 9 + 10
    assert config.http.header_timeout == 3.0
    assert config.ws == "none"


def test_serve_flags_reach_the_options() -> None:
    from agentkit import cli

    args = cli._build_parser().parse_args(
        [
            "serve",
            "--engine=scripted",
            "--script=s.jsonl",
            "--allow-origin=https://a.example",
            "--allow-origin=https://b.example",
            "--allow-host=proxy.internal",
            "--header-timeout=2.5",
            "--body-timeout=30",
            "--keep-alive-timeout=3",
            "--shutdown-timeout=4",
        ]
    )
    assert args.allow_origin == ["https://a.example", "https://b.example"]
    assert args.allow_host == ["proxy.internal"]
    assert (args.header_timeout, args.body_timeout) == (2.5, 30.0)
    assert (args.keep_alive_timeout, args.shutdown_timeout) == (3, 4)
    with pytest.raises(SystemExit):
        cli._build_parser().parse_args(["serve", "--header-timeout=0"])
