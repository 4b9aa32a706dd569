"""The server's error kinds, :class:`ApiError`, and each wire format's error shape.

Adapters raise :class:`ApiError` with one of the kinds below and answer it in their own wire
format's error shape (Anthropic's ``{"type": "error", "error": {...}}``, OpenAI's
``{"error": {...}}``); the status code is the kind's unless the error names another (405,
408, 415 are ``invalid_request_error`` with their own status). Code that answers before a
route is chosen (the boundary checks, 404, 405) picks the shape from the path:
:func:`error_response`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

__all__ = ["ERROR_STATUS", "OPENAI_PATHS", "ApiError", "error_response", "openai_error"]

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

OPENAI_PATHS = ("/v1/chat/completions", "/v1/responses")
"""Paths (and, for ``/v1/responses``, the paths below it) whose errors take OpenAI's shape;
every other path answers in Anthropic's."""


class ApiError(Exception):
    """An error to answer in the adapter's error shape, with the kind's status code (or
    ``status``, where HTTP has a more precise one)."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        param: str | None = None,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        if kind not in ERROR_STATUS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code
        """OpenAI's machine-readable ``code`` (``context_length_exceeded``), where one applies."""
        self._status = status

    @property
    def status(self) -> int:
        return self._status if self._status is not None else ERROR_STATUS[self.kind]


def openai_error(
    kind: str, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body (``api_error`` and ``overloaded_error`` as ``server_error``)."""
    kind = "server_error" if kind in ("api_error", "overloaded_error") else kind
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    path: str,
    error: ApiError,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """``error`` in the error shape of the API ``path`` belongs to."""
    path = path.rstrip("/")
    if path in OPENAI_PATHS or path.startswith("/v1/responses/"):
        body = openai_error(error.kind, error.message, error.param)
    else:
        body = {"type": "error", "error": {"type": error.kind, "message": error.message}}
    return JSONResponse(body, status_code=error.status, headers=dict(headers or {}))
