"""Tools: definitions from typed functions, and the dispatcher that runs them."""

from agentkit.tools._dispatch import Dispatcher as Dispatcher
from agentkit.tools._dispatch import DispatchStats as DispatchStats
from agentkit.tools._dispatch import DispatchTurn as DispatchTurn
from agentkit.tools._dispatch import ResultCallback as ResultCallback
from agentkit.tools._registry import ToolRegistry as ToolRegistry
from agentkit.tools._tool import Tool as Tool
from agentkit.tools._tool import ToolHandler as ToolHandler
from agentkit.tools._tool import tool as tool
from agentkit.tools._toolset import Toolset as Toolset

__all__ = [
    "DispatchStats",
    "DispatchTurn",
    "Dispatcher",
    "ResultCallback",
    "Tool",
    "ToolHandler",
    "ToolRegistry",
    "Toolset",
    "tool",
]
