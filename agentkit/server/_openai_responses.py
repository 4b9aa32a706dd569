"""The OpenAI Responses API (``POST /v1/responses``), as Codex and the ``openai`` SDK speak it.

Stateless: clients send the whole conversation each time (``store: false``);
``previous_response_id`` and ``item_reference`` are refused. The request side:

* ``instructions`` and the leading ``system``/``developer`` messages (Codex sends its base
  prompt as a ``developer`` message) become one system message, joined by blank lines; later
  ones stay system messages in place. Each user message stays a message (its parts joined by
  blank lines). Consecutive ``reasoning``, assistant ``message``, ``function_call`` and
  ``custom_tool_call`` items make one assistant message, in order; consecutive
  ``function_call_output`` and ``custom_tool_call_output`` items one tool message. Images,
  files and audio become bracketed notes; unknown item types (another provider's hosted-tool
  items) are dropped with a warning.
* Tools: ``function``; ``custom`` (free-form input such as Codex's ``apply_patch``) is shown to
  the model as a function taking one string, ``input``, its grammar quoted in the description;
  ``namespace`` is flattened into ``<namespace>__<name>`` functions. Calls map back to
  ``function_call`` (with ``namespace``) and ``custom_tool_call`` items. Hosted tools
  (``web_search``, ``tool_search``, ``image_generation``...) are dropped, with a warning logged
  once per type, and a ``tool_choice`` naming one becomes ``auto``.
* ``reasoning.effort`` is accepted and echoed: profiles have no thinking switch yet.
  ``reasoning.summary`` makes each reasoning item's summary its reasoning text (there is no
  summarizer), streamed with the summary events. ``parallel_tool_calls: false`` ends the turn
  at its first complete call. ``prompt_cache_key``, ``text``, ``client_metadata`` and unknown
  fields are accepted (the engine's prefix cache needs no key).
* Bodies may be compressed (``Content-Encoding: gzip``, ``deflate``, or ``zstd`` with the
  ``zstandard`` package); others get 415.

**Exact replay across stateless requests.** With ``include: ["reasoning.encrypted_content"]``
each reasoning item's ``encrypted_content`` is sealed (:mod:`agentkit.server._sealing`): its
reasoning text, and in a turn's first reasoning item the whole generated message (every
block's raw output and the turn's token ids). A client that sends the item back with
``content: null`` gets its reasoning back, and when the turn's visible items match the sealed
message, that message replaces them: the next prompt extends the previous prompt and output
token for token, across restarts. Otherwise the server's turn store is tried, then the turn
is rendered from the items (a logged cache break). Encrypted content that is not this
server's (tampered, or sealed under another key) is a 400 saying so, or, with
``unverifiable_reasoning="ignore"``, is ignored (the summary text stands in).

Because the first reasoning item carries data known only when the turn ends, a stream that
seals holds back its ``response.output_item.done`` events from that item on until the end of
the turn (their deltas stream as generated): clients record items in the order of those
events, so they are never reordered.
"""

from __future__ import annotations

import copy
import io
import json
import secrets
import time
import zlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.errors import (
    ConfigurationError,
    ContextWindowExceeded,
    EngineError,
    EngineOverloaded,
)
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
from agentkit.server._runtime import ModelTurn, ServerRuntime, TurnSpec
from agentkit.server._sealing import Sealer, SealError
from agentkit.server._sse import EventStreamResponse
from agentkit.server._turns import visible_key
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["ResponsesRequest", "responses_routes", "responses_routes_factory"]

_log = get_logger("agentkit.server")

SEAL_PURPOSE = b"agentkit/responses/reasoning/v1"
UnverifiableReasoning = Literal["reject", "ignore"]

_HOSTED_TOOLS = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "tool_search",
        "image_generation",
        "code_interpreter",
        "computer_use_preview",
        "computer",
        "mcp",
        "local_shell",
        "shell",
        "apply_patch",
    }
)
"""Tool types the model can only use through OpenAI's own servers or output formats."""


class ResponsesRequest(BaseModel):
    """A ``POST /v1/responses`` body; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[Any]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    reasoning: dict[str, Any] | None = None
    include: list[str] | None = None
    stream: bool = False
    store: bool | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    user: str | None = None


def responses_routes(context: ServerContext) -> list[Route]:
    """The Responses routes, sealing with the default key (see :mod:`._sealing`), rejecting
    encrypted content that is not this server's."""
    return responses_routes_factory()(context)


