"""A session store in this process's memory: for tests, demos and short-lived services."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from agentkit.sessions._errors import (
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
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

__all__ = ["MemorySessionStore"]


@dataclass
class _Stored:
    created_at: float
    updated_at: float
    turns: list[str] = field(default_factory=list)
    """Each turn's messages as JSON: what a load returns is always a fresh copy."""


class MemorySessionStore(SessionStore):
    """Sessions kept in memory, with the same semantics as :class:`SQLiteSessionStore`
    (atomic turns, the turn-count check, fork, delete); gone when the process ends."""

    def __init__(self) -> None:
        super().__init__()
        self._sessions: dict[str, _Stored] = {}

    async def load(self, session_id: str) -> list[SessionTurn]:
        await anyio.lowlevel.checkpoint()
        stored = self._sessions.get(check_session_id(session_id))
        if stored is None:
            return []
        return [SessionTurn(i, decode_messages(t)) for i, t in enumerate(stored.turns)]

    async def append(
        self, session_id: str, messages: Sequence[Message], *, expected_turns: int
    ) -> int:
        check_session_id(session_id)
        data = encode_messages(messages)
        await anyio.lowlevel.checkpoint()
        stored = self._sessions.get(session_id)
        actual = None if stored is None else len(stored.turns)
        SessionConflictError.check(session_id, expected_turns, actual)
        now = time.time()
        if stored is None:
            stored = self._sessions[session_id] = _Stored(created_at=now, updated_at=now)
        stored.turns.append(data)
        stored.updated_at = now
        return len(stored.turns)

    async def list_sessions(self) -> list[SessionInfo]:
        await anyio.lowlevel.checkpoint()
        return [
            SessionInfo(key, len(s.turns), s.created_at, s.updated_at)
            for key, s in sorted(self._sessions.items())
        ]

    async def delete(self, session_id: str) -> bool:
        await anyio.lowlevel.checkpoint()
        return self._sessions.pop(check_session_id(session_id), None) is not None

    async def fork(self, session_id: str, new_id: str, *, turns: int | None = None) -> Session:
        check_session_id(session_id)
        check_session_id(new_id)
        await anyio.lowlevel.checkpoint()
        source = self._sessions.get(session_id)
        if source is None:
            raise SessionNotFoundError(
                f"cannot fork session {session_id!r}: there is none", session_id=session_id
            )
        if new_id in self._sessions:
            raise SessionExistsError(
                f"cannot fork onto session {new_id!r}: it exists", session_id=new_id
            )
        count = fork_count(session_id, len(source.turns), turns)
        now = time.time()
        self._sessions[new_id] = _Stored(now, now, list(source.turns[:count]))
        return self.session(new_id)
