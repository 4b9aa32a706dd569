"""Decoding a model's JSON (or Python literal) arguments into values a transcript can hold.

A model stuck in a loop can write ``[[[[...`` a thousand levels deep. :func:`json.loads` then
raises :class:`RecursionError` (not :class:`json.JSONDecodeError`) at a depth that depends on
how deep the caller's stack already is, and a value a few hundred levels deep decodes but
cannot be serialised again: pydantic refuses to dump it, and a transcript's JSON could not be
read back. So every decoder of model text here goes through :func:`loads` (or checks
:func:`nesting_depth`), which turns both into an ordinary decoding error: the call becomes an
error call the model can see, and the parser never raises.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "DeepNesting", "check_depth", "loads", "nesting_depth"]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in one decoded value (the value itself is
level 1). Real tool arguments stay far below it; a transcript stays serialisable above it."""


class DeepNesting(json.JSONDecodeError):
    """A value nested deeper than :data:`MAX_DEPTH` (a :class:`json.JSONDecodeError`, so the
    callers' handling of invalid JSON covers it)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"the value is nested more than {MAX_DEPTH} levels deep", text, 0)


def nesting_depth(value: Any) -> int:
    """How many levels of dicts and lists ``value`` has (a scalar: 0), counted without
    recursion and only up to ``MAX_DEPTH + 1``: enough to tell a value that is too deep."""
    depth = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth = max(depth, level)
        if level < MAX_DEPTH + 1:  # deeper levels change nothing: the value is refused
            stack.extend((child, level + 1) for child in children)
    return depth


def check_depth(value: Any, text: str = "") -> Any:
    """``value``, or :class:`DeepNesting` raised when it is nested too deeply."""
    if nesting_depth(value) > MAX_DEPTH:
        raise DeepNesting(text)
    return value


def loads(text: str) -> Any:
    """``json.loads(text, strict=False)``, raising :class:`json.JSONDecodeError` (and only
    that) for text that is not JSON or is nested more than :data:`MAX_DEPTH` levels deep."""
    try:
        value = json.loads(text, strict=False)
    except RecursionError:
        raise DeepNesting(text) from None
    return check_depth(value, text)
