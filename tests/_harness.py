"""A real uvicorn server in a thread on 127.0.0.1, for the tests that talk HTTP (the server's
APIs, the remote engine against fake replicas), and :func:`eventually` for what they wait on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def running(app: Any, **config: Any) -> Iterator[str]:
    """Serve ``app`` on a free port until the block ends; yields its base URL.

    The socket is bound before the server starts, so the port is known (and taken) at once.
    ``config`` adds to or overrides the ``uvicorn.Config`` settings.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # ws="none", as `agentkit serve` runs it: upgrade requests reach the app as HTTP.
    settings: dict[str, Any] = {"log_level": "warning", "lifespan": "off", "ws": "none", **config}
    server = uvicorn.Server(uvicorn.Config(app, **settings))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def eventually(condition: Callable[[], object], *, timeout: float = 20) -> bool:
    """Whether ``condition`` holds within a generous deadline (it should at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())
