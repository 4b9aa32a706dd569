"""Tools from MCP servers (the ``mcp`` extra: ``pip install 'agentkit-local[mcp]'``).

::

    from agentkit.mcp import MCPServer

    files = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
    agent = Agent(engine, tools=[files], profile="qwen3")
    async with files:  # optional: one connection for many runs
        await agent.run("What is in README.md?")

``import agentkit`` never imports this package, nor the ``mcp`` package it needs. See
``docs/mcp.md``.
"""

try:
    import mcp as _mcp  # noqa: F401 - the official SDK, not this package (imports are absolute)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agentkit.mcp needs the official MCP SDK: pip install 'agentkit-local[mcp]'"
    ) from exc

from agentkit.mcp._server import MCPServer as MCPServer
from agentkit.mcp._server import MCPServerError as MCPServerError

__all__ = ["MCPServer", "MCPServerError"]
