"""OpenAI Chat Completions: ``POST /v1/chat/completions`` over the runtime, streaming and not.

Requests become a transcript as follows:

* ``system`` and ``developer`` messages at the start join (blank-line separated) into the one
  system prompt; later ones stay system messages where they are.
* Content is a string or a list of parts: text parts are joined with a newline (as vLLM
  does), anything else becomes a bracketed note (``[image omitted]``).
* An assistant message becomes ``[reasoning, text, tool calls...]``: its reasoning comes from
  ``reasoning_content`` or ``reasoning`` (either is accepted), ``function.arguments`` must be
  a JSON object. Consecutive assistant messages are one run, in the order given, so a turn a
  client sends back split into several messages keeps its interleaving.
* Consecutive ``tool`` messages become one tool message of results, each named after the
  call its ``tool_call_id`` answers.
* **Exact replay.** Each assistant run is looked up in the turn store, as blocks, and if that
  misses, by its *OpenAI projection*: one message can hold only one reasoning string, one
  content string and the calls, so a turn that reasoned, called, reasoned again and called
  reaches the client as ``reasoning = r0 + r1``, ``tool_calls = [c0, c1]``. Each turn served
  here is indexed under that projection (:class:`ReplayIndex`), so the client sending it back
  as given gets the stored turn, interleaving and token ids included. A call whose arguments
  were not valid JSON (the model's malformed output, streamed as written) is accepted only in
  a turn that is restored that way; otherwise it is a 400 naming the field.

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
import secrets
import string
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError, ContextWindowExceeded, EngineError, EngineOverloaded
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
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._runtime import ModelTurn, TurnSpec
from agentkit.server._sse import EventStreamResponse
from agentkit.server._turns import TurnStore, visible_key
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = [
    "ChatRequest",
    "ChatStream",
    "ConvertedChat",
    "ReplayIndex",
    "chat_routes",
    "convert_chat_request",
    "error_body",
    "new_completion_id",
]

_log = get_logger("agentkit.server")

_BASE62 = string.digits + string.ascii_letters
_DISPATCH_HEADER = "x-agentkit-dispatch"
_CODES = {"authentication_error": "invalid_api_key", "rate_limit_error": "rate_limit_exceeded"}


def new_completion_id() -> str:
    """``chatcmpl-`` and 29 base62 characters, like the API's."""
    return "chatcmpl-" + "".join(secrets.choice(_BASE62) for _ in range(29))


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


# -- requests --------------------------------------------------------------------------------


class ChatRequest(BaseModel):
    """A ``POST /v1/chat/completions`` body. Unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    n: int | None = None


@dataclass(slots=True)
class ConvertedChat:
    """A request as the runtime takes it."""

    spec: TurnSpec
    restored: list[bool] = field(default_factory=list)
    """Per assistant run, whether the stored turn replaced it."""


class ReplayIndex:
    """Turns served here, keyed by their OpenAI projection (see the module docstring): the
    visible blocks to find the stored turn with in the :class:`TurnStore`."""

    def __init__(self, max_turns: int = 4096) -> None:
        self._max = max_turns
        self._blocks: OrderedDict[str, list[ContentBlock]] = OrderedDict()

    def remember(self, message: Message) -> None:
        key = visible_key(projection(message))
        if key == visible_key(message.content):
            return  # the store finds it as it is
        self._blocks[key] = list(message.content)
        self._blocks.move_to_end(key)
        while len(self._blocks) > self._max:
            self._blocks.popitem(last=False)

    def restore(self, turns: TurnStore, blocks: Sequence[ContentBlock]) -> Message | None:
        stored = turns.restore(blocks)
        if stored is not None:
            return stored
        original = self._blocks.get(visible_key(blocks))
        return turns.restore(original) if original is not None else None


class _InvalidArguments(ToolCallBlock):
    """A replayed call whose arguments were not a JSON object (kept for the error path)."""

    path: str = ""


def _fail(path: str, detail: str) -> NoReturn:
    raise ApiError("invalid_request_error", f"{path}: {detail}", param=path)


def _get(obj: Mapping[str, Any], key: str, kind: type, path: str, *, required: bool = False) -> Any:
    value = obj.get(key)
    if value is None:
        if required:
            _fail(f"{path}.{key}", "field required")
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _fail(f"{path}.{key}", f"expected {'a string' if kind is str else 'an object'}")
    return value


def _text(content: object, path: str) -> str:
    """A message's content as one string: text parts joined, other parts as a note."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        _fail(path, "expected a string or a list of content parts")
    parts: list[str] = []
    for i, part in enumerate(content):
        if not isinstance(part, Mapping):
            _fail(f"{path}.{i}", "expected a content part object")
        kind = _get(part, "type", str, f"{path}.{i}", required=True)
        if kind in ("text", "input_text", "output_text"):
            parts.append(_get(part, "text", str, f"{path}.{i}", required=True))
        elif kind == "refusal":
            parts.append(_get(part, "refusal", str, f"{path}.{i}") or "")
        elif kind in ("image_url", "input_image", "image"):
            parts.append("[image omitted]")
        elif kind in ("input_audio", "audio"):
            parts.append("[audio omitted]")
        else:
            parts.append(f"[{kind} omitted]")
    return "\n".join(parts)


