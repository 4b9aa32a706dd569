"""Parts (a) and (b) of the engine benchmark: real vLLM on the CPU, with the slow suite's
tiny random model, whose every output is forced (structured outputs with a regex equal to the
wanted text, greedy sampling, a logit bias that makes each marker one token).

(a) Tokens/s of one long final answer through ``Agent`` over ``VLLMEngine`` against a bare
    ``AsyncLLM.generate`` loop on the same engine, with the same prompt ids and sampling.
(b) A 5-turn tool-using session: ``Agent`` over ``VLLMEngine`` against the same session
    through ``vllm serve`` (the OpenAI-compatible server, started here on 127.0.0.1) and the
    ``openai`` client, which does what an agent does between requests: render the prompt
    (agentkit's template), stream ``/v1/completions``, parse the call (agentkit's parser), run
    the tool, append the result.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import math
import os
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from _engine_server import (
    ENGINE_ARGS,
    SERVED_NAME,
    Watch,
    child_processes,
    vllm_server,
)
from _engine_timing import bootstrap_interval, engine_request_stats, pinned

__all__ = [
    "SessionResult",
    "ThroughputResult",
    "measure_sessions",
    "measure_throughput",
    "open_engine",
    "tiny_model_dir",
]

USER_PROMPT = "Summarize the design of a streaming parser in a few paragraphs."

_ROOT = Path(__file__).resolve().parent.parent


def _tiny() -> ModuleType:
    """The slow suite's tiny-model module (``tests/slow/_tiny_model.py``), reused as is."""
    slow = str(_ROOT / "tests" / "slow")
    if slow not in sys.path:
        sys.path.append(slow)
    return importlib.import_module("_tiny_model")


def tiny_model_dir() -> Path:
    """The tiny model, built once into ``~/.cache/agentkit-bench/`` (a few seconds)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path: Path = _tiny().build_tiny_model(Path(root) / "agentkit-bench" / "tiny-qwen")
    return path


@contextlib.asynccontextmanager
async def open_engine(model: Path) -> AsyncIterator[tuple[Any, dict[str, int]]]:
    """A started ``VLLMEngine`` on the tiny model, and each marker's single token id."""
    from agentkit.engine import VLLMEngine

    async with VLLMEngine(str(model), **ENGINE_ARGS) as engine:
        ids = {marker: engine.encode(marker) for marker in _tiny().MARKERS}
        if any(len(v) != 1 for v in ids.values()):
            raise RuntimeError(f"markers are not single tokens: {ids}")
        yield engine, {marker: v[0] for marker, v in ids.items()}


_REGEX_SPECIAL = re.compile(r"([\\.^$|?*+()\[\]{}])")


def _forced(text: str, marker_ids: Mapping[str, int]) -> dict[str, Any]:
    """The tiny model module's ``forced(text)``, with a regex that escapes only what is
    special (the same language as ``re.escape``'s, without an xgrammar warning for each
    escaped space and newline)."""
    extra: dict[str, Any] = _tiny().forced(text, dict(marker_ids))
    extra["structured_outputs"] = {"regex": _REGEX_SPECIAL.sub(r"\\\1", text)}
    return extra


