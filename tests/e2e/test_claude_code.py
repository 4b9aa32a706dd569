"""Claude Code (``claude -p``) against ``agentkit serve --engine scripted``: a tool call in the
profile's native format runs Claude Code's own ``Read`` tool, and the second request replays
the first turn exactly.

What Claude Code 2.1.332 sends (seen through a capture proxy): ``POST /v1/messages?beta=true``
streaming, ``max_tokens`` 32000, ``thinking {"type": "adaptive"}``, ``context_management``,
``output_config``, three system blocks (the billing header line first), a ``role: "system"``
message, and 12 tools (~50 KB); two requests for this task, nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _clients import API_KEY, ScriptedServer, claude_code, run_client

pytestmark = pytest.mark.e2e

QUESTION = "What does note.txt say?"
ANSWER = "The file says: PAPAYA"


def test_claude_code_reads_a_file_and_replays_the_turn(tmp_path: Path) -> None:
    client = claude_code()
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    note.write_text("The secret word is PAPAYA.\n", encoding="utf-8")
    arguments = json.dumps({"file_path": str(note)})
    call = (
        "<think>\nI will read the file.\n</think>\n\n"
        f'<tool_call>\n{{"name": "Read", "arguments": {arguments}}}\n</tool_call>'
    )
    final = f"<think>\nThe note names a fruit.\n</think>\n\n{ANSWER}"
    # Spare answers: should a later client version send an extra request (a title, a probe)
    # after these two, it gets an answer instead of an error; the prompt log tells.
    spare = [f"<think>\nspare {n}\n</think>\n\nSPARE-{n}" for n in range(4)]

    with ScriptedServer(tmp_path / "server", [call, final, *spare], profile="qwen3") as server:
        run = run_client(
            client,
            ["-p", QUESTION, "--model", "org/qwen3-e2e", "--allowedTools", "Read"],
            server=server,
            home=tmp_path / "home",
            cwd=work,
            env={
                "ANTHROPIC_BASE_URL": server.base_url,
                "ANTHROPIC_API_KEY": API_KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            },
            timeout=120,
        )
    report = run.report()
    assert run.returncode == 0, report
    assert run.stdout.strip() == ANSWER, report

    prompts = server.prompts()
    assert len(prompts) >= 2, report
    first, second = prompts[0], prompts[1]
    assert QUESTION in first, report
    assert first.endswith("<|im_start|>assistant\n"), report
    # Prefix stability: the second prompt is the first, the exact text generated (reasoning
    # then call, with their delimiters and the whitespace between them), the end-of-turn
    # token, then Claude Code's tool result.
    replayed = first + call + "<|im_end|>\n"
    assert second.startswith(replayed), report
    rest = second[len(replayed) :]
    assert rest.startswith("<|im_start|>user\n<tool_response>\n"), report
    assert "The secret word is PAPAYA." in rest.split("</tool_response>")[0], report
    assert rest.endswith("<|im_start|>assistant\n"), report
