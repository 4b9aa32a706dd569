"""Sessions in one SQLite file, through the standard library's ``sqlite3`` on a worker thread.

One connection per store, used by one worker thread at a time (an anyio capacity limiter of
one, and a thread lock behind it), so the event loop never waits on the disk and the
connection is never used from two threads at once. The file is in WAL mode: readers never
block the writer, and several stores (processes) can share it, SQLite's own file locks
serialising their writes (``timeout`` seconds of waiting before one gives up).

Each turn is one ``BEGIN IMMEDIATE`` transaction that checks the session's turn count, inserts
the turn and bumps the count: after a crash (the process killed at any point) the file opens
with every committed turn and nothing of the turn in progress. ``synchronous="normal"`` (the
default) keeps that guarantee for process crashes; ``"full"`` extends it to power loss at the
cost of a sync per turn.

``sqlite3`` is imported when a store is made, never by ``import agentkit``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from agentkit.sessions._errors import (
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
)
from agentkit.sessions._store import (
    Session,
    SessionInfo,
    SessionStore,
    SessionTurn,
    check_session_id,
    decode_messages,
    encode_messages,
    fork_count,
)
from agentkit.transcript import Message

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SCHEMA_VERSION", "SQLiteSessionStore"]

SCHEMA_VERSION = 1
"""The file format this release writes (``PRAGMA user_version``). A file with a higher
version was written by a newer agentkit and is refused rather than misread."""

_SCHEMA = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        turns INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE turns (
        session_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        messages TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, idx)
    ) WITHOUT ROWID""",
)

_T = TypeVar("_T")


class SQLiteSessionStore(SessionStore):
    """Sessions persisted in the SQLite file at ``path`` (created with its schema if absent).

    Args:
        path: the database file. Many sessions, and several processes, can share it.
        timeout: seconds a write waits for another process's write before failing.
        synchronous: ``"normal"`` survives process crashes; ``"full"`` also power loss.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: Literal["normal", "full"] = "normal",
    ) -> None:
        import sqlite3  # here, not at the top: `import agentkit` loads no database driver

        if synchronous not in ("normal", "full"):
            raise ValueError("synchronous must be 'normal' or 'full'")
        super().__init__()
        self.path = Path(path)
        self._sqlite = sqlite3
        self._timeout = timeout
        self._synchronous = synchronous
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._limiter = anyio.CapacityLimiter(1)
        self._thread_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLiteSessionStore({str(self.path)!r})"

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(connection)`` on the worker thread. Not cancellable once started: a
        transaction always finishes (committed or rolled back) before the caller moves on."""
        return await anyio.to_thread.run_sync(self._call, work, limiter=self._limiter)

    def _call(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._thread_lock:
            if self._closed:
                raise SessionStoreError(f"{self!r} is closed", session_id=None)
            if self._connection is None:
                self._connection = self._open()
            return work(self._connection)

    def _open(self) -> sqlite3.Connection:
        connection = self._sqlite.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            use_wal(connection)
            connection.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
            _transaction(connection, _migrate)
        except BaseException:
            connection.close()
            raise
        return connection

    async def aclose(self) -> None:
        def close(connection: sqlite3.Connection) -> None:
            connection.close()
            self._connection = None

        if self._closed:
            return
        if self._connection is not None:
            await self._run(close)
        self._closed = True

    async def load(self, session_id: str) -> list[SessionTurn]:
        check_session_id(session_id)

        def load(connection: sqlite3.Connection) -> list[SessionTurn]:
            rows = connection.execute(
                "SELECT idx, messages FROM turns WHERE session_id = ? ORDER BY idx",
                (session_id,),
            ).fetchall()
            return [SessionTurn(index, decode_messages(data)) for index, data in rows]

        return await self._run(load)

    async def append(
        self, session_id: str, messages: Sequence[Message], *, expected_turns: int
    ) -> int:
        check_session_id(session_id)
        message_list = list(messages)

        def append(connection: sqlite3.Connection) -> int:
            data = encode_messages(message_list)

            def write(connection: sqlite3.Connection) -> int:
                row = connection.execute(
                    "SELECT turns FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                actual: int | None = None if row is None else row[0]
                SessionConflictError.check(session_id, expected_turns, actual)
                now = time.time()
                if row is None:
                    connection.execute(
                        "INSERT INTO sessions VALUES (?, 1, ?, ?)", (session_id, now, now)
                    )
                else:
                    connection.execute(
                        "UPDATE sessions SET turns = turns + 1, updated_at = ? WHERE id = ?",
                        (now, session_id),
                    )
                connection.execute(
                    "INSERT INTO turns VALUES (?, ?, ?, ?)",
                    (session_id, expected_turns, data, now),
                )
                return expected_turns + 1

            return _transaction(connection, write)

        return await self._run(append)

    async def list_sessions(self) -> list[SessionInfo]:
        def list_all(connection: sqlite3.Connection) -> list[SessionInfo]:
            rows = connection.execute(
                "SELECT id, turns, created_at, updated_at FROM sessions ORDER BY id"
            ).fetchall()
            return [SessionInfo(*row) for row in rows]

        return await self._run(list_all)

    async def delete(self, session_id: str) -> bool:
        check_session_id(session_id)

        def delete(connection: sqlite3.Connection) -> bool:
            connection.execute("DELETE FROM turns WHERE session_id = ?", (session_id,))
            gone = connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return gone.rowcount > 0

        return await self._run(lambda connection: _transaction(connection, delete))

    async def fork(self, session_id: str, new_id: str, *, turns: int | None = None) -> Session:
        check_session_id(session_id)
        check_session_id(new_id)

        def fork(connection: sqlite3.Connection) -> None:
            row = connection.execute(
                "SELECT turns FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(
                    f"cannot fork session {session_id!r}: there is none", session_id=session_id
                )
            taken = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (new_id,))
            if taken.fetchone() is not None:
                raise SessionExistsError(
                    f"cannot fork onto session {new_id!r}: it exists", session_id=new_id
                )
            count = fork_count(session_id, row[0], turns)
            now = time.time()
            connection.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?)", (new_id, count, now, now)
            )
            connection.execute(
                "INSERT INTO turns SELECT ?, idx, messages, ? FROM turns"
                " WHERE session_id = ? AND idx < ?",
                (new_id, now, session_id, count),
            )

        await self._run(lambda connection: _transaction(connection, fork))
        return self.session(new_id)


def use_wal(connection: sqlite3.Connection) -> None:
    """Put the file in WAL mode. WAL is a property of the file: once set, reading it takes no
    lock, while setting it again can fail at once ("database is locked") when another process
    is writing, so it is set only when it is not already."""
    (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() != "wal":
        connection.execute("PRAGMA journal_mode=WAL")


def _transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """``work`` in one write transaction: committed if it returns, rolled back if it raises.
    ``BEGIN IMMEDIATE`` takes the write lock first, so two writers never both read a turn
    count and then both try to write."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return result


def _migrate(connection: sqlite3.Connection) -> None:
    """Create the schema in a new file; refuse a file from a newer release."""
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise SessionStoreError(
            f"the session file's schema is version {version}; this agentkit reads up to "
            f"{SCHEMA_VERSION}: upgrade agentkit",
            session_id=None,
        )
    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
