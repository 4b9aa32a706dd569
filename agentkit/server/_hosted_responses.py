"""The hosted agent over the Responses API (``POST /v1/responses`` under ``--agent``).

One request is one run of the agent (:mod:`._hosted`). Its output items, in the order the
model produced them across its turns:

* ``reasoning`` and ``message`` items, streamed as for a bare model (:mod:`._responses_stream`);
* an **``mcp_call``** item for each call of one of the agent's own tools (``server_label``
  ``"agentkit"``, ``id`` the call's id): added with ``status: "in_progress"`` the moment the
  model starts the call, its arguments streamed (``response.mcp_call_arguments.delta`` /
  ``.done``), ``response.mcp_call.in_progress`` when it is dispatched (its call complete, the
  model still generating), then ``response.mcp_call.completed`` (``output``: the result as the
  model reads it) or ``response.mcp_call.failed`` (``error``: ``mcp_tool_execution_error``
  with the text, ``output`` the same text) and ``response.output_item.done``. The ``openai``
  SDK parses these as ``McpCall`` items: done by the server, nothing for the client to run;
* a ``function_call`` item for each call of a tool the client declared: the run ended after
  that turn, and the client answers with a ``function_call_output`` item.

``usage`` adds up the run's model turns (``input_tokens``: each turn's prompt).

**Continuing.** With ``previous_response_id`` the stored conversation holds the output
items, ``mcp_call`` ones included. A stateless client sends the items back. Either way each
``mcp_call`` item becomes its call in the assistant turn and its result in the tool message
that follows the turn's calls (with the client's own outputs of that turn, in call order),
and each generated turn is put back exactly (the turn store), so the next prompt extends the
previous one token for token. A turn ends at the first item after its calls that is not a
call: a profile whose model reasons *between* the calls of one turn cannot be told apart
from two turns there, and that turn is rendered canonically (a logged cache break).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
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
from agentkit.server._context import ApiError, ServerContext, agent_hints
from agentkit.server._exchange import cache_breaks, endpoint
from agentkit.server._hosted import (
    SERVER_LABEL,
    HostedAgent,
    HostedRun,
    RunAnswer,
    answer_run,
    resolve_tool_choice,
)
from agentkit.server._response_store import History
from agentkit.server._responses_request import (
    InputConverter,
    ResponsesRequest,
    ToolRef,
    Tools,
    input_items,
    parse_responses_request,
    read_body,
)
from agentkit.server._responses_stream import ResponseStream, _Item, new_id, response_envelope
from agentkit.server._sealing import Sealer
from agentkit.server._stored_responses import StoredResponses, responses_error

__all__ = ["hosted_responses_routes", "unfold_server_calls"]

_log = get_logger("agentkit.server")

_CALLS = frozenset({"function_call", "custom_tool_call", "mcp_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def unfold_server_calls(items: Sequence[Any]) -> list[Any]:
    """``items`` with each ``mcp_call`` (a call the server ran, its result inside) as a
    ``function_call`` in place and a ``function_call_output`` after the turn's calls, merged
    with the client's outputs of that turn in call order (see the module docstring)."""
    out: list[Any] = []
    pending: list[dict[str, Any]] = []
    order: list[str] = []

    def flush(outputs: list[Any]) -> None:
        rank = {call_id: n for n, call_id in enumerate(order)}
        merged = [*pending, *outputs]
        merged.sort(  # stable: an output of no call of this turn keeps its place at the end
            key=lambda o: rank.get(
                str(o.get("call_id")) if isinstance(o, Mapping) else "", len(rank)
            )
        )
        out.extend(merged)
        pending.clear()
        order.clear()

    outputs: list[Any] = []
    for item in items:
        kind = item.get("type", "message") if isinstance(item, Mapping) else None
        if outputs and kind not in _OUTPUTS:
            flush(outputs)
            outputs = []
        if kind in _OUTPUTS:
            outputs.append(item)
            continue
        if pending and kind not in _CALLS:
            flush([])
        if kind == "mcp_call":
            assert isinstance(item, Mapping)
            call_id = item.get("id")
            error = item.get("error")
            text = item.get("output")
            if not isinstance(text, str):
                text = error.get("content") if isinstance(error, Mapping) else None
                text = text if isinstance(text, str) else json.dumps(error)
            out.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": item.get("name"),
                    "arguments": item.get("arguments") or "",
                }
            )
            pending.append({"type": "function_call_output", "call_id": call_id, "output": text})
            order.append(str(call_id))
            continue
        if kind in _CALLS:
            assert isinstance(item, Mapping)
            order.append(str(item.get("call_id")))
        elif kind is not None:
            order.clear()
        out.append(item)
    if outputs or pending:
        flush(outputs)
    return out


