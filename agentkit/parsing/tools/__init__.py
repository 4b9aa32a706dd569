"""Tool-call syntaxes, by name."""

from __future__ import annotations

from agentkit.errors import ConfigurationError
from agentkit.parsing._base import ToolSyntax
from agentkit.parsing.tools.deepseek import DEEPSEEK_V3 as DEEPSEEK_V3
from agentkit.parsing.tools.deepseek import DEEPSEEK_V31 as DEEPSEEK_V31
from agentkit.parsing.tools.dsml import DEEPSEEK_V4 as DEEPSEEK_V4
from agentkit.parsing.tools.dsml import DEEPSEEK_V32 as DEEPSEEK_V32
from agentkit.parsing.tools.dsml import DEEPSEEK_V41 as DEEPSEEK_V41
from agentkit.parsing.tools.glm import GLM45 as GLM45
from agentkit.parsing.tools.glm import GLM47 as GLM47
from agentkit.parsing.tools.hermes import HERMES as HERMES
from agentkit.parsing.tools.hermes import HermesToolSyntax as HermesToolSyntax
from agentkit.parsing.tools.kimi_k2 import KIMI_K2 as KIMI_K2
from agentkit.parsing.tools.llama3 import LLAMA3_JSON as LLAMA3_JSON
from agentkit.parsing.tools.minimax_m2 import MINIMAX_M2 as MINIMAX_M2
from agentkit.parsing.tools.mistral import MISTRAL as MISTRAL
from agentkit.parsing.tools.mistral import MISTRAL_LEGACY as MISTRAL_LEGACY
from agentkit.parsing.tools.mistral import MISTRAL_V11 as MISTRAL_V11
from agentkit.parsing.tools.nemotron import NEMOTRON_DECI as NEMOTRON_DECI
from agentkit.parsing.tools.pythonic import PYTHONIC as PYTHONIC
from agentkit.parsing.tools.qwen3_coder import QWEN3_CODER as QWEN3_CODER
from agentkit.parsing.tools.qwen3_coder import Qwen3CoderToolSyntax as Qwen3CoderToolSyntax

__all__ = [
    "DEEPSEEK_V3",
    "DEEPSEEK_V4",
    "DEEPSEEK_V31",
    "DEEPSEEK_V32",
    "DEEPSEEK_V41",
    "GLM45",
    "GLM47",
    "HERMES",
    "KIMI_K2",
    "LLAMA3_JSON",
    "MINIMAX_M2",
    "MISTRAL",
    "MISTRAL_LEGACY",
    "MISTRAL_V11",
    "NEMOTRON_DECI",
    "PYTHONIC",
    "QWEN3_CODER",
    "HermesToolSyntax",
    "Qwen3CoderToolSyntax",
    "get_tool_syntax",
    "tool_syntax_names",
]

_SYNTAXES: dict[str, ToolSyntax] = {
    "deepseek_v3": DEEPSEEK_V3,
    "deepseek_v31": DEEPSEEK_V31,
    "deepseek_v3_1": DEEPSEEK_V31,
    "deepseek_v32": DEEPSEEK_V32,
    "deepseek_v3_2": DEEPSEEK_V32,
    "deepseek_v4": DEEPSEEK_V4,
    "deepseek_v41": DEEPSEEK_V41,
    "deepseek_v4_1": DEEPSEEK_V41,
    "glm45": GLM45,
    "glm4_5": GLM45,
    "glm4": GLM45,
    "glm47": GLM47,
    "glm4_7": GLM47,
    "hermes": HERMES,
    "kimi_k2": KIMI_K2,
    "llama3_json": LLAMA3_JSON,
    "llama3": LLAMA3_JSON,
    "llama4_json": LLAMA3_JSON,
    "minimax_m2": MINIMAX_M2,
    "minimax": MINIMAX_M2,
    "mistral": MISTRAL,
    "mistral_legacy": MISTRAL_LEGACY,
    "mistral_v11": MISTRAL_V11,
    "nemotron_deci": NEMOTRON_DECI,
    "nemotron": NEMOTRON_DECI,
    "pythonic": PYTHONIC,
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
