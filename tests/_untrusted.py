"""Untrusted text in every place it enters a prompt, and the same conversation without the
control-token strings in it: what the control-token tests compare."""

from __future__ import annotations

from typing import Any

from agentkit.transcript import (
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def everywhere(text: str) -> Transcript:
    """``text`` in the system prompt, a user message, a call's arguments (a turn sent back by
    a client, not generated here), a tool result, and the next user message."""
    t = Transcript()
    t.add("system", f"Be brief. {text}")
    t.add("user", text)
    call = ToolCallBlock(id="c1", name="read_file", arguments={"path": text})
    t.add("assistant", [TextBlock(text=f"Reading {text}"), call])
    t.add("tool", [ToolResultBlock(call_id="c1", name="read_file", content=text)])
    t.add("user", f"and {text}")
    return t


def without(transcript: Transcript, strings: frozenset[str]) -> Transcript:
    """``transcript`` with every one of ``strings`` taken out of its content: the template's
    own markers alone."""
    ordered = sorted(strings, key=len, reverse=True)

    def clean(text: str) -> str:
        for s in ordered:
            text = text.replace(s, "")
        return text

    def clean_value(value: Any) -> Any:
        if isinstance(value, str):
            return clean(value)
        if isinstance(value, dict):
            return {clean(k): clean_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean_value(v) for v in value]
        return value

    messages = []
    for m in transcript.messages:
        content: list[Any] = []
        for b in m.content:
            if isinstance(b, TextBlock):
                content.append(b.model_copy(update={"text": clean(b.text)}))
            elif isinstance(b, ToolResultBlock):
                content.append(b.model_copy(update={"content": clean(b.content)}))
            elif isinstance(b, ToolCallBlock):
                content.append(b.model_copy(update={"arguments": clean_value(b.arguments)}))
            else:
                content.append(b)
        messages.append(Message(role=m.role, content=content))
    return Transcript(messages=messages)
