"""The set of tools an agent offers, by name.

Names are the only thing a model can use to pick a tool, so two tools with one name are a
setup mistake caught here, not a coin toss at dispatch time.

Besides tools, a registry holds :class:`~agentkit.tools.Toolset` objects (an MCP server...),
whose tools are known only once they run: :meth:`ToolRegistry.running` starts those not yet
running for a block (an agent run) and lists their tools into the registry, in the order the
toolsets were added among the other tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.tools._tool import Tool
from agentkit.tools._toolset import Toolset

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Tools by name, in the order they were added (the order the model sees them in).

    Accepts :class:`Tool` objects, plain functions, which are wrapped with
    :meth:`Tool.from_function`, and :class:`~agentkit.tools.Toolset` objects, whose tools join
    once :meth:`running` (or :meth:`refresh`) has listed them.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any] | Toolset] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._entries: list[Tool | Toolset] = []
        for item in tools:
            if isinstance(item, Toolset):
                self.add_toolset(item)
            else:
                self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        """Register a tool (or a function, wrapped); a name already taken is an error."""
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        if new.name in self._tools:
            raise ConfigurationError(f"a tool named {new.name!r} is already registered")
        self._tools[new.name] = new
        self._entries.append(new)
        return new

    def add_toolset(self, toolset: Toolset) -> Toolset:
        """Register a toolset; its tools are listed when it runs (see :meth:`running`)."""
        if any(entry is toolset for entry in self._entries):
            raise ConfigurationError(f"toolset {toolset.name!r} is already registered")
        self._entries.append(toolset)
        return toolset

    @property
    def toolsets(self) -> list[Toolset]:
        return [entry for entry in self._entries if isinstance(entry, Toolset)]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Start the toolsets not yet running, list every toolset's tools, and close the
        ones started here when the block ends (in this task: see :class:`Toolset`).

        The tool list is fixed for the block, so that every turn of a run offers the model the
        same tools (and the prompt prefix stays stable); a toolset whose list changed is
        re-listed at the next block. With no toolsets this costs nothing.
        """
        started: list[Toolset] = []
        try:
            for toolset in self.toolsets:
                if not toolset.running:
                    started.append(toolset)
                    await toolset.start()
            await self.refresh()
            yield
        finally:
            # No shielding scope here: a toolset's close leaves the task group its start
            # entered, in this task, and shields itself (see Toolset.close).
            for toolset in reversed(started):
                await toolset.close()

    async def refresh(self) -> None:
        """List each toolset's tools again (each lists only if its tools changed) and rebuild
        the names; a name two sources share is a :class:`~agentkit.errors.ConfigurationError`
        naming both."""
        toolsets = self.toolsets
        if not toolsets:
            return
        listed = {id(ts): list(await ts.list_tools()) for ts in toolsets}
        tools: dict[str, Tool] = {}
        for entry in self._entries:
            source = "" if isinstance(entry, Tool) else f" (from toolset {entry.name!r})"
            for tool in [entry] if isinstance(entry, Tool) else listed[id(entry)]:
                if tool.name in tools:
                    raise ConfigurationError(
                        f"a tool named {tool.name!r}{source} is already registered; "
                        "give the toolset a prefix or filter its tools"
                    )
                tools[tool.name] = tool
        self._tools = tools  # replaced whole: a concurrent run's lookups see one list or the other

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
