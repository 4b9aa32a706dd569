"""Stored Responses over HTTP, for both faces of ``/v1/responses``: the bare model's
(:mod:`._openai_responses`) and a hosted agent's (:mod:`._hosted_responses`).

One place for what the two share: continuing a stored response (``previous_response_id``,
404 in OpenAI's shape when it is unknown), keeping a finished response that asked to be
stored, and the routes that read and delete them: ``GET /v1/responses/{id}``,
``DELETE /v1/responses/{id}`` and ``GET /v1/responses/{id}/input_items``. The records
themselves live in :mod:`._response_store`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit.server._context import ApiError, ServerContext
from agentkit.server._errors import openai_error
from agentkit.server._exchange import endpoint
from agentkit.server._response_store import History, MissingResponse, item_page, response_store
from agentkit.server._responses_request import ResponsesRequest, stored_response
from agentkit.transcript import Message

__all__ = ["StoredResponses", "responses_error"]


def responses_error(error: ApiError) -> Response:
    """The Responses API's error response (OpenAI's shape)."""
    body = openai_error(error.kind, error.message, error.param, error.code)
    return JSONResponse(body, status_code=error.status)


class StoredResponses:
    """The server's stored responses, as the Responses routes use them."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.store = response_store(context.runtime.turns)

    def history(self, previous: str | None) -> History | None:
        """The conversation ``previous_response_id`` continues (``None``: none)."""
        if previous is None:
            return None
        try:
            return self.store.history(previous)
        except MissingResponse as error:
            raise ApiError(
                "invalid_request_error", str(error), param="previous_response_id", status=404
            ) from error

    def keep(self, req: ResponsesRequest, response: dict[str, Any], turn: Message | None) -> None:
        """Store a finished response the request asked to store (on the event loop: the
        store queues the write). ``turn``: the last model turn, for exact replay."""
        if req.store is not False and response["status"] in ("completed", "incomplete"):
            self.store.put(stored_response(req, response, turn))

    def routes(self) -> list[Route]:
        """``GET`` and ``DELETE /v1/responses/{id}``, ``GET .../input_items``."""
        path = "/v1/responses/{response_id}"
        return [
            Route(path, self._endpoint(self.retrieve), methods=["GET"]),
            Route(path, self._endpoint(self.delete), methods=["DELETE"]),
            Route(f"{path}/input_items", self._endpoint(self.input_items), methods=["GET"]),
        ]

    def _endpoint(self, handler: Any) -> Any:
        return endpoint(self.context, handler, responses_error)

    async def retrieve(self, request: Request) -> Response:
        if request.query_params.get("stream", "false").lower() != "false":
            message = "stream: a stored response is finished; retrieve it without stream"
            raise ApiError("invalid_request_error", message, param="stream")
        response_id = _response_id(request)
        stored = await self.context.work(self.store.get, response_id)
        if stored is None:
            raise _not_found(response_id)
        return JSONResponse(stored.response)

    async def delete(self, request: Request) -> Response:
        response_id = _response_id(request)
        if not await self.context.work(self.store.delete, response_id):
            raise _not_found(response_id)
        return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})

    async def input_items(self, request: Request) -> Response:
        response_id = _response_id(request)
        stored = await self.context.work(self.store.get, response_id)
        if stored is None:
            raise _not_found(response_id)
        return JSONResponse(item_page(stored.input, request.query_params))


def _response_id(request: Request) -> str:
    """The path's response id; only ids minted for responses (``resp_…``) are looked up (the
    store also keeps a hosted agent's Chat runs, under other keys)."""
    response_id = str(request.path_params["response_id"])
    if not response_id.startswith("resp_"):
        raise _not_found(response_id)
    return response_id


def _not_found(response_id: str) -> ApiError:
    return ApiError(
        "invalid_request_error", f"Response with id '{response_id}' not found.", status=404
    )
