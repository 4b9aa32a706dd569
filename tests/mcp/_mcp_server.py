"""A small MCP server for the tests, built with the official SDK's ``MCPServer``.

Run as ``python _mcp_server.py LOG [stdio | http PORT]``. It appends what the tests must observe
from the server's side (a call cancelled, a call started) to LOG, one line each, so that a
test can wait for a line instead of sleeping.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

LOG = Path(sys.argv[1])
app = MCPServer("agentkit-test", log_level="WARNING")


def note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@app.tool()
def fail(message: str) -> str:
    """Always fails, with the message."""
    raise ToolError(message)


@app.tool()
async def wait(label: str) -> str:
    """Waits until cancelled (notes when it starts and when it is cancelled)."""
    note(f"started {label}")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        note(f"cancelled {label}")
        raise
    return "never"


@app.tool()
def die() -> str:
    """Exits the server process at once, mid-call."""
    note("dying")
    os._exit(3)


@app.tool()
def picture() -> list[ImageContent | TextContent]:
    """A text and a 5-byte PNG-typed image."""
    data = base64.b64encode(b"hello").decode()
    return [
        TextContent(type="text", text="a picture:"),
        ImageContent(data=data, mime_type="image/png"),
    ]


@app.tool()
async def grow(ctx: Context) -> str:
    """Adds a tool named ``extra`` and says the tool list changed."""

    def extra() -> str:
        """A tool that appears later."""
        return "extra!"

    app.add_tool(extra)
    await ctx.notify_tools_changed()  # 2026-07-28 clients: subscriptions/listen
    await ctx.session.send_tool_list_changed()  # handshake-era clients: a notification
    return "grown"


if __name__ == "__main__":
    note(f"pid {os.getpid()}")
    if len(sys.argv) > 3 and sys.argv[2] == "http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        app.run()
