"""Codex (``codex exec``) against ``agentkit serve --engine scripted`` over the Responses API,
through a custom provider (``wire_api = "responses"``): a call in the profile's native format
runs Codex's own ``exec_command`` tool, and the second request replays the first turn exactly,
restored from the ``encrypted_content`` Codex hands back.

What Codex 0.171.0 sends (seen through a capture proxy): ``POST /v1/responses``, streaming, a
~40 KB uncompressed body: ``store: false``, ``include: ["reasoning.encrypted_content"]``,
``reasoning: {"summary": "auto"}``, ``parallel_tool_calls: true``, no ``instructions``. Its
``input`` starts with two ``developer`` messages (the base prompt, the skills list) and two
``user`` messages (``<environment_context>``, then the task), every item with an ``id``. Its
tools: ``exec_command`` (``cmd``, and optional ``workdir``, ``tty``, ``yield_time_ms``...),
``write_stdin``, ``request_user_input``, ``view_image``, a ``multi_agent_v1`` namespace of five
functions (shown to the model as ``multi_agent_v1__spawn_agent``...), three goal functions and
the hosted ``web_search`` (dropped). The second request repeats the first's items, then the
reasoning item (content, summary and encrypted_content), the ``function_call`` and its
``function_call_output`` ("Chunk ID: ...\\nProcess exited with code 0\\n...Output:\\n...").
A custom provider makes no WebSocket attempt. Two requests for this task, nothing else.

Offline hygiene: with plugins on, Codex runs ``git ls-remote`` of github.com/openai/plugins and
looks up api.github.com; with analytics on, it looks up ab.chatgpt.com and chatgpt.com. Both are
off below, so the test contacts nothing but the server and takes about a second, offline too.
The sandbox is off (``danger-full-access``): Codex's bubblewrap sandbox needs unprivileged user
namespaces, which some CI hosts forbid, and the command is an ``echo`` in a temporary folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _clients import API_KEY, ScriptedServer, codex, run_client

pytestmark = pytest.mark.e2e

MODEL = "org/qwen3-e2e"
COMMAND = "echo CODEX_E2E_MARKER_$((6 * 7))"
MARKER = "CODEX_E2E_MARKER_42"
"""What the command prints: only a shell that ran it knows the 42."""
QUESTION = f"Run `{COMMAND}` and tell me what it printed."
ANSWER = f"It printed {MARKER}."


def _config(base_url: str) -> str:
    """``~/.codex/config.toml`` (JSON strings are TOML basic strings)."""
    return "\n".join(
        [
            f"model = {json.dumps(MODEL)}",
            'model_provider = "agentkit"',
            'sandbox_mode = "danger-full-access"',
            'approval_policy = "never"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "",
            "[model_providers.agentkit]",
            'name = "agentkit"',
            f"base_url = {json.dumps(base_url + '/v1')}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            # A failed request fails the run at once instead of after five retries.
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
        ]
    )


def test_codex_runs_a_command_and_replays_the_turn(tmp_path: Path) -> None:
    client = codex()
    work = tmp_path / "work"
    work.mkdir()
    call = (
        "<think>\nI will run the command.\n</think>\n\n"
        f'<tool_call>\n{{"name": "exec_command", "arguments": {json.dumps({"cmd": COMMAND})}}}\n'
        "</tool_call>"
    )
    final = f"<think>\nThe command printed the marker.\n</think>\n\n{ANSWER}"
    spare = [f"<think>\nspare {n}\n</think>\n\nSPARE-{n}" for n in range(4)]
    home = tmp_path / "home"

    with ScriptedServer(tmp_path / "server", [call, final, *spare], profile="qwen3") as server:
        (home / ".codex").mkdir(parents=True)
        (home / ".codex" / "config.toml").write_text(_config(server.base_url), encoding="utf-8")
        run = run_client(
            client,
            # --strict-config: a setting this version no longer knows fails the run.
            ["exec", "--strict-config", "--skip-git-repo-check", "--ephemeral", QUESTION],
            server=server,
            home=home,
            cwd=work,
            env={"OPENAI_API_KEY": API_KEY},
            timeout=120,
        )
    report = run.report()
    assert run.returncode == 0, report
    assert run.stdout.strip() == ANSWER, report

    prompts = server.prompts()
    assert len(prompts) >= 2, report
    first, second = prompts[0], prompts[1]
    assert QUESTION in first, report
    assert '"name": "exec_command"' in first, report
    assert first.endswith("<|im_start|>assistant\n"), report
    # The first turn comes back as one assistant message, reasoning then call.
    assert f"<|im_start|>assistant\n{call}<|im_end|>\n" in second, report
    # Prefix stability: the second prompt is the first, the exact text generated, the
    # end-of-turn token, then the command's output as the tool result.
    replayed = first + call + "<|im_end|>\n"
    assert second.startswith(replayed), report
    rest = second[len(replayed) :]
    assert rest.startswith("<|im_start|>user\n<tool_response>\n"), report
    assert MARKER in rest.split("</tool_response>")[0], report
    assert rest.endswith("<|im_start|>assistant\n"), report
