"""The agent loop end to end on the scripted engine."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator

import anyio
import pytest
from _hermes import hermes

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine
from agentkit.errors import EngineError, MaxTurnsExceeded, ScriptExhaustedError
from agentkit.events import ToolCallComplete, ToolCallStarted, ToolResultEvent
from agentkit.transcript import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

pytestmark = pytest.mark.anyio


class CountingEngine:
    """Wraps an engine and counts the chunks it has streamed: the test's clock."""

    def __init__(self, inner: ScriptedEngine) -> None:
        self.inner = inner
        self.chunks = 0
        self.closed = 0

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        try:
            async for chunk in self.inner.generate(request):
                self.chunks += 1
                yield chunk
        finally:
            self.closed += 1


async def test_interleaved_turn_dispatches_each_tool_as_its_call_completes() -> None:
    tail = "".join(f" w{i}" for i in range(50))
    script = [
        "<think>r0</think>"
        + hermes("tool_a", x=1)
        + "<think>r1</think>"
        + hermes("tool_b", y="two")
        + tail,
        "done",
    ]
    engine = CountingEngine(ScriptedEngine(script, token_delay=0.01))
    started_at: dict[str, int] = {}
    b_finished = anyio.Event()

    @agentkit.tool
    async def tool_a(x: int) -> str:
        """A slow tool: finishes only after B, so results must be reordered by call."""
        started_at["a"] = engine.chunks
        await b_finished.wait()
        return f"a{x}"

    @agentkit.tool
    async def tool_b(y: str) -> str:
        """A fast tool."""
        started_at["b"] = engine.chunks
        b_finished.set()
        return f"b{y}"

    agent = agentkit.Agent(engine=engine, tools=[tool_a, tool_b], profile="qwen3")
    seen: list[tuple[str, str, int]] = []
    async with agent.stream("go") as events:
        async for event in events:
            if isinstance(event, ToolCallStarted | ToolCallComplete):
                seen.append((event.type, event.name, engine.chunks))
            if isinstance(event, ToolResultEvent):
                seen.append((event.type, event.name, engine.chunks))
    first_turn_chunks = len(ScriptedEngine([script[0]])._outputs[0].chunks)

    b_call_parsed = next(c for t, n, c in seen if t == "tool_call_complete" and n == "tool_b")
    b_call_began = next(c for t, n, c in seen if t == "tool_call_started" and n == "tool_b")
    # A's tool ran before B's call had even begun to be parsed...
    assert started_at["a"] < b_call_began
    # ...and both tools started well before the turn's stream ended.
    assert started_at["b"] <= b_call_parsed < first_turn_chunks - 40
    # B's result arrived first (A waited for it), but the transcript is in call order.
    results = [(t, n) for t, n, _ in seen if t == "tool_result"]
    assert results == [("tool_result", "tool_b"), ("tool_result", "tool_a")]

    transcript = events.result.transcript
    assistant = transcript.messages[1]
    assert [type(b) for b in assistant.content] == [
        ReasoningBlock,
        ToolCallBlock,
        ReasoningBlock,
        ToolCallBlock,
        TextBlock,
    ]
    assert [b.text for b in assistant.content if isinstance(b, ReasoningBlock)] == ["r0", "r1"]
    tool_message = transcript.messages[2]
    assert tool_message.role == "tool"
    contents = [(b.name, b.content) for b in tool_message.content if isinstance(b, ToolResultBlock)]
    assert contents == [("tool_a", "a1"), ("tool_b", "btwo")]
    assert events.result.output_text == "done"
    # Nothing the model produced was lost.
    assert assistant.raw == script[0]


