"""Tools from an MCP server: the agent spawns the server and offers the model its tools.

Run it: ``python examples/mcp_tools.py`` (needs the ``mcp`` extra:
``pip install 'agentkit-local[mcp]'``). It is self-contained and offline: run as
``python examples/mcp_tools.py serve`` this same file is a small MCP server (the official SDK's
``MCPServer``, on stdio), and a ``FunctionEngine`` stands in for the model, so that the example
shows the plumbing, not a model's judgement. With a real engine, only the ``engine=`` line
changes.
"""

from __future__ import annotations

import json
import sys

import anyio

import agentkit
from agentkit.engine import FunctionEngine, ScriptedCall
from agentkit.mcp import MCPServer


def serve() -> None:
    """The MCP server: two tools, one of which can fail."""
    from mcp.server.mcpserver import MCPServer as SDKServer
    from mcp.server.mcpserver.exceptions import ToolError

    app = SDKServer("inventory", log_level="WARNING")
    stock = {"apples": 12, "pears": 0}

    @app.tool()
    def count(item: str) -> int:
        """How many of an item are in stock."""
        if item not in stock:
            raise ToolError(f"unknown item {item!r}; known: {', '.join(stock)}")
        return stock[item]

    @app.tool()
    def items() -> list[str]:
        """Every item the shop sells."""
        return list(stock)

    app.run()  # stdio


def call(name: str, **arguments: object) -> str:
    """A tool call as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def model(request: ScriptedCall) -> str:
    """Stands in for the model: asks the server, then answers from what it said."""
    item = (request.first_user_text or "").split()[-1].rstrip("?")
    if not request.tool_results:
        return call("shop_count", item=item)
    result = request.tool_results[-1]
    if result.is_error:
        return f"I could not look that up: {result.content}"
    return f"We have {result.content} {item}."


async def main() -> None:
    server = MCPServer.stdio(sys.executable, [__file__, "serve"], prefix="shop")
    agent = agentkit.Agent(FunctionEngine(model), tools=[server], profile="qwen3")

    # One run: the run starts the server, lists its tools, and closes it at the end.
    result = await agent.run("How many apples?")
    print(result.output_text)  # We have 12 apples.
    assert result.output_text == "We have 12 apples."

    # Many runs on one connection: open the server around them.
    async with server:
        print([tool.name for tool in server.tools])  # ['shop_count', 'shop_items']
        for question in ("How many pears?", "How many plums?"):
            result = await agent.run(question)
            print(result.output_text)
    # The server's error result reached the model as an error it could read.
    assert "unknown item 'plums'" in result.output_text


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        anyio.run(main)