class _RunStream(ResponseStream):
    """:class:`ResponseStream` over a run of several model turns: each turn's blocks are
    items of their own, and the agent's own calls are ``mcp_call`` items."""

    def __init__(
        self,
        is_client: Callable[[str], bool],
        envelope: dict[str, Any],
        tools: Mapping[str, ToolRef],
        count_tokens: Callable[[str], list[int] | None],
    ) -> None:
        super().__init__(envelope, tools, summary=False, seal=None, count_tokens=count_tokens)
        self._is_client = is_client
        self._server_blocks: dict[int, _Item] = {}
        self._by_call: dict[str, _Item] = {}
        self._arguments: dict[str, list[str]] = {}
        self._client_calls: dict[int, list[ToolCallStarted | ToolCallArgumentsDelta]] = {}
        """A client call's events, by block, until it is complete."""

    def run_event(self, e: AgentEvent, for_model: Callable[[ToolResultEvent], str]) -> bytes:
        if isinstance(e, TurnComplete):
            self.next_turn()
            self._server_blocks = {}
            self._client_calls = {}
            return b""
        if isinstance(e, ToolResultEvent):
            return self._result(e, for_model(e))
        if isinstance(e, ToolCallStarted):
            if self._is_client(e.name):
                # Held until the call is complete and valid: a call the agent cannot read
                # (malformed, off its schema) is answered with an error result and the run
                # goes on, so the client must never have been shown it to run.
                self._client_calls[e.index] = [e]
                return b""
            return self._mcp_item(e.index, e.id, e.name)
        if isinstance(e, ToolCallArgumentsDelta):
            if e.index in self._client_calls:
                self._client_calls[e.index].append(e)
                return b""
            item = self._server_blocks.get(e.index)
            if item is None:
                return self.event(e)
            if not e.delta:
                return b""
            self._arguments[e.id].append(e.delta)
            return self._emit(
                "response.mcp_call_arguments.delta",
                item_id=item.json["id"],
                output_index=item.index,
                delta=e.delta,
            )
        if isinstance(e, ToolCallComplete):
            held = self._client_calls.pop(e.index, [])
            if e.index not in self._server_blocks and (self._is_client(e.name) and e.error is None):
                return b"".join(self.event(x) for x in [*held, e])
            out = b"" if e.index in self._server_blocks else self._mcp_item(e.index, e.id, e.name)
            item = self._server_blocks[e.index]
            streamed = "".join(self._arguments[e.id])
            arguments = e.arguments if e.error is None else {}
            text = (
                streamed
                if _same_json(streamed, arguments)
                else json.dumps(arguments, ensure_ascii=False)
            )
            item.json["arguments"] = text
            common = {"item_id": item.json["id"], "output_index": item.index}
            out += self._emit("response.mcp_call_arguments.done", **common, arguments=text)
            return out + self._emit("response.mcp_call.in_progress", **common)
        if isinstance(e, ReasoningDelta | ReasoningComplete | TextDelta | TextComplete):
            return self.event(e)
        return b""  # run events with nothing to show (context compaction, the run's end)

    def _mcp_item(self, index: int, call_id: str, name: str) -> bytes:
        item = _Item("function_call", closed=True)  # closed: this stream manages it
        item.index = len(self._items)
        self._items.append(item)
        item.json = {
            "id": call_id,
            "type": "mcp_call",
            "server_label": SERVER_LABEL,
            "name": name,
            "arguments": "",
            "status": "in_progress",
            "output": None,
            "error": None,
        }
        self._server_blocks[index] = item
        self._by_call[call_id] = item
        self._arguments[call_id] = []
        return self._item_event("response.output_item.added", item)

    def _result(self, e: ToolResultEvent, text: str) -> bytes:
        item = self._by_call.get(e.call_id)
        if item is None:
            return b""  # a result for a call the client runs: not shown
        item.json["output"] = text
        if e.is_error:
            item.json.update(
                status="failed", error={"type": "mcp_tool_execution_error", "content": text}
            )
        else:
            item.json["status"] = "completed"
        common = {"item_id": item.json["id"], "output_index": item.index}
        kind = "response.mcp_call.failed" if e.is_error else "response.mcp_call.completed"
        return self._emit(kind, **common) + self._item_event("response.output_item.done", item)

    def finish_run(self, run: HostedRun) -> bytes:
        out = self._close_open()
        usage = run.usage
        limited = run.cut is not None or (not run.paused and run.last_finish_reason == "length")
        self.response.update(
            status="incomplete" if limited else "completed",
            output=[item.json for item in self._items],
            completed_at=int(time.time()),
            incomplete_details={"reason": "max_output_tokens"} if limited else None,
            usage={
                "input_tokens": usage.prompt_tokens,
                "input_tokens_details": {
                    "cached_tokens": usage.cached_prompt_tokens,
                    "cache_write_tokens": 0,
                },
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.prompt_tokens + usage.output_tokens,
            },
        )
        kind = "response.incomplete" if limited else "response.completed"
        return out + self._emit(kind, response=self.response)

    def fail_with(self, error: ApiError) -> bytes:
        """``response.failed`` with the error's ``code`` (``max_turns_exceeded``...; a
        failure without one is a ``server_error``)."""
        self.response.update(
            status="failed",
            output=[item.json for item in self._items],
            error={"code": error.code or "server_error", "message": error.message},
        )
        return self._emit("response.failed", response=self.response)


