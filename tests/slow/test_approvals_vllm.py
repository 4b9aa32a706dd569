"""Approvals on the real vLLM CPU engine: a run pauses on a call that needs approval, its state
goes through JSON, a new agent resumes it and the run finishes, with the resumed prompt
extending the paused one token for token (so the prefix cache serves it).

The tiny random model's output is forced with structured outputs, as in the other slow tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import pytest
from _hermes import hermes
from _tiny_model import forced

import agentkit
from agentkit.approvals import Approve, RunState
from agentkit.engine import GenerationChunk, GenerationRequest, VLLMEngine
from agentkit.transcript import ToolResultBlock

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


class Forcing:
    """The session's engine, each request's output forced, in order."""

    def __init__(
        self, inner: VLLMEngine, outputs: Sequence[str], marker_ids: dict[str, int]
    ) -> None:
        self.inner = inner
        self.outputs = list(outputs)
        self.marker_ids = marker_ids
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        extra = {**request.extra, **forced(self.outputs.pop(0), self.marker_ids)}
        async with aclosing(self.inner.generate(dataclasses.replace(request, extra=extra))) as it:
            async for chunk in it:
                yield chunk


async def test_a_paused_run_saved_as_json_is_resumed_by_a_new_agent_and_finishes(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    removed: list[str] = []

    @agentkit.tool
    async def stat(path: str) -> str:
        """Size of a file."""
        return f"{path}: 4096 bytes"

    @agentkit.tool(requires_approval=True)
    async def remove(path: str) -> str:
        """Remove a file."""
        removed.append(path)
        return f"removed {path}"

    first = (
        "<think>check, then remove</think>\n\n"
        + hermes("stat", path="approvals-old.bin")
        + "\n"
        + hermes("remove", path="approvals-old.bin")
    )
    answer = "Removed approvals-old.bin."
    paused_engine = Forcing(engine, [first], marker_ids)
    agent = agentkit.Agent(engine=paused_engine, tools=[stat, remove], profile="qwen3")
    paused = await agent.run("approvals test: clean up approvals-old.bin")

    assert paused.paused
    assert removed == []
    assert paused.state is not None
    [pending] = paused.pending_approvals
    assert pending.name == "remove"
    text = paused.state.to_json()

    resumed_engine = Forcing(engine, [answer], marker_ids)
    fresh = agentkit.Agent(engine=resumed_engine, tools=[stat, remove], profile="qwen3")
    result = await fresh.resume(RunState.from_json(text), {pending.id: Approve()})

    assert result.output_text == answer
    assert removed == ["approvals-old.bin"]
    tool_message = result.transcript.messages[2]
    assert [b.content for b in tool_message.content if isinstance(b, ToolResultBlock)] == [
        "approvals-old.bin: 4096 bytes",
        "removed approvals-old.bin",
    ]
    # The generated ids survived JSON, so the resumed prompt extends the paused one exactly,
    # and the engine's prefix cache serves the shared part.
    generated = paused.transcript.messages[1].token_ids
    assert generated
    before = list(paused_engine.requests[0].prompt_token_ids or [])
    after = list(resumed_engine.requests[0].prompt_token_ids or [])
    assert after[: len(before) + len(generated)] == [*before, *generated]
    block = engine.llm.vllm_config.cache_config.block_size
    one, two = result.usage.turns
    assert two.cached_prompt_tokens >= (len(before) + len(generated) - 1) // block * block
    assert one == paused.usage.turns[0]
