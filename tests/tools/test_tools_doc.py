"""docs/tools.md: every Python snippet runs as written and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
_SNIPPET = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def _snippets() -> list[str]:
    return _SNIPPET.findall(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_its_snippets() -> None:
    assert len(_snippets()) == 4


@pytest.mark.parametrize("index", range(4))
def test_snippet_runs(index: int) -> None:
    code = _snippets()[index]
    exec(compile(code, f"{DOC.name}[{index}]", "exec"), {"__name__": f"tools_doc_{index}"})
