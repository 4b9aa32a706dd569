"""The conversation every family template is tested on."""

from __future__ import annotations

from agentkit.profiles import ToolSpec
from agentkit.transcript import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

LOOKUP: ToolSpec = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a key up.",
        "parameters": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "The key."},
                "limit": {"default": 3, "type": "integer"},
            },
            "required": ["key"],
        },
    },
}
TOOLS = [LOOKUP]

FIRST_TURN = [
    ReasoningBlock(text="Check Paris."),
    ToolCallBlock(id="c1", name="lookup", arguments={"key": "Paris"}),
    ReasoningBlock(text="Now Oslo."),
    ToolCallBlock(id="c2", name="lookup", arguments={"key": "Oslo", "limit": 2}),
]
SECOND_TURN = [ReasoningBlock(text="Both known."), TextBlock(text="Paris 20C, Oslo 5C.")]
RESULTS = [
    ToolResultBlock(call_id="c1", name="lookup", content="20C"),
    ToolResultBlock(call_id="c2", name="lookup", content="5C"),
]


def conversation() -> Transcript:
    """System, user, an assistant turn of interleaved reasoning and two calls, the results
    (one tool message each), an answer with reasoning, and a new user message."""
    t = Transcript()
    t.add("system", "Be terse.")
    t.add("user", "Weather in Paris and Oslo?")
    t.add("assistant", [b.model_copy() for b in FIRST_TURN])
    t.add("tool", [RESULTS[0]])
    t.add("tool", [RESULTS[1]])
    t.add("assistant", [b.model_copy() for b in SECOND_TURN])
    t.add("user", "Thanks.")
    return t
