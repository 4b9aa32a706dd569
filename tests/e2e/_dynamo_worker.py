"""A Dynamo backend worker that streams a fixed token script, with a real prefix cache.

Run by the Dynamo end-to-end test with the Python of ``.dynamo/venv`` (it imports Dynamo,
which agentkit's own environment does not have):

    python tests/e2e/_dynamo_worker.py --model DIR --name NAME --script FILE --log FILE

It registers on Dynamo's backend API (``dynamo.common.backend``) as one worker of the model
in ``DIR`` (its tokenizer and config are what the frontend loads). For each request it:

* answers with the script's output number N, where N is the number of assistant turns
  already in the prompt (``<|im_start|>assistant`` occurrences, less the open one), so the
  answer depends on the conversation alone, never on which worker serves it;
* keeps a prefix cache of 16-token blocks (a hash chain over the token ids, as vLLM's),
  reports the prompt tokens it served from it as ``prompt_tokens_details.cached_tokens``, and
  publishes each stored block to the KV-aware router, which routes on the same blocks;
* appends one JSON line per request to ``--log``: this worker's name, the session id and the
  agent hints the frontend forwarded, the prompt's length and its cached tokens.

What it proves is Dynamo's side of the contract (routing, session affinity, hints, exact
token ids through the frontend), not a model: its output is the script.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import queue
import threading
from collections.abc import AsyncGenerator
from typing import Any

from dynamo.common.backend import EngineConfig, LLMEngine, LlmRegistration, WorkerConfig
from dynamo.common.backend.publisher import KvEventSource, PushSource
from dynamo.common.backend.run import run
from dynamo.common.utils.token_ids import normalize_request_token_ids

BLOCK = 16


def _chain(parent: int | None, tokens: list[int]) -> int:
    """A block's hash: its parent's hash and its own tokens (a signed 64-bit integer)."""
    digest = hashlib.blake2b(f"{parent}:{tokens}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ScriptWorker(LLMEngine):
    def __init__(self, args: argparse.Namespace) -> None:
        from transformers import AutoTokenizer

        self.args = args
        self.tokenizer = AutoTokenizer.from_pretrained(args.model)
        with open(args.script, encoding="utf-8") as file:
            self.outputs: list[str] = json.load(file)
        self.cache: set[int] = set()
        self.events: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    @classmethod
    async def from_args(cls, argv: list[str] | None = None) -> tuple[ScriptWorker, WorkerConfig]:
        parser = argparse.ArgumentParser()
        parser.add_argument("--model", required=True)
        parser.add_argument("--served-model-name", default="tiny")
        parser.add_argument("--name", required=True)
        parser.add_argument("--script", required=True)
        parser.add_argument("--log", required=True)
        parser.add_argument("--namespace", default="agentkit")
        parser.add_argument("--delay", type=float, default=0.0, help="seconds per token")
        parser.add_argument("--tool-call-parser", default=None, help="Dynamo's, e.g. hermes")
        parser.add_argument("--reasoning-parser", default=None, help="Dynamo's, e.g. qwen3")
        args = parser.parse_args(argv)
        config = WorkerConfig(
            namespace=args.namespace,
            component="backend",
            endpoint="generate",
            model_name=args.model,
            served_model_name=args.served_model_name,
            endpoint_types="chat,completions",
            discovery_backend=os.environ.get("DYN_DISCOVERY_BACKEND", "file"),
            request_plane="tcp",
            event_plane="zmq",
            enable_kv_routing=True,
            tool_call_parser=args.tool_call_parser,
            reasoning_parser=args.reasoning_parser,
        )
        return cls(args), config

    async def start(self, worker_id: int) -> EngineConfig:
        return EngineConfig(
            model=self.args.model,
            served_model_name=self.args.served_model_name,
            llm=LlmRegistration(
                context_length=4096,
                kv_cache_block_size=BLOCK,
                total_kv_blocks=4096,
                max_num_seqs=16,
                max_num_batched_tokens=4096,
            ),
        )

    async def kv_event_sources(self) -> list[KvEventSource]:
        return [PushSource(on_ready=self._start_publisher, dp_rank=0)]

    def _start_publisher(self, publisher: Any) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                try:
                    event = self.events.get(timeout=0.1)
                except queue.Empty:
                    continue
                publisher.publish_stored(**event)

        self.thread = threading.Thread(target=loop, daemon=True, name="script-kv-publisher")
        self.thread.start()

    def _cached(self, tokens: list[int]) -> int:
        """Tokens of the prompt's leading full blocks that are in the cache."""
        parent: int | None = None
        hit = 0
        for start in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
            parent = _chain(parent, tokens[start : start + BLOCK])
            if parent not in self.cache:
                break
            hit += BLOCK
        return hit

    def _store(self, tokens: list[int]) -> None:
        parent: int | None = None
        new_tokens: list[int] = []
        new_hashes: list[int] = []
        first_parent: int | None = None
        for start in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
            block = tokens[start : start + BLOCK]
            digest = _chain(parent, block)
            if digest not in self.cache:
                if not new_hashes:
                    first_parent = parent
                self.cache.add(digest)
                new_tokens += block
                new_hashes.append(digest)
            parent = digest
        if new_hashes:
            self.events.put(
                {
                    "token_ids": new_tokens,
                    "num_block_tokens": [BLOCK] * len(new_hashes),
                    "block_hashes": new_hashes,
                    "parent_hash": first_parent,
                }
            )

    def _log(self, record: dict[str, Any]) -> None:
        with open(self.args.log, "a", encoding="utf-8") as file:
            file.write(json.dumps(record, default=str) + "\n")

    async def generate(
        self, request: dict[str, Any], context: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        normalize_request_token_ids(request)
        prompt = list(request["token_ids"])
        text = self.tokenizer.decode(prompt, skip_special_tokens=False)
        turn = text.count("<|im_start|>assistant") - 1
        script = self.outputs[turn] if 0 <= turn < len(self.outputs) else "(no script)"
        output = list(self.tokenizer.encode(script, add_special_tokens=False))
        output.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        limit = (request.get("stop_conditions") or {}).get("max_tokens")
        reason = "stop"
        if isinstance(limit, int) and limit < len(output):
            output, reason = output[:limit], "length"
        cached = self._cached(prompt)
        logprobs = (request.get("output_options") or {}).get("logprobs")
        record = {
            "worker": self.args.name,
            "turn": turn,
            "prompt_tokens": len(prompt),
            "cached_tokens": cached,
            "agent_context": request.get("agent_context"),
            "routing": request.get("routing"),
            "sampling_options": request.get("sampling_options"),
            "stop_conditions": request.get("stop_conditions"),
            "output_options": request.get("output_options"),
            "keys": sorted(request),
        }
        self._log(record)
        for index, token in enumerate(output):
            if context.is_stopped():
                return
            chunk: dict[str, Any] = {"token_ids": [token], "index": 0}
            if logprobs is not None:
                # The script's own choice, certain: Dynamo's frontend renders each token as
                # ``token_id:<id>`` when asked (``return_tokens_as_token_ids``).
                chunk["log_probs"] = [0.0]
                chunk["top_logprobs"] = [[{"rank": 1, "token_id": token, "logprob": 0.0}]]
            if index == len(output) - 1:
                self._store(prompt + output)
                chunk["finish_reason"] = reason
                chunk["completion_usage"] = {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(output),
                    "total_tokens": len(prompt) + len(output),
                    "prompt_tokens_details": {"cached_tokens": cached},
                }
            yield chunk
            await asyncio.sleep(self.args.delay)

    async def cleanup(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=1.0)


if __name__ == "__main__":
    run(ScriptWorker)
