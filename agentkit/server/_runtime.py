"""One model turn for an HTTP request, over the same objects as the Python API.

The HTTP adapters translate a wire request into a transcript, tools and options; this module
builds the prompt (``PromptBuilder``: the profile's template, replay policy and token-exact
replay), runs the engine and the profile's parser, and hands back agentkit's parse events.
The client runs the tools, so there is no dispatch here: one request, one model turn.

Each turn the server produced is remembered (its blocks' exact raw text and the token ids
generated) in a :class:`~agentkit.server._turns.TurnStore`, so that when the client sends the
turn back — as blocks, with the whitespace between them and the stop token gone — the next
prompt begins with the previous prompt and the exact generated tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit._logging import get_logger
from agentkit._prompt import Prompt, PromptBuilder
from agentkit._tool_choice import ToolChoice, tool_choice_options, validate_tool_choice
from agentkit.engine import Engine, GenerationRequest, Usage
from agentkit.events import ParseEvent
from agentkit.profiles import Profile
from agentkit.server._turns import TurnStore
from agentkit.side_queries import AgentHints, hint_options
from agentkit.transcript import Message, Transcript

__all__ = ["ModelTurn", "ServerRuntime", "TurnSpec", "first_event"]

_log = get_logger("agentkit.server")


@dataclass(frozen=True, slots=True)
class TurnSpec:
    """What a request asks of one model turn, whatever its wire format."""

    transcript: Transcript
    tools: Sequence[dict[str, Any]] = ()
    """OpenAI-style function specs, rendered into the prompt by the profile's template."""
    tool_choice: ToolChoice = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: Sequence[str] = ()
    thinking: bool | None = None
    """``False``: the request turned thinking off (honoured where the profile has a switch)."""
    hints: AgentHints | None = None
    """The request's ``agent_hints`` (``priority`` reaches vLLM's scheduler)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extra backend options (``GenerationRequest.extra``)."""


