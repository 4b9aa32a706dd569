"""The public surface is exactly what we mean to export, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import agentkit


def test_top_level_exports() -> None:
    assert agentkit.__all__ == sorted(agentkit.__all__)
    assert set(agentkit.__all__) == {
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
        "RunState",
        "RunResult",
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
    }
    for name in agentkit.__all__:
        assert getattr(agentkit, name) is not None


def test_import_does_not_load_heavy_dependencies() -> None:
    code = (
        "import sys, agentkit; "
        "print(sorted(m for m in ('vllm', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