def responses_routes_factory(
    sealer: Sealer | None = None, *, unverifiable_reasoning: UnverifiableReasoning = "reject"
) -> Callable[[ServerContext], list[Route]]:
    """A route factory for ``create_app(adapters=[...])``.

    Args:
        sealer: seals reasoning; default: a :class:`Sealer` whose key is loaded on first use
            (``$AGENTKIT_SEALING_KEY`` or the persisted key file).
        unverifiable_reasoning: what to do with ``encrypted_content`` that is tampered with
            or sealed under another key: ``"reject"`` (400) or ``"ignore"`` it.
    """

    def factory(context: ServerContext) -> list[Route]:
        adapter = _Adapter(context, sealer or Sealer(), unverifiable_reasoning)
        return [
            Route("/v1/responses", adapter.endpoint(adapter.create), methods=["POST"]),
            Route("/v1/responses", adapter.websocket_refusal, methods=["GET"]),
        ]

    return factory


# -- the endpoint ----------------------------------------------------------------------------


def error_json(kind: str, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body (``type`` is agentkit's error kind, ``api_error`` as
    ``server_error``)."""
    kind = "server_error" if kind in ("api_error", "overloaded_error") else kind
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


class _Adapter:
    def __init__(
        self, context: ServerContext, sealer: Sealer, unverifiable: UnverifiableReasoning
    ) -> None:
        self.context = context
        self.runtime: ServerRuntime = context.runtime
        self.sealer = sealer
        self.unverifiable = unverifiable
        self.warned: set[str] = set()

    def endpoint(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            try:
                self.context.authorize(request)
                return await handler(request)
            except ApiError as error:
                body = error_json(error.kind, error.message, error.param)
                return JSONResponse(body, status_code=error.status)
            except _UnsupportedEncoding as error:
                body = error_json("invalid_request_error", str(error))
                return JSONResponse(body, status_code=415)
            except (ConfigurationError, ContextWindowExceeded) as error:
                body = error_json("invalid_request_error", str(error))
                return JSONResponse(body, status_code=400)
            except EngineOverloaded as error:
                return JSONResponse(error_json("overloaded_error", str(error)), status_code=529)
            except EngineError as error:
                return JSONResponse(error_json("api_error", str(error)), status_code=500)

        return wrapped

    async def websocket_refusal(self, request: Request) -> Response:
        """Codex tries a WebSocket on ``GET /v1/responses`` first; 426 makes it use HTTP."""
        message = "this server has no WebSocket mode: POST /v1/responses (server-sent events)"
        return JSONResponse(error_json("invalid_request_error", message), status_code=426)

    async def create(self, request: Request) -> Response:
        try:
            self.sealer.load()
        except ConfigurationError as error:
            raise ApiError("api_error", f"the sealing key is unavailable: {error}") from error
        body = await read_body(self.context, request)
        try:
            parsed = ResponsesRequest.model_validate(body)
        except ValidationError as error:
            detail = error.errors()[0]
            where = ".".join(str(p) for p in detail["loc"])
            raise ApiError("invalid_request_error", f"{where}: {detail['msg']}") from error
        if parsed.previous_response_id:
            raise ApiError(
                "invalid_request_error",
                "previous_response_id: this server keeps no responses (store: false); "
                "send the whole conversation in input",
                param="previous_response_id",
            )
        text_format = (parsed.text or {}).get("format")
        if isinstance(text_format, Mapping) and text_format.get("type") not in (None, "text"):
            self._warn_once("format", "text.format is not enforced: the model answers in text")
        tools = _Tools.convert(parsed.tools, self._warn_once)
        choice = _tool_choice(parsed.tool_choice, tools, self._warn_once)
        transcript = _InputConverter(self).convert(parsed)
        reasoning = parsed.reasoning or {}
        include = set(parsed.include or [])
        summary = reasoning.get("summary") or reasoning.get("generate_summary")
        response_id = new_id("resp_")
        envelope = _envelope(parsed, response_id, tools)
        spec = TurnSpec(
            transcript=transcript,
            tools=tools.specs,
            tool_choice=choice,
            max_tokens=parsed.max_output_tokens,
            temperature=parsed.temperature,
            top_p=parsed.top_p,
        )
        seal = None
        if "reasoning.encrypted_content" in include:
            seal = self._sealing(response_id)
        stream = ResponseStream(
            envelope,
            tools.by_model_name,
            summary=summary not in (None, "none"),
            seal=seal,
            count_tokens=self.runtime.encode,
        )
        single_call = parsed.parallel_tool_calls is False
        release = self.context.acquire()
        try:
            turn = self.runtime.start(spec, request_id=response_id)
            events = turn.events()
            if not parsed.stream:
                try:
                    async with aclosing(events):
                        async for event in events:
                            stream.event(event)
                            if single_call and isinstance(event, ToolCallComplete):
                                break
                    stream.finish(turn)
                    return JSONResponse(stream.response)
                finally:
                    release()
            # Wait for the first event (prefill done): a failure before any output is still
            # an HTTP error with its status, not a broken stream.
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

        async def chunks() -> AsyncGenerator[bytes, None]:
            try:
                yield stream.start()
                if first is not None:
                    yield stream.event(first)
                    done = single_call and isinstance(first, ToolCallComplete)
                    try:
                        while not done:
                            event = await anext(events, None)
                            if event is None:
                                break
                            yield stream.event(event)
                            done = single_call and isinstance(event, ToolCallComplete)
                    except EngineError as error:
                        yield stream.fail(str(error))
                        return
                yield stream.finish(turn)
            finally:
                await events.aclose()
                release()

        return EventStreamResponse(  # type: ignore[return-value]
            chunks(), ping=lambda: b": ping\n\n", ping_interval=self.context.config.ping_interval
        )

    def _sealing(self, response_id: str) -> Callable[[int, str, Message | None], str]:
        profile = self.runtime.profile.name

        def seal(index: int, text: str, message: Message | None) -> str:
            payload: dict[str, Any] = {
                "v": 1,
                "turn": response_id,
                "index": index,
                "text": text,
                "profile": profile,
            }
            if message is not None:
                payload["message"] = message.model_dump(mode="json", exclude_none=True)
            data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            return self.sealer.seal(zlib.compress(data.encode()), purpose=SEAL_PURPOSE)

        return seal

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            _log.warning(message)


def _envelope(req: ResponsesRequest, response_id: str, tools: _Tools) -> dict[str, Any]:
    """The response object's fields that do not change while it is generated."""
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
        "store": False,
        "previous_response_id": None,
        "prompt_cache_key": req.prompt_cache_key,
        "metadata": req.metadata or {},
        "user": req.user,
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }


