"""The hosted agent over Chat Completions (``POST /v1/chat/completions`` under ``--agent``).

One request is one run of the agent (:mod:`._hosted`), answered as one assistant message: the
reasoning of all its turns in the reasoning field, their text in ``content`` (blocks joined by
a blank line), and ``tool_calls`` holding only calls of the client's own tools (then
``finish_reason`` is ``"tool_calls"`` and the client answers with ``tool`` messages).

The agent's own calls, which the server ran, are not tool calls the client could run: they
travel in an extension field the official ``openai`` SDK keeps in ``model_extra``,
``agentkit_server_tool``. Streaming, a chunk's ``delta`` carries one per event: ``{"type":
"call", "id", "name", "arguments"}`` the moment the call is dispatched (the model still
generating), ``{"type": "result", "id", "name", "output", "is_error"}`` when the tool has
finished. Not streaming, the message carries ``agentkit_server_tools``: ``[{"id", "name",
"arguments", "output", "is_error"}]`` in call order.

**Continuing.** The client sends back what it holds (the one message), not the server's turns
behind it. Each answer's whole run (its assistant turns, exact, and the server's tool
messages; when the run ended at a client call, that turn's server-side results) is kept in
the server's turn file, keyed by the conversation before it and the message as the client
holds it (with and without its reasoning: clients that drop it find it too), as
:class:`~agentkit.server._chat_request.ReplayIndex` keys turns by their projection; the
conversation is in the key so that another conversation ending in the same words never gets
this run's hidden turns. The message sent back is replaced by that run,
the client's ``tool`` messages joined with the kept results in call order, so the next prompt
extends the previous one token for token.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit.events import (
    AgentEvent,
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
    ToolResultEvent,
    TurnComplete,
)
from agentkit.server._chat_request import ChatRequest, ReplayIndex, convert_chat_request
from agentkit.server._chat_stream import (
    ChatStream,
    error_body,
    finish_reason,
    new_completion_id,
    usage_json,
)
from agentkit.server._context import ApiError, ServerContext, agent_hints
from agentkit.server._exchange import cache_breaks, endpoint
from agentkit.server._hosted import (
    HostedAgent,
    HostedRun,
    RunAnswer,
    answer_run,
    resolve_tool_choice,
)
from agentkit.server._openai_chat import chat_error, parse_chat_request
from agentkit.server._response_store import ResponseStore, StoredResponse, response_store
from agentkit.server._turns import visible_key
from agentkit.sessions._store import decode_messages, encode_messages
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["EXTENSION", "hosted_chat_routes"]

EXTENSION = "agentkit_server_tool"
"""The delta field that shows a call the server ran (``agentkit_server_tools`` on a message)."""

_PREFIX = "hosted-chat:"
"""Kept runs share the stored-responses table; their keys never look like a response id."""


def conversation_key(messages: Sequence[Message]) -> str:
    """A digest of a conversation as the client holds it (each message's role and visible
    content, compared as :func:`~agentkit.server._turns.visible_key` compares turns)."""
    canonical = [[m.role, visible_key(m.content)] for m in messages]
    return hashlib.sha256(json.dumps(canonical).encode()).hexdigest()


def _key(conversation: str, blocks: Sequence[ContentBlock]) -> str:
    return _PREFIX + hashlib.sha256(f"{conversation}:{visible_key(blocks)}".encode()).hexdigest()


class _Runs:
    """The kept runs, by the conversation before them and the message the client holds
    (see the module docstring). The conversation is part of the key so that the same answer
    in another conversation (``"Done."``) never brings this run's hidden turns into it."""

    def __init__(self, store: ResponseStore) -> None:
        self._store = store

    def keep(
        self,
        conversation: str,
        answers: Sequence[Sequence[ContentBlock]],
        messages: Sequence[Message],
        pending: Sequence[ToolResultBlock],
    ) -> None:
        record = {
            "messages": encode_messages(messages),
            "pending": [r.model_dump(mode="json") for r in pending],
        }
        for key in dict.fromkeys(_key(conversation, blocks) for blocks in answers if blocks):
            response = {"object": "agentkit.hosted_run"}
            self._store.put(StoredResponse(key, None, response, [record], None))

    def find(
        self, conversation: str, blocks: Sequence[ContentBlock]
    ) -> tuple[list[Message], list[ToolResultBlock]] | None:
        stored = self._store.get(_key(conversation, blocks))
        if stored is None or not stored.input:
            return None
        record = stored.input[0]
        messages = list(decode_messages(record["messages"]))
        pending = [ToolResultBlock.model_validate(r) for r in record.get("pending", [])]
        return messages, pending


