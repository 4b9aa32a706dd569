"""Start a Dynamo deployment on loopback: a frontend and its workers, no etcd, no NATS.

Shared by the Dynamo end-to-end drivers and ``bench/dynamo_side_by_side.py``, which run in a
private network namespace (Dynamo's ZMQ sockets bind 0.0.0.0 whatever they are told).
Discovery is a directory of files, the request plane TCP and the event plane ZMQ, all on
127.0.0.1. Each process's output goes to ``<work>/<name>.log``, shown when it fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
DYNAMO = ROOT / ".dynamo"
DYNAMO_PYTHON = DYNAMO / "venv" / "bin" / "python"
VLLM_PYTHON = DYNAMO / "vllm-venv" / "bin" / "python"
"""Dynamo's vLLM worker's Python (``scripts/dynamo_setup.sh --vllm``)."""
SCRIPT_WORKER = Path(__file__).with_name("_dynamo_worker.py")
NAMESPACE = "agentkit"
SERVED = "tiny"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def script_workers(
    model: Path, script: Path, log: Path, names: Sequence[str] = ("A", "B"), *extra: str
) -> dict[str, list[str]]:
    """Command lines of script workers (``_dynamo_worker.py``), one per name."""
    return {
        f"worker-{name}": [
            str(DYNAMO_PYTHON),
            str(SCRIPT_WORKER),
            "--model",
            str(model),
            "--served-model-name",
            SERVED,
            "--name",
            name,
            "--script",
            str(script),
            "--log",
            str(log),
            "--namespace",
            NAMESPACE,
            *extra,
        ]
        for name in names
    }


@contextmanager
def deployment(
    work: Path,
    workers: Mapping[str, Sequence[str]],
    *,
    frontend_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    ready_timeout: float = 120,
) -> Iterator[str]:
    """The frontend (KV-aware router, session affinity) and ``workers`` (name -> command);
    yields the frontend's URL once every worker has registered and the model is listed."""
    environment = {
        **os.environ,
        "DYN_DISCOVERY_BACKEND": "file",
        "DYN_FILE_KV": str(work / "discovery"),
        "DYN_REQUEST_PLANE": "tcp",
        "DYN_EVENT_PLANE": "zmq",
        "DYN_TCP_RPC_HOST": "127.0.0.1",
        "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
        "DYN_EVENT_PLANE_HOST": "127.0.0.1",
        "DYN_LOG": "warn",
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }
    port = free_port()
    commands = {name: list(command) for name, command in workers.items()}
    commands["frontend"] = [
        str(DYNAMO_PYTHON),
        "-m",
        "dynamo.frontend",
        "--http-host",
        "127.0.0.1",
        "--http-port",
        str(port),
        "--router-mode",
        "kv",
        "--router-session-affinity-ttl-secs",
        "600",
        "--namespace",
        NAMESPACE,
        *frontend_args,
    ]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: (work / f"{name}.log").open("wb") for name in commands}
    try:
        for name, command in commands.items():
            processes[name] = subprocess.Popen(
                command, env=environment, stdout=logs[name], stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, work, processes, len(workers), ready_timeout)
        yield url
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for file in logs.values():
            file.close()


def _wait_ready(
    url: str,
    work: Path,
    processes: Mapping[str, subprocess.Popen[bytes]],
    workers: int,
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    instances = work / "discovery" / "v1" / "instances"
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                tail = (work / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")
        registered = list(instances.glob(f"{NAMESPACE}*generate*"))
        try:
            listed = httpx.get(f"{url}/v1/models", timeout=2).json().get("data", [])
        except (httpx.HTTPError, ValueError):
            listed = []
        if len(registered) >= workers and any(m.get("id") == SERVED for m in listed):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the deployment was not ready within {timeout:.0f} s (see {work})")


def logs_of(work: Path) -> str:
    """The end of every process's log, for a failure message."""
    return "\n".join(
        f"== {file.name}\n{file.read_text(errors='replace')[-4000:]}"
        for file in sorted(work.glob("*.log"))
    )
