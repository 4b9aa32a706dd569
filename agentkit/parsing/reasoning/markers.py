"""Reasoning delimiters other than a model-written ``<think>`` (see :mod:`.think` for those).

Each is a plain :class:`~agentkit.parsing.ReasoningSyntax`; the driver does the rest.
"""

from __future__ import annotations

from agentkit.parsing._base import ReasoningSyntax

__all__ = ["DEEPSEEK_V3_1", "DEEPSEEK_V4", "KIMI", "MISTRAL", "SEED_OSS"]

KIMI = ReasoningSyntax("kimi", "◁think▷", "◁/think▷")
"""Kimi-VL / Kimi-K1.5 thinking models."""

MISTRAL = ReasoningSyntax("mistral", "[THINK]", "[/THINK]")
"""Magistral and Mistral models with tokenizer v13+ (special ``[THINK]`` tokens)."""

DEEPSEEK_V4 = ReasoningSyntax("deepseek_v4", "<think>", "</think>", starts_inside=True)
"""DeepSeek-V4 in thinking mode: the chat template ends the prompt with ``<think>``."""

DEEPSEEK_V3_1 = ReasoningSyntax("deepseek_v3_1", "<think>", "</think>", starts_inside=True)
"""DeepSeek-V3.1/V3.2 in thinking mode: the prompt ends with ``<think>`` too. (In
non-thinking mode the prompt closes the block, and such a turn has no reasoning syntax.)"""

SEED_OSS = ReasoningSyntax("seed_oss", "<seed:think>", "</seed:think>")
"""ByteDance Seed-OSS."""