async def test_bad_model_output_becomes_error_results_and_the_run_goes_on() -> None:
    @agentkit.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    script = [
        hermes("add", a=1, b=2)
        + '<tool_call>\n{"name": "add", "arguments": {"a": 1,, }}\n</tool_call>'
        + hermes("subtract", a=1, b=2)
        + hermes("add", a="one", b=2)
        + '<tool_call>\n{"name": "add", "arguments": {"a": 4',
        "Recovered.",
    ]
    agent = agentkit.Agent(engine=ScriptedEngine(script), tools=[add], profile="qwen3")
    result = await agent.run("add things")

    assistant, tools = result.transcript.messages[1], result.transcript.messages[2]
    assert assistant.raw == script[0]
    calls = assistant.tool_calls
    assert len(calls) == 5
    assert calls[1].error is not None
    assert calls[4].error is not None
    outcomes = [b for b in tools.content if isinstance(b, ToolResultBlock)]
    assert [r.call_id for r in outcomes] == [c.id for c in calls]
    assert outcomes[0].content == "3"
    assert not outcomes[0].is_error
    assert all(r.is_error for r in outcomes[1:])
    assert "subtract" in outcomes[2].content
    assert "add" in outcomes[2].content
    assert "a" in outcomes[3].content
    assert result.output_text == "Recovered."


async def test_second_prompt_extends_first_prompt_with_the_exact_output() -> None:
    @agentkit.tool
    def echo(text: str) -> str:
        """Echo text."""
        return text

    first = "<think>\nplan\n</think>\n\n" + hermes("echo", text="hi")
    engine = ScriptedEngine([first, "bye"])
    agent = agentkit.Agent(engine=engine, tools=[echo], system="be brief", profile="qwen3")
    await agent.run("hello")

    p1, p2 = (r.prompt for r in engine.requests)
    assert p2.startswith(p1 + first)
    assert "<tool_response>\nhi\n</tool_response>" in p2[len(p1) :]
    assert "be brief" in p1
    assert '"name": "echo"' in p1


async def test_max_turns_keeps_the_transcript() -> None:
    @agentkit.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    engine = ScriptedEngine([hermes("ping"), hermes("ping")])
    agent = agentkit.Agent(engine=engine, tools=[ping], max_turns=2, profile="qwen3")
    with pytest.raises(MaxTurnsExceeded) as info:
        await agent.run("loop")
    assert info.value.transcript is not None
    roles = [m.role for m in info.value.transcript.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]


async def test_exhausted_script_is_a_typed_error_with_the_transcript() -> None:
    @agentkit.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = agentkit.Agent(engine=ScriptedEngine([hermes("ping")]), tools=[ping], profile="qwen3")
    with pytest.raises(ScriptExhaustedError) as info:
        await agent.run("go")
    transcript = info.value.transcript
    assert transcript is not None
    # The failed request produced nothing: no empty assistant message is left behind.
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool"]


async def test_engine_failure_mid_stream_keeps_what_was_produced() -> None:
    engine = ScriptedEngine([["<think>", "half a thought", RuntimeError("GPU fell over")]])
    agent = agentkit.Agent(engine=engine, profile="qwen3")
    with pytest.raises(EngineError, match="GPU fell over") as info:
        await agent.run("go")
    assert info.value.transcript is not None
    assistant = info.value.transcript.messages[-1]
    assert assistant.content == [ReasoningBlock(text="half a thought", raw="<think>half a thought")]


async def test_leaving_the_stream_early_aborts_generation_and_tools() -> None:
    cancelled = anyio.Event()

    @agentkit.tool
    async def slow() -> str:
        """Never finishes on its own."""
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "unreachable"

    engine = CountingEngine(ScriptedEngine([hermes("slow") + " and more" * 50], token_delay=0.001))
    agent = agentkit.Agent(engine=engine, tools=[slow], profile="qwen3")
    async with agent.stream("go") as events:
        async for event in events:
            if event.type == "tool_call_complete":
                break
    assert engine.closed == 1
    assert cancelled.is_set()


