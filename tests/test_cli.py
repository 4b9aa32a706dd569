"""The ``agentkit`` command line: ``parse`` (blocks as JSON, any chunking) and ``profiles``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentkit.cli import main
from agentkit.profiles import list_profiles

MALFORMED_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {city: Paris}}\n</tool_call>'
QWEN3_OUTPUT = (
    "<think>\nThe user wants the weather in Paris — in °C.\n</think>\n\n"
    "Checking now.\n"
    "<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
    "</tool_call>\n" + MALFORMED_CALL
)
QWEN3_BLOCKS: list[dict[str, Any]] = [
    {"type": "reasoning", "text": "The user wants the weather in Paris — in °C.\n"},
    {"type": "text", "text": "Checking now.\n"},
    {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
]

UNICODE_OUTPUT = (
    "<think>\nÇa dépend: 東京 ou Zürich? 🌍🌦\n</think>\n\n"
    "Je vérifie — 一瞬.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京", "note": "😀é"}}\n'
    "</tool_call>"
)

CODER_OUTPUT = (
    "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
    "<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>"
)
TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]

HARMONY_OUTPUT = (
    "<|channel|>analysis<|message|>Need the weather in Oslo.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"Oslo"}<|call|>'
)


def write(tmp_path: Path, text: str, name: str = "output.txt") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def run_parse(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """Run ``agentkit parse``; check it succeeded and printed exactly one JSON object."""
    assert main(["parse", *argv]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.endswith("\n")
    assert len(captured.out.splitlines()) == 1
    document = json.loads(captured.out)
    assert isinstance(document, dict)
    assert list(document) == ["blocks"]
    return document


def parse_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``agentkit parse`` expecting a usage error; return its stderr."""
    assert main(["parse", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("agentkit: error: ")
    return captured.err


def fake_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# --- parse: the output document --------------------------------------------------------------


def test_parse_prints_every_block_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = run_parse(capsys, "--profile", "qwen3", write(tmp_path, QWEN3_OUTPUT))
    blocks = document["blocks"]
    assert blocks[:3] == QWEN3_BLOCKS
    assert len(blocks) == 4
    error = blocks[3]
    assert set(error) == {"type", "name", "error", "raw"}
    assert error["type"] == "error"
    assert error["name"] == "get_weather"
    assert "invalid JSON" in error["error"]
    # The raw text of the malformed call, exactly as written (with the separating newline).
    assert error["raw"] == "\n" + MALFORMED_CALL


def test_a_truncated_call_is_an_error_block_with_its_raw_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    truncated = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    document = run_parse(capsys, "--tool-parser", "hermes", write(tmp_path, "Hi. " + truncated))
    text, error = document["blocks"]
    assert text == {"type": "text", "text": "Hi. "}
    assert error["type"] == "error"
    assert "truncated" in error["error"]
    assert error["raw"] == truncated


def test_parse_keeps_non_ascii_as_is(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["parse", "--profile", "qwen3", write(tmp_path, UNICODE_OUTPUT)]) == 0
    out = capsys.readouterr().out
    assert "東京" in out
    assert "\\u" not in out
    assert "\ufffd" not in out


# --- parse: chunking -------------------------------------------------------------------------

CHUNKINGS = [
    "whole",
    "bytes:1",
    "bytes:2",
    "bytes:3",
    "bytes:7",
    "bytes:64",
    "bytes:100000",
    "random:0",
    "random:1",
    "random:42",
]


@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("output", [QWEN3_OUTPUT, UNICODE_OUTPUT], ids=["qwen3", "unicode"])
def test_every_chunking_gives_the_same_blocks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, chunking: str, output: str
) -> None:
    path = write(tmp_path, output)
    whole = run_parse(capsys, "--profile", "qwen3", path)
    chunked = run_parse(capsys, "--profile", "qwen3", "--chunking", chunking, path)
    assert chunked == whole


def test_multibyte_characters_split_by_single_bytes_are_reassembled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = run_parse(
        capsys, "--profile", "qwen3", "--chunking", "bytes:1", write(tmp_path, UNICODE_OUTPUT)
    )
    assert document["blocks"] == [
        {"type": "reasoning", "text": "Ça dépend: 東京 ou Zürich? 🌍🌦\n"},
        {"type": "text", "text": "Je vérifie — 一瞬.\n"},
        {
            "type": "tool_call",
            "name": "get_weather",
            "arguments": {"city": "東京", "note": "😀é"},
        },
    ]


@pytest.mark.parametrize("chunking", ["whole", "bytes:1", "random:7"])
def test_chunking_applies_to_every_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, chunking: str
) -> None:
    harmony = write(tmp_path, HARMONY_OUTPUT, "harmony.txt")
    coder = write(tmp_path, CODER_OUTPUT, "coder.txt")
    assert run_parse(capsys, "--tool-parser", "harmony", "--chunking", chunking, harmony) == (
        run_parse(capsys, "--tool-parser", "harmony", harmony)
    )
    assert run_parse(capsys, "--profile", "qwen3-coder", "--chunking", chunking, coder) == (
        run_parse(capsys, "--profile", "qwen3-coder", coder)
    )


