"""One agent session on ``VLLMEngine`` in process, then on Dynamo with a real vLLM worker.

Run by ``test_dynamo_vllm.py`` with agentkit's Python under ``unshare -n``:

    unshare -n python tests/e2e/_dynamo_vllm_session.py --model DIR --out result.json

The same tiny model runs in both places with the same settings: in process
(``VLLMEngine``), then as Dynamo's own vLLM worker (``python -m dynamo.vllm``, from
``.dynamo/vllm-venv``) behind a Dynamo frontend with the KV-aware router. Each turn's output
is forced the same way on both (a regex equal to the text, a logit bias on the marker
tokens: ``request.extra``, which ``RemoteEngine(flavor="dynamo")`` sends as Dynamo's
``guided_regex`` and ``logit_bias``), so the two transcripts must agree token for token. It
writes both sessions (transcript, prompt ids, usage), the in-process engine's KV block size,
the listening sockets and interfaces, and the time each step took to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _dynamo_deploy import DYNAMO, SERVED, VLLM_PYTHON, deployment, logs_of
from _dynamo_session import Recorder, command_output, lookup, session_record

import agentkit
from agentkit.engine import GenerationRequest, RemoteEngine, VLLMEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "slow"))
from _tiny_model import MARKERS, forced

ENGINE_ARGS = {
    "distributed_executor_backend": "uni",
    "enforce_eager": True,
    "max_model_len": 2048,
    "dtype": "float32",
}
"""The in-process engine's settings; the Dynamo worker gets the same as flags."""
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
PROMPT = "Dynamo twin: look up a and b."
OUTPUTS = [
    '<think>r0</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"q": "a"}}\n</tool_call>'
    '\n<think>r1</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"q": "b"}}\n'
    "</tool_call>",
    "<think>both found</think>\n\nThe results are result-a and result-b.",
]


async def session(inner: Any, marker_ids: dict[str, int]) -> dict[str, Any]:
    outputs = list(OUTPUTS)

    def force(request: GenerationRequest) -> GenerationRequest:
        """The next output, forced through ``request.extra``."""
        extra = {**request.extra, **forced(outputs.pop(0), marker_ids)}
        return dataclasses.replace(request, extra=extra)

    forcing = Recorder(inner, force)
    # Greedy: the regex admits one text but several tokenizations of it; both engines must
    # pick the same one.
    agent = agentkit.Agent(
        engine=forcing, tools=[lookup], profile="qwen3", temperature=0.0, max_tokens=256
    )
    result = await agent.run(PROMPT)
    return session_record(result, forcing.requests)


async def in_process(model: Path) -> dict[str, Any]:
    async with VLLMEngine(str(model), **ENGINE_ARGS) as engine:
        await engine.start()
        marker_ids = {marker: engine.encode(marker)[0] for marker in MARKERS}
        result = await session(engine, marker_ids)
        result["block_size"] = engine.llm.vllm_config.cache_config.block_size
        result["marker_ids"] = marker_ids
        return result


async def on_dynamo(url: str, model: Path, marker_ids: dict[str, int]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    async with RemoteEngine(url, model=SERVED, tokenizer=tokenizer, flavor="dynamo") as remote:
        await remote.start()
        return await session(remote, marker_ids)


def worker_command(model: Path) -> list[str]:
    flags = [f"--{name.replace('_', '-')}" for name in ENGINE_ARGS]
    values = [str(value) for value in ENGINE_ARGS.values()]
    command = [str(VLLM_PYTHON), "-m", "dynamo.vllm", "--model", str(model)]
    for flag, value in zip(flags, values, strict=True):
        command += [flag] if value == "True" else [flag, value]
    return [
        *command,
        *("--served-model-name", SERVED, "--enable-prefix-caching"),
        *("--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq"),
        *("--namespace", "agentkit"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    import os

    os.environ.update({**VLLM_ENV, "HF_HUB_OFFLINE": "1"})
    out: dict[str, Any] = {"outputs": OUTPUTS}
    started = time.perf_counter()
    out["in_process"] = anyio.run(in_process, args.model)
    out["in_process_s"] = round(time.perf_counter() - started, 1)
    marker_ids = out["in_process"]["marker_ids"]
    with tempfile.TemporaryDirectory(prefix="agentkit-dynamo-vllm-") as tmp:
        work = Path(tmp)
        env = {**VLLM_ENV, "PYTHONPATH": str(DYNAMO / "stub")}
        started = time.perf_counter()
        try:
            workers = {"worker-vllm": worker_command(args.model)}
            with deployment(work, workers, env=env, ready_timeout=300) as url:
                out["ready_s"] = round(time.perf_counter() - started, 1)
                out["listeners"] = command_output(["ss", "-ltnH"])
                out["interfaces"] = command_output(["ip", "-o", "addr"])
                began = time.perf_counter()
                out["dynamo"] = anyio.run(on_dynamo, url, args.model, marker_ids)
                out["session_s"] = round(time.perf_counter() - began, 1)
        except BaseException:
            print(logs_of(work))
            raise
    args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
