"""Side queries: six suffixes on the transcript's cached prompt against six independent
requests that each prefill the whole prompt, at ~1K and ~4K prompt tokens, in one run.

Real vLLM on the CPU with the slow suite's tiny random model (``VLLMEngine``, prefix caching
on, ``max_model_len`` 4,096), every answer forced (a regex equal to the wanted JSON, greedy).

For each repeat and size, a fresh transcript (a nonce at its start, so nothing of an earlier
repeat is cached) gets one untimed main turn, which prefills and caches its prompt, as a chat
product's answer would. Then, alternating which side goes first:

* **shared**: ``run_side_queries`` with six kinds (``action``, ``query``, ``authority``,
  ``domain``, ``title``, ``read_url`` on one URL), concurrently: each is the transcript's exact
  next prompt plus a short instruction (the non-DeepSeek path, ``qwen3`` profile);
* **independent**: the same six prompts (same token ids, same forced answers, same limits),
  concurrently, each with a distinct nonce prepended, so the prefix cache cannot serve any
  block of it: six separate conversations, each prefilling the prompt.

The side's time is the wall clock from the first request to the last answer. Reported: the
medians, the median of each back-to-back pair's ratio (independent / shared), and the cached
prompt tokens each side got. Results and their reading: ``docs/benchmarks.md``.

Run: ``python bench/side_queries.py`` (``--quick``: 2 repeats; ``--repeats N``;
``--json PATH``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import machine_info
from _engine_server import ENGINE_ARGS, VLLM_ENV

SIZES = (1000, 3800)
"""Target tokens of the main prompt. The side prompts add the answer and the instruction
(~150 tokens): 3,800 keeps the largest within the tiny model's 4,096 positions."""
MAX_MODEL_LEN = 4096  # the tiny model's max_position_embeddings
KINDS = ("action", "query", "authority", "domain", "title", "read_url")
URL = "https://example.com/parser-notes"
MAIN_ANSWER = "A streaming parser keeps a small state between deltas."
ANSWERS = {
    "action": '{"needs_search": false}',
    "query": '{"query": "streaming parser design"}',
    "authority": '{"level": "low"}',
    "domain": '{"domain": "software"}',
    "title": '{"title": "Streaming parser design"}',
    "read_url": '{"read": true}',
}
_PHRASE = (
    "the parser reads each delta once and keeps a small state so that a marker cut across "
    "two deltas is still found and the tool starts as soon as its call is complete"
)
_WORDS = _PHRASE.split()


def _tiny_module() -> Any:
    from _engine_vllm import _tiny

    return _tiny()


class Forcing:
    """Wraps the engine: a side request (id ``side-{kind}-...`` or ``indep-{kind}-...``) is
    forced to its kind's JSON answer, with room for it in the tiny vocabulary (``action``'s
    16-token limit is too small for its 18 tokens here; both sides get the same limit); any
    other request to the main answer."""

    def __init__(self, inner: Any, marker_ids: dict[str, int]) -> None:
        self.inner = inner
        self.marker_ids = marker_ids
        self.forced = _tiny_module().forced

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.inner.encode(text)
        return ids

    async def generate(self, request: Any) -> AsyncGenerator[Any, None]:
        rid = request.request_id or ""
        head, _, rest = rid.partition("-")
        kind = rest.split("-")[0] if head in ("side", "indep") else None
        text = ANSWERS[kind] if kind else MAIN_ANSWER
        extra = {**request.extra, **self.forced(text, self.marker_ids)}
        request = dataclasses.replace(
            request, extra=extra, max_tokens=max(request.max_tokens or 0, len(text) + 4)
        )
        async with aclosing(self.inner.generate(request)) as chunks:
            async for chunk in chunks:
                yield chunk


def user_prompt(engine: Any, tokens: int, nonce: str) -> str:
    """A user message whose main prompt is about ``tokens`` tokens, unique by ``nonce``."""
    parts = [f"Nonce {nonce}.", f"See {URL} for the notes."]
    while len(engine.encode(" ".join(parts))) < tokens - 12:  # the template's tokens
        parts.append(f"{_WORDS[len(parts) % len(_WORDS)]}{len(parts) % 89}")
    return " ".join(parts)


@dataclass
class Run:
    side: str
    size: int
    wall: float
    prompt_tokens: list[int]
    cached_tokens: list[int]
    ok: bool
    """Every answer parsed to the forced value."""


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)
    main_prompt_tokens: dict[int, int] = field(default_factory=dict)

    def side(self, name: str, size: int) -> list[Run]:
        return [r for r in self.runs if r.side == name and r.size == size]

    def median(self, name: str, size: int) -> float:
        return statistics.median(r.wall for r in self.side(name, size))

    def pair_ratios(self, size: int) -> list[float]:
        shared, indep = self.side("shared", size), self.side("independent", size)
        return [i.wall / s.wall for s, i in zip(shared, indep, strict=True)]