async def test_plain_async_for_runs_to_completion() -> None:
    agent = agentkit.Agent(engine=ScriptedEngine(["<think>a</think>Hi there"]), profile="qwen3")
    types = [event.type async for event in agent.stream("hi")]
    assert types[0] == "reasoning_delta"
    assert types[-2:] == ["turn_complete", "run_complete"]
    assert "text_delta" in types


async def test_usage_and_json_round_trip() -> None:
    agent = agentkit.Agent(
        engine=ScriptedEngine(["<think>x</think>" + "word " * 10]), profile="qwen3"
    )
    result = await agent.run("count")
    assert result.usage.output_tokens > 0
    assert result.usage.prompt_tokens > 0
    assert len(result.usage.turns) == 1
    restored = Transcript.model_validate_json(result.transcript.model_dump_json())
    assert restored == result.transcript


async def test_qwen3_coder_profile_converts_values_by_schema() -> None:
    seen: list[tuple[str, int]] = []

    @agentkit.tool
    def write(path: str, lines: int) -> str:
        """Pretend to write."""
        seen.append((path, lines))
        return "ok"

    call = (
        "<tool_call>\n<function=write>\n<parameter=path>\n/tmp/a b.txt\n</parameter>\n"
        "<parameter=lines>\n12\n</parameter>\n</function>\n</tool_call>"
    )
    engine = ScriptedEngine([call, "written"])
    agent = agentkit.Agent(engine=engine, tools=[write], profile="qwen3-coder")
    result = await agent.run("write it")
    assert seen == [("/tmp/a b.txt", 12)]
    assert result.output_text == "written"
    assert "<function>\n<name>write</name>" in engine.requests[0].prompt


async def test_tool_timeout_becomes_an_error_result() -> None:
    @agentkit.tool(timeout=0.01)
    async def hang() -> str:
        """Hangs."""
        await anyio.sleep_forever()
        return "never"

    agent = agentkit.Agent(
        engine=ScriptedEngine([hermes("hang"), "gave up"]), tools=[hang], profile="qwen3"
    )
    result = await agent.run("go")
    outcome = result.transcript.messages[2].content[0]
    assert isinstance(outcome, ToolResultBlock)
    assert outcome.is_error
    assert "timed out" in outcome.content or "timeout" in outcome.content.lower()


async def test_one_structured_log_record_per_turn_and_per_tool_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @agentkit.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    agent = agentkit.Agent(
        engine=ScriptedEngine([hermes("ping"), "ok"]), tools=[ping], profile="qwen3"
    )
    with caplog.at_level(logging.INFO, logger="agentkit"):
        await agent.run("go")
    turns = [r for r in caplog.records if "event='turn'" in r.getMessage()]
    calls = [r for r in caplog.records if "event='tool_call'" in r.getMessage()]
    assert len(turns) == 2
    assert len(calls) == 1
    assert "output_tokens=" in turns[0].getMessage()


async def test_thinking_off_renders_the_templates_switch_and_parses_no_reasoning() -> None:
    """``Agent(thinking=False)`` on Nemotron-3: the generation prompt closes an empty block, as
    its template does with ``enable_thinking=False``, and the answer is text, not reasoning."""
    nemotron = agentkit.profiles.get_profile("nemotron")
    engine = ScriptedEngine(["Four."])
    agent = agentkit.Agent(engine=engine, profile=nemotron, thinking=False)
    result = await agent.run("2 + 2?")
    assert result.output_text == "Four."
    assert engine.requests[0].prompt.endswith("<|im_start|>assistant\n<think></think>")
    on = ScriptedEngine(["Hm.</think>Four."])
    thinking = await agentkit.Agent(engine=on, profile=nemotron).run("2 + 2?")
    assert on.requests[0].prompt.endswith("<|im_start|>assistant\n<think>\n")
    assert thinking.output_text == "Four."
    # A profile without a switch ignores the request.
    assert agentkit.Agent(engine=engine, profile="llama3", thinking=False).thinking
