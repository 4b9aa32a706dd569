"""The session interface: a store of conversations, each an append-only list of turns.

A *turn* is the unit a store writes: the messages one completed model turn added to the
conversation, written in one transaction or not at all. The agent loop writes one turn per
model turn, once that turn's tool results exist (see :class:`SessionRun`), so a store never
holds an assistant message whose calls have no results, and a crash loses at most the turn in
progress.

Every append names the turn count its writer read (``expected_turns``); a store whose count
differs raises :class:`~agentkit.sessions.SessionConflictError` and writes nothing. Within a
process, runs on one session also take the session's lock for their whole length, so they
queue rather than conflict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import anyio
from pydantic import TypeAdapter

from agentkit.sessions._errors import SessionConflictError
from agentkit.transcript import Message, Transcript

__all__ = [
    "Session",
    "SessionInfo",
    "SessionRun",
    "SessionStore",
    "SessionTurn",
    "decode_messages",
    "encode_messages",
]

_MESSAGES = TypeAdapter(list[Message])


def encode_messages(messages: Sequence[Message]) -> str:
    """A turn's messages as the JSON a store keeps (token ids and raw text included)."""
    return _MESSAGES.dump_json(list(messages)).decode()


def decode_messages(data: str | bytes) -> tuple[Message, ...]:
    """The messages :func:`encode_messages` wrote."""
    return tuple(_MESSAGES.validate_json(data))


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("a session id is a non-empty string")
    return session_id


def fork_count(session_id: str, held: int, turns: int | None) -> int:
    """How many turns a fork copies: ``turns``, checked against the ``held`` turns."""
    if turns is None:
        return held
    if not 0 <= turns <= held:
        raise ValueError(f"session {session_id!r} has {held} turns; cannot fork its first {turns}")
    return turns


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """One stored turn."""

    index: int
    """Its position in the session, from 0."""
    messages: tuple[Message, ...]
    """The messages it added, in order (the first turn of a run starts with the run's user
    message; an assistant message keeps the token ids the model generated)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What :meth:`SessionStore.list_sessions` says of one session."""

    id: str
    turns: int
    """Turns stored."""
    created_at: float
    """When its first turn was written (seconds since the epoch)."""
    updated_at: float
    """When its last turn was written (seconds since the epoch)."""


