"""Anthropic Messages requests: validated, then turned into a transcript, tools and options.

What real clients send, and what becomes of it:

* ``system``, a string or a list of text blocks (Claude Code sends three). The texts, with
  empty ones left out, are joined with a blank line (``"\\n\\n"``) into the transcript's one
  system message: the API keeps blocks apart, a chat template wants one string, and a blank
  line keeps two blocks from running into one sentence. ``role: "system"`` messages inside
  ``messages`` (some clients send them) stay system messages where they are; leading ones join
  the system prompt the same way.
* The **billing header**: Claude Code begins its system prompt with a line
  ``x-anthropic-billing-header: cc_version=…; cc_entrypoint=…; cch=…;`` that changes from
  request to request. Anthropic drops it before the model sees the prompt, and so does this
  module (unless told not to): otherwise every request would miss the prefix cache from its
  first token. The line is reported in :attr:`ConvertedRequest.billing_header`.
* Consecutive messages of one role are merged, their content concatenated in order.
* A user message's ``tool_result`` blocks become one ``tool`` message (in block order),
  placed before the message's text, which follows as a user message: tool results must follow
  the calls they answer. Each result is named after the ``tool_use`` with its id earlier in
  the conversation (``"unknown"`` when there is none).
* Assistant ``thinking`` blocks become reasoning blocks in place (order kept, however
  interleaved with tool calls), ``redacted_thinking`` is dropped (its content is encrypted
  for another model), ``tool_use`` becomes a tool call.
* What a text model cannot read is replaced by a short bracketed note, so the model knows
  something was there: ``[image omitted]``; a PDF or other binary document,
  ``[document omitted: <title or media type>]``; the blocks of Anthropic's server tools
  (web search results and the like), ``[<type> block omitted]``. Plain-text documents are
  inlined. ``cache_control`` and ``citations`` are ignored.
* An assistant message at the end (a prefill) is kept, as a completed turn for now: the model
  answers after it rather than continuing it.
* **Exact replay**: each assistant message is looked up in the :class:`TurnStore`; a turn
  generated here and sent back unedited is replaced by the stored message, with the exact
  output and token ids, so the next prompt extends the previous one token for token. A
  :class:`ReplayNote` says, per assistant message, whether that happened and if not, why.

Anything malformed raises :class:`InvalidRequestError`, whose message names the field
(``messages.3.content.1.tool_use_id: field required``); the server answers it with HTTP 400.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkit.errors import AgentkitError
from agentkit.server._signing import ThinkingSigner
from agentkit.server._turns import TurnStore
from agentkit.transcript import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = [
    "BILLING_HEADER_PREFIX",
    "ConvertedRequest",
    "CountTokensRequest",
    "InvalidRequestError",
    "MessagesRequest",
    "ReplayNote",
    "ReplayReason",
    "convert_request",
    "parse_count_tokens_request",
    "parse_messages_request",
]

BILLING_HEADER_PREFIX = "x-anthropic-billing-header:"

_OMITTED_TYPES = frozenset(
    {
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
"""Anthropic block types with no counterpart here: each becomes a one-line note."""


class InvalidRequestError(AgentkitError):
    """The request is malformed; ``path`` names the offending field (``None``: the body)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    @property
    def message(self) -> str:
        return str(self.args[0])


class _RequestBase(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    metadata: Any = None
    context_management: Any = None
    output_config: Any = None


class MessagesRequest(_RequestBase):
    """A ``POST /v1/messages`` body. Unknown top-level fields are accepted and ignored."""

    max_tokens: int = Field(ge=1)
    stream: bool = False


class CountTokensRequest(_RequestBase):
    """A ``POST /v1/messages/count_tokens`` body."""


_R = TypeVar("_R", bound=_RequestBase)


def parse_messages_request(body: object) -> MessagesRequest:
    """``body`` (decoded JSON) as a :class:`MessagesRequest`, or :class:`InvalidRequestError`."""
    return _parse(MessagesRequest, body)


def parse_count_tokens_request(body: object) -> CountTokensRequest:
    """``body`` as a :class:`CountTokensRequest`, or :class:`InvalidRequestError`."""
    return _parse(CountTokensRequest, body)


def _parse(cls: type[_R], body: object) -> _R:
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in error["loc"])
        detail = "field required" if error["type"] == "missing" else error["msg"]
        detail = detail[:1].lower() + detail[1:]
        raise InvalidRequestError(f"{path}: {detail}", path=path) from None


