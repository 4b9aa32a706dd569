"""Conversations that persist: ``agent.run(prompt, session=store.session("user-42"))``.

A run on a session starts from the stored conversation (the prompt appended as a new user
message) and writes each model turn to the store once it is complete: the assistant message
(with the token ids the model generated, so the next run's prompt extends the last one token
for token and the prefix cache still serves it) together with its tool results, in one
transaction. A turn cut short (a crash, a cancellation, an engine failure, calls waiting for
approval) is not written. See ``docs/sessions.md``.

:class:`SQLiteSessionStore` keeps sessions in one SQLite file (the standard library's
``sqlite3``, imported only when such a store is made); :class:`MemorySessionStore` in memory.
"""

from agentkit.sessions._errors import SessionConflictError as SessionConflictError
from agentkit.sessions._errors import SessionError as SessionError
from agentkit.sessions._errors import SessionExistsError as SessionExistsError
from agentkit.sessions._errors import SessionNotFoundError as SessionNotFoundError
from agentkit.sessions._errors import SessionStoreError as SessionStoreError
from agentkit.sessions._memory import MemorySessionStore as MemorySessionStore
from agentkit.sessions._sqlite import SCHEMA_VERSION as SCHEMA_VERSION
from agentkit.sessions._sqlite import SQLiteSessionStore as SQLiteSessionStore
from agentkit.sessions._store import Session as Session
from agentkit.sessions._store import SessionInfo as SessionInfo
from agentkit.sessions._store import SessionRun as SessionRun
from agentkit.sessions._store import SessionStore as SessionStore
from agentkit.sessions._store import SessionTurn as SessionTurn

__all__ = [
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
]
