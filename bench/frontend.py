"""The front end's cost per token: ``Agent.run`` and ``agent.stream()`` over the bare drain of
the same engine chunks, at 1, 16 and 64 concurrent agents.

The engine is a flood: ``generate`` yields a prebuilt answer (a ``<think>`` block of prose,
then prose) one pseudo-token at a time (``split_pseudo_tokens``: up to four characters with
the whitespace before them), each ``GenerationChunk`` with its text and one token id, then a
final chunk with ``finish_reason`` and usage. It passes through the event loop once per chunk
(``asyncio.sleep(0)``), as a real engine does when it awaits its next output, and does
nothing else: a token costs what an async generator and one pass of the loop cost, so what
agentkit adds is most of what is left to measure.

Four ways to consume it, each with ``C`` concurrent tasks (``asyncio.gather``), every task
streaming ``--tokens`` tokens:

* **bare**: ``async for chunk in engine.generate(request): pass``, the floor;
* **run**: ``await agent.run(prompt)``, events dropped, the loop in the caller's task;
* **stream**: ``async with agent.stream(prompt) as s: async for event in s``, the producer in
  the context's task group, events through the one-consumer channel;
* **detached**: plain ``async for event in agent.stream(prompt)``, the producer in a detached
  task (``agentkit/_detached.py``).

The agent is ``Agent(engine, profile="qwen3")`` with no tools, so its parser splits reasoning
from text as it does for a real Qwen3. Each round times every mode once, in a rotated order
(so that load drift on a shared machine falls on all modes alike), a full collection before
each. Reported per concurrency: the median over rounds of each mode's µs per token (wall and
CPU: the total time / (C x tokens)), and of its overhead over the bare drain *in the same
round* (the paired difference), with run's overhead beside the stream's.

Run: ``python bench/frontend.py`` (``--quick``: fewer tokens and rounds; ``--rounds N``;
``--tokens N``; ``--concurrency 1,16,64``; ``--json [PATH]``). Needs only agentkit.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import Stopwatch, machine_info

from agentkit import Agent
from agentkit.engine import GenerationChunk, GenerationRequest, Usage
from agentkit.engine._scripted import split_pseudo_tokens

MODES = ("bare", "run", "stream", "detached")
CONCURRENCY = (1, 16, 64)
TOKENS = 2000
ROUNDS = 9
QUICK_TOKENS = 500
QUICK_ROUNDS = 3
PROMPT = "Explain how a streaming parser keeps its state between deltas."

_PROSE = (
    "A streaming parser reads each delta once and keeps a small state between them, so that "
    "a marker cut across two deltas is still found. It never scans the whole output again: "
    "the cost of a token is the cost of the few characters it adds. When the closing tag of "
    "a call arrives, the call is complete and its tool can start while the model goes on "
    "writing; the results come back in the order the calls were made, whatever order they "
    "finish in, and the next turn replays every block exactly as the model wrote it. "
)


def answer_text(tokens: int) -> list[str]:
    """About ``tokens`` pseudo-token pieces of a Qwen3 answer: half reasoning, half text."""
    words = split_pseudo_tokens(_PROSE)
    half = max(1, (tokens - 5) // 2)
    reasoning = [words[i % len(words)] for i in range(half)]
    text = [words[i % len(words)] for i in range(half, 2 * half)]
    return ["<think>", "\n", *reasoning, "\n", "</think>", "\n\n", *text]


class FloodEngine:
    """An engine that streams the same answer as fast as the event loop allows."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.chunks = [
            GenerationChunk(text=piece, token_ids=[1000 + i]) for i, piece in enumerate(pieces)
        ]
        self.final = GenerationChunk(
            text="",
            finish_reason="stop",
            usage=Usage(prompt_tokens=32, output_tokens=len(self.chunks)),
        )

    @property
    def tokens(self) -> int:
        return len(self.chunks)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        for chunk in self.chunks:
            await asyncio.sleep(0)  # one pass of the event loop, as a real engine's await
            yield chunk
        yield self.final


def _request() -> GenerationRequest:
    return GenerationRequest(prompt=PROMPT, max_tokens=None, temperature=None, stop=())


async def bare(engine: FloodEngine, agent: Agent[Any]) -> int:
    async for _ in engine.generate(_request()):
        pass
    return 0


async def run(engine: FloodEngine, agent: Agent[Any]) -> int:
    result = await agent.run(PROMPT)
    return len(result.output_text)


async def stream(engine: FloodEngine, agent: Agent[Any]) -> int:
    events = 0
    async with agent.stream(PROMPT) as s:
        async for _ in s:
            events += 1
    return events


async def detached(engine: FloodEngine, agent: Agent[Any]) -> int:
    events = 0
    async for _ in agent.stream(PROMPT):
        events += 1
    return events


CONSUMERS: dict[str, Callable[[FloodEngine, Agent[Any]], Awaitable[int]]] = {
    "bare": bare,
    "run": run,
    "stream": stream,
    "detached": detached,
}


