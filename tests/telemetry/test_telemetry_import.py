"""OpenTelemetry stays out of the process until an instrumented run starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_agentkit_and_an_uninstrumented_run_do_not_import_opentelemetry() -> None:
    out = _run(
        """
        import sys
        import anyio
        import agentkit, agentkit.telemetry
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        agent = agentkit.Agent(agentkit.ScriptedEngine(["hi"]), profile="qwen3")
        anyio.run(agent.run, "go")
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    assert out.splitlines() == ["[]", "[]"]


def test_an_instrumented_run_imports_only_the_api() -> None:
    out = _run(
        """
        import sys
        import anyio
        import agentkit
        agent = agentkit.Agent(
            agentkit.ScriptedEngine(["hi"]), profile="qwen3", instrument=True
        )
        anyio.run(agent.run, "go")
        print("opentelemetry.trace" in sys.modules, "opentelemetry.sdk" in sys.modules)
        """
    )
    assert out == "True False"
