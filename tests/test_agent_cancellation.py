"""Cancellation is cancellation: a run cancelled from another task, or abandoned by ``break``
out of a plain ``async for``, aborts its engine request and tools, and never ends looking
finished. Each race is run 50 times: the failures these tests guard against were timing
dependent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest
from _hermes import hermes

import agentkit
from agentkit.agent import AgentStream
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine
from agentkit.errors import RunCancelled

pytestmark = pytest.mark.anyio

RUNS = 50


def _queued_tool_result(stream: AgentStream) -> bool:
    """Whether the stream's producer has queued a tool result its consumer has not read yet
    (the moment the race needs: the consumer is woken but has not run)."""
    channel = stream._channel
    return channel is not None and any(e.type == "tool_result" for e in channel._items)


async def _cancel_b_when_its_tool_result_is_queued() -> str:
    @agentkit.tool
    async def ping() -> str:
        """Ping, a little later than the model's turn ends."""
        await anyio.sleep(0.002)
        return "pong"

    def agent(outputs: list[str]) -> agentkit.Agent:
        return agentkit.Agent(engine=ScriptedEngine(outputs), tools=[ping], profile="qwen3")

    a = agent(["word " * 200])
    b_stream = agent([hermes("ping"), "done"]).stream("go")
    scope_b = anyio.CancelScope()
    outcome = "not run"

    async def consume_b() -> None:
        nonlocal outcome
        with scope_b:
            async with b_stream as events:
                async for _ in events:
                    pass
                try:
                    _ = events.result
                    outcome = "finished"
                except RuntimeError as error:
                    outcome = f"looked finished: {error}"
                return
        outcome = "cancelled"

    async def consume_a() -> None:
        # A's consumer watches B and cancels B's scope at the racy moment.
        async with a.stream("go") as events:
            async for _ in events:
                if not scope_b.cancel_called and _queued_tool_result(b_stream):
                    scope_b.cancel()
        while outcome == "not run" and not scope_b.cancel_called:
            if _queued_tool_result(b_stream):
                scope_b.cancel()
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(consume_b)
        group.start_soon(consume_a)
    return outcome if scope_b.cancel_called else "not cancelled"


async def test_a_stream_cancelled_from_another_task_surfaces_as_cancelled() -> None:
    outcomes = [await _cancel_b_when_its_tool_result_is_queued() for _ in range(RUNS)]
    assert "cancelled" in outcomes
    assert set(outcomes) <= {"cancelled", "not cancelled"}, outcomes


async def test_a_stream_whose_run_is_cancelled_outside_its_consumer_raises_run_cancelled() -> None:
    # The stream is entered in one task and iterated in another: cancelling the first stops
    # the run, and the second, not cancelled itself, gets a typed error rather than an end.
    @agentkit.tool
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "unreachable"

    engine = ScriptedEngine([hermes("hang")])
    agent = agentkit.Agent(engine=engine, tools=[hang], profile="qwen3")
    handed: list[AgentStream] = []
    entered = anyio.Event()
    owner = anyio.CancelScope()

    async def own() -> None:
        with owner:
            async with agent.stream("go") as events:
                handed.append(events)
                entered.set()
                await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        group.start_soon(own)
        await entered.wait()
        events = handed[0]
        seen: list[str] = []

        async def consume() -> None:
            async for event in events:
                seen.append(event.type)
                if event.type == "tool_call_complete":
                    owner.cancel()

        with pytest.raises(RunCancelled) as info:
            await consume()
    assert "tool_call_complete" in seen
    assert info.value.transcript is not None
    with pytest.raises(RunCancelled):
        _ = events.result


