"""Responses API requests (:mod:`._openai_responses`): bodies, tools and input items.

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
* ``reasoning.effort`` is echoed; ``"none"`` or ``"minimal"`` turns thinking off where the
  profile has a switch (``Profile.thinking_switch``: Qwen3, Nemotron-3).
  ``reasoning.summary`` makes each reasoning item's summary its reasoning text (there is no
  summarizer), streamed with the summary events. ``parallel_tool_calls: false`` ends the turn
  at its first complete call. ``prompt_cache_key`` (Codex sends its conversation id) keys
  the conversation's session affinity (``TurnSpec.session``: the engine's prefix cache needs
  no key, but a router that places sessions on workers does). ``text``, ``client_metadata``
  and unknown fields are accepted.
* ``previous_response_id``: the stored conversation's items (:class:`~agentkit.server.
  _response_store.History`) come first and are converted with the request's own, as one
  list, so a chain converts exactly as the same conversation sent whole would; its generated
  turns replace their items when the visible content matches. ``item_reference`` is refused.
* Bodies may be compressed (``Content-Encoding: gzip``, ``deflate``, or ``zstd`` with the
  ``zstandard`` package); others get 415.
"""

from __future__ import annotations

import copy
import io
import json
import secrets
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from agentkit._logging import get_logger
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._intake import embedded_json
from agentkit.server._response_store import History, StoredResponse
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer, SealError
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

__all__ = [
    "SEAL_PURPOSE",
    "InputConverter",
    "ResponsesRequest",
    "ToolRef",
    "Tools",
    "UnsupportedEncoding",
    "UnverifiableReasoning",
    "flat_name",
    "input_items",
    "new_id",
    "parse_responses_request",
    "read_body",
    "stored_response",
    "tool_choice",
]

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


# -- request bodies --------------------------------------------------------------------------


class UnsupportedEncoding(ApiError):
    """A body in a ``Content-Encoding`` this server does not decode: 415."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_request_error", message, status=415)


def parse_responses_request(body: Any) -> ResponsesRequest:
    """The body as a :class:`ResponsesRequest`; an ``invalid_request_error`` naming the
    first field that is wrong."""
    try:
        return ResponsesRequest.model_validate(body)
    except ValidationError as error:
        detail = error.errors()[0]
        where = ".".join(str(p) for p in detail["loc"])
        raise ApiError("invalid_request_error", f"{where}: {detail['msg']}") from error


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
            raise UnsupportedEncoding(
                f"Content-Encoding {encoding!r} is not supported (gzip, deflate, zstd)"
            )
    body = await context.read_bytes(request)

    def decode() -> Any:  # CPU work: on a worker thread
        data = body
        for encoding in reversed(encodings):
            data = _decompress(encoding, data, context.config.max_request_bytes)
        return context.parse_json(data)

    return await context.work(decode)


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
        raise UnsupportedEncoding(
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


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A client tool as the model sees it: its kind, name and namespace on the wire."""

    kind: Literal["function", "custom"]
    name: str
    namespace: str | None


def flat_name(namespace: str | None, name: str) -> str:
    """The name the model sees for tool ``name`` of ``namespace``."""
    if not namespace:
        return name
    return f"{namespace}{'' if namespace.endswith('_') else '__'}{name}"


@dataclass(slots=True)
class Tools:
    specs: list[dict[str, Any]] = field(default_factory=list)
    """Function specs, as chat templates take them."""
    by_model_name: dict[str, ToolRef] = field(default_factory=dict)
    echoed: list[dict[str, Any]] = field(default_factory=list)
    """The client's tools the model sees, as sent (the response object echoes them)."""

    @classmethod
    def convert(cls, tools: list[dict[str, Any]] | None, warn: Callable[[str, str], None]) -> Tools:
        out = cls()
        for i, tool in enumerate(tools or []):
            path = f"tools.{i}"
            kind = tool.get("type")
            if kind == "namespace":
                namespace = _string(tool, "name", path)
                for j, inner in enumerate(_list(tool, "tools", path)):
                    if not isinstance(inner, Mapping):
                        _fail(f"{path}.tools.{j}", "expected a tool object")
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


def tool_choice(
    choice: str | dict[str, Any] | None, tools: Tools, warn: Callable[[str, str], None]
) -> str:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            _fail("tool_choice", f"unknown tool_choice {choice!r}")
        return choice
    kind = _string(choice, "type", "tool_choice")
    if kind in ("function", "custom"):
        name = _string(choice, "name", "tool_choice")
        namespace = choice.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            _fail("tool_choice.namespace", "expected a string")
        model_name = flat_name(namespace, name)
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