def restore_runs(transcript: Transcript, runs: _Runs, restored: Sequence[bool]) -> Transcript:
    """``transcript`` with each assistant message that is a kept run's answer replaced by
    that run; each unmatched message that the turn store did not restore either is a
    logged cache break."""
    out = Transcript()
    breaks: list[str] = []
    messages = transcript.messages
    n = 0
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role != "assistant":
            out.append(message)
            continue
        was_restored = restored[n] if n < len(restored) else False
        n += 1
        found = runs.find(conversation_key(messages[: i - 1]), message.content)
        if found is None:
            if not was_restored:
                breaks.append(f"assistant message {n - 1}: no kept run or stored turn matches")
            out.append(message)
            continue
        run, pending = found
        out.messages.extend(run)
        if not pending:
            continue
        answered: list[ToolResultBlock] = []
        if i < len(messages) and messages[i].role == "tool":
            answered = [b for b in messages[i].content if isinstance(b, ToolResultBlock)]
            i += 1
        last = next((m for m in reversed(run) if m.role == "assistant"), None)
        order = {c.id: k for k, c in enumerate(last.tool_calls)} if last is not None else {}
        results = sorted([*pending, *answered], key=lambda r: order.get(r.call_id, len(order)))
        out.add("tool", list(results))
    cache_breaks(breaks, hosted=True)
    return out


class _Answer(RunAnswer):
    def __init__(
        self,
        stream: ChatStream,
        run_ref: list[HostedRun],
        runs: _Runs,
        conversation: str,
        *,
        include_usage: bool,
    ) -> None:
        self.stream = stream
        self._conversation = conversation
        self._run_ref = run_ref
        self._runs = runs
        self._include_usage = include_usage
        self._server_blocks: set[int] = set()
        self._client_calls: dict[int, list[ToolCallStarted | ToolCallArgumentsDelta]] = {}
        """A client call's events, by block, until it is complete."""
        self.server_tools: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}

    @property
    def run(self) -> HostedRun:
        return self._run_ref[0]

    def start(self, turn: HostedRun) -> bytes:
        return self.stream.start()

    def event(self, e: AgentEvent) -> bytes:
        stream = self.stream
        if isinstance(e, TurnComplete):
            stream.next_turn()
            self._server_blocks = set()
            self._client_calls = {}
            return b""
        if isinstance(e, ReasoningDelta | ReasoningComplete | TextDelta | TextComplete):
            return stream.event(e)
        if isinstance(e, ToolCallStarted):
            if self.run.is_client_call(e.name):
                # Held until the call is complete and valid: a call the agent cannot read is
                # answered with an error result and the run goes on, so the client must
                # never have been shown it to run.
                self._client_calls[e.index] = [e]
                return b""
            self._server_blocks.add(e.index)
            return b""
        if isinstance(e, ToolCallArgumentsDelta):
            if e.index in self._client_calls:
                self._client_calls[e.index].append(e)
            return b""
        if isinstance(e, ToolCallComplete):
            held = self._client_calls.pop(e.index, [])
            if (
                e.index not in self._server_blocks
                and self.run.is_client_call(e.name)
                and e.error is None
            ):
                return b"".join(stream.event(x) for x in [*held, e])
            arguments = json.dumps(e.arguments if e.error is None else {}, ensure_ascii=False)
            entry: dict[str, Any] = {
                "id": e.id,
                "name": e.name,
                "arguments": arguments,
                "output": None,
                "is_error": False,
            }
            self.server_tools.append(entry)
            self._by_id[e.id] = entry
            return stream._chunk(
                {EXTENSION: {"type": "call", "id": e.id, "name": e.name, "arguments": arguments}}
            )
        if isinstance(e, ToolResultEvent):
            shown = self._by_id.get(e.call_id)
            if shown is None:
                return b""  # a result for a call the client runs: not shown
            output = self.run.for_model(e.result).content
            shown.update(output=output, is_error=e.is_error)
            side = {
                "type": "result",
                "id": e.call_id,
                "name": e.name,
                "output": output,
                "is_error": e.is_error,
            }
            return stream._chunk({EXTENSION: side})
        return b""

    def _finish_reason(self, run: HostedRun) -> str:
        return finish_reason(run.last_finish_reason or "stop", bool(self.stream.calls))

    def _keep(self, run: HostedRun) -> None:
        state = run.state
        messages = run.stream.transcript.messages[run.first_message :]
        pending = state.tool_results if state is not None else []
        stream = self.stream
        calls: list[ContentBlock] = [
            ToolCallBlock(id=c.id, name=c.name, arguments=c.arguments) for c in stream.calls
        ]
        text: list[ContentBlock] = [TextBlock(text=stream.content)] if stream.content else []
        reasoning: list[ContentBlock] = (
            [ReasoningBlock(text=stream.reasoning)] if stream.reasoning else []
        )
        answers = [[*reasoning, *text, *calls], [*text, *calls]]
        self._runs.keep(self._conversation, answers, messages, pending)

    def _usage(self, run: HostedRun) -> dict[str, Any]:
        usage = run.usage
        return usage_json(usage.prompt_tokens, usage.output_tokens, usage.cached_prompt_tokens)

    def finish(self, run: HostedRun) -> bytes:
        self._keep(run)  # kept before the client can continue it
        out = self.stream.finish(self._finish_reason(run))
        if self._include_usage:
            out += self.stream._data({"choices": [], "usage": self._usage(run)})
        return out + self.stream.done()

    def fail(self, kind: str, message: str) -> bytes:
        return self.stream.fail(kind, message)

    def fail_with(self, error: ApiError) -> bytes:
        """The error chunk with the error's ``code`` (``max_turns_exceeded``...), then
        ``[DONE]``."""
        body = error_body(error.kind, error.message, param=error.param, code=error.code)
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode() + self.stream.done()

    def complete(self, run: HostedRun) -> Response:
        self._keep(run)
        stream = self.stream
        message = stream.message()
        message["agentkit_server_tools"] = self.server_tools
        return JSONResponse(stream.completion(message, self._finish_reason(run), self._usage(run)))


