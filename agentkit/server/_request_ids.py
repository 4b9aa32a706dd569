"""A request id for every HTTP request: in its response header, its error body and its logs.

A client (or a proxy in front) may send its own ``x-request-id``; one of at most
:data:`MAX_LENGTH` safe characters (letters, digits, ``-``, ``_``, ``.``, ``:``) is kept, so
a trace spans the proxy and the server. Anything else is replaced by a new ``req_<hex>`` id:
a header value goes into logs and bodies, so it must not carry newlines, markup or megabytes.

:class:`RequestIds` (the outermost ASGI middleware) then

* binds ``request_id`` in structlog's context variables for the request (the mechanism
  :func:`agentkit._logging.bind_run` uses for ``run_id``), so every agentkit record logged
  while answering it carries the id, those from worker threads and stream tasks included;
* sets the ``x-request-id`` response header, on every response;
* puts the id in every JSON error body, where each API's shape has room for it: Anthropic's
  ``{"type": "error", ...}`` gets a top-level ``request_id`` (as Anthropic's API answers),
  OpenAI's ``{"error": {...}}`` a ``request_id`` inside its ``error`` object (what the
  ``openai`` SDK exposes as ``error.body``). Doing it here covers every error, whichever
  layer answered it (the boundary checks, 404, 405, the adapters).

A stream that fails after its 200 ends with its API's error event, whose shape is left as the
API defines it: the id is in the 200's ``x-request-id`` header, and in the logged failure.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import structlog
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "HEADER",
    "MAX_LENGTH",
    "RequestIds",
    "accepted_request_id",
    "new_request_id",
    "with_request_id",
]

HEADER = "x-request-id"
MAX_LENGTH = 128
"""The longest incoming request id kept."""

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_MAX_ERROR_BODY = 1 << 20
"""Error bodies beyond this size are passed on unchanged rather than held and rewritten."""


def new_request_id() -> str:
    """A fresh request id."""
    return f"req_{uuid.uuid4().hex}"


def accepted_request_id(value: str | None) -> str | None:
    """``value`` if it is a well-formed request id to keep, else ``None``."""
    if value is None or len(value) > MAX_LENGTH or _SAFE.fullmatch(value) is None:
        return None
    return value


def with_request_id(body: Any, request_id: str) -> Any:
    """``body`` (an error body) with ``request_id`` where its API's shape has room for it;
    bodies of another shape are returned unchanged."""
    if not isinstance(body, dict):
        return body
    if body.get("type") == "error":
        body.setdefault("request_id", request_id)
    elif isinstance(body.get("error"), dict):
        body["error"].setdefault("request_id", request_id)
    return body


def _is_json(headers: MutableHeaders) -> bool:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json"


class RequestIds:
    """ASGI middleware giving each HTTP request its id (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = Headers(scope=scope).get(HEADER)
        request_id = accepted_request_id(incoming) or new_request_id()
        held: Message | None = None
        chunks: list[bytes] = []
        size = 0

        async def send_with_id(message: Message) -> None:
            nonlocal held, size
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[HEADER] = request_id
                if message["status"] >= 400 and _is_json(headers):
                    held = message  # sent with the rewritten body
                    return
            elif message["type"] == "http.response.body" and held is not None:
                body = message.get("body", b"")
                chunks.append(body)
                size += len(body)
                if message.get("more_body", False) and size <= _MAX_ERROR_BODY:
                    return
                start, held = held, None
                rewritten = b"".join(chunks)
                if not message.get("more_body", False):
                    rewritten = self._rewrite(rewritten, request_id)
                    MutableHeaders(scope=start)["content-length"] = str(len(rewritten))
                # else: too large to hold; passed on as it was, and the rest streams through
                await send(start)
                await send({**message, "body": rewritten})
                return
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            await self.app(scope, receive, send_with_id)

    @staticmethod
    def _rewrite(body: bytes, request_id: str) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body
        data = with_request_id(data, request_id)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