# --- parse: choosing the parsers -------------------------------------------------------------


@pytest.mark.parametrize("output", [QWEN3_OUTPUT, UNICODE_OUTPUT, CODER_OUTPUT])
def test_a_profile_equals_its_two_parsers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    path = write(tmp_path, output)
    by_profile = run_parse(capsys, "--profile", "qwen3", path)
    by_parsers = run_parse(capsys, "--reasoning-parser", "think", "--tool-parser", "hermes", path)
    assert by_profile == by_parsers
    alias = run_parse(capsys, "--profile", "Qwen3-Thinking", path)
    assert alias == by_profile
    coder = run_parse(capsys, "--profile", "qwen3-coder", path)  # no reasoning of its own
    assert coder == run_parse(capsys, "--tool-parser", "qwen3_coder", path)


def test_explicit_parsers_override_the_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, CODER_OUTPUT)
    hermes = run_parse(capsys, "--profile", "qwen3", path)
    assert [b["type"] for b in hermes["blocks"]] == ["error"]  # not Hermes JSON
    coder = run_parse(capsys, "--profile", "qwen3", "--tool-parser", "qwen3_coder", path)
    assert coder["blocks"] == [
        {
            "type": "tool_call",
            "name": "read_file",
            "arguments": {"path": "src/app.py", "limit": "20"},
        }
    ]


def test_reasoning_parser_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "The prompt opened the block.\n</think>\n\nAnswer.")
    document = run_parse(capsys, "--reasoning-parser", "deepseek_r1", path)
    assert document["blocks"] == [
        {"type": "reasoning", "text": "The prompt opened the block.\n"},
        {"type": "text", "text": "Answer."},
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--tool-parser", "harmony"],
        ["--reasoning-parser", "harmony"],
        ["--reasoning-parser", "harmony", "--tool-parser", "harmony"],
    ],
)
def test_harmony(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]) -> None:
    document = run_parse(capsys, *argv, write(tmp_path, HARMONY_OUTPUT))
    assert document["blocks"] == [
        {"type": "reasoning", "text": "Need the weather in Oslo."},
        {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Oslo"}},
    ]


def test_harmony_cannot_be_combined_with_another_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = parse_error(
        capsys,
        "--reasoning-parser",
        "think",
        "--tool-parser",
        "harmony",
        write(tmp_path, HARMONY_OUTPUT),
    )
    assert "cannot be combined" in err


# --- parse: --tools --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "specs",
    [TOOL_SPECS, [spec["function"] for spec in TOOL_SPECS]],
    ids=["openai", "bare"],
)
def test_tools_file_types_qwen3_coder_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, specs: list[dict[str, Any]]
) -> None:
    output = write(tmp_path, CODER_OUTPUT)
    untyped = run_parse(capsys, "--tool-parser", "qwen3_coder", output)
    # Without a schema, a value is its text verbatim.
    assert untyped["blocks"] == [
        {
            "type": "tool_call",
            "name": "read_file",
            "arguments": {"path": "src/app.py", "limit": "20"},
        }
    ]
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(specs), encoding="utf-8")
    typed = run_parse(capsys, "--tool-parser", "qwen3_coder", "--tools", str(tools), output)
    assert typed["blocks"] == [
        {"type": "tool_call", "name": "read_file", "arguments": {"path": "src/app.py", "limit": 20}}
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[{", "not valid JSON"),
        ('{"name": "read_file"}', "expected a JSON list of tool specs"),
        ('[{"parameters": {}}]', "expected a JSON list of tool specs"),
        ('["read_file"]', "expected a JSON list of tool specs"),
    ],
)
def test_a_bad_tools_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(content, encoding="utf-8")
    err = parse_error(
        capsys, "--tool-parser", "qwen3_coder", "--tools", str(tools), write(tmp_path, CODER_OUTPUT)
    )
    assert message in err
    assert "Traceback" not in err


def test_a_missing_tools_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-tools.json")
    err = parse_error(
        capsys, "--tool-parser", "qwen3_coder", "--tools", missing, write(tmp_path, CODER_OUTPUT)
    )
    assert "no-tools.json" in err


# --- parse: input ----------------------------------------------------------------------------


@pytest.mark.parametrize("file_args", [["-"], []], ids=["dash", "default"])
def test_stdin_input(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    file_args: list[str],
) -> None:
    expected = run_parse(capsys, "--profile", "qwen3", write(tmp_path, UNICODE_OUTPUT))
    fake_stdin(monkeypatch, UNICODE_OUTPUT.encode("utf-8"))
    assert run_parse(capsys, "--profile", "qwen3", "--chunking", "bytes:1", *file_args) == expected


def test_empty_input_has_no_blocks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_stdin(monkeypatch, b"")
    assert run_parse(capsys, "--profile", "qwen3", "-") == {"blocks": []}


# --- parse: usage errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunking",
    ["bytes:0", "foo", "bytes", "bytes:", "bytes:-1", "bytes:x", "random", "random:x", "whole:1"],
)
def test_an_invalid_chunking_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, chunking: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["parse", "--profile", "qwen3", "--chunking", chunking, write(tmp_path, "x")])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "invalid chunking" in captured.err
    assert "whole, bytes:N (N > 0) or random:SEED" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tool-parser", "nope"], "unknown tool-call syntax 'nope'; valid choices: "),
        (["--reasoning-parser", "nope"], "unknown reasoning syntax 'nope'; valid choices: "),
        (["--profile", "nope"], "unknown profile 'nope'; known profiles: deepseek-r1, "),
        ([], "give --tool-parser, --reasoning-parser or --profile"),
    ],
)
def test_unknown_or_missing_parsers_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    err = parse_error(capsys, *argv, write(tmp_path, QWEN3_OUTPUT))
    assert message in err
    assert "Traceback" not in err


