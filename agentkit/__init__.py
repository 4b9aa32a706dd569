"""agentkit: run agents on your own models.

An embeddable async runtime: an engine (vLLM in-process, a remote deployment, or a scripted
one for tests), incremental parsers for each model family's reasoning and tool-call formats,
tools dispatched the moment their call is complete, and a typed transcript that replays each
turn the way the model was trained to see it.
"""

from agentkit._tool_choice import ToolChoice as ToolChoice
from agentkit.agent import Agent as Agent
from agentkit.agent import AgentStream as AgentStream
from agentkit.agent import RunResult as RunResult
from agentkit.agent import RunUsage as RunUsage
from agentkit.approvals import Approve as Approve
from agentkit.approvals import ClientTool as ClientTool
from agentkit.approvals import Deny as Deny
from agentkit.approvals import RunState as RunState
from agentkit.approvals import ToolOutput as ToolOutput
from agentkit.budgets import UsageLimits as UsageLimits
from agentkit.engine import FunctionEngine as FunctionEngine
from agentkit.engine import RemoteEngine as RemoteEngine
from agentkit.engine import ScriptedEngine as ScriptedEngine
from agentkit.engine import VLLMEngine as VLLMEngine
from agentkit.errors import AgentkitError as AgentkitError
from agentkit.errors import ConfigurationError as ConfigurationError
from agentkit.errors import EngineError as EngineError
from agentkit.errors import MaxTurnsExceeded as MaxTurnsExceeded
from agentkit.errors import OutputValidationError as OutputValidationError
from agentkit.errors import RunCancelled as RunCancelled
from agentkit.errors import RunError as RunError
from agentkit.errors import ToolError as ToolError
from agentkit.errors import UsageLimitExceeded as UsageLimitExceeded
from agentkit.profiles import Profile as Profile
from agentkit.profiles import get_profile as get_profile
from agentkit.side_queries import AgentHints as AgentHints
from agentkit.side_queries import SideQueryError as SideQueryError
from agentkit.side_queries import SideQueryResult as SideQueryResult
from agentkit.tools import Tool as Tool
from agentkit.tools import tool as tool
from agentkit.transcript import Message as Message
from agentkit.transcript import ReasoningBlock as ReasoningBlock
from agentkit.transcript import TextBlock as TextBlock
from agentkit.transcript import ToolCallBlock as ToolCallBlock
from agentkit.transcript import ToolResultBlock as ToolResultBlock
from agentkit.transcript import Transcript as Transcript

__version__ = "0.1.0.dev0"

__all__ = [
    "Agent",
    "AgentHints",
    "AgentStream",
    "AgentkitError",
    "Approve",
    "ClientTool",
    "ConfigurationError",
    "Deny",
    "EngineError",
    "FunctionEngine",
    "MaxTurnsExceeded",
    "Message",
    "OutputValidationError",
    "Profile",
    "ReasoningBlock",
    "RemoteEngine",
    "RunCancelled",
    "RunError",
    "RunResult",
    "RunState",
    "RunUsage",
    "ScriptedEngine",
    "SideQueryError",
    "SideQueryResult",
    "TextBlock",
    "Tool",
    "ToolCallBlock",
    "ToolChoice",
    "ToolError",
    "ToolOutput",
    "ToolResultBlock",
    "Transcript",
    "UsageLimitExceeded",
    "UsageLimits",
    "VLLMEngine",
    "__version__",
    "get_profile",
    "tool",
]
