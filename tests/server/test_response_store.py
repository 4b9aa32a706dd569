"""The stored responses behind ``previous_response_id``: in memory and in the turn file (one
file, one writer with the turns), their chains, deletion and eviction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkit.server._response_store import (
    MissingResponse,
    ResponseStore,
    StoredResponse,
    response_store,
)
from agentkit.server._turn_file import SCHEMA_VERSION, SQLiteTurnStore
from agentkit.server._turns import TurnStore
from agentkit.transcript import Message, TextBlock


def turn(text: str) -> Message:
    return Message(
        role="assistant",
        content=[TextBlock(text=text, raw=f"{text}\n")],
        token_ids=[ord(c) for c in text],
    )


def stored(response_id: str, previous: str | None = None) -> StoredResponse:
    text = f"answer {response_id}"
    output = {
        "id": f"msg_{response_id}",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    question = {"id": f"in_{response_id}", "type": "message", "role": "user", "content": "q"}
    response = {"id": response_id, "object": "response", "output": [output]}
    return StoredResponse(response_id, previous, response, [question], turn(text))


def chain(store: ResponseStore, n: int) -> list[str]:
    ids = [f"resp_{i}" for i in range(n)]
    for i, response_id in enumerate(ids):
        store.put(stored(response_id, ids[i - 1] if i else None))
    return ids


def make(tmp_path: Path, kind: str, **bounds: int) -> tuple[ResponseStore, Callable[[], None]]:
    """A response store of ``kind`` and what waits for its queued writes."""
    if kind == "memory":
        return ResponseStore(**bounds), lambda: None
    turns = SQLiteTurnStore(tmp_path / "turns.sqlite", **bounds)
    return turns.responses, turns.flush


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_chain_replays_every_response_oldest_first(tmp_path: Path, kind: str) -> None:
    store, _ = make(tmp_path, kind)
    ids = chain(store, 3)
    history = store.history(ids[-1])
    assert [i["id"] for i in history.items] == [x for r in ids for x in (f"in_{r}", f"msg_{r}")]
    exact = [m.raw for m in history.turns.values()]
    assert exact == [f"answer {r}\n" for r in ids]
    got = store.get(ids[1])
    assert got is not None
    assert got.previous == ids[0]
    assert got.turn == turn(f"answer {ids[1]}")
    with pytest.raises(MissingResponse) as missing:
        store.history("resp_none")
    assert missing.value.missing == "resp_none"


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_deleting_hides_a_response_its_successors_still_replay(tmp_path: Path, kind: str) -> None:
    store, _ = make(tmp_path, kind)
    ids = chain(store, 3)
    assert store.delete(ids[1])
    assert not store.delete(ids[1])
    assert store.get(ids[1]) is None
    with pytest.raises(MissingResponse):
        store.history(ids[1])
    assert len(store.history(ids[2]).items) == 6
    # Once nothing continues it, the deleted response goes (with the last one).
    assert store.delete(ids[2])
    assert len(store) == 1
    assert store.get(ids[0]) is not None


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_eviction_bounds_the_store(tmp_path: Path, kind: str) -> None:
    store, flush = make(tmp_path, kind, max_responses=3)
    ids = chain(store, 5)
    flush()
    assert len(store) == 3
    assert store.get(ids[0]) is None
    assert store.get(ids[4]) is not None
    with pytest.raises(MissingResponse) as broken:
        store.history(ids[4])
    assert broken.value.missing == ids[1]
    assert "no longer stored" in str(broken.value)


def test_the_file_keeps_responses_across_a_restart_in_its_scope(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    with SQLiteTurnStore(path, scope="model-a") as turns:
        ids = chain(turns.responses, 2)
        assert turns.responses.get(ids[1]) is not None  # found while its write is queued
    with SQLiteTurnStore(path, scope="model-a") as turns:
        history = turns.responses.history(ids[1])
        assert len(history.items) == 4
        first = next(iter(history.turns.values()))
        assert first.token_ids == [ord(c) for c in "answer resp_0"]
        assert turns.responses.delete(ids[0])
    with SQLiteTurnStore(path, scope="model-a") as turns:
        assert turns.responses.get(ids[0]) is None
        assert len(turns.responses.history(ids[1]).items) == 4
    with SQLiteTurnStore(path, scope="model-b") as turns:
        assert turns.responses.get(ids[1]) is None  # another model's token ids


def test_the_byte_bound_evicts_too(tmp_path: Path) -> None:
    size = len(stored("resp_0").encode().encode())
    with SQLiteTurnStore(tmp_path / "turns.sqlite", max_response_bytes=2 * size + 10) as turns:
        ids = chain(turns.responses, 4)
        turns.flush()
        assert len(turns.responses) == 2
        assert turns.responses.get(ids[1]) is None
        assert turns.responses.get(ids[3]) is not None


def test_a_version_1_file_gains_the_responses_table(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    kept = turn("kept")
    with SQLiteTurnStore(path) as turns:
        turns.remember(kept)
    connection = sqlite3.connect(path)
    connection.execute("DROP TABLE responses")
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()
    with SQLiteTurnStore(path) as turns:
        assert turns.restore(kept.content) == kept
        turns.responses.put(stored("resp_0"))
        turns.flush()
        assert turns.responses.get("resp_0") is not None
    connection = sqlite3.connect(path)
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    connection.close()
    assert version == SCHEMA_VERSION == 2


def test_the_store_for_a_turn_store(tmp_path: Path) -> None:
    memory = TurnStore()
    assert type(response_store(memory)) is ResponseStore
    turns = SQLiteTurnStore(tmp_path / "turns.sqlite")
    assert response_store(turns) is turns.responses
