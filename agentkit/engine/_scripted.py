"""An engine that replays recorded model output: deterministic, instant, no model needed.

It is how agentkit tests itself and how users test their agents: write what the model would
say, in the model's own format with its markers, and the whole runtime (parsers, dispatch,
transcript, HTTP adapters) runs on it exactly as on a real engine.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Self

import anyio

from agentkit._control_tokens import tokenizer_control_tokens
from agentkit._sequences import common_prefix_len
from agentkit.engine._base import FinishReason, GenerationChunk, GenerationRequest, Usage
from agentkit.engine._calls import ScriptedCall
from agentkit.engine._char_tokenizer import CharTokenizer
from agentkit.errors import EngineError, ScriptExhaustedError

__all__ = [
    "BaseScriptedEngine",
    "ScriptItem",
    "ScriptedEngine",
    "ScriptedOutput",
    "TokenizedScriptedEngine",
    "scripted_output",
    "split_pseudo_tokens",
]

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
"""One scripted response: raw model text (split into token-sized deltas), a list of explicit
deltas, or a :class:`ScriptedOutput`."""


def scripted_output(item: ScriptItem) -> ScriptedOutput:
    """``item`` as a :class:`ScriptedOutput`."""
    if isinstance(item, ScriptedOutput):
        return item
    if isinstance(item, str):
        return ScriptedOutput.of(item)
    return ScriptedOutput(list(item))


class BaseScriptedEngine:
    """What every test engine does around its outputs: record each request as a
    :class:`ScriptedCall`, check the output against the request's constraints, and stream it
    in token-sized pieces with simulated usage. Subclasses say where outputs come from.

    Usage is simulated: tokens are the pseudo-tokens of :func:`split_pseudo_tokens`, and
    cached prompt tokens are the longest prefix a prompt shares with an earlier prompt plus
    its output, as an engine's prefix cache would serve it.
    """

    def __init__(self, *, token_delay: float = 0.0, check_constraints: bool = True) -> None:
        if token_delay < 0:
            raise ValueError("token_delay must be >= 0")
        self.token_delay = token_delay
        self.check_constraints = check_constraints
        """Whether outputs are checked against the request's constraints (see
        :class:`~agentkit.engine.OutputConstraints`); ``False`` simulates an engine that
        ignores them."""
        self.requests: list[GenerationRequest] = []
        """Every request received, in order."""
        self.calls: list[ScriptedCall] = []
        """Every request received, with its run, turn and constraints (``calls[i].request is
        requests[i]``)."""
        self._turns: dict[str | None, int] = {}
        self._seen: list[list[str]] = []

    async def _output_for(self, call: ScriptedCall) -> ScriptedOutput:
        raise NotImplementedError

    def _record(self, request: GenerationRequest) -> ScriptedCall:
        run_id = request.context.run_id if request.context is not None else None
        self._turns[run_id] = turn = self._turns.get(run_id, 0) + 1
        call = ScriptedCall.of(request, index=len(self.calls), turn=turn)
        self.requests.append(request)
        self.calls.append(call)
        return call

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        call = self._record(request)
        output = await self._output_for(call)
        if self.check_constraints:
            complete = output.finish_reason == "stop" and all(
                isinstance(c, str) for c in output.chunks
            )
            call.constraints.check(output.text, complete=complete, request_id=request.request_id)
        async with aclosing(self._stream(output, request)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _pause(self) -> None:
        if self.token_delay:
            await anyio.sleep(self.token_delay)
        else:
            await anyio.lowlevel.checkpoint()

    async def _stream(
        self, output: ScriptedOutput, request: GenerationRequest
    ) -> AsyncGenerator[GenerationChunk, None]:
        prompt_tokens = split_pseudo_tokens(request.prompt)
        cached = max((common_prefix_len(prompt_tokens, seen) for seen in self._seen), default=0)
        start = time.perf_counter()
        first_token_at: float | None = None
        produced: list[str] = []
        for chunk in output.chunks:
            await self._pause()
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


class ScriptedEngine(BaseScriptedEngine):
    """Streams one scripted output per request, in order.

    Args:
        outputs: one item per request: raw model text (split into token-sized deltas), a
            list of explicit deltas, or a :class:`ScriptedOutput`.
        token_delay: seconds to wait before each delta, to make tool dispatch during
            generation observable.
        check_constraints: check each output against its request's constraints (``False``:
            record them only).

    The outputs form **one queue shared by every caller**: two agents running at once on
    this engine take each other's outputs. :meth:`per_run` gives each run its own copy of
    the script, :meth:`per_conversation` a script chosen from the conversation.

    Every request is kept in :attr:`requests`, and in :attr:`calls` with its run, turn and
    constraints, so tests can assert on prompts, tool choices and constraints.
    """

    def __init__(
        self,
        outputs: Sequence[ScriptItem],
        *,
        token_delay: float = 0.0,
        check_constraints: bool = True,
    ) -> None:
        super().__init__(token_delay=token_delay, check_constraints=check_constraints)
        self._scripts: dict[str | None, list[ScriptedOutput]] = {
            None: [scripted_output(item) for item in outputs]
        }
        self._script_key: Callable[[ScriptedCall], str | None] | None = None
        self._per_run = False
        self._cursors: dict[tuple[str | None, str | None], int] = {}

    @classmethod
    def per_run(cls, outputs: Sequence[ScriptItem], **options: Any) -> Self:
        """An engine on which every run replays ``outputs`` from the start, whatever other
        runs do at the same time. Runs are told apart by the agent's run id; requests
        without one (side queries, HTTP adapter turns) share one more copy."""
        engine = cls(outputs, **options)
        engine._per_run = True
        return engine

    @classmethod
    def per_conversation(
        cls,
        scripts: Mapping[str, Sequence[ScriptItem]],
        *,
        key: Callable[[ScriptedCall], str | None] | None = None,
        **options: Any,
    ) -> Self:
        """An engine on which each run replays the script its conversation selects.

        ``key`` computes the script's key from a request (a :class:`ScriptedCall`); by default
        the text of the conversation's first user message. Each run has its own place in its
        script, so two runs on the same key both replay it whole.
        """
        engine = cls([], **options)
        engine._scripts = {
            name: [scripted_output(item) for item in items] for name, items in scripts.items()
        }
        engine._script_key = key or _first_user_text
        engine._per_run = True
        return engine

    @property
    def _outputs(self) -> list[ScriptedOutput]:
        """The shared script (or, per conversation, nothing), normalised."""
        return self._scripts.get(None, [])

    @property
    def remaining(self) -> int:
        """How many scripted outputs have not been requested yet: of the shared script, or,
        for per-run scripts, summed over the runs seen so far."""
        if not self._per_run:
            return len(self._scripts[None]) - self._cursors.get((None, None), 0)
        return sum(len(self._scripts[key]) - n for (key, _), n in self._cursors.items())

    async def _output_for(self, call: ScriptedCall) -> ScriptedOutput:
        key = self._script_key(call) if self._script_key is not None else None
        script = self._scripts.get(key)
        if script is None:
            known = ", ".join(repr(k) for k in self._scripts) or "none"
            raise ScriptExhaustedError(
                f"ScriptedEngine has no script for conversation {key!r} (request "
                f"{call.index + 1}; scripts: {known})",
                request_id=call.request.request_id,
            )
        cursor = (key, call.run_id if self._per_run else None)
        taken = self._cursors.setdefault(cursor, 0)
        if taken >= len(script):
            raise ScriptExhaustedError(
                self._exhausted(call, len(script)), request_id=call.request.request_id
            )
        self._cursors[cursor] = taken + 1
        return script[taken]

    def _exhausted(self, call: ScriptedCall, size: int) -> str:
        if self._per_run:
            return (
                f"ScriptedEngine has no output left for turn {call.turn} of run "
                f"{call.run_id} (request {call.index + 1}; its script holds {size})"
            )
        message = (
            f"ScriptedEngine has no output left for request {call.index + 1} (it was given {size})"
        )
        runs = {c.run_id for c in self.calls if c.run_id is not None}
        if len(runs) > 1:
            message += (
                f"; {len(runs)} runs took outputs from this one shared script: "
                "ScriptedEngine.per_run gives each run its own"
            )
        return message


def _first_user_text(call: ScriptedCall) -> str | None:
    return call.first_user_text


class TokenizedScriptedEngine(ScriptedEngine):
    """A scripted engine with a tokenizer, streaming as vLLM does: one token per chunk with
    its id, and the stop token at the end as an id without text.

    With ``encode`` it makes the agent (or the HTTP server) build token-exact prompts, count
    tokens and report cached prompt tokens as a prefix cache would (the longest prefix a prompt
    shares, token for token, with an earlier prompt and its output). ``tokenizer`` defaults to
    a :class:`CharTokenizer` over ``specials``; ``stop`` is the stop token appended to each
    output's ids (a profile's first stop string).

    It records constraints without checking them unless ``check_constraints=True``: it is
    what ``agentkit serve --engine scripted`` replays to HTTP clients, whose requests carry
    tool choices the script's author did not pick.
    """

    def __init__(
        self,
        outputs: Sequence[ScriptItem],
        *,
        specials: Sequence[str] = (),
        stop: str | None = None,
        tokenizer: CharTokenizer | None = None,
        token_delay: float = 0.0,
        check_constraints: bool = False,
    ) -> None:
        super().__init__(outputs, token_delay=token_delay, check_constraints=check_constraints)
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

    async def _stream(
        self, output: ScriptedOutput, request: GenerationRequest
    ) -> AsyncGenerator[GenerationChunk, None]:
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
                await self._pause()
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
