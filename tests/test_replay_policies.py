"""Reasoning-replay policies, context compaction and tool-output truncation in the agent loop,
and the replay report on every profile of the catalog."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncGenerator, Sequence

import pytest
from _hermes import hermes

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine, Usage
from agentkit.errors import ConfigurationError, ContextWindowExceeded
from agentkit.events import ContextCompacted, ToolResultEvent, TurnComplete
from agentkit.profiles import (
    TOOL_OUTPUT_REMOVED,
    Profile,
    dropped_reasoning,
    get_profile,
    list_profiles,
    replay_view,
)
from agentkit.replay_check import check_replay
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

pytestmark = pytest.mark.anyio

POLICIES = ("keep_all", "drop_on_plain_turns", "drop_all")
PROFILES = [p.name for p in list_profiles()]
REASONING_PROFILES = [p.name for p in list_profiles() if p.reasoning]


def interleaved_transcript() -> Transcript:
    """Task 0 (ended in an answer), then task 1 in progress; interleaved reasoning and calls."""

    def call(i: int) -> ToolCallBlock:
        return ToolCallBlock(id=f"c{i}", name="lookup", arguments={"key": f"KEY{i}"})

    def result(i: int) -> ToolResultBlock:
        return ToolResultBlock(call_id=f"c{i}", name="lookup", content=f"VALUE{i}")

    t = Transcript.from_prompt("QUESTION0", system="SYSTEM")
    t.add(
        "assistant",
        [ReasoningBlock(text="THINK0"), call(0), ReasoningBlock(text="THINK1"), call(1)],
    )
    t.add("tool", [result(0), result(1)])
    t.add("assistant", [ReasoningBlock(text="THINK2"), TextBlock(text="ANSWER0")])
    t.add("user", "QUESTION1")
    t.add(
        "assistant",
        [ReasoningBlock(text="THINK3"), call(2), ReasoningBlock(text="THINK4"), call(3)],
    )
    t.add("tool", [result(2), result(3)])
    return t


def in_order(text: str, *needles: str) -> bool:
    positions = [text.find(n) for n in needles]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


@pytest.mark.parametrize("name", REASONING_PROFILES)
@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_keeps_interleaved_reasoning_in_place(name: str, policy: str) -> None:
    profile = get_profile(name)
    transcript = interleaved_transcript()
    view = replay_view(transcript, dropped_reasoning(transcript, policy))  # type: ignore[arg-type]
    prompt = profile.template.render(view, [])
    kept = {
        "keep_all": ["THINK0", "THINK1", "THINK2", "THINK3", "THINK4"],
        "drop_on_plain_turns": ["THINK3", "THINK4"],
        "drop_all": [],
    }[policy]
    for i in range(5):
        assert (f"THINK{i}" in prompt) == (f"THINK{i}" in kept), (policy, i, prompt)
    # Calls stay where they were, between the reasoning blocks: never r0 r1 call0 call1.
    assert in_order(prompt, "KEY0", "KEY1", "ANSWER0", "QUESTION1", "KEY2", "KEY3")
    if "THINK0" in kept:
        assert in_order(prompt, "THINK0", "KEY0", "THINK1", "KEY1", "THINK2", "ANSWER0")
    if "THINK3" in kept:
        assert in_order(prompt, "THINK3", "KEY2", "THINK4", "KEY3")
    # The transcript itself keeps everything.
    assert sum(isinstance(b, ReasoningBlock) for m in transcript for b in m.content) == 5


@pytest.mark.parametrize("name", PROFILES)
async def test_keep_all_reuses_the_whole_previous_prompt_and_output_for_fifty_turns(
    name: str,
) -> None:
    report = await check_replay(name, turns=50, policy="keep_all")
    assert report.ok
    assert len(report.turns) == 50
    for turn in report.turns[1:]:
        assert turn.exact
        if turn.divergence is None:
            assert turn.reused_tokens == turn.previous_tokens > 0
        elif name == "mistral-v11":
            # A new user message moves v11's tools block, as mistral-common writes it.
            assert turn.reason is not None
            assert "[AVAILABLE_TOOLS]" in turn.reason
            assert (turn.turn - 1) % 3 == 0
        else:
            # Harmony only: a final answer's <|return|> is <|end|> in history, by the model's
            # own template. Exactly that one token differs.
            assert name == "gpt-oss"
            assert turn.reason is not None
            assert turn.reason.startswith("the chat template closes the turn")
            assert turn.reused_tokens == turn.previous_tokens - 1


@pytest.mark.parametrize("name", PROFILES)
async def test_drop_on_plain_turns_diverges_only_where_a_task_ended(name: str) -> None:
    report = await check_replay(name, turns=50, policy="drop_on_plain_turns")
    assert report.ok
    has_reasoning = get_profile(name).reasoning is not None
    for turn in report.turns[1:]:
        task_start = (turn.turn - 1) % 3 == 0  # the session's tasks are three turns long
        if task_start and name == "mistral-v11":  # the tools block moves (see above)
            assert turn.reason is not None
            assert "[AVAILABLE_TOOLS]" in turn.reason
        elif task_start and has_reasoning:
            assert turn.divergence is not None
            assert turn.reason is not None
            assert "drop_on_plain_turns" in turn.reason
            assert turn.reused_tokens < turn.previous_tokens
        else:
            assert turn.divergence is None
            assert turn.reused_tokens == turn.previous_tokens


async def test_the_report_fails_on_a_break_the_policy_does_not_explain() -> None:
    qwen3 = get_profile("qwen3")

    @dataclasses.dataclass(frozen=True)
    class Unstable:
        """Renders a turn counter into the system prompt: every prompt changes at the top."""

        inner: agentkit.profiles.ChatMLTemplate

        def render(self, transcript: Transcript, tools: Sequence[object], **_: object) -> str:
            text = self.inner.render(transcript, tools)  # type: ignore[arg-type]
            return text.replace("You answer", f"{len(transcript.messages)}: You answer", 1)

    broken = dataclasses.replace(qwen3, name="unstable", template=Unstable(qwen3.template))  # type: ignore[arg-type]
    report = await check_replay(broken, turns=4, policy="keep_all")
    assert not report.ok
    unexplained = [t for t in report.turns if not t.explained]
    assert unexplained
    assert unexplained[0].divergence is not None
    assert "at character" in unexplained[0].divergence


def test_check_replay_command(capsys: pytest.CaptureFixture[str]) -> None:
    from agentkit.cli import main

    assert main(["check-replay", "--profile", "qwen3", "--turns", "7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policy"] == "drop_on_plain_turns"
    assert [t["turn"] for t in data["turns"]] == list(range(1, 8))
    assert {"prompt_tokens", "reused_tokens", "divergence"} <= set(data["turns"][0])
    assert data["turns"][3]["divergence"] is not None
    assert main(["check-replay", "--profile", "qwen3", "--turns", "4"]) == 0
    out = capsys.readouterr().out
    assert "diverges as intended" in out
    assert main(["check-replay", "--profile", "qwen3", "--policy", "nope"]) == 2


def test_template_native_needs_the_models_own_template() -> None:
    with pytest.raises(ConfigurationError, match="template_native"):
        agentkit.Agent(ScriptedEngine([]), replay="template_native", profile="qwen3")
    with pytest.raises(ConfigurationError, match="unknown reasoning-replay policy"):
        agentkit.Agent(ScriptedEngine([]), replay="sometimes", profile="qwen3")  # type: ignore[arg-type]


# --- truncation -------------------------------------------------------------------------


def tool_result(transcript: Transcript) -> ToolResultBlock:
    (block,) = [b for m in transcript if m.role == "tool" for b in m.content]
    assert isinstance(block, ToolResultBlock)
    return block


@agentkit.tool
def listing(n: int) -> str:
    """n numbered lines."""
    return "".join(f"line {i} é中😀\n" for i in range(n))


async def test_truncation_cuts_what_the_model_sees_and_the_caller_gets_everything() -> None:
    engine = ScriptedEngine([hermes("listing", n=100), "Done."])
    agent = agentkit.Agent(
        engine, tools=[listing], truncation={"mode": "lines", "limit": 4}, profile="qwen3"
    )
    events = []
    async with agent.stream("list") as stream:
        async for event in stream:
            events.append(event)
    (result_event,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result_event.content.count("\n") == 100
    block = tool_result(stream.result.transcript)
    assert isinstance(block, ToolResultBlock)
    assert block.original_content == result_event.content
    assert block.content.startswith("line 0 é中😀\nline 1 é中😀\n")
    assert "[... 96 lines truncated ...]" in block.content
    assert block.content.endswith("line 98 é中😀\nline 99 é中😀\n")
    prompt = engine.requests[1].prompt
    assert "line 50 " not in prompt
    assert "[... 96 lines truncated ...]" in prompt


async def test_bytes_truncation_never_splits_a_character_and_profiles_carry_a_policy() -> None:
    profile = dataclasses.replace(
        get_profile("qwen3"),
        name="qwen3-truncating",
        truncation=agentkit.truncation.TruncationPolicy(mode="bytes", limit=101),
    )
    engine = ScriptedEngine([hermes("listing", n=50), "Done."])
    result = await agentkit.Agent(engine, tools=[listing], profile=profile).run("list")
    block = tool_result(result.transcript)
    assert isinstance(block, ToolResultBlock)
    assert "\ufffd" not in block.content
    assert "bytes truncated" in block.content
    assert block.original_content is not None
    kept = block.content.encode().replace(
        re.search(r"\n?\[\.\.\. \d+ bytes truncated \.\.\.\]\n?", block.content).group().encode(),  # type: ignore[union-attr]
        b"",
    )
    assert len(kept) <= 101
    # Turned off per agent.
    engine = ScriptedEngine([hermes("listing", n=50), "Done."])
    result = await agentkit.Agent(engine, tools=[listing], profile=profile, truncation=False).run(
        "list"
    )
    block = tool_result(result.transcript)
    assert isinstance(block, ToolResultBlock)
    assert block.original_content is None


def test_token_truncation_needs_a_tokenizer() -> None:
    with pytest.raises(ConfigurationError, match="tokenizer"):
        agentkit.Agent(
            ScriptedEngine([]), truncation={"mode": "tokens", "limit": 10}, profile="qwen3"
        )


# --- context compaction -----------------------------------------------------------------


class CharEngine:
    """Character-level tokens; scripted outputs; records prompts."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(map(chr, ids))

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        text = self.outputs[len(self.requests) - 1]
        yield GenerationChunk(text=text, token_ids=self.encode(text))
        yield GenerationChunk(text="", finish_reason="stop", usage=Usage())


