"""The README's example of continuing and persisting a conversation runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _section_code(heading: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, f"one python block under '## {heading}'"
    return str(blocks[0])


def test_continue_and_persist_a_conversation(tmp_path: Path) -> None:
    code = _section_code("Continuing and persisting a conversation")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # The printed values are the ones the README's comments give.
    expected = re.findall(r"print\(.*?\)\s+# (.*)", code)
    assert done.stdout.splitlines() == expected
    assert (tmp_path / "chat.json").is_file()
