"""What the engine benchmark runs vLLM with, the OpenAI-compatible server it starts, and how
it counts the CPU of processes other than its own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import Stopwatch

__all__ = [
    "ENGINE_ARGS",
    "SERVED_NAME",
    "SERVER_FLAGS",
    "VLLM_ENV",
    "Watch",
    "child_processes",
    "cpu_of",
    "vllm_server",
]

VLLM_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}
"""vLLM on this CPU (DESIGN.md, "Testing without a GPU"), for the in-process engine and the
server alike. One OpenMP thread: with two, on two cores shared with other work, a decoding
step now and then waits at a barrier for a descheduled thread, and the same 90-token request
takes 0.5 s or 8 s."""
ENGINE_ARGS: dict[str, Any] = {
    "distributed_executor_backend": "uni",
    "enforce_eager": True,
    "max_model_len": 2048,
    "dtype": "float32",
    # Stats on (vLLM's default, and the server's): (a) reads each request's timestamps from
    # them, and every side pays for them alike.
    "disable_log_stats": False,
}
SERVER_FLAGS = [
    "--distributed-executor-backend",
    ENGINE_ARGS["distributed_executor_backend"],
    "--enforce-eager",
    "--max-model-len",
    str(ENGINE_ARGS["max_model_len"]),
    "--dtype",
    ENGINE_ARGS["dtype"],
    "--enable-prefix-caching",  # VLLMEngine's default
    "--enable-prompt-tokens-details",  # cached prompt tokens in `usage`
    "--disable-uvicorn-access-log",
]
"""``ENGINE_ARGS`` as ``vllm serve`` flags."""
SERVED_NAME = "tiny"


class Watch(Stopwatch):
    """:class:`Stopwatch`, plus the CPU seconds of other processes (the engine core, the
    server's processes) over the same block."""

    other_cpu: float = 0.0

    def __init__(self, others: Sequence[Any] = ()) -> None:
        self._others = list(others)

    def __enter__(self) -> Watch:
        self._other_start = cpu_of(self._others)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.other_cpu = cpu_of(self._others) - self._other_start


def cpu_of(processes: Sequence[Any]) -> float:
    """User + system CPU seconds of ``psutil.Process`` objects (0 for one that is gone)."""
    import psutil

    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def child_processes() -> list[Any]:
    """This process's children (with an in-process engine: its engine-core process)."""
    import psutil

    return list(psutil.Process().children(recursive=True))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.asynccontextmanager
async def vllm_server(
    model: Path, log: Callable[[str], None], start_timeout: float
) -> AsyncIterator[tuple[str, float, list[Any]]]:
    """``python -m vllm.entrypoints.openai.api_server`` on a free port of 127.0.0.1 (``vllm
    serve`` itself fails with vllm-cpu: its distribution is named ``vllm_cpu``); yields the
    base URL, the seconds it took to become healthy and its processes (``psutil``). Always
    stopped: SIGTERM, then SIGKILL to its process group after 30 s. Its log goes to a
    temporary file, removed unless something failed."""
    import httpx
    import psutil

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *SERVER_FLAGS,
    ]
    handle, name = tempfile.mkstemp(prefix="agentkit-bench-vllm-serve-", suffix=".log")
    logfile = Path(name)
    log(f"server: starting on {base} (log: {logfile})")
    started = time.perf_counter()
    clean = False
    with os.fdopen(handle, "wb") as output:
        process = await anyio.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            # INFO in the log file: what to read when it fails to start.
            env={**os.environ, **VLLM_ENV, "VLLM_LOGGING_LEVEL": "INFO"},
            start_new_session=True,
        )
    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            with anyio.fail_after(start_timeout):
                while True:
                    if process.returncode is not None:
                        raise RuntimeError(
                            f"the server exited with {process.returncode}:\n{_tail(logfile)}"
                        )
                    with contextlib.suppress(httpx.HTTPError):
                        if (await http.get(f"{base}/health")).status_code == 200:
                            break
                    await anyio.sleep(0.5)
        ready = time.perf_counter() - started
        log(f"server: healthy after {ready:.1f} s")
        leader = psutil.Process(process.pid)
        yield base, ready, [leader, *leader.children(recursive=True)]
    except TimeoutError as exc:
        raise RuntimeError(
            f"the server was not healthy after {start_timeout} s:\n{_tail(logfile)}"
        ) from exc
    except BaseException:
        log(f"server: its log is kept in {logfile}")
        raise
    else:
        clean = True
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
        log("server: stopped")
    if clean:
        await anyio.Path(logfile).unlink(missing_ok=True)


async def _stop(process: Any) -> None:
    group = process.pid  # start_new_session: the server leads its own process group
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(30):
            await process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)  # the server, if stuck, and any child it left
    await process.wait()
