"""The raw text a tool section owns, kept across feeds until a call (or the section) claims it.

Every section must own each byte it consumes (see :mod:`agentkit.parsing._base`): the bytes
since the previous ``CallEnd`` are the next call's raw text, and what follows the last call is
the section's ``tail_raw``. Sections that scan their text in place (rather than through a
buffer, as :class:`~agentkit.parsing.tools._cursor.SectionCursor` does) keep that account with
a :class:`RawLedger`.
"""

from __future__ import annotations

__all__ = ["RawLedger"]


class RawLedger:
    """The raw text a section consumed since its last ``CallEnd``, kept across feeds."""

    __slots__ = ("_parts", "_start")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._start = 0

    def begin(self) -> None:
        """A new feed starts; its text is not in the ledger yet."""
        self._start = 0

    def cut(self, text: str, end: int) -> str:
        """Everything up to ``text[:end]``, handed out (to a ``CallEnd`` or ``tail_raw``)."""
        raw = "".join(self._parts) + text[self._start : end]
        self._parts.clear()
        self._start = end
        return raw

    def keep(self, text: str) -> None:
        """The feed ended without ending the section: remember the rest of ``text``."""
        self._parts.append(text[self._start :])
        self._start = len(text)

    def rest(self) -> str:
        """Everything not handed out yet (the output ended)."""
        raw = "".join(self._parts)
        self._parts.clear()
        return raw
