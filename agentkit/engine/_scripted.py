"""An engine that replays recorded model output: deterministic, instant, no model needed.

It is how agentkit tests itself and how users test their agents: write what the model would
say, in the model's own format with its markers, and the whole runtime (parsers, dispatch,
transcript, HTTP adapters) runs on it exactly as on a real engine.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

import anyio

from agentkit._control_tokens import tokenizer_control_tokens
from agentkit._sequences import common_prefix_len
from agentkit.engine._base import FinishReason, GenerationChunk, GenerationRequest, Usage
from agentkit.engine._char_tokenizer import CharTokenizer
from agentkit.errors import EngineError, ScriptExhaustedError

__all__ = ["ScriptedEngine", "ScriptedOutput", "TokenizedScriptedEngine", "split_pseudo_tokens"]

_PSEUDO_TOKEN = re.compile(r"\s*\S{1,4}|\s+")


def split_pseudo_tokens(text: str) -> list[str]:
    """Split text into token-sized pieces (up to four non-space characters, with the
    whitespace before them), so markers arrive split across deltas as they do from a real
    tokenizer."""
    return _PSEUDO_TOKEN.findall(text)


@dataclass(frozen=True, slots=True)
class ScriptedOutput:
    """One scripted response.

    ``chunks`` are the exact deltas to stream. An exception among them is raised at that
    point of the stream, as an engine failing mid-generation would.
    """

    chunks: Sequence[str | BaseException]
    finish_reason: FinishReason = "stop"

    @classmethod
    def of(cls, text: str, *, finish_reason: FinishReason = "stop") -> ScriptedOutput:
        return cls(split_pseudo_tokens(text), finish_reason)

    @property
    def text(self) -> str:
        return "".join(c for c in self.chunks if isinstance(c, str))


ScriptItem = str | ScriptedOutput | Sequence[str | BaseException]


class ScriptedEngine:
    """Streams one scripted output per request, in order.

    Args:
        outputs: one item per request: raw model text (split into token-sized deltas), a
            list of explicit deltas, or a :class:`ScriptedOutput`.
        token_delay: seconds to wait before each delta, to make tool dispatch during
            generation observable.

    Every request received is kept in :attr:`requests`, so tests can assert on prompts.
    Usage is simulated: tokens are the pseudo-tokens above, and cached prompt tokens are the
    longest prefix a prompt shares with an earlier prompt plus its output, as an engine's
    prefix cache would serve it.
    """

    def __init__(self, outputs: Sequence[ScriptItem], *, token_delay: float = 0.0) -> None:
        if token_delay < 0:
            raise ValueError("token_delay must be >= 0")
        self._outputs = [self._normalise(item) for item in outputs]
        self._next = 0
        self._seen: list[list[str]] = []
        self.token_delay = token_delay
        self.requests: list[GenerationRequest] = []

    @staticmethod
    def _normalise(item: ScriptItem) -> ScriptedOutput:
        if isinstance(item, ScriptedOutput):
            return item
        if isinstance(item, str):
            return ScriptedOutput.of(item)
        return ScriptedOutput(list(item))

    @property
    def remaining(self) -> int:
        """How many scripted outputs have not been requested yet."""
        return len(self._outputs) - self._next

    def _cached_tokens(self, prompt_tokens: list[str]) -> int:
        return max((common_prefix_len(prompt_tokens, seen) for seen in self._seen), default=0)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        if self._next >= len(self._outputs):
            raise ScriptExhaustedError(
                f"ScriptedEngine has no output left for request {len(self.requests)} "
                f"(it was given {len(self._outputs)})",
                request_id=request.request_id,
            )
        output = self._outputs[self._next]
        self._next += 1
        prompt_tokens = split_pseudo_tokens(request.prompt)
        cached = self._cached_tokens(prompt_tokens)
        start = time.perf_counter()
        first_token_at: float | None = None
        produced: list[str] = []
        for chunk in output.chunks:
            if self.token_delay:
                await anyio.sleep(self.token_delay)
            else:
                await anyio.lowlevel.checkpoint()
            if isinstance(chunk, BaseException):
                raise EngineError(
                    f"scripted engine failure: {chunk}", request_id=request.request_id
                ) from chunk
            if first_token_at is None:
                first_token_at = time.perf_counter() - start
            produced.append(chunk)
            yield GenerationChunk(text=chunk)
        self._seen.append(prompt_tokens + split_pseudo_tokens("".join(produced)))
        n_prompt = (
            len(request.prompt_token_ids)
            if request.prompt_token_ids is not None
            else len(prompt_tokens)
        )
        yield GenerationChunk(
            text="",
            finish_reason=output.finish_reason,
            usage=Usage(
                prompt_tokens=n_prompt,
                cached_prompt_tokens=min(cached, n_prompt),
                output_tokens=len(produced),
                time_to_first_token_s=first_token_at,
            ),
        )


class TokenizedScriptedEngine(ScriptedEngine):
    """A scripted engine with a tokenizer, streaming as vLLM does: one token per chunk with
    its id, and the stop token at the end as an id without text.

    With ``encode`` it makes the agent (or the HTTP server) build token-exact prompts, count
    tokens and report cached prompt tokens as a prefix cache would (the longest prefix a prompt
    shares, token for token, with an earlier prompt and its output). ``tokenizer`` defaults to
    a :class:`CharTokenizer` over ``specials``; ``stop`` is the stop token appended to each
    output's ids (a profile's first stop string).
    """

    def __init__(
        self,
        outputs: Sequence[ScriptItem],
        *,
        specials: Sequence[str] = (),
        stop: str | None = None,
        tokenizer: CharTokenizer | None = None,
        token_delay: float = 0.0,
    ) -> None:
        super().__init__(outputs, token_delay=token_delay)
        self.tokenizer = tokenizer or CharTokenizer([*specials, *([stop] if stop else [])])
        self._stop_ids = self.tokenizer.encode(stop) if stop else []
        self._history: list[list[int]] = []

    @property
    def control_tokens(self) -> frozenset[str]:
        """The strings the tokenizer encodes as one control token (see
        :mod:`agentkit._control_tokens`)."""
        return tokenizer_control_tokens(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        if self._next >= len(self._outputs):
            raise ScriptExhaustedError(
                f"the script has no output left for request {len(self.requests)} "
                f"(it holds {len(self._outputs)})",
                request_id=request.request_id,
            )
        output = self._outputs[self._next]
        self._next += 1
        prompt = list(request.prompt_token_ids or self.encode(request.prompt))
        cached = max((common_prefix_len(prompt, seen) for seen in self._history), default=0)
        start = time.perf_counter()
        first_token_at: float | None = None
        produced: list[int] = []
        for piece in _runs(output.chunks):
            if isinstance(piece, EngineError):
                raise piece
            if isinstance(piece, BaseException):
                raise EngineError(
                    f"scripted engine failure: {piece}", request_id=request.request_id
                ) from piece
            for token in self.encode(piece):
                if self.token_delay:
                    await anyio.sleep(self.token_delay)
                else:
                    await anyio.lowlevel.checkpoint()
                early = None
                if first_token_at is None:
                    first_token_at = time.perf_counter() - start
                    early = Usage(prompt_tokens=len(prompt), cached_prompt_tokens=cached)
                produced.append(token)
                yield GenerationChunk(text=self.decode([token]), token_ids=[token], usage=early)
        stop = self._stop_ids if output.finish_reason == "stop" else []
        self._history.append(prompt + produced + stop)
        yield GenerationChunk(
            text="",
            token_ids=stop,
            finish_reason=output.finish_reason,
            usage=Usage(
                prompt_tokens=len(prompt),
                cached_prompt_tokens=cached,
                output_tokens=len(produced) + len(stop),
                time_to_first_token_s=first_token_at,
            ),
        )


def _runs(chunks: Sequence[str | BaseException]) -> list[str | BaseException]:
    """Consecutive text chunks joined (tokenized whole, as a model emits its markers),
    exceptions kept in place."""
    out: list[str | BaseException] = []
    for chunk in chunks:
        if isinstance(chunk, str) and out and isinstance(out[-1], str):
            out[-1] += chunk
        else:
            out.append(chunk)
    return out
