"""The server's model turns: one request, one turn of :mod:`agentkit._model_turn`.

The HTTP adapters translate a wire request into a :class:`TurnSpec` (transcript, tools,
options); :meth:`ServerRuntime.start` makes it the same :class:`~agentkit._model_turn.ModelTurn`
an :class:`~agentkit.Agent` runs (prompt, request options by one rule, engine, parser), and
the adapter writes its events as frames. The client runs the tools, so there is no dispatch
here.

Each turn the server produced is remembered (its blocks' exact raw text and the token ids
generated) in a :class:`~agentkit.server._turns.TurnStore`, so that when the client sends the
turn back — as blocks, with the whitespace between them and the stop token gone — the next
prompt begins with the previous prompt and the exact generated tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit._hints import AgentHints
from agentkit._logging import get_logger
from agentkit._model_turn import ModelTurn, ModelTurns, TurnOptions, conversation_id
from agentkit._prompt import Prompt
from agentkit._tool_choice import ToolChoice, validate_tool_choice
from agentkit.engine import Engine
from agentkit.events import ParseEvent
from agentkit.profiles import Profile
from agentkit.server._turns import TurnStore
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
    """The request's ``agent_hints`` (``GenerationRequest.hints``: each engine maps what it
    can)."""
    session: str | None = None
    """The conversation's key as the client gave it (Responses' and Chat's
    ``prompt_cache_key``, Anthropic's ``metadata.user_id``), or ``None``: see
    :func:`agentkit._model_turn.conversation_id`."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extra backend options (``GenerationRequest.extra``)."""
    call_ids: Callable[[], str] | None = None
    """Makes tool-call ids in the wire format's style (``call_…``); default: the runtime's."""

    def turn_options(self) -> TurnOptions:
        """The options of the shared model turn."""
        return TurnOptions(
            tool_choice=self.tool_choice,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=tuple(self.stop),
            hints=self.hints,
            extra=self.options,
        )


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

    def _turns(self, spec: TurnSpec) -> ModelTurns:
        return ModelTurns(
            self.engine,
            self.profile,
            spec.tools,
            thinking=spec.thinking is not False,
            id_factory=spec.call_ids or self._id_factory,
        )

    def prompt(self, spec: TurnSpec) -> Prompt:
        """The exact prompt ``spec`` would be sent with."""
        return self._turns(spec).prompt(spec.transcript)

    def start(self, spec: TurnSpec, *, request_id: str) -> ModelTurn:
        """Prepare the turn: validate, build the prompt, log it. Generation starts when the
        turn's events are iterated; the turn it produced is then remembered for replay."""
        turns = self._turns(spec)
        validate_tool_choice(spec.tool_choice, list(turns.schemas))
        prompt = turns.prompt(spec.transcript)
        turn = turns.start(
            prompt,
            spec.turn_options(),
            request_id=request_id,
            session_id=conversation_id(spec.transcript, spec.tools, key=spec.session),
        )
        self._log_prompt(request_id, prompt)
        turn.on_message = lambda message: self._finished(turn, message)
        return turn

    def _finished(self, turn: ModelTurn, message: Message) -> None:
        if message.raw is not None and message.token_ids is not None:
            self.turns.remember(message)
        _log.info(
            "turn",
            turn_id=turn.request.request_id,
            finish_reason=turn.finish_reason,
            prompt_tokens=turn.prompt_tokens,
            cached_prompt_tokens=turn.cached_prompt_tokens,
            output_tokens=turn.usage.output_tokens,
            prompt_rebuilt=turn.prompt.rebuilt,
        )

    def _log_prompt(self, request_id: str, prompt: Prompt) -> None:
        if self.log_prompts is None:
            return
        n = next(self._sequence)
        path = self.log_prompts / f"{n:06d}-{request_id}.txt"
        path.write_text(prompt.text, encoding="utf-8")


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