async def measure(repeats: int, log: Any) -> Results:
    from _engine_vllm import tiny_model_dir

    import agentkit
    from agentkit.engine import GenerationRequest, Usage, VLLMEngine
    from agentkit.side_queries import SideQueryResult, run_side_queries, side_query_prompts
    from agentkit.transcript import Transcript

    model = tiny_model_dir()
    args = {**ENGINE_ARGS, "max_model_len": MAX_MODEL_LEN}
    log(f"engine: starting vLLM on {model} ({args})")
    results = Results()
    async with VLLMEngine(str(model), **args) as inner:
        markers = {m: inner.encode(m)[0] for m in _tiny_module().MARKERS}
        engine = Forcing(inner, markers)
        agent = agentkit.Agent(engine=engine, profile="qwen3", temperature=0.0, max_tokens=32)
        profile = agent.profile

        async def fresh(size: int) -> Transcript:
            """A new transcript after its (untimed) main turn: its prompt is cached."""
            result = await agent.run(user_prompt(inner, size, uuid.uuid4().hex[:12]))
            results.main_prompt_tokens.setdefault(size, result.usage.turns[0].prompt_tokens)
            return result.transcript

        async def shared(size: int, transcript: Transcript) -> Run:
            t0 = time.perf_counter()
            out = await run_side_queries(engine, profile, transcript, KINDS)
            wall = time.perf_counter() - t0
            ok = all(isinstance(a, SideQueryResult) for a in out.values())
            done = [a for a in out.values() if isinstance(a, SideQueryResult)]
            return Run(
                "shared",
                size,
                wall,
                [a.prompt_tokens for a in done],
                [a.cached_prompt_tokens for a in done],
                ok,
            )

        async def independent(size: int, transcript: Transcript) -> Run:
            import anyio

            prompts = [
                p
                for kind in KINDS
                for p in side_query_prompts(profile, engine, transcript, kind, replay=agent.replay)
            ]
            usages: list[Usage] = []
            texts: dict[str, str] = {}

            async def one(p: Any) -> None:
                nonce = f"[{uuid.uuid4().hex}]\n"
                assert p.token_ids is not None
                request = GenerationRequest(
                    prompt=nonce + p.text,
                    prompt_token_ids=inner.encode(nonce) + p.token_ids,
                    max_tokens=p.max_tokens,
                    temperature=0.0,
                    stop=tuple(profile.stop),
                    request_id=f"indep-{p.kind}-{uuid.uuid4().hex[:12]}",
                    extra=dict(p.extra),
                )
                pieces = []
                async with aclosing(engine.generate(request)) as chunks:
                    async for chunk in chunks:
                        pieces.append(chunk.text)
                        if chunk.finish_reason is not None and chunk.usage is not None:
                            usages.append(chunk.usage)
                texts[p.kind] = "".join(pieces)

            t0 = time.perf_counter()
            async with anyio.create_task_group() as group:
                for p in prompts:
                    group.start_soon(one, p)
            wall = time.perf_counter() - t0
            ok = len(prompts) == len(KINDS) and all(texts[k] == ANSWERS[k] for k in KINDS)
            return Run(
                "independent",
                size,
                wall,
                [u.prompt_tokens for u in usages],
                [u.cached_prompt_tokens for u in usages],
                ok,
            )

        sides = {"shared": shared, "independent": independent}
        log("warm-up (compiles each answer's grammar)")
        for size in SIZES:
            await shared(size, await fresh(size))
            await independent(size, await fresh(size))
        for i in range(repeats):
            for size in SIZES:
                order = ["shared", "independent"] if i % 2 == 0 else ["independent", "shared"]
                for name in order:
                    transcript = await fresh(size)
                    gc.collect()
                    run = await sides[name](size, transcript)
                    results.runs.append(run)
                    log(
                        f"{size}: {name} {run.wall:.3f} s, cached {run.cached_tokens} "
                        f"of {run.prompt_tokens} ({i + 1}/{repeats})"
                    )
    return results


def render(results: Results) -> list[str]:
    lines = [
        "| main prompt tokens | side prompt tokens | shared s (median) | independent s "
        "(median) | ratio (median of pairs) | pair ratios | cached tokens per query: shared / "
        "independent | answers as forced |",
        "|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for size in SIZES:
        shared, indep = results.side("shared", size), results.side("independent", size)
        if not shared or not indep:
            continue
        ratios = results.pair_ratios(size)
        side_tokens = sorted({t for r in shared for t in r.prompt_tokens})
        cached_s = sorted({t for r in shared for t in r.cached_tokens})
        cached_i = sorted({t for r in indep for t in r.cached_tokens})
        ok = all(r.ok for r in shared + indep)
        lines.append(
            f"| {results.main_prompt_tokens[size]:,} | {side_tokens[0]:,}–{side_tokens[-1]:,} | "
            f"{results.median('shared', size):.3f} | {results.median('independent', size):.3f} | "
            f"**{statistics.median(ratios):.1f}x** | "
            f"{', '.join(f'{x:.1f}' for x in ratios)} | "
            f"{cached_s[0]:,}–{cached_s[-1]:,} / {cached_i[0]:,}–{cached_i[-1]:,} | "
            f"{'yes' if ok else 'no'} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    parser.add_argument("--json", default=None, help="write the runs to this file")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    for name, value in VLLM_ENV.items():
        os.environ.setdefault(name, value)

    import anyio

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    results = anyio.run(measure, repeats, log)
    info = machine_info("agentkit", "vllm", "torch", "xgrammar")
    info["load_average"] = {"start": load_before, "end": os.getloadavg()}
    if args.json:
        payload = {
            "info": info,
            "repeats": repeats,
            "main_prompt_tokens": results.main_prompt_tokens,
            "runs": [dataclasses.asdict(r) for r in results.runs],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    start, end = (", ".join(f"{x:.1f}" for x in info["load_average"][k]) for k in ("start", "end"))
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}")
    print(f"load average {start} at the start, {end} at the end; {repeats} repeats")
    print(", ".join(f"{k} {v}" for k, v in info["packages"].items() if v))
    print()
    print("\n".join(render(results)))
    ok = all(r.ok for r in results.runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
