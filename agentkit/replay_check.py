"""The replay report: does each turn's prompt reuse the previous prompt and output?

``check_replay(profile)`` runs a scripted multi-turn, tool-using session through the real
agent loop — interleaved reasoning and calls in the profile's own format, tasks that end in an
answer and a new user message — on an engine that tokenizes, and reports per turn the prompt
tokens, how many of them repeat the previous prompt + output token for token (what a prefix
cache can reuse), and where the first divergence is, with a short diff of the rendered text.
A divergence is *explained* when agentkit rebuilt the prompt for a stated reason (the replay
policy dropped reasoning, context compaction); any other break is a bug in a template or in
replay, and the report fails. ``agentkit check-replay`` prints it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import agentkit
from agentkit._hf_tokenizer import load_hf_tokenizer
from agentkit.agent import Agent
from agentkit.engine import GenerationChunk, GenerationRequest, Usage
from agentkit.engine._char_tokenizer import CharTokenizer
from agentkit.events import TurnComplete
from agentkit.parsing import get_reasoning_syntax, get_tool_syntax, render_blocks
from agentkit.profiles import Profile, ReplayPolicy, get_profile
from agentkit.transcript import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock, Transcript

__all__ = [
    "DELIBERATE",
    "ReplayReport",
    "TurnReplay",
    "check_replay",
    "load_tokenizer",
    "session_outputs",
]

DELIBERATE = ("replay policy", "context compaction", "the chat template")
"""How the reasons for deliberate rebuilds begin (see ``agentkit._prompt``)."""


@dataclass(frozen=True, slots=True)
class TurnReplay:
    """One turn of the report."""

    turn: int
    prompt_tokens: int
    reused_tokens: int
    """Leading prompt tokens equal to the previous prompt + output (0 on the first turn)."""
    previous_tokens: int
    """Tokens of the previous prompt + output: full reuse is ``reused == previous``."""
    divergence: str | None
    """A short diff of the rendered text at the first difference, or ``None``."""
    reason: str | None
    """Why agentkit rebuilt the prompt (policy, compaction), or ``None``."""
    exact: bool = True
    """The prompt's token ids spell exactly its text."""

    @property
    def explained(self) -> bool:
        """The ids spell the text, and there is no divergence or one agentkit made on
        purpose (a rebuild because the engine cannot extend prompts explains nothing)."""
        return self.exact and (
            self.divergence is None
            or (self.reason is not None and self.reason.startswith(DELIBERATE))
        )


@dataclass(slots=True)
class ReplayReport:
    profile: str
    policy: ReplayPolicy
    tokenizer: str
    turns: list[TurnReplay] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every break is explained by the policy (or compaction)."""
        return all(t.explained for t in self.turns)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "policy": self.policy,
            "tokenizer": self.tokenizer,
            "ok": self.ok,
            "turns": [{**asdict(t), "explained": t.explained} for t in self.turns],
        }


class _ReplayEngine:
    """Streams the session's outputs with token ids and remembers each prompt's ids."""

    def __init__(
        self,
        outputs: list[tuple[str, list[int]]],
        encode: Callable[[str], list[int]],
        decode: Callable[[Sequence[int]], str],
    ) -> None:
        self.outputs = outputs
        """Each turn's text and the ids of the stop token the model ends it with."""
        self.encode = encode
        self.decode = decode
        self.prompts: list[tuple[str, list[int]]] = []
        self.generated: list[list[int]] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        ids = list(request.prompt_token_ids or self.encode(request.prompt))
        self.prompts.append((request.prompt, ids))
        n = len(self.prompts) - 1
        # Past the session (a task cut short by the turn count), the model just answers.
        text, stop = self.outputs[n] if n < len(self.outputs) else self.outputs[-1]
        out = self.encode(text)
        self.generated.append(out + stop)
        yield GenerationChunk(text=text, token_ids=out)
        yield GenerationChunk(
            text="",
            token_ids=stop,  # like vLLM: the stop token is in the ids, not in the text
            finish_reason="stop",
            usage=Usage(prompt_tokens=len(ids), output_tokens=len(out) + len(stop)),
        )


def session_outputs(profile: Profile, turns: int) -> list[list[list[ContentBlock]]]:
    """The model's turns, grouped by task: each task is three turns — interleaved reasoning
    and two calls, reasoning and one call, reasoning and an answer."""
    tasks: list[list[list[ContentBlock]]] = []
    n = 0
    while n < turns:
        t = len(tasks)
        task: list[list[ContentBlock]] = [
            [
                ReasoningBlock(text=f"Task {t}: first I need a."),
                ToolCallBlock(id="", name="lookup", arguments={"key": f"a{t}"}),
                ReasoningBlock(text="Now b."),
                ToolCallBlock(id="", name="lookup", arguments={"key": f"b{t}"}),
            ],
            [
                ReasoningBlock(text="Check a again."),
                ToolCallBlock(id="", name="lookup", arguments={"key": f"a{t}", "deep": True}),
            ],
            [ReasoningBlock(text="Done."), TextBlock(text=f"Task {t} is done.")],
        ]
        tasks.append(task[: turns - n])
        n += len(tasks[-1])
    return tasks


