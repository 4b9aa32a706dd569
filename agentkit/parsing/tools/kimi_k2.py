"""Kimi K2 tool calls.

::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

(without the line break; nothing separates calls). The header ``functions.NAME:IDX`` is the
call's id: it is kept as the call id, because the model refers to its results by it; the name
is the part between ``functions.`` and the last ``:``. Tolerated: the singular
``<|tool_call_section_begin|>`` / ``_end`` markers, a header without the ``functions.`` prefix
(kept as the id when it still ends in ``:IDX``), a header without an index (the driver then
assigns an id). Parsing is :mod:`._delimited`'s, as for DeepSeek-V3.
"""

from __future__ import annotations

import re

from agentkit.parsing.tools._delimited import (
    CallGrammar,
    DelimitedToolSyntax,
    MalformedHeader,
    dump_arguments,
)
from agentkit.transcript import ToolCallBlock

__all__ = ["KIMI_K2"]

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
SECTION_BEGIN_SINGULAR = "<|tool_call_section_begin|>"
SECTION_END_SINGULAR = "<|tool_call_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_PREFIX = "functions."
_ID = re.compile(r"functions\.(.+):\d+")


def _header(header: str) -> tuple[str, str | None]:
    call_id = header.removesuffix(ARGUMENT_BEGIN).strip()
    body = call_id.removeprefix(_PREFIX)
    name, colon, index = body.rpartition(":")
    if not colon or not index.strip().isdigit():
        name, call_id = body, ""
    name = name.strip()
    if not name:
        raise MalformedHeader("the call has no function name")
    return name, call_id or None


def _call(call: ToolCallBlock, index: int) -> str:
    call_id = _call_id(call, index)
    return f"{CALL_BEGIN}{call_id}{ARGUMENT_BEGIN}{dump_arguments(call.arguments)}{CALL_END}"


def _call_id(call: ToolCallBlock, index: int) -> str:
    """The call's own id when it is Kimi's ``functions.NAME:IDX`` for this name, else a new one."""
    match = _ID.fullmatch(call.id)
    if match and match.group(1) == call.name:
        return call.id
    return f"{_PREFIX}{call.name}:{index}"


KIMI_K2 = DelimitedToolSyntax(
    "kimi_k2",
    CallGrammar(
        section_begins=(SECTION_BEGIN, SECTION_BEGIN_SINGULAR),
        section_ends=(SECTION_END, SECTION_END_SINGULAR),
        call_begin=CALL_BEGIN,
        call_end=CALL_END,
        header_end=ARGUMENT_BEGIN,
        parse_header=_header,
        shape=(
            "Write each call as: the call begin token, functions.NAME:INDEX, the argument "
            "begin token, the arguments as one JSON object, then the call end token."
        ),
    ),
    _call,
)
"""Kimi K2: ``functions.NAME:IDX`` + JSON arguments per call, in one section."""
