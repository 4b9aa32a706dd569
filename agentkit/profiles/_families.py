"""Chat templates, stop strings and parser names of the model families agentkit knows.

Keyed by profile id; the catalog registers profiles from these tables. Reasoning names are
:func:`~agentkit.parsing.get_reasoning_syntax` names, tool names
:func:`~agentkit.parsing.get_tool_syntax` names (``"harmony"`` for both: the whole-stream
parser). Families whose generation prompt ends with ``<think>`` (DeepSeek in thinking mode,
GLM-4.7, MiniMax-M2) need a reasoning syntax that starts inside the block: ``deepseek_r1`` has
exactly the ``<think>``/``</think>`` markers with ``starts_inside``.
"""

from __future__ import annotations

from agentkit.parsing import get_tool_syntax
from agentkit.profiles._chatml import IM_END, ChatMLTemplate, hermes_tools_section
from agentkit.profiles._deepseek import (
    EOS,
    DeepSeekDsmlTemplate,
    DeepSeekR1Template,
    DeepSeekV31Template,
)
from agentkit.profiles._deepseek_v41 import DeepSeekV41Template
from agentkit.profiles._glm import GLM_STOPS, GlmTemplate
from agentkit.profiles._harmony_template import HARMONY_STOPS, HarmonyTemplate
from agentkit.profiles._kimi import KimiK2Template
from agentkit.profiles._llama import Llama3Template
from agentkit.profiles._minimax import MiniMaxM2Template
from agentkit.profiles._mistral import MistralTemplate
from agentkit.profiles._profile import ChatTemplate

__all__ = ["FAMILY_FORMATS", "FAMILY_STOPS", "FAMILY_TEMPLATES"]

FAMILY_TEMPLATES: dict[str, ChatTemplate] = {
    "deepseek-r1": DeepSeekR1Template(),
    "deepseek-v3.1": DeepSeekV31Template(thinking=True),
    "deepseek-v3.2": DeepSeekDsmlTemplate("v3.2", thinking=True),
    "deepseek-v4": DeepSeekDsmlTemplate("v4", thinking=True),
    "deepseek-v4.1": DeepSeekV41Template(),
    "kimi-k2": KimiK2Template(thinking=True),
    "glm-4.5": GlmTemplate("4.5"),
    "glm-4.7": GlmTemplate("4.7"),
    "minimax-m2": MiniMaxM2Template(),
    "gpt-oss": HarmonyTemplate(),
    "llama3": Llama3Template(),
    "mistral-v11": MistralTemplate("v11"),
    "mistral-v13": MistralTemplate("v13"),
    "generic": ChatMLTemplate(get_tool_syntax("hermes"), hermes_tools_section),
}

FAMILY_STOPS: dict[str, tuple[str, ...]] = {
    "deepseek-r1": (EOS,),
    "deepseek-v3.1": (EOS,),
    "deepseek-v3.2": (EOS,),
    "deepseek-v4": (EOS,),
    "deepseek-v4.1": (EOS,),
    "kimi-k2": ("<|im_end|>",),
    "glm-4.5": GLM_STOPS,
    "glm-4.7": GLM_STOPS,
    "minimax-m2": ("[e~[",),
    "gpt-oss": HARMONY_STOPS,
    "llama3": ("<|eot_id|>", "<|eom_id|>"),
    "mistral-v11": ("</s>",),
    "mistral-v13": ("</s>",),
    "generic": (IM_END,),
}

FAMILY_FORMATS: dict[str, tuple[str | None, str | None]] = {
    "deepseek-r1": ("deepseek_r1", "deepseek_v3"),
    "deepseek-v3.1": ("deepseek_v31", "deepseek_v31"),
    "deepseek-v3.2": ("deepseek_v32", "deepseek_v32"),
    "deepseek-v4": ("deepseek_v4", "deepseek_v4"),
    "deepseek-v4.1": ("deepseek_v4", "deepseek_v41"),
    # K2-Thinking writes <think>...</think> itself ("kimi" is Kimi-VL's ◁think▷).
    "kimi-k2": ("think", "kimi_k2"),
    "glm-4.5": ("glm45", "glm45"),
    "glm-4.7": ("deepseek_r1", "glm47"),
    "minimax-m2": ("deepseek_r1", "minimax_m2"),
    "gpt-oss": ("harmony", "harmony"),
    "llama3": (None, "llama3_json"),
    # v11 has no reasoning form; v13 writes [THINK]...[/THINK].
    "mistral-v11": (None, "mistral_v11"),
    "mistral-v13": ("mistral", "mistral"),
    "generic": ("think", "hermes"),
}
