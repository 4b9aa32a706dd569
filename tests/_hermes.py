"""Hermes tool-call markup (Qwen3's format), as the tests' scripted models write it."""

from __future__ import annotations

import json


def hermes(name: str, **arguments: object) -> str:
    """One ``<tool_call>`` block calling ``name`` with ``arguments``."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
