"""One MCP server as an agentkit toolset: its connection, its tools, their calls.

The connection lives in a task of its own (started in :meth:`MCPServer.start`, in a task
group the caller's task holds until :meth:`MCPServer.close`), so that whatever happens to the
server (it exits, its pipe breaks, its HTTP endpoint goes away) ends that task and nothing
else: calls in flight and later calls become error results the model sees, and the run goes
on. Tool calls come from the dispatcher's tasks and share the one connection.

A call cancelled here (the tool's timeout, the run cancelled) cancels the MCP request, and
the official client sends the server ``notifications/cancelled`` for it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as mcp_types
from anyio.abc import TaskGroup
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError, RunError, ToolExecutionError
from agentkit.mcp._convert import local_name, result_text
from agentkit.tools import Tool

__all__ = ["MCPServer", "MCPServerError"]

_log = get_logger("agentkit.mcp")

_LIST_PAGES = 100
"""The most ``tools/list`` pages read: a server whose cursor never ends cannot hang a run."""


class MCPServerError(RunError):
    """An MCP server could not be started, or could not list its tools, at a run's start.

    A server that fails *during* a run stops nothing: its calls become error results."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


@dataclass(frozen=True)
class _Stdio:
    command: str
    args: tuple[str, ...]
    env: dict[str, str] | None
    cwd: str | None

    def describe(self) -> str:
        return os.path.basename(self.command)


@dataclass(frozen=True)
class _Http:
    url: str
    headers: dict[str, str]

    def describe(self) -> str:
        return httpx2.URL(self.url).host or self.url