def _assistant_blocks(message: Mapping[str, Any], path: str) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        _fail(f"{path}.reasoning_content", "expected a string")
    if reasoning:
        blocks.append(ReasoningBlock(text=reasoning))
    text = _text(message.get("content"), f"{path}.content")
    if text:
        blocks.append(TextBlock(text=text))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        _fail(f"{path}.tool_calls", "expected a list")
    for i, call in enumerate(calls):
        where = f"{path}.tool_calls.{i}"
        if not isinstance(call, Mapping):
            _fail(where, "expected a tool call object")
        function = _get(call, "function", dict, where, required=True)
        call_id = _get(call, "id", str, where, required=True)
        name = _get(function, "name", str, f"{where}.function", required=True)
        raw = function.get("arguments")
        arguments: Any
        if isinstance(raw, Mapping):
            arguments = dict(raw)
        else:
            try:
                arguments = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
            except ValueError as error:
                arguments = str(error)
        if not isinstance(arguments, dict):
            why = arguments if isinstance(arguments, str) else "not a JSON object"
            blocks.append(
                _InvalidArguments(
                    id=call_id, name=name, error=why, path=f"{where}.function.arguments"
                )
            )
            continue
        blocks.append(ToolCallBlock(id=call_id, name=name, arguments=arguments))
    return blocks


def _tool_spec(tool: object, path: str) -> dict[str, Any]:
    if not isinstance(tool, Mapping):
        _fail(path, "expected a tool object")
    kind = _get(tool, "type", str, path) or "function"
    if kind != "function":
        _fail(f"{path}.type", f"only function tools are supported, not {kind!r}")
    function = _get(tool, "function", dict, path, required=True)
    name = _get(function, "name", str, f"{path}.function", required=True)
    spec: dict[str, Any] = {"name": name}
    description = _get(function, "description", str, f"{path}.function")
    if description is not None:
        spec["description"] = description
    parameters = _get(function, "parameters", dict, f"{path}.function")
    spec["parameters"] = parameters if parameters is not None else {"type": "object"}
    return {"type": "function", "function": spec}


def _tool_choice(choice: str | dict[str, Any] | None, names: set[str]) -> str:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            _fail(
                "tool_choice", f"expected 'auto', 'none', 'required' or a function, not {choice!r}"
            )
        return choice
    function = _get(choice, "function", dict, "tool_choice", required=True)
    name = _get(function, "name", str, "tool_choice.function", required=True)
    if name not in names:
        _fail("tool_choice.function.name", f"{name!r} is not in tools")
    return str(name)


