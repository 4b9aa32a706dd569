"""The in-memory response store (``agentkit serve --turn-store memory``) is bounded in bytes as
well as in responses, as the turn file is: a few large responses cannot grow the server's
memory without bound."""

from __future__ import annotations

import pytest

from agentkit.server._response_store import MissingResponse, ResponseStore, StoredResponse
from agentkit.transcript import Message, TextBlock


def stored(response_id: str, previous: str | None = None, *, size: int = 1000) -> StoredResponse:
    text = "x" * size
    turn = Message(role="assistant", content=[TextBlock(text=text, raw=text)], token_ids=[1])
    response = {"id": response_id, "object": "response", "output": []}
    question = {"id": f"in_{response_id}", "type": "message", "role": "user", "content": "q"}
    return StoredResponse(response_id, previous, response, [question], turn)


def size_of(response: StoredResponse) -> int:
    return len(response.encode().encode())


def test_the_oldest_responses_go_once_the_bytes_exceed_the_bound() -> None:
    one = size_of(stored("resp_0"))
    store = ResponseStore(max_responses=100, max_bytes=3 * one + 10)
    for i in range(5):
        store.put(stored(f"resp_{i}"))
    assert len(store) == 3  # far below max_responses: the bytes decided
    assert store.nbytes == 3 * one
    assert store.get("resp_0") is None
    assert store.get("resp_1") is None
    assert store.get("resp_4") is not None


def test_a_large_response_evicts_as_many_small_ones_as_it_needs() -> None:
    small = size_of(stored("resp_a", size=100))
    store = ResponseStore(max_bytes=10 * small)
    for i in range(10):
        store.put(stored(f"resp_{i}", size=100))
    assert len(store) == 10
    big = stored("resp_big", size=100 * 5)
    store.put(big)
    assert store.nbytes <= 10 * small
    assert store.get("resp_big") is not None
    kept = [i for i in range(10) if store.get(f"resp_{i}") is not None]
    assert kept == list(range(10 - len(kept), 10))  # the least recently used went first
    assert len(kept) < 10


def test_a_conversation_in_use_is_kept_and_deleting_frees_its_bytes() -> None:
    one = size_of(stored("resp_0"))
    store = ResponseStore(max_bytes=3 * one + 10)
    store.put(stored("resp_0"))
    store.put(stored("resp_1", "resp_0"))
    store.put(stored("resp_x"))
    store.history("resp_1")  # continuing resp_1 touches its chain: resp_x is now the oldest
    store.put(stored("resp_2", "resp_1"))
    assert store.get("resp_x") is None
    assert len(store.history("resp_2").items) == 3
    assert store.delete("resp_2")
    assert store.nbytes == 2 * one
    with pytest.raises(MissingResponse):
        store.history("resp_2")


def test_a_response_larger_than_the_bound_is_not_kept() -> None:
    store = ResponseStore(max_bytes=100)
    store.put(stored("resp_0", size=1000))
    assert store.get("resp_0") is None
    assert store.nbytes == 0
    with pytest.raises(ValueError, match="max_bytes"):
        ResponseStore(max_bytes=0)
