"""What every HTTP adapter shares: settings, authentication, body limits, the in-flight count.

Adapters raise :class:`ApiError` with one of the kinds below and answer it in their own wire
format's error shape (Anthropic's ``{"type": "error", "error": {...}}``, OpenAI's
``{"error": {...}}``); the status code is the kind's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request

from agentkit.server._runtime import ServerRuntime
from agentkit.server._stats import ServerStats
from agentkit.side_queries import AgentHints

__all__ = ["ERROR_STATUS", "ApiError", "ServerConfig", "ServerContext", "agent_hints"]

ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""Error kinds (Anthropic's names) and their HTTP status codes."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Settings of the HTTP layer."""

    model_name: str
    """The id ``/v1/models`` lists; requests may name any model (one model is served)."""
    api_key: str | None = None
    """When set, requests must carry it (``x-api-key`` or ``Authorization: Bearer``)."""
    strip_billing_header: bool = True
    max_request_bytes: int = 32 * 1024 * 1024
    max_concurrency: int | None = None
    """Requests in flight beyond this get 429 ``rate_limit_error``."""
    ping_interval: float = 10.0
    reasoning_field: str = "reasoning_content"
    """OpenAI Chat Completions: the message field reasoning goes in (``reasoning_content`` or
    ``reasoning``: clients disagree)."""
    streaming_tool_dispatch: bool = False
    """OpenAI Chat Completions: send ``tool_call_dispatch`` events to every streaming client
    (otherwise only to those asking with ``x-agentkit-dispatch: 1``)."""
    stall_timeout: float | None = 60.0
    """Streaming: seconds one write may wait for a client that reads nothing before the
    client is dropped and its request aborted (``None``: no limit)."""
    stream_queue_bytes: int = 64 * 1024
    """Streaming: how far generation may run ahead of a client's reading, in bytes of
    frames; beyond it, generation waits for the client."""


def agent_hints(body: object) -> AgentHints | None:
    """The ``agent_hints`` extension field of a request body (any of the wire formats), or
    ``None``; an invalid one is an ``invalid_request_error``."""
    extra = getattr(body, "model_extra", None) or {}
    value = extra.get("agent_hints")
    if value is None:
        return None
    try:
        return AgentHints.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in ("agent_hints", *first["loc"]))
        raise ApiError("invalid_request_error", f"{where}: {first['msg']}") from error


class ApiError(Exception):
    """An error to answer in the adapter's error shape, with the kind's status code."""

    def __init__(self, kind: str, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        if kind not in ERROR_STATUS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind = kind
        self.message = message
        self.param = param

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.kind]


@dataclass(slots=True)
class ServerContext:
    """The runtime and the HTTP settings, with the checks every endpoint makes."""

    runtime: ServerRuntime
    config: ServerConfig
    created: int = field(default_factory=lambda: int(time.time()))
    in_flight: int = 0
    stats: ServerStats = field(default_factory=ServerStats)
    """Disconnects, aborts and stream failures, counted by every adapter."""

    def authorize(self, request: Request) -> None:
        """:class:`ApiError` ``authentication_error`` unless the request carries the key."""
        if self.config.api_key is None:
            return
        key = request.headers.get("x-api-key")
        bearer = request.headers.get("authorization", "")
        if key is None and bearer.lower().startswith("bearer "):
            key = bearer[7:].strip()
        if key != self.config.api_key:
            raise ApiError("authentication_error", "invalid API key")

    async def read_json(self, request: Request) -> Any:
        """The body as JSON, within the size limit (``request_too_large`` beyond it)."""
        limit = self.config.max_request_bytes
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise ApiError(
                "request_too_large", f"request body of {length} bytes exceeds {limit} bytes"
            )
        body = b""
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise ApiError("request_too_large", f"request body exceeds {limit} bytes")
        try:
            return json.loads(body)
        except ValueError as error:
            raise ApiError(
                "invalid_request_error", f"the body is not valid JSON: {error}"
            ) from error

    def acquire(self) -> Callable[[], None]:
        """Count a request in flight; returns its (idempotent) release. ``rate_limit_error``
        when ``max_concurrency`` requests are already in flight."""
        limit = self.config.max_concurrency
        if limit is not None and self.in_flight >= limit:
            raise ApiError(
                "rate_limit_error",
                f"{self.in_flight} requests are in flight (limit {limit}); retry later",
            )
        self.in_flight += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.in_flight -= 1

        return release

    def model_entry(self) -> dict[str, Any]:
        """The served model, in Anthropic's and OpenAI's model shapes at once (each SDK
        ignores the other's fields), with what harnesses read: the context window and
        whether the model reasons."""
        profile = self.runtime.profile
        return {
            "type": "model",
            "object": "model",
            "id": self.config.model_name,
            "display_name": self.config.model_name,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created)),
            "created": self.created,
            "owned_by": "agentkit",
            "context_window": profile.context_window,
            "max_model_len": profile.context_window,
            "supports_reasoning": profile.reasoning is not None,
            "profile": profile.name,
        }
