"""An exact, offline tokenizer: one id per character, each special token one id.

What the scripted engine and the replay report count with when no model tokenizer is at hand:
it is invertible (``decode(encode(t)) == t``) and never merges across a boundary, so every
difference it shows is a real difference in the text, and a profile's markers count as the
single tokens they are in the model's vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["CharTokenizer"]

_SPECIAL_BASE = 0x110000
"""Special-token ids start past the last Unicode code point."""


class CharTokenizer:
    """``encode``/``decode`` with ``specials`` (e.g. a profile's special tokens) as one id."""

    def __init__(self, specials: Iterable[str] = ()) -> None:
        # Longest first (the alternation must prefer a longer marker), then by text: the ids
        # must not depend on set order, which changes with the hash seed between processes.
        ordered = sorted({s for s in specials if s}, key=lambda s: (-len(s), s))
        self._ids = {s: _SPECIAL_BASE + i for i, s in enumerate(ordered)}
        self._names = {v: k for k, v in self._ids.items()}
        pattern = "(" + "|".join(map(re.escape, ordered)) + ")"
        self._split = re.compile(pattern) if ordered else None

    @property
    def control_tokens(self) -> frozenset[str]:
        """The special tokens: the strings that encode as one id."""
        return frozenset(self._ids)

    def encode(self, text: str) -> list[int]:
        if self._split is None:
            return [ord(c) for c in text]
        ids: list[int] = []
        for piece in self._split.split(text):
            special = self._ids.get(piece)
            ids.extend([special] if special is not None else [ord(c) for c in piece])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._names.get(i) or chr(i) for i in ids)