class ServerRuntime:
    """What every request shares: the engine, the profile, the turn store, the prompt log.

    Args:
        engine: the engine (one for the whole server; it batches concurrent requests).
        profile: the served model's profile.
        turns: turns produced here, for exact replay when clients send them back.
        log_prompts: a directory to write each request's exact prompt to, or ``None``.
        id_factory: makes tool-call ids in the wire format's style.
    """

    def __init__(
        self,
        engine: Engine,
        profile: Profile,
        *,
        turns: TurnStore | None = None,
        log_prompts: Path | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.engine = engine
        self.profile = profile
        self.turns = turns if turns is not None else TurnStore()
        self.log_prompts = log_prompts
        if log_prompts is not None:
            log_prompts.mkdir(parents=True, exist_ok=True)
        self._id_factory = id_factory
        self._sequence = itertools.count(1)

    def encode(self, text: str) -> list[int] | None:
        """Token ids of ``text`` with the engine's tokenizer, or ``None`` without one."""
        encode = getattr(self.engine, "encode", None)
        return list(encode(text)) if callable(encode) else None

    def decode(self, ids: Sequence[int]) -> str | None:
        decode = getattr(self.engine, "decode", None)
        return str(decode(list(ids))) if callable(decode) else None

    def prompt(self, spec: TurnSpec) -> Prompt:
        """The exact prompt ``spec`` would be sent with."""
        # Thinking off changes only the generation prompt (Qwen3 and Nemotron-3 close an empty
        # reasoning block there, as their templates do): the history is unchanged.
        thinking = spec.thinking is not False or not self.profile.thinking_switch
        builder = PromptBuilder(self.profile, self.engine, list(spec.tools), thinking=thinking)
        return builder.next_prompt(spec.transcript)

    def start(self, spec: TurnSpec, *, request_id: str) -> ModelTurn:
        """Prepare the turn: validate, build the prompt, log it. Generation starts when the
        turn's events are iterated."""
        schemas = {
            t["function"]["name"]: t["function"].get("parameters") or {}
            for t in spec.tools
            if "function" in t
        }
        validate_tool_choice(spec.tool_choice, list(schemas))
        options = {
            **tool_choice_options(
                self.profile, spec.tool_choice, schemas, thinking=spec.thinking is not False
            ),
            **hint_options(spec.hints),
            **spec.options,
        }
        prompt = self.prompt(spec)
        self._log_prompt(request_id, prompt)
        request = GenerationRequest(
            prompt=prompt.text,
            prompt_token_ids=prompt.token_ids,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            top_p=spec.top_p,
            stop=[*self.profile.stop, *spec.stop],
            request_id=request_id,
            extra=options,
        )
        parser = self.profile.new_parser(
            schemas,
            tool_calls=spec.tool_choice != "none",
            id_factory=self._id_factory,
            thinking=spec.thinking is not False,
        )
        return ModelTurn(self, request, parser, prompt, stop_sequences=tuple(spec.stop))

    def _log_prompt(self, request_id: str, prompt: Prompt) -> None:
        if self.log_prompts is None:
            return
        n = next(self._sequence)
        path = self.log_prompts / f"{n:06d}-{request_id}.txt"
        path.write_text(prompt.text, encoding="utf-8")


class ModelTurn:
    """One model turn: iterate :meth:`events`; afterwards :attr:`message`, :attr:`usage`,
    :attr:`finish_reason` hold the outcome. Closing the iteration early aborts the request."""

    def __init__(
        self,
        runtime: ServerRuntime,
        request: GenerationRequest,
        parser: Any,
        prompt: Prompt,
        *,
        stop_sequences: tuple[str, ...] = (),
    ) -> None:
        self._runtime = runtime
        self.request = request
        self._parser = parser
        self.prompt = prompt
        self.stop_sequences = stop_sequences
        self.prompt_tokens = len(prompt.token_ids) if prompt.token_ids is not None else None
        self.cached_prompt_tokens = 0
        self.usage = Usage()
        self.finish_reason = "stop"
        self.message: Message | None = None
        self.token_ids: list[int] = []
        self.matched_stop: str | None = None

    async def events(self) -> AsyncGenerator[ParseEvent, None]:
        """The parse events of the model's output, in generation order."""
        parser = self._parser
        async with aclosing(self._runtime.engine.generate(self.request)) as chunks:
            async for chunk in chunks:
                if chunk.usage is not None:
                    self.usage = chunk.usage
                    self.cached_prompt_tokens = chunk.usage.cached_prompt_tokens
                    self.prompt_tokens = chunk.usage.prompt_tokens or self.prompt_tokens
                self.token_ids.extend(chunk.token_ids)
                if chunk.stop_sequence is not None:
                    self.matched_stop = chunk.stop_sequence
                if chunk.text:
                    for event in parser.feed(chunk.text):
                        yield event
                if chunk.finish_reason is not None:
                    self.finish_reason = chunk.finish_reason
        for event in parser.finish():
            yield event
        message = Message(
            role="assistant", content=list(parser.blocks), token_ids=self.token_ids or None
        )
        self.message = message
        if message.raw is not None and message.token_ids is not None:
            self._runtime.turns.remember(message)
        _log.info(
            "turn",
            turn_id=self.request.request_id,
            finish_reason=self.finish_reason,
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            output_tokens=self.usage.output_tokens,
            prompt_rebuilt=self.prompt.rebuilt,
        )

    @property
    def stop_sequence(self) -> str | None:
        """The caller's stop sequence the output ended on, if it did."""
        if self.finish_reason == "stop" and self.matched_stop in self.stop_sequences:
            return self.matched_stop
        return None


async def first_event(events: AsyncGenerator[ParseEvent, None]) -> ParseEvent | None:
    """Wait for a streamed turn's first event (``None`` if it has none) before answering.

    By then prefill is done and usage known, so a failure before any output is still an HTTP
    error with its status, not a broken stream. On failure the events are closed (aborting the
    request); the caller releases its slot.
    """
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None
    except BaseException:
        await events.aclose()
        raise
