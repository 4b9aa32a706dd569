"""RemoteEngine against a real vLLM server: the same agent session as on VLLMEngine.

The server (vLLM's OpenAI-compatible one, in a subprocess on 127.0.0.1) serves the session's
tiny model with the in-process engine's settings. Each turn's output is forced on both engines
with the same ``request.extra`` (structured outputs and a logit bias, which RemoteEngine sends
as body fields), so the two transcripts must agree token for token, and the server's prefix
cache must serve turn 2 the prompt and output of turn 1: RemoteEngine sends the exact prompt
token ids that agentkit built with the model's local tokenizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from _hermes import hermes
from _tiny_model import forced
from _vllm_server import VLLMServer, server_flags, vllm_server

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, RemoteEngine, VLLMEngine
from agentkit.transcript import ReasoningBlock, ToolCallBlock

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SERVED_NAME = "tiny"
SERVER_FLAGS = [
    # conftest.ENGINE_ARGS, which the session's in-process engine runs with.
    *server_flags(
        {
            "distributed_executor_backend": "uni",
            "enforce_eager": True,
            "max_model_len": 2048,
            "dtype": "float32",
        }
    ),
    "--enable-prefix-caching",  # VLLMEngine's default; the server's too, said explicitly
    "--enable-prompt-tokens-details",  # cached prompt tokens in `usage`
    "--disable-log-stats",
    "--disable-uvicorn-access-log",
]


PROMPT = "Remote twin: look up a and b."
FIRST = (
    "<think>r0</think>\n\n"
    + hermes("lookup", q="a")
    + "\n<think>r1</think>\n\n"
    + hermes("lookup", q="b")
)
SECOND = "<think>both found</think>\n\nThe results are result-a and result-b."


@pytest.fixture(scope="module")
def server(tiny_model: Path) -> Iterator[VLLMServer]:
    with vllm_server(tiny_model, SERVER_FLAGS, served_name=SERVED_NAME) as server:
        yield server


@pytest.fixture(scope="module")
async def remote(
    server: VLLMServer, tiny_model: Path, anyio_backend: str
) -> AsyncIterator[RemoteEngine]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    async with RemoteEngine(server.url, model=SERVED_NAME, tokenizer=tokenizer) as engine:
        await engine.start()
        yield engine


class Forced:
    """Forces each request's output, in order, through ``request.extra``; keeps the
    requests. Either engine's tokenizer is the agent's, so prompts are token ids."""

    def __init__(
        self, inner: VLLMEngine | RemoteEngine, outputs: Sequence[str], marker_ids: dict[str, int]
    ) -> None:
        self.inner = inner
        self.outputs = list(outputs)
        self.marker_ids = marker_ids
        self.requests: list[GenerationRequest] = []
        self.encode = inner.encode
        self.decode = inner.decode

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        request = dataclasses.replace(
            request, extra={**request.extra, **forced(self.outputs.pop(0), self.marker_ids)}
        )
        self.requests.append(request)
        async with aclosing(self.inner.generate(request)) as chunks:
            async for chunk in chunks:
                yield chunk


async def run_session(
    inner: VLLMEngine | RemoteEngine, marker_ids: dict[str, int]
) -> tuple[agentkit.RunResult, Forced]:
    forcing = Forced(inner, [FIRST, SECOND], marker_ids)

    @agentkit.tool
    async def lookup(q: str) -> str:
        """Look q up."""
        return f"result-{q}"

    # Greedy: the regex admits one text, but several tokenizations of it; both engines must
    # pick the same one. An explicit max_tokens: the default is tested on its own below.
    agent = agentkit.Agent(
        engine=forcing, tools=[lookup], profile="qwen3", temperature=0.0, max_tokens=256
    )
    return await agent.run(PROMPT), forcing


def comparable(result: agentkit.RunResult) -> list[dict[str, Any]]:
    """The transcript without tool call ids (random per run)."""
    return [
        {
            "role": message.role,
            "blocks": [b.model_dump(exclude={"id", "call_id"}) for b in message.content],
            "raw": message.raw,
            "token_ids": message.token_ids,
        }
        for message in result.transcript.messages
    ]


async def test_a_session_through_the_server_matches_the_in_process_engine(
    engine: VLLMEngine, remote: RemoteEngine, server: VLLMServer, marker_ids: dict[str, int]
) -> None:
    local, local_forcing = await run_session(engine, marker_ids)
    with server.log_shown_on_failure():
        result, forcing = await run_session(remote, marker_ids)

    turn_one = result.transcript.messages[1]
    assert turn_one.role == "assistant"
    assert turn_one.raw == FIRST
    assert [type(b) for b in turn_one.content] == [
        ReasoningBlock,
        ToolCallBlock,
        ReasoningBlock,
        ToolCallBlock,
    ]
    assert result.output_text == "The results are result-a and result-b."
    assert turn_one.token_ids is not None
    assert turn_one.token_ids[-1] == engine.tokenizer.eos_token_id
    # Token for token: the same prompts went out, the same tokens came back.
    assert [r.prompt_token_ids for r in forcing.requests] == [
        r.prompt_token_ids for r in local_forcing.requests
    ]
    assert comparable(result) == comparable(local)
    counts = [(t.prompt_tokens, t.output_tokens) for t in result.usage.turns]
    assert counts == [(t.prompt_tokens, t.output_tokens) for t in local.usage.turns]

    # The server's prefix cache served turn 2 every complete block of turn 1's prompt and
    # output (the last sampled token has no KV yet), as the in-process engine's does.
    block = engine.llm.vllm_config.cache_config.block_size
    one, two = result.usage.turns
    ids_one, ids_two = (list(r.prompt_token_ids or []) for r in forcing.requests)
    shared = ids_one + list(turn_one.token_ids)
    assert ids_two[: len(shared)] == shared
    assert one.cached_prompt_tokens == 0  # a fresh server
    assert two.cached_prompt_tokens >= (len(shared) - 1) // block * block > 0
    assert one.time_to_first_token_s is not None


async def test_no_max_tokens_allows_the_rest_of_the_context(
    remote: RemoteEngine, server: VLLMServer, marker_ids: dict[str, int]
) -> None:
    """``max_tokens=None`` means "up to the context length", as on VLLMEngine. vLLM's
    ``/v1/completions`` reads an absent or ``null`` ``max_tokens`` as 16 tokens."""
    output = "<think>" + " ".join(f"step{i}" for i in range(20)) + "</think>\n\nlong answer"
    prompt = remote.encode("<|im_start|>user\nno limit given<|im_end|>\n<|im_start|>assistant\n")
    request = GenerationRequest(
        prompt="", prompt_token_ids=prompt, extra=forced(output, marker_ids)
    )
    with server.log_shown_on_failure():
        chunks = [chunk async for chunk in remote.generate(request)]
    assert chunks[-1].finish_reason == "stop"
    assert "".join(c.text for c in chunks) == output
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.output_tokens > 16
