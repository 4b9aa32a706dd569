"""agentkit's name on the package index is agentkit-local (``agentkit`` there is an unrelated
project): every message and document that says what to install uses it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

import agentkit.cli as cli
from agentkit._distribution import DISTRIBUTION, pip_install
from agentkit.engine._vllm import INSTALL_HINT
from agentkit.models._smollm2 import _check_converter_dependencies

ROOT = Path(__file__).resolve().parent.parent


def test_the_project_is_named_agentkit_local() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "agentkit-local"
    assert project["scripts"] == {"agentkit": "agentkit.cli:main"}


def test_no_text_tells_users_to_install_the_other_agentkit() -> None:
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("agentkit/**/*.py")]
    files += [*ROOT.glob("scripts/*"), *ROOT.glob("examples/*.py"), *ROOT.glob("bench/*.py")]
    wrong = re.compile(r"(?<![\w-])agentkit\[|pip install (-U |--upgrade )?agentkit(?![\w-])")
    offenders = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in files
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if wrong.search(line)
    ]
    assert offenders == []


def test_install_messages_name_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pip_install("cpu") == "pip install 'agentkit-local[cpu]'"
    assert pip_install("gpu") in INSTALL_HINT
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(cli.ConfigurationError, match=re.escape(pip_install("cpu"))):
        _check_converter_dependencies()


def test_serve_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert cli.main(["serve", "--engine", "scripted", "--script", "x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "the 'serve' extra (uvicorn is not installed)" in err
    assert "pip install 'agentkit-local[serve]'" in err