class MCPServer:
    """The tools of an MCP server, for :class:`~agentkit.Agent` (``tools=[..., server]``).

    Build one with :meth:`stdio` (a command the agent spawns, speaking MCP on its stdin and
    stdout) or :meth:`http` (a streamable HTTP endpoint). Open it with ``async with server:``
    to keep one connection for many runs (concurrent ones included); a run that finds it
    closed opens it for itself and closes it when the run ends.

    The tools are listed when the server starts and re-listed at the next run after the server
    says its list changed (``notifications/tools/list_changed``, or a ``subscriptions/listen``
    event on 2026-07-28 servers); a run offers the same tools from its first turn to its last.
    Each becomes a :class:`~agentkit.tools.Tool` with the server's input schema as its
    parameters, so arguments are checked before the call and the agent's tool timeout,
    approvals and concurrency limit apply as to any tool.

    Results: text content joined; structured content as JSON when there is no text; images,
    audio and resources as a placeholder naming type and size; ``isError`` results, protocol
    errors and a server that went away as error results the model sees.
    """

    def __init__(
        self,
        transport: _Stdio | _Http,
        *,
        name: str | None = None,
        prefix: str | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        timeout: float | None = None,
        requires_approval: bool | Collection[str] = False,
        start_timeout: float = 30.0,
    ) -> None:
        if not start_timeout > 0:
            raise ConfigurationError("start_timeout must be a positive number of seconds")
        self._transport = transport
        self._name = name or transport.describe()
        self._prefix = prefix
        self._include = None if include is None else frozenset(include)
        self._exclude = frozenset(exclude)
        self._timeout = timeout
        self._approval = requires_approval
        self._start_timeout = start_timeout
        self._state: Literal["closed", "starting", "running"] = "closed"
        self._task_group: TaskGroup | None = None
        self._client: Client | None = None
        self._settled = anyio.Event()
        self._closing = anyio.Event()
        self._failure: BaseException | None = None
        self._ended: str | None = None
        """Why the connection ended while the server was open (calls then fail saying so)."""
        self._tools: list[Tool] = []
        self._stale = True

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | Path | None = None,
        name: str | None = None,
        prefix: str | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        timeout: float | None = None,
        requires_approval: bool | Collection[str] = False,
        start_timeout: float = 30.0,
    ) -> MCPServer:
        """A server the agent spawns as ``command *args``, speaking MCP on stdin/stdout.

        ``env`` is added to the MCP SDK's default environment (``PATH``, ``HOME``...; not the
        whole of this process's). ``name`` (default: the command's file name) appears in error
        messages; ``prefix`` makes each tool ``prefix_name``; ``include`` / ``exclude`` keep or
        drop tools by the server's names; ``timeout`` overrides the agent's tool timeout for
        these tools; ``requires_approval`` holds every call (``True``) or those of the named
        tools; ``start_timeout`` bounds spawning, the handshake and the first listing.
        """
        return cls(
            _Stdio(
                command,
                tuple(args),
                None if env is None else dict(env),
                None if cwd is None else str(cwd),
            ),
            name=name,
            prefix=prefix,
            include=include,
            exclude=exclude,
            timeout=timeout,
            requires_approval=requires_approval,
            start_timeout=start_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        prefix: str | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        timeout: float | None = None,
        requires_approval: bool | Collection[str] = False,
        start_timeout: float = 30.0,
    ) -> MCPServer:
        """A server at a streamable HTTP endpoint (``http://host:port/mcp``), each request
        carrying ``headers`` (an ``Authorization`` header, say). The other options are
        :meth:`stdio`'s; ``name`` defaults to the URL's host."""
        return cls(
            _Http(url, dict(headers or {})),
            name=name,
            prefix=prefix,
            include=include,
            exclude=exclude,
            timeout=timeout,
            requires_approval=requires_approval,
            start_timeout=start_timeout,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def running(self) -> bool:
        """Whether it is open (or opening); it stays open after its connection ended, its
        calls then failing, until :meth:`close`."""
        return self._state != "closed"

    @property
    def tools_changed(self) -> bool:
        """Whether the server said its tools changed since they were last listed (the next
        run lists them again)."""
        return self._stale

    @property
    def tools(self) -> list[Tool]:
        """The tools as last listed (empty before the first start)."""
        return list(self._tools)

    async def __aenter__(self) -> MCPServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect (spawn the command, or reach the URL), shake hands and list the tools;
        :class:`MCPServerError` when that fails or takes longer than ``start_timeout``.
        Call :meth:`close` from the same task."""
        if self._state != "closed":
            raise ConfigurationError(f"MCP server {self._name!r} is already started")
        self._state = "starting"
        self._settled = anyio.Event()
        self._closing = anyio.Event()
        self._failure = None
        self._ended = None
        self._stale = True
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        try:
            task_group.start_soon(self._serve, name=f"mcp server {self._name}")
            with anyio.move_on_after(self._start_timeout) as waited:
                await self._settled.wait()
            if waited.cancelled_caught:
                raise MCPServerError(
                    f"MCP server {self._name!r} did not start within {self._start_timeout:g}s",
                    server=self._name,
                )
            if self._failure is not None:
                raise MCPServerError(
                    f"MCP server {self._name!r} could not start: {_describe(self._failure)}",
                    server=self._name,
                ) from self._failure
        except BaseException:
            await self.close()
            raise
        self._state = "running"

    async def close(self) -> None:
        """Disconnect (a spawned server is asked to exit, then stopped); calls in flight end
        as error results. Runs to its end in a cancelled task too."""
        task_group = self._task_group
        if task_group is None:
            return
        self._closing.set()
        scope = task_group.cancel_scope
        scope.shield = True  # the group's own scope: an outer cancellation must not cut this
        scope.deadline = min(scope.deadline, anyio.current_time() + 10)
        try:
            await task_group.__aexit__(None, None, None)
        finally:
            self._task_group = None
            self._client = None
            self._state = "closed"

    async def list_tools(self) -> list[Tool]:
        """The server's tools, re-listed first where it said they changed."""
        if self._state == "starting":
            await self._settled.wait()
        client = self._client
        if self._stale and client is not None:
            try:
                self._tools = await self._fetch(client)
                self._stale = False
            except Exception as exc:  # the old list stays; its calls say what is wrong
                _log.warning("mcp_list_failed", server=self._name, error=_describe(exc))
        return list(self._tools)

    async def _serve(self) -> None:
        """The connection's task: open, list, wait for close; never raises (a failure is
        recorded, and ends only this task)."""
        try:
            async with self._connect() as client:
                self._tools = await self._fetch(client)
                self._stale = False
                self._client = client
                self._settled.set()
                async with anyio.create_task_group() as watchers:
                    watchers.start_soon(self._listen, client)
                    await self._closing.wait()
                    watchers.cancel_scope.cancel()
        except Exception as exc:
            if not self._settled.is_set():
                self._failure = exc
            else:
                _log.warning("mcp_server_lost", server=self._name, error=_describe(exc))
            self._ended = _describe(exc)
        finally:
            self._client = None
            if self._ended is None and not self._closing.is_set():
                self._ended = "the connection ended"
            self._settled.set()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        transport = self._transport
        if isinstance(transport, _Stdio):
            parameters = StdioServerParameters(
                command=transport.command,
                args=list(transport.args),
                env=transport.env,
                cwd=transport.cwd,
            )
            async with Client(stdio_client(parameters), message_handler=self._on_message) as c:
                yield c
            return
        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: SSE streams idle long
        async with (
            httpx2.AsyncClient(headers=transport.headers, timeout=timeout) as http,
            Client(
                streamable_http_client(transport.url, http_client=http),
                message_handler=self._on_message,
            ) as client,
        ):
            yield client

    async def _on_message(self, message: IncomingMessage) -> None:
        """Handshake-era servers announce a changed tool list with a notification."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True
        await anyio.lowlevel.checkpoint()

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce it on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._stale = True
        except ListenNotSupportedError:
            pass  # a handshake-era server: its notifications reach _on_message
        except Exception as exc:
            _log.debug("mcp_listen_ended", server=self._name, error=_describe(exc))

    async def _fetch(self, client: Client) -> list[Tool]:
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        tools: list[Tool] = []
        for spec in listed:
            if self._include is not None and spec.name not in self._include:
                continue
            if spec.name in self._exclude:
                continue
            tool = self._tool(spec)
            if tool is not None:
                tools.append(tool)
        return tools

    def _tool(self, spec: mcp_types.Tool) -> Tool | None:
        """The MCP tool as an agentkit tool, or ``None`` (logged) where its schema is not
        a valid JSON schema: one bad tool does not take the server's others down."""
        approval = self._approval
        try:
            return Tool(
                local_name(spec.name, self._prefix),
                spec.description or spec.title or "",
                _parameters(spec.input_schema),
                self._caller(spec.name, local_name(spec.name, self._prefix)),
                timeout=self._timeout,
                requires_approval=approval if isinstance(approval, bool) else spec.name in approval,
            )
        except ConfigurationError as exc:
            _log.warning("mcp_tool_skipped", server=self._name, tool=spec.name, reason=str(exc))
            return None

    def _caller(self, remote: str, local: str) -> Callable[[dict[str, Any]], Any]:
        async def call(arguments: dict[str, Any]) -> str:
            return await self._call(remote, local, arguments)

        return call

    async def _call(self, remote: str, local: str, arguments: dict[str, Any]) -> str:
        client = self._client
        if client is None:
            why = self._ended or "it is not open"
            raise self._error(local, f"MCP server {self._name!r} is not available: {why}")
        try:
            result = await client.call_tool(remote, arguments)
        except MCPError as exc:
            if exc.error.code == mcp_types.CONNECTION_CLOSED:
                self._ended = "its connection closed (the server may have exited)"
                message = f"MCP server {self._name!r} is not available: {self._ended}"
            else:
                message = f"MCP server {self._name!r} failed the call: {exc.error.message}"
            raise self._error(local, message) from exc
        except Exception as exc:  # a broken pipe, a dropped HTTP connection, a bad result
            raise self._error(
                local, f"MCP server {self._name!r} failed the call: {_describe(exc)}"
            ) from exc
        text = result_text(result)
        if result.is_error:
            raise self._error(local, text or f"Tool {remote!r} failed (the server said no more)")
        return text

    def _error(self, local: str, message: str) -> ToolExecutionError:
        # The call id is filled in by Tool.invoke, which knows it.
        return ToolExecutionError(message, call_id="", tool_name=local)

    def __repr__(self) -> str:
        return f"MCPServer(name={self._name!r}, state={self._state!r})"


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema as the tool's parameters: an object schema, always."""
    parameters = dict(schema)
    parameters.setdefault("type", "object")
    if parameters["type"] == "object":
        parameters.setdefault("properties", {})
    return parameters


def _describe(exc: BaseException) -> str:
    """An exception as one line, the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
