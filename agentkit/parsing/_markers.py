"""Finding literal markers in text that arrives in pieces.

Every parser here has the same small problem: a marker (``</think>``, ``</parameter>``) may be
split across deltas, so the end of a delta that *could* be the start of a marker must be held
back, and everything else released at once. These helpers do that in time proportional to the
text they are given (plus the marker length), never rescanning what was already seen.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

__all__ = ["MISMATCH", "Expect", "MarkerFinder", "find_first", "partial_suffix_len"]


def find_first(text: str, markers: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest occurrence of any marker at or after ``start`` (the longest on a tie)."""
    best = -1
    best_marker = ""
    for marker in markers:
        pos = text.find(marker, start)
        if pos != -1 and (
            best == -1 or pos < best or (pos == best and len(marker) > len(best_marker))
        ):
            best, best_marker = pos, marker
    return None if best == -1 else (best, best_marker)


def partial_suffix_len(text: str, markers: Sequence[str], start: int = 0) -> int:
    """Length of the longest suffix of ``text[start:]`` that is a proper prefix of a marker.

    That suffix is what must be held back: the next delta may complete the marker. Only the
    last ``len(longest marker) - 1`` characters are looked at, so the cost is bounded.
    """
    longest, firsts = _shape(tuple(markers))
    n = len(text)
    for i in range(max(start, n - longest + 1), n):
        if text[i] in firsts:
            size = n - i
            if any(len(m) > size and m.startswith(text[i:]) for m in markers):
                return size
    return 0


@functools.lru_cache(maxsize=256)
def _shape(markers: tuple[str, ...]) -> tuple[int, frozenset[str]]:
    """The longest marker's length and the markers' first characters."""
    return max((len(m) for m in markers), default=0), frozenset(m[:1] for m in markers if m)


class MarkerFinder:
    """Finds one marker in a stream of texts, remembering a possible partial match."""

    __slots__ = ("_marker", "_tail")

    def __init__(self, marker: str, tail: str = "") -> None:
        self._marker = marker
        self._tail = tail
        """Already-consumed text at the end of the previous feed that may begin the marker."""

    def find(self, text: str, start: int = 0) -> int:
        """Index in ``text`` just past the marker, or -1 if it has not completed yet."""
        if self._tail:
            combined, offset, begin = self._tail + text[start:], start - len(self._tail), 0
        else:
            combined, offset, begin = text, 0, start
        pos = combined.find(self._marker, begin)
        if pos != -1:
            self._tail = ""
            return offset + pos + len(self._marker)
        keep = partial_suffix_len(combined, (self._marker,), begin)
        self._tail = combined[len(combined) - keep :]
        return -1


class _Mismatch:
    """Sentinel: the text is none of the expected literals."""

    def __repr__(self) -> str:
        return "MISMATCH"


MISMATCH: Final = _Mismatch()


class Expect:
    """Matches exactly one of several literals, after optional whitespace, across feeds.

    Used where a format allows only a closing tag next (``</tool_call>`` after a Hermes JSON
    object): the first character that cannot continue any of them is reported at once.
    """

    __slots__ = ("_options", "matched")

    def __init__(self, options: Sequence[str]) -> None:
        self._options = tuple(options)
        self.matched = ""
        """The characters matched so far (consumed, but not yet a whole literal)."""

    def feed(self, text: str, pos: int) -> tuple[int, str | _Mismatch | None]:
        """Advance from ``pos``. Returns the new position and the literal matched, or
        :data:`MISMATCH` (the new position is then the offending character), or ``None`` when
        the text ran out first."""
        n = len(text)
        while pos < n:
            ch = text[pos]
            if not self.matched and ch.isspace():
                pos += 1
                continue
            candidate = self.matched + ch
            if not any(option.startswith(candidate) for option in self._options):
                return pos, MISMATCH
            pos += 1
            if candidate in self._options:
                self.matched = ""
                return pos, candidate
            self.matched = candidate
        return pos, None