@agentkit.tool
def dump(key: str) -> str:
    """A big output."""
    return f"{key}:" + "x" * 600


def think_call(i: int) -> str:
    return f"<think>\nreasoning {i} " + "r" * 200 + "\n</think>\n\n" + hermes("dump", key=f"k{i}")


async def test_compaction_removes_old_reasoning_then_old_outputs_and_says_so() -> None:
    profile = dataclasses.replace(
        get_profile("qwen3"), name="qwen3-small", context_window=2600, compaction_threshold=1.0
    )
    engine = CharEngine([think_call(i) for i in range(4)] + ["All done."])
    agent = agentkit.Agent(engine, tools=[dump], profile=profile, max_tokens=100)
    events = []
    async with agent.stream("go") as stream:
        async for event in stream:
            events.append(event)
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert compactions
    first = compactions[0]
    assert first.reasoning_blocks >= 1
    assert first.tokens_after + 100 <= 2600 < first.tokens_before + 100
    for request in engine.requests:
        assert request.prompt_token_ids is not None
        assert len(request.prompt_token_ids) + 100 <= 2600
    last = engine.requests[-1].prompt
    assert TOOL_OUTPUT_REMOVED.split(":")[0] in last
    assert "reasoning 0 " not in last  # old reasoning went first
    assert "reasoning 3 " in last  # the newest assistant message keeps its reasoning
    turns = [e for e in events if isinstance(e, TurnComplete)]
    assert any(t.prompt_rebuilt == "context compaction" for t in turns)
    # Nothing is lost from the transcript.
    transcript = stream.result.transcript
    assert all(
        b.content.endswith("x" * 600)
        for m in transcript
        for b in m.content
        if isinstance(b, ToolResultBlock)
    )
    assert sum(isinstance(b, ReasoningBlock) for m in transcript for b in m.content) == 4


