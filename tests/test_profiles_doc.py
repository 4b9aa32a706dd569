"""docs/profiles.md is generated from the catalog: it must match what the code renders now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_profiles_doc_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "profiles_doc", ROOT / "scripts" / "profiles_doc.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    current = (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8")
    assert current == module.document(), "run: python scripts/profiles_doc.py"
    for name in ("qwen3", "deepseek-v4", "gpt-oss", "generic"):
        assert f"### `{name}`" in current
