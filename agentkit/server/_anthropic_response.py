"""The response side of the Anthropic Messages API: agentkit's parse events as Anthropic
content blocks, streamed (server-sent events) or as one JSON body.

Both paths share one set of block rules, so a client sees the same message either way:

* Blocks are numbered ``0..n-1`` in the order they open, whatever agentkit's own ``index``
  was: a block that would be empty never opens, so it leaves no gap.
* A text or reasoning block opens at its first non-whitespace character. Whitespace before it
  is held back and sent with that character; a block that is only whitespace is never sent.
  A reasoning block closes with a ``signature_delta`` carrying ``sign(text)``, so the request
  side can recognise the thinking when the client sends it back.
* A tool call opens at ``ToolCallStarted`` (the client sees the tool's name at once) and its
  ``input`` is sent, by default, as one ``input_json_delta`` with the final arguments when the
  call is complete. A call that failed to parse closes with input ``{}``: the client runs its
  tool with no arguments, the tool reports the missing ones, and the model can retry.

Why the arguments are not forwarded as they stream by default: the parser streams the model's
text, which for a malformed call is not JSON (``{"b": 1,,}``) and for a call cut off by
``max_tokens`` is a prefix. The official SDKs parse every ``input_json_delta`` as partial
JSON, so the first would abort the client's stream with a parse error and the second would
give the client a plausible but truncated input (``rm -rf /tmp/build`` cut to ``rm -rf /``).
The Anthropic API itself validates tool input before streaming it unless the client opts into
``fine-grained-tool-streaming``; ``stream_tool_arguments=True`` is the equivalent opt-in here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentkit.events import (
    ParseEvent,
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
)
from agentkit.server._context import ERROR_STATUS
from agentkit.server._ids import new_tool_use_id, random_id
from agentkit.transcript import Message, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = [
    "ERROR_STATUS",
    "MessageStream",
    "error_json",
    "message_json",
    "new_message_id",
    "new_tool_use_id",
    "sse",
    "stop_reason",
]

# ERROR_STATUS (each Anthropic error type's HTTP status) is shared by every adapter.


def new_message_id() -> str:
    """A message id shaped like the API's: ``msg_`` and 24 base62 characters."""
    return random_id("msg_")


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event: ``event: NAME``, ``data:`` compact JSON, a blank line."""
    return f"event: {event}\ndata: {_dumps(data)}\n\n".encode()


def stop_reason(finish_reason: str, has_tool_calls: bool, stop_sequence: str | None) -> str:
    """The API's ``stop_reason`` for a finished turn.

    ``tool_use`` wins over ``max_tokens``: a turn cut off after (or inside) a call still needs
    the client to answer every ``tool_use`` block it received, and a call cut off mid-way was
    closed with input ``{}``, so its tool fails harmlessly. ``abort`` and ``error`` are not
    mapped here: the runtime ends such a stream with :meth:`MessageStream.error`.
    """
    if has_tool_calls:
        return "tool_use"
    if finish_reason == "length":
        return "max_tokens"
    if stop_sequence is not None:
        return "stop_sequence"
    return "end_turn"


def error_json(error_type: str, message: str) -> dict[str, Any]:
    """The body of an error response (and the data of a stream's ``error`` event); its HTTP
    status is ``ERROR_STATUS[error_type]``."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


BlockKind = Literal["thinking", "text", "tool_use"]


@dataclass(slots=True)
class _Block:
    """One agentkit block on its way to the wire."""

    kind: BlockKind
    wire_index: int | None = None
    """The Anthropic index, once the block has opened."""
    closed: bool = False
    text: list[str] = field(default_factory=list)
    """Thinking or text received so far (held-back whitespace included)."""
    held: str = ""
    """Leading whitespace not sent yet: the block has not opened."""
    tool_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    """Argument deltas received so far."""
    arguments_sent: bool = False
    json: dict[str, Any] = field(default_factory=dict)
    """The block as the client will have accumulated it."""


class MessageStream:
    """One streamed Messages response.

    Every method returns the bytes to send next: zero or more complete server-sent events,
    ``b""`` when there is nothing to send (a whitespace-only text delta, for instance). Call
    :meth:`start` first, then :meth:`event` for each parse event of the turn, then
    :meth:`finish` (or :meth:`error`); :meth:`ping` at any time. :attr:`content` holds the
    blocks sent so far, as the client has accumulated them.
    """

    def __init__(
        self,
        *,
        message_id: str,
        model: str,
        sign: Callable[[str], str],
        stream_tool_arguments: bool = False,
    ) -> None:
        self.message_id = message_id
        self.model = model
        self._sign = sign
        self._stream_arguments = stream_tool_arguments
        self._blocks: dict[int, _Block] = {}
        self._opened: list[_Block] = []
        self._open: _Block | None = None
        self._started = False
        self._finished = False

    @property
    def content(self) -> list[dict[str, Any]]:
        """The Anthropic content blocks sent so far, in wire order (the open one included, as
        far as it has streamed)."""
        return [copy.deepcopy(block.json) for block in self._opened]

    # -- message envelope ----------------------------------------------------------------

    def start(self, input_tokens: int, cache_read_input_tokens: int) -> bytes:
        """``message_start``. Like the API, it reports one output token: the usage of
        ``message_delta`` (cumulative) replaces it."""
        if self._started:
            raise RuntimeError("the message has already started")
        self._started = True
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_read_input_tokens": cache_read_input_tokens,
                "cache_creation_input_tokens": 0,
            },
        }
        return sse("message_start", {"type": "message_start", "message": message})

    def finish(
        self,
        stop_reason: str,
        output_tokens: int,
        *,
        stop_sequence: str | None = None,
        input_tokens: int | None = None,
        cache_read_input_tokens: int | None = None,
    ) -> bytes:
        """Close the block still open, then ``message_delta`` and ``message_stop``.

        The delta's usage is cumulative, as the API's: the input counts, when given, replace
        ``message_start``'s in the client's accumulated message. A remote engine reports the
        cached prompt tokens only with its last chunk, after ``message_start`` was sent.
        """
        self._check_streaming()
        out = self._close_open()
        self._finished = True
        usage: dict[str, int] = {"output_tokens": output_tokens}
        if input_tokens is not None:
            usage["input_tokens"] = input_tokens
        if cache_read_input_tokens is not None:
            usage["cache_read_input_tokens"] = cache_read_input_tokens
            usage["cache_creation_input_tokens"] = 0
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": usage,
        }
        return out + sse("message_delta", delta) + sse("message_stop", {"type": "message_stop"})

    def error(self, error_type: str, message: str) -> bytes:
        """An ``error`` event; the stream ends with it (the SDKs raise it as an API error)."""
        self._finished = True
        return sse("error", error_json(error_type, message))

    def ping(self) -> bytes:
        return sse("ping", {"type": "ping"})

    # -- parse events --------------------------------------------------------------------

    def event(self, e: ParseEvent) -> bytes:
        """The events that carry one parse event to the client."""
        self._check_streaming()
        if isinstance(e, ReasoningDelta):
            return self._piece(self._block(e.index, "thinking"), e.text)
        if isinstance(e, TextDelta):
            return self._piece(self._block(e.index, "text"), e.text)
        if isinstance(e, ReasoningComplete):
            return self._complete_text(self._block(e.index, "thinking"), e.text)
        if isinstance(e, TextComplete):
            return self._complete_text(self._block(e.index, "text"), e.text)
        if isinstance(e, ToolCallStarted):
            block = self._block(e.index, "tool_use")
            if block.closed or block.wire_index is not None:
                return b""
            block.tool_id, block.name = e.id, e.name
            return self._open_block(block)
        if isinstance(e, ToolCallArgumentsDelta):
            return self._arguments(self._block(e.index, "tool_use"), e)
        return self._complete_call(self._block(e.index, "tool_use"), e)

    def _check_streaming(self) -> None:
        if not self._started:
            raise RuntimeError("start() the message before sending its content")
        if self._finished:
            raise RuntimeError("the message has already ended")

    def _block(self, index: int, kind: BlockKind) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(kind)
        elif block.kind != kind:
            raise ValueError(f"block {index} is {block.kind}, not {kind}")
        return block

    def _open_block(self, block: _Block) -> bytes:
        """``content_block_start``; a block still open (which a well-formed event sequence
        never leaves) is closed first, so blocks never interleave on the wire."""
        out = self._close_open()
        block.wire_index = len(self._opened)
        self._opened.append(block)
        self._open = block
        if block.kind == "thinking":
            block.json = {"type": "thinking", "thinking": "", "signature": ""}
        elif block.kind == "text":
            block.json = {"type": "text", "text": ""}
        else:
            block.json = {"type": "tool_use", "id": block.tool_id, "name": block.name, "input": {}}
        start = {
            "type": "content_block_start",
            "index": block.wire_index,
            "content_block": block.json,
        }
        return out + sse("content_block_start", start)

    def _delta(self, block: _Block, delta: dict[str, Any]) -> bytes:
        data = {"type": "content_block_delta", "index": block.wire_index, "delta": delta}
        return sse("content_block_delta", data)

    def _stop(self, block: _Block) -> bytes:
        block.closed = True
        if self._open is block:
            self._open = None
        return sse("content_block_stop", {"type": "content_block_stop", "index": block.wire_index})

    def _close_open(self) -> bytes:
        block = self._open
        if block is None:
            return b""
        if block.kind == "tool_use":
            return self._close_call(block, None)
        return self._close_text(block)

    # -- thinking and text ---------------------------------------------------------------

    def _piece(self, block: _Block, piece: str) -> bytes:
        if block.closed or not piece:
            return b""
        block.text.append(piece)
        out = b""
        if block.wire_index is None:
            block.held += piece
            if block.held.isspace():
                return b""
            piece, block.held = block.held, ""
            out = self._open_block(block)
        if block.kind == "thinking":
            block.json["thinking"] += piece
            return out + self._delta(block, {"type": "thinking_delta", "thinking": piece})
        block.json["text"] += piece
        return out + self._delta(block, {"type": "text_delta", "text": piece})

    def _complete_text(self, block: _Block, text: str) -> bytes:
        """Send what the deltas left out (all of it, for a parser that sends none), close."""
        if block.closed:
            return b""
        received = "".join(block.text)
        out = b""
        if len(text) > len(received) and text.startswith(received):
            out = self._piece(block, text[len(received) :])
        return out + self._close_text(block)

    def _close_text(self, block: _Block) -> bytes:
        if block.wire_index is None:  # whitespace only: never sent
            block.closed = True
            return b""
        out = b""
        if block.kind == "thinking":
            # The client sends back what it received, so that is what is signed.
            signature = self._sign(block.json["thinking"])
            block.json["signature"] = signature
            out = self._delta(block, {"type": "signature_delta", "signature": signature})
        return out + self._stop(block)

    # -- tool calls ----------------------------------------------------------------------

    def _arguments(self, block: _Block, e: ToolCallArgumentsDelta) -> bytes:
        if block.closed or not e.delta:
            return b""
        block.arguments.append(e.delta)
        if not self._stream_arguments or block.wire_index is None:
            return b""
        block.arguments_sent = True
        return self._delta(block, {"type": "input_json_delta", "partial_json": e.delta})

    def _complete_call(self, block: _Block, e: ToolCallComplete) -> bytes:
        if block.closed:
            return b""
        out = b""
        if block.wire_index is None:  # no ToolCallStarted came
            block.tool_id, block.name = e.id, e.name
            out = self._open_block(block)
        return out + self._close_call(block, e)

    def _close_call(self, block: _Block, e: ToolCallComplete | None) -> bytes:
        """Send the input (``{}`` for a call that failed or never completed) unless its
        deltas already went out, then close.

        With ``stream_tool_arguments`` the client has the deltas as the model wrote them:
        for a failed call that is text the SDKs may reject or read as a truncated input,
        as with the API's fine-grained tool streaming.
        """
        arguments = e.arguments if e is not None and e.error is None else {}
        block.json["input"] = arguments
        out = b""
        if not block.arguments_sent:
            delta = {"type": "input_json_delta", "partial_json": _dumps(arguments)}
            out = self._delta(block, delta)
        return out + self._stop(block)


