"""The typed transcript and its rendering."""

from agentkit.transcript._model import ContentBlock as ContentBlock
from agentkit.transcript._model import Message as Message
from agentkit.transcript._model import ReasoningBlock as ReasoningBlock
from agentkit.transcript._model import Role as Role
from agentkit.transcript._model import TextBlock as TextBlock
from agentkit.transcript._model import ToolCallBlock as ToolCallBlock
from agentkit.transcript._model import ToolResultBlock as ToolResultBlock
from agentkit.transcript._model import Transcript as Transcript

__all__ = [
    "ContentBlock",
    "Message",
    "ReasoningBlock",
    "Role",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "Transcript",
]