ReplayReason = Literal[
    "restored", "prefill", "not_stored", "bad_signature", "unsigned", "not_generated_here"
]

_REPLAY_DETAILS: dict[str, str] = {
    "restored": "restored from the turn store: replayed exactly",
    "prefill": "a prefill (the last message), rendered from what the client sent",
    "not_stored": (
        "its reasoning was signed here, but no stored turn matches: the client changed "
        "another block, or the turn was evicted from the store or generated before a restart"
    ),
    "bad_signature": (
        "a thinking block's signature does not verify: the reasoning was edited, or comes "
        "from another server"
    ),
    "unsigned": "a thinking block has no signature, and no stored turn matches",
    "not_generated_here": (
        "no stored turn matches: not generated by this server, edited, or evicted"
    ),
}


@dataclass(frozen=True, slots=True)
class ReplayNote:
    """How one assistant message of the request was replayed (logged to explain cache misses)."""

    message_index: int
    """The message's index in :attr:`ConvertedRequest.transcript`."""
    request_index: int
    """The index in the request's ``messages`` of the (first) message it came from."""
    reason: ReplayReason

    @property
    def restored(self) -> bool:
        """Whether the stored message, exact output and token ids, replaced the request's."""
        return self.reason == "restored"

    @property
    def detail(self) -> str:
        return _REPLAY_DETAILS[self.reason]

    def __str__(self) -> str:
        return (
            f"assistant message {self.message_index} (request message {self.request_index}): "
            f"{self.detail}"
        )


@dataclass(slots=True)
class ConvertedRequest:
    """A request as the runtime takes it."""

    transcript: Transcript
    tools: list[dict[str, Any]]
    """The client's tools in OpenAI's function shape, as chat templates expect them."""
    tool_choice: str
    """``"auto"``, ``"required"``, ``"none"`` or a tool's name (see ``agentkit._tool_choice``)."""
    thinking: bool
    thinking_budget: int | None
    max_tokens: int | None
    """``None`` for a token count."""
    temperature: float | None
    top_p: float | None
    top_k: int | None
    stop: list[str]
    billing_header: str | None
    """Claude Code's billing-header line, when the system prompt began with one (removed
    from the prompt unless ``strip_billing_header=False``)."""
    prefill: bool
    """The conversation ends with an assistant message."""
    replayed: list[ReplayNote] = field(default_factory=list)
    dropped_tools: list[str] = field(default_factory=list)
    """One note for each server tool (web search, bash…) left out: only client tools run."""
    session: str | None = None
    """``metadata.user_id`` (Claude Code puts its session id in it): the conversation's key
    for session affinity (``TurnSpec.session``)."""


