"""Reasoning syntaxes, by name."""

from __future__ import annotations

from agentkit.errors import ConfigurationError
from agentkit.parsing._base import ReasoningSyntax
from agentkit.parsing.reasoning.markers import DEEPSEEK_V3_1 as DEEPSEEK_V3_1
from agentkit.parsing.reasoning.markers import DEEPSEEK_V4 as DEEPSEEK_V4
from agentkit.parsing.reasoning.markers import KIMI as KIMI
from agentkit.parsing.reasoning.markers import MISTRAL as MISTRAL
from agentkit.parsing.reasoning.markers import SEED_OSS as SEED_OSS
from agentkit.parsing.reasoning.think import DEEPSEEK_R1 as DEEPSEEK_R1
from agentkit.parsing.reasoning.think import THINK as THINK

__all__ = [
    "DEEPSEEK_R1",
    "DEEPSEEK_V3_1",
    "DEEPSEEK_V4",
    "KIMI",
    "MISTRAL",
    "SEED_OSS",
    "THINK",
    "get_reasoning_syntax",
    "reasoning_syntax_names",
]

_SYNTAXES: dict[str, ReasoningSyntax] = {
    "think": THINK,
    "qwen3": THINK,
    "deepseek_r1": DEEPSEEK_R1,
    "r1": DEEPSEEK_R1,
    "deepseek_v3_1": DEEPSEEK_V3_1,
    "deepseek_v31": DEEPSEEK_V3_1,
    "deepseek_v3_2": DEEPSEEK_V3_1,
    "deepseek_v32": DEEPSEEK_V3_1,
    "deepseek_v4": DEEPSEEK_V4,
    "nemotron_deci": THINK,
    "glm45": THINK,
    "minimax_m2": THINK,
    "kimi": KIMI,
    "mistral": MISTRAL,
    "seed_oss": SEED_OSS,
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(".", "_")


def reasoning_syntax_names() -> list[str]:
    """Every name :func:`get_reasoning_syntax` accepts, aliases included."""
    return sorted(_SYNTAXES)


def get_reasoning_syntax(name: str) -> ReasoningSyntax:
    """The reasoning syntax called ``name`` (case and ``-``/``_`` do not matter)."""
    try:
        return _SYNTAXES[_normalise(name)]
    except KeyError:
        raise ConfigurationError(
            f"unknown reasoning syntax {name!r}; valid choices: "
            + ", ".join(reasoning_syntax_names())
        ) from None