# -- request bodies --------------------------------------------------------------------------


class _UnsupportedEncoding(Exception):
    pass


async def read_body(context: ServerContext, request: Request) -> Any:
    """The body as JSON, decompressed per ``Content-Encoding``, both sizes within the
    server's limit."""
    header = request.headers.get("content-encoding", "")
    encodings = [e.strip().lower() for e in header.split(",") if e.strip()]
    encodings = [e for e in encodings if e != "identity"]
    if not encodings:
        return await context.read_json(request)
    for encoding in encodings:
        if encoding not in ("gzip", "x-gzip", "deflate", "zstd"):
            raise _UnsupportedEncoding(
                f"Content-Encoding {encoding!r} is not supported (gzip, deflate, zstd)"
            )
    limit = context.config.max_request_bytes
    body = b""
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise ApiError("request_too_large", f"request body exceeds {limit} bytes")
    for encoding in reversed(encodings):
        body = _decompress(encoding, body, limit)
    try:
        return json.loads(body)
    except ValueError as error:
        raise ApiError("invalid_request_error", f"the body is not valid JSON: {error}") from error


def _decompress(encoding: str, body: bytes, limit: int) -> bytes:
    too_large = ApiError("request_too_large", f"the decompressed body exceeds {limit} bytes")
    if encoding == "zstd":
        return _unzstd(body, limit, too_large)
    decompressor = zlib.decompressobj(15 if encoding == "deflate" else 31)
    try:
        out = decompressor.decompress(body, limit + 1)
    except zlib.error as error:
        raise ApiError("invalid_request_error", f"bad {encoding} body: {error}") from error
    if len(out) > limit:
        raise too_large
    if not decompressor.eof:
        raise ApiError("invalid_request_error", f"the {encoding} body is truncated")
    return out


