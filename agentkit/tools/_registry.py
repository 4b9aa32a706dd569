"""The set of tools an agent offers, by name.

Names are the only thing a model can use to pick a tool, so two tools with one name are a
setup mistake caught here, not a coin toss at dispatch time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.tools._tool import Tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Tools by name, in the order they were added (the order the model sees them in).

    Accepts :class:`Tool` objects and plain functions, which are wrapped with
    :meth:`Tool.from_function`.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        """Register a tool (or a function, wrapped); a name already taken is an error."""
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        if new.name in self._tools:
            raise ConfigurationError(f"a tool named {new.name!r} is already registered")
        self._tools[new.name] = new
        return new

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> dict[str, dict[str, Any]]:
        """Each tool's parameters schema, by name."""
        return {name: tool.parameters for name, tool in self._tools.items()}

    def specs(self) -> list[dict[str, Any]]:
        """Every tool in OpenAI's function-calling shape, for the chat template."""
        return [tool.spec() for tool in self._tools.values()]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names!r})"
