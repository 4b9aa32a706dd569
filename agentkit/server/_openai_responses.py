"""The OpenAI Responses API (``POST /v1/responses``), as Codex and the ``openai`` SDK speak it.

Stateful or stateless, as the client chooses. With ``store`` (agentkit's default is
``true``, as OpenAI's is: clients such as the ``openai`` SDK expect ``previous_response_id``
to work without asking) a finished response is kept (:mod:`._response_store`: its input
items, the response object and the exact generated turn) in the server's turn store, so in
the turn file by default and across restarts. ``previous_response_id`` continues a stored
response: the conversation is its input and output items (and those of the responses before
it) followed by the new input, its generated turns replayed exactly, so the new prompt
extends the previous prompt and output token for token. ``instructions`` are not carried
over (OpenAI's rule): each request's own stand at the start of the conversation. An unknown,
deleted or evicted id is a 404 naming ``previous_response_id``. ``GET
/v1/responses/{id}`` returns the response object as it was returned, ``GET
/v1/responses/{id}/input_items`` its request's input items, ``DELETE /v1/responses/{id}``
deletes it (OpenAI's ``response.deleted`` object); unknown ids are a 404. ``store: false``
(Codex sends it, with the whole conversation each time) keeps nothing. ``item_reference``
is refused. This module holds the routes; the request side (bodies, tools, input items) is
:mod:`._responses_request`, the response side (stream events and the response object)
:mod:`._responses_stream`.

**Exact replay across stateless requests.** With ``include: ["reasoning.encrypted_content"]``
each reasoning item's ``encrypted_content`` is sealed (:mod:`agentkit.server._sealing`): its
reasoning text, and in a turn's first reasoning item the whole generated message (every
block's raw output and the turn's token ids). A client that sends the item back with
``content: null`` gets its reasoning back, and when the turn's visible items match the sealed
message, that message replaces them: the next prompt extends the previous prompt and output
token for token, across restarts. Otherwise the server's turn store is tried, then the turn
is rendered from the items (a logged cache break). Encrypted content that is not this
server's (tampered, sealed under another key, or for another served model or profile) is
a 400 saying so, or, with ``unverifiable_reasoning="ignore"``, is ignored (the summary text
stands in).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.errors import (
    ConfigurationError,
)
from agentkit.events import ParseEvent, ToolCallComplete
from agentkit.server._context import ApiError, ServerContext, agent_hints
from agentkit.server._exchange import TurnAnswer, answer_turn, cache_breaks, endpoint
from agentkit.server._ids import new_call_id
from agentkit.server._responses_request import (
    SEAL_PURPOSE,
    InputConverter,
    ResponsesRequest,
    Tools,
    UnverifiableReasoning,
    parse_responses_request,
    read_body,
    tool_choice,
)
from agentkit.server._responses_stream import ResponseStream, new_id, response_envelope
from agentkit.server._runtime import ModelTurn, ServerRuntime, TurnSpec
from agentkit.server._sealing import Sealer
from agentkit.server._stored_responses import StoredResponses, responses_error
from agentkit.transcript import Message

__all__ = ["ResponsesRequest", "responses_routes", "responses_routes_factory"]

_log = get_logger("agentkit.server")


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
            *adapter.stored.routes(),
        ]

    return factory


# -- the endpoint ----------------------------------------------------------------------------


class _ResponsesAnswer(TurnAnswer):
    """A Responses turn: its stream events, or the response object. With
    ``parallel_tool_calls: false`` the response ends at the first complete call."""

    def __init__(
        self, stream: ResponseStream, *, single_call: bool, keep: Callable[[ModelTurn], None]
    ) -> None:
        self.stream = stream
        self.single_call = single_call
        self.keep = keep

    def start(self, turn: ModelTurn) -> bytes:
        return self.stream.start()

    def event(self, event: ParseEvent) -> bytes:
        return self.stream.event(event)

    def ends_turn(self, event: ParseEvent) -> bool:
        return self.single_call and isinstance(event, ToolCallComplete)

    def finish(self, turn: ModelTurn) -> bytes:
        last = self.stream.finish(turn)
        self.keep(turn)  # stored before the client can continue it
        return last

    def fail(self, kind: str, message: str) -> bytes:
        return self.stream.fail(message)

    def collect(self, event: ParseEvent) -> None:
        self.stream.event(event)

    def complete(self, turn: ModelTurn) -> Response:
        self.stream.finish(turn)
        self.keep(turn)
        return JSONResponse(self.stream.response)


class _Adapter:
    def __init__(
        self, context: ServerContext, sealer: Sealer, unverifiable: UnverifiableReasoning
    ) -> None:
        self.context = context
        self.runtime: ServerRuntime = context.runtime
        # Sealed turns carry token ids, meaningful only to the model that produced them: the
        # keys are bound to the served model and profile, so another model's are foreign.
        served = [context.config.model_name, self.runtime.profile.name]
        self.sealer = sealer.bound(json.dumps(served))
        self.unverifiable = unverifiable
        self.warned: set[str] = set()
        self.stored = StoredResponses(context)

    def endpoint(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        return endpoint(self.context, handler, responses_error)

    async def websocket_refusal(self, request: Request) -> Response:
        """Codex tries a WebSocket on ``GET /v1/responses`` first; 426 makes it use HTTP."""
        message = "this server has no WebSocket mode: POST /v1/responses (server-sent events)"
        return responses_error(ApiError("invalid_request_error", message, status=426))

    async def create(self, request: Request) -> Response:
        try:
            self.sealer.load()
        except ConfigurationError as error:
            raise ApiError("api_error", f"the sealing key is unavailable: {error}") from error
        body = await read_body(self.context, request)
        # Parsing, converting and (below) rendering run on a worker thread, off the loop.
        parsed, tools, spec, response_id = await self.context.work(self._prepare, body)
        reasoning = parsed.reasoning or {}
        include = set(parsed.include or [])
        summary = reasoning.get("summary") or reasoning.get("generate_summary")
        envelope = response_envelope(parsed, response_id, tools)
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
        answer = _ResponsesAnswer(
            stream,
            single_call=parsed.parallel_tool_calls is False,
            keep=lambda turn: self.stored.keep(parsed, stream.response, turn.message),
        )
        return await answer_turn(
            self.context, request, spec, answer, turn_id=response_id, stream=bool(parsed.stream)
        )

    def _prepare(self, body: Any) -> tuple[ResponsesRequest, Tools, TurnSpec, str]:
        """The request, its tools, the turn it asks for and the response's id (a worker's
        job: sealed reasoning is opened and the input converted here)."""
        parsed = parse_responses_request(body)
        text_format = (parsed.text or {}).get("format")
        if isinstance(text_format, Mapping) and text_format.get("type") not in (None, "text"):
            self._warn_once("format", "text.format is not enforced: the model answers in text")
        tools = Tools.convert(parsed.tools, self._warn_once)
        choice = tool_choice(parsed.tool_choice, tools, self._warn_once)
        converter = InputConverter(self.runtime, self.sealer, self.unverifiable, self._warn_once)
        transcript = converter.convert(parsed, self.stored.history(parsed.previous_response_id))
        cache_breaks(converter.cache_breaks)
        reasoning = parsed.reasoning or {}
        response_id = new_id("resp_")
        spec = TurnSpec(
            transcript=transcript,
            tools=tools.specs,
            tool_choice=choice,
            max_tokens=parsed.max_output_tokens,
            temperature=parsed.temperature,
            top_p=parsed.top_p,
            thinking=False if reasoning.get("effort") in ("none", "minimal") else None,
            hints=agent_hints(parsed),
            session=parsed.prompt_cache_key or None,
            call_ids=new_call_id,
        )
        return parsed, tools, spec, response_id

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