def _unzstd(body: bytes, limit: int, too_large: ApiError) -> bytes:
    try:
        import zstandard  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise _UnsupportedEncoding(
            "Content-Encoding 'zstd' needs the zstandard package on the server"
        ) from None
    out = bytearray()
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as reader:
            while piece := reader.read(1 << 16):
                out += piece
                if len(out) > limit:
                    raise too_large
    except zstandard.ZstdError as error:
        raise ApiError("invalid_request_error", f"bad zstd body: {error}") from error
    return bytes(out)


# -- tools -----------------------------------------------------------------------------------


def flat_name(namespace: str | None, name: str) -> str:
    """The name the model sees for tool ``name`` of ``namespace``."""
    if not namespace:
        return name
    return f"{namespace}{'' if namespace.endswith('_') else '__'}{name}"


@dataclass(slots=True)
class _Tools:
    specs: list[dict[str, Any]] = field(default_factory=list)
    """Function specs, as chat templates take them."""
    by_model_name: dict[str, ToolRef] = field(default_factory=dict)
    echoed: list[dict[str, Any]] = field(default_factory=list)
    """The client's tools the model sees, as sent (the response object echoes them)."""

    @classmethod
    def convert(
        cls, tools: list[dict[str, Any]] | None, warn: Callable[[str, str], None]
    ) -> _Tools:
        out = cls()
        for i, tool in enumerate(tools or []):
            path = f"tools.{i}"
            kind = tool.get("type")
            if kind == "namespace":
                namespace = _string(tool, "name", path)
                for j, inner in enumerate(_list(tool, "tools", path)):
                    out._add(inner, f"{path}.tools.{j}", namespace, warn)
                out.echoed.append(tool)
            elif out._add(tool, path, None, warn):
                out.echoed.append(tool)
        return out

    def _add(
        self,
        tool: Mapping[str, Any],
        path: str,
        namespace: str | None,
        warn: Callable[[str, str], None],
    ) -> bool:
        kind = tool.get("type")
        if kind not in ("function", "custom"):
            if not isinstance(kind, str):
                _fail(f"{path}.type", "a tool needs a type")
            warn(f"tool:{kind}", f"dropping hosted tool type {kind!r}: agentkit cannot run it")
            return False
        name = _string(tool, "name", path)
        model_name = flat_name(namespace, name)
        if model_name in self.by_model_name:
            _fail(f"{path}.name", f"duplicate tool name {model_name!r}")
        function: dict[str, Any] = {"name": model_name}
        description = tool.get("description")
        if isinstance(description, str) and description:
            function["description"] = description
        if kind == "function":
            parameters = tool.get("parameters")
            function["parameters"] = parameters if isinstance(parameters, dict) else {}
        else:
            function["parameters"] = {
                "type": "object",
                "properties": {"input": {"type": "string", "description": _custom_input(tool)}},
                "required": ["input"],
                "additionalProperties": False,
            }
        self.specs.append({"type": "function", "function": function})
        self.by_model_name[model_name] = ToolRef(kind, name, namespace)
        return True


def _custom_input(tool: Mapping[str, Any]) -> str:
    text = "The tool's whole input, as free-form text (not JSON)."
    fmt = tool.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        syntax = fmt.get("syntax", "lark")
        text += f" It must match this {syntax} grammar:\n{fmt.get('definition', '')}"
    return text


def _tool_choice(
    choice: str | dict[str, Any] | None, tools: _Tools, warn: Callable[[str, str], None]
) -> str:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            _fail("tool_choice", f"unknown tool_choice {choice!r}")
        return choice
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = _string(choice, "name", "tool_choice")
        model_name = flat_name(choice.get("namespace"), name)
        if model_name not in tools.by_model_name:
            _fail("tool_choice.name", f"{name!r} is not in tools")
        return model_name
    if kind == "allowed_tools":
        # Restricting the tool list would change the prompt; the mode is what is kept.
        mode = choice.get("mode", "auto")
        return mode if mode in ("auto", "required") else "auto"
    if kind in _HOSTED_TOOLS or kind in ("mcp", "programmatic_tool_calling"):
        warn(f"choice:{kind}", f"tool_choice {kind!r} names a hosted tool: using 'auto'")
        return "auto"
    raise _invalid("tool_choice.type", f"unknown tool_choice type {kind!r}")


