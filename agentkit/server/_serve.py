"""``agentkit serve``: build the engine, the runtime and the app, and run them on uvicorn.

**Shutdown** (SIGTERM, or Ctrl-C) is a drain with a bound (:mod:`._shutdown`): uvicorn stops
accepting connections and asks each open one to close after its response; the first such
request starts the app's drain, which refuses new turns (503), gives the turns in flight
``--shutdown-timeout`` seconds to finish, then aborts the rest (engine request aborted, the
client told in its API's shape). uvicorn's own graceful-shutdown deadline, a few seconds
later, remains as a backstop for whatever else is open (a connection to a client that reads
nothing, a long ``count_tokens``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette

from agentkit.engine import Engine, ScriptedOutput, TokenizedScriptedEngine
from agentkit.engine._scripted import ScriptItem
from agentkit.errors import ConfigurationError, EngineError, EngineOverloaded
from agentkit.profiles import Profile, resolve_profile
from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._hosted_routes import hosted_agent, hosted_routes
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import default_key_path
from agentkit.server._shutdown import Shutdown
from agentkit.server._signing import ThinkingSigner
from agentkit.server._turn_file import SQLiteTurnStore
from agentkit.server._turns import TurnStore

__all__ = [
    "ServeOptions",
    "build_app",
    "check_bind",
    "default_turn_store_path",
    "load_script",
    "uvicorn_config",
]

_SHUTDOWN_BACKSTOP = 5
"""Seconds uvicorn's graceful shutdown waits beyond ``--shutdown-timeout``: the drain's wind-
down (see :class:`Shutdown`) and connections closing, before uvicorn cancels what is left."""


def default_turn_store_path() -> Path:
    """``$AGENTKIT_CACHE_DIR/turns.sqlite``, or ``~/.cache/agentkit/turns.sqlite``: next to
    the sealing key, whose sealed turns survive a restart the same way."""
    return default_key_path().with_name("turns.sqlite")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What ``agentkit serve`` was asked for."""

    agent: str | None = None
    """``package.module:attribute``: serve that agent (its engine, profile and tools; see
    :mod:`._hosted`) instead of a bare model; ``model``, ``script``, ``engine`` and
    ``profile`` must then be unset."""
    model: str | None = None
    script: Path | None = None
    profile: str | None = None
    chat_template: Path | None = None
    """Render with this chat template (a model directory, tokenizer config or .jinja file)."""
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    served_model_name: str | None = None
    api_key: str | None = None
    log_prompts: Path | None = None
    keep_billing_header: bool = False
    max_concurrency: int | None = None
    context_window: int | None = None
    """Replaces the profile's context window (tokens); a scripted engine has none unless
    given, since its tokens are characters."""
    reasoning_field: str = "reasoning_content"
    streaming_tool_dispatch: bool = False
    ignore_unverifiable_reasoning: bool = False
    signing_key: bytes | None = None
    """The thinking signatures' key; ``None`` derives it from the sealing key (persisted in
    the cache directory), so signatures stay valid across restarts."""
    turn_store: Path | None = None
    """The SQLite file exact replay's turns persist in, so a conversation resumed after a
    restart still replays token-exact; ``None`` keeps them in memory (``--turn-store
    memory``). ``agentkit serve``'s default is :func:`default_turn_store_path`."""
    engine_options: dict[str, Any] | None = None
    engine: Engine | None = None
    """An engine made elsewhere (``--remote``: a RemoteEngine); ``model`` is its model name."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins granted CORS (``--allow-origin``); see :mod:`._guard`."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names accepted without an API key besides loopback ones (``--allow-host``)."""
    header_timeout: float = 15.0
    """Seconds a request's line and headers may take to arrive (``--header-timeout``)."""
    body_timeout: float = 60.0
    """Seconds a request's body may take to arrive (``--body-timeout``)."""
    keep_alive_timeout: int = 5
    """Seconds an idle kept-alive connection stays open (``--keep-alive-timeout``)."""
    shutdown_timeout: int = 10
    """Seconds a shutdown lets turns in flight finish before aborting them
    (``--shutdown-timeout``; see :mod:`._shutdown`)."""


def load_script(path: Path) -> list[ScriptItem]:
    """The outputs of a JSON Lines script: ``{"output": "<raw model text>"}`` per request, or
    ``{"error": "overloaded" | "api_error", "message": "..."}`` for a request that fails."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigurationError(f"cannot read the script {path}: {error}") from error
    items: list[ScriptItem] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            raise ConfigurationError(f"{path}:{number}: not JSON: {error}") from error
        if isinstance(entry, dict) and isinstance(entry.get("output"), str):
            items.append(entry["output"])
        elif isinstance(entry, dict) and entry.get("error") in ("overloaded", "api_error"):
            message = str(entry.get("message", "scripted failure"))
            failure = (
                EngineOverloaded(message)
                if entry["error"] == "overloaded"
                else EngineError(message)
            )
            items.append(ScriptedOutput([failure]))
        else:
            raise ConfigurationError(
                f'{path}:{number}: expected {{"output": "..."}} or '
                '{"error": "overloaded" | "api_error", "message": "..."}'
            )
    return items


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to serve beyond this machine without an API key."""
    if api_key:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigurationError(
            f"--host {host} is reachable from other machines: give --api-key (clients then "
            "send it as x-api-key), or bind 127.0.0.1"
        )


