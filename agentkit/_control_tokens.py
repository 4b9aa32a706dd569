"""Control tokens only where the template writes them.

A tokenizer turns every occurrence of a special token's text into that token: a tool result, a
user message or a file the model read that contains ``<|im_end|>\\n<|im_start|>system\\n`` would
otherwise become real turn markers, and any document could forge a turn. agentkit keeps the
two apart:

1. Before rendering, the untrusted text of a transcript (user and system messages, tool
   results, assistant messages that were not generated here, tool call arguments, tool specs)
   is *escaped*: each control-token string in it becomes one private-use character that stands
   for it. Templates then see no control-token string in content, so every one left in the
   rendered text is the template's own marker.
2. The rendered text is encoded in pieces: each template marker as the control token it is,
   the text between them as ordinary text, and each escaped string as ordinary text too (cut
   after its first character, so the tokenizer cannot match it whole).
3. The prompt's text (for logs and text-only engines) is the rendered text with every escaped
   string put back.

The model's own generated ids are replayed as generated, never re-encoded. One
:class:`ControlTokenGuard` per vocabulary serves the agent's prompts, the HTTP server's and
every other place a prompt is built from text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["ControlTokenGuard", "control_tokens_of", "guard_for", "tokenizer_control_tokens"]

_ESCAPE = 0xF0000
"""The first code point of Unicode's supplementary private use area A: it marks a private-use
character that was in the content itself; the ones after it stand for control-token strings."""
_LAST = 0x10FFFD


def tokenizer_control_tokens(tokenizer: Any) -> frozenset[str]:
    """Every added token of a Hugging Face tokenizer (special or not: Qwen's ``<tool_call>``
    is an added token that is not marked special, and a user's text must not produce it), or
    a tokenizer's own ``control_tokens`` (:class:`~agentkit.engine.CharTokenizer`)."""
    own = getattr(tokenizer, "control_tokens", None)
    if own is not None:
        return frozenset(own)
    decoder: Mapping[int, Any] = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return frozenset(
        str(getattr(token, "content", token)) for token in decoder.values() if token is not None
    )


def control_tokens_of(engine: object) -> frozenset[str] | None:
    """The engine's control-token strings (``engine.control_tokens``), or ``None`` when the
    engine does not say (it has no tokenizer here)."""
    tokens = getattr(engine, "control_tokens", None)
    if tokens is None:
        return None
    return frozenset(tokens)


class ControlTokenGuard:
    """Escapes untrusted text and encodes rendered prompts so that only the template's
    markers become control tokens.

    Args:
        encode: the tokenizer's ``encode`` (without BOS/EOS), which matches control-token
            strings as single tokens.
        control_tokens: the vocabulary's control-token strings. Strings of one character
            cannot be cut and are left alone.
    """

    def __init__(self, encode: Callable[[str], list[int]], control_tokens: Iterable[str]) -> None:
        self._encode = encode
        ordered = sorted({t for t in control_tokens if len(t) > 1}, key=len, reverse=True)
        self.control_tokens: tuple[str, ...] = tuple(ordered)
        if len(ordered) > _LAST - _ESCAPE:
            raise ValueError(f"too many control tokens to guard ({len(ordered)})")
        self._standin = {t: chr(_ESCAPE + 1 + i) for i, t in enumerate(ordered)}
        self._original = {v: k for k, v in self._standin.items()}
        alternatives = "|".join(map(re.escape, ordered))
        private = f"[{chr(_ESCAPE)}-{chr(_LAST)}]"
        self._controls = re.compile(alternatives) if ordered else None
        # Content: a control-token string, or a private-use character of the escape range.
        self._escapable = re.compile(f"{alternatives}|{private}" if ordered else private)
        # Rendered text: template markers, escaped strings (stand-in, or escape + character).
        self._pieces = re.compile(
            f"({alternatives}|{chr(_ESCAPE)}{private}|{private})"
            if ordered
            else f"({chr(_ESCAPE)}{private}|{private})"
        )
        self._standins = re.compile(f"{chr(_ESCAPE)}{private}|{private}")

    # -- escaping ---------------------------------------------------------------------------

    def escape(self, text: str) -> str:
        """``text`` with each control-token string replaced by its stand-in."""
        if not self._escapable.search(text):
            return text
        return self._escapable.sub(self._escape_match, text)

    def _escape_match(self, match: re.Match[str]) -> str:
        found = match.group()
        standin = self._standin.get(found)
        return standin if standin is not None else chr(_ESCAPE) + found

    def unescape(self, text: str) -> str:
        """The rendered text with every escaped string put back."""
        if not self._standins.search(text):
            return text
        return self._standins.sub(self._unescape_match, text)

    def _unescape_match(self, match: re.Match[str]) -> str:
        found = match.group()
        if len(found) == 2:
            return found[1]
        return self._original.get(found, found)

    def escape_value(self, value: Any) -> Any:
        """A JSON value with every string in it (keys too) escaped."""
        if isinstance(value, str):
            return self.escape(value)
        if isinstance(value, Mapping):
            return {self.escape(str(k)): self.escape_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.escape_value(v) for v in value]
        return value

    def escape_tools(self, tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Tool specs (from a developer or an HTTP client) with their strings escaped."""
        return [self.escape_value(spec) for spec in tools]

    def escape_message(self, message: Message) -> Message:
        """``message`` with its untrusted text escaped (itself when nothing changes)."""
        if message.role == "assistant" and message.token_ids is not None:
            return message
        content = [self._escape_block(b) for b in message.content]
        if all(a is b for a, b in zip(content, message.content, strict=True)):
            return message
        return Message.model_construct(
            role=message.role, content=content, token_ids=message.token_ids
        )

    def _escape_block(self, block: ContentBlock) -> ContentBlock:
        if isinstance(block, TextBlock | ReasoningBlock):
            text = self.escape(block.text)
            return block if text == block.text else block.model_copy(update={"text": text})
        if isinstance(block, ToolResultBlock):
            text = self.escape(block.content)
            return block if text == block.content else block.model_copy(update={"content": text})
        if isinstance(block, ToolCallBlock):
            arguments = self.escape_value(block.arguments)
            if arguments == block.arguments:
                return block
            return block.model_copy(update={"arguments": arguments})
        return block

    # -- encoding ---------------------------------------------------------------------------

    def encode(self, rendered: str) -> list[int]:
        """The ids of rendered (escaped) text: the template's markers as control tokens,
        everything else, escaped strings included, as ordinary text."""
        ids: list[int] = []
        pos = 0
        for match in self._pieces.finditer(rendered):
            if match.start() > pos:
                ids += self._encode(rendered[pos : match.start()])
            found = match.group()
            if len(found) == 2 and ord(found[0]) == _ESCAPE:
                ids += self._encode(found[1])  # a private-use character of the content
            elif found in self._original:
                ids += self.text_ids(self._original[found])  # a control string of the content
            else:
                ids += self._encode(found)  # a marker the template wrote
            pos = match.end()
        if pos < len(rendered):
            ids += self._encode(rendered[pos:])
        return ids

    def text_ids(self, text: str) -> list[int]:
        """``text`` as ordinary text: every control-token string in it is cut after its first
        character, so no piece is a control token."""
        if self._controls is None:
            return list(self._encode(text))
        ids: list[int] = []
        pos = 0
        for match in self._controls.finditer(text):
            found = match.group()
            # The scan is leftmost-first, so no control string ends inside this piece.
            ids += self._encode(text[pos : match.start()] + found[0])
            ids += self.text_ids(found[1:])
            pos = match.end()
        if pos < len(text):
            ids += self._encode(text[pos:])
        return ids


def guard_for(
    engine: object, encode: Callable[[str], list[int]] | None
) -> ControlTokenGuard | None:
    """The guard for an engine that tokenizes and names its control tokens."""
    tokens: Collection[str] | None = control_tokens_of(engine)
    if encode is None or not tokens:
        return None
    return ControlTokenGuard(encode, tokens)
