"""``agentkit serve`` as a real process for the tests that need one (signals, ``--agent``
imports): started on a free port, waited for until ``/health`` answers, killed at the end."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

__all__ = ["agentkit_serve"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(process: subprocess.Popen[bytes], port: int) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return True
        time.sleep(0.1)
    return False


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


@contextlib.contextmanager
def agentkit_serve(
    tmp_path: Path, *options: str, env: Mapping[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``agentkit serve`` with ``options`` on a free port (its cache in ``tmp_path``, its
    output in ``tmp_path/server.log``), until the block ends: the process, port and log."""
    log = tmp_path / "server.log"
    environment = {**os.environ, "AGENTKIT_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    process: subprocess.Popen[bytes] | None = None
    for _attempt in range(3):  # another process may take the free port first
        port = _free_port()
        command = [sys.executable, "-m", "agentkit.cli", "serve", *options, f"--port={port}"]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command,
                env=environment,
                cwd=tmp_path,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if _ready(process, port):
            break
        _kill(process)
    else:
        pytest.fail(f"agentkit serve {' '.join(options)} did not start:\n{log.read_text()}")
    assert process is not None
    try:
        yield process, port, log
    finally:
        _kill(process)
