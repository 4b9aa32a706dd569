"""The assistant turns this server generated, found again when a client replays them.

A client of a stateless HTTP API sends the whole conversation each time, and what it sends
back of the model's turns is only their *visible* content: the reasoning text, the answer
text, the tool calls' ids, names and arguments. The exact output (the markers, the
whitespace, the token ids) is gone. The turn store keeps each generated message, keyed by its
visible content, so the request side can put the exact message back and the next prompt
extends the previous one token for token (prefix caching then covers the whole history).

Visible content is compared leniently where clients are known to differ and strictly
everywhere else: reasoning and text are compared with the whitespace around them stripped
(clients trim blocks, and some drop whitespace-only text between blocks, so text blocks that
are blank after stripping do not count), tool-call arguments as JSON values (an integral
float equals the integer: JavaScript writes ``1.0`` as ``1``). Anything else that differs
(an edited word, a changed argument, a block more or less) is a miss, and the turn is
rendered canonically from what the client sent.

Thread-safe: requests are converted (and turns restored) on worker threads while finished
turns are remembered on the event loop, so each call holds the store's lock; none waits on
anything else while holding it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["TurnStore", "visible_key"]


class TurnStore:
    """A bounded, least-recently-used store of generated assistant messages, in memory.

    This is the interface every turn store has (:class:`~agentkit.server._turn_file.
    SQLiteTurnStore` keeps the same turns in a file, so they outlive the process) and its
    in-memory implementation: a restart forgets everything.

    Besides its own visible content, a turn can be found by *aliases* (:meth:`alias`): how a
    wire format that flattens turns (Chat Completions' one reasoning string per message)
    hands it back. An alias never shadows a turn's own content.

    Args:
        max_turns: how many messages (and as many aliases) to keep; the least recently
            remembered or restored goes first.
    """

    def __init__(self, max_turns: int = 4096) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, not {max_turns}")
        self._max = max_turns
        self._turns: OrderedDict[str, Message] = OrderedDict()
        self._aliases: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, message: Message) -> None:
        """Keep ``message``, an assistant message generated here (its blocks carrying ``raw``,
        the message its ``token_ids``). The store takes ownership: do not change it later.

        A message whose visible content equals a stored one replaces it (the newest output
        is the one the client is about to send back). Never blocks on I/O: it is called on
        the event loop."""
        self._keep(_checked(message), message)

    def alias(self, blocks: Sequence[ContentBlock], message: Message) -> None:
        """Find the remembered ``message`` by ``blocks`` as well (see the class docstring);
        nothing to do when ``blocks`` is its visible content. Never blocks on I/O."""
        alias, key = visible_key(blocks), visible_key(message.content)
        if alias != key:
            self._keep_alias(alias, key)

    def restore(self, blocks: Sequence[ContentBlock]) -> Message | None:
        """A copy of the stored message whose visible content (or an alias of it) equals
        ``blocks``, or ``None``. Called on worker threads.

        Costs time proportional to the size of ``blocks``, whatever the size of the store."""
        return self._find(visible_key(blocks))

    def close(self) -> None:
        """Release what the store holds beyond memory (nothing here); idempotent."""

    def _keep(self, key: str, message: Message) -> None:
        with self._lock:
            self._turns[key] = message
            self._turns.move_to_end(key)
            while len(self._turns) > self._max:
                self._turns.popitem(last=False)

    def _keep_alias(self, alias: str, key: str) -> None:
        with self._lock:
            self._aliases[alias] = key
            self._aliases.move_to_end(alias)
            while len(self._aliases) > self._max:
                self._aliases.popitem(last=False)

    def _find(self, key: str) -> Message | None:
        """A copy of the turn stored under ``key`` or under the alias ``key``."""
        with self._lock:
            message = self._turns.get(key)
            if message is None and key in self._aliases:
                message = self._turns.get(self._aliases[key])
                if message is not None:
                    self._aliases.move_to_end(key)
                    key = self._aliases[key]
            if message is None:
                return None
            self._turns.move_to_end(key)
        # Stored messages are never changed (the store owns them): copying needs no lock.
        return message.model_copy(deep=True)

    def __len__(self) -> int:
        return len(self._turns)

    def __contains__(self, blocks: object) -> bool:
        if not isinstance(blocks, Sequence):
            return False
        return visible_key(blocks) in self._turns


def _checked(message: Message) -> str:
    """``message``'s visible key, once it is checked to be an assistant message."""
    if message.role != "assistant":
        raise ValueError(f"only assistant messages are remembered, not {message.role!r}")
    return visible_key(message.content)


def visible_key(blocks: Sequence[ContentBlock]) -> str:
    """A digest of the visible content of an assistant message's blocks: equal for two block
    sequences exactly when a client could have turned one into the other by round-tripping
    it (see the module docstring)."""
    canonical: list[Any] = []
    for block in blocks:
        if isinstance(block, ReasoningBlock):
            canonical.append(["reasoning", block.text.strip()])
        elif isinstance(block, TextBlock):
            text = block.text.strip()
            if text:
                canonical.append(["text", text])
        elif isinstance(block, ToolCallBlock):
            canonical.append(["tool_call", block.id, block.name, _json_value(block.arguments)])
        elif isinstance(block, ToolResultBlock):
            canonical.append(["tool_result", block.call_id, block.content, block.is_error])
    encoded = json.dumps(canonical, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def _json_value(value: Any) -> Any:
    """``value`` with integral floats made ints, so ``{"n": 1.0}`` and ``{"n": 1}`` agree."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value
