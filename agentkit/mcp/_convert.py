"""MCP shapes to agentkit's: tool names, and call results as the text a model reads.

A model reads tool results as text. Text content passes through as it is; structured content
stands in (as JSON) when a result has no text; anything a text model cannot take (images,
audio, embedded resources, links) becomes a short placeholder naming its type and size, so
the model knows something came back without the bytes filling its context.
"""

from __future__ import annotations

import json
import re

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

__all__ = ["local_name", "result_text"]

_INVALID = re.compile(r"[^A-Za-z0-9_.:-]")


def local_name(name: str, prefix: str | None) -> str:
    """The name the model sees: ``prefix_name``, each character agentkit's tool names do not
    allow replaced by ``_``, at most 128 characters."""
    full = f"{prefix}_{name}" if prefix else name
    return _INVALID.sub("_", full)[:128] or "_"


def result_text(result: CallToolResult) -> str:
    """The result as one text: its content blocks, one per paragraph, or its structured
    content as JSON when no block is text."""
    parts = [block_text(block) for block in result.content]
    if result.structured_content is not None and not any(
        isinstance(block, TextContent) for block in result.content
    ):
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    return "\n\n".join(parts)


def block_text(block: ContentBlock) -> str:
    """One content block as text (a placeholder for what is not text)."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}, {_size(_base64_bytes(block.data))}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        mime = f" ({resource.mime_type})" if resource.mime_type else ""
        if isinstance(resource, BlobResourceContents):
            size = _size(_base64_bytes(resource.blob))
        else:
            size = _size(len(resource.text.encode()))
        return f"[resource: {resource.uri}{mime}, {size}]"
    if isinstance(block, ResourceLink):
        mime = f" ({block.mime_type})" if block.mime_type else ""
        size = f", {_size(block.size)}" if block.size is not None else ""
        return f"[resource link: {block.uri}{mime}{size}]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _base64_bytes(data: str) -> int:
    """How many bytes base64 ``data`` decodes to, without decoding it."""
    stripped = data.strip()
    return max(0, len(stripped) * 3 // 4 - (len(stripped) - len(stripped.rstrip("="))))


def _size(count: int) -> str:
    return "1 byte" if count == 1 else f"{count} bytes"
