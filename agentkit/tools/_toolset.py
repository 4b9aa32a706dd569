"""Toolsets: tools that exist only once something has been started.

An MCP server's tools are known only after the server is running and has listed them, and
the list can change while it runs. A :class:`Toolset` is that kind of source: started,
listed, closed. The tools it lists are ordinary :class:`~agentkit.tools.Tool` objects (a
schema and an async handler), so the dispatcher, approvals, timeouts and argument checks treat
them like any other tool; only the registry knows they came from a toolset.

``start`` and ``close`` belong to one task (a toolset may run its own background work in a
task group it enters in ``start`` and leaves in ``close``): an agent run that starts a
toolset closes it in the same task when the run ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentkit.tools._tool import Tool

__all__ = ["Toolset"]


@runtime_checkable
class Toolset(Protocol):
    """A source of tools that must be started before its tools can be listed or called."""

    @property
    def name(self) -> str:
        """What the toolset is called in messages and logs."""
        ...

    @property
    def running(self) -> bool:
        """Whether it is started (or starting): a run then uses it as it is."""
        ...

    async def start(self) -> None:
        """Start it (connect, spawn, list its tools); an error here stops the run."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """Its tools now, re-listed where the source said its list changed."""
        ...

    async def close(self) -> None:
        """Stop it; calls still in flight end as error results. It must run to its end in
        a cancelled task too (shielding its own work: the caller adds no scope around it)."""
        ...
