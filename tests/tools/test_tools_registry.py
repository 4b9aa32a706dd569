"""The registry: tools by name, duplicates refused, schemas and specs for the template."""

from __future__ import annotations

from typing import Any

import pytest

import agentkit.tools
from agentkit.errors import ConfigurationError
from agentkit.tools import Tool, ToolRegistry, tool


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


def write_file(path: str, text: str) -> None:
    """Write a file."""


async def _handler(arguments: dict[str, Any]) -> str:
    return "ok"


def test_tools_and_plain_functions() -> None:
    registry = ToolRegistry([read_file, write_file])
    assert len(registry) == 2
    assert registry.names == ["read_file", "write_file"]
    assert registry.get("read_file") is read_file
    assert isinstance(registry.get("write_file"), Tool)
    assert registry.get("missing") is None
    assert registry["write_file"].function is write_file
    assert "read_file" in registry
    assert "missing" not in registry
    assert [t.name for t in registry] == ["read_file", "write_file"]
    with pytest.raises(KeyError):
        registry["missing"]


def test_duplicate_names_are_refused() -> None:
    registry = ToolRegistry([read_file])
    with pytest.raises(ConfigurationError, match="'read_file'"):
        registry.add(Tool("read_file", "another", {"type": "object"}, _handler))
    with pytest.raises(ConfigurationError, match="'write_file'"):
        ToolRegistry([write_file, write_file])


def test_add_returns_the_tool() -> None:
    registry = ToolRegistry()
    added = registry.add(write_file)
    assert added is registry["write_file"]
    assert repr(registry) == "ToolRegistry(['write_file'])"


def test_schemas_and_specs() -> None:
    shell = Tool("shell", "Run it.", {"type": "object"}, _handler)
    registry = ToolRegistry([read_file, shell])
    assert registry.schemas() == {
        "read_file": read_file.parameters,
        "shell": {"type": "object"},
    }
    assert registry.specs() == [read_file.spec(), shell.spec()]
    assert registry.specs()[1] == {
        "type": "function",
        "function": {"name": "shell", "description": "Run it.", "parameters": {"type": "object"}},
    }


def test_public_names() -> None:
    assert agentkit.tools.__all__ == [
        "DispatchStats",
        "DispatchTurn",
        "Dispatcher",
        "ResultCallback",
        "Tool",
        "ToolHandler",
        "ToolRegistry",
        "Toolset",
        "tool",
    ]
    assert sorted(agentkit.tools.__all__) == agentkit.tools.__all__
    for name in agentkit.tools.__all__:
        assert getattr(agentkit.tools, name) is not None
