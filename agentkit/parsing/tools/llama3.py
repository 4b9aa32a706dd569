"""Llama 3.1-3.3 JSON tool calls: ``{"name": "f", "parameters": {...}}``.

The model writes the call as the whole output, optionally after ``<|python_tag|>``; several
calls are separated by ``;``. ``"arguments"`` is accepted for ``"parameters"``, and extra
members (``"type": "function"``) are ignored. Because a call usually has no marker of its
own, ``{`` opens a section only at the very start of the output (:attr:`leading_markers`);
``<|python_tag|>`` opens one anywhere. A trailing ``<|eom_id|>``/``<|eot_id|>`` is consumed
as the end of the section.

A section opened by the leading ``{`` may turn out to be an ordinary JSON answer. It then
ends with an error call and sets :attr:`~agentkit.parsing.ToolSection.rejected`, and the
driver keeps the marker and the section's bytes as text. With tool schemas, a name that is not
one of the tools rejects it too. The JSON itself is read by :mod:`._json_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from agentkit.parsing._base import JSONSchema, ToolSection, ToolSyntax
from agentkit.parsing.tools._json_calls import JsonCallList, JsonCallSection
from agentkit.transcript import ToolCallBlock

__all__ = ["LLAMA3_JSON", "Llama3JsonToolSyntax"]

PYTHON_TAG = "<|python_tag|>"
EOM = "<|eom_id|>"
EOT = "<|eot_id|>"


class Llama3JsonToolSyntax(ToolSyntax):
    """``{"name": ..., "parameters": {...}}``, optionally after ``<|python_tag|>``."""

    name = "llama3_json"
    start_markers = (PYTHON_TAG,)
    leading_markers: tuple[str, ...] = ("{",)
    """Markers that open a section only at the start of the output (after whitespace)."""

    def new_section(self, start_marker: str, schemas: Mapping[str, JSONSchema]) -> ToolSection:
        leading = start_marker in self.leading_markers
        calls = JsonCallList(
            start="object",
            opened=leading,
            separator=";",
            ends=(EOM, EOT),
            leading=leading,
            accept=schemas.__contains__ if leading and schemas else None,
        )
        return JsonCallSection(calls)

    def render(self, calls: Sequence[ToolCallBlock]) -> str:
        return "; ".join(
            json.dumps({"name": c.name, "parameters": c.arguments}, ensure_ascii=False)
            for c in calls
        )


LLAMA3_JSON = Llama3JsonToolSyntax()
