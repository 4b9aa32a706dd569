"""One way to build the parser for a pair of format names.

Most formats compose (a reasoning syntax and a tool syntax driven by
:class:`~agentkit.parsing.MarkerStreamParser`); a few own the whole stream, as gpt-oss Harmony
does with its channels. Profiles, the CLI and the HTTP adapters build parsers only through
:func:`create_parser`, so adding a whole-stream format changes one table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType

from agentkit.errors import ConfigurationError
from agentkit.parsing._base import CallsInReasoning, JSONSchema, StreamParser
from agentkit.parsing._stream import MarkerStreamParser
from agentkit.parsing.harmony import HarmonyParser
from agentkit.parsing.reasoning import get_reasoning_syntax
from agentkit.parsing.tools import get_tool_syntax

__all__ = ["create_parser", "stream_format_names"]

_STREAM_FORMATS = ("harmony",)


def stream_format_names() -> list[str]:
    """Formats that parse reasoning and tool calls together (name both parsers so)."""
    return list(_STREAM_FORMATS)


def create_parser(
    reasoning: str | None,
    tools: str | None,
    *,
    tool_schemas: Mapping[str, JSONSchema] = MappingProxyType({}),
    calls_in_reasoning: CallsInReasoning = "end_reasoning",
    id_factory: Callable[[], str] | None = None,
    thinking: bool = True,
) -> StreamParser:
    """A fresh parser for one model turn, from the formats' registered names.

    ``"harmony"`` (as either name) selects the whole-stream Harmony parser; the other name must
    then be ``"harmony"`` or ``None``. ``thinking=False``: the prompt closed the reasoning block
    (thinking turned off, as Nemotron-3's ``<think></think>``), so the output does not start
    inside one even where the reasoning syntax says so (``starts_inside``); it is text until
    the model opens a block itself.
    """
    whole = {n for n in (reasoning, tools) if n is not None and n.lower() in _STREAM_FORMATS}
    if whole:
        other = {reasoning, tools} - whole - {None}
        if other:
            raise ConfigurationError(
                f"{next(iter(whole))!r} parses reasoning and tool calls together; "
                f"it cannot be combined with {next(iter(other))!r}"
            )
        return HarmonyParser(tool_schemas=tool_schemas, id_factory=id_factory)
    syntax = get_reasoning_syntax(reasoning) if reasoning else None
    if syntax is not None and syntax.starts_inside and not thinking:
        syntax = dataclasses.replace(syntax, starts_inside=False)
    return MarkerStreamParser(
        syntax,
        get_tool_syntax(tools) if tools else None,
        tool_schemas=tool_schemas,
        calls_in_reasoning=calls_in_reasoning,
        id_factory=id_factory,
    )