def _hermes(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


_PHRASE = (
    "the parser reads each delta once and keeps a small state so that a marker cut across "
    "two deltas is still found and the tool starts as soon as its call is complete while "
    "the model keeps writing the rest of the turn"
)
_WORDS = _PHRASE.split()


def answer_text(words: int) -> str:
    """The forced output of (a): a short reasoning, then a final answer of ``words`` words."""
    body = " ".join(_WORDS[i % len(_WORDS)] for i in range(words))
    return f"<think>\nThe user wants a summary; no tool is needed.\n</think>\n\n{body}."


# -- (a) throughput ------------------------------------------------------------------------


@dataclass
class Run:
    side: str
    """``"agentkit"`` or ``"bare"``."""
    wall: float
    cpu: float
    """CPU seconds of this process: the front end (the engine core is another process)."""
    engine_cpu: float
    """CPU seconds of the engine-core process."""
    output_tokens: int
    cached_tokens: int
    engine: float
    """The engine's own time, on its clock: from scheduling the request to its last token."""
    before: float
    """From the start of the call to the engine scheduling the request: the side's set-up."""
    after: float
    """From the engine's last token to the end of the call: delivering it, and wrapping up."""

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall

    @property
    def engine_share(self) -> float:
        """The engine's own time over the call's wall time."""
        return self.engine / self.wall


@dataclass
class ThroughputResult:
    prompt_tokens: int
    output_tokens: int
    output_chars: int
    runs: list[Run]
    same_output: bool
    """Both sides produced the forced text, with the same number of tokens, every run."""
    sampling: dict[str, Any] = field(default_factory=dict)
    pinning: str | None = None
    """Where the engine core and this process ran, when they were pinned to CPUs."""

    def side(self, name: str) -> list[Run]:
        return [r for r in self.runs if r.side == name]

    def median_tokens_per_s(self, name: str) -> float:
        return statistics.median(r.tokens_per_s for r in self.side(name))

    def cpu_ms_per_token(self, name: str) -> float:
        """Median front-end CPU milliseconds per output token."""
        return statistics.median(r.cpu / r.output_tokens * 1e3 for r in self.side(name))

    def engine_cpu_ms_per_token(self, name: str) -> float:
        """Median engine-core CPU milliseconds per output token."""
        return statistics.median(r.engine_cpu / r.output_tokens * 1e3 for r in self.side(name))

    def _pairs(self) -> list[tuple[Run, Run]]:
        """(agentkit, bare) for each back-to-back pair of runs."""
        return list(zip(self.side("agentkit"), self.side("bare"), strict=True))

    @property
    def pair_overheads(self) -> list[float]:
        """1 - agentkit's tokens/s / the bare loop's, for each pair."""
        return [1 - a.tokens_per_s / b.tokens_per_s for a, b in self._pairs()]

    @property
    def pair_log_ratios(self) -> list[float]:
        """ln(agentkit's tokens/s / the bare loop's), for each pair. Log ratios are symmetric
        (a run 20% slower and one 20% faster do not weigh differently, as 1 - ratio makes
        them) and add up: this is :attr:`pair_engine_logs` + :attr:`pair_around_logs`."""
        return [math.log(a.tokens_per_s / b.tokens_per_s) for a, b in self._pairs()]

    @property
    def pair_engine_logs(self) -> list[float]:
        """ln(the engine's own tokens/s in agentkit's run / in the bare loop's), per pair: the
        engine running slower while agentkit's run was on (contention), or the machine's
        speed changing between the two runs (noise)."""
        return [math.log(b.engine / a.engine) for a, b in self._pairs()]

    @property
    def pair_around_logs(self) -> list[float]:
        """ln(agentkit's engine share of its wall time / the bare loop's), per pair: what each
        side adds around the engine's own time (set-up before the engine schedules the
        request, delivery after its last token). The engine's speed cancels out."""
        return [math.log(a.engine_share / b.engine_share) for a, b in self._pairs()]

    @property
    def overhead(self) -> float:
        """The share of throughput lost: 1 - the geometric mean of the pairs' tokens/s
        ratios. Pairs, not the two sides' medians, because the machine's speed drifts over
        the run and each pair's two runs are back to back (their order alternates)."""
        return _lost(self.pair_log_ratios)

    @property
    def overhead_interval(self) -> tuple[float, float]:
        """A 95% bootstrap interval for :attr:`overhead`."""
        return _lost_interval(self.pair_log_ratios)

    @property
    def median_overhead(self) -> float:
        """The median of :attr:`pair_overheads`."""
        return statistics.median(self.pair_overheads)

    @property
    def median_overhead_interval(self) -> tuple[float, float]:
        return bootstrap_interval(self.pair_overheads)

    @property
    def engine_slowdown(self) -> float:
        """The engine's own share of :attr:`overhead`: ``1 - overhead`` is ``(1 -
        engine_slowdown) * (1 - around_overhead)``, exactly."""
        return _lost(self.pair_engine_logs)

    @property
    def engine_slowdown_interval(self) -> tuple[float, float]:
        return _lost_interval(self.pair_engine_logs)

    @property
    def around_overhead(self) -> float:
        """The share of :attr:`overhead` spent around the engine's own time."""
        return _lost(self.pair_around_logs)

    @property
    def around_overhead_interval(self) -> tuple[float, float]:
        return _lost_interval(self.pair_around_logs)

    def median_ms(self, name: str, what: str) -> float:
        """Median ``before`` or ``after`` of a side, in milliseconds."""
        return statistics.median(getattr(r, what) for r in self.side(name)) * 1e3

    @property
    def overhead_of_medians(self) -> float:
        """1 - agentkit's median tokens/s / the bare loop's."""
        return 1 - self.median_tokens_per_s("agentkit") / self.median_tokens_per_s("bare")

    @property
    def cpu_overhead(self) -> float:
        """agentkit's extra front-end CPU per token over the bare loop's time per token: the
        share of throughput it would cost if the front end and the engine shared one core."""
        extra = self.cpu_ms_per_token("agentkit") - self.cpu_ms_per_token("bare")
        return extra / (1e3 / self.median_tokens_per_s("bare"))


def _lost(logs: Sequence[float]) -> float:
    """1 - the geometric mean of ratios given as logs: the share lost."""
    return 1 - math.exp(statistics.fmean(logs))


def _lost_interval(logs: Sequence[float]) -> tuple[float, float]:
    """A 95% bootstrap interval for :func:`_lost` (low, high)."""
    low, high = bootstrap_interval(logs, statistics.fmean)
    return 1 - math.exp(high), 1 - math.exp(low)


async def measure_throughput(
    engine: Any,
    marker_ids: Mapping[str, int],
    words: int,
    repeats: int,
    log: Callable[[str], None],
) -> ThroughputResult:
    """Interleaved runs of the two sides, after one untimed warm-up run of each (it compiles
    the regex's grammar, which xgrammar then caches for both)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    import agentkit
    from agentkit.transcript import Transcript

    text = answer_text(words)
    extra = _forced(text, marker_ids)
    llm = engine.llm
    # The same prompt ids on both sides: agentkit's rendering of the prompt, encoded once. It
    # is shorter than one KV block, so no run is served from the prefix cache (checked).
    prompt = agentkit.get_profile("qwen3").render(Transcript.from_prompt(USER_PROMPT))
    prompt_ids = engine.encode(prompt)
    block = llm.vllm_config.cache_config.block_size
    if len(prompt_ids) >= block:
        raise RuntimeError(f"the prompt ({len(prompt_ids)} tokens) must fit one block ({block})")
    eos = engine.tokenizer.eos_token_id
    max_tokens = llm.model_config.max_model_len - len(prompt_ids)  # the regex ends it sooner
    # What VLLMEngine sends (the model's generation-config defaults, then the request's
    # fields), built here with vLLM's own API only.
    sampling: dict[str, Any] = {
        **llm.model_config.get_diff_sampling_param(),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stop_token_ids": [eos],
        "logit_bias": extra["logit_bias"],
    }
    agent = agentkit.Agent(
        engine, profile="qwen3", max_tokens=max_tokens, temperature=0.0, request_options=extra
    )
    counter = iter(range(1_000_000))
    core = child_processes()

    def engine_times(started: float, ended: float) -> tuple[float, float, float]:
        """The run's request on the engine's clock: its own time, the time before the
        engine scheduled it and the time after its last token (``added``: each request's
        stats, as the engine adds it; bound below)."""
        if not added:
            raise RuntimeError("vLLM added no request stats: has its output processor changed?")
        stats = added[-1]
        if stats.last_token_ts <= 0:
            raise RuntimeError("vLLM recorded no request stats: is disable_log_stats set?")
        return (
            stats.last_token_ts - stats.scheduled_ts,
            stats.scheduled_ts - started,
            ended - stats.last_token_ts,
        )

    async def bare() -> tuple[Run, str]:
        parts: list[str] = []
        tokens = cached = 0
        started = time.monotonic()
        with Watch(core) as watch:
            params = SamplingParams(
                **sampling,
                structured_outputs=StructuredOutputsParams(**extra["structured_outputs"]),
                n=1,
                output_kind=RequestOutputKind.DELTA,
                skip_special_tokens=False,
            )
            request_id = f"bench-bare-{next(counter)}"
            async for output in llm.generate({"prompt_token_ids": prompt_ids}, params, request_id):
                completion = output.outputs[0]
                tokens += len(completion.token_ids)
                parts.append(completion.text)
                if output.finished:
                    cached = int(output.num_cached_tokens or 0)
        ended = time.monotonic()
        times = engine_times(started, ended)
        run = Run("bare", watch.wall, watch.cpu, watch.other_cpu, tokens, cached, *times)
        return run, "".join(parts)

    async def agentkit_run() -> tuple[Run, str]:
        started = time.monotonic()
        with Watch(core) as watch:
            result = await agent.run(USER_PROMPT)
        ended = time.monotonic()
        usage = result.usage.turns[0]
        if usage.prompt_tokens != len(prompt_ids):
            raise RuntimeError(f"agentkit's prompt has {usage.prompt_tokens} tokens")
        raw = result.transcript.messages[-1].raw or ""
        run = Run(
            "agentkit",
            watch.wall,
            watch.cpu,
            watch.other_cpu,
            usage.output_tokens,
            usage.cached_prompt_tokens,
            *engine_times(started, ended),
        )
        return run, raw

    sides = {"bare": bare, "agentkit": agentkit_run}
    runs: list[Run] = []
    same = True
    with engine_request_stats(llm) as added, pinned([p.pid for p in core]) as pinning:
        log(f"throughput: {pinning or 'not pinned'}; warm-up")
        warm, _ = await bare()
        await agentkit_run()
        for i in range(repeats):
            order = ["bare", "agentkit"] if i % 2 == 0 else ["agentkit", "bare"]
            for name in order:
                gc.collect()
                count = len(added)
                run, out = await sides[name]()
                if len(added) != count + 1:
                    raise RuntimeError(f"{name} sent {len(added) - count} requests, not one")
                same = same and out == text and run.output_tokens == warm.output_tokens
                runs.append(run)
            pair = runs[-2:]
            log(
                "throughput: "
                + ", ".join(f"{r.side} {r.tokens_per_s:.1f} tok/s" for r in pair)
                + f" ({i + 1}/{repeats})"
            )
    shown = {k: v for k, v in sampling.items() if k != "logit_bias"}
    shown["logit_bias"] = f"+100 on {len(extra['logit_bias'])} marker tokens"
    return ThroughputResult(
        len(prompt_ids), warm.output_tokens, len(text), runs, same, shown, pinning
    )


# -- (b) a tool-using session, in-process and through `vllm serve` -------------------------


def session_outputs(turns: int) -> list[str]:
    """The forced output of each turn: ``turns - 1`` calls, then the final answer."""
    outputs = [
        f"<think>\nI still need the value of key{i}.\n</think>\n\n"
        + _hermes("lookup", key=f"key{i}")
        for i in range(turns - 1)
    ]
    values = "; ".join(_value(f"key{i}")[:30] for i in range(turns - 1))
    outputs.append(f"<think>\nI have every value.\n</think>\n\nThe values: {values}.")
    return outputs


def _value(key: str) -> str:
    """What the tool returns: ~100 characters, different per key (the tiny model's tokenizer
    makes ~1 token of 1.5 characters: a 5-turn session stays within 2,048 tokens)."""
    return f"{key}: " + " ".join(f"{word}-{key}" for word in _WORDS[:12])


def _lookup_tool() -> Any:
    import agentkit

    @agentkit.tool
    async def lookup(key: str) -> str:
        """Look a key up in the table."""
        return _value(key)

    return lookup


@dataclass
class Session:
    side: str
    """``"agentkit"`` (in-process) or ``"server"`` (``vllm serve`` + ``openai``)."""
    wall: float
    cpu: float
    """CPU seconds of this process: agentkit and the engine's front end, or the client."""
    engine_cpu: float
    """CPU seconds of the engine's other processes: the in-process engine's engine core, or
    the server's API process and its engine core."""
    prompt_tokens: list[int]
    cached_tokens: list[int]
    output_tokens: list[int]
    outcome: list[Any]
    """Each turn's calls (name, arguments) and the final text: must match across sides."""


@dataclass
class SessionResult:
    turns: int
    sessions: list[Session]
    same_outcome: bool
    server_start_s: float

    def side(self, name: str) -> list[Session]:
        return [s for s in self.sessions if s.side == name]

    def median_wall(self, name: str) -> float:
        return statistics.median(s.wall for s in self.side(name))

    def median_cpu(self, name: str) -> float:
        """Median CPU seconds of a session, all processes (this one, the engine's)."""
        return statistics.median(s.cpu + s.engine_cpu for s in self.side(name))

    @property
    def ratio(self) -> float:
        """The median of :attr:`pair_ratios`: > 1, in-process is faster."""
        return statistics.median(self.pair_ratios)

    @property
    def ratio_of_medians(self) -> float:
        return self.median_wall("server") / self.median_wall("agentkit")

    @property
    def pair_ratios(self) -> list[float]:
        """Server session time / in-process session time, for each back-to-back pair."""
        ours, theirs = self.side("agentkit"), self.side("server")
        return [t.wall / o.wall for o, t in zip(ours, theirs, strict=True)]


def _outcome(transcript: Any) -> list[Any]:
    out: list[Any] = []
    for message in transcript.messages:
        if message.role != "assistant":
            continue
        out.append([(c.name, c.arguments) for c in message.tool_calls] or message.text)
    return out


async def measure_sessions(
    engine: Any,
    model: Path,
    marker_ids: Mapping[str, int],
    turns: int,
    repeats: int,
    log: Callable[[str], None],
    server_timeout: float = 600.0,
) -> SessionResult:
    """Interleaved sessions of the two sides, after one untimed session of each."""
    import openai

    import agentkit
    from agentkit.tools import ToolRegistry
    from agentkit.transcript import Message, ToolResultBlock, Transcript

    outputs = session_outputs(turns)
    lookup = _lookup_tool()
    max_tokens = 4 * max(len(o) for o in outputs)
    agent = agentkit.Agent(
        engine,
        tools=[lookup],
        profile="qwen3",
        max_turns=turns,
        max_tokens=max_tokens,
        temperature=0.0,
        request_options=lambda turn, _t: _forced(outputs[turn - 1], marker_ids),
    )
    profile = agentkit.get_profile("qwen3")
    registry = ToolRegistry([lookup])
    specs, schemas = registry.specs(), registry.schemas()

    def prompt(k: int) -> str:
        # Distinct per session: a session's prompts are cached only within the session (and
        # the system prompt, the tools, which every session shares), on both sides alike.
        return f"Session {k}: look up key0 to key{turns - 2} and report their values."

    core = child_processes()  # before the server starts: only the in-process engine's

    async def in_process(k: int) -> Session:
        with Watch(core) as watch:
            result = await agent.run(prompt(k))
        usage = result.usage.turns
        return Session(
            "agentkit",
            watch.wall,
            watch.cpu,
            watch.other_cpu,
            [u.prompt_tokens for u in usage],
            [u.cached_prompt_tokens for u in usage],
            [u.output_tokens for u in usage],
            _outcome(result.transcript),
        )

    async def remote(client: Any, server: Sequence[Any], k: int) -> Session:
        prompts: list[int] = []
        cached: list[int] = []
        produced: list[int] = []
        with Watch(server) as watch:
            transcript = Transcript.from_prompt(prompt(k))
            for turn in range(1, turns + 1):
                forced = _forced(outputs[turn - 1], marker_ids)
                parser = profile.new_parser(schemas)
                stream = await client.completions.create(
                    model=SERVED_NAME,
                    prompt=profile.render(transcript, specs),
                    max_tokens=max_tokens,
                    temperature=0.0,
                    stream=True,
                    stream_options={"include_usage": True},
                    logit_bias={str(t): b for t, b in forced["logit_bias"].items()},
                    extra_body={
                        "structured_outputs": forced["structured_outputs"],
                        "skip_special_tokens": False,
                    },
                )
                async for chunk in stream:
                    for choice in chunk.choices:
                        if choice.text:
                            parser.feed(choice.text)
                    if chunk.usage is not None:
                        details = chunk.usage.prompt_tokens_details
                        prompts.append(chunk.usage.prompt_tokens)
                        cached.append(details.cached_tokens or 0 if details else 0)
                        produced.append(chunk.usage.completion_tokens)
                parser.finish()
                message = Message(role="assistant", content=list(parser.blocks))
                transcript.append(message)
                if not message.tool_calls:
                    break
                results = [
                    ToolResultBlock(
                        call_id=call.id,
                        name=call.name,
                        content=await lookup.invoke(call.arguments, call_id=call.id),
                    )
                    for call in message.tool_calls
                ]
                transcript.append(Message(role="tool", content=results))
        return Session(
            "server",
            watch.wall,
            watch.cpu,
            watch.other_cpu,
            prompts,
            cached,
            produced,
            _outcome(transcript),
        )

    async with vllm_server(model, log, server_timeout) as (base, ready, server):
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        try:
            log("session: warm-up")
            reference = await in_process(0)
            warm = await remote(client, server, 0)
            same = warm.outcome == reference.outcome
            sessions: list[Session] = []
            for i in range(repeats):
                k = i + 1
                order = ["agentkit", "server"] if i % 2 == 0 else ["server", "agentkit"]
                pair: dict[str, Session] = {}
                for name in order:
                    gc.collect()
                    pair[name] = await (
                        in_process(k) if name == "agentkit" else remote(client, server, k)
                    )
                sessions += [pair["agentkit"], pair["server"]]
                same = same and pair["agentkit"].outcome == pair["server"].outcome
                log(
                    f"session: in-process {pair['agentkit'].wall:.2f} s, "
                    f"server {pair['server'].wall:.2f} s ({i + 1}/{repeats})"
                )
        finally:
            await client.close()
    return SessionResult(turns, sessions, same, ready)
