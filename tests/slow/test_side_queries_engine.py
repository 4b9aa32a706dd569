"""Side queries on the real vLLM CPU engine: the transcript's exact prompt is served from the
prefix cache, and the transcript is left alone.

The tiny model's output is forced (a regex equal to the wanted text), so the main answer and
each side query's JSON answer are deterministic while every token still goes through vLLM's
scheduler and prefix cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from contextlib import aclosing

import pytest
from _tiny_model import forced

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, VLLMEngine
from agentkit.side_queries import (
    AuthorityResult,
    DomainResult,
    QueryResult,
    SideQueryResult,
    TitleResult,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

# Four kinds whose JSON answers fit their token limits in the tiny model's vocabulary (at most
# one token per character); ``action``'s 16 tokens are too few for its 18-token answer here.
MAIN_ANSWER = "A streaming parser keeps a small state between deltas."
SIDE_ANSWERS = {
    "authority": '{"level": "low"}',
    "query": '{"query": "streaming parser design"}',
    "domain": '{"domain": "software"}',
    "title": '{"title": "Streaming parser design"}',
}


_PHRASE = (
    "side queries reuse the cached prompt of the transcript so that each small "
    "judgement costs a short suffix and a few decode steps"
)


class SideForcedEngine:
    """Wraps the session's engine: a side query (request id ``side-{kind}-...``) is forced to
    its kind's JSON answer, any other request to the main answer."""

    def __init__(self, inner: VLLMEngine, marker_ids: dict[str, int]) -> None:
        self.inner = inner
        self.marker_ids = marker_ids
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        rid = request.request_id or ""
        kind = rid.split("-")[1] if rid.startswith("side-") else None
        text = SIDE_ANSWERS[kind] if kind is not None else MAIN_ANSWER
        # The side query's JSON schema is replaced by a regex for its one answer.
        extra = {**request.extra, **forced(text, self.marker_ids)}
        request = dataclasses.replace(request, extra=extra)
        async with aclosing(self.inner.generate(request)) as chunks:
            async for chunk in chunks:
                yield chunk


def _long_prompt(engine: VLLMEngine, tokens: int) -> str:
    """A user message of about ``tokens`` tokens, distinct from other tests' prompts."""
    words = _PHRASE.split()
    parts = ["Side-query cache test."]
    while len(engine.encode(" ".join(parts))) < tokens:
        parts.append(f"{words[len(parts) % len(words)]}{len(parts) % 97}")
    return " ".join(parts)


async def test_four_side_queries_reuse_the_main_prompt_and_leave_the_transcript(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    forcing = SideForcedEngine(engine, marker_ids)
    agent = agentkit.Agent(engine=forcing, profile="qwen3", temperature=0.0, max_tokens=64)
    result = await agent.run(_long_prompt(engine, 1500))
    main = result.usage.turns[0]
    assert 1400 <= main.prompt_tokens <= 1700, main.prompt_tokens
    assert result.output_text == MAIN_ANSWER
    transcript = result.transcript
    before = transcript.model_dump_json()

    kinds = ["query", "authority", "domain", "title"]
    answers = await agent.side_queries(kinds, transcript=transcript)

    assert transcript.model_dump_json() == before  # byte-identical: nothing appended or edited
    assert list(answers) == kinds
    for kind, answer in answers.items():
        assert isinstance(answer, SideQueryResult), (kind, answer)
    query, authority, domain, title = (answers[k] for k in kinds)
    assert isinstance(query, QueryResult)
    assert query.query == "streaming parser design"
    assert isinstance(authority, AuthorityResult)
    assert authority.level == "low"
    assert isinstance(domain, DomainResult)
    assert domain.domain == "software"
    assert isinstance(title, TitleResult)
    assert title.title == "Streaming parser design"

    # Each side prompt is the next turn's exact prompt (main prompt, answer, and the start of
    # the next message) plus a short instruction; vLLM counts whole KV blocks, never the last
    # prompt token, so "all of the shared prefix" is every complete block before its end.
    block = engine.llm.vllm_config.cache_config.block_size
    side_requests = [r for r in forcing.requests if (r.request_id or "").startswith("side-")]
    assert len(side_requests) == 4
    main_ids = forcing.requests[0].prompt_token_ids
    assert main_ids is not None
    assert len(main_ids) == main.prompt_tokens
    for kind, answer in answers.items():
        shared = answer.shared_prefix_tokens
        assert shared is not None
        assert shared > main.prompt_tokens, (kind, shared)
        assert answer.prompt_tokens > shared  # the instruction follows the shared prefix
        assert answer.cached_prompt_tokens >= (shared - 1) // block * block > 0, (
            kind,
            answer.cached_prompt_tokens,
            shared,
        )
        # ...which covers the whole main prompt.
        assert answer.cached_prompt_tokens >= (main.prompt_tokens - 1) // block * block
    for request in side_requests:
        assert request.prompt_token_ids is not None
        assert request.prompt_token_ids[: len(main_ids)] == main_ids