def test_a_bad_parser_name_is_reported_before_reading_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Unreadable(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            raise AssertionError("stdin was read")

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(Unreadable()))
    assert "unknown tool-call syntax" in parse_error(capsys, "--tool-parser", "nope")
    assert "unknown profile" in parse_error(capsys, "--profile", "nope", "-")


def test_a_missing_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = parse_error(capsys, "--profile", "qwen3", str(tmp_path / "missing.txt"))
    assert "No such file or directory" in err
    assert "missing.txt" in err


# --- profiles --------------------------------------------------------------------------------


PROFILE_IDS = [
    "deepseek-r1",
    "deepseek-v3.1",
    "deepseek-v3.2",
    "deepseek-v4",
    "deepseek-v4.1",
    "generic",
    "glm-4.5",
    "glm-4.7",
    "gpt-oss",
    "kimi-k2",
    "llama3",
    "minimax-m2",
    "mistral-v11",
    "mistral-v13",
    "nemotron",
    "qwen3",
    "qwen3-coder",
    "smollm2",
]


def test_profiles_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(list_profiles()) == len(PROFILE_IDS)
    by_name = {line.split()[0]: line.split() for line in lines}
    assert sorted(by_name) == PROFILE_IDS
    assert by_name["qwen3"][1:4] == [
        "reasoning=think",
        "tools=hermes",
        "replay=drop_on_plain_turns",
    ]
    assert by_name["qwen3-coder"][2] == "tools=qwen3_coder"
    assert by_name["smollm2"][1:3] == ["reasoning=-", "tools=hermes"]
    assert by_name["deepseek-v4"][3:5] == ["replay=keep_with_tools", "context=1024K"]


def test_profiles_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == PROFILE_IDS
    by_name = {row["name"]: row for row in rows}
    for row in rows:
        assert row["replay"] in (
            "keep_all",
            "keep_with_tools",
            "drop_on_plain_turns",
            "drop_all",
            "template_native",
        )
        assert isinstance(row["aliases"], list)
        assert row["description"]
        assert row["stop"]
        assert set(row["stop"]) <= set(row["special_tokens"])
        assert row["context_window"] > 0
    qwen3 = by_name["qwen3"]
    assert (qwen3["reasoning_parser"], qwen3["tool_parser"]) == ("think", "hermes")
    assert by_name["qwen3-coder"]["tool_parser"] == "qwen3_coder"
    assert by_name["smollm2"]["reasoning_parser"] is None
    assert by_name["nemotron"]["reasoning_parser"] == "deepseek_r1"
    assert by_name["gpt-oss"]["tool_parser"] == "harmony"
    assert "qwen3-thinking" in qwen3["aliases"]
    assert qwen3["truncation"] == {"mode": "bytes", "limit": 100_000}


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "agentkit" in capsys.readouterr().err


# --- the installed entry point ---------------------------------------------------------------


def entry_points() -> list[list[str]]:
    commands = [[sys.executable, "-m", "agentkit.cli"]]
    script = Path(sys.executable).with_name("agentkit")
    if script.exists():
        commands.append([str(script)])
    return commands


@pytest.mark.parametrize("command", entry_points(), ids=lambda c: Path(c[-1]).name)
def test_the_console_entry_point(command: list[str], tmp_path: Path) -> None:
    ok = subprocess.run(
        [*command, "parse", "--profile", "qwen3", "--chunking", "bytes:1", "-"],
        input=QWEN3_OUTPUT.encode("utf-8"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr.decode()
    out = ok.stdout.decode("utf-8")
    assert len(out.splitlines()) == 1
    assert json.loads(out)["blocks"][:3] == QWEN3_BLOCKS

    bad = subprocess.run(
        [*command, "parse", "--tool-parser", "nope", write(tmp_path, QWEN3_OUTPUT)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stdout == b""
    assert bad.stderr.decode().startswith("agentkit: error: unknown tool-call syntax 'nope'")