# -- input items -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Sealed:
    turn: str
    index: int
    text: str
    message: Message | None


@dataclass(slots=True)
class _Run:
    role: Literal["assistant", "tool"]
    blocks: list[ContentBlock] = field(default_factory=list)
    sealed: list[_Sealed] = field(default_factory=list)


class _InputConverter:
    def __init__(self, adapter: _Adapter) -> None:
        self.adapter = adapter
        self.transcript = Transcript()
        self.run: _Run | None = None
        self.names: dict[str, str] = {}
        """Each call id's tool name, as the model knows it."""

    def convert(self, req: ResponsesRequest) -> Transcript:
        items: list[Any] = (
            [{"type": "message", "role": "user", "content": req.input}]
            if isinstance(req.input, str)
            else req.input
        )
        system = [req.instructions] if req.instructions else []
        leading = True
        for i, item in enumerate(items):
            path = f"input.{i}"
            if not isinstance(item, Mapping):
                _fail(path, "expected an input item object")
            kind = item.get("type", "message")
            role = item.get("role")
            if kind == "message" and role in ("system", "developer"):
                text = "\n\n".join(t for t in _texts(item, path) if t)
                if leading:
                    system.append(text)
                else:
                    self._flush()
                    self.transcript.add("system", text)
                continue
            if leading and system:
                self.transcript.add("system", "\n\n".join(t for t in system if t))
            leading = False
            self._item(kind, item, path)
        if leading and system:
            self.transcript.add("system", "\n\n".join(t for t in system if t))
        self._flush(last=True)
        return self.transcript

    def _item(self, kind: object, item: Mapping[str, Any], path: str) -> None:
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant"):
                _fail(f"{path}.role", f"unknown role {role!r}")
            texts = _texts(item, path)
            if role == "user":  # each user message stays a message of its own
                self._flush()
                self.transcript.add("user", "\n\n".join(t for t in texts if t))
            for text in texts if role == "assistant" else ():
                self._add("assistant", TextBlock(text=text))
        elif kind == "reasoning":
            self._reasoning(item, path)
        elif kind in ("function_call", "custom_tool_call"):
            call_id = _string(item, "call_id", path)
            namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
            name = flat_name(namespace, _string(item, "name", path))
            if kind == "function_call":
                arguments = _arguments(_string(item, "arguments", path))
            else:
                arguments = {"input": _string(item, "input", path)}
            self._add("assistant", ToolCallBlock(id=call_id, name=name, arguments=arguments))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = _string(item, "call_id", path)
            text = _output_text(item.get("output"), f"{path}.output")
            name = self.names.get(call_id, "unknown")
            self._add("tool", ToolResultBlock(call_id=call_id, name=name, content=text))
        elif kind == "item_reference":
            _fail(path, "item_reference needs stored items; this server stores none")
        else:
            self.adapter._warn_once(f"item:{kind}", f"dropping input items of type {kind!r}")

    def _reasoning(self, item: Mapping[str, Any], path: str) -> None:
        sealed = self._open(item.get("encrypted_content"), f"{path}.encrypted_content")
        run = self.run
        if (
            sealed is not None
            and run is not None
            and run.sealed
            and run.sealed[-1].turn != sealed.turn
        ):
            self._flush()  # another turn's reasoning: a new assistant message begins
        content = item.get("content")
        text: str | None = None
        if isinstance(content, list):
            text = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        elif sealed is not None:
            text = sealed.text
        else:  # content withheld and nothing sealed: the summary is all there is
            summary = item.get("summary")
            parts = summary if isinstance(summary, list) else []
            text = "\n\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))
            text = text or None
        if text is not None:
            self._add("assistant", ReasoningBlock(text=text))
        if sealed is not None:
            assert self.run is not None
            self.run.sealed.append(sealed)

    def _open(self, token: object, path: str) -> _Sealed | None:
        if not isinstance(token, str) or not token:
            return None
        adapter = self.adapter
        try:
            data = json.loads(zlib.decompress(adapter.sealer.open(token, purpose=SEAL_PURPOSE)))
            message = data.get("message")
            restored = (
                Message.model_validate(message)
                if message is not None and data.get("profile") == adapter.runtime.profile.name
                else None
            )
            return _Sealed(str(data["turn"]), int(data["index"]), str(data["text"]), restored)
        except SealError as error:
            why = str(error)
        except (ValueError, KeyError, TypeError, zlib.error, ValidationError):
            why = "the encrypted content does not hold agentkit reasoning"
        if adapter.unverifiable == "reject":
            raise ApiError(
                "invalid_request_error",
                f"{path}: {why}; this server cannot restore that reasoning (it was not sealed "
                "by this server's key, or was altered). Start a new conversation, or run the "
                "server with unverifiable reasoning ignored.",
                param=path,
            )
        _log.warning("ignoring encrypted reasoning this server cannot open", path=path, why=why)
        return None

    def _add(self, role: Literal["assistant", "tool"], block: ContentBlock) -> None:
        if self.run is None or self.run.role != role:
            self._flush()
            self.run = _Run(role)
        self.run.blocks.append(block)

    def _flush(self, *, last: bool = False) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        if run.role == "tool":
            self.transcript.add("tool", run.blocks)
        else:
            self._assistant(run, last=last)
            self.names.update((b.id, b.name) for b in self.transcript.messages[-1].tool_calls)

    def _assistant(self, run: _Run, *, last: bool) -> None:
        sealed = next((s.message for s in run.sealed if s.message is not None), None)
        key = visible_key(run.blocks)
        if sealed is not None and visible_key(sealed.content) == key:
            self.transcript.append(sealed)
            return
        stored = self.adapter.runtime.turns.restore(run.blocks) if run.blocks else None
        if stored is not None:
            self.transcript.append(stored)
            return
        self.transcript.add("assistant", run.blocks)
        if last:
            why = "a prefill (the last item), rendered from what the client sent"
        elif sealed is not None:
            why = "its items differ from the sealed turn (edited by the client)"
        elif run.sealed:
            why = (
                "its sealed reasoning carries no turn data (sealed for another model profile, "
                "or the turn's first reasoning item is missing)"
            )
        else:
            why = "no sealed or stored turn matches: not generated here, edited, or evicted"
        _log.warning("cache break: an assistant turn is rendered canonically", why=why)


