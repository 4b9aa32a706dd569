"""Chat Completions responses (:mod:`._openai_chat`): chunks, or the whole message.

Responses follow the API's shapes; reasoning goes in ``context.config.reasoning_field``.
Streams may also carry a **dispatch side channel** (the ``x-agentkit-dispatch: 1`` header or
``streaming_tool_dispatch``): ``event: tool_call_dispatch`` the moment a call is complete,
with its whole arguments, once per call id, and ``event: reasoning_dispatch`` when a reasoning
block is complete, so a harness can start tools without accumulating deltas. The official
``openai`` SDKs do not skip named events (they yield each event's data as a chunk), so a
side-channel event's data is also a chunk without choices, as a usage chunk is.
"""

from __future__ import annotations

import json
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
from agentkit.server._ids import random_id
from agentkit.transcript import Message, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = [
    "ChatStream",
    "error_body",
    "finish_reason",
    "new_completion_id",
    "replay",
    "usage_json",
]

_CODES = {"authentication_error": "invalid_api_key", "rate_limit_error": "rate_limit_exceeded"}


def new_completion_id() -> str:
    """``chatcmpl-`` and 29 base62 characters, like the API's."""
    return random_id("chatcmpl-", 29)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def error_body(
    kind: str, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape (the body of an error response, or a stream's error chunk)."""
    return {
        "error": {
            "message": message,
            "type": kind,
            "param": param,
            "code": code or _CODES.get(kind),
        }
    }


_Kind = Literal["reasoning", "text", "call"]


@dataclass(slots=True)
class _Block:
    kind: _Kind
    received: list[str] = field(default_factory=list)
    held: str = ""
    opened: bool = False
    closed: bool = False
    call: _Call | None = None


@dataclass(slots=True)
class _Call:
    index: int
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        arguments = "".join(self.fragments)
        function = {"name": self.name, "arguments": arguments}
        return {"id": self.id, "type": "function", "function": function}


class ChatStream:
    """One chat completion as chunks (the streaming response), or as the message the chunks
    add up to (:meth:`message`, the non-streaming one): the same rules for both.

    Each method returns the bytes to send next (``b""`` for nothing): :meth:`start`, then
    :meth:`event` for each parse event, then :meth:`finish`, :meth:`usage` if asked for and
    :meth:`done`; or :meth:`error` to end early.
    """

    def __init__(
        self,
        *,
        completion_id: str,
        model: str,
        created: int,
        reasoning_field: str = "reasoning_content",
        dispatch: bool = False,
    ) -> None:
        self.completion_id = completion_id
        self.model = model
        self.created = created
        self.reasoning_field = reasoning_field
        self.dispatch = dispatch
        self.reasoning = ""
        self.content = ""
        self.calls: list[_Call] = []
        self._blocks: dict[int, _Block] = {}
        self._dispatched: set[str] = set()
        self._reasoning_blocks = 0

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._data({"choices": [choice]})

    def _data(self, body: dict[str, Any], event: str | None = None) -> bytes:
        head = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }
        line = f"event: {event}\n" if event else ""
        return f"{line}data: {_dumps({**head, **body})}\n\n".encode()

    def _side(self, event: str, body: dict[str, Any]) -> bytes:
        """A side-channel event. Its data is also a chunk without choices (as a usage chunk
        is): SDKs that yield every event's data as a chunk (the official ones do) pass it on
        harmlessly."""
        return self._data({"choices": [], **body}, event)

    def start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def ping(self) -> bytes:
        return b": ping\n\n"

    def next_turn(self) -> None:
        """Another model turn follows in the same message (a hosted agent's run): its block
        indexes count from 0 again."""
        self._blocks = {}

    def finish(self, finish_reason: str) -> bytes:
        return self._chunk({}, finish_reason)

    def usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> bytes:
        return self._data(
            {"choices": [], "usage": usage_json(prompt_tokens, completion_tokens, cached_tokens)}
        )

    def done(self) -> bytes:
        return b"data: [DONE]\n\n"

    def error(self, kind: str, message: str) -> bytes:
        return f"data: {_dumps(error_body(kind, message))}\n\n".encode()

    def fail(self, kind: str, message: str) -> bytes:
        """What ends a stream that failed after it began: the error chunk, then ``[DONE]``
        (the SDKs raise on the first; clients that wait for the second stop there too)."""
        return self.error(kind, message) + self.done()

    def completion(
        self, message: dict[str, Any], finish_reason: str, usage: dict[str, Any]
    ) -> dict[str, Any]:
        """The non-streaming response (a ``chat.completion``) with ``message``."""
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
        }

    def message(self) -> dict[str, Any]:
        """The assistant message the chunks so far add up to."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.content or None,
            self.reasoning_field: self.reasoning or None,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [call.json() for call in self.calls]
        return message

    def event(self, e: ParseEvent) -> bytes:
        if isinstance(e, ReasoningDelta | TextDelta):
            return self._piece(self._block(e.index, _kind(e)), e.text)
        if isinstance(e, ReasoningComplete | TextComplete):
            return self._complete_text(self._block(e.index, _kind(e)), e.text)
        block = self._block(e.index, "call")
        if block.closed:
            return b""
        if isinstance(e, ToolCallStarted):
            return self._start_call(block, e.id, e.name)
        if isinstance(e, ToolCallArgumentsDelta):
            out = self._start_call(block, e.id, "")
            assert block.call is not None
            if not e.delta:
                return out
            block.call.fragments.append(e.delta)
            return out + self._chunk(
                {"tool_calls": [{"index": block.call.index, "function": {"arguments": e.delta}}]}
            )
        return self._complete_call(block, e)

    def _block(self, index: int, kind: _Kind) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(kind)
        elif block.kind != kind:
            raise ValueError(f"block {index} is {block.kind}, not {kind}")
        return block

    def _piece(self, block: _Block, piece: str) -> bytes:
        """Send a piece of reasoning or text; a block's leading whitespace waits until the
        block has more (a whitespace-only block is never sent)."""
        if block.closed or not piece:
            return b""
        block.received.append(piece)
        if not block.opened:
            block.held += piece
            if block.held.isspace():
                return b""
            piece, block.held, block.opened = block.held, "", True
            sent = self.reasoning if block.kind == "reasoning" else self.content
            if sent and not sent[-1].isspace() and not piece[0].isspace():
                piece = "\n\n" + piece  # two blocks must not run into one word
        if block.kind == "reasoning":
            self.reasoning += piece
            return self._chunk({self.reasoning_field: piece})
        self.content += piece
        return self._chunk({"content": piece})

    def _complete_text(self, block: _Block, text: str) -> bytes:
        if block.closed:
            return b""
        received = "".join(block.received)
        rest = text[len(received) :] if text.startswith(received) else ""
        out = b""
        if block.kind == "reasoning" and self.dispatch and (received + rest).strip():
            data = {
                "choice_index": 0,
                "reasoning": {"index": self._reasoning_blocks, "text": (received + rest).lstrip()},
            }
            out = self._side("reasoning_dispatch", data)
        if block.kind == "reasoning" and (received + rest).strip():
            self._reasoning_blocks += 1
        out += self._piece(block, rest)
        block.closed = True
        return out

    def _start_call(self, block: _Block, call_id: str, name: str) -> bytes:
        if block.call is not None:
            return b""
        block.call = _Call(index=len(self.calls), id=call_id, name=name)
        self.calls.append(block.call)
        header = {
            "index": block.call.index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        return self._chunk({"tool_calls": [header]})

    def _complete_call(self, block: _Block, e: ToolCallComplete) -> bytes:
        """The dispatch event (whole arguments) first, then what the client still lacks."""
        block.closed = True
        arguments = e.arguments if e.error is None else {}
        whole = _dumps(arguments)
        out = b""
        if self.dispatch and e.id not in self._dispatched:
            self._dispatched.add(e.id)
            call = {
                "index": block.call.index if block.call else len(self.calls),
                "id": e.id,
                "type": "function",
                "function": {"name": e.name, "arguments": whole},
            }
            data: dict[str, Any] = {"choice_index": 0, "tool_call": call}
            if e.error is not None:
                data["error"] = e.error
            out = self._side("tool_call_dispatch", data)
        out += self._start_call(block, e.id, e.name)
        assert block.call is not None
        block.call.arguments = arguments
        if not block.call.fragments:
            block.call.fragments.append(whole)
            delta = {"tool_calls": [{"index": block.call.index, "function": {"arguments": whole}}]}
            out += self._chunk(delta)
        return out


def _kind(e: ReasoningDelta | TextDelta | ReasoningComplete | TextComplete) -> _Kind:
    return "reasoning" if isinstance(e, ReasoningDelta | ReasoningComplete) else "text"


def replay(stream: ChatStream, message: Message) -> None:
    """Feed a finished message's blocks through ``stream`` as complete events."""
    for i, block in enumerate(message.content):
        if isinstance(block, ReasoningBlock):
            stream.event(ReasoningComplete(index=i, text=block.text))
        elif isinstance(block, TextBlock):
            stream.event(TextComplete(index=i, text=block.text))
        elif isinstance(block, ToolCallBlock):
            raw = block.raw or ""
            complete = ToolCallComplete(
                index=i,
                id=block.id,
                name=block.name,
                arguments=block.arguments,
                raw=raw,
                error=block.error,
            )
            stream.event(complete)


def usage_json(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def finish_reason(engine_reason: str, has_tool_calls: bool) -> str:
    """``tool_calls`` wins over ``length``: the client must answer every call it received."""
    if has_tool_calls:
        return "tool_calls"
    return "length" if engine_reason == "length" else "stop"