def _same_json(text: str, value: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(text) == value) if text else not value
    except ValueError:
        return False


class _Answer(RunAnswer):
    def __init__(
        self, stream: _RunStream, run_ref: list[HostedRun], keep: Callable[[HostedRun], None]
    ):
        self.stream = stream
        self._run_ref = run_ref
        self._keep = keep

    def _for_model(self, e: ToolResultEvent) -> str:
        return self._run_ref[0].for_model(e.result).content

    def start(self, turn: HostedRun) -> bytes:
        return self.stream.start()

    def event(self, event: AgentEvent) -> bytes:
        return self.stream.run_event(event, self._for_model)

    def finish(self, run: HostedRun) -> bytes:
        last = self.stream.finish_run(run)
        self._keep(run)  # stored before the client can continue it
        return last

    def fail(self, kind: str, message: str) -> bytes:
        return self.stream.fail(message)

    def fail_with(self, error: ApiError) -> bytes:
        return self.stream.fail_with(error)

    def complete(self, run: HostedRun) -> Response:
        self.stream.finish_run(run)
        self._keep(run)
        return JSONResponse(self.stream.response)


def hosted_responses_routes(hosted: HostedAgent, context: ServerContext) -> list[Route]:
    """``POST /v1/responses`` runs ``hosted``'s agent; ``GET`` and ``DELETE
    /v1/responses/{id}`` serve the stored responses."""
    adapter = _Adapter(hosted, context)
    return [
        Route(
            "/v1/responses", endpoint(context, adapter.create, responses_error), methods=["POST"]
        ),
        *adapter.stored.routes(),
    ]


class _Adapter:
    def __init__(self, hosted: HostedAgent, context: ServerContext) -> None:
        self.hosted = hosted
        self.context = context
        self.stored = StoredResponses(context)
        self.sealer = Sealer()
        self.warned: set[str] = set()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            _log.warning(message)

    async def create(self, request: Request) -> Response:
        body = await read_body(self.context, request)
        parsed, tools, transcript = await self.context.work(self._prepare, body)
        hosted = self.hosted
        client_tools = hosted.client_tools(tools.specs)
        names = [*hosted.tool_names, *(t.name for t in client_tools)]
        choice = resolve_tool_choice(parsed.tool_choice, names)
        response_id = new_id("resp_")
        envelope = _envelope(parsed, response_id, tools)
        envelope.update(hosted.sampling(parsed.temperature, parsed.top_p))  # what applies
        run_ref: list[HostedRun] = []
        stream = _RunStream(
            lambda name: bool(run_ref) and run_ref[0].is_client_call(name),
            envelope,
            tools.by_model_name,
            self.context.runtime.encode,
        )

        def prepare() -> HostedRun:
            run = hosted.start(
                transcript,
                client_tools=client_tools,
                tool_choice=choice,
                hints=agent_hints(parsed),
                run_id=response_id,
                max_output_tokens=parsed.max_output_tokens,
                temperature=parsed.temperature,
                top_p=parsed.top_p,
                headers=request.headers,
            )
            run_ref.append(run)
            return run

        answer = _Answer(stream, run_ref, lambda run: self._keep(parsed, stream.response, run))
        return await answer_run(self.context, request, prepare, answer, stream=parsed.stream)

    def _prepare(self, body: Any) -> tuple[ResponsesRequest, Tools, Any]:
        parsed = parse_responses_request(body)
        tools = Tools.convert(parsed.tools, self._warn_once)
        history = self.stored.history(parsed.previous_response_id)
        if history is None:
            unfolded = parsed.model_copy(update={"input": unfold_server_calls(input_items(parsed))})
        else:
            items = unfold_server_calls([*history.items, *input_items(parsed)])
            history = History(items=items, turns=history.turns)
            unfolded = parsed.model_copy(update={"input": []})
        converter = InputConverter(self.context.runtime, self.sealer, "reject", self._warn_once)
        transcript = converter.convert(unfolded, history)
        cache_breaks(converter.cache_breaks, hosted=True)
        return parsed, tools, transcript

    def _keep(self, req: ResponsesRequest, response: dict[str, Any], run: HostedRun) -> None:
        generated = run.generated()
        self.stored.keep(req, response, generated[-1] if generated else None)


def _envelope(req: ResponsesRequest, response_id: str, tools: Tools) -> dict[str, Any]:
    """The response object's fixed fields: the request's, except that the agent's own
    settings decide its reasoning and the answer's format (text)."""
    envelope = response_envelope(req, response_id, tools)
    envelope["reasoning"] = {"effort": None, "summary": None}
    envelope["text"] = {"format": {"type": "text"}}
    return copy.deepcopy(envelope)