def convert_request(
    req: MessagesRequest | CountTokensRequest,
    *,
    turns: TurnStore,
    signer: ThinkingSigner,
    strip_billing_header: bool = True,
) -> ConvertedRequest:
    """Turn ``req`` into a transcript, tools and options (see the module docstring).

    Raises :class:`InvalidRequestError` for anything malformed, naming the field.
    """
    tools, dropped = _convert_tools(req.tools)
    tool_choice = _convert_tool_choice(req.tool_choice, tools, dropped)
    thinking, budget = _convert_thinking(req.thinking)
    runs = _merged_runs(req.messages)

    system_texts = _system_texts(req.system)
    if runs and runs[0].role == "system":
        system_texts += [_text_of(b) for b in runs.pop(0).blocks]
    billing_header = None
    if system_texts and system_texts[0].startswith(BILLING_HEADER_PREFIX):
        first, newline, rest = system_texts[0].partition("\n")
        billing_header = first
        if strip_billing_header:
            system_texts[0] = rest if newline and rest.strip() else ""
    transcript = Transcript()
    system = _join(system_texts)
    if system:
        transcript.add("system", system)

    notes: list[ReplayNote] = []
    names: dict[str, str] = {}
    for position, run in enumerate(runs):
        if run.role == "system":
            transcript.add("system", _join(_text_of(b) for b in run.blocks))
        elif run.role == "user":
            _add_user(transcript, run.blocks, names)
        else:
            last = position == len(runs) - 1
            note = _add_assistant(transcript, run, turns, signer, prefill=last)
            notes.append(note)
            names.update((b.id, b.name) for b in transcript.messages[-1].tool_calls)
    return ConvertedRequest(
        transcript=transcript,
        tools=tools,
        tool_choice=tool_choice,
        thinking=thinking,
        thinking_budget=budget,
        max_tokens=req.max_tokens if isinstance(req, MessagesRequest) else None,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        stop=list(req.stop_sequences or []),
        billing_header=billing_header,
        prefill=bool(runs) and runs[-1].role == "assistant",
        replayed=notes,
        dropped_tools=dropped,
        session=_user_id(req.metadata),
    )


def _user_id(metadata: object) -> str | None:
    """``metadata.user_id`` when it is a non-empty string (anything else is ignored: the
    field is the client's and only keys session affinity)."""
    if isinstance(metadata, Mapping):
        user = metadata.get("user_id")
        if isinstance(user, str) and user:
            return user
    return None


# -- messages --------------------------------------------------------------------------------

_Signature = Literal["ours", "bad", "none"]


@dataclass(slots=True)
class _Run:
    """Consecutive request messages of one role, their blocks converted and concatenated.
    A user run holds text and tool-result blocks; tool results carry no name yet."""

    role: str
    index: int
    blocks: list[ContentBlock]
    signatures: list[tuple[str, str | None]] = field(default_factory=list)
    """(text, signature) of each thinking block, for the replay note."""


def _merged_runs(messages: list[dict[str, Any]]) -> list[_Run]:
    runs: list[_Run] = []
    for i, message in enumerate(messages):
        path = f"messages.{i}"
        if not isinstance(message, Mapping):
            _fail(path)
        role = _field(message, "role", str, path)
        if role not in ("user", "assistant", "system"):
            _fail(
                f"{path}.role", f"unknown role {role!r} (expected 'user', 'assistant' or 'system')"
            )
        if "content" not in message:
            _fail(f"{path}.content", "field required")
        run = _Run(role, i, [])
        content = message["content"]
        if isinstance(content, str):
            run.blocks.append(TextBlock(text=content))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                _convert_block(block, f"{path}.content.{j}", run)
        else:
            _fail(f"{path}.content", "expected a string or a list of content blocks")
        if runs and runs[-1].role == role:
            runs[-1].blocks += run.blocks
            runs[-1].signatures += run.signatures
        else:
            runs.append(run)
    return runs


def _convert_block(block: object, path: str, run: _Run) -> None:
    if not isinstance(block, Mapping):
        _fail(path, "expected a content block object")
    kind = _field(block, "type", str, path)
    role = run.role
    if kind == "text":
        run.blocks.append(TextBlock(text=_field(block, "text", str, path)))
    elif kind in ("image", "document") or kind in _OMITTED_TYPES:
        run.blocks.append(TextBlock(text=_placeholder(block, kind)))
    elif kind == "tool_result":
        if role != "user":
            _fail(f"{path}.type", f"tool_result blocks belong in user messages, not {role}")
        run.blocks.append(_tool_result(block, path))
    elif kind == "tool_use":
        if role != "assistant":
            _fail(f"{path}.type", f"tool_use blocks belong in assistant messages, not {role}")
        arguments = _field(block, "input", dict, path)
        run.blocks.append(
            ToolCallBlock(
                id=_field(block, "id", str, path),
                name=_field(block, "name", str, path),
                arguments=arguments,
            )
        )
    elif kind in ("thinking", "redacted_thinking"):
        if role != "assistant":
            _fail(f"{path}.type", f"{kind} blocks belong in assistant messages, not {role}")
        if kind == "thinking":
            text = _field(block, "thinking", str, path)
            signature = _optional(block, "signature", str, path)
            run.blocks.append(ReasoningBlock(text=text, signature=signature or None))
            run.signatures.append((text, signature))
    else:
        _fail(f"{path}.type", f"unknown content block type {kind!r}")