@dataclass
class Row:
    """One concurrency: every round's µs per token for each mode (wall and CPU)."""

    concurrency: int
    tokens: int
    wall_us: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    cpu_us: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})

    def median(self, mode: str, cpu: bool = False) -> float:
        return statistics.median((self.cpu_us if cpu else self.wall_us)[mode])

    def overhead(self, mode: str, cpu: bool = False) -> float:
        """Median over rounds of (mode - bare) in the same round, µs per token."""
        samples = self.cpu_us if cpu else self.wall_us
        return statistics.median(m - b for m, b in zip(samples[mode], samples["bare"], strict=True))


async def time_mode(
    mode: str, engine: FloodEngine, agent: Agent[Any], concurrency: int
) -> Stopwatch:
    consume = CONSUMERS[mode]
    gc.collect()
    with Stopwatch() as watch:
        await asyncio.gather(*(consume(engine, agent) for _ in range(concurrency)))
    return watch


def check(engine: FloodEngine, agent: Agent[Any], result: Any) -> None:
    """The agent parsed the flood as the model's answer: reasoning apart, the rest as text
    (otherwise the figures would time some other path)."""
    pieces = [c.text for c in engine.chunks]
    end = pieces.index("</think>")
    reasoning = "".join(pieces[2 : end - 1])
    text = "".join(pieces[end + 2 :])
    message = result.transcript.messages[-1]
    kinds = [block.type for block in message.content]
    if result.output_text.strip() != text.strip() or kinds != ["reasoning", "text"]:
        raise RuntimeError(f"the qwen3 parser did not split the flood as expected: {kinds}")
    if message.content[0].text.strip() != reasoning.strip():
        raise RuntimeError("the reasoning block differs from the flood's reasoning")


async def measure(
    concurrencies: Sequence[int], tokens: int, rounds: int, log: Callable[[str], None]
) -> list[Row]:
    engine = FloodEngine(answer_text(tokens))
    agent: Agent[Any] = Agent(engine, profile="qwen3")
    check(engine, agent, await agent.run(PROMPT))
    # Warm-up: imports, the profile's template, the parser's first compilation.
    for mode in MODES:
        await time_mode(mode, engine, agent, 2)
    per_task = engine.tokens
    rows: list[Row] = []
    for concurrency in concurrencies:
        row = Row(concurrency=concurrency, tokens=per_task)
        total = concurrency * per_task
        for r in range(rounds):
            order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
            for mode in order:
                watch = await time_mode(mode, engine, agent, concurrency)
                row.wall_us[mode].append(watch.wall / total * 1e6)
                row.cpu_us[mode].append(watch.cpu / total * 1e6)
        log(
            f"{concurrency} concurrent: run +{row.overhead('run'):.1f}, "
            f"stream +{row.overhead('stream'):.1f}, detached +{row.overhead('detached'):.1f} "
            "µs/token over bare"
        )
        rows.append(row)
    return rows


def render_markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| concurrent | tokens each | bare µs/token | run | stream | detached "
        "| run over bare | stream over bare | detached over bare | stream - run |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        run_o, stream_o, det_o = (r.overhead(m) for m in ("run", "stream", "detached"))
        lines.append(
            f"| {r.concurrency} | {r.tokens} | {r.median('bare'):.1f} | {r.median('run'):.1f} "
            f"| {r.median('stream'):.1f} | {r.median('detached'):.1f} | **{run_o:.1f}** "
            f"| **{stream_o:.1f}** | **{det_o:.1f}** | {stream_o - run_o:.1f} |"
        )
    lines += [
        "",
        "CPU time (same rounds): overhead over bare, µs/token",
        "",
        "| concurrent | run | stream | detached |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.concurrency} | {r.overhead('run', True):.1f} "
            f"| {r.overhead('stream', True):.1f} | {r.overhead('detached', True):.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer tokens and rounds")
    parser.add_argument("--rounds", type=int, help=f"interleaved rounds (default {ROUNDS})")
    parser.add_argument("--tokens", type=int, help=f"tokens per agent (default {TOKENS})")
    parser.add_argument(
        "--concurrency",
        default=",".join(map(str, CONCURRENCY)),
        help="comma-separated numbers of concurrent agents",
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="write JSON results (default stdout)"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    tokens = args.tokens or (QUICK_TOKENS if args.quick else TOKENS)
    concurrencies = [int(c) for c in args.concurrency.split(",")]

    began = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", file=sys.stderr, flush=True)

    rows = asyncio.run(measure(concurrencies, tokens, rounds, log))
    info = machine_info("agentkit", "anyio", "pydantic")
    if args.json is not None:
        payload = {
            "machine": info,
            "rounds": rounds,
            "rows": [
                asdict(r)
                | {
                    "overhead_us": {m: r.overhead(m) for m in MODES[1:]},
                    "overhead_cpu_us": {m: r.overhead(m, True) for m in MODES[1:]},
                }
                for r in rows
            ],
        }
        text = json.dumps(payload, indent=2, ensure_ascii=False)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if args.json != "-":
        packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}; {packages}")
        print(f"{rounds} interleaved rounds; medians over rounds, µs per token\n")
        print(render_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
