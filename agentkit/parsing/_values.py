"""Decoding a model's JSON (or Python literal) arguments into values a transcript can hold.

Two kinds of text decode to values that break everything downstream:

* ``[[[[...`` a thousand levels deep, which a model stuck in a loop writes: :func:`json.loads`
  raises :class:`RecursionError` (not :class:`json.JSONDecodeError`) at a depth that depends on
  how deep the caller's stack already is, and a value a few hundred levels deep decodes but
  cannot be serialised again (pydantic refuses to dump it, a transcript's JSON cannot be read
  back);
* a lone surrogate escape (``"\\ud800"``, half of a pair the model never finished): the string
  decodes, but no UTF-8 writer (the transcript's JSON, an SSE stream, a file) can encode it.

So every decoder of model text here goes through :func:`loads` (or :func:`check_value`), which
turns both into an ordinary decoding error: the call becomes an error call the model can see,
and the parser never raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "UnfitValue", "check_value", "loads", "unfit_reason"]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in one decoded value (the value itself is
level 1). Real tool arguments stay far below it; a transcript stays serialisable above it."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class UnfitValue(json.JSONDecodeError):
    """A decoded value no transcript can hold (a :class:`json.JSONDecodeError`, so the callers'
    handling of invalid JSON covers it)."""

    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(reason, text, 0)


def unfit_reason(value: Any) -> str | None:
    """Why ``value`` cannot go into a transcript, or ``None``: nested more than
    :data:`MAX_DEPTH` levels, or a string (a key too) holding a lone surrogate. Walks the value
    once, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return "a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item, *item.values()]
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if level > MAX_DEPTH:
            return f"the value is nested more than {MAX_DEPTH} levels deep"
        stack.extend((child, level + 1) for child in children)
    return None


def check_value(value: Any, text: str = "") -> Any:
    """``value``, or :class:`UnfitValue` raised when :func:`unfit_reason` finds a reason."""
    reason = unfit_reason(value)
    if reason is not None:
        raise UnfitValue(reason, text)
    return value


def loads(text: str) -> Any:
    """``json.loads(text, strict=False)``, raising :class:`json.JSONDecodeError` (and only
    that) for text that is not JSON or whose value :func:`check_value` refuses."""
    try:
        value = json.loads(text, strict=False)
    except RecursionError:
        raise UnfitValue(f"the value is nested more than {MAX_DEPTH} levels deep", text) from None
    return check_value(value, text)
