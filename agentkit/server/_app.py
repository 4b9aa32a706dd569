"""The ASGI app of ``agentkit serve``: the Anthropic Messages API over the runtime.

Endpoints: ``POST /v1/messages`` (streaming and not), ``POST /v1/messages/count_tokens``,
``GET /v1/models``, ``GET /v1/models/{id}`` (ids may contain slashes), ``HEAD``/``GET /``
(health), ``POST /v1/tokenize``, ``POST /v1/detokenize``, ``GET /v1/stats`` (the counters of
:mod:`._stats`), ``GET /metrics`` (Prometheus text: :mod:`._metrics`). Every response carries
an ``x-request-id`` (:mod:`._request_ids`). Query strings (``?beta=true``) are ignored.
Errors have the API's JSON shape and status codes. The adapters translate; the runtime
renders, generates and parses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.events import ParseEvent, ToolCallComplete
from agentkit.server._anthropic_request import (
    ConvertedRequest,
    CountTokensRequest,
    InvalidRequestError,
    MessagesRequest,
    convert_request,
)
from agentkit.server._anthropic_response import (
    MessageStream,
    error_json,
    message_json,
    new_message_id,
    stop_reason,
)
from agentkit.server._context import (
    ApiError,
    ServerConfig,
    ServerContext,
    agent_hints,
)
from agentkit.server._errors import error_response
from agentkit.server._exchange import TurnAnswer, answer_turn, cache_breaks
from agentkit.server._exchange import endpoint as api_endpoint
from agentkit.server._guard import BoundaryGuard, allowed_methods
from agentkit.server._ids import new_tool_use_id
from agentkit.server._intake import decode_ids
from agentkit.server._metrics import CONTENT_TYPE, HttpMetrics
from agentkit.server._request_ids import RequestIds
from agentkit.server._runtime import ModelTurn, ServerRuntime, TurnSpec
from agentkit.server._signing import ThinkingSigner

__all__ = ["RouteFactory", "ServerConfig", "create_app"]

_log = get_logger("agentkit.server")


def _shape(error: ApiError) -> Response:
    """The Messages API's error response."""
    return JSONResponse(error_json(error.kind, error.message), status_code=error.status)


RouteFactory = Callable[[ServerContext], list[Route]]
"""Builds an adapter's routes (OpenAI Chat Completions, Responses) on the shared context."""


