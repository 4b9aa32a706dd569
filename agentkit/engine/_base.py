"""The engine interface: what the agent loop needs from anything that generates.

Backends are small implementations of :class:`Engine` (as httpx's transports are of its
transport interface): ``ScriptedEngine`` replays recorded outputs, ``VLLMEngine`` runs vLLM
in-process and ``RemoteEngine`` drives an existing serving deployment. The loop never knows
which one it talks to.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from agentkit._hints import AgentHints

if TYPE_CHECKING:
    from agentkit.transcript import Message

__all__ = [
    "Engine",
    "FinishReason",
    "GenerationChunk",
    "GenerationRequest",
    "RequestContext",
    "Usage",
]

FinishReason = Literal["stop", "length", "abort", "error"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the caller knew when it built a request, beyond the prompt it rendered.

    Model engines ignore it: they generate from the prompt alone. Test engines
    (``FunctionEngine``, the scripted engines' per-run scripts and records) read it, so a test
    can decide or assert from the conversation itself instead of re-parsing prompt text.
    The agent fills it in for each of its model turns.
    """

    run_id: str
    """The run (conversation) the request belongs to."""
    turn: int
    """The model turn within that run, from 1."""
    messages: Sequence[Message] = ()
    """The conversation the prompt was rendered from, as it stood at the request."""
    tools: Sequence[Mapping[str, Any]] = ()
    """The tools offered to the model (OpenAI function-calling shape, as rendered)."""
    tool_choice: str = "auto"
    """The tool choice in force for this turn (``auto``, ``required``, ``none`` or a name)."""


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One request for model output.

    ``prompt`` is the rendered prompt text; ``prompt_token_ids``, when given, is the exact
    token sequence (which wins over the text for engines that take tokens).
    """

    prompt: str
    prompt_token_ids: Sequence[int] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: Sequence[str] = ()
    request_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. structured-output constraints), passed through."""
    hints: AgentHints | None = None
    """The caller's scheduling hints; each engine maps what its backend takes (vLLM: the
    priority; Dynamo: ``nvext.agent_hints``) and ignores the rest. A backend option in
    ``extra`` (``priority``) wins over the hint."""
    session_id: str | None = None
    """The conversation the request belongs to (an agent's run, a served conversation's key):
    engines that route keep its requests on the worker holding its KV cache (RemoteEngine's
    replicas, Dynamo's session header); others ignore it."""
    context: RequestContext | None = field(default=None, compare=False, repr=False)
    """Who asked, for engines that look (test engines); not part of the request's identity."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What one request cost, as the engine measured it."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens served from the engine's prefix cache."""
    output_tokens: int = 0
    time_to_first_token_s: float | None = None


@dataclass(frozen=True, slots=True)
class GenerationChunk:
    """A piece of output. The last chunk of a stream carries ``finish_reason`` and ``usage``
    (its ``text`` may be empty). An engine may also put a partial ``usage`` (prompt and cached
    prompt tokens, known once prefill is done) on the first chunk."""

    text: str
    token_ids: Sequence[int] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    stop_sequence: str | None = None
    """On the last chunk: the stop string that ended the output, when one did (engines leave
    it out of the text)."""


@runtime_checkable
class Engine(Protocol):
    """Anything that streams model output for a prompt.

    ``generate`` is an async generator so that the caller can close it: stopping early
    (``break``, cancellation, ``aclose()``) must abort the request in the backend, and no
    generation may outlive its consumer.
    """

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        """Stream the output for ``request``; the final chunk has ``finish_reason`` set."""
        ...
