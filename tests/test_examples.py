"""Every example in ``examples/`` runs to a clean exit, as a reader would run it.

Examples are part of the documentation: one that no longer runs misleads. Each runs in its own
interpreter (this one's, so the same environment), offline, with a bounded time; a new
example is picked up by being there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
TIMEOUT_S = 120


def test_the_examples_are_found() -> None:
    names = {path.name for path in EXAMPLES}
    assert {"quickstart.py", "testing.py"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs_and_exits_zero(path: Path) -> None:
    try:
        done = subprocess.run(
            [sys.executable, str(path)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"{path.name} still ran after {TIMEOUT_S} s; output so far:\n{expired.stdout}")
    assert done.returncode == 0, (
        f"{path.name} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