def create_app(
    runtime: ServerRuntime,
    config: ServerConfig,
    *,
    signer: ThinkingSigner | None = None,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    adapters: Sequence[RouteFactory] = (),
) -> Starlette:
    """The Starlette app serving ``runtime``'s model (``lifespan`` starts and closes the
    engine with the server; ``adapters`` add other wire formats' routes)."""
    signer = signer or ThinkingSigner()
    context = ServerContext(runtime, config)
    body_json = context.read_json

    def parse(model: type[MessagesRequest] | type[CountTokensRequest], data: Any) -> Any:
        try:
            return model.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ApiError("invalid_request_error", f"{where}: {first['msg']}") from error

    def convert(request: MessagesRequest | CountTokensRequest) -> ConvertedRequest:
        try:
            converted = convert_request(
                request,
                turns=runtime.turns,
                signer=signer,
                strip_billing_header=config.strip_billing_header,
            )
        except InvalidRequestError as error:
            raise ApiError("invalid_request_error", str(error)) from error
        cache_breaks([str(note) for note in converted.replayed if not note.restored])
        return converted

    def spec(
        converted: ConvertedRequest, request: MessagesRequest | CountTokensRequest
    ) -> TurnSpec:
        disabled = (request.thinking or {}).get("type") == "disabled"
        return TurnSpec(
            transcript=converted.transcript,
            tools=converted.tools,
            tool_choice=converted.tool_choice,
            max_tokens=converted.max_tokens,
            temperature=converted.temperature,
            top_p=converted.top_p,
            stop=converted.stop,
            thinking=False if disabled else None,
            hints=agent_hints(request),
            session=converted.session,
            call_ids=new_tool_use_id,
        )

    def endpoint(
        handler: Callable[[Request], Awaitable[Response]], *, public: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        return api_endpoint(context, handler, _shape, public=public)

    async def health(request: Request) -> Response:
        if request.method == "HEAD":
            return Response(status_code=200)
        return JSONResponse({"status": "ok", "model": config.model_name})

    async def stats(request: Request) -> Response:
        """The server's counters (disconnects, aborts, stream failures) and requests in
        flight: what clients that leave, stall or fail have cost."""
        return JSONResponse(context.stats.snapshot(in_flight=context.in_flight))

    async def metrics(request: Request) -> Response:
        """Every metric in Prometheus' text format (behind the API key, as ``/v1/stats``)."""
        text = context.metrics.render(context.stats, turns_in_flight=context.in_flight)
        return Response(text, media_type=CONTENT_TYPE)

    model_entry = context.model_entry

    async def list_models(request: Request) -> Response:
        entry = model_entry()
        return JSONResponse(
            {
                "object": "list",
                "data": [entry],
                "has_more": False,
                "first_id": entry["id"],
                "last_id": entry["id"],
            }
        )

    async def get_model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id != config.model_name:
            raise ApiError("not_found_error", f"model {model_id!r} not found")
        return JSONResponse(model_entry())

    def count(data: Any) -> int:
        counted = parse(CountTokensRequest, data)
        prompt = runtime.prompt(spec(convert(counted), counted))
        ids = prompt.token_ids
        if ids is None:
            ids = runtime.encode(prompt.text)
        if ids is None:
            raise ApiError("api_error", "the engine has no tokenizer to count with")
        return len(ids)

    async def count_tokens(request: Request) -> Response:
        # Parsing, converting, rendering and tokenizing run on a worker thread, off the loop.
        return JSONResponse({"input_tokens": await context.work(count, await body_json(request))})

    async def tokenize(request: Request) -> Response:
        data = await body_json(request)
        text = data.get("prompt") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ApiError("invalid_request_error", "prompt: a string is required")
        ids = await context.work(runtime.encode, text)
        if ids is None:
            raise ApiError("api_error", "the engine has no tokenizer")
        return JSONResponse({"tokens": ids, "count": len(ids)})

    async def detokenize(request: Request) -> Response:
        data = await body_json(request)
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens
        ):
            raise ApiError("invalid_request_error", "tokens: a list of integers is required")
        text = await context.work(decode_ids, runtime.decode, tokens)
        if text is None:
            raise ApiError("api_error", "the engine has no tokenizer")
        return JSONResponse({"prompt": text})

    def prepare(data: Any) -> tuple[MessagesRequest, TurnSpec]:
        parsed: MessagesRequest = parse(MessagesRequest, data)
        return parsed, spec(convert(parsed), parsed)

    async def messages(request: Request) -> Response:
        parsed, turn_spec = await context.work(prepare, await body_json(request))
        message_id = new_message_id()
        # Arguments stream as the model writes them only for clients that asked (the API's
        # fine-grained tool streaming beta); others get each call's checked input whole.
        betas = request.headers.get("anthropic-beta", "")
        stream = MessageStream(
            message_id=message_id,
            model=parsed.model,
            sign=signer.sign,
            stream_tool_arguments="fine-grained-tool-streaming" in betas,
        )
        answer = _MessagesAnswer(stream, signer)
        return await answer_turn(
            context, request, turn_spec, answer, turn_id=message_id, stream=bool(parsed.stream)
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 404:
            return error_response(
                path, ApiError("not_found_error", f"no route for {request.method} {path}")
            )
        if exc.status_code == 405:
            allow = allowed_methods(routes, request.scope)
            message = f"{request.method} is not allowed on {path} (allowed: {allow})"
            error = ApiError("invalid_request_error", message, status=405)
            return error_response(path, error, headers={"Allow": allow})
        return error_response(path, ApiError("api_error", str(exc.detail)))

    routes = [
        *(route for factory in adapters for route in factory(context)),
        Route("/", endpoint(health, public=True), methods=["GET", "HEAD"]),
        Route("/health", endpoint(health, public=True), methods=["GET", "HEAD"]),
        Route("/v1/stats", endpoint(stats), methods=["GET"]),
        Route("/metrics", endpoint(metrics), methods=["GET"]),
        Route("/v1/models", endpoint(list_models), methods=["GET"]),
        Route("/v1/models/{model_id:path}", endpoint(get_model), methods=["GET"]),
        Route("/v1/messages", endpoint(messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", endpoint(count_tokens), methods=["POST"]),
        Route("/v1/tokenize", endpoint(tokenize), methods=["POST"]),
        Route("/v1/detokenize", endpoint(detokenize), methods=["POST"]),
    ]
    guard = Middleware(
        BoundaryGuard,
        keyed=config.api_key is not None,
        allowed_origins=config.allowed_origins,
        allowed_hosts=config.allowed_hosts,
    )
    # Outermost first: the request id and the metrics also cover what the guard refuses.
    counting = Middleware(HttpMetrics, metrics=context.metrics, routes=routes)
    return Starlette(
        routes=routes,
        middleware=[Middleware(RequestIds), counting, guard],
        exception_handlers={HTTPException: not_found},
        lifespan=lifespan,
    )


def _uncached(turn: ModelTurn) -> int:
    """The API's ``input_tokens``: the prompt tokens the cache did not serve (the prompt is
    ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``; clients such as
    Claude Code add them up to show the context used)."""
    return max((turn.prompt_tokens or 0) - turn.cached_prompt_tokens, 0)


class _MessagesAnswer(TurnAnswer):
    """A Messages API turn: its server-sent events, or the message."""

    def __init__(self, stream: MessageStream, signer: ThinkingSigner) -> None:
        self.stream = stream
        self.signer = signer
        self.calls = 0

    def start(self, turn: ModelTurn) -> bytes:
        return self.stream.start(_uncached(turn), turn.cached_prompt_tokens)

    def event(self, event: ParseEvent) -> bytes:
        self.calls += isinstance(event, ToolCallComplete)
        return self.stream.event(event)

    def finish(self, turn: ModelTurn) -> bytes:
        reason = stop_reason(turn.finish_reason, self.calls > 0, turn.stop_sequence)
        return self.stream.finish(
            reason,
            turn.usage.output_tokens,
            stop_sequence=turn.stop_sequence,
            input_tokens=_uncached(turn),
            cache_read_input_tokens=turn.cached_prompt_tokens,
        )

    def fail(self, kind: str, message: str) -> bytes:
        return self.stream.error(kind, message)

    def ping(self) -> bytes:
        return self.stream.ping()

    def complete(self, turn: ModelTurn) -> Response:
        message = turn.message
        assert message is not None
        reason = stop_reason(turn.finish_reason, bool(message.tool_calls), turn.stop_sequence)
        return JSONResponse(
            message_json(
                message_id=self.stream.message_id,
                model=self.stream.model,
                message=message,
                stop_reason=reason,
                input_tokens=_uncached(turn),
                output_tokens=turn.usage.output_tokens,
                cache_read_input_tokens=turn.cached_prompt_tokens,
                sign=self.signer.sign,
            )
        )
