"""Who may talk to the server at all: the checks made before any route runs (ASGI middleware).

A server on 127.0.0.1 without an API key is reachable by every web page the user opens: a
page can ``POST`` to it with a CORS *simple request* (``text/plain``, a form, a typeless
blob: no preflight), and with DNS rebinding (a name of the attacker's that resolves to
127.0.0.1) it can even read the answers. So, without an API key:

* a ``Host`` that is not a loopback name (``localhost``, ``*.localhost``, ``127.0.0.1`` and
  the rest of 127/8, ``[::1]``, any port) or one of ``allowed_hosts`` gets 403;
* a request carrying an ``Origin`` (browsers send one) that is not in ``allowed_origins``
  gets 403;
* a ``POST`` whose ``Content-Type`` is not JSON (``application/json`` or ``*/*+json``)
  gets 415: no simple request can carry it.

With an API key those three are left to the key (a page cannot send a custom header without
a preflight the server does not grant). CORS stays closed unless ``allowed_origins`` names
origins: then their preflights are answered and their responses carry
``Access-Control-Allow-Origin``; other origins' preflights get 403. Refusals have the error
shape of the API the path belongs to.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkit.server._errors import ApiError, error_response

__all__ = ["BoundaryGuard", "allowed_methods", "is_json_type", "is_loopback_host"]

_ALLOWED_METHODS = "GET, POST, HEAD, DELETE"  # DELETE: stored Responses
_ALLOWED_HEADERS = (
    "authorization, content-type, content-encoding, x-api-key, anthropic-version, "
    "anthropic-beta, x-agentkit-dispatch, x-request-id"
)


def host_name(host: str) -> str:
    """The name in a ``Host`` header: without the port, lowercase, no trailing dot."""
    host = host.strip().lower()
    name, port = host, ""
    if host.startswith("["):
        end = host.find("]")
        if end > 0:
            name, port = host[1:end], host[end + 1 :]
    elif host.count(":") == 1:
        name, port = host.split(":", 1)
        port = ":" + port
    if port and not (port.startswith(":") and port[1:].isdigit()):
        return host  # not a name and a port: matches nothing
    return name.rstrip(".")


def is_loopback_host(host: str) -> bool:
    """Whether the ``Host`` header names this machine's loopback interface."""
    name = host_name(host)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_json_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON (``application/json``, ``*/*+json``, parameters
    such as ``charset`` allowed)."""
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json":
        return True
    return media.startswith("application/") and media.endswith("+json")


class BoundaryGuard:
    """ASGI middleware making the checks of the module docstring.

    Args:
        app: the application behind it.
        keyed: whether the server requires an API key.
        allowed_origins: browser origins granted CORS (exact, ``scheme://host[:port]``).
        allowed_hosts: ``Host`` names accepted without a key, besides loopback names.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        keyed: bool,
        allowed_origins: Iterable[str] = (),
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.keyed = keyed
        self.origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.hosts = frozenset(host_name(h) for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        origin = headers.get("origin")
        granted = origin is not None and origin.rstrip("/") in self.origins
        refusal = self._refusal(scope["method"], headers, origin, granted)
        if refusal is not None:
            await error_response(path, refusal)(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(path, headers, origin, granted)(scope, receive, send)
            return
        if not granted:
            await self.app(scope, receive, send)
            return
        assert origin is not None

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                response_headers["access-control-allow-origin"] = origin
                response_headers["access-control-expose-headers"] = "x-request-id"
                response_headers.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _refusal(
        self, method: str, headers: Headers, origin: str | None, granted: bool
    ) -> ApiError | None:
        if self.keyed:
            return None
        host = headers.get("host")
        if host is not None and not is_loopback_host(host) and host_name(host) not in self.hosts:
            return ApiError(
                "permission_error",
                f"Host {host!r} is not this machine's loopback name: without an API key the "
                "server answers only requests addressed to localhost, 127.0.0.1 or [::1] "
                "(run it with --api-key, or --allow-host NAME behind a proxy)",
            )
        if origin is not None and not granted:
            return ApiError(
                "permission_error",
                f"requests from the web origin {origin!r} are refused: without an API key "
                "only origins given with --allow-origin may call this server",
            )
        if method == "POST" and not is_json_type(headers.get("content-type")):
            return ApiError(
                "invalid_request_error",
                f"Content-Type {headers.get('content-type')!r} is not JSON: send the body "
                "as application/json",
                status=415,
            )
        return None

    def _preflight(
        self, path: str, headers: Headers, origin: str | None, granted: bool
    ) -> Response:
        if not granted or origin is None:
            return error_response(
                path,
                ApiError(
                    "permission_error",
                    f"cross-origin requests from {origin!r} are not allowed "
                    "(the server grants CORS only to origins given with --allow-origin)",
                ),
            )
        requested = headers.get("access-control-request-headers")
        return Response(
            status_code=204,
            headers={
                "access-control-allow-origin": origin,
                "access-control-allow-methods": _ALLOWED_METHODS,
                "access-control-allow-headers": requested or _ALLOWED_HEADERS,
                "access-control-max-age": "600",
                "vary": "Origin",
            },
        )


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> str:
    """The ``Allow`` header for ``scope``'s path: the methods of every route on it."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE and isinstance(route, Route) and route.methods:
            methods |= route.methods
    return ", ".join(sorted(methods))