def build_app(options: ServeOptions) -> tuple[Starlette, Engine, Profile]:
    """The app, its engine and the served profile."""
    hosted = (
        None
        if options.agent is None
        else hosted_agent(
            options.agent,
            {
                "model": options.model,
                "script": options.script,
                "engine": options.engine,
                "profile": options.profile,
                "chat_template": options.chat_template,
                "reasoning_parser": options.reasoning_parser,
                "tool_parser": options.tool_parser,
            },
        )
    )
    name = options.served_model_name or options.model or options.agent or "agentkit-scripted"
    if hosted is not None:
        profile = hosted.profile
    else:
        profile = resolve_profile(
            options.model or name,
            options.profile,
            chat_template=options.chat_template,
            reasoning=options.reasoning_parser,
            tool_format=options.tool_parser,
        )
    if options.context_window is not None or options.script is not None:
        profile = dataclasses.replace(profile, context_window=options.context_window)
    engine: Engine
    if hosted is not None:
        engine = hosted.engine
    elif options.engine is not None:
        engine = options.engine
    elif options.script is not None:
        if options.model is not None:
            raise ConfigurationError("give --model or --engine scripted --script, not both")
        engine = TokenizedScriptedEngine(
            load_script(options.script),
            specials=profile.special_tokens,
            stop=profile.stop[0] if profile.stop else None,
        )
    elif options.model is not None:
        from agentkit.engine import VLLMEngine

        engine = VLLMEngine(options.model, **(options.engine_options or {}))
    else:
        raise ConfigurationError("give --model M, or --engine scripted --script FILE")
    # Token ids belong to the model that produced them: the file's turns are scoped to it.
    turns = (
        TurnStore()
        if options.turn_store is None
        else SQLiteTurnStore(options.turn_store, scope=json.dumps([name, profile.name]))
    )
    signer = (
        ThinkingSigner(options.signing_key)
        if options.signing_key is not None
        else ThinkingSigner.persistent()
    )
    runtime = ServerRuntime(
        engine,
        profile,
        turns=turns,
        log_prompts=options.log_prompts,
        id_factory=new_tool_use_id,
    )
    config = ServerConfig(
        model_name=name,
        api_key=options.api_key,
        strip_billing_header=not options.keep_billing_header,
        max_concurrency=options.max_concurrency,
        reasoning_field=options.reasoning_field,
        streaming_tool_dispatch=options.streaming_tool_dispatch,
        body_timeout=options.body_timeout,
        allowed_origins=options.allowed_origins,
        allowed_hosts=options.allowed_hosts,
        shutdown=Shutdown(options.shutdown_timeout),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Opened now, so a bad --turn-store fails the start rather than losing turns later.
        if isinstance(turns, SQLiteTurnStore):
            await anyio.to_thread.run_sync(turns.open)
        await anyio.to_thread.run_sync(signer.load)
        try:
            start = getattr(engine, "start", None)
            if callable(start):
                await start()
            try:
                # A hosted agent's toolsets (MCP servers) run as long as the server: each
                # request's run then uses them as they are instead of starting its own.
                async with hosted.registry.running() if hosted is not None else nullcontext():
                    yield
                    await config.shutdown.wait()  # the drain ends before the engine closes
            finally:
                aclose = getattr(engine, "aclose", None)
                if callable(aclose):
                    await aclose()
        finally:
            await anyio.to_thread.run_sync(turns.close)

    app = create_app(
        runtime,
        config,
        signer=signer,
        lifespan=lifespan,
        adapters=(
            [hosted_routes(hosted)]
            if hosted is not None
            else [
                chat_routes,
                responses_routes_factory(
                    unverifiable_reasoning=(
                        "ignore" if options.ignore_unverifiable_reasoning else "reject"
                    )
                ),
            ]
        ),
    )
    app.state.shutdown = config.shutdown  # uvicorn_config hooks the server's shutdown to it
    return app, engine, profile


def uvicorn_config(
    app: Starlette, options: ServeOptions, *, host: str, port: int, log_level: str = "warning"
) -> Any:
    """The ``uvicorn.Config`` ``agentkit serve`` runs ``app`` with: h11 with a deadline on
    each request's head (:mod:`._protocol`), the keep-alive timeout of ``options``, the
    shutdown's drain (when ``app`` comes from :func:`build_app`; see the module's docstring),
    and no WebSocket (an upgrade request reaches the app as plain HTTP, so
    ``GET /v1/responses`` answers 426 and Codex falls back to HTTP)."""
    import uvicorn

    from agentkit.server._protocol import guarded_protocol

    protocol = guarded_protocol(options.header_timeout)
    shutdown = getattr(app.state, "shutdown", None)
    if isinstance(shutdown, Shutdown):
        protocol = _draining(protocol, shutdown)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        ws="none",
        http=protocol,
        timeout_keep_alive=options.keep_alive_timeout,
        timeout_graceful_shutdown=options.shutdown_timeout + _SHUTDOWN_BACKSTOP,
    )


def _draining(protocol: type[Any], shutdown: Shutdown) -> type[Any]:
    """``protocol`` (a uvicorn HTTP protocol class) starting ``shutdown``'s drain when the
    server asks a connection to close, which uvicorn does for every open connection as it
    begins to shut down, after it closed its listening sockets. With no connection open, no
    request is in flight: there is nothing to drain."""

    def close_after_response(self: Any) -> None:
        shutdown.begin()
        protocol.shutdown(self)

    return type(f"Draining{protocol.__name__}", (protocol,), {"shutdown": close_after_response})
