"""How the event channel's consumer sleeps: a bare future of the running asyncio loop (the
per-token path), anyio's portable event elsewhere, and neither left stale by a cancellation."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from agentkit import _channel
from agentkit._channel import EventChannel

pytestmark = pytest.mark.anyio


async def _ping_pong(channel: EventChannel[int], count: int) -> list[int]:
    """A producer that sends one item per pass of the event loop, as an engine's chunks come,
    so that the consumer sleeps and is woken for each item."""
    received: list[int] = []

    async def produce() -> None:
        for i in range(count):
            await anyio.lowlevel.checkpoint()
            channel.send_nowait(i)
        channel.close()

    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        while True:
            try:
                received.append(await channel.receive())
            except anyio.EndOfStream:
                break
    return received


async def test_each_item_wakes_the_waiting_consumer() -> None:
    assert await _ping_pong(EventChannel[int](), 50) == list(range(50))


async def test_without_an_asyncio_loop_the_consumer_waits_on_an_anyio_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What trio sees: asyncio.get_running_loop raises, and the channel falls back.
    def no_loop() -> asyncio.AbstractEventLoop:
        raise RuntimeError("no running event loop")

    monkeypatch.setattr(_channel, "get_running_loop", no_loop)
    channel = EventChannel[int]()
    waiters: list[object] = []

    async def watch() -> None:
        await anyio.wait_all_tasks_blocked()
        waiters.append(channel._waiter)
        channel.send_nowait(1)

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        assert await channel.receive() == 1
    assert isinstance(waiters[0], anyio.Event)


async def test_a_wake_after_a_cancelled_wait_is_harmless_and_the_next_wait_works() -> None:
    channel = EventChannel[int]()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await channel.receive()
    assert channel._waiter is None  # the cancelled future is not left for the next wait
    channel.close()  # wakes nobody; must not resolve a cancelled future
    with pytest.raises(anyio.EndOfStream):
        await channel.receive()
    assert await _ping_pong(EventChannel[int](), 3) == [0, 1, 2]
