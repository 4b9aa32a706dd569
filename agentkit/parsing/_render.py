"""The model-format text of parsed blocks: what a transcript replays to the model."""

from __future__ import annotations

from collections.abc import Iterable

from agentkit.parsing._base import ReasoningSyntax, ToolSyntax
from agentkit.transcript import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = ["render_blocks"]


def render_blocks(
    blocks: Iterable[ContentBlock],
    reasoning: ReasoningSyntax | None,
    tools: ToolSyntax | None,
    *,
    exact: bool = True,
) -> str:
    """The model-format text of an assistant message's blocks.

    With ``exact`` (the default), a block that remembers its ``raw`` text is rendered as that
    text, byte for byte, so a replayed turn is exactly what the model produced. Other blocks
    are rendered canonically: reasoning through ``reasoning.render``, consecutive tool calls
    grouped into one ``tools.render``, text as is, with no separators added. Parsing the
    canonical text gives back the same blocks (ignoring ``raw`` and call ids) as long as each
    text is not empty, does not start with whitespace and contains no marker.
    """
    parts: list[str] = []
    calls: list[ToolCallBlock] = []

    def flush_calls() -> None:
        if calls:
            if tools is None:
                raise ValueError("cannot render tool calls without a tool syntax")
            parts.append(tools.render(calls))
            calls.clear()

    for block in blocks:
        if (
            exact
            and isinstance(block, ReasoningBlock | TextBlock | ToolCallBlock)
            and block.raw is not None
        ):
            flush_calls()
            parts.append(block.raw)
            continue
        if isinstance(block, ToolCallBlock):
            calls.append(block)
            continue
        flush_calls()
        if isinstance(block, ReasoningBlock):
            if reasoning is None:
                raise ValueError("cannot render a reasoning block without a reasoning syntax")
            parts.append(reasoning.render(block.text))
        elif isinstance(block, TextBlock):
            parts.append(block.text)
        else:
            raise ValueError(f"a {block.type} block is not part of a model's output")
    flush_calls()
    return "".join(parts)
