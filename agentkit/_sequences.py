"""Small helpers over sequences shared across modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["common_prefix_len"]

T = TypeVar("T")


def common_prefix_len(a: Sequence[T], b: Sequence[T]) -> int:
    """How many leading items ``a`` and ``b`` share (characters of two strings, ids of two
    token sequences, ...)."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))
