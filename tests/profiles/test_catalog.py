"""The catalog: served names to profiles, alias files, the fallback, and ``template_native``
with the model's own chat template."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
from _reference_templates import QWEN3, apply_chat_template, template_path

import agentkit
from agentkit.errors import ConfigurationError
from agentkit.profiles import (
    HFChatTemplate,
    _catalog,
    chat_messages,
    get_profile,
    list_profiles,
    load_aliases,
    profile_for_model,
    register_alias,
)
from agentkit.transcript import ReasoningBlock, TextBlock, ToolCallBlock, Transcript

ISSUE_IDS = {
    "qwen3",
    "qwen3-coder",
    "deepseek-r1",
    "deepseek-v3.1",
    "deepseek-v3.2",
    "deepseek-v4",
    "deepseek-v4.1",
    "kimi-k2",
    "glm-4.5",
    "glm-4.7",
    "minimax-m2",
    "gpt-oss",
    "nemotron",
    "llama3",
    "mistral-v11",
    "mistral-v13",
    "smollm2",
    "generic",
}


@pytest.fixture(autouse=True)
def restore_aliases() -> object:
    names, patterns = dict(_catalog._NAMES), dict(_catalog._PATTERNS)
    yield
    _catalog._NAMES.clear()
    _catalog._NAMES.update(names)
    _catalog._PATTERNS.clear()
    _catalog._PATTERNS.update(patterns)


def test_every_family_of_the_catalog_is_there_with_its_policies() -> None:
    assert {p.name for p in list_profiles()} == ISSUE_IDS
    for profile in list_profiles():
        assert profile.context_window
        assert profile.stop
        assert set(profile.stop) <= set(profile.special_tokens)
        assert profile.truncation is not None
        assert profile.template is not None
    assert get_profile("deepseek-v4").replay == "keep_with_tools"
    assert get_profile("deepseek-v3.2").replay == "drop_on_plain_turns"
    assert get_profile("deepseek-v3.1").replay == "drop_all"
    assert get_profile("deepseek-r1").replay == "drop_all"
    assert (get_profile("nemotron").reasoning, get_profile("nemotron").tool_format) == (
        "deepseek_r1",
        "qwen3_coder",
    )


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("Qwen/Qwen3-8B", "qwen3"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder"),
        ("/models/qwen3-coder-480b", "qwen3-coder"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3.1"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2"),
        ("deepseek-ai/DeepSeek-V4", "deepseek-v4"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2"),
        ("zai-org/GLM-4.6", "glm-4.5"),
        ("zai-org/GLM-4.7-FP8", "glm-4.7"),
        ("MiniMaxAI/MiniMax-M2", "minimax-m2"),
        ("openai/gpt-oss-120b", "gpt-oss"),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron"),
        ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nemotron"),
        ("nemotron-3", "nemotron"),
        # Other Nemotron generations write other formats: not the Nemotron-3 profile.
        ("nvidia/Llama-3.3-Nemotron-Super-49B-v1.5", "llama3"),
        ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "generic"),
        ("nvidia/OpenReasoning-Nemotron-32B", "generic"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
        ("mistralai/Devstral-Small-2507", "mistral-v13"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral-v11"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2"),
        ("smollm2", "smollm2"),
    ],
)
def test_served_names_find_their_profile(model: str, profile: str) -> None:
    assert profile_for_model(model).name == profile


def test_an_unknown_model_falls_back_to_generic_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        profile = profile_for_model("acme/secret-model-7b")
    assert profile.name == "generic"
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "acme/secret-model-7b" in text
    assert "generic" in text


def test_aliases_in_code_and_in_files(tmp_path: Path) -> None:
    register_alias("acme/prod-coder", "qwen3-coder")
    register_alias("acme/think-*", "deepseek-v4")
    assert profile_for_model("acme/prod-coder").name == "qwen3-coder"
    assert profile_for_model("ACME/Think-Large").name == "deepseek-v4"
    toml = tmp_path / "aliases.toml"
    toml.write_text('[aliases]\n"org/served-name" = "kimi-k2"\n"*-r1-distill-*" = "deepseek-r1"\n')
    assert load_aliases(toml) == {"org/served-name": "kimi-k2", "*-r1-distill-*": "deepseek-r1"}
    assert profile_for_model("org/served-name").name == "kimi-k2"
    assert profile_for_model("x/qwen3-r1-distill-7b").name == "deepseek-r1"  # longest pattern
    jsonfile = tmp_path / "aliases.json"
    jsonfile.write_text(json.dumps({"team/model": "glm-4.7"}))
    load_aliases(jsonfile)
    assert profile_for_model("team/model").name == "glm-4.7"
    assert get_profile("team/model").name == "glm-4.7"


def test_bad_alias_files_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigurationError, match=r"nope\.toml"):
        load_aliases(missing)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": 1}))
    with pytest.raises(ConfigurationError, match=r"bad\.json"):
        load_aliases(bad)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"a": "no-such-profile"}))
    with pytest.raises(ConfigurationError, match=r"unknown\.json.*no-such-profile"):
        load_aliases(unknown)


def test_the_alias_file_from_the_environment_is_read_on_first_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text('"env/model" = "minimax-m2"\n')
    monkeypatch.setenv(_catalog.ALIASES_ENV, str(path))
    monkeypatch.setattr(_catalog, "_env_loaded", False)
    assert profile_for_model("env/model").name == "minimax-m2"


# --- template_native ----------------------------------------------------------------------


def interleaved() -> Transcript:
    t = Transcript.from_prompt("Q", system="S")
    t.add(
        "assistant",
        [
            ReasoningBlock(text="r0"),
            ToolCallBlock(id="c0", name="lookup", arguments={"key": "a"}),
            ReasoningBlock(text="r1"),
            ToolCallBlock(id="c1", name="lookup", arguments={"key": "b"}),
        ],
    )
    return t


def test_chat_messages_keep_interleaved_reasoning_in_order() -> None:
    messages = chat_messages(interleaved())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant"]
    assert messages[2]["reasoning_content"] == "r0"
    assert messages[2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": {"key": "a"}}
    assert messages[3]["reasoning_content"] == "r1"
    assert messages[3]["tool_calls"][0]["id"] == "c1"


def native_qwen3(tmp_path: Path) -> agentkit.Profile:
    return dataclasses.replace(
        get_profile("qwen3"),
        name="qwen3-native",
        template=HFChatTemplate(template_path(QWEN3), profile="qwen3-native"),
        replay="template_native",
    )


@agentkit.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.mark.anyio
async def test_template_native_hands_reasoning_to_the_models_template(tmp_path: Path) -> None:
    profile = native_qwen3(tmp_path)
    engine = agentkit.ScriptedEngine(
        [
            '<think>\nr0\n</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}'
            "\n</tool_call>",
            "<think>\nr1\n</think>\n\nDone.",
        ]
    )
    agent = agentkit.Agent(engine, tools=[lookup], profile=profile, system="S")
    result = await agent.run("Q")
    assert result.output_text == "Done."
    tools = agent.registry.specs()
    second = engine.requests[1].prompt
    before = Transcript(messages=result.transcript.messages[:4])
    assert second == apply_chat_template(QWEN3, chat_messages(before), tools)
    assert "<think>\nr0\n</think>" in second  # the template keeps the current task's reasoning


def test_a_template_that_cannot_be_loaded_names_the_file_and_the_profile(
    tmp_path: Path,
) -> None:
    missing = HFChatTemplate(tmp_path / "nowhere", profile="my-model")
    with pytest.raises(ConfigurationError, match=r"my-model.*nowhere"):
        missing.render(Transcript.from_prompt("x"), [])
    broken_file = tmp_path / "broken.jinja"
    broken_file.write_text("{% for m in messages %}{{ m.content }")
    broken = HFChatTemplate(broken_file, profile="broken-model")
    with pytest.raises(ConfigurationError, match=r"broken-model.*broken\.jinja.*compile"):
        broken.render(Transcript.from_prompt("x"), [])
    config = tmp_path / "model"
    config.mkdir()
    (config / "tokenizer_config.json").write_text(json.dumps({"eos_token": "x"}))
    with pytest.raises(ConfigurationError, match=r"m3.*tokenizer_config\.json.*no chat_template"):
        HFChatTemplate(config, profile="m3").render(Transcript.from_prompt("x"), [])
    (config / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "{{ messages[0].content }}!"})
    )
    assert HFChatTemplate(config, profile="m4").render(Transcript.from_prompt("hi"), []) == "hi!"


def test_text_after_reasoning_is_content() -> None:
    t = Transcript.from_prompt("Q")
    t.add("assistant", [ReasoningBlock(text="r"), TextBlock(text="\n\nA")])
    assert chat_messages(t)[-1] == {"role": "assistant", "content": "A", "reasoning_content": "r"}
