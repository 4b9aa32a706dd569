"""A fake toolset for tests: its tools are known only once started, and it counts its
starts and closes (as an MCP server is started and closed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentkit.errors import ToolExecutionError
from agentkit.tools import Tool

__all__ = ["FakeToolset"]


class FakeToolset:
    """A toolset whose tools are known only once started, counting its starts and closes."""

    def __init__(self, name: str, *tool_names: str) -> None:
        self._name = name
        self.tool_names = list(tool_names)
        self.started = 0
        self.closed = 0
        self._running = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> None:
        self.started += 1
        self._running = True

    async def close(self) -> None:
        self.closed += 1
        self._running = False

    async def list_tools(self) -> Sequence[Tool]:
        assert self._running, "listed before it was started"
        return [
            Tool(name, f"{self._name}'s {name}", {"type": "object"}, self._handler(name))
            for name in self.tool_names
        ]

    def _handler(self, name: str) -> Any:
        async def run(arguments: dict[str, Any]) -> str:
            if name == "broken":
                raise ToolExecutionError("it broke", call_id="", tool_name=name)
            return f"{self._name}.{name}"

        return run