def convert_chat_request(
    req: ChatRequest, *, turns: TurnStore, index: ReplayIndex
) -> ConvertedChat:
    """Turn ``req`` into a :class:`TurnSpec` (see the module docstring); :class:`ApiError`
    ``invalid_request_error`` naming the field for anything malformed."""
    if req.n is not None and req.n != 1:
        _fail("n", "only n=1 is supported")
    tools = [_tool_spec(tool, f"tools.{i}") for i, tool in enumerate(req.tools or [])]
    names = [t["function"]["name"] for t in tools]
    if len(set(names)) != len(names):
        _fail("tools", "duplicate function names")
    choice = _tool_choice(req.tool_choice, set(names))

    transcript = Transcript()
    system: list[str] = []
    leading = True
    call_names: dict[str, str] = {}
    restored: list[bool] = []
    run: list[list[ContentBlock]] = []
    results: list[ToolResultBlock] = []

    def flush() -> None:
        if run:
            for added in _add_assistant(transcript, run, turns, index, restored):
                call_names.update((c.id, c.name) for c in added.tool_calls)
            run.clear()
        if results:
            transcript.add("tool", list(results))
            results.clear()

    for i, message in enumerate(req.messages):
        path = f"messages.{i}"
        role = _get(message, "role", str, path, required=True)
        if role not in ("system", "developer", "user", "assistant", "tool"):
            _fail(f"{path}.role", f"unknown role {role!r}")
        if role != "assistant" and run:
            flush()
        if role != "tool" and results:
            flush()
        if role in ("system", "developer"):
            text = _text(message.get("content"), f"{path}.content")
            if leading:
                system.append(text)
            else:
                transcript.add("system", text)
            continue
        if leading:
            leading = False
            if any(system):
                transcript.add("system", "\n\n".join(t for t in system if t))
        if role == "user":
            transcript.add("user", _text(message.get("content"), f"{path}.content"))
        elif role == "assistant":
            run.append(_assistant_blocks(message, path))
        else:
            call_id = _get(message, "tool_call_id", str, path, required=True)
            name = call_names.get(call_id) or _get(message, "name", str, path) or "unknown"
            content = _text(message.get("content"), f"{path}.content")
            results.append(ToolResultBlock(call_id=call_id, name=name, content=content))
    flush()
    if leading and any(system):
        transcript.add("system", "\n\n".join(t for t in system if t))

    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    spec = TurnSpec(
        transcript=transcript,
        tools=tools,
        tool_choice=choice,
        max_tokens=req.max_completion_tokens or req.max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        stop=[s for s in stop if s],
    )
    return ConvertedChat(spec, restored)


def _add_assistant(
    transcript: Transcript,
    run: list[list[ContentBlock]],
    turns: TurnStore,
    index: ReplayIndex,
    restored: list[bool],
) -> list[Message]:
    """Append the run as one restored turn, or each message restored on its own, or
    (nothing restored) one message of the blocks as given, in order; returns what was added."""
    merged = [block for blocks in run for block in blocks]
    stored = index.restore(turns, merged) if merged else None
    if stored is not None:
        transcript.append(stored)
        restored.append(True)
        return [stored]
    singles = [index.restore(turns, blocks) if blocks else None for blocks in run]
    if len(run) > 1 and any(singles):
        added: list[Message] = []
        for blocks, single in zip(run, singles, strict=True):
            if single is None:
                _check_arguments(blocks)
            added.append(single or Message(role="assistant", content=blocks))
            restored.append(single is not None)
        transcript.messages.extend(added)
        return added
    _check_arguments(merged)
    restored.append(False)
    return [transcript.add("assistant", merged)]


def _check_arguments(blocks: Iterable[ContentBlock]) -> None:
    for block in blocks:
        if isinstance(block, _InvalidArguments):
            _fail(block.path, f"not a JSON object: {block.error}")


def projection(message: Message) -> list[ContentBlock]:
    """What a client holds of ``message`` after this adapter sent it: one reasoning string,
    one content string, the calls (as the blocks a request brings back)."""
    stream = ChatStream(completion_id="", model="", created=0)
    _replay(stream, message)
    blocks: list[ContentBlock] = []
    if stream.reasoning:
        blocks.append(ReasoningBlock(text=stream.reasoning))
    if stream.content:
        blocks.append(TextBlock(text=stream.content))
    blocks += [ToolCallBlock(id=c.id, name=c.name, arguments=c.arguments) for c in stream.calls]
    return blocks


# -- responses -------------------------------------------------------------------------------

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


def _replay(stream: ChatStream, message: Message) -> None:
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


# -- the route -------------------------------------------------------------------------------


