"""The response side of the Responses API (:mod:`._openai_responses`): parse events as its
stream events, and the response object.

Because the first reasoning item carries data known only when the turn ends, a stream that
seals holds back its ``response.output_item.done`` events from that item on until the end of
the turn (their deltas stream as generated): clients record items in the order of those
events, so they are never reordered.
"""

from __future__ import annotations

import copy
import json
import time
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
from agentkit.server._responses_request import ResponsesRequest, ToolRef, Tools, new_id
from agentkit.server._runtime import ModelTurn
from agentkit.transcript import Message, ReasoningBlock

__all__ = ["ItemKind", "ResponseStream", "new_id"]


ItemKind = Literal["reasoning", "message", "function_call", "custom_tool_call"]


@dataclass(slots=True)
class _Item:
    kind: ItemKind
    json: dict[str, Any] = field(default_factory=dict)
    """The output item as the client will have it."""
    index: int = -1
    """The output index, once the item is added."""
    closed: bool = False
    received: list[str] = field(default_factory=list)
    held: str = ""
    """Leading whitespace of a message not sent yet (a whitespace-only block never is)."""
    summary_held: str = ""
    summary_open: bool = False
    arguments: list[str] = field(default_factory=list)


def _sse(data: dict[str, Any]) -> bytes:
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {data['type']}\ndata: {encoded}\n\n".encode()


