"""MCP results and names as agentkit sees them; and ``import agentkit`` without ``mcp``."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agentkit.mcp._convert import local_name, result_text
from agentkit.tools import Tool

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def test_text_blocks_are_joined_and_structured_content_stays_out() -> None:
    result = CallToolResult(
        content=[TextContent(text="one"), TextContent(text="two")],
        structured_content={"ignored": True},
    )
    assert result_text(result) == "one\n\ntwo"


def test_structured_content_is_json_when_there_is_no_text() -> None:
    result = CallToolResult(content=[], structured_content={"temperature": 21.5, "unit": "°C"})
    assert json.loads(result_text(result)) == {"temperature": 21.5, "unit": "°C"}
    assert "°C" in result_text(result)


def test_what_is_not_text_becomes_a_placeholder_with_type_and_size() -> None:
    png = base64.b64encode(b"\x89PNG....").decode()
    wav = base64.b64encode(b"R").decode()
    blob = base64.b64encode(bytes(1000)).decode()
    result = CallToolResult(
        content=[
            ImageContent(data=png, mime_type="image/png"),
            AudioContent(data=wav, mime_type="audio/wav"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///a.bin", blob=blob, mime_type="application/octet-stream"
                )
            ),
            EmbeddedResource(resource=TextResourceContents(uri="file:///b.txt", text="héllo")),
            ResourceLink(uri="file:///c.pdf", name="c", mime_type="application/pdf", size=7),
        ]
    )
    assert result_text(result).split("\n\n") == [
        "[image: image/png, 8 bytes]",
        "[audio: audio/wav, 1 byte]",
        "[resource: file:///a.bin (application/octet-stream), 1000 bytes]",
        "[resource: file:///b.txt, 6 bytes]",
        "[resource link: file:///c.pdf (application/pdf), 7 bytes]",
    ]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_placeholder_sizes_are_the_decoded_sizes(data: bytes) -> None:
    encoded = base64.b64encode(data).decode()
    text = result_text(CallToolResult(content=[ImageContent(data=encoded, mime_type="image/x")]))
    size = len(data)
    assert text == f"[image: image/x, {size} byte{'' if size == 1 else 's'}]"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=200), st.none() | st.text(max_size=20))
def test_every_server_name_becomes_a_valid_tool_name(name: str, prefix: str | None) -> None:
    local = local_name(name, prefix)
    assert _TOOL_NAME.match(local)
    Tool(local, "", {"type": "object"}, _never)  # accepted as a tool name


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9_.:-]{1,100}", fullmatch=True))
def test_valid_names_are_kept_and_prefixed(name: str) -> None:
    assert local_name(name, None) == name
    assert local_name(name, "fs") == f"fs_{name}"


async def _never(arguments: dict[str, object]) -> object:
    raise AssertionError("not called")


def test_import_agentkit_does_not_import_mcp() -> None:
    code = (
        "import sys, agentkit, agentkit.tools, agentkit.agent\n"
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_')))\n"
        "assert not loaded, loaded\n"
        "assert 'agentkit.mcp' not in sys.modules\n"
        "import agentkit.mcp\n"
        "assert 'mcp' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
