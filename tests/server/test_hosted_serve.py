"""``agentkit serve --agent package.module:agent`` as a real process (this directory on
``PYTHONPATH``), driven by the official ``openai`` SDK; and what the command refuses."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import openai
import pytest
from _hosted_app import ASK, KEY
from _process import agentkit_serve
from openai.types.responses import ResponseFunctionToolCall
from openai.types.responses.response_output_item import McpCall

import agentkit


def test_agentkit_serve_hosts_the_agent_a_module_names(tmp_path: Path) -> None:
    here = Path(__file__).parent
    path = os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])
    with agentkit_serve(
        tmp_path, "--agent=_hosted_app:agent", f"--api-key={KEY}", env={"PYTHONPATH": path}
    ) as (_, port, _):
        _drive(port)


def _drive(port: int) -> None:
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