class ResponseStream:
    """One response: turns parse events into the API's stream events (bytes from every
    method) and builds the response object (:attr:`response`, complete after
    :meth:`finish`). Without :meth:`start` it only builds the object (non-streaming).

    Args:
        envelope: the response object's fixed fields.
        tools: the client's tools by the name the model calls them.
        summary: give each reasoning item a summary (its text) and stream it.
        seal: ``seal(index, text, message)`` makes a reasoning item's ``encrypted_content``
            (``message``, the whole turn, only for the first); ``None``: none is included.
        count_tokens: the engine's tokenizer, to count reasoning tokens (or ``None``).
    """

    def __init__(
        self,
        envelope: dict[str, Any],
        tools: Mapping[str, ToolRef],
        *,
        summary: bool,
        seal: Callable[[int, str, Message | None], str] | None,
        count_tokens: Callable[[str], list[int] | None],
    ) -> None:
        self.response = copy.deepcopy(envelope)
        self._tools = tools
        self._summary = summary
        self._seal = seal
        self._count = count_tokens
        self._sequence = 0
        self._items: list[_Item] = []
        self._blocks: dict[int, _Item] = {}
        self._held: list[_Item] | None = None
        """Closed items whose ``output_item.done`` waits for the end of the turn."""

    def _emit(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return _sse(data)

    def next_turn(self) -> None:
        """Another model turn follows in the same response (a hosted agent's run): its
        block indexes count from 0 again; its items follow the earlier ones."""
        self._blocks = {}

    def start(self) -> bytes:
        return self._emit("response.created", response=self.response) + self._emit(
            "response.in_progress", response=self.response
        )

    def event(self, e: ParseEvent) -> bytes:
        if isinstance(e, ReasoningDelta | TextDelta):
            item = self._block(e.index, "reasoning" if isinstance(e, ReasoningDelta) else "message")
            return self._piece(item, e.text)
        if isinstance(e, ReasoningComplete | TextComplete):
            kind: ItemKind = "reasoning" if isinstance(e, ReasoningComplete) else "message"
            item = self._block(e.index, kind)
            if item.closed:
                return b""
            received = "".join(item.received)
            out = b""
            if len(e.text) > len(received) and e.text.startswith(received):
                out = self._piece(item, e.text[len(received) :])
            elif item.index < 0 and kind == "reasoning":
                out = self._add(item)  # an empty reasoning block is still an item
            return out + self._close(item)
        if isinstance(e, ToolCallStarted):
            item = self._block(e.index, "function_call")
            return b"" if item.index >= 0 else self._add_call(item, e.id, e.name)
        item = self._block(e.index, "function_call")
        if isinstance(e, ToolCallArgumentsDelta):
            if item.closed or item.index < 0 or not e.delta:
                return b""
            item.arguments.append(e.delta)
            if item.kind != "function_call":
                return b""  # a custom tool's input is sent whole: the deltas are JSON
            return self._emit(
                "response.function_call_arguments.delta",
                item_id=item.json["id"],
                output_index=item.index,
                delta=e.delta,
            )
        if item.closed:
            return b""
        out = self._add_call(item, e.id, e.name) if item.index < 0 else b""
        return out + self._complete_call(item, e)

    def _block(self, index: int, kind: ItemKind) -> _Item:
        item = self._blocks.get(index)
        if item is None:
            item = self._blocks[index] = _Item(kind)
        return item

    def _add(self, item: _Item) -> bytes:
        item.index = len(self._items)
        self._items.append(item)
        if item.kind == "reasoning":
            item.json = {"id": new_id("rs_"), "type": "reasoning", "summary": [], "content": []}
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
        else:
            item.json = {"id": new_id("msg_"), "type": "message", "role": "assistant"}
            item.json.update(status="in_progress", content=[])
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        out = self._item_event("response.output_item.added", item)
        item.json["content"].append(part)
        return out + self._part_event("response.content_part.added", item, part)

    def _item_event(self, kind: str, item: _Item) -> bytes:
        return self._emit(kind, output_index=item.index, item=item.json)

    def _part_event(self, kind: str, item: _Item, part: dict[str, Any]) -> bytes:
        return self._emit(
            kind, item_id=item.json["id"], output_index=item.index, content_index=0, part=part
        )

    def _piece(self, item: _Item, piece: str) -> bytes:
        if item.closed or not piece:
            return b""
        item.received.append(piece)
        out = b""
        if item.index < 0:
            if item.kind == "message":
                item.held += piece
                if item.held.isspace():
                    return b""
                piece, item.held = item.held, ""
            out = self._add(item)
        item.json["content"][0]["text"] += piece
        common = {"item_id": item.json["id"], "output_index": item.index}
        if item.kind == "message":
            return out + self._emit(
                "response.output_text.delta", **common, content_index=0, delta=piece, logprobs=[]
            )
        out += self._emit("response.reasoning_text.delta", **common, content_index=0, delta=piece)
        if not self._summary:
            return out
        if not item.summary_open:
            item.summary_held += piece
            if item.summary_held.isspace():
                return out
            piece, item.summary_open = item.summary_held.lstrip(), True
            part = {"type": "summary_text", "text": ""}
            out += self._emit(
                "response.reasoning_summary_part.added", **common, summary_index=0, part=part
            )
            item.json["summary"].append(part)
        item.json["summary"][0]["text"] += piece
        return out + self._emit(
            "response.reasoning_summary_text.delta", **common, summary_index=0, delta=piece
        )

    def _close(self, item: _Item) -> bytes:
        item.closed = True
        if item.index < 0:
            return b""  # whitespace only: never sent
        part = item.json["content"][0]
        common = {"item_id": item.json["id"], "output_index": item.index}
        if item.kind == "message":
            out = self._emit(
                "response.output_text.done",
                **common,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            item.json["status"] = "completed"
        else:
            out = self._emit(
                "response.reasoning_text.done", **common, content_index=0, text=part["text"]
            )
            if self._seal is not None and self._held is None:
                self._held = []  # from here on, items are done when the turn is
        out += self._part_event("response.content_part.done", item, part)
        if item.summary_open:
            summary = item.json["summary"][0]
            out += self._emit(
                "response.reasoning_summary_text.done",
                **common,
                summary_index=0,
                text=summary["text"],
            )
            out += self._emit(
                "response.reasoning_summary_part.done", **common, summary_index=0, part=summary
            )
        return out + self._done(item)

    def _done(self, item: _Item) -> bytes:
        if self._held is not None:
            self._held.append(item)
            return b""
        return self._item_event("response.output_item.done", item)

    def _add_call(self, item: _Item, call_id: str, name: str) -> bytes:
        ref = self._tools.get(name)
        item.index = len(self._items)
        self._items.append(item)
        if ref is not None and ref.kind == "custom":
            item.kind = "custom_tool_call"
            item.json = {"id": new_id("ctc_"), "type": "custom_tool_call", "call_id": call_id}
            item.json.update(name=ref.name, input="")
        else:
            item.json = {"id": new_id("fc_"), "type": "function_call", "call_id": call_id}
            item.json.update(name=ref.name if ref else name, arguments="", status="in_progress")
        if ref is not None and ref.namespace:
            item.json["namespace"] = ref.namespace
        return self._item_event("response.output_item.added", item)

    def _complete_call(self, item: _Item, e: ToolCallComplete | None) -> bytes:
        item.closed = True
        common = {"item_id": item.json["id"], "output_index": item.index}
        arguments = e.arguments if e is not None and e.error is None else {}
        if item.kind == "custom_tool_call":
            value = arguments.get("input")
            text = value if isinstance(value, str) else (_dumps(arguments) if arguments else "")
            item.json["input"] = text
            out = self._emit("response.custom_tool_call_input.delta", **common, delta=text)
            out += self._emit("response.custom_tool_call_input.done", **common, input=text)
        else:
            streamed = "".join(item.arguments)
            text = streamed if _json_equal(streamed, arguments) else _dumps(arguments)
            item.json.update(arguments=text, status="completed")
            out = self._emit("response.function_call_arguments.done", **common, arguments=text)
        return out + self._done(item)

    def _close_open(self) -> bytes:
        out = b""
        for item in self._items:
            if not item.closed:
                is_call = item.kind in ("function_call", "custom_tool_call")
                out += self._complete_call(item, None) if is_call else self._close(item)
        return out

    def finish(self, turn: ModelTurn) -> bytes:
        """Close what is open, seal, send the held items, then ``response.completed`` (or
        ``response.incomplete`` when the output limit cut the turn short of any call)."""
        out = self._close_open()
        message = turn.message
        if self._seal is not None:
            whole = message if message is not None and message.raw is not None else None
            if whole is not None and not whole.token_ids:
                whole = None
            reasoning = [item for item in self._items if item.kind == "reasoning"]
            for k, item in enumerate(reasoning):
                text = item.json["content"][0]["text"]
                item.json["encrypted_content"] = self._seal(k, text, whole if k == 0 else None)
        for item in self._held or []:
            out += self._item_event("response.output_item.done", item)
        self._held = None
        calls = any(item.kind != "reasoning" and item.kind != "message" for item in self._items)
        incomplete = turn.finish_reason == "length" and not calls
        output_tokens = turn.usage.output_tokens or len(turn.token_ids)
        prompt_tokens = turn.prompt_tokens or 0
        self.response.update(
            status="incomplete" if incomplete else "completed",
            output=[item.json for item in self._items],
            completed_at=int(time.time()),
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
            usage={
                "input_tokens": prompt_tokens,
                "input_tokens_details": {
                    "cached_tokens": turn.cached_prompt_tokens,
                    "cache_write_tokens": 0,
                },
                "output_tokens": output_tokens,
                "output_tokens_details": {
                    "reasoning_tokens": min(self._reasoning_tokens(message), output_tokens)
                },
                "total_tokens": prompt_tokens + output_tokens,
            },
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return out + self._emit(kind, response=self.response)

    def _reasoning_tokens(self, message: Message | None) -> int:
        if message is not None:
            texts = [b.raw or b.text for b in message.content if isinstance(b, ReasoningBlock)]
        else:
            texts = [i.json["content"][0]["text"] for i in self._items if i.kind == "reasoning"]
        return sum(len(self._count(text) or []) for text in texts)

    def fail(self, message: str) -> bytes:
        """``response.failed``: the engine failed after the stream began."""
        self.response.update(
            status="failed",
            output=[item.json for item in self._items],
            error={"code": "server_error", "message": message},
        )
        return self._emit("response.failed", response=self.response)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_equal(text: str, value: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(text) == value) if text else not value
    except ValueError:
        return False


def response_envelope(req: ResponsesRequest, response_id: str, tools: Tools) -> dict[str, Any]:
    """The response object's fields that do not change while it is generated, as the
    request set them."""
    reasoning = req.reasoning or {}
    text = dict(req.text or {})
    text.setdefault("format", {"type": "text"})
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": req.model,
        "output": [],
        "instructions": req.instructions,
        "tools": tools.echoed,
        "tool_choice": req.tool_choice if req.tool_choice is not None else "auto",
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "max_output_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "reasoning": {
            "effort": reasoning.get("effort"),
            "summary": reasoning.get("summary") or reasoning.get("generate_summary"),
        },
        "text": text,
        "truncation": "disabled",
        "store": req.store is not False,
        "previous_response_id": req.previous_response_id,
        "prompt_cache_key": req.prompt_cache_key,
        "metadata": req.metadata or {},
        "user": req.user,
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }
