"""Tool-call syntaxes, by name."""

from __future__ import annotations

from agentkit.errors import ConfigurationError
from agentkit.parsing._base import ToolSyntax
from agentkit.parsing.tools.hermes import HERMES as HERMES
from agentkit.parsing.tools.hermes import HermesToolSyntax as HermesToolSyntax
from agentkit.parsing.tools.qwen3_coder import QWEN3_CODER as QWEN3_CODER
from agentkit.parsing.tools.qwen3_coder import Qwen3CoderToolSyntax as Qwen3CoderToolSyntax

__all__ = [
    "HERMES",
    "QWEN3_CODER",
    "HermesToolSyntax",
    "Qwen3CoderToolSyntax",
    "get_tool_syntax",
    "tool_syntax_names",
]

_SYNTAXES: dict[str, ToolSyntax] = {
    "hermes": HERMES,
    "qwen25": HERMES,
    "qwen2_5": HERMES,
    "qwen3_coder": QWEN3_CODER,
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(".", "_")


def tool_syntax_names() -> list[str]:
    """Every name :func:`get_tool_syntax` accepts, aliases included."""
    return sorted(_SYNTAXES)


def get_tool_syntax(name: str) -> ToolSyntax:
    """The tool-call syntax called ``name`` (case, ``-``, ``_`` and ``.`` do not matter)."""
    try:
        return _SYNTAXES[_normalise(name)]
    except KeyError:
        raise ConfigurationError(
            f"unknown tool-call syntax {name!r}; valid choices: " + ", ".join(tool_syntax_names())
        ) from None
