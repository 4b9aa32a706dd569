"""docs/testing.md: its Python snippets run in order, in one namespace, as a reader would
paste them (top-level ``await`` allowed), and the test functions they define pass."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import anyio

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
_SNIPPET = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_snippets_run_and_their_tests_pass() -> None:
    snippets = _SNIPPET.findall(DOC.read_text(encoding="utf-8"))
    assert len(snippets) == 4
    namespace: dict[str, Any] = {"__name__": "testing_doc"}

    async def run_all() -> None:
        for index, code in enumerate(snippets):
            compiled = compile(
                code, f"{DOC.name}[{index}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            pending = eval(compiled, namespace)  # a coroutine where the snippet awaits
            if inspect.iscoroutine(pending):
                await pending
        tests = [f for name, f in namespace.items() if name.startswith("test_")]
        assert tests
        for test in tests:
            await test()

    anyio.run(run_all)