def message_json(
    *,
    message_id: str,
    model: str,
    message: Message,
    stop_reason: str,
    input_tokens: int,
    output_tokens: int,
    cache_read_input_tokens: int,
    sign: Callable[[str], str],
    stop_sequence: str | None = None,
) -> dict[str, Any]:
    """The non-streaming response body for the turn's final assistant message.

    The blocks go through a :class:`MessageStream`, so the rules (whitespace-only text
    dropped, signatures, ``{}`` for a failed call) are the stream's, by construction.
    """
    stream = MessageStream(message_id=message_id, model=model, sign=sign)
    stream.start(input_tokens, cache_read_input_tokens)
    for index, block in enumerate(message.content):
        if isinstance(block, ReasoningBlock):
            stream.event(ReasoningComplete(index=index, text=block.text))
        elif isinstance(block, TextBlock):
            stream.event(TextComplete(index=index, text=block.text))
        elif isinstance(block, ToolCallBlock):
            stream.event(ToolCallStarted(index=index, id=block.id, name=block.name))
            complete = ToolCallComplete(
                index=index,
                id=block.id,
                name=block.name,
                arguments=block.arguments,
                raw=block.raw or "",
                error=block.error,
            )
            stream.event(complete)
        else:
            raise ValueError(f"an assistant message cannot hold a {block.type} block")
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": stream.content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "cache_creation_input_tokens": 0,
        },
    }
