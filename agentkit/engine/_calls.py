"""One request as a test engine saw it: what a test decides from and asserts on.

The scripted engines keep one :class:`ScriptedCall` per request (``engine.calls``), and a
``FunctionEngine`` hands one to its function. It carries the request itself, the run it
belongs to and its turn there, the constraints it set (typed, see
:class:`~agentkit.engine.OutputConstraints`) and, for an agent's requests, the conversation
and tools the prompt was rendered from, so no test has to parse prompt text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit.engine._base import GenerationRequest, RequestContext
from agentkit.engine._constraints import OutputConstraints
from agentkit.transcript import Message, ToolResultBlock, Transcript

__all__ = ["ScriptedCall"]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One request a test engine received.

    ``run_id`` and ``turn`` come from the request's :class:`RequestContext` (the agent sets
    it); a request without one (an HTTP adapter's turn, a side query) has ``run_id=None`` and
    is counted in the engine's run of context-less requests.
    """

    request: GenerationRequest
    index: int
    """Its position among every request the engine received, from 0."""
    run_id: str | None
    turn: int
    """Its position within its run, from 1."""
    constraints: OutputConstraints

    @classmethod
    def of(cls, request: GenerationRequest, *, index: int, turn: int) -> ScriptedCall:
        context = request.context
        return cls(
            request=request,
            index=index,
            run_id=context.run_id if context is not None else None,
            turn=context.turn if context is not None else turn,
            constraints=OutputConstraints.from_extra(request.extra),
        )

    @property
    def context(self) -> RequestContext | None:
        return self.request.context

    @property
    def prompt(self) -> str:
        """The rendered prompt text."""
        return self.request.prompt

    @property
    def extra(self) -> Mapping[str, Any]:
        return self.request.extra

    @property
    def tool_choice(self) -> str | None:
        """The turn's tool choice, when the caller said (``None`` without a context)."""
        return self.context.tool_choice if self.context is not None else None

    @property
    def messages(self) -> Sequence[Message]:
        """The conversation the prompt was rendered from (empty without a context)."""
        return self.context.messages if self.context is not None else ()

    @property
    def transcript(self) -> Transcript:
        """:attr:`messages` as a transcript (a copy: changing it changes nothing)."""
        return Transcript(messages=[m.model_copy(deep=True) for m in self.messages])

    @property
    def tools(self) -> Sequence[Mapping[str, Any]]:
        """The tools offered, in OpenAI's function-calling shape."""
        return self.context.tools if self.context is not None else ()

    @property
    def tool_names(self) -> list[str]:
        return [str(spec.get("function", spec).get("name")) for spec in self.tools]

    @property
    def last_message(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The results the model is about to read: those of the trailing tool message, if the
        conversation ends with one."""
        last = self.last_message
        if last is None or last.role != "tool":
            return []
        return [b for b in last.content if isinstance(b, ToolResultBlock)]

    @property
    def first_user_text(self) -> str | None:
        """The text of the conversation's first user message: what it is about, and the
        default key of :meth:`ScriptedEngine.per_conversation`."""
        for message in self.messages:
            if message.role == "user":
                return message.text
        return None
