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
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
from _dynamo_deploy import SERVED, deployment, logs_of, script_workers

import agentkit
from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    RemoteEngine,
    TokenizedScriptedEngine,
)

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
    """Passes requests to ``inner`` and keeps them (their prompt ids), each first rewritten
    by ``rewrite`` when given."""

    def __init__(
        self,
        inner: Any,
        rewrite: Callable[[GenerationRequest], GenerationRequest] | None = None,
    ) -> None:
        self.inner = inner
        self.rewrite = rewrite
        self.requests: list[GenerationRequest] = []
        self.encode = inner.encode
        self.decode = inner.decode
        self.control_tokens = inner.control_tokens

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        if self.rewrite is not None:
            request = self.rewrite(request)
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
    return session_record(result, recorder.requests)


def session_record(
    result: agentkit.RunResult[Any], requests: Sequence[GenerationRequest]
) -> dict[str, Any]:
    """What the tests compare of one session: its transcript (without the random call ids),
    each turn's usage, each request's prompt ids and session id."""
    return {
        "run_id": result.run_id,
        "session_ids": sorted({str(r.session_id) for r in requests}),
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
        "prompt_ids": [list(r.prompt_token_ids or []) for r in requests],
    }


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
            with deployment(work, script_workers(args.model, script, log)) as url:
                out["ready_s"] = round(time.perf_counter() - started, 2)
                out["listeners_before"] = command_output(["ss", "-ltnH"])
                began = time.perf_counter()
                out["dynamo"] = anyio.run(run_sessions, url, tokenizer)
                out["sessions_s"] = round(time.perf_counter() - began, 2)
                out["listeners_after"] = command_output(["ss", "-ltnH"])
                out["interfaces"] = command_output(["ip", "-o", "addr"])
        except BaseException:
            print(logs_of(work))
            raise
        out["worker_requests"] = [
            json.loads(line) for line in log.read_text().splitlines() if line.strip()
        ]
    args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
