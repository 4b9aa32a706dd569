"""RemoteEngine on a real NVIDIA Dynamo deployment: frontend, KV-aware router, two workers.

Dynamo 1.6.1 (installed into ``.dynamo/venv`` by ``scripts/dynamo_setup.sh``, ~30 s the
first time, a second when cached) runs on the CPU with file discovery, a TCP request plane
and a ZMQ event plane: no etcd, no NATS. Its ZMQ sockets bind 0.0.0.0 whatever they are told,
so the deployment and the agent sessions run in a private network namespace
(``unshare -n``) whose only interface is loopback: nothing listens outside it.

The workers (``_dynamo_worker.py``) are Python engines on Dynamo's backend API that stream a
fixed script with a real prefix cache, so what is checked is exact: two concurrent sessions
of a tool-using agent through ``RemoteEngine(flavor="dynamo")``

* produce the same transcripts, token for token, as on an in-process scripted engine;
* send prompts that extend the previous turn's prompt and output token for token, which the
  worker's prefix cache serves: every turn after the first reports every complete 16-token
  block of the previous prompt and output as cached prompt tokens;
* stay on one worker per session (``x-dynamo-session-id`` and the router's session affinity);
* reach the worker with their hints: agentkit's priority (negated: higher is more important
  in Dynamo) and the expected output length (``osl``) as the router's routing hints.

Run it with ``.venv/bin/pytest -m e2e tests/e2e/test_dynamo.py`` (the setup runs first).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("_dynamo_session.py")
BLOCK = 16  # the workers' KV block size


def namespace_command() -> list[str]:
    """``unshare -n`` (root), else ``unshare -rn`` (an unprivileged user namespace)."""
    for command in (["unshare", "-n"], ["unshare", "-rn"]):
        probe = subprocess.run(
            [*command, "ip", "link", "set", "lo", "up"], capture_output=True, text=True
        )
        if probe.returncode == 0:
            return command
    pytest.fail(
        "the Dynamo test needs a private network namespace, and neither `unshare -n` nor "
        f"`unshare -rn` works here ({probe.stderr.strip() or probe.returncode}): run it as "
        "root or enable unprivileged user namespaces (kernel.unprivileged_userns_clone=1); "
        "Dynamo's ZMQ sockets would otherwise listen on every interface"
    )


def tiny_model(path: Path) -> Path:
    """The tiny model's directory: its tokenizer and config are what Dynamo serves."""
    spec = importlib.util.spec_from_file_location(
        "_tiny_model", ROOT / "tests" / "slow" / "_tiny_model.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.build_tiny_model(path))


def run_driver(
    tmp: pytest.TempPathFactory,
    driver: Path,
    *setup: str,
    setup_timeout: float,
    timeout: float,
) -> dict[str, Any]:
    """Install Dynamo (``scripts/dynamo_setup.sh`` with ``setup``: cached after the first
    time), build the tiny model, run ``driver`` in a private network namespace and return
    what it wrote."""
    what = " ".join(["scripts/dynamo_setup.sh", *setup])
    installed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "dynamo_setup.sh"), *setup],
        capture_output=True,
        text=True,
        timeout=setup_timeout,
    )
    if installed.returncode != 0:
        pytest.fail(f"{what} failed:\n{installed.stdout[-3000:]}{installed.stderr}")
    unshare = namespace_command()
    work = tmp.mktemp(driver.stem)
    model = tiny_model(work / "model")
    out = work / "result.json"
    done = subprocess.run(
        [*unshare, sys.executable, str(driver), "--model", str(model), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        pytest.fail(f"{driver.name} failed:\n{done.stdout[-8000:]}\n{done.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_driver(tmp_path_factory, DRIVER, setup_timeout=900, timeout=300)


def test_transcripts_match_the_in_process_engine(run: dict[str, Any]) -> None:
    for local, remote in zip(run["in_process"], run["dynamo"], strict=True):
        assert remote["output_text"] == "The results are result-a and result-b."
        assert remote["transcript"] == local["transcript"]
        assert remote["prompt_ids"] == local["prompt_ids"]
        assert len(remote["turns"]) == len(run["script"])


def test_every_turn_after_the_first_is_served_from_the_cache(run: dict[str, Any]) -> None:
    for session in run["dynamo"]:
        prompts, turns = session["prompt_ids"], session["turns"]
        outputs = [m["token_ids"] for m in session["transcript"] if m["role"] == "assistant"]
        # The first turn may reuse the other session's blocks (the same system prompt and
        # tools) when the router put both sessions on one worker.
        assert turns[0]["cached_prompt_tokens"] < turns[0]["prompt_tokens"]
        for n in range(1, len(prompts)):
            shared = prompts[n - 1] + outputs[n - 1]
            assert prompts[n][: len(shared)] == shared  # exact replay through Dynamo
            assert turns[n]["cached_prompt_tokens"] == len(shared) // BLOCK * BLOCK > 0


def test_each_session_stays_on_one_worker_with_its_hints(run: dict[str, Any]) -> None:
    requests = run["worker_requests"]
    # Every turn of a run names its conversation alike; the two conversations differ.
    assert all(len(session["session_ids"]) == 1 for session in run["dynamo"])
    session_ids = {session["session_ids"][0] for session in run["dynamo"]}
    assert len(session_ids) == len(run["dynamo"])
    assert len(requests) == len(session_ids) * len(run["script"])
    for session_id in session_ids:
        mine = [r for r in requests if (r["agent_context"] or {}).get("session_id") == session_id]
        assert [r["turn"] for r in mine] == list(range(len(run["script"])))
        assert len({r["worker"] for r in mine}) == 1, mine
    for request in requests:
        routing = request["routing"]
        assert routing["priority"] == -2  # AgentHints(priority=2): lower runs earlier
        assert routing["expected_output_tokens"] == 64
        assert request["stop_conditions"]["max_tokens"] == 256


def test_nothing_listens_outside_loopback(run: dict[str, Any]) -> None:
    interfaces = {line.split()[1] for line in run["interfaces"].splitlines() if line.strip()}
    assert interfaces == {"lo"}
    for snapshot in ("listeners_before", "listeners_after"):
        addresses = [line.split()[3] for line in run[snapshot].splitlines() if line.strip()]
        assert addresses, snapshot
        for address in addresses:
            host = address.rsplit(":", 1)[0]
            # 0.0.0.0 (Dynamo's ZMQ sockets) is loopback only here: lo is the only interface.
            assert host in {"127.0.0.1", "0.0.0.0", "[::1]", "[::]", "*"}, address
