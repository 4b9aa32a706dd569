"""Fixtures: the test MCP server (``_mcp_server.py``) over stdio and over streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_helpers import SERVER, HttpServer, ServerLog

from agentkit.mcp import MCPServer


@pytest.fixture
def log(tmp_path: Path) -> ServerLog:
    return ServerLog(tmp_path / "server.log")


@pytest.fixture
def stdio_server(log: ServerLog) -> Callable[..., MCPServer]:
    """A factory of MCPServer.stdio for the test server (keyword arguments pass through)."""

    def make(**options: Any) -> MCPServer:
        return MCPServer.stdio(sys.executable, [str(SERVER), str(log.path)], **options)

    return make


@pytest.fixture
def http_server(log: ServerLog) -> Iterator[HttpServer]:
    """The test server on streamable HTTP at 127.0.0.1, in its own process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(log.path), "http", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.05)
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", process)
    finally:
        process.kill()
        process.wait()
