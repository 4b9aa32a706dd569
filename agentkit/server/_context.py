"""What every HTTP adapter shares: settings, authentication, body limits, the in-flight count,
and the worker threads requests are prepared on.

Adapters raise :class:`ApiError` (:mod:`._errors`: the kinds and their status codes) and
answer it in their own wire format's error shape (Anthropic's ``{"type": "error", "error":
{...}}``, OpenAI's ``{"error": {...}}``). Bodies are read and checked by :mod:`._intake`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from agentkit.server._errors import ERROR_STATUS, ApiError
from agentkit.server._intake import Limits, check_counts, parse_json, read_bytes
from agentkit.server._metrics import ServerMetrics
from agentkit.server._runtime import ServerRuntime
from agentkit.server._shutdown import Shutdown
from agentkit.server._stats import ServerStats
from agentkit.side_queries import AgentHints

__all__ = ["ERROR_STATUS", "ApiError", "ServerConfig", "ServerContext", "agent_hints"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ServerConfig(Limits):
    """Settings of the HTTP layer; the request limits (:class:`Limits`: body size and
    deadline, nesting depth, messages, blocks, tools) are keyword-only fields of it."""

    model_name: str
    """The id ``/v1/models`` lists; requests may name any model (one model is served)."""
    api_key: str | None = None
    """When set, requests must carry it (``x-api-key`` or ``Authorization: Bearer``)."""
    strip_billing_header: bool = True
    intake_threads: int = 4
    """Worker threads that parse, convert, render and tokenize requests, off the event loop
    (more requests wait for one)."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins (``https://app.example``) allowed to call the server (CORS); none by
    default. Without ``api_key``, a request from any other origin is refused (403)."""
    allowed_hosts: tuple[str, ...] = ()
    """Without ``api_key``: ``Host`` names accepted besides the loopback ones (``localhost``,
    ``127.0.0.1``, ``[::1]``); any other is refused (403), against DNS rebinding."""
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
    shutdown: Shutdown = field(default_factory=Shutdown, compare=False, repr=False)
    """The drain of the server's turns when it shuts down (:mod:`._shutdown`): new turns
    refused, those in flight given ``shutdown.timeout`` seconds, then aborted. State, not a
    setting: one per server (``agentkit serve`` gives it ``--shutdown-timeout``)."""


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


@dataclass(slots=True)
class ServerContext:
    """The runtime and the HTTP settings, with the checks every endpoint makes."""

    runtime: ServerRuntime
    config: ServerConfig
    created: int = field(default_factory=lambda: int(time.time()))
    in_flight: int = 0
    stats: ServerStats = field(default_factory=ServerStats)
    """Disconnects, aborts and stream failures, counted by every adapter."""
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    """Requests, tokens and latencies, served at ``GET /metrics`` (:mod:`._metrics`)."""
    _limiter: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)

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

    @property
    def limits(self) -> Limits:
        """What one request may hold (from :attr:`config`)."""
        return self.config

    async def read_bytes(self, request: Request) -> bytes:
        """The raw body, within the size limit (413) and the body deadline (408)."""
        limit = self.config.max_request_bytes
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise ApiError(
                "request_too_large", f"request body of {length} bytes exceeds {limit} bytes"
            )
        try:
            return await read_bytes(request.stream(), self.limits)
        except ClientDisconnect:
            raise ApiError(
                "invalid_request_error", "the client disconnected before sending its body"
            ) from None

    async def read_json(self, request: Request) -> Any:
        """The body as strict JSON within the server's limits (see :mod:`._intake`), parsed
        and checked on a worker thread."""
        body = await self.read_bytes(request)
        return await self.work(self.parse_json, body)

    def parse_json(self, body: bytes) -> Any:
        """``body`` as strict JSON, its depth and counts within the limits (a worker's job)."""
        limits = self.limits
        data = parse_json(body, limits)
        check_counts(data, limits)
        return data

    async def work(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` on a worker thread (at most ``intake_threads`` at once), so
        that parsing, converting, rendering and tokenizing a large request never holds up
        the event loop (health checks, other streams)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.config.intake_threads)
        return await anyio.to_thread.run_sync(function, *args, limiter=self._limiter)

    def acquire(self) -> Callable[[], None]:
        """Count a request in flight; returns its (idempotent) release. ``rate_limit_error``
        when ``max_concurrency`` requests are already in flight, ``overloaded_error`` (503)
        once the server is shutting down."""
        limit = self.config.max_concurrency
        if limit is not None and self.in_flight >= limit:
            raise ApiError(
                "rate_limit_error",
                f"{self.in_flight} requests are in flight (limit {limit}); retry later",
            )
        ended = self.config.shutdown.admit()  # 503 once the server is shutting down
        self.in_flight += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.in_flight -= 1
                ended()

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
