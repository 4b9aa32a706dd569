"""The conversation as the GenAI semantic conventions' message attributes (content capture).

``gen_ai.input.messages`` and ``gen_ai.output.messages`` are JSON arrays of messages, each a
role and a list of typed parts (``text``, ``reasoning``, ``tool_call``,
``tool_call_response``); system messages go to ``gen_ai.system_instructions`` instead. Only
built when :attr:`~agentkit.telemetry.Instrumentation.capture_content` is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["input_messages", "output_messages", "system_instructions", "to_json"]


def to_json(value: Any) -> str:
    """Compact JSON, non-ASCII kept readable."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ReasoningBlock):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCallBlock):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif isinstance(block, ToolResultBlock):
            parts.append(
                {"type": "tool_call_response", "id": block.call_id, "response": block.content}
            )
    return parts


def input_messages(messages: Iterable[Message]) -> str:
    """``gen_ai.input.messages``: the conversation a request was rendered from, system
    messages left out."""
    return to_json([{"role": m.role, "parts": _parts(m)} for m in messages if m.role != "system"])


def system_instructions(messages: Iterable[Message]) -> str | None:
    """``gen_ai.system_instructions``: the system messages' parts, or ``None``."""
    parts = [part for m in messages if m.role == "system" for part in _parts(m)]
    return to_json(parts) if parts else None


def output_messages(message: Message, finish_reason: str) -> str:
    """``gen_ai.output.messages``: the turn's assistant message."""
    return to_json(
        [{"role": "assistant", "parts": _parts(message), "finish_reason": finish_reason}]
    )
