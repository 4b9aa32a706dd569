"""The event channel between an agent run's producer and its consumer, and Agent.run's
producer-less path."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

import agentkit
from agentkit._channel import EventChannel
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine, Usage

pytestmark = pytest.mark.anyio


async def test_items_come_out_in_order_then_end_of_stream() -> None:
    channel = EventChannel[int]()
    for i in range(3):
        channel.send_nowait(i)
    await channel.send(3)
    channel.close()
    assert [await channel.receive() for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(anyio.EndOfStream):
        await channel.receive()


async def test_a_queued_item_is_received_without_yielding_to_the_event_loop() -> None:
    # anyio's memory streams checkpoint on every receive: one more event-loop pass a token.
    channel = EventChannel[str]()
    channel.send_nowait("queued")
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    async with anyio.create_task_group() as group:
        group.start_soon(other)
        assert await channel.receive() == "queued"
        assert not ran
    assert ran


async def test_receive_waits_for_a_send() -> None:
    channel = EventChannel[str]()
    received: list[str] = []

    async def consume() -> None:
        received.append(await channel.receive())

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        assert received == []
        channel.send_nowait("late")
    assert received == ["late"]


async def test_close_wakes_a_waiting_consumer() -> None:
    channel = EventChannel[int]()
    ended = False

    async def consume() -> None:
        nonlocal ended
        with pytest.raises(anyio.EndOfStream):
            await channel.receive()
        ended = True

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        channel.close()
    assert ended


async def test_a_cancelled_receive_loses_nothing() -> None:
    channel = EventChannel[int]()
    with anyio.move_on_after(0.01):
        await channel.receive()
    channel.send_nowait(7)
    assert await channel.receive() == 7


async def test_sending_after_close_is_an_error_and_after_discard_a_no_op() -> None:
    channel = EventChannel[int]()
    channel.send_nowait(1)
    channel.discard()
    channel.send_nowait(2)  # the consumer is gone: dropped
    channel.close()
    with pytest.raises(anyio.EndOfStream):
        await channel.receive()
    with pytest.raises(anyio.ClosedResourceError):
        channel.send_nowait(3)


class _TaskRecordingEngine:
    """Streams a fixed answer and records the task each request was generated in."""

    def __init__(self) -> None:
        self.tasks: list[int] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.tasks.append(anyio.get_current_task().id)
        for piece in ("The ", "answer."):
            await anyio.lowlevel.checkpoint()
            yield GenerationChunk(text=piece, token_ids=[1])
        yield GenerationChunk(text="", finish_reason="stop", usage=Usage(3, 0, 2))


async def test_run_generates_in_the_callers_task() -> None:
    # No producer task and no consumer: a token costs no task switch beyond the engine's.
    engine = _TaskRecordingEngine()
    result = await agentkit.Agent(engine, profile="qwen3").run("Hi")
    assert result.output_text == "The answer."
    assert engine.tasks == [anyio.get_current_task().id]


async def test_stream_generates_in_a_task_of_its_own() -> None:
    engine = _TaskRecordingEngine()
    async with agentkit.Agent(engine, profile="qwen3").stream("Hi") as events:
        kinds = [event.type async for event in events]
    assert kinds[-1] == "run_complete"
    assert engine.tasks != [anyio.get_current_task().id]


async def test_run_raises_the_runs_error_with_its_transcript() -> None:
    engine = ScriptedEngine([])  # nothing scripted: the engine fails the first request
    with pytest.raises(agentkit.errors.RunError) as caught:
        await agentkit.Agent(engine, profile="qwen3").run("Hi")
    assert caught.value.transcript is not None
    assert caught.value.transcript.messages[0].role == "user"


async def test_drain_takes_what_is_queued() -> None:
    channel = EventChannel[int]()
    assert channel.drain() == []
    for i in range(3):
        channel.send_nowait(i)
    assert await channel.receive() == 0
    assert channel.drain() == [1, 2]
    assert channel.drain() == []
    channel.send_nowait(3)
    channel.close()
    assert channel.drain() == [3]
    with pytest.raises(anyio.EndOfStream):
        await channel.receive()
