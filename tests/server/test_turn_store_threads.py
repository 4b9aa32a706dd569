"""The turn store is shared by the worker threads that convert requests (restoring turns)
and the event loop that remembers finished ones: concurrent calls never trip over each other
(a turn evicted between a lookup and its move to the front used to raise ``KeyError``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from agentkit.server._turns import TurnStore
from agentkit.transcript import Message, TextBlock


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    """Make the interpreter switch threads as often as it can, so races show."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.usefixtures("frequent_switches")
def test_concurrent_remember_and_restore() -> None:
    store = TurnStore(max_turns=2)
    messages = [
        Message(role="assistant", content=[TextBlock(text=f"t{i}", raw=f"t{i}")], token_ids=[i])
        for i in range(8)
    ]
    errors: list[BaseException] = []

    def remember() -> None:
        for n in range(20_000):
            store.remember(messages[n % 8])

    def restore() -> None:
        for n in range(20_000):
            found = store.restore(messages[n % 8].content)
            assert found is None or found.token_ids == messages[n % 8].token_ids

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as error:
                errors.append(error)

        return run

    threads = [threading.Thread(target=guarded(w)) for w in (remember, restore) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store) == 2