def hosted_chat_routes(hosted: HostedAgent, context: ServerContext) -> list[Route]:
    """``POST /v1/chat/completions`` runs ``hosted``'s agent."""
    runtime = context.runtime
    index = ReplayIndex(runtime.turns)
    runs = _Runs(response_store(runtime.turns))

    def prepare(data: Any) -> tuple[ChatRequest, Transcript, str]:
        parsed = parse_chat_request(data)
        # The request's tool_choice may name an agent tool: it is checked below, not here.
        plain = parsed.model_copy(update={"tool_choice": None})
        converted = convert_chat_request(plain, turns=runtime.turns, index=index)
        sent = converted.spec.transcript
        transcript = restore_runs(sent, runs, converted.restored)
        return parsed, transcript, conversation_key(sent.messages)

    async def completions(request: Request) -> Response:
        parsed, transcript, conversation = await context.work(
            prepare, await context.read_json(request)
        )
        client_tools = hosted.client_tools(parsed.tools or [])
        names = [*hosted.tool_names, *(t.name for t in client_tools)]
        choice = resolve_tool_choice(parsed.tool_choice, names)
        completion_id = new_completion_id()
        stream = ChatStream(
            completion_id=completion_id,
            model=parsed.model,
            created=int(time.time()),
            reasoning_field=context.config.reasoning_field,
        )
        run_ref: list[HostedRun] = []

        def start() -> HostedRun:
            run = hosted.start(
                transcript,
                client_tools=client_tools,
                tool_choice=choice,
                hints=agent_hints(parsed),
                run_id=completion_id,
                max_output_tokens=parsed.max_completion_tokens or parsed.max_tokens,
                temperature=parsed.temperature,
                top_p=parsed.top_p,
                headers=request.headers,
            )
            run_ref.append(run)
            return run

        include_usage = bool((parsed.stream_options or {}).get("include_usage"))
        answer = _Answer(stream, run_ref, runs, conversation, include_usage=include_usage)
        return await answer_run(context, request, start, answer, stream=bool(parsed.stream))

    return [
        Route(
            "/v1/chat/completions",
            endpoint(context, completions, chat_error),
            methods=["POST"],
        )
    ]
