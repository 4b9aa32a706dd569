"""One model turn, the one implementation behind :class:`~agentkit.Agent` and ``agentkit serve``.

A turn is: the prompt (:class:`~agentkit._prompt.PromptBuilder`: the profile's template,
replay policy and token-exact replay), the request options merged by one rule
(:func:`request_options`), the engine's stream fed through the profile's parser, and what the
stream told about itself (token ids, usage, finish reason, the stop string it ended on). The
agent loop (``agentkit._run``) and each HTTP adapter (through
:class:`agentkit.server._runtime.ServerRuntime`) are clients of this module: they decide what
happens to the events (tools dispatched, frames written) and where the finished message goes
(the run's transcript, the server's turn store).

The hot path is :meth:`ModelTurn.stream`: one pass per engine chunk, the parser's events
handed over as the list the parser returned (no per-event await).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from agentkit._hints import AgentHints
from agentkit._prompt import Prompt, PromptBuilder
from agentkit._tool_choice import ToolChoice, tool_choice_options
from agentkit.engine import Engine, GenerationChunk, GenerationRequest, RequestContext, Usage
from agentkit.errors import ConfigurationError
from agentkit.events import ParseEvent
from agentkit.parsing import StreamParser
from agentkit.profiles import Profile, ReplayPolicy
from agentkit.transcript import Message, Transcript

__all__ = ["ModelTurn", "ModelTurns", "TurnOptions", "conversation_id", "request_options"]

ChunkWatch = Callable[[GenerationChunk], bool]
"""Called after each chunk's events are handed over; ``True`` stops the turn (the request is
aborted), as a budget does when a limit is reached."""


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """What one turn asks of the model beyond its prompt, whoever asks (an agent's settings,
    an HTTP request's fields)."""

    tool_choice: ToolChoice = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: Sequence[str] = ()
    """The caller's stop strings, after the profile's own."""
    hints: AgentHints | None = None
    """Sent typed as ``GenerationRequest.hints``: each engine maps what it can."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The caller's backend options (``GenerationRequest.extra``)."""
    answer: Mapping[str, Any] | None = None
    """The JSON schema a final answer must match (``Agent(output_type=T)``, constrained)."""


def request_options(
    profile: Profile,
    options: TurnOptions,
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    thinking: bool,
) -> dict[str, Any]:
    """The request's backend options, by one rule: the tool choice's constraint (and the
    output type's), then the caller's; a key that two sources set is a
    :class:`~agentkit.errors.ConfigurationError` rather than one silently undoing the other.

    The hints are not options: they travel typed (``GenerationRequest.hints``). They still
    count as the source of what they set: a priority hint and the caller's ``priority``
    option clash like any two sources.
    """
    merged = tool_choice_options(
        profile, options.tool_choice, schemas, thinking=thinking, answer=options.answer
    )
    claimed = set(merged)
    if options.hints is not None and options.hints.priority:
        claimed.add("priority")
    clash = sorted(claimed & options.extra.keys())
    if clash:
        raise ConfigurationError(
            f"the request's options set {', '.join(clash)}, which the turn's tool_choice, "
            "output constraint or agent_hints also set; use tool_choice='auto' (and "
            "constrain_output=False) to pass your own, or drop the hint"
        )
    merged.update(options.extra)
    return merged


def conversation_id(
    transcript: Transcript, tools: Sequence[Mapping[str, Any]] = (), *, key: str | None = None
) -> str:
    """The conversation's session id, the same for every turn and every run of it: what keeps
    its requests on the worker (or replica) holding its KV cache (Dynamo's
    ``x-dynamo-session-id``, RemoteEngine's replica choice).

    ``key`` when the caller has one (an agentkit session's id; over HTTP, the client's
    conversation key: Codex's ``prompt_cache_key``, Claude Code's ``metadata.user_id``), else
    the conversation's start: the messages up to the first user message and the tools, which
    every later turn and run begins with. Either is hashed, so what a client sent (a user id,
    say) travels no further, and two conversations that start alike share a worker, which
    holds their common prefix anyway.
    """
    digest = hashlib.sha256()
    if key:
        digest.update(b"client\0" + key.encode())
    else:
        messages = transcript.messages
        first_user = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
        start = [m.model_dump(mode="json") for m in messages[: first_user + 1]]
        digest.update(b"start\0")
        digest.update(json.dumps([start, list(tools)], sort_keys=True).encode())
    return f"conv_{digest.hexdigest()[:32]}"


class ModelTurns:
    """The turns of one conversation on one model: its prompts, built incrementally so each
    extends the previous prompt and output token for token, and each turn's request.

    Args:
        engine: the engine (its ``encode`` makes prompts token-exact).
        profile: the model's profile.
        tools: the tools' specs (OpenAI function-calling shape), rendered into the prompt.
        replay: the reasoning-replay policy (default: the profile's).
        reserve_tokens: tokens kept free for each turn's output when checking the window.
        thinking: ``False`` turns thinking off where the profile has a switch.
        id_factory: makes the ids of calls whose format has none (``toolu_…``, ``call_…``).
    """

    def __init__(
        self,
        engine: Engine,
        profile: Profile,
        tools: Sequence[dict[str, Any]] = (),
        *,
        replay: ReplayPolicy | None = None,
        reserve_tokens: int = 0,
        thinking: bool = True,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.engine = engine
        self.profile = profile
        self.tools = list(tools)
        self.thinking = thinking or not profile.thinking_switch
        """Whether the model thinks: what the caller asked, where the profile has a switch."""
        self.schemas: dict[str, dict[str, Any]] = {
            spec["function"]["name"]: spec["function"].get("parameters") or {}
            for spec in self.tools
            if "function" in spec
        }
        self._id_factory = id_factory
        self._prompts = PromptBuilder(
            profile,
            engine,
            self.tools,
            replay=replay,
            reserve_tokens=reserve_tokens,
            thinking=self.thinking,
        )

    def prompt(self, transcript: Transcript) -> Prompt:
        """The next turn's exact prompt for ``transcript``."""
        return self._prompts.next_prompt(transcript)

    def record(self, transcript: Transcript, message: Message) -> None:
        """``message`` (just appended to ``transcript``) is what the model generated: the next
        prompt replays its exact tokens."""
        self._prompts.record(transcript, message)

    def start(
        self,
        prompt: Prompt,
        options: TurnOptions,
        *,
        request_id: str,
        context: RequestContext | None = None,
        session_id: str | None = None,
    ) -> ModelTurn:
        """The turn for ``prompt``: its request (options merged by :func:`request_options`)
        and a fresh parser. Generation starts when :meth:`ModelTurn.stream` is iterated.

        ``session_id`` names the conversation for engines that route by it
        (:func:`conversation_id`); default: the run in ``context``."""
        choice = options.tool_choice
        request = GenerationRequest(
            prompt=prompt.text,
            prompt_token_ids=prompt.token_ids,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            top_p=options.top_p,
            stop=[*self.profile.stop, *options.stop] if options.stop else self.profile.stop,
            request_id=request_id,
            extra=request_options(self.profile, options, self.schemas, thinking=self.thinking),
            hints=options.hints,
            session_id=session_id or (context.run_id if context is not None else None),
            context=context,
        )
        parser = self.profile.new_parser(
            self.schemas,
            tool_calls=choice != "none",
            id_factory=self._id_factory,
            thinking=self.thinking,
        )
        return ModelTurn(self.engine, request, parser, prompt, stop_sequences=tuple(options.stop))


class ModelTurn:
    """One model request through the profile's parser.

    Iterate :meth:`stream` (each chunk's parse events), then call :meth:`finish` (the
    parser's last events and the assistant message); or iterate :meth:`events` for both, one
    event at a time. Meanwhile :attr:`token_ids`, :attr:`usage`, :attr:`finish_reason` and
    :attr:`prompt_tokens` / :attr:`cached_prompt_tokens` follow the stream. Closing the
    iteration early aborts the request.
    """

    def __init__(
        self,
        engine: Engine,
        request: GenerationRequest,
        parser: StreamParser,
        prompt: Prompt,
        *,
        stop_sequences: tuple[str, ...] = (),
    ) -> None:
        self._engine = engine
        self.request = request
        self.parser = parser
        self.prompt = prompt
        self.stop_sequences = stop_sequences
        self.prompt_tokens = len(prompt.token_ids) if prompt.token_ids is not None else None
        self.cached_prompt_tokens = 0
        self.usage = Usage()
        self.finish_reason = "stop"
        self.token_ids: list[int] = []
        self.matched_stop: str | None = None
        self.message: Message | None = None
        """The assistant message, once :meth:`finish` has run."""
        self.on_message: Callable[[Message], None] | None = None
        """Called with the message when :meth:`events` has produced it (the server's turn
        store remembers it)."""

    async def stream(
        self, watch: ChunkWatch | None = None
    ) -> AsyncGenerator[list[ParseEvent], None]:
        """Each chunk's parse events (a chunk with none yields nothing), in generation order.

        ``watch`` sees every chunk after its events are handed over; ``True`` ends the turn
        here and aborts the request.
        """
        feed = self.parser.feed
        record_ids = self.token_ids.extend
        try:
            async with aclosing(self._engine.generate(self.request)) as chunks:
                async for chunk in chunks:
                    # Bookkeeping first: a consumer that stops at these events keeps the ids.
                    record_ids(chunk.token_ids)
                    if chunk.usage is not None or chunk.finish_reason is not None:
                        self._on_end_of(chunk)
                    if chunk.text:
                        events = feed(chunk.text)
                        if events:
                            yield events
                    if watch is not None and watch(chunk):
                        return
        finally:
            self._count_output()

    def _count_output(self) -> None:
        """A stream stopped before its final usage (a budget, a disconnect, a failure) still
        generated its tokens: the output count is at least the ids received."""
        generated = len(self.token_ids)
        if generated > self.usage.output_tokens:
            self.usage = dataclasses.replace(self.usage, output_tokens=generated)

    def _on_end_of(self, chunk: GenerationChunk) -> None:
        """A chunk with usage (prefill done, or the end) or a finish reason (the end)."""
        if chunk.usage is not None:
            self._on_usage(chunk.usage)
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
            if chunk.stop_sequence is not None:
                self.matched_stop = chunk.stop_sequence

    def _on_usage(self, usage: Usage) -> None:
        self.usage = usage
        self.cached_prompt_tokens = usage.cached_prompt_tokens
        self.prompt_tokens = usage.prompt_tokens or self.prompt_tokens

    def finish(self) -> tuple[list[ParseEvent], Message]:
        """The parser's last events (blocks still open end here, whatever ended the stream)
        and the assistant message: everything the model produced, kept even when the engine
        failed. The message is also :attr:`message` from now on."""
        events = self.parser.finish()
        message = Message(
            role="assistant", content=list(self.parser.blocks), token_ids=self.token_ids or None
        )
        self.message = message
        return events, message

    async def events(self) -> AsyncGenerator[ParseEvent, None]:
        """The turn's parse events one at a time, the parser's last included; then
        :attr:`message` is set and handed to :attr:`on_message`."""
        async with aclosing(self.stream()) as batches:
            async for batch in batches:
                for event in batch:
                    yield event
        events, message = self.finish()
        for event in events:
            yield event
        if self.on_message is not None:
            self.on_message(message)

    @property
    def stop_sequence(self) -> str | None:
        """The caller's stop string the output ended on, if it did."""
        if self.finish_reason == "stop" and self.matched_stop in self.stop_sequences:
            return self.matched_stop
        return None
