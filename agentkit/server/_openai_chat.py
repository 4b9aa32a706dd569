"""OpenAI Chat Completions: ``POST /v1/chat/completions`` over the runtime, streaming and not.

This module holds the route. Requests become a transcript as :mod:`._chat_request` describes
(exact replay of turns sent back included); the responses, streamed or not, and the dispatch
side channel are built by :mod:`._chat_stream`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError, ContextWindowExceeded, EngineError, EngineOverloaded
from agentkit.events import ParseEvent, ToolCallComplete
from agentkit.server._chat_request import (
    ChatRequest,
    ConvertedChat,
    ReplayIndex,
    convert_chat_request,
)
from agentkit.server._chat_stream import (
    ChatStream,
    error_body,
    finish_reason,
    new_completion_id,
    replay,
    usage_json,
)
from agentkit.server._context import ApiError, ServerContext
from agentkit.server._lifecycle import TurnWatch, client_gone
from agentkit.server._runtime import ModelTurn

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

_DISPATCH_HEADER = "x-agentkit-dispatch"


def chat_routes(context: ServerContext) -> list[Route]:
    """``POST /v1/chat/completions`` on ``context``'s runtime."""
    runtime = context.runtime
    config = context.config
    index = ReplayIndex(runtime.turns)

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
            return _error(error.kind, error.message, param=error.param, status=error.status)
        except ContextWindowExceeded as error:
            return _error("invalid_request_error", str(error), code="context_length_exceeded")
        except ConfigurationError as error:
            return _error("invalid_request_error", str(error))
        except EngineOverloaded as error:
            return _error("overloaded_error", str(error))
        except EngineError as error:
            return _error("api_error", str(error))

    def prepare(data: Any) -> tuple[ChatRequest, ConvertedChat]:
        parsed = parse(data)
        return parsed, convert_chat_request(parsed, turns=runtime.turns, index=index)

    async def handle(request: Request) -> Response:
        # Parsing, converting and (below) rendering run on a worker thread, off the loop.
        parsed, converted = await context.work(prepare, await context.read_json(request))
        for n, restored in enumerate(converted.restored):
            if not restored:
                _log.warning("cache break: an assistant turn is rendered canonically", run=n)
        release = context.acquire()
        try:
            completion_id = new_completion_id()
            turn = await context.work(
                functools.partial(runtime.start, converted.spec, request_id=completion_id)
            )
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
            watch = TurnWatch(context, turn, release)
            if not parsed.stream:
                try:
                    return await complete(turn, stream, watch, request)
                finally:
                    release()
            events = turn.events()
            present, first = await watch.first_event(request.receive, events)
            if not present:  # the client left while its prompt was queued or prefilled
                release()
                return client_gone()
        except BaseException:
            release()
            raise
        include_usage = bool((parsed.stream_options or {}).get("include_usage"))

        def frames(event: ParseEvent) -> bytes:
            if stream.dispatch and isinstance(event, ToolCallComplete):
                watch.dispatched()  # its tool_call_dispatch event is in these frames
            return stream.event(event)

        async def body() -> AsyncGenerator[bytes, None]:
            yield stream.start()
            if first is not None:
                yield frames(first)
                async for event in events:
                    yield frames(event)
            remember(turn)
            yield stream.finish(finish_reason(turn.finish_reason, bool(stream.calls)))
            if include_usage:
                yield stream.usage(
                    turn.prompt_tokens or 0, turn.usage.output_tokens, turn.cached_prompt_tokens
                )
            yield stream.done()

        # A failure from here on ends the stream with an error chunk and [DONE] (TurnWatch).
        return watch.stream(  # type: ignore[return-value]
            body(), events, fail=stream.fail, ping=stream.ping
        )

    async def complete(
        turn: ModelTurn, stream: ChatStream, watch: TurnWatch, request: Request
    ) -> Response:
        async def generate() -> None:
            async with aclosing(turn.events()) as events:
                async for _ in events:
                    pass

        if not await watch.complete(request.receive, generate):
            return client_gone()
        assert turn.message is not None
        remember(turn)
        replay(stream, turn.message)
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
    kind: str,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    status: int | None = None,
) -> JSONResponse:
    status = status or ApiError(kind, message).status
    return JSONResponse(error_body(kind, message, param=param, code=code), status_code=status)
