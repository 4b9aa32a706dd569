"""Helpers for the MCP tests: the test server's log, a tool call as Qwen3 writes it, an engine
that holds its first turn until the server has seen a call."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from agentkit.engine import GenerationChunk, GenerationRequest, Usage

SERVER = Path(__file__).with_name("_mcp_server.py")


@dataclass
class ServerLog:
    """What the test server wrote about itself (calls started and cancelled, its pid)."""

    path: Path

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    async def wait_for(self, line: str) -> None:
        """Until the server has written ``line`` (at most 20 s)."""
        with anyio.fail_after(20):
            while line not in self.lines():  # noqa: ASYNC110 - another process writes it
                await anyio.sleep(0.02)


@dataclass
class HttpServer:
    """The test server on streamable HTTP: its URL, and its process (to kill it)."""

    url: str
    process: subprocess.Popen[bytes]


def call(name: str, **arguments: object) -> str:
    """A tool call as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


class HoldingEngine:
    """An engine whose first turn emits ``first``, waits for ``until()`` (the tool is running:
    dispatched mid-stream), then emits ``rest``; later turns answer ``answer``."""

    def __init__(
        self, first: str, rest: str, until: Callable[[], Any], answer: str = "done"
    ) -> None:
        self.first = first
        self.rest = rest
        self.until = until
        self.answer = answer
        self.turns = 0

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        self.turns += 1
        if self.turns > 1:
            yield GenerationChunk(self.answer, finish_reason="stop", usage=Usage())
            return
        yield GenerationChunk(self.first)
        await self.until()
        yield GenerationChunk(self.rest, finish_reason="stop", usage=Usage())
