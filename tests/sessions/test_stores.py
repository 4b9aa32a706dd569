"""The session stores on their own: turns, the turn-count check, list / delete / fork, the
file format, both implementations held to the same contract."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.errors import AgentkitError, RunError
from agentkit.sessions import (
    SCHEMA_VERSION,
    MemorySessionStore,
    SessionConflictError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionStore,
    SessionStoreError,
    SQLiteSessionStore,
)
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    made: SessionStore = (
        MemorySessionStore()
        if request.param == "memory"
        else SQLiteSessionStore(tmp_path / "sessions.db")
    )
    async with made:
        yield made


def user(text: str) -> Message:
    return Message(role="user", content=[TextBlock(text=text)])


def assistant(text: str, ids: list[int] | None = None) -> Message:
    return Message(role="assistant", content=[TextBlock(text=text, raw=text)], token_ids=ids)


async def test_turns_append_in_order_and_load_as_written(store: SessionStore) -> None:
    session = store.session("s")
    assert await session.turns() == []
    assert await session.append([user("hi"), assistant("hello", [5, 6])], expected_turns=0) == 1
    assert await session.append([user("again"), assistant("yes", [7])], expected_turns=1) == 2
    turns = await session.turns()
    assert [t.index for t in turns] == [0, 1]
    assert turns[0].messages == (user("hi"), assistant("hello", [5, 6]))
    transcript = await session.transcript()
    assert [m.text for m in transcript] == ["hi", "hello", "again", "yes"]
    assert transcript.messages[1].token_ids == [5, 6]


async def test_a_stale_turn_count_is_a_conflict_and_writes_nothing(store: SessionStore) -> None:
    session = store.session("s")
    await session.append([user("one")], expected_turns=0)
    with pytest.raises(SessionConflictError) as caught:
        await session.append([user("two")], expected_turns=0)
    assert (caught.value.session_id, caught.value.expected_turns) == ("s", 0)
    assert caught.value.actual_turns == 1
    assert isinstance(caught.value, RunError)
    assert isinstance(caught.value, SessionError)
    with pytest.raises(SessionConflictError) as missing:
        await store.append("absent", [user("x")], expected_turns=3)
    assert missing.value.actual_turns is None
    assert len(await session.turns()) == 1
    assert await store.session("absent").turns() == []


async def test_list_and_delete(store: SessionStore) -> None:
    for name in ["b", "a", "c"]:
        await store.append(name, [user(name)], expected_turns=0)
    await store.append("b", [user("b2")], expected_turns=1)
    infos = await store.list_sessions()
    assert [(i.id, i.turns) for i in infos] == [("a", 1), ("b", 2), ("c", 1)]
    assert all(i.created_at <= i.updated_at for i in infos)
    assert await store.session("b").delete() is True
    assert await store.delete("b") is False
    assert [i.id for i in await store.list_sessions()] == ["a", "c"]
    assert await store.session("b").turns() == []
    # a deleted session starts again from nothing
    assert await store.append("b", [user("new")], expected_turns=0) == 1


async def test_fork_copies_turns_up_to_a_point(store: SessionStore) -> None:
    source = store.session("main")
    for i in range(3):
        await source.append([user(f"q{i}"), assistant(f"a{i}", [i])], expected_turns=i)
    whole = await source.fork("copy")
    assert await whole.transcript() == await source.transcript()
    early = await store.fork("main", "early", turns=1)
    assert [m.text for m in await early.transcript()] == ["q0", "a0"]
    # the fork goes its own way; the original is unchanged
    assert await early.append([user("other")], expected_turns=1) == 2
    assert len(await source.turns()) == 3
    empty = await source.fork("empty", turns=0)
    assert await empty.turns() == []
    with pytest.raises(SessionExistsError):
        await source.fork("early")
    with pytest.raises(SessionNotFoundError) as missing:
        await store.fork("nothing", "x")
    assert missing.value.session_id == "nothing"
    with pytest.raises(ValueError, match="3 turns"):
        await source.fork("too-far", turns=4)
    assert [i.id for i in await store.list_sessions()] == ["copy", "early", "empty", "main"]


async def test_bad_session_ids_are_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        store.session("")
    with pytest.raises(ValueError, match="non-empty"):
        await store.load("")


_text = st.text(max_size=30)
_ids = st.none() | st.lists(st.integers(min_value=0, max_value=2**31), max_size=20)
_blocks = st.lists(
    st.one_of(
        st.builds(TextBlock, text=_text, raw=st.none() | _text),
        st.builds(ReasoningBlock, text=_text, raw=st.none() | _text),
        st.builds(
            ToolCallBlock,
            id=_text,
            name=_text,
            arguments=st.dictionaries(_text, st.integers() | _text | st.none(), max_size=3),
            raw=st.none() | _text,
        ),
        st.builds(
            ToolResultBlock, call_id=_text, name=_text, content=_text, is_error=st.booleans()
        ),
    ),
    max_size=4,
)
_messages = st.lists(
    st.builds(
        Message,
        role=st.sampled_from(["system", "user", "assistant", "tool"]),
        content=_blocks,
        token_ids=_ids,
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_any_messages_round_trip_exactly(kind: str, tmp_path: Path) -> None:
    """Whatever a transcript holds (any text, surrogate-free unicode, token ids) loads back
    equal, and serialises to the same JSON."""
    store: SessionStore = (
        MemorySessionStore() if kind == "memory" else SQLiteSessionStore(tmp_path / "p.db")
    )
    counter = iter(range(10_000))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(turns=st.lists(_messages, min_size=1, max_size=3))
    def check(turns: list[list[Message]]) -> None:
        async def go() -> None:
            session = store.session(f"s{next(counter)}")
            for i, messages in enumerate(turns):
                await session.append(messages, expected_turns=i)
            loaded = await session.turns()
            assert [list(t.messages) for t in loaded] == turns
            flat = Transcript(messages=[m for t in turns for m in t])
            assert (await session.transcript()).model_dump_json() == flat.model_dump_json()

        anyio.run(go)

    check()
    anyio.run(store.aclose)


async def test_the_file_is_wal_versioned_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        await store.append("a", [user("kept")], expected_turns=0)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    connection.close()
    async with SQLiteSessionStore(path) as again:
        assert [m.text for m in await again.session("a").transcript()] == ["kept"]


async def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    async with SQLiteSessionStore(path) as store:
        with pytest.raises(SessionStoreError, match="upgrade agentkit"):
            await store.list_sessions()


async def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "c.db")
    await store.append("a", [user("x")], expected_turns=0)
    await store.aclose()
    await store.aclose()  # twice is harmless
    with pytest.raises(SessionStoreError, match="closed") as caught:
        await store.load("a")
    assert isinstance(caught.value, AgentkitError)


async def test_two_stores_on_one_file_see_each_other_and_conflict(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteSessionStore(path) as one, SQLiteSessionStore(path) as two:
        await one.append("s", [user("from one")], expected_turns=0)
        assert [m.text for m in await two.session("s").transcript()] == ["from one"]
        await two.append("s", [user("from two")], expected_turns=1)
        with pytest.raises(SessionConflictError):
            await one.append("s", [user("stale")], expected_turns=1)
        assert len(await one.load("s")) == 2


def test_synchronous_must_be_known(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteSessionStore(tmp_path / "x.db", synchronous="off")  # type: ignore[arg-type]


def test_the_package_exports_exactly_its_api() -> None:
    import agentkit.sessions as sessions

    assert sessions.__all__ == sorted(sessions.__all__, key=lambda n: (not n.isupper(), n))
    assert set(sessions.__all__) == {
        "SCHEMA_VERSION",
        "MemorySessionStore",
        "SQLiteSessionStore",
        "Session",
        "SessionConflictError",
        "SessionError",
        "SessionExistsError",
        "SessionInfo",
        "SessionNotFoundError",
        "SessionRun",
        "SessionStore",
        "SessionStoreError",
        "SessionTurn",
    }
    for name in sessions.__all__:
        assert getattr(sessions, name) is not None


async def test_what_a_load_returns_is_a_copy(store: SessionStore) -> None:
    written = [assistant("kept", [1, 2])]
    await store.append("c", written, expected_turns=0)
    assert written[0].token_ids is not None
    written[0].token_ids.append(3)  # the caller's message changes after the write
    [turn] = await store.load("c")
    assert turn.messages[0].token_ids == [1, 2]
    assert turn.messages[0].token_ids is not None
    turn.messages[0].token_ids.append(9)  # so does a loaded one
    [again] = await store.load("c")
    assert again.messages[0].token_ids == [1, 2]
