"""OpenAI Chat Completions: ``POST /v1/chat/completions`` over the runtime, streaming and not.

This module holds the route. Requests become a transcript as :mod:`._chat_request` describes
(exact replay of turns sent back included); the responses, streamed or not, and the dispatch
side channel are built by :mod:`._chat_stream`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit._logging import get_logger
from agentkit.events import ParseEvent
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
from agentkit.server._exchange import TurnAnswer, answer_turn, cache_breaks, endpoint
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

    def remember(turn: ModelTurn) -> None:
        if turn.message is not None and turn.message.raw is not None:
            index.remember(turn.message)

    def prepare(data: Any) -> tuple[ChatRequest, ConvertedChat]:
        parsed = parse_chat_request(data)
        return parsed, convert_chat_request(parsed, turns=runtime.turns, index=index)

    async def handle(request: Request) -> Response:
        # Parsing, converting and (below) rendering run on a worker thread, off the loop.
        parsed, converted = await context.work(prepare, await context.read_json(request))
        cache_breaks(
            [
                f"assistant message {n}: no stored turn matches"
                for n, restored in enumerate(converted.restored)
                if not restored
            ]
        )
        dispatch = config.streaming_tool_dispatch or request.headers.get(
            _DISPATCH_HEADER, ""
        ).lower() in ("1", "true", "yes")
        stream = ChatStream(
            completion_id=new_completion_id(),
            model=parsed.model,
            created=int(time.time()),
            reasoning_field=config.reasoning_field,
            dispatch=dispatch and bool(parsed.stream),
        )
        include_usage = bool((parsed.stream_options or {}).get("include_usage"))
        answer = _ChatAnswer(stream, remember, include_usage=include_usage)
        return await answer_turn(
            context,
            request,
            converted.spec,
            answer,
            turn_id=stream.completion_id,
            stream=bool(parsed.stream),
        )

    completions = endpoint(context, handle, chat_error)
    return [Route("/v1/chat/completions", completions, methods=["POST"])]


def parse_chat_request(data: Any) -> ChatRequest:
    """The request body as a :class:`ChatRequest`; an ``invalid_request_error`` naming the
    first field that is wrong."""
    if not isinstance(data, dict):
        raise ApiError("invalid_request_error", "the request body must be a JSON object")
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        detail = "field required" if first["type"] == "missing" else first["msg"]
        raise ApiError("invalid_request_error", f"{where}: {detail}", param=where) from error


def chat_error(error: ApiError) -> Response:
    """Chat Completions' error response."""
    body = error_body(error.kind, error.message, param=error.param, code=error.code)
    return JSONResponse(body, status_code=error.status)


class _ChatAnswer(TurnAnswer):
    """A Chat Completions turn: its chunks (and ``[DONE]``), or the completion."""

    def __init__(
        self, stream: ChatStream, remember: Callable[[ModelTurn], None], *, include_usage: bool
    ) -> None:
        self.stream = stream
        self.remember = remember
        self.include_usage = include_usage
        self.dispatches = stream.dispatch

    def start(self, turn: ModelTurn) -> bytes:
        return self.stream.start()

    def event(self, event: ParseEvent) -> bytes:
        return self.stream.event(event)

    def finish(self, turn: ModelTurn) -> bytes:
        stream = self.stream
        self.remember(turn)
        frames = stream.finish(finish_reason(turn.finish_reason, bool(stream.calls)))
        if self.include_usage:
            frames += stream.usage(
                turn.prompt_tokens or 0, turn.usage.output_tokens, turn.cached_prompt_tokens
            )
        return frames + stream.done()

    def fail(self, kind: str, message: str) -> bytes:
        return self.stream.fail(kind, message)

    def ping(self) -> bytes:
        return self.stream.ping()

    def complete(self, turn: ModelTurn) -> Response:
        stream = self.stream
        assert turn.message is not None
        self.remember(turn)
        replay(stream, turn.message)
        reason = finish_reason(turn.finish_reason, bool(stream.calls))
        usage = usage_json(
            turn.prompt_tokens or 0, turn.usage.output_tokens, turn.cached_prompt_tokens
        )
        return JSONResponse(stream.completion(stream.message(), reason, usage))