async def test_a_prompt_that_cannot_fit_is_a_typed_error_with_the_transcript() -> None:
    profile = dataclasses.replace(get_profile("qwen3"), name="tiny-window", context_window=50)
    agent = agentkit.Agent(CharEngine(["x"]), profile=profile, system="s" * 100)
    with pytest.raises(ContextWindowExceeded) as raised:
        await agent.run("go")
    assert raised.value.transcript is not None
    assert raised.value.transcript.messages[-1].text == "go"


def test_replay_view_shares_unchanged_messages() -> None:
    transcript = interleaved_transcript()
    same = replay_view(transcript)
    assert same is transcript
    view = replay_view(transcript, {2})
    assert view.messages[1] is transcript.messages[1]
    assert view.messages[2] is not transcript.messages[2]
    assert isinstance(transcript.messages[2].content[0], ReasoningBlock)
    assert not any(isinstance(b, ReasoningBlock) for b in view.messages[2].content)


def test_profiles_validate_their_policies() -> None:
    qwen3 = get_profile("qwen3")
    with pytest.raises(ConfigurationError, match="replay"):
        dataclasses.replace(qwen3, replay="often")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="context_window"):
        dataclasses.replace(qwen3, context_window=0)
    with pytest.raises(ConfigurationError, match="compaction_threshold"):
        dataclasses.replace(qwen3, compaction_threshold=1.5)
    assert isinstance(qwen3, Profile)
    assert Message(role="user").text == ""