def _tool_result(block: Mapping[str, Any], path: str) -> ToolResultBlock:
    call_id = _field(block, "tool_use_id", str, path)
    is_error = _optional(block, "is_error", bool, path) or False
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts: list[str] = []
        for k, item in enumerate(content):
            item_path = f"{path}.content.{k}"
            if not isinstance(item, Mapping):
                _fail(item_path, "expected a content block object")
            kind = _field(item, "type", str, item_path)
            if kind == "text":
                parts.append(_field(item, "text", str, item_path))
            elif kind in ("image", "document") or kind in _OMITTED_TYPES:
                parts.append(_placeholder(item, kind))
            else:
                _fail(f"{item_path}.type", f"unexpected block type {kind!r} in a tool result")
        text = _join(parts)
    else:
        _fail(f"{path}.content", "expected a string or a list of content blocks")
    return ToolResultBlock(call_id=call_id, name="unknown", content=text, is_error=is_error)


def _placeholder(block: Mapping[str, Any], kind: str) -> str:
    if kind == "image":
        return "[image omitted]"
    if kind != "document":
        return f"[{kind} block omitted]"
    source = block.get("source")
    title = block.get("title")
    heading = f"{title}\n\n" if isinstance(title, str) and title else ""
    if isinstance(source, Mapping):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return heading + str(source["data"])
        if source.get("type") == "content" and isinstance(source.get("content"), list):
            texts = [
                str(item["text"])
                for item in source["content"]
                if isinstance(item, Mapping) and isinstance(item.get("text"), str)
            ]
            return heading + _join(texts)
    what = title if isinstance(title, str) and title else None
    if what is None and isinstance(source, Mapping):
        what = source.get("media_type") or source.get("type")
    return f"[document omitted: {what}]" if what else "[document omitted]"


def _add_user(transcript: Transcript, blocks: list[ContentBlock], names: dict[str, str]) -> None:
    results = [
        block.model_copy(update={"name": names.get(block.call_id, "unknown")})
        for block in blocks
        if isinstance(block, ToolResultBlock)
    ]
    rest = [block for block in blocks if not isinstance(block, ToolResultBlock)]
    if results:
        transcript.add("tool", results)
    if rest or not results:
        transcript.add("user", rest)


def _add_assistant(
    transcript: Transcript, run: _Run, turns: TurnStore, signer: ThinkingSigner, *, prefill: bool
) -> ReplayNote:
    stored = turns.restore(run.blocks) if run.blocks else None
    index = len(transcript.messages)
    if stored is not None:
        transcript.append(stored)
        return ReplayNote(index, run.index, "restored")
    transcript.add("assistant", run.blocks)
    return ReplayNote(index, run.index, _why_not_restored(run, signer, prefill=prefill))


def _why_not_restored(run: _Run, signer: ThinkingSigner, *, prefill: bool) -> ReplayReason:
    if prefill:
        return "prefill"
    states: set[_Signature] = set()
    for text, signature in run.signatures:
        if not signature:
            states.add("none")
        else:
            states.add("ours" if signer.verify(text, signature) else "bad")
    if "bad" in states:
        return "bad_signature"
    if "none" in states:
        return "unsigned"
    if "ours" in states:
        return "not_stored"
    return "not_generated_here"


# -- system, tools, options ------------------------------------------------------------------


