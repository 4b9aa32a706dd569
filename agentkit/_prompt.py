"""Each turn's prompt, extended from the last one where the engine, template and policy allow.

Exact replay at the token level: when the engine can tokenize (``engine.encode``) and the
profile's template can render a continuation, the prompt of turn N+1 is the token ids of turn
N's prompt, then the ids the model generated, then the tokens of only the new text (the end of
the assistant message the model did not generate, the tool results, the generation prompt).
The engine's prefix cache then covers the whole history, and building the prompt costs time
proportional to the new text, not to the history.

The prompt is rebuilt from the whole transcript instead when something before the new
messages changes: the reasoning-replay policy drops reasoning that the previous prompt showed
(``drop_all`` after each turn with reasoning, ``drop_on_plain_turns`` when a new user message
closes a task), context compaction removed something, or the template cannot extend prompts.
Each prompt says why it was rebuilt (:attr:`Prompt.rebuilt`), so a cache miss is explained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit._control_tokens import ControlTokenGuard, guard_for
from agentkit.errors import ConfigurationError, ContextWindowExceeded
from agentkit.profiles import (
    HFChatTemplate,
    IncrementalTemplate,
    Profile,
    ReplayPolicy,
    dropped_reasoning,
    has_reasoning,
    replay_view,
)
from agentkit.profiles._template_memo import RenderMemo
from agentkit.template_check import first_difference
from agentkit.transcript import Message, ToolResultBlock, Transcript

__all__ = ["Compaction", "Prompt", "PromptBuilder", "check_replay_policy"]


@dataclass(frozen=True, slots=True)
class Compaction:
    """What context compaction removed to make a prompt fit."""

    reasoning_blocks: int
    """Reasoning blocks removed (in this compaction)."""
    tool_outputs: int
    """Tool outputs replaced by a short note (in this compaction)."""
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's prompt."""

    text: str
    token_ids: list[int] | None
    """The exact ids, where the engine tokenizes; ``None`` lets the engine tokenize ``text``."""
    rebuilt: str | None = None
    """Why this prompt does not extend the previous prompt and output (``None``: it does, or
    it is the first)."""
    compaction: Compaction | None = None


def check_replay_policy(profile: Profile, policy: ReplayPolicy) -> ReplayPolicy:
    """``policy`` if ``profile`` can replay with it; ``template_native`` needs the model's own
    chat template (a :class:`ConfigurationError` otherwise)."""
    if policy == "template_native" and isinstance(profile.template, IncrementalTemplate):
        raise ConfigurationError(
            f"profile {profile.name!r}: the 'template_native' replay policy hands reasoning "
            "to the model's own chat template; give the profile one "
            "(template=HFChatTemplate(...)) or choose another policy"
        )
    return policy


_NO_IDS = "the last turn has no generated token ids to extend"