class InputConverter:
    def __init__(
        self,
        runtime: ServerRuntime,
        sealer: Sealer,
        unverifiable: UnverifiableReasoning,
        warn: Callable[[str, str], None],
    ) -> None:
        self.runtime = runtime
        self.sealer = sealer
        self.unverifiable = unverifiable
        self.warn = warn
        self.transcript = Transcript()
        self.cache_breaks: list[str] = []
        """Why each assistant turn that could not be replayed exactly was not (the adapter
        reports them: :func:`agentkit.server._exchange.cache_breaks`)."""
        self.run: _Run | None = None
        self.names: dict[str, str] = {}
        """Each call id's tool name, as the model knows it."""
        self.exact: Mapping[str, Message] = {}
        """The stored responses' generated turns, by visible content."""

    def convert(self, req: ResponsesRequest, history: History | None = None) -> Transcript:
        """The conversation as a transcript: ``history`` (a stored response's conversation,
        for ``previous_response_id``) then the request's input, as if the client had sent
        them all; ``instructions`` are the request's own (never carried over)."""
        earlier = history.items if history is not None else []
        self.exact = history.turns if history is not None else {}
        items = [*earlier, *input_items(req)]
        system = [req.instructions] if req.instructions else []
        leading = True
        for i, item in enumerate(items):
            # An earlier response's item is never at fault: the request's own are counted.
            path = f"input.{i - len(earlier)}" if i >= len(earlier) else "previous_response_id"
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
                arguments = _arguments(_string(item, "arguments", path), f"{path}.arguments")
            else:
                arguments = {"input": _string(item, "input", path)}
            self._add("assistant", ToolCallBlock(id=call_id, name=name, arguments=arguments))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = _string(item, "call_id", path)
            text = _output_text(item.get("output"), f"{path}.output")
            name = self.names.get(call_id, "unknown")
            self._add("tool", ToolResultBlock(call_id=call_id, name=name, content=text))
        elif kind == "item_reference":
            _fail(path, "item_reference is not supported: continue with previous_response_id")
        else:
            self.warn(f"item:{kind}", f"dropping input items of type {kind!r}")

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
        try:
            data = json.loads(zlib.decompress(self.sealer.open(token, purpose=SEAL_PURPOSE)))
            message = data.get("message")
            restored = (
                Message.model_validate(message)
                if message is not None and data.get("profile") == self.runtime.profile.name
                else None
            )
            return _Sealed(str(data["turn"]), int(data["index"]), str(data["text"]), restored)
        except SealError as error:
            why = str(error)
        except (ValueError, KeyError, TypeError, zlib.error, ValidationError):
            why = "the encrypted content does not hold agentkit reasoning"
        if self.unverifiable == "reject":
            raise ApiError(
                "invalid_request_error",
                f"{path}: {why}; this server cannot restore that reasoning (it was not sealed "
                "by this server's key for this model, or was altered). Start a new "
                "conversation, or run the server with unverifiable reasoning ignored.",
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
        exact = self.exact.get(key)
        if exact is not None:  # a stored response's turn (previous_response_id)
            self.transcript.append(exact)
            return
        stored = self.runtime.turns.restore(run.blocks) if run.blocks else None
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
        self.cache_breaks.append(why)


def input_items(req: ResponsesRequest) -> list[Any]:
    """The request's input as a list of items (a string is one user message)."""
    if isinstance(req.input, str):
        text = {"type": "input_text", "text": req.input}
        return [{"type": "message", "role": "user", "content": [text]}]
    return req.input


_ITEM_PREFIXES = {
    "message": "msg_",
    "reasoning": "rs_",
    "function_call": "fc_",
    "function_call_output": "fco_",
    "custom_tool_call": "ctc_",
    "custom_tool_call_output": "ctco_",
}


def stored_response(
    req: ResponsesRequest, response: dict[str, Any], turn: Message | None
) -> StoredResponse:
    """What ``store`` keeps of a finished response: its request's input items (each given an
    ``id`` if it had none, as ``GET .../input_items`` lists them), the response object and
    the exact generated turn."""
    items: list[dict[str, Any]] = []
    for item in input_items(req):
        kept = dict(item)
        if not isinstance(kept.get("id"), str):
            kind = kept.get("type", "message")
            kept["id"] = new_id(_ITEM_PREFIXES.get(str(kind), "item_"))
        items.append(kept)
    # A copy: the stream's object could still change (a failure while the last event is sent).
    kept_response = copy.deepcopy(response)
    return StoredResponse(response["id"], req.previous_response_id, kept_response, items, turn)


def new_id(prefix: str) -> str:
    """An id shaped like the API's: a prefix (``resp_``, ``rs_``, ``msg_``, ``fc_``) and hex."""
    return prefix + secrets.token_hex(24)


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


def _arguments(text: str, path: str) -> dict[str, Any]:
    """A call's arguments; ``{}`` for text that is not a JSON object (a call that failed to
    parse was sent out with ``{}``, so the two agree); a 400 when they nest too deep or hold
    a lone surrogate."""
    try:
        value = embedded_json(text, path) if text.strip() else {}
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
