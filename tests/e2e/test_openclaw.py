"""OpenClaw (``openclaw agent --local``, on Node 24) against ``agentkit serve --engine
scripted``, through a custom provider with ``"api": "anthropic-messages"``: a tool call in the
profile's native format runs OpenClaw's ``read`` tool, and the second request replays it.

What OpenClaw 2026.9.6 sends (seen through a capture proxy): streaming requests with
``thinking {"type": "enabled", "budget_tokens": 3072}`` (``maxTokens`` 4096 below), a ~50 KB
system prompt, 12 tools, and after the real user messages a second user message of its own
("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>..."), which it moves to the end of every request: after
the tool result in the second one. It hands the signed thinking block back as thinking.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _clients import API_KEY, ScriptedServer, openclaw, run_client

pytestmark = pytest.mark.e2e

QUESTION = "What does note.txt say?"
ANSWER = "The file says: PAPAYA"
REASONING = "<think>\nI will read the file.\n</think>\n\n"
MODEL = "org/qwen3-e2e"


def _config(base_url: str, workspace: Path) -> dict[str, object]:
    return {
        "models": {
            "mode": "replace",
            "providers": {
                "agentkit": {
                    "baseUrl": base_url,
                    "apiKey": API_KEY,
                    "api": "anthropic-messages",
                    "models": [
                        {
                            "id": MODEL,
                            "name": "agentkit scripted",
                            "reasoning": True,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 1_000_000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "agents": {
            "defaults": {"model": {"primary": f"agentkit/{MODEL}"}, "workspace": str(workspace)}
        },
    }


@pytest.mark.parametrize("profile", ["qwen3", "generic"])
def test_openclaw_reads_a_file_and_replays_the_turn(tmp_path: Path, profile: str) -> None:
    client = openclaw()
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    note.write_text("The secret word is PAPAYA.\n", encoding="utf-8")
    tool_call = (
        f'<tool_call>\n{{"name": "read", "arguments": {json.dumps({"path": str(note)})}}}\n'
        "</tool_call>"
    )
    final = f"<think>\nThe note names a fruit.\n</think>\n\n{ANSWER}"
    spare = [f"<think>\nspare {n}\n</think>\n\nSPARE-{n}" for n in range(4)]
    home = tmp_path / "home"

    outputs = [REASONING + tool_call, final, *spare]
    with ScriptedServer(tmp_path / "server", outputs, profile=profile) as server:
        (home / ".openclaw").mkdir(parents=True)
        (home / ".openclaw" / "openclaw.json").write_text(
            json.dumps(_config(server.base_url, work), indent=2), encoding="utf-8"
        )
        run = run_client(
            client,
            ["agent", "--local", "--json", "--agent", "main", "-m", QUESTION],
            server=server,
            home=home,
            cwd=work,
            env={},
            timeout=300,
        )
    report = run.report()
    assert run.returncode == 0, report
    try:
        result = json.loads(run.stdout)
    except ValueError:
        pytest.fail(f"stdout is not JSON\n{report}", pytrace=False)
    assert [p.get("text") for p in result["payloads"]] == [ANSWER], report

    prompts = server.prompts()
    assert len(prompts) >= 2, report
    first, second = prompts[0], prompts[1]
    assert QUESTION in first, report
    assert first.endswith("<|im_start|>assistant\n"), report
    # OpenClaw's own user message follows the tool result, so for a policy that drops the
    # reasoning of turns before the last user message (qwen3, like Qwen3's chat template) the
    # first turn is an earlier task and comes back without its reasoning; with keep_all
    # (generic) it comes back exactly as generated.
    kept = "" if profile == "qwen3" else REASONING
    turn = f"<|im_start|>assistant\n{kept}{tool_call}<|im_end|>\n"
    assert turn in second, report
    assert second.count("I will read the file.") == (0 if profile == "qwen3" else 1), report
    rest = second[second.index(turn) + len(turn) :]
    assert rest.startswith("<|im_start|>user\n<tool_response>\n"), report
    assert "The secret word is PAPAYA." in rest.split("</tool_response>")[0], report
    assert rest.endswith("<|im_start|>assistant\n"), report
