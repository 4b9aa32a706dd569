"""Run a Dynamo deployment and agent sessions on it, inside a private network namespace.

The Dynamo end-to-end test runs this with agentkit's Python under ``unshare -n``:

    unshare -n python tests/e2e/_dynamo_session.py --model DIR --out result.json

It brings up the namespace's loopback (the only interface there), starts a Dynamo frontend
(KV-aware router, session affinity, file discovery: no etcd, no NATS) and two workers
(``_dynamo_worker.py``, with the Python of ``.dynamo/venv``), runs the same scripted,
tool-using agent sessions through ``RemoteEngine(flavor="dynamo")`` and on an in-process
``TokenizedScriptedEngine``, and writes what the test checks to ``--out``: both transcripts,
each turn's usage and prompt ids, what each worker received, the listening sockets and the
interfaces (``ss -ltnH``, ``ip -o addr``) while the deployment ran, and how long each step
took. Dynamo's ZMQ sockets bind 0.0.0.0 whatever they are told; in this namespace that is
loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

import agentkit
from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    RemoteEngine,
    TokenizedScriptedEngine,
)

ROOT = Path(__file__).resolve().parents[2]
DYNAMO_PYTHON = ROOT / ".dynamo" / "venv" / "bin" / "python"
WORKER = Path(__file__).with_name("_dynamo_worker.py")
SERVED = "tiny"

SCRIPT = [
    '<think>first a</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"q": "a"}}\n'
    "</tool_call>",
    '<think>now b</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"q": "b"}}\n'
    "</tool_call>",
    "<think>both found</think>\n\nThe results are result-a and result-b.",
]
"""The model's output, turn by turn, in every session (Qwen3's markup)."""
PROMPTS = ["Session one: look up a, then b.", "Session two: look up a, then b, please."]
PRIORITY = 2
EXPECTED_OUTPUT_TOKENS = 64


class Recorder:
    """Passes requests to ``inner`` and keeps them (their prompt ids)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[GenerationRequest] = []
        self.encode = inner.encode
        self.decode = inner.decode
        self.control_tokens = inner.control_tokens

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        async with aclosing(self.inner.generate(request)) as chunks:
            async for chunk in chunks:
                yield chunk


@agentkit.tool
async def lookup(q: str) -> str:
    """Look q up."""
    return f"result-{q}"


async def session(engine: Any, prompt: str) -> dict[str, Any]:
    recorder = Recorder(engine)
    agent = agentkit.Agent(
        engine=recorder,
        tools=[lookup],
        profile="qwen3",
        temperature=0.0,
        max_tokens=256,
        hints=agentkit.AgentHints(priority=PRIORITY),
        # Hints beyond priority reach RemoteEngine through the request's options.
        request_options={"agent_hints": {"expected_output_tokens": EXPECTED_OUTPUT_TOKENS}},
    )
    result = await agent.run(prompt)
    return {
        "run_id": result.run_id,
        "output_text": result.output_text,
        "transcript": [
            {
                "role": message.role,
                "blocks": [
                    b.model_dump(mode="json", exclude={"id", "call_id"}) for b in message.content
                ],
                "raw": message.raw,
                "token_ids": message.token_ids,
            }
            for message in result.transcript.messages
        ],
        "turns": [turn.model_dump(mode="json") for turn in result.usage.turns],
        "prompt_ids": [list(r.prompt_token_ids or []) for r in recorder.requests],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def deployment(
    model: Path,
    work: Path,
    script: Path,
    log: Path,
    *,
    frontend_args: Sequence[str] = (),
    worker_args: Sequence[str] = (),
) -> Iterator[str]:
    """Frontend + two workers; yields the frontend's URL once both workers serve the model.
    ``frontend_args`` and ``worker_args`` add to their command lines."""
    env = {
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
    }
    port = free_port()
    commands = {
        f"worker-{name}": [
            str(DYNAMO_PYTHON),
            str(WORKER),
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
            *worker_args,
        ]
        for name in ("A", "B")
    }
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
        "agentkit",
        *frontend_args,
    ]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: (work / f"{name}.log").open("wb") for name in commands}
    try:
        for name, command in commands.items():
            processes[name] = subprocess.Popen(
                command, env=env, stdout=logs[name], stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, work / "discovery", processes, work)
        yield url
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for file in logs.values():
            file.close()


def wait_ready(
    url: str, discovery: Path, processes: dict[str, subprocess.Popen[bytes]], work: Path
) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                tail = (work / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")
        instances = list((discovery / "v1" / "instances").glob("agentkit*generate*"))
        try:
            listed = httpx.get(f"{url}/v1/models", timeout=2).json().get("data", [])
        except (httpx.HTTPError, ValueError):
            listed = []
        if len(instances) >= 2 and any(m.get("id") == SERVED for m in listed):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the deployment was not ready within 120 s (see {work})")


def command_output(command: Sequence[str]) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


async def run_sessions(url: str | None, tokenizer: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{} for _ in PROMPTS]

    async def one(index: int, engine: Any) -> None:
        results[index] = await session(engine, PROMPTS[index])

    if url is None:  # in process: one scripted engine per session, as one model each
        for index in range(len(PROMPTS)):
            engine = TokenizedScriptedEngine(SCRIPT, stop="<|im_end|>", tokenizer=tokenizer)
            await one(index, engine)
        return results
    async with RemoteEngine(
        url, model=SERVED, tokenizer=tokenizer, flavor="dynamo", speculative_prefill=True
    ) as remote:
        await remote.start()
        async with anyio.create_task_group() as group:  # the sessions run at the same time
            for index in range(len(PROMPTS)):
                group.start_soon(one, index, remote)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    out: dict[str, Any] = {"script": SCRIPT, "prompts": PROMPTS}
    out["in_process"] = anyio.run(run_sessions, None, tokenizer)
    with tempfile.TemporaryDirectory(prefix="agentkit-dynamo-") as tmp:
        work = Path(tmp)
        script, log = work / "script.json", work / "requests.jsonl"
        script.write_text(json.dumps(SCRIPT))
        started = time.perf_counter()
        try:
            with deployment(args.model, work, script, log) as url:
                out["ready_s"] = round(time.perf_counter() - started, 2)
                out["listeners_before"] = command_output(["ss", "-ltnH"])
                began = time.perf_counter()
                out["dynamo"] = anyio.run(run_sessions, url, tokenizer)
                out["sessions_s"] = round(time.perf_counter() - began, 2)
                out["listeners_after"] = command_output(["ss", "-ltnH"])
                out["interfaces"] = command_output(["ip", "-o", "addr"])
        except BaseException:
            for file in sorted(work.glob("*.log")):
                print(f"== {file.name}\n{file.read_text(errors='replace')[-4000:]}")
            raise
        out["worker_requests"] = [
            json.loads(line) for line in log.read_text().splitlines() if line.strip()
        ]
    args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
