"""DeepSeek-V3 and DeepSeek-V3.1 tool calls.

DeepSeek-V3 (V3-0324, R1-0528) writes, calls separated by a newline::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

DeepSeek-V3.1 drops the type and the fence:
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>``.

Both are sections of header + JSON-object calls, parsed by :mod:`._delimited`. The V3 parser
also reads a header without the type (``NAME\\n``), and the V3.1 shape.
"""

from __future__ import annotations

from agentkit.parsing.tools._delimited import (
    CallGrammar,
    DelimitedToolSyntax,
    HeaderParser,
    MalformedHeader,
    dump_arguments,
)
from agentkit.transcript import ToolCallBlock

__all__ = ["DEEPSEEK_V3", "DEEPSEEK_V31"]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"


def _v3_header(header: str) -> tuple[str, str | None]:
    kind, sep, name = header.partition(SEP)
    name = name.strip()
    if not sep or (not name and kind.strip() != "function"):
        name = kind.strip()  # no type (``NAME\n``), or the V3.1 shape (``NAME<sep>{``)
    if not name:
        raise MalformedHeader("the call has no function name")
    return name, None


def _v31_header(header: str) -> tuple[str, str | None]:
    name = header.removesuffix(SEP).strip()
    if not name:
        raise MalformedHeader("the call has no function name")
    return name, None


def _v3_call(call: ToolCallBlock, index: int) -> str:
    return (
        f"{CALL_BEGIN}function{SEP}{call.name}\n```json\n{dump_arguments(call.arguments)}\n```"
        f"{CALL_END}"
    )


def _v31_call(call: ToolCallBlock, index: int) -> str:
    return f"{CALL_BEGIN}{call.name}{SEP}{dump_arguments(call.arguments)}{CALL_END}"


def _grammar(header_end: str, parse_header: HeaderParser, shape: str) -> CallGrammar:
    return CallGrammar(
        section_begins=(CALLS_BEGIN,),
        section_ends=(CALLS_END,),
        call_begin=CALL_BEGIN,
        call_end=CALL_END,
        header_end=header_end,
        parse_header=parse_header,
        shape=shape,
    )


DEEPSEEK_V3 = DelimitedToolSyntax(
    "deepseek_v3",
    _grammar(
        "\n",
        _v3_header,
        "Write each call as: the call begin token, function, the separator token, the "
        "function name, a newline, the arguments as one JSON object in a ```json block, "
        "then the call end token.",
    ),
    _v3_call,
    separator="\n",
)
"""DeepSeek-V3: a ```json block per call; calls separated by newlines."""

DEEPSEEK_V31 = DelimitedToolSyntax(
    "deepseek_v31",
    _grammar(
        SEP,
        _v31_header,
        "Write each call as: the call begin token, the function name, the separator token, "
        "the arguments as one JSON object, then the call end token.",
    ),
    _v31_call,
)
"""DeepSeek-V3.1: ``NAME<sep>{JSON}`` per call, nothing between calls."""
