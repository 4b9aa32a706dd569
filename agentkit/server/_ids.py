"""Ids shaped like each API's own: a prefix and random base62 characters.

Tool calls the model writes without an id of their own get one here, in the style of the API
that returns them: ``toolu_…`` on the Anthropic Messages API, ``call_…`` on Chat Completions
and Responses, so clients that check an id's shape (or log it) see what they expect.
"""

from __future__ import annotations

import secrets
import string

__all__ = ["new_call_id", "new_tool_use_id", "random_id"]

_BASE62 = string.ascii_letters + string.digits


def random_id(prefix: str, length: int = 24) -> str:
    """``prefix`` and ``length`` random base62 characters."""
    return prefix + "".join(secrets.choice(_BASE62) for _ in range(length))


def new_tool_use_id() -> str:
    """An Anthropic tool-use id: ``toolu_`` and 24 base62 characters."""
    return random_id("toolu_")


def new_call_id() -> str:
    """An OpenAI tool-call id (Chat Completions, Responses): ``call_`` and 24 base62
    characters."""
    return random_id("call_")