def _render_output(profile: Profile, blocks: list[ContentBlock]) -> str:
    if profile.reasoning == "harmony" or profile.tool_format == "harmony":
        from agentkit.parsing import harmony

        return harmony.render(blocks)
    reasoning = get_reasoning_syntax(profile.reasoning) if profile.reasoning else None
    tools = get_tool_syntax(profile.tool_format) if profile.tool_format else None
    kept = [
        b
        for b in blocks
        if (reasoning is not None or not isinstance(b, ReasoningBlock))
        and (tools is not None or not isinstance(b, ToolCallBlock))
    ]
    return render_blocks(kept, reasoning, tools, exact=False)


def _as_streamed(
    profile: Profile, blocks: list[ContentBlock], encode: Callable[[str], list[int]]
) -> tuple[str, list[int]]:
    """A turn as an engine streams it: the text without the stop token, which comes as ids
    only — the call terminator (``<|call|>``, GLM's ``<|observation|>``) after calls, the
    other stop after an answer."""
    text = _render_output(profile, blocks)
    if not profile.stop:
        return text, []
    after_calls = [s for s in profile.stop if "call" in s or "observation" in s]
    others = [s for s in profile.stop if s not in after_calls] or list(profile.stop)
    calls = any(isinstance(b, ToolCallBlock) for b in blocks)
    stop = after_calls[0] if calls and after_calls else others[0]
    return text.removesuffix(stop), encode(stop)


def _divergence(previous: str, current: str, width: int = 40) -> str:
    """``-`` the previous prompt + output, ``+`` the new prompt, around the first difference."""
    i = 0
    limit = min(len(previous), len(current))
    while i < limit and previous[i] == current[i]:
        i += 1
    start = max(0, i - width)
    return f"at character {i}: -{previous[start : i + width]!r} +{current[start : i + width]!r}"


async def check_replay(
    profile: str | Profile,
    *,
    turns: int = 50,
    policy: ReplayPolicy | None = None,
    tokenizer: tuple[str, Callable[[str], list[int]], Callable[[Sequence[int]], str]] | None = None,
) -> ReplayReport:
    """Run the scripted session on ``profile`` and report each turn's prompt reuse.

    ``tokenizer`` is ``(description, encode, decode)``; by default an exact character-level
    tokenizer with the profile's special tokens as single ids.
    """
    profile = get_profile(profile)
    if tokenizer is None:
        chars = CharTokenizer([*profile.special_tokens, *profile.stop])
        tokenizer = ("characters (special tokens as one id)", chars.encode, chars.decode)
    description, encode, decode = tokenizer
    tasks = session_outputs(profile, turns)
    outputs = [_as_streamed(profile, blocks, encode) for task in tasks for blocks in task]
    outputs.append(_as_streamed(profile, [TextBlock(text="Stopping here.")], encode))
    engine = _ReplayEngine(outputs, encode, decode)

    @agentkit.tool
    def lookup(key: str, deep: bool = False) -> str:
        """Look a key up."""
        return f"{key} = {len(key) * 7}" + (" (checked twice)" if deep else "")

    agent = Agent(
        engine,
        tools=[lookup],
        profile=profile,
        system="You answer with the lookup tool.",
        replay=policy,
        max_turns=4,
    )
    report = ReplayReport(profile.name, agent.replay, description)
    reasons: list[str | None] = []
    transcript: Transcript | None = None
    for t in range(len(tasks)):
        question = f"Question {t}: what are a{t} and b{t}?"
        if transcript is None:
            start: str | Transcript = question
        else:
            transcript.add("user", question)
            start = transcript
        async with agent.stream(start) as events:
            async for event in events:
                if isinstance(event, TurnComplete):
                    reasons.append(event.prompt_rebuilt)
        transcript = events.result.transcript
    previous: list[int] = []
    previous_text = ""
    for i, (text, ids) in enumerate(engine.prompts[:turns]):
        reused = 0
        limit = min(len(previous), len(ids))
        while reused < limit and previous[reused] == ids[reused]:
            reused += 1
        divergence = None
        if i > 0 and reused < len(previous):
            divergence = _divergence(previous_text, text)
        exact = decode(ids) == text
        report.turns.append(
            TurnReplay(i + 1, len(ids), reused, len(previous), divergence, reasons[i], exact)
        )
        previous = ids + engine.generated[i]
        previous_text = text + decode(engine.generated[i])
    return report


def load_tokenizer(
    source: str, profile: str | Profile
) -> tuple[str, Callable[[str], list[int]], Callable[[Sequence[int]], str]]:
    """``(description, encode, decode)`` of the Hugging Face tokenizer at ``source`` (a local
    directory with ``tokenizer.json``/``tokenizer_config.json``, or a hub id that is cached),
    for :func:`check_replay`; a :class:`ConfigurationError` naming the file and the profile
    when it cannot be loaded."""
    tokenizer = load_hf_tokenizer(source, owner=f"profile {get_profile(profile).name!r}")

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    def decode(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))

    return f"{source} ({type(tokenizer).__name__})", encode, decode
