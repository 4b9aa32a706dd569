"""Each turn's prompt, extended from the last one where the engine and template allow it.

Exact replay at the token level: when the engine can tokenize (``engine.encode``) and the
profile's template can render a continuation, the prompt of turn N+1 is the token ids of turn
N's prompt, then the ids the model generated, then the tokens of only the new text (the end of
the assistant message the model did not generate, the tool results, the generation prompt).
The engine's prefix cache then covers the whole history, and building the prompt costs time
proportional to the new text, not to the history. Otherwise the whole transcript is rendered
as text and the engine tokenizes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentkit.profiles import IncrementalTemplate, Profile
from agentkit.transcript import Message, Transcript

__all__ = ["PromptBuilder"]


class PromptBuilder:
    """Builds the prompts of one run, turn after turn."""

    def __init__(self, profile: Profile, engine: object, tools: Sequence[dict[str, Any]]) -> None:
        self._profile = profile
        self._tools = tools
        encode = getattr(engine, "encode", None)
        template = profile.template
        self._encode: Callable[[str], list[int]] | None = None
        self._template: IncrementalTemplate | None = None
        if callable(encode) and isinstance(template, IncrementalTemplate):
            self._encode = encode
            self._template = template
            end = template.assistant_end
            self._stop = next((s for s in profile.stop if s and end.startswith(s)), "")
            self._stop_ids: list[int] = list(encode(self._stop)) if self._stop else []
        # The prompt sent last (text and ids), and after the model's turn, the history so far.
        self._text: str | None = None
        self._ids: list[int] | None = None
        self._pending = ""
        """Text that closes the last assistant message and that the model did not generate."""
        self._covered = 0
        """Messages already covered by ``_text`` / ``_ids``."""
        self._extendable = False

    def next_prompt(self, transcript: Transcript) -> tuple[str, list[int] | None]:
        """The text and (where the engine tokenizes) token ids of the next prompt."""
        ids: list[int] | None
        if (
            self._extendable
            and self._template is not None
            and self._encode is not None
            and self._text is not None
            and self._ids is not None
        ):
            continuation = self._template.render_continuation(transcript, self._covered)
            text = self._text + continuation
            ids = self._ids + list(self._encode(self._pending + continuation))
        else:
            text = self._profile.render(transcript, self._tools)
            ids = list(self._encode(text)) if self._encode is not None else None
        self._text, self._ids, self._extendable = text, ids, False
        return text, ids

    def record(self, transcript: Transcript, message: Message) -> None:
        """The model's message for the last prompt was appended to ``transcript``."""
        raw = message.raw
        if self._template is None or self._ids is None or message.token_ids is None or raw is None:
            self._extendable = False
            return
        end = self._template.assistant_end
        generated = list(message.token_ids)
        n = len(self._stop_ids)
        model_closed = n > 0 and generated[-n:] == self._stop_ids
        self._pending = end[len(self._stop) :] if model_closed else end
        assert self._text is not None
        self._text = self._text + raw + end
        self._ids = self._ids + generated
        self._covered = len(transcript.messages)
        self._extendable = True