_BREAK_SCRIPT = """
import json
import sys

import anyio

import agentkit
from agentkit.engine import ScriptedEngine

RUNS = int(sys.argv[1])
state = {"closed": 0, "tools_cancelled": 0}


class Engine:
    def __init__(self, outputs):
        self.inner = ScriptedEngine(outputs, token_delay=0.0005)

    async def generate(self, request):
        try:
            async for chunk in self.inner.generate(request):
                yield chunk
        finally:
            state["closed"] += 1


@agentkit.tool
async def slow() -> str:
    \"\"\"Never finishes on its own.\"\"\"
    try:
        await anyio.sleep_forever()
    finally:
        state["tools_cancelled"] += 1
    return "unreachable"


CALL = "<tool_call>\\n" + json.dumps({"name": "slow", "arguments": {}}) + "\\n</tool_call>"


async def main() -> None:
    for run in range(RUNS + 1):
        agent = agentkit.Agent(
            engine=Engine([CALL + " and more" * 50]), tools=[slow], profile="qwen3"
        )
        async for event in agent.stream("go"):
            if event.type == "tool_call_complete":
                break
        if run == RUNS:
            return  # the last run is left to the event loop's shutdown
        with anyio.fail_after(30):  # a hang guard, not a timing assertion
            while state["closed"] <= run or state["tools_cancelled"] <= run:
                await anyio.sleep(0.001)


anyio.run(main)
print(json.dumps(state))
"""


def test_break_out_of_a_plain_async_for_ends_the_run_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "break_out.py"
    script.write_text(textwrap.dedent(_BREAK_SCRIPT))
    done = subprocess.run(
        [sys.executable, str(script), str(RUNS)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # Every run's engine request was aborted and its tool cancelled, the last one at exit.
    assert json.loads(done.stdout) == {"closed": RUNS + 1, "tools_cancelled": RUNS + 1}


class _Watched:
    """A tool that never finishes, and an engine that streams a call to it then keeps
    talking: both record being stopped."""

    def __init__(self) -> None:
        self.tool_cancelled = anyio.Event()
        self.engine_closed = False
        self.inner = ScriptedEngine([hermes("slow") + " and more" * 200], token_delay=0.0005)

        @agentkit.tool
        async def slow() -> str:
            """Never finishes on its own."""
            try:
                await anyio.sleep_forever()
            finally:
                self.tool_cancelled.set()
            return "unreachable"

        self.agent = agentkit.Agent(engine=self, tools=[slow], profile="qwen3")

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        try:
            async for chunk in self.inner.generate(request):
                yield chunk
        finally:
            self.engine_closed = True


async def test_aclose_on_a_plain_iterator_stops_the_run_before_it_returns() -> None:
    watched = _Watched()
    events = aiter(watched.agent.stream("go"))
    async for event in events:
        if event.type == "tool_call_complete":
            break
    await events.aclose()  # type: ignore[attr-defined]
    assert watched.tool_cancelled.is_set()
    assert watched.engine_closed


async def test_cancelling_a_plain_async_for_stops_the_run() -> None:
    watched = _Watched()
    seen: list[str] = []
    with anyio.CancelScope() as scope:
        async for event in watched.agent.stream("go"):
            seen.append(event.type)
            if event.type == "tool_call_complete":
                scope.cancel()
    assert scope.cancelled_caught
    with anyio.fail_after(10):  # a hang guard, not a timing assertion
        await watched.tool_cancelled.wait()
    assert watched.engine_closed


async def test_a_plain_async_for_raises_the_runs_error() -> None:
    engine = ScriptedEngine([["partial", RuntimeError("GPU fell over")]])
    agent = agentkit.Agent(engine=engine, profile="qwen3")
    stream = agent.stream("go")
    seen: list[str] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event.type)

    with pytest.raises(agentkit.EngineError, match="GPU fell over"):
        await consume()
    assert "text_delta" in seen
    with pytest.raises(agentkit.EngineError):
        _ = stream.result


async def test_a_plain_async_for_raises_a_crash_as_itself() -> None:
    def options(turn: int, transcript: agentkit.Transcript) -> dict[str, object]:
        raise ValueError("a bug in the caller's options")

    agent = agentkit.Agent(engine=ScriptedEngine(["hi"]), profile="qwen3", request_options=options)

    async def consume() -> None:
        async for _ in agent.stream("go"):
            pass

    with pytest.raises(ValueError, match="a bug in the caller's options"):
        await consume()
