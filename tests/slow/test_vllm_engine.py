"""VLLMEngine end to end on the real vLLM CPU engine, with a tiny random model.

The model's output is forced with structured outputs (a regex equal to the wanted text), so
the tests are deterministic while every token still goes through vLLM's scheduler, sampler,
detokenizer and prefix cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import anyio
import pytest
from _hermes import hermes
from _tiny_model import forced

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, VLLMEngine
from agentkit.errors import ConfigurationError
from agentkit.events import ToolCallStarted
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


class ForcedEngine:
    """Wraps the session's engine: forces each request's output, in order, and counts the
    chunks streamed (the tests' clock)."""

    def __init__(
        self, inner: VLLMEngine, outputs: Sequence[str], marker_ids: dict[str, int]
    ) -> None:
        self.inner = inner
        self.outputs = list(outputs)
        self.marker_ids = marker_ids
        self.chunks = 0
        self.turn_chunks: list[int] = []
        """Chunks streamed when each request's stream ended."""
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        """The inner engine's tokenizer: the agent builds token-exact prompts with it."""
        return self.inner.encode(text)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        extra = {**request.extra, **forced(self.outputs.pop(0), self.marker_ids)}
        request = dataclasses.replace(request, extra=extra)
        async with aclosing(self.inner.generate(request)) as chunks:
            async for chunk in chunks:
                self.chunks += 1
                if chunk.finish_reason is not None:
                    self.turn_chunks.append(self.chunks)
                yield chunk


async def generate(engine: VLLMEngine, request: GenerationRequest) -> list[GenerationChunk]:
    return [chunk async for chunk in engine.generate(request)]


async def test_interleaved_turn_dispatches_each_tool_as_its_call_completes(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    tail = "All " + " ".join(f"w{i}" for i in range(30))
    first = (
        "<think>r0</think>\n\n"
        + hermes("lookup", q="a")
        + "\n<think>r1</think>\n\n"
        + hermes("lookup", q="b")
        + "\n"
        + tail
    )
    forcing = ForcedEngine(engine, [first, "done"], marker_ids)
    started_at: dict[str, int] = {}

    @agentkit.tool
    async def lookup(q: str) -> str:
        """Look q up."""
        started_at[q] = forcing.chunks
        return f"result-{q}"

    agent = agentkit.Agent(engine=forcing, tools=[lookup], profile="qwen3")
    call_began: list[int] = []
    async with agent.stream("go") as events:
        async for event in events:
            if isinstance(event, ToolCallStarted):
                call_began.append(forcing.chunks)
    result = events.result

    # Chunks streamed so far are the clock: a's tool ran before b's call began to stream,
    # and b's before the turn's last chunk (30 tokens of text follow the call).
    assert len(call_began) == 2
    assert started_at["a"] < call_began[1]
    assert started_at["b"] < forcing.turn_chunks[0]
    turn_one = result.transcript.messages[1]
    assert turn_one.token_ids is not None
    assert [type(b) for b in turn_one.content] == [
        ReasoningBlock,
        ToolCallBlock,
        ReasoningBlock,
        ToolCallBlock,
        TextBlock,
    ]
    assert turn_one.raw == first
    assert [b.text for b in turn_one.content if isinstance(b, ReasoningBlock)] == ["r0", "r1"]
    results = [b.content for b in result.transcript.messages[2].content]
    assert results == ["result-a", "result-b"]
    assert all(isinstance(b, ToolResultBlock) for b in result.transcript.messages[2].content)
    assert result.output_text == "done"

    # Exact replay: turn 2's prompt is turn 1's prompt ids + the generated ids + new tokens,
    # so every complete KV block of turn 1's prompt and output is served from the cache.
    block = engine.llm.vllm_config.cache_config.block_size
    one, two = result.usage.turns
    assert one.output_tokens == len(turn_one.token_ids)
    assert turn_one.token_ids[-1] == engine.tokenizer.eos_token_id
    ids_one, ids_two = (list(r.prompt_token_ids or []) for r in forcing.requests)
    shared = ids_one + list(turn_one.token_ids)
    assert ids_two[: len(shared)] == shared
    assert two.prompt_tokens > one.prompt_tokens + one.output_tokens
    assert two.cached_prompt_tokens >= (len(shared) - 1) // block * block > 0
    assert one.time_to_first_token_s is not None


async def test_a_prompt_extending_the_last_one_is_served_from_the_prefix_cache(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    words = " ".join(f"prefix{i} lorem ipsum" for i in range(2000))
    prompt_ids = engine.encode(words)[:1400]
    output = "<think>plan</think>\n\n" + hermes("lookup", q="cached")
    request = GenerationRequest(
        prompt="", prompt_token_ids=prompt_ids, extra=forced(output, marker_ids)
    )
    chunks = await generate(engine, request)
    generated = [t for c in chunks for t in c.token_ids]
    assert "".join(c.text for c in chunks) == output
    assert chunks[-1].finish_reason == "stop"
    first = chunks[-1].usage
    assert first is not None
    assert first.prompt_tokens == 1400
    assert first.output_tokens == len(generated)

    more = engine.encode("<|im_end|>\n<|im_start|>user\nnext question<|im_end|>\n")
    second_ids = [*prompt_ids, *generated, *more]
    chunks = await generate(
        engine,
        GenerationRequest(prompt="", prompt_token_ids=second_ids, extra=forced("ok", marker_ids)),
    )
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens == len(second_ids)
    # Every complete block of the shared prefix (prompt + output; the final sampled token
    # never went through the model, so it has no KV yet) comes from the cache, including
    # the block the output completed: the output's own KV is reused.
    block = engine.llm.vllm_config.cache_config.block_size
    computed = len(prompt_ids) + len(generated) - 1
    assert usage.cached_prompt_tokens == computed // block * block
    assert usage.cached_prompt_tokens > len(prompt_ids)  # 1,408 with 128-token blocks


async def test_concurrent_generations_on_one_engine(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    targets = [f"<think>job {i}</think>answer {i} " + "x" * (5 * i) for i in range(4)]
    results: dict[int, list[GenerationChunk]] = {}

    async def one(i: int) -> None:
        prompt = f"<|im_start|>user\nconcurrent job {i}<|im_end|>\n<|im_start|>assistant\n"
        request = GenerationRequest(prompt=prompt, extra=forced(targets[i], marker_ids))
        results[i] = await generate(engine, request)

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(one, i)
    for i, chunks in results.items():
        assert "".join(c.text for c in chunks) == targets[i]
        assert chunks[-1].finish_reason == "stop"
        assert engine.decode([t for c in chunks for t in c.token_ids]) == targets[i] + "<|im_end|>"
    assert engine.num_unfinished_requests == 0


async def test_stopping_a_stream_early_aborts_the_request(engine: VLLMEngine) -> None:
    request = GenerationRequest(
        prompt="<|im_start|>user\nwrite forever<|im_end|>\n<|im_start|>assistant\n",
        max_tokens=1500,
        extra={"ignore_eos": True},
    )
    received = 0
    async with aclosing(engine.generate(request)) as chunks:
        async for _ in chunks:
            received += 1
            if received == 3:
                assert engine.num_unfinished_requests == 1
                # The engine core holds KV blocks for the running request...
                assert not await engine.llm.reset_prefix_cache()
                break
    # ...and once the stream is closed, neither the front end nor the engine core does.
    assert engine.num_unfinished_requests == 0
    assert await engine.llm.reset_prefix_cache()


async def test_configuration_errors_say_what_to_fix(vllm_environment: None) -> None:
    """Against real vLLM (no engine starts: each fails while resolving the configuration)."""
    with pytest.raises(ConfigurationError, match="does not exist"):
        VLLMEngine("/no/such/model")
    with pytest.raises(ConfigurationError, match="did you mean 'max_model_len'"):
        await VLLMEngine("agentkit-test/not-a-model", max_model_length=64).start()
    with pytest.raises(ConfigurationError, match="not in the Hugging Face cache"):
        await VLLMEngine("agentkit-test/not-a-model").start()
