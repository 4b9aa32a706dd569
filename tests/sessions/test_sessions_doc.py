"""docs/sessions.md: its Python snippets run in order, in one namespace, as a reader would
paste them (top-level ``await`` allowed), against an agent on a scripted engine."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.sessions import SessionTurn

DOC = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"
_SNIPPET = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_snippets_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the snippets' sessions.db
    snippets = _SNIPPET.findall(DOC.read_text(encoding="utf-8"))
    assert len(snippets) == 2
    agent = agentkit.Agent(
        ScriptedEngine.per_run(["Order A-1002 is waiting for stock."]), profile="qwen3"
    )
    namespace: dict[str, Any] = {"__name__": "sessions_doc", "agent": agent}

    async def run_all() -> None:
        for index, code in enumerate(snippets):
            compiled = compile(
                code, f"{DOC.name}[{index}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            pending = eval(compiled, namespace)  # a coroutine where the snippet awaits
            if inspect.iscoroutine(pending):
                await pending

    anyio.run(run_all)
    assert namespace["result"].output_text == "Order A-1002 is waiting for stock."
    [turn] = namespace["turns"]
    assert isinstance(turn, SessionTurn)
    assert [m.text for m in namespace["transcript"]] == [
        "And A-1002?",
        "Order A-1002 is waiting for stock.",
    ]
    assert [(info.id, info.turns) for info in namespace["infos"]] == [("user-42", 1)]
    assert namespace["branch"].id == "user-42-b"
