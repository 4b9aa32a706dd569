"""Chat Completions requests (:mod:`._openai_chat`) become a transcript as follows:

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from agentkit.server._chat_stream import ChatStream, replay
from agentkit.server._context import ApiError, agent_hints
from agentkit.server._ids import new_call_id
from agentkit.server._intake import embedded_json
from agentkit.server._runtime import TurnSpec
from agentkit.server._turns import TurnStore
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["ChatRequest", "ConvertedChat", "ReplayIndex", "convert_chat_request", "projection"]


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
    prompt_cache_key: str | None = None
    """The client's conversation key: session affinity (``TurnSpec.session``), no more."""


@dataclass(slots=True)
class ConvertedChat:
    """A request as the runtime takes it."""

    spec: TurnSpec
    restored: list[bool] = field(default_factory=list)
    """Per assistant run, whether the stored turn replaced it."""


class ReplayIndex:
    """Turns served here, found by their OpenAI projection (see the module docstring).

    The index keeps nothing itself: each projection is an alias in the :class:`TurnStore`
    (:meth:`TurnStore.alias`), so it lives, is bounded and persists (a file store survives a
    restart) with the turns it leads to.

    Args:
        turns: the store the turns are remembered in (the runtime's).
    """

    def __init__(self, turns: TurnStore) -> None:
        self._turns = turns

    def remember(self, message: Message) -> None:
        """Make ``message`` (remembered in the store) findable by its projection."""
        self._turns.alias(projection(message), message)

    def restore(self, turns: TurnStore, blocks: Sequence[ContentBlock]) -> Message | None:
        """The stored turn whose blocks or projection ``blocks`` are, or ``None``."""
        return turns.restore(blocks)


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
                arguments = (
                    embedded_json(raw, f"{where}.function.arguments")
                    if isinstance(raw, str) and raw.strip()
                    else {}
                )
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
        thinking=False if getattr(req, "reasoning_effort", None) == "none" else None,
        hints=agent_hints(req),
        session=req.prompt_cache_key or None,
        call_ids=new_call_id,
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
    replay(stream, message)
    blocks: list[ContentBlock] = []
    if stream.reasoning:
        blocks.append(ReasoningBlock(text=stream.reasoning))
    if stream.content:
        blocks.append(TextBlock(text=stream.content))
    blocks += [ToolCallBlock(id=c.id, name=c.name, arguments=c.arguments) for c in stream.calls]
    return blocks