def _texts(item: Mapping[str, Any], path: str) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        _fail(f"{path}.content", "expected a string or a list of content parts")
    texts: list[str] = []
    for j, part in enumerate(content):
        if not isinstance(part, Mapping):
            _fail(f"{path}.content.{j}", "expected a content part object")
        texts.append(_part_text(part))
    return texts


def _part_text(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return str(part.get("text", ""))
    if kind == "refusal":
        return str(part.get("refusal", ""))
    if kind == "input_image":
        return "[image omitted]"
    if kind == "input_file":
        return f"[file omitted: {part.get('filename') or 'file'}]"
    return f"[{kind} omitted]"


def _output_text(output: object, path: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n\n".join(_part_text(p) for p in output if isinstance(p, Mapping))
    if isinstance(output, Mapping) and isinstance(output.get("content"), str):
        return str(output["content"])
    raise _invalid(path, "expected a string or a list of content parts")


def _arguments(text: str) -> dict[str, Any]:
    """A call's arguments; ``{}`` for text that is not a JSON object (a call that failed to
    parse was sent out with ``{}``, so the two agree)."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _invalid(path: str, detail: str) -> ApiError:
    return ApiError("invalid_request_error", f"{path}: {detail}", param=path)


def _fail(path: str, detail: str) -> NoReturn:
    raise _invalid(path, detail)


def _string(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        _fail(f"{path}.{key}", "field required" if value is None else "expected a string")
    return value


def _list(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        _fail(f"{path}.{key}", "expected a list")
    return value


# -- the response: events and object ---------------------------------------------------------


def new_id(prefix: str) -> str:
    """An id shaped like the API's: a prefix (``resp_``, ``rs_``, ``msg_``, ``fc_``) and hex."""
    return prefix + secrets.token_hex(24)


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A client tool as the model sees it: its kind, name and namespace on the wire."""

    kind: Literal["function", "custom"]
    name: str
    namespace: str | None


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
