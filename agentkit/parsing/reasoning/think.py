"""``<think>`` ... ``</think>`` reasoning, the convention of Qwen3, DeepSeek-R1 and most
open reasoning models.

Two variants differ only in where the output starts. Qwen3 writes the start marker itself;
DeepSeek-R1's chat template ends the prompt with ``<think>\\n``, so its output begins inside the
block (``starts_inside``) and may never contain the start marker at all. For that variant an
output without ``</think>`` is all reasoning: the model was cut off while thinking (vLLM reports
such an output as content; here it stays reasoning, which is what the model was doing).
"""

from __future__ import annotations

from agentkit.parsing._base import ReasoningSyntax

__all__ = ["DEEPSEEK_R1", "THINK"]

THINK = ReasoningSyntax("think", "<think>", "</think>")
"""The model opens and closes the block itself (Qwen3, QwQ, most fine-tunes)."""

DEEPSEEK_R1 = ReasoningSyntax("deepseek_r1", "<think>", "</think>", starts_inside=True)
"""The prompt already opened the block (DeepSeek-R1 and its distills)."""
