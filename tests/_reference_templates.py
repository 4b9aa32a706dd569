"""The models' own chat templates for the tests outside ``tests/conformance``, rendered from
OpenAI-style messages as ``transformers``' ``apply_chat_template`` renders them.

The templates are the vendors' files: they are read at test time from the shared reference
folder, found as the conformance tests find it (``tests/conformance/_references.py``), and
never copied into the project. A missing one fails the test.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

_CONFORMANCE = str(Path(__file__).resolve().parent / "conformance")
if _CONFORMANCE not in sys.path:
    sys.path.append(_CONFORMANCE)

from _references import template_path  # noqa: E402

from agentkit.profiles._hf_template import _environment  # noqa: E402

__all__ = ["QWEN3", "QWEN3_CODER", "apply_chat_template", "template_path"]

QWEN3 = "qwen3.jinja"
"""Qwen3's template (Qwen/Qwen3-0.6B and the other Qwen3 sizes)."""
QWEN3_CODER = "qwen3-coder.jinja"
"""Qwen3-Coder's template (Qwen/Qwen3-Coder-30B-A3B-Instruct)."""


@cache
def _compile(name: str) -> Any:
    return _environment().from_string(template_path(name).read_text(encoding="utf-8"))


def apply_chat_template(
    name: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, ...)`` with the
    reference template ``name``."""
    return str(
        _compile(name).render(
            messages=[dict(m) for m in messages],
            tools=[dict(t) for t in tools] if tools else None,
            add_generation_prompt=add_generation_prompt,
        )
    )
