"""The turn store in a SQLite file, so exact replay survives a server restart.

A client of a stateless API sends a conversation back as it holds it, restart or not; if the
server forgot the turns it generated, the first request after a restart renders every earlier
assistant turn canonically and the prefix cache is lost for the whole conversation. This
store keeps the turns (and the Chat projection aliases) in one SQLite file, by default in the
server's cache directory, bounded in turns and in bytes with least-recently-used eviction.

It follows the session store's approach (:mod:`agentkit.sessions._sqlite`: the standard
library's ``sqlite3``, WAL, ``PRAGMA user_version`` as the schema version, one
``BEGIN IMMEDIATE`` transaction per write) with one difference the callers impose:
:meth:`~SQLiteTurnStore.remember` runs on the event loop and must not wait on the disk. It
keeps the turn in memory (the in-memory store this class extends is its cache) and queues the
write for the store's writer thread, which commits queued writes in batches. A restore looks
in memory first, then in the file (it runs on a worker thread). A turn whose write was still
queued when the process died is lost: the client's next request then renders it canonically,
which costs a cache miss, never a wrong prompt.

Keys are bound to a *scope* (the server passes the served model and profile): token ids mean
something only to the model that produced them, so a file shared by servers of different
models never restores one model's turn into another's prompt.

The same file, connection and writer thread keep the Responses API's stored responses
(:attr:`SQLiteTurnStore.responses`, :mod:`agentkit.server._response_store`), in a table of
their own with bounds of their own: one store, one file.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError
from agentkit.server._response_store import (
    RESPONSE_SCHEMA,
    FileAccess,
    ResponseWrite,
    SQLiteResponses,
)
from agentkit.server._turns import TurnStore, _checked, visible_key
from agentkit.sessions._sqlite import _transaction, use_wal
from agentkit.sessions._store import decode_messages, encode_messages
from agentkit.transcript import ContentBlock, Message

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SCHEMA_VERSION", "SQLiteTurnStore"]

_log = get_logger("agentkit.server")

SCHEMA_VERSION = 2
"""The file format this release writes (``PRAGMA user_version``); a newer one is refused, an
older one is brought up to date."""

_TURN_SCHEMA = (
    """CREATE TABLE turns (
        key TEXT PRIMARY KEY,
        message TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        used INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX turns_by_use ON turns (used)",
    """CREATE TABLE aliases (
        alias TEXT PRIMARY KEY,
        key TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX aliases_by_key ON aliases (key)",
)

_MIGRATIONS: tuple[tuple[str, ...], ...] = (_TURN_SCHEMA, RESPONSE_SCHEMA)
"""The statements that bring a file from version ``i`` to ``i + 1``."""

_BATCH = 256
"""The most queued writes one transaction commits."""


@dataclass(frozen=True, slots=True)
class _Turn:
    key: str
    message: Message
    used: int


@dataclass(frozen=True, slots=True)
class _Alias:
    alias: str
    key: str


@dataclass(frozen=True, slots=True)
class _Touch:
    key: str
    used: int


@dataclass(frozen=True, slots=True)
class _Flush:
    """Set once every write queued before it is committed (or failed)."""

    done: threading.Event


_Write = _Turn | _Alias | _Touch | _Flush | ResponseWrite


class SQLiteTurnStore(TurnStore):
    """Turns persisted in the SQLite file at ``path`` (created, with its schema, on
    :meth:`open` or first use). Close it (:meth:`close`) to flush queued writes.

    Args:
        path: the database file.
        max_turns: how many turns the file keeps.
        max_bytes: how many bytes of encoded turns the file keeps.
        memory_turns: how many turns stay in memory as well (a restore found there costs no
            read); at most ``max_turns``.
        scope: what the stored token ids belong to (the served model): turns stored under
            another scope are not found.
        timeout: seconds a write waits for another process's write before failing.
        max_responses: how many stored Responses API responses the file keeps.
        max_response_bytes: how many bytes of encoded responses the file keeps.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_turns: int = 65_536,
        max_bytes: int = 512 * 1024 * 1024,
        memory_turns: int = 1024,
        scope: str = "",
        timeout: float = 30.0,
        max_responses: int = 16_384,
        max_response_bytes: int = 512 * 1024 * 1024,
    ) -> None:
        import sqlite3  # here, not at the top: `import agentkit` loads no database driver

        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        super().__init__(min(memory_turns, max_turns))
        self.path = Path(path)
        self._sqlite = sqlite3
        self._max_turns = max_turns
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._prefix = hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self._connection: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._pending: dict[str, Message] = {}
        self._clock = 0
        self._closed = False
        self.responses = SQLiteResponses(
            FileAccess(self._enqueue, self._tick, self._read, self.flush),
            self._prefix,
            max_responses=max_responses,
            max_bytes=max_response_bytes,
        )
        """The Responses API's stored responses, in this file."""

    def __repr__(self) -> str:
        return f"SQLiteTurnStore({str(self.path)!r})"

    def open(self) -> None:
        """Open the file (creating it and its schema if absent) and start the writer thread;
        idempotent. Called at startup, so a bad path or a newer file's schema is a
        :class:`ConfigurationError` then rather than a lost turn later."""
        with self._open_lock:
            if self._connection is not None or self._closed:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = self._sqlite.connect(
                    self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
                )
            except (OSError, self._sqlite.Error) as error:
                raise ConfigurationError(
                    f"cannot open the turn store {self.path}: {error}"
                ) from error
            try:
                use_wal(connection)
                connection.execute("PRAGMA synchronous=NORMAL")
                _transaction(connection, _migrate)
                (used,) = connection.execute(
                    "SELECT MAX((SELECT COALESCE(MAX(used), 0) FROM turns),"
                    " (SELECT COALESCE(MAX(used), 0) FROM responses))"
                ).fetchone()
            except BaseException as error:
                connection.close()
                if isinstance(error, self._sqlite.Error):
                    raise ConfigurationError(
                        f"cannot open the turn store {self.path}: {error}"
                    ) from error
                raise
            self._clock = int(used)
            self._connection = connection
            self._writer = threading.Thread(
                target=self._write_loop, name=f"agentkit-turns:{self.path.name}", daemon=True
            )
            self._writer.start()

    def close(self) -> None:
        """Commit the queued writes, stop the writer thread and close the file; idempotent.
        Later turns are kept in memory only."""
        with self._open_lock:
            if self._closed:
                return
            self._closed = True
            writer, self._writer = self._writer, None
        if writer is not None:
            self._queue.put(None)
            writer.join()
        with self._db_lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> SQLiteTurnStore:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def remember(self, message: Message) -> None:
        key = _checked(message)
        self._keep(key, message)
        self._enqueue(_Turn(self._prefix + key, message, self._tick()))

    def alias(self, blocks: Sequence[ContentBlock], message: Message) -> None:
        alias, key = visible_key(blocks), visible_key(message.content)
        if alias == key:
            return
        self._keep_alias(alias, key)
        self._enqueue(_Alias(self._prefix + alias, self._prefix + key))

    def restore(self, blocks: Sequence[ContentBlock]) -> Message | None:
        key = visible_key(blocks)
        found = self._find(key)
        if found is not None:
            self._touch(found)
            return found
        if not self._ensure_open():
            return None
        stored = self._pending_or_read(self._prefix + key)
        if stored is None:
            return None
        self._keep(visible_key(stored.content), stored)
        self._touch(stored)
        return stored.model_copy(deep=True)

    def __len__(self) -> int:
        """How many turns the file holds, of every scope (with those still queued: exact
        once :meth:`flush` returned)."""
        if not self._ensure_open():
            return super().__len__()
        with self._db_lock:
            assert self._connection is not None
            (count,) = self._connection.execute("SELECT COUNT(*) FROM turns").fetchone()
            with self._lock:
                return int(count) + len(self._pending)

    def __contains__(self, blocks: object) -> bool:
        if not isinstance(blocks, Sequence):
            return False
        return self.restore(blocks) is not None

    def flush(self) -> None:
        """Wait until every write queued so far is committed (tests, and a clean shutdown)."""
        flush = _Flush(threading.Event())
        if self._enqueue(flush):  # in order: what was queued before is committed first
            flush.done.wait()

    def _ensure_open(self) -> bool:
        """Open on first use; ``False`` once closed (memory only from then on)."""
        if self._connection is None and not self._closed:
            self.open()
        return self._connection is not None and not self._closed

    def _read(self, query: str, parameters: Sequence[object]) -> tuple[Any, ...] | None:
        """The first row of ``query`` (opening the file on first use); ``None`` when there is
        none or the file is closed."""
        if not self._ensure_open():
            return None
        with self._db_lock:
            if self._connection is None:
                return None
            row = self._connection.execute(query, tuple(parameters)).fetchone()
        return None if row is None else tuple(row)

    def _enqueue(self, write: _Write) -> bool:
        """Queue ``write`` for the writer thread (opening the file on first use); ``False``
        once closed. Under the open lock, so nothing is queued behind :meth:`close`'s stop."""
        self._ensure_open()
        with self._open_lock:
            if self._writer is None:
                return False
            if isinstance(write, _Turn):
                with self._lock:
                    self._pending[write.key] = write.message
            self._queue.put(write)
            return True

    def _tick(self) -> int:
        with self._lock:
            self._clock += 1
            return self._clock

    def _touch(self, message: Message) -> None:
        self._enqueue(_Touch(self._prefix + visible_key(message.content), self._tick()))

    def _pending_or_read(self, key: str) -> Message | None:
        """The turn under ``key`` or the alias ``key``: queued, or read from the file."""
        with self._lock:
            queued = self._pending.get(key)
        if queued is not None:
            return queued
        with self._db_lock:
            if self._connection is None:
                return None
            row = (
                self._connection.execute(
                    "SELECT message FROM turns WHERE key = ?", (key,)
                ).fetchone()
                or self._connection.execute(
                    "SELECT t.message FROM aliases AS a JOIN turns AS t ON t.key = a.key"
                    " WHERE a.alias = ?",
                    (key,),
                ).fetchone()
            )
        if row is None:
            return None
        (message,) = decode_messages(row[0])
        return message

    def _write_loop(self) -> None:
        """The writer thread: commit queued writes in batches until ``None`` arrives."""
        stop = False
        while not stop:
            batch: list[_Write] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= _BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            stop = item is None
            try:
                self._commit(batch)
            except Exception as error:  # the writer must outlive a failed batch
                _log.warning("could not store turns", path=str(self.path), error=str(error))
            finally:
                with self._lock:
                    for write in batch:
                        if (
                            isinstance(write, _Turn)
                            and self._pending.get(write.key) is write.message
                        ):
                            del self._pending[write.key]
                self.responses.committed(batch)
                for write in batch:
                    if isinstance(write, _Flush):
                        write.done.set()

    def _commit(self, batch: list[_Write]) -> None:
        rows = [
            (w.key, encode_messages([w.message]), w.used) for w in batch if isinstance(w, _Turn)
        ]
        aliases = [(w.alias, w.key) for w in batch if isinstance(w, _Alias)]
        touches = [(w.used, w.key) for w in batch if isinstance(w, _Touch)]
        responses = [w for w in batch if isinstance(w, ResponseWrite)]

        def write(connection: sqlite3.Connection) -> None:
            connection.executemany(
                "INSERT INTO turns (key, message, bytes, used) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET message = excluded.message,"
                " bytes = excluded.bytes, used = excluded.used",
                [(key, data, len(data.encode()), used) for key, data, used in rows],
            )
            connection.executemany("INSERT OR REPLACE INTO aliases VALUES (?, ?)", aliases)
            connection.executemany("UPDATE turns SET used = MAX(used, ?) WHERE key = ?", touches)
            self._evict(connection)
            if responses:
                self.responses.commit(connection, responses)

        if not (rows or aliases or touches or responses):
            return
        with self._db_lock:
            if self._connection is not None:
                _transaction(self._connection, write)

    def _evict(self, connection: sqlite3.Connection) -> None:
        """Delete the least recently used turns (and their aliases) beyond the bounds."""
        count, size = connection.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM turns"
        ).fetchone()
        if count <= self._max_turns and size <= self._max_bytes:
            return
        gone: list[tuple[str]] = []
        oldest = connection.execute("SELECT key, bytes FROM turns ORDER BY used")
        try:
            for key, size_of in oldest:
                if count <= self._max_turns and size <= self._max_bytes:
                    break
                gone.append((key,))
                count -= 1
                size -= size_of
        finally:
            oldest.close()
        connection.executemany("DELETE FROM turns WHERE key = ?", gone)
        connection.executemany("DELETE FROM aliases WHERE key = ?", gone)


def _migrate(connection: sqlite3.Connection) -> None:
    """Create the schema in a new file, or the tables an older release's file lacks; refuse a
    file from a newer release."""
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"the turn store's schema is version {version}; this agentkit reads up to "
            f"{SCHEMA_VERSION}: upgrade agentkit or give another --turn-store"
        )
    for step in _MIGRATIONS[version:]:
        for statement in step:
            connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
