"""A model profile: everything agentkit must know about one model family, in one place."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentkit.errors import ConfigurationError
from agentkit.parsing import (
    CallsInReasoning,
    StreamParser,
    create_parser,
)
from agentkit.profiles._replay import ReplayPolicy, validate_replay_policy
from agentkit.transcript import Transcript
from agentkit.truncation import TruncationPolicy

__all__ = ["ChatTemplate", "IncrementalTemplate", "Profile", "ToolSpec"]

ToolSpec = Mapping[str, Any]
"""A tool as the model is told about it: ``{"type": "function", "function": {"name",
"description", "parameters"}}``."""


class ChatTemplate(Protocol):
    """Renders a transcript into the prompt text the model was trained on."""

    def render(
        self,
        transcript: Transcript,
        tools: Sequence[ToolSpec],
        *,
        add_generation_prompt: bool = True,
        thinking: bool = True,
    ) -> str:
        """The prompt for ``transcript``; ``thinking=False`` renders the generation prompt
        the way the model's template does when thinking is turned off (templates without a
        thinking switch ignore it)."""
        ...


@runtime_checkable
class IncrementalTemplate(ChatTemplate, Protocol):
    """A template that can extend a prompt instead of rendering it again.

    This is what exact replay at the token level needs: the next prompt is the previous
    prompt's token ids, the ids the model generated, and the tokens of only the new text.
    """

    @property
    def assistant_end(self) -> str:
        """The text that closes an assistant message (its stop string first)."""
        ...

    def render_continuation(
        self, transcript: Transcript, start: int, *, thinking: bool = True
    ) -> str:
        """Messages ``start:`` and the generation prompt, after a closed assistant message."""
        ...


@dataclass(frozen=True, slots=True)
class Profile:
    """How to talk to one model family.

    ``reasoning`` and ``tool_format`` name parsers from :mod:`agentkit.parsing`; ``template``
    renders prompts; ``stop`` are the strings that end an assistant turn; ``special_tokens``
    the format's markers that are single tokens in the model's vocabulary.

    ``replay`` is the reasoning-replay policy (see :data:`ReplayPolicy`), ``truncation`` the
    tool-output truncation policy (``None``: outputs enter the context whole), and
    ``context_window`` the model's context in tokens: when a prompt plus the turn's output
    budget would pass ``compaction_threshold`` of it, old reasoning and then old tool outputs
    are removed from the prompt. ``tokenizer`` names the model's tokenizer (a Hugging Face id
    or a local path) for tools that count tokens without an engine.
    """

    name: str
    description: str
    template: ChatTemplate
    reasoning: str | None = None
    tool_format: str | None = None
    stop: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    calls_in_reasoning: CallsInReasoning = "end_reasoning"
    special_tokens: tuple[str, ...] = ()
    replay: ReplayPolicy = "keep_all"
    truncation: TruncationPolicy | None = None
    context_window: int | None = None
    compaction_threshold: float = 0.9
    tokenizer: str | None = None
    thinking_switch: bool = False
    """Whether the template renders a turn with thinking off differently (Qwen3 and
    Nemotron-3 close an empty ``<think>`` block in the generation prompt, as their templates do
    with ``enable_thinking=False``); without one, requests to turn thinking off are not
    honoured."""
    reference: str = ""
    """The model's own template or encoder this profile's prompts are checked against (where
    it comes from), as the conformance tests and ``docs/profiles.md`` name it; empty: none."""
    deviations: tuple[str, ...] = ()
    """Each deliberate difference from ``reference``, in words (each one is tested)."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_replay_policy(self.replay)
        if self.context_window is not None and self.context_window < 1:
            raise ConfigurationError(f"profile {self.name!r}: context_window must be positive")
        if not 0 < self.compaction_threshold <= 1:
            raise ConfigurationError(
                f"profile {self.name!r}: compaction_threshold must be in (0, 1]"
            )

    def new_parser(
        self,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        tool_calls: bool = True,
        id_factory: Callable[[], str] | None = None,
        thinking: bool = True,
    ) -> StreamParser:
        """A fresh incremental parser for one assistant turn of this model.

        With ``tool_calls=False`` (``tool_choice="none"``) call markup stays text;
        ``id_factory`` makes the ids of calls whose format has none (HTTP adapters issue
        ``toolu_...`` or ``call_...`` ids); ``thinking=False`` (the request turned thinking
        off, honoured where the profile has a :attr:`thinking_switch`) parses an output that
        follows a prompt which closed the reasoning block.
        """
        return create_parser(
            self.reasoning,
            self.tool_format if tool_calls else None,
            tool_schemas=dict(tool_schemas or {}),
            calls_in_reasoning=self.calls_in_reasoning,
            id_factory=id_factory,
            thinking=thinking or not self.thinking_switch,
        )

    def render(
        self, transcript: Transcript, tools: Sequence[ToolSpec] = (), *, thinking: bool = True
    ) -> str:
        """The prompt for the model's next turn on ``transcript`` (the transcript as given:
        the replay policy is applied by the caller, see :func:`replay_view`)."""
        return self.template.render(transcript, tools, thinking=thinking)
