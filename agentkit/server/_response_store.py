"""Stored Responses: what ``store: true`` keeps, so ``previous_response_id``, ``GET`` and
``DELETE /v1/responses/{id}`` work.

A stored response is its request's input items (as sent, each given an ``id``), the response
object as it was returned, the exact generated turn (every block's raw output and the token
ids) and the id of the response it continued. A conversation is a chain of them: continuing
response N replays the items of responses 1..N (each one's input, then its output) and the
new input, exactly as if the client had sent them all, and the generated turns are put back
as they were generated, so the new prompt extends the previous prompt and output token for
token. Each response keeps only its own items, so a turn costs storage for what it added,
not for the whole conversation again.

Two implementations share one interface: :class:`ResponseStore` in memory (bounded in
responses and in bytes, least recently used first), and :class:`SQLiteResponses`, the
``responses`` table of the server's turn file
(:class:`~agentkit.server._turn_file.SQLiteTurnStore`: the same connection, writer thread
and queue, bounded in responses and bytes). Continuing a response touches every response of
its chain, so a conversation in use is not evicted from the middle; one whose earlier
response was evicted can no longer be continued (a 404 that says so).

Deleting a response hides it (``GET``, ``DELETE`` and ``previous_response_id`` answer 404)
and removes it once no stored response continues it: the responses after it in a
conversation stay usable.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit.server._errors import ApiError
from agentkit.server._turns import TurnStore, visible_key
from agentkit.sessions._store import decode_messages, encode_messages
from agentkit.transcript import Message

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "RESPONSE_SCHEMA",
    "FileAccess",
    "History",
    "MissingResponse",
    "ResponseStore",
    "ResponseWrite",
    "SQLiteResponses",
    "StoredResponse",
    "item_page",
    "response_store",
]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response. The store takes ownership: nothing in it is changed later."""

    id: str
    previous: str | None
    """The response this one continued (``previous_response_id``)."""
    response: dict[str, Any]
    """The response object as it was returned."""
    input: list[dict[str, Any]]
    """The request's own input items (not the previous responses'), each with an ``id``."""
    turn: Message | None
    """The generated assistant message, exact (raw blocks, token ids); ``None`` when the turn
    was cut short before it was recorded."""

    def encode(self) -> str:
        turn = encode_messages([self.turn]) if self.turn is not None else None
        record = {"response": self.response, "input": self.input, "turn": turn}
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, response_id: str, previous: str | None, data: str) -> StoredResponse:
        record = json.loads(data)
        turn = record.get("turn")
        message = decode_messages(turn)[0] if turn is not None else None
        return cls(response_id, previous, record["response"], record["input"], message)


