"""The errors a session store raises.

::

    AgentkitError
    └── SessionError                  names the session (``session_id``)
        ├── SessionNotFoundError      fork of a session that does not exist
        ├── SessionExistsError        fork onto an id that is already taken
        ├── SessionStoreError         the store cannot be used (a newer schema, a closed store)
        └── SessionConflictError      also a RunError: another writer appended turns first
"""

from __future__ import annotations

from agentkit.errors import AgentkitError, RunError

__all__ = [
    "SessionConflictError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreError",
]


class SessionError(AgentkitError):
    """A session could not be read or written as asked. ``session_id`` names it (``None``
    for a failure of the whole store)."""

    def __init__(self, message: str, *, session_id: str | None) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionNotFoundError(SessionError):
    """The session does not exist (it was never written, or it was deleted)."""


class SessionExistsError(SessionError):
    """A fork's new id is already a session: forks never overwrite."""


class SessionStoreError(SessionError):
    """The store cannot be used: its file was written by a newer schema, or it is closed."""


class SessionConflictError(SessionError, RunError):
    """The session's turn count was not the one the writer read: another run (in another
    process, or through another store on the same file) appended turns in between.

    Nothing was written. Within a run it stops the run (a :class:`~agentkit.errors.RunError`,
    carrying the transcript with the turn that could not be saved); load the session again and
    retry.
    """

    def __init__(
        self, message: str, *, session_id: str, expected_turns: int, actual_turns: int | None
    ) -> None:
        super().__init__(message, session_id=session_id)
        self.expected_turns = expected_turns
        """The turn count the writer expected."""
        self.actual_turns = actual_turns
        """The turn count found (``None``: the session no longer exists)."""

    @classmethod
    def check(cls, session_id: str, expected_turns: int, actual_turns: int | None) -> None:
        """Raise unless the session holds ``expected_turns`` turns (a missing session holds
        none): every store's optimistic check before it appends."""
        if (actual_turns or 0) != expected_turns:
            raise cls(
                f"session {session_id!r} holds {actual_turns or 0} turns, not the "
                f"{expected_turns} this writer read",
                session_id=session_id,
                expected_turns=expected_turns,
                actual_turns=actual_turns,
            )