class SessionStore(ABC):
    """Where conversations persist: :class:`MemorySessionStore` (a process's lifetime) or
    :class:`SQLiteSessionStore` (a file, shared by many sessions and processes).

    ``store.session(id)`` is the handle an agent run takes (``agent.run(prompt,
    session=store.session("user-42"))``); the methods here work on ids directly. A store is
    an async context manager that closes itself.

    Another backend implements the five abstract methods (each append atomic, with the
    turn-count check) and calls ``super().__init__()``; the agent needs nothing else.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, list[int]]] = {}

    def session(self, session_id: str) -> Session:
        """The handle of session ``session_id`` (it need not exist yet: its first turn
        creates it)."""
        return Session(self, check_session_id(session_id))

    @abstractmethod
    async def load(self, session_id: str) -> list[SessionTurn]:
        """The session's turns in order (empty for a session that does not exist)."""

    @abstractmethod
    async def append(
        self, session_id: str, messages: Sequence[Message], *, expected_turns: int
    ) -> int:
        """Append one turn, atomically, if the session holds ``expected_turns`` turns (0
        creates it); returns the new turn count.

        Raises :class:`~agentkit.sessions.SessionConflictError` (nothing written) when the
        count differs.
        """

    @abstractmethod
    async def list_sessions(self) -> list[SessionInfo]:
        """Every session, by id."""

    @abstractmethod
    async def delete(self, session_id: str) -> bool:
        """Remove the session and its turns; ``False`` when there was none."""

    @abstractmethod
    async def fork(self, session_id: str, new_id: str, *, turns: int | None = None) -> Session:
        """Copy the session's first ``turns`` turns (all by default) to a new session
        ``new_id``, atomically, and return its handle. The original is unchanged.

        Raises :class:`~agentkit.sessions.SessionNotFoundError` for a missing source,
        :class:`~agentkit.sessions.SessionExistsError` when ``new_id`` is taken, and
        ``ValueError`` when ``turns`` is negative or more than the session holds.
        """

    async def aclose(self) -> None:  # noqa: B027 - a store without resources has nothing to do
        """Release what the store holds (its database connection)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @asynccontextmanager
    async def locked(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's in-process lock: what an agent run does for its whole length,
        so two runs on one session in this process take turns instead of interleaving."""
        entry = self._locks.get(session_id)
        if entry is None:
            entry = self._locks[session_id] = (anyio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._locks[session_id]


class Session:
    """One conversation in a store, by id: what ``agent.run(..., session=...)`` takes.

    A handle only: it holds no messages, and several handles of one id are the same session.
    """

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.id = session_id

    def __repr__(self) -> str:
        return f"Session({self.id!r}, store={type(self.store).__name__})"

    async def turns(self) -> list[SessionTurn]:
        """The stored turns, in order."""
        return await self.store.load(self.id)

    async def transcript(self) -> Transcript:
        """The stored conversation as one transcript."""
        return Transcript(messages=[m for turn in await self.turns() for m in turn.messages])

    async def append(self, messages: Sequence[Message], *, expected_turns: int) -> int:
        """Append one turn (see :meth:`SessionStore.append`)."""
        return await self.store.append(self.id, messages, expected_turns=expected_turns)

    async def fork(self, new_id: str, *, turns: int | None = None) -> Session:
        """Copy the first ``turns`` turns to a new session (see :meth:`SessionStore.fork`)."""
        return await self.store.fork(self.id, new_id, turns=turns)

    async def delete(self) -> bool:
        """Remove the session (see :meth:`SessionStore.delete`)."""
        return await self.store.delete(self.id)

    def open_run(self, transcript: Transcript, *, resumed: bool = False) -> SessionRun:
        """What an agent run holds while it runs on this session (see :class:`SessionRun`)."""
        return SessionRun(self, transcript, resumed=resumed)


class SessionRun:
    """One agent run's hold on its session: load at the start, one turn saved per model turn.

    Entering it takes the session's in-process lock (held until the run ends) and loads the
    stored messages into the run's ``transcript`` in place: a new run's transcript (the
    agent's system prompt and the user's prompt) becomes the stored conversation followed by
    its non-system messages (all of it when the session is empty); a resumed run's transcript
    must already begin with the stored conversation. :meth:`save` then writes every message
    the transcript gained since the last save as one turn.
    """

    def __init__(self, session: Session, transcript: Transcript, *, resumed: bool) -> None:
        self.session = session
        self.transcript = transcript
        self._resumed = resumed
        self._turns = 0
        self._saved = 0
        """Messages of ``transcript`` already in the store."""
        self._lock: AbstractAsyncContextManager[None] | None = None

    async def __aenter__(self) -> Transcript:
        lock = self.session.store.locked(self.session.id)
        await lock.__aenter__()
        self._lock = lock
        try:
            stored = await self.session.turns()
            messages = [m for turn in stored for m in turn.messages]
            self._turns = len(stored)
            self._saved = len(messages)
            current = self.transcript.messages
            if self._resumed:
                if encode_messages(current[: len(messages)]) != encode_messages(messages):
                    raise SessionConflictError(
                        f"session {self.session.id!r} changed since the run paused: its "
                        "stored conversation is not the start of the run's transcript",
                        session_id=self.session.id,
                        expected_turns=self._turns,
                        actual_turns=self._turns,
                    )
            elif messages:
                current[:] = [*messages, *(m for m in current if m.role != "system")]
        except BaseException:
            await self._release()
            raise
        return self.transcript

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._release()

    async def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            await lock.__aexit__(None, None, None)

    @property
    def turns(self) -> int:
        """Turns the session holds, as far as this run knows."""
        return self._turns

    async def save(self) -> None:
        """Write the messages the transcript gained since the last save as one turn (nothing
        when it gained none). Raises :class:`~agentkit.sessions.SessionConflictError` when
        another writer appended first."""
        new = self.transcript.messages[self._saved :]
        if not new:
            return
        self._turns = await self.session.append(new, expected_turns=self._turns)
        self._saved += len(new)