@dataclass(slots=True)
class History:
    """What continuing a response replays: the conversation's items, oldest first (each
    stored response's input items, then its output items), and the generated turns by their
    visible content (:func:`~agentkit.server._turns.visible_key`)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    turns: dict[str, Message] = field(default_factory=dict)


class MissingResponse(LookupError):
    """``previous_response_id`` names no stored response, or one whose conversation is no
    longer whole (``missing`` is the response that is gone)."""

    def __init__(self, response_id: str, missing: str) -> None:
        self.response_id = response_id
        self.missing = missing
        if missing == response_id:
            message = f"Previous response with id '{response_id}' not found."
        else:
            message = (
                f"Previous response with id '{response_id}' cannot be continued: "
                f"response '{missing}' of its conversation is no longer stored."
            )
        super().__init__(message)


class ResponseStore:
    """Stored responses in memory, bounded, least recently used first (the interface every
    response store has; a restart forgets them).

    Thread-safe: responses are stored on the event loop and read on worker threads.

    Args:
        max_responses: how many responses to keep.
        max_bytes: how many bytes of responses to keep, each measured as the turn file
            stores it (its UTF-8 JSON record: input items, response object, exact turn), so
            that a few huge responses (long outputs, images in their input) cannot grow the
            server's memory without bound. A response larger than the bound on its own is
            not kept.
    """

    def __init__(self, max_responses: int = 4096, max_bytes: int = 256 * 1024 * 1024) -> None:
        if max_responses < 1:
            raise ValueError(f"max_responses must be at least 1, not {max_responses}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        self._max = max_responses
        self._max_bytes = max_bytes
        self._bytes = 0
        """The size of the responses held (in memory)."""
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """The size of the responses held in memory (see ``max_bytes``)."""
        with self._lock:
            return self._bytes

    def put(self, response: StoredResponse) -> None:
        """Keep ``response``. Never blocks on I/O: it is called on the event loop (measuring
        it costs one JSON encoding of the response's own data, not its conversation's)."""
        size = len(response.encode().encode())
        with self._lock:
            replaced = self._entries.get(response.id)
            if replaced is not None:
                self._bytes -= replaced.size
            self._entries[response.id] = _Entry(response, size=size)
            self._bytes += size
            if response.previous is not None and response.previous in self._entries:
                self._entries[response.previous].children += 1
            while self._entries and (
                len(self._entries) > self._max or self._bytes > self._max_bytes
            ):
                gone, _ = next(iter(self._entries.items()))
                self._remove(gone)

    def get(self, response_id: str) -> StoredResponse | None:
        """The stored response ``response_id`` (``None``: unknown, evicted or deleted)."""
        found = self._load(response_id)
        return None if found is None or found[1] else found[0]

    def delete(self, response_id: str) -> bool:
        """Delete ``response_id``; ``False`` when there was none to delete."""
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is None or entry.hidden:
                return False
            entry.hidden = True
            self._collect(response_id)
            return True

    def history(self, response_id: str) -> History:
        """The conversation that continuing ``response_id`` replays (called on a worker
        thread); :class:`MissingResponse` when it is not stored or not whole."""
        chain: list[StoredResponse] = []
        seen: set[str] = set()
        current: str | None = response_id
        while current is not None and current not in seen:
            found = self._load(current)
            if found is None or (found[1] and current == response_id):
                raise MissingResponse(response_id, current)
            chain.append(found[0])
            seen.add(current)
            current = found[0].previous
        self._touch([r.id for r in chain])
        history = History()
        for stored in reversed(chain):
            history.items.extend(stored.input)
            history.items.extend(_replayed(item) for item in stored.response.get("output", []))
            if stored.turn is not None:
                history.turns[visible_key(stored.turn.content)] = stored.turn.model_copy(deep=True)
        return history

    def _load(self, response_id: str) -> tuple[StoredResponse, bool] | None:
        """The response and whether it is deleted (hidden), or ``None``."""
        with self._lock:
            entry = self._entries.get(response_id)
            return None if entry is None else (entry.response, entry.hidden)

    def _touch(self, response_ids: Sequence[str]) -> None:
        with self._lock:
            for response_id in response_ids:
                if response_id in self._entries:
                    self._entries.move_to_end(response_id)

    def _remove(self, response_id: str) -> None:
        """Remove ``response_id``, then each deleted response before it that nothing
        continues any longer."""
        current: str | None = response_id
        while current is not None:
            entry = self._entries.pop(current)
            self._bytes -= entry.size
            previous = entry.response.previous
            current = None
            before = self._entries.get(previous) if previous is not None else None
            if before is not None:
                before.children -= 1
                if before.hidden and before.children <= 0:
                    current = previous

    def _collect(self, response_id: str) -> None:
        """Remove ``response_id`` if it is deleted and nothing stored continues it."""
        entry = self._entries.get(response_id)
        if entry is not None and entry.hidden and entry.children <= 0:
            self._remove(response_id)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(slots=True)
class _Entry:
    response: StoredResponse
    hidden: bool = False
    children: int = 0
    size: int = 0
    """Bytes of the response's encoded record."""


def _replayed(item: Mapping[str, Any]) -> dict[str, Any]:
    """An output item as the conversation replays it: without ``encrypted_content``, whose
    turn the store holds itself (and whose key may have changed since)."""
    return {k: v for k, v in item.items() if k != "encrypted_content"}


# -- in the turn file ------------------------------------------------------------------------