class PromptBuilder:
    """Builds the prompts of one run, turn after turn.

    Args:
        profile: the model's profile (template, stop strings, context window).
        engine: the engine; its ``encode``, when it has one, makes prompts token-exact.
        tools: the tools' specs, rendered into the prompt by the template.
        replay: the reasoning-replay policy (default: the profile's).
        reserve_tokens: tokens kept free for the turn's output when checking the window.
        thinking: ``False`` renders the generation prompt with thinking turned off, where the
            profile has a thinking switch.
    """

    def __init__(
        self,
        profile: Profile,
        engine: object,
        tools: Sequence[dict[str, Any]],
        *,
        replay: ReplayPolicy | None = None,
        reserve_tokens: int = 0,
        thinking: bool = True,
    ) -> None:
        self._profile = profile
        self._thinking = thinking
        self.policy: ReplayPolicy = check_replay_policy(profile, replay or profile.replay)
        self._reserve = reserve_tokens
        encode = getattr(engine, "encode", None)
        self._encode: Callable[[str], list[int]] | None = encode if callable(encode) else None
        self._guard: ControlTokenGuard | None = guard_for(engine, self._encode)
        """Keeps control-token strings in content from becoming control tokens (where the
        engine tokenizes and names its control tokens)."""
        self._tools = self._guard.escape_tools(tools) if self._guard is not None else tools
        template = profile.template
        self._template: IncrementalTemplate | None = None
        self._native = False
        """Any other template (a model's own Jinja template): each prompt is rendered whole and
        extends the last where the last render is a prefix of the new one."""
        self._stops: list[tuple[str, list[int]]] = []
        """Each stop string and its ids, longest ids first."""
        if self._encode is not None:
            if isinstance(template, IncrementalTemplate):
                self._template = template
            else:
                self._native = True
            stops = [(s, list(self._encode(s))) for s in profile.stop if s]
            self._stops = sorted(stops, key=lambda pair: len(pair[1]), reverse=True)
        self._rendered = ""
        """The last prompt as the template rendered it (escaped): the native path's prefix."""
        self._memo = RenderMemo()
        """What the model's own template rendered last (the native path's renders reuse it)."""
        self._escaped: dict[int, tuple[Message, Message]] = {}
        """Each message seen and its escaped form (the native path escapes each message once)."""
        self._tail_stop: tuple[str, int] | None = None
        """The stop the model generated last when the text after its message does not begin
        with it (GLM ends a turn with the next role marker; engines drop stop tokens' text):
        its string and id count."""
        # The prompt sent last (text and ids), and the model's message for it once recorded:
        # the next prompt joins the three in one copy (a long history is copied once a turn).
        self._text: str | None = None
        self._ids: list[int] | None = None
        self._recorded_text = ""
        self._recorded_ids: list[int] = []
        self._pending = ""
        """Text that closes the last assistant message and that the model did not generate."""
        self._covered = 0
        """Messages already covered by ``_text`` / ``_ids``."""
        self._unextendable: str | None = _NO_IDS
        """Why the next prompt cannot extend the last one (``None``: it can)."""
        self._shown_dropped: frozenset[int] = frozenset()
        """Messages whose reasoning the last prompt left out."""
        self._compacted: set[int] = set()
        """Messages whose reasoning compaction removed (for the rest of the run)."""
        self._removed_outputs: set[tuple[int, int]] = set()
        """(message, block) of tool outputs compaction removed (for the rest of the run)."""

    def next_prompt(self, transcript: Transcript) -> Prompt:
        """The next prompt for ``transcript`` (compacted if it would not fit the window)."""
        dropped = frozenset(
            dropped_reasoning(transcript, self.policy, tools=bool(self._tools)) | self._compacted
        )
        rebuilt = self._why_rebuild(transcript, dropped)
        if rebuilt is None and self._native:
            prompt = self._extend_native(transcript, dropped)
        elif rebuilt is None:
            prompt = self._extend(transcript)
        else:
            prompt = self._render(transcript, dropped, rebuilt)
        compaction = None
        limit = self._limit()
        ids = prompt.token_ids
        if limit is not None and ids is not None and len(ids) + self._reserve > limit:
            prompt, dropped, compaction = self._compact(transcript, prompt, dropped, limit)
        self._text, self._ids, self._unextendable = prompt.text, prompt.token_ids, _NO_IDS
        self._recorded_text, self._recorded_ids = "", []
        self._shown_dropped = dropped
        return Prompt(prompt.text, prompt.token_ids, prompt.rebuilt, compaction)

    def record(self, transcript: Transcript, message: Message) -> None:
        """The model's message for the last prompt was appended to ``transcript``."""
        raw = message.raw
        extendable = self._template is not None or self._native
        if not extendable or self._ids is None or message.token_ids is None or raw is None:
            self._unextendable = _NO_IDS
            return
        if self._recorded_ids:  # a second message for one prompt: no prompt holds its header
            self._unextendable = "two assistant messages were recorded for one prompt"
            return
        generated = list(message.token_ids)
        if self._template is None:  # native: the next render says what follows the output
            self._recorded_text, self._recorded_ids = raw, generated
            self._covered = len(transcript.messages)
            self._unextendable = None
            return
        end = self._assistant_end(message)
        stop = self._generated_stop(generated)
        self._tail_stop = None
        self._pending = end
        if stop is not None:
            string, _ = stop
            if end.startswith(string):
                self._pending = end[len(string) :]  # the model wrote that part itself
            else:
                self._tail_stop = stop
        self._recorded_text, self._recorded_ids = raw + end, generated
        self._covered = len(transcript.messages)
        self._unextendable = None

    def _assistant_end(self, message: Message) -> str:
        assert self._template is not None
        end_for = getattr(self._template, "assistant_end_for", None)
        return str(end_for(message)) if callable(end_for) else self._template.assistant_end

    def _generated_stop(self, generated: list[int]) -> tuple[str, int] | None:
        """The stop string whose ids end ``generated`` (the engine reports the stop token's
        id but not its text), as (string, number of ids)."""
        for string, ids in self._stops:
            if ids and generated[-len(ids) :] == ids:
                return string, len(ids)
        return None

    # -- internals -------------------------------------------------------------------------

    def _why_rebuild(self, transcript: Transcript, dropped: frozenset[int]) -> str | None:
        if self._text is None:
            return "first prompt"
        if self._template is None and not self._native:
            return "the engine cannot tokenize, so prompts are sent as text"
        if self._unextendable is not None:
            return self._unextendable
        rewritten = self._rewritten(transcript, self._covered)
        if rewritten is not None:
            return rewritten
        newly = sorted(i for i in dropped - self._shown_dropped if i < self._covered)
        if self._compacted & set(newly):
            return "context compaction"
        if newly or self._shown_dropped - dropped:
            which = ", ".join(str(i) for i in newly)
            return f"replay policy {self.policy!r} dropped the reasoning of message(s) {which}"
        return None

    def _extend(self, transcript: Transcript) -> Prompt:
        assert self._template is not None
        assert self._encode is not None
        assert self._text is not None
        assert self._ids is not None
        view = self._escape(transcript, self._covered)
        continuation = self._template.render_continuation(
            view, self._covered, thinking=self._thinking
        )
        text = "".join((self._text, self._recorded_text, self._unescape(continuation)))
        rest = self._pending + continuation
        generated = self._recorded_ids
        why = None
        if self._tail_stop is not None:
            string, n = self._tail_stop
            if rest.startswith(string):
                rest = rest[len(string) :]  # the marker the model stopped on comes next
            else:
                # Its stop token is not in the history's text (Harmony writes a final answer's
                # <|return|> as <|end|>): the one token where the prompt departs from the output.
                generated = generated[:-n]
                why = (
                    f"the chat template closes the turn with {rest[:12]!r}, not the "
                    f"{string!r} the model stopped with"
                )
        return Prompt(text, [*self._ids, *generated, *self._encode_text(rest)], why)

    def _extend_native(self, transcript: Transcript, dropped: frozenset[int]) -> Prompt:
        """The whole prompt rendered by the model's own template; where the last prompt's
        render is a prefix of it, the last prompt's ids, the ids the model generated and the
        tokens of only the rest (the template decides what follows the model's output)."""
        assert self._text is not None
        assert self._ids is not None
        view = self._escape(replay_view(transcript, dropped, self._removed_outputs))
        rendered = self._render_whole(view)
        previous = self._rendered
        if not rendered.startswith(previous):
            where = first_difference(previous, rendered)
            assert where is not None
            return self._render(
                transcript,
                dropped,
                f"the chat template rewrote the history at character {where.offset} "
                f"(line {where.line}): {where.expected!r} became {where.actual!r}",
                rendered=(view, rendered),
            )
        rest = rendered[len(previous) :]
        raw, generated = self._recorded_text, self._recorded_ids
        why = None
        if rest.startswith(raw):
            rest = rest[len(raw) :]
            stop = self._generated_stop(generated)
            if stop is not None:
                string, n = stop
                if rest.startswith(string):
                    rest = rest[len(string) :]  # the model wrote it: its id is in generated
                else:
                    generated = generated[:-n]
                    why = (
                        f"the chat template closes the turn with {rest[:12]!r}, not the "
                        f"{string!r} the model stopped with"
                    )
        else:
            where = first_difference(raw, rest[: len(raw)])
            assert where is not None
            generated = []
            why = (
                f"the chat template writes the model's turn differently from its output at "
                f"character {where.offset}: {where.actual!r} for {where.expected!r}"
            )
        self._rendered = rendered
        text = self._text + self._unescape(rendered[len(previous) :])
        return Prompt(text, [*self._ids, *generated, *self._encode_text(rest)], why)

    def _rewritten(self, transcript: Transcript, start: int) -> str | None:
        """Why the template renders the history before message ``start`` differently once
        the later messages exist (Mistral v11's tools block stands before the last user
        message), or ``None``."""
        rewrites = getattr(self._template, "rewrites_history", None)
        if not self._tools or not callable(rewrites):
            return None
        why = rewrites(transcript, start)
        return None if why is None else str(why)

    def _escape(self, view: Transcript, start: int = 0) -> Transcript:
        """``view`` with the untrusted text of its messages from ``start`` escaped (those
        before it are left as they are: a continuation renders only the new ones), each
        message once for the builder."""
        if self._guard is None:
            return view
        memo = self._escaped
        messages: list[Message] = list(view.messages[:start])
        changed = False
        for message in view.messages[start:]:
            hit = memo.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, self._guard.escape_message(message))
                memo[id(message)] = hit
            changed = changed or hit[1] is not message
            messages.append(hit[1])
        return Transcript.model_construct(messages=messages) if changed else view

    def _render(
        self,
        transcript: Transcript,
        dropped: frozenset[int],
        why: str,
        *,
        rendered: tuple[Transcript, str] | None = None,
    ) -> Prompt:
        if rendered is not None:
            view, text = rendered
        else:
            view = self._escape(replay_view(transcript, dropped, self._removed_outputs))
            text = self._render_whole(view)
        self._rendered = text
        ids, note = self._encode_rendered(text, view) if self._encode is not None else (None, None)
        text = self._unescape(text)
        if why == "first prompt":
            # What an earlier prompt of this conversation (up to its last assistant message)
            # would have been rendered differently in: the policy's drops, a template's move.
            why_text = note
            last = max(
                (i for i, m in enumerate(transcript.messages) if m.role == "assistant"),
                default=-1,
            )
            if last >= 0:
                why_text = self._rewritten(transcript, last + 1) or why_text
            if dropped:
                which = ", ".join(str(i) for i in sorted(dropped))
                why_text = (
                    f"replay policy {self.policy!r} leaves out the reasoning of message(s) {which}"
                )
            return Prompt(text, ids, why_text)
        return Prompt(text, ids, why)

    def _render_whole(self, view: Transcript) -> str:
        """The template's rendering of ``view``; a model's own template reuses, through the
        builder's memo, what it wrote for the messages it rendered last time wherever its
        syntax proves the output the same (the text is the template's either way)."""
        template = self._profile.template
        if isinstance(template, HFChatTemplate):
            return template.render(view, self._tools, thinking=self._thinking, memo=self._memo)
        return template.render(view, self._tools, thinking=self._thinking)

    def _encode_rendered(self, text: str, view: Transcript) -> tuple[list[int], str | None]:
        """The ids of a whole rendered prompt: the generated ids of each assistant message
        replayed from its raw text, and the text between them encoded. This is what the
        incremental path produces (so a new run on an old transcript extends the old prompts
        token for token); re-encoding the whole text would not reproduce the model's own
        tokens where BPE merges across block boundaries. The note says where the history's
        text departs from a turn's output (a stop token the template writes differently)."""
        assert self._encode is not None
        if self._template is None and not self._native:
            return self._encode_text(text), None
        ids: list[int] = []
        note = None
        pos = 0
        for message in view.messages:
            raw = message.raw
            if message.role != "assistant" or message.token_ids is None or raw is None:
                continue
            start = text.find(raw, pos) if raw else -1
            if start < 0:
                return self._encode_text(text), None  # not replayed verbatim: encode it all
            generated = list(message.token_ids)
            ids += self._encode_text(text[pos:start])
            pos = start + len(raw)
            stop = self._generated_stop(generated)
            if stop is not None:
                string, n = stop
                if text.startswith(string, pos):
                    pos += len(string)
                else:
                    generated = generated[:-n]
                    note = (
                        f"the chat template closes the turn with {text[pos : pos + 12]!r}, "
                        f"not the {string!r} the model stopped with"
                    )
            ids += generated
        ids += self._encode_text(text[pos:])
        return ids, note

    def _encode_text(self, rendered: str) -> list[int]:
        """Ids of rendered text: only the template's markers become control tokens."""
        if self._guard is not None:
            return self._guard.encode(rendered)
        assert self._encode is not None
        return list(self._encode(rendered))

    def _unescape(self, rendered: str) -> str:
        return self._guard.unescape(rendered) if self._guard is not None else rendered

    def _limit(self) -> int | None:
        window = self._profile.context_window
        if window is None:
            return None
        return int(window * self._profile.compaction_threshold)

    def _compact(
        self, transcript: Transcript, prompt: Prompt, dropped: frozenset[int], limit: int
    ) -> tuple[Prompt, frozenset[int], Compaction]:
        """Remove old reasoning, then old tool outputs (oldest first), until the prompt and
        the output budget fit ``limit``; the newest assistant message and tool results stay."""
        assert prompt.token_ids is not None
        assert self._encode is not None
        before = len(prompt.token_ids)
        messages = transcript.messages
        last_assistant = max(
            (i for i, m in enumerate(messages) if m.role == "assistant"), default=-1
        )
        reasoning = [
            i for i in range(last_assistant) if has_reasoning(messages[i]) and i not in dropped
        ]
        self._compacted.update(reasoning)
        dropped = dropped | frozenset(reasoning)
        prompt = self._render(transcript, dropped, "context compaction")
        assert prompt.token_ids is not None
        outputs = [
            (i, j)
            for i in range(last_assistant)
            if messages[i].role == "tool"
            for j, block in enumerate(messages[i].content)
            if isinstance(block, ToolResultBlock) and (i, j) not in self._removed_outputs
        ]
        removed = 0
        while len(prompt.token_ids) + self._reserve > limit and removed < len(outputs):
            excess = len(prompt.token_ids) + self._reserve - limit
            saved = 0
            while saved < excess and removed < len(outputs):
                i, j = outputs[removed]
                block = messages[i].content[j]
                assert isinstance(block, ToolResultBlock)
                saved += max(len(self._encode(block.content)) - 16, 1)
                self._removed_outputs.add((i, j))
                removed += 1
            prompt = self._render(transcript, dropped, "context compaction")
            assert prompt.token_ids is not None
        assert prompt.token_ids is not None
        needed = len(prompt.token_ids) + self._reserve
        if needed > limit:
            raise ContextWindowExceeded(needed, limit, transcript=transcript)
        compaction = Compaction(len(reasoning), removed, before, len(prompt.token_ids))
        return prompt, dropped, compaction
