"""``agentkit serve --agent package.module:agent`` as a real process (this directory on
``PYTHONPATH``), driven by the official ``openai`` SDK; and what the command refuses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from _hosted_app import ASK, KEY, eventually
from openai.types.responses import ResponseFunctionToolCall
from openai.types.responses.response_output_item import McpCall

import agentkit


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_agentkit_serve_hosts_the_agent_a_module_names(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    here = Path(__file__).parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")]),
        "AGENTKIT_CACHE_DIR": str(tmp_path / "cache"),
    }
    process: subprocess.Popen[bytes] | None = None
    for _attempt in range(3):  # another process may take the free port first
        port = _free_port()
        command = [
            sys.executable,
            "-m",
            "agentkit.cli",
            "serve",
            "--agent=_hosted_app:agent",
            f"--port={port}",
            f"--api-key={KEY}",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, env=env, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT
            )
        if _started(process, port):
            break
        process.kill()
        process.wait(timeout=30)
    else:
        pytest.fail(f"agentkit serve --agent did not start:\n{log.read_text()}")
    assert process is not None
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    try:
        first = sdk.responses.create(model="hosted", input="Weather in Paris?", tools=[ASK])  # type: ignore[list-item]
        mcp = [item for item in first.output if isinstance(item, McpCall)]
        assert [(m.name, m.output) for m in mcp] == [
            ("weather", "21 degrees Celsius in Paris"),
            ("clock", "12:00"),
        ]
        [ask] = [item for item in first.output if isinstance(item, ResponseFunctionToolCall)]
        assert ask.name == "ask_user"
        final = sdk.responses.create(
            model="hosted",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": ask.call_id, "output": "Celsius"}],
            tools=[ASK],  # type: ignore[list-item]
        )
        assert final.output_text == "It is 21 degrees Celsius in Paris at 12:00."
        messages = httpx.post(
            f"http://127.0.0.1:{port}/v1/messages",
            headers={"x-api-key": KEY},
            json={"model": "hosted", "max_tokens": 5, "messages": []},
        )
        assert messages.status_code == 404  # the Messages API serves bare models only
    finally:
        sdk.close()
        process.kill()
        process.wait(timeout=30)


def _started(process: subprocess.Popen[bytes], port: int) -> bool:
    eventually(lambda: _healthy(port) or process.poll() is not None)
    return _healthy(port)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_load_agent_and_the_cli_say_what_is_wrong(tmp_path: Path) -> None:
    from agentkit import cli
    from agentkit.errors import ConfigurationError
    from agentkit.server._hosted import load_agent

    assert isinstance(load_agent("_hosted_app:agent"), agentkit.Agent)
    with pytest.raises(ConfigurationError, match=r"package\.module:attribute"):
        load_agent("_hosted_app")
    with pytest.raises(ConfigurationError, match="cannot import"):
        load_agent("no_such_module_here:agent")
    with pytest.raises(ConfigurationError, match="no attribute"):
        load_agent("_hosted_app:nobody")
    with pytest.raises(ConfigurationError, match=r"not an agentkit\.Agent"):
        load_agent("_hosted_app:SCRIPT")
    for extra in (["--model", "m"], ["--engine", "scripted"], ["--profile", "qwen3"]):
        assert cli.main(["serve", "--agent", "_hosted_app:agent", *extra]) == 2