RESPONSE_SCHEMA = (
    """CREATE TABLE responses (
        key TEXT PRIMARY KEY,
        previous TEXT,
        record TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        used INTEGER NOT NULL,
        hidden INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    "CREATE INDEX responses_by_use ON responses (used)",
    "CREATE INDEX responses_by_previous ON responses (previous)",
)
"""The ``responses`` table of the turn file (schema version 2)."""


@dataclass(frozen=True, slots=True)
class _Put:
    key: str
    previous: str | None
    response: StoredResponse
    used: int


@dataclass(frozen=True, slots=True)
class _Delete:
    key: str


@dataclass(frozen=True, slots=True)
class _Touch:
    keys: tuple[str, ...]
    used: int


ResponseWrite = _Put | _Delete | _Touch
"""The writes the turn file's writer thread commits for :class:`SQLiteResponses`."""


@dataclass(frozen=True, slots=True)
class FileAccess:
    """What :class:`SQLiteResponses` uses of the turn file that holds it."""

    enqueue: Callable[[ResponseWrite], bool]
    """Queue a write for the writer thread; ``False`` once the file is closed."""
    tick: Callable[[], int]
    """The file's use clock (least recently used goes first)."""
    read: Callable[[str, Sequence[object]], tuple[Any, ...] | None]
    """One row of a query (on the calling thread); ``None``: no row, or the file is closed."""
    flush: Callable[[], None]
    """Wait until every write queued so far is committed."""


class SQLiteResponses(ResponseStore):
    """Stored responses in the turn file's ``responses`` table (made by
    :class:`~agentkit.server._turn_file.SQLiteTurnStore`, which opens, writes and closes it).

    :meth:`put` queues the write for the file's writer thread (the response is found in the
    queue until it is committed); reads go to the file on the calling (worker) thread;
    :meth:`delete` waits until the deletion is committed. Keys are bound to the file's scope
    (the served model): another model's responses are not found.

    Args:
        file: the turn file's queue, clock, reads and flush.
        prefix: the scope's key prefix.
        max_responses: how many responses the file keeps.
        max_bytes: how many bytes of encoded responses the file keeps.
    """

    def __init__(
        self, file: FileAccess, prefix: str, *, max_responses: int, max_bytes: int
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        super().__init__(max_responses)
        self._file = file
        self._prefix = prefix
        self._max_bytes = max_bytes
        self._pending: dict[str, StoredResponse] = {}

    def put(self, response: StoredResponse) -> None:
        key = self._prefix + response.id
        previous = None if response.previous is None else self._prefix + response.previous
        write = _Put(key, previous, response, self._file.tick())
        with self._lock:
            self._pending[key] = response
        if not self._file.enqueue(write):  # closed: memory only from here on
            with self._lock:
                self._pending.pop(key, None)
            super().put(response)

    def delete(self, response_id: str) -> bool:
        found = self._load(response_id)
        if found is None or found[1]:
            return False
        if self._file.enqueue(_Delete(self._prefix + response_id)):
            self._file.flush()
            return True
        return super().delete(response_id)

    def __len__(self) -> int:
        """How many responses the file holds, of every scope (with those still queued)."""
        row = self._file.read("SELECT COUNT(*) FROM responses", ())
        with self._lock:
            return (int(row[0]) if row is not None else 0) + len(self._pending)

    def committed(self, writes: Sequence[object]) -> None:
        """Forget the queued copies of ``writes`` (the writer thread committed them)."""
        with self._lock:
            for write in writes:
                if isinstance(write, _Put) and self._pending.get(write.key) is write.response:
                    del self._pending[write.key]

    def _load(self, response_id: str) -> tuple[StoredResponse, bool] | None:
        key = self._prefix + response_id
        with self._lock:
            queued = self._pending.get(key)
        if queued is not None:
            return queued, False
        row = self._file.read(
            "SELECT previous, record, hidden FROM responses WHERE key = ?", (key,)
        )
        if row is None:
            return super()._load(response_id)  # kept in memory after close
        previous, record, hidden = row
        if previous is not None:
            previous = previous[len(self._prefix) :]
        return StoredResponse.decode(response_id, previous, record), bool(hidden)

    def _touch(self, response_ids: Sequence[str]) -> None:
        keys = tuple(self._prefix + r for r in response_ids)
        if not self._file.enqueue(_Touch(keys, self._file.tick())):
            super()._touch(response_ids)

    def commit(self, connection: sqlite3.Connection, writes: Sequence[ResponseWrite]) -> None:
        """Apply ``writes`` in ``connection``'s open transaction (the writer thread's), then
        evict beyond the bounds."""
        for write in writes:
            if isinstance(write, _Put):
                data = write.response.encode()
                connection.execute(
                    "INSERT OR REPLACE INTO responses (key, previous, record, bytes, used)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (write.key, write.previous, data, len(data.encode()), write.used),
                )
            elif isinstance(write, _Delete):
                connection.execute("UPDATE responses SET hidden = 1 WHERE key = ?", (write.key,))
                _collect(connection, write.key)
            else:
                connection.executemany(
                    "UPDATE responses SET used = MAX(used, ?) WHERE key = ?",
                    [(write.used, key) for key in write.keys],
                )
        self._evict(connection)

    def _evict(self, connection: sqlite3.Connection) -> None:
        count, size = connection.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses"
        ).fetchone()
        if count <= self._max and size <= self._max_bytes:
            return
        gone: list[tuple[str, str | None]] = []
        oldest = connection.execute("SELECT key, previous, bytes FROM responses ORDER BY used")
        try:
            for key, previous, size_of in oldest:
                if count <= self._max and size <= self._max_bytes:
                    break
                gone.append((key, previous))
                count -= 1
                size -= size_of
        finally:
            oldest.close()
        connection.executemany("DELETE FROM responses WHERE key = ?", [(k,) for k, _ in gone])
        for _, previous in gone:
            if previous is not None:
                _collect(connection, previous)


def _collect(connection: sqlite3.Connection, key: str | None) -> None:
    """Delete ``key`` and then each deleted response before it that nothing continues."""
    while key is not None:
        row = connection.execute(
            "SELECT previous FROM responses WHERE key = ? AND hidden = 1"
            " AND NOT EXISTS (SELECT 1 FROM responses WHERE previous = ?)",
            (key, key),
        ).fetchone()
        if row is None:
            return
        connection.execute("DELETE FROM responses WHERE key = ?", (key,))
        key = row[0]


def response_store(turns: TurnStore) -> ResponseStore:
    """The response store that goes with ``turns``: the turn file's ``responses`` table, or
    a new store in memory for a turn store in memory."""
    own = getattr(turns, "responses", None)
    return own if isinstance(own, ResponseStore) else ResponseStore()


def item_page(items: Sequence[Mapping[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of ``GET /v1/responses/{id}/input_items``: ``limit`` (1 to 100, 20 by
    default) items in ``order`` (``desc``, the default, or ``asc``) after the item ``after``."""
    raw = query.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise ApiError("invalid_request_error", "limit: expected 1 to 100", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError("invalid_request_error", "order: expected 'asc' or 'desc'", param="order")
    ordered = list(items) if order == "asc" else list(reversed(items))
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise ApiError("invalid_request_error", f"after: no item {after!r}", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[: int(raw)]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > len(page),
    }