def _system_texts(system: str | list[dict[str, Any]] | None) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return [system]
    texts: list[str] = []
    for i, block in enumerate(system):
        path = f"system.{i}"
        kind = _field(block, "type", str, path)
        if kind != "text":
            _fail(f"{path}.type", f"expected 'text', not {kind!r}")
        texts.append(_field(block, "text", str, path))
    return texts


def _text_of(block: ContentBlock) -> str:
    return block.text if isinstance(block, TextBlock | ReasoningBlock) else ""


def _join(texts: Iterable[str]) -> str:
    return "\n\n".join(text for text in texts if text)


def _convert_tools(
    tools: list[dict[str, Any]] | None,
) -> tuple[list[dict[str, Any]], list[str]]:
    specs: list[dict[str, Any]] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools or []):
        path = f"tools.{i}"
        kind = _optional(tool, "type", str, path)
        if kind not in (None, "custom"):
            name = tool.get("name")
            label = f"{name} ({kind})" if isinstance(name, str) else kind
            dropped.append(f"{label}: a server tool, which agentkit serve does not provide")
            continue
        name = _field(tool, "name", str, path)
        if not name:
            _fail(f"{path}.name", "must not be empty")
        if name in seen:
            _fail(f"{path}.name", f"duplicate tool name {name!r}")
        seen.add(name)
        function: dict[str, Any] = {"name": name}
        description = _optional(tool, "description", str, path)
        if description is not None:
            function["description"] = description
        function["parameters"] = _field(tool, "input_schema", dict, path)
        specs.append({"type": "function", "function": function})
    return specs, dropped


def _convert_tool_choice(
    choice: dict[str, Any] | None, tools: list[dict[str, Any]], dropped: list[str]
) -> str:
    if choice is None:
        return "auto"
    kind = _field(choice, "type", str, "tool_choice")
    if kind in ("auto", "none"):
        return kind
    names = {spec["function"]["name"] for spec in tools}
    if kind == "any":
        if not names:
            _fail("tool_choice.type", "'any' needs at least one (client) tool")
        return "required"
    if kind == "tool":
        name = _field(choice, "name", str, "tool_choice")
        if name not in names:
            server = any(note.startswith(f"{name} (") for note in dropped)
            why = "is a server tool, which is not provided" if server else "is not in tools"
            _fail("tool_choice.name", f"{name!r} {why}")
        return name
    raise _error("tool_choice.type", f"unknown tool_choice type {kind!r}")


def _convert_thinking(thinking: dict[str, Any] | None) -> tuple[bool, int | None]:
    if thinking is None:
        return False, None
    kind = _field(thinking, "type", str, "thinking")
    if kind == "disabled":
        return False, None
    if kind == "adaptive":
        return True, None
    if kind == "enabled":
        budget = _optional(thinking, "budget_tokens", int, "thinking")
        if budget is not None and budget < 1:
            _fail("thinking.budget_tokens", "must be at least 1")
        return True, budget
    raise _error(
        "thinking.type",
        f"unknown thinking type {kind!r} (expected 'enabled', 'adaptive' or 'disabled')",
    )


# -- validation helpers ----------------------------------------------------------------------

_T = TypeVar("_T")

_TYPE_NAMES = {str: "a string", dict: "an object", bool: "a boolean", int: "an integer"}


def _error(path: str, detail: str) -> InvalidRequestError:
    return InvalidRequestError(f"{path}: {detail}", path=path)


def _fail(path: str, detail: str) -> NoReturn:
    raise _error(path, detail)


def _field(obj: Mapping[str, Any], key: str, kind: type[_T], path: str) -> _T:
    if key not in obj:
        _fail(f"{path}.{key}", "field required")
    return _typed(obj[key], kind, f"{path}.{key}")


def _optional(obj: Mapping[str, Any], key: str, kind: type[_T], path: str) -> _T | None:
    value = obj.get(key)
    return None if value is None else _typed(value, kind, f"{path}.{key}")


def _typed(value: object, kind: type[_T], path: str) -> _T:
    # bool is an int to Python, never to JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _fail(path, f"expected {_TYPE_NAMES.get(kind, kind.__name__)}")
    return value
