"""SIGTERM stops a real ``agentkit serve`` within its shutdown timeout even while a client has
stopped reading a stream: the stream is cancelled, its request aborted and counted (a
WARNING names the tokens thrown away), and the process exits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _serving import KEY, MODEL


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serve(tmp_path: Path, output: str) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": output}) + "\n", encoding="utf-8")
    log = tmp_path / "server.log"
    process: subprocess.Popen[bytes] | None = None
    for _attempt in range(3):  # another process may take the free port first
        port = _free_port()
        command = [
            sys.executable,
            "-m",
            "agentkit.cli",
            "serve",
            "--engine=scripted",
            f"--script={script}",
            "--profile=qwen3",
            f"--port={port}",
            f"--api-key={KEY}",
            f"--served-model-name={MODEL}",
            "--shutdown-timeout=1",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command,
                env={**os.environ, "AGENTKIT_CACHE_DIR": str(tmp_path / "cache")},
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if _ready(process, port):
            break
        _kill(process)
    else:
        pytest.fail(f"agentkit serve did not start:\n{log.read_text()}")
    assert process is not None
    try:
        yield process, port, log
    finally:
        _kill(process)


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


def test_sigterm_with_a_stalled_reader_exits(tmp_path: Path) -> None:
    with serve(tmp_path, "x" * 300_000) as (process, port, log):
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