def chat_routes(context: ServerContext) -> list[Route]:
    """``POST /v1/chat/completions`` on ``context``'s runtime."""
    runtime = context.runtime
    config = context.config
    index = ReplayIndex()

    def parse(data: Any) -> ChatRequest:
        if not isinstance(data, dict):
            raise ApiError("invalid_request_error", "the request body must be a JSON object")
        try:
            return ChatRequest.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            detail = "field required" if first["type"] == "missing" else first["msg"]
            raise ApiError("invalid_request_error", f"{where}: {detail}", param=where) from error

    def remember(turn: ModelTurn) -> None:
        if turn.message is not None and turn.message.raw is not None:
            index.remember(turn.message)

    async def completions(request: Request) -> Response:
        try:
            context.authorize(request)
            return await handle(request)
        except ApiError as error:
            return _error(error.kind, error.message, param=error.param)
        except ContextWindowExceeded as error:
            return _error("invalid_request_error", str(error), code="context_length_exceeded")
        except ConfigurationError as error:
            return _error("invalid_request_error", str(error))
        except EngineOverloaded as error:
            return _error("overloaded_error", str(error))
        except EngineError as error:
            return _error("api_error", str(error))

    async def handle(request: Request) -> Response:
        parsed = parse(await context.read_json(request))
        converted = convert_chat_request(parsed, turns=runtime.turns, index=index)
        for n, restored in enumerate(converted.restored):
            if not restored:
                _log.warning("cache break: an assistant turn is rendered canonically", run=n)
        release = context.acquire()
        try:
            completion_id = new_completion_id()
            turn = runtime.start(converted.spec, request_id=completion_id)
            dispatch = config.streaming_tool_dispatch or request.headers.get(
                _DISPATCH_HEADER, ""
            ).lower() in ("1", "true", "yes")
            stream = ChatStream(
                completion_id=completion_id,
                model=parsed.model,
                created=int(time.time()),
                reasoning_field=config.reasoning_field,
                dispatch=dispatch and bool(parsed.stream),
            )
            if not parsed.stream:
                try:
                    return await complete(turn, stream)
                finally:
                    release()
            events = turn.events()
            try:
                first: ParseEvent | None = await anext(events)
            except StopAsyncIteration:
                first = None
            except BaseException:
                await events.aclose()
                raise
        except BaseException:
            release()
            raise
        include_usage = bool((parsed.stream_options or {}).get("include_usage"))

        async def body() -> AsyncGenerator[bytes, None]:
            try:
                yield stream.start()
                if first is not None:
                    yield stream.event(first)
                    try:
                        async for event in events:
                            yield stream.event(event)
                    except EngineOverloaded as error:
                        yield stream.error("overloaded_error", str(error))
                        return
                    except EngineError as error:
                        yield stream.error("api_error", str(error))
                        return
                remember(turn)
                yield stream.finish(finish_reason(turn.finish_reason, bool(stream.calls)))
                if include_usage:
                    yield stream.usage(
                        turn.prompt_tokens or 0, turn.usage.output_tokens, turn.cached_prompt_tokens
                    )
                yield stream.done()
            finally:
                await events.aclose()
                release()

        return EventStreamResponse(  # type: ignore[return-value]
            body(), ping=stream.ping, ping_interval=config.ping_interval
        )

    async def complete(turn: ModelTurn, stream: ChatStream) -> Response:
        async with aclosing(turn.events()) as events:
            async for _ in events:
                pass
        assert turn.message is not None
        remember(turn)
        _replay(stream, turn.message)
        choice = {
            "index": 0,
            "message": stream.message(),
            "logprobs": None,
            "finish_reason": finish_reason(turn.finish_reason, bool(stream.calls)),
        }
        return JSONResponse(
            {
                "id": stream.completion_id,
                "object": "chat.completion",
                "created": stream.created,
                "model": stream.model,
                "choices": [choice],
                "usage": usage_json(
                    turn.prompt_tokens or 0, turn.usage.output_tokens, turn.cached_prompt_tokens
                ),
            }
        )

    return [Route("/v1/chat/completions", completions, methods=["POST"])]


def _error(
    kind: str, message: str, *, param: str | None = None, code: str | None = None
) -> JSONResponse:
    status = ApiError(kind, message).status
    return JSONResponse(error_body(kind, message, param=param, code=code), status_code=status)
