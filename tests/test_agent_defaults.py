"""No silent defaults: an agent's profile is named or found from the engine's model (and
logged), and a profile whose tool format never matches the model's is reported once."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentkit
from agentkit._format_watch import foreign_call
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine
from agentkit.errors import ConfigurationError

pytestmark = pytest.mark.anyio


class NamedEngine:
    """A scripted engine that, like VLLMEngine and RemoteEngine, knows its model's name."""

    def __init__(self, model: str, outputs: list[str] | None = None) -> None:
        self.model = model
        self.inner = ScriptedEngine(outputs or [])

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        return self.inner.generate(request)


@agentkit.tool
def ping() -> str:
    """Ping."""
    return "pong"


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"event='{event}'" in r.getMessage()]


def test_an_engine_without_a_model_name_needs_a_profile() -> None:
    with pytest.raises(ConfigurationError, match=r"ScriptedEngine has none: pass profile="):
        agentkit.Agent(ScriptedEngine([]))


def test_the_profile_is_found_from_the_engines_model_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="agentkit"):
        agent = agentkit.Agent(NamedEngine("Qwen/Qwen3-8B"))
    assert agent.profile.name == "qwen3"
    (line,) = records(caplog, "profile_from_engine")
    assert "model='Qwen/Qwen3-8B'" in line
    assert "profile='qwen3'" in line


def test_an_unknown_model_gets_the_fallback_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="agentkit"):
        agent = agentkit.Agent(NamedEngine("acme/unheard-of-7b"))
    assert agent.profile.name == agentkit.profiles.FALLBACK_PROFILE
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("acme/unheard-of-7b" in r.getMessage() for r in warnings)


def test_a_local_model_with_its_own_template_renders_with_it(tmp_path: Path) -> None:
    # The same path as `agentkit run --model DIR`: no catalog match, the model's own template.
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>"
    )
    agent = agentkit.Agent(NamedEngine(str(model)))
    assert agent.profile.name == "native:my-model"


@pytest.mark.parametrize(
    ("model", "profile"),
    [("Qwen/Qwen3-8B", "qwen3"), ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder")],
)
def test_a_model_id_as_profile_resolves(model: str, profile: str) -> None:
    assert agentkit.Agent(ScriptedEngine([]), profile=model).profile.name == profile


def test_a_profile_that_is_neither_a_name_nor_a_known_model_fails_naming_profile_for_model() -> (
    None
):
    with pytest.raises(ConfigurationError, match=r"profile_for_model\(\)"):
        agentkit.Agent(ScriptedEngine([]), profile="acme/unheard-of-7b")


def test_a_named_profile_wins_over_the_engines_model() -> None:
    assert agentkit.Agent(NamedEngine("Qwen/Qwen3-8B"), profile="smollm2").profile.name == (
        "smollm2"
    )


MISTRAL_CALL = '[TOOL_CALLS]ping[ARGS]{"x": 1}'


async def test_a_call_in_another_profiles_format_warns_once_per_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = ScriptedEngine([MISTRAL_CALL, MISTRAL_CALL])
    agent = agentkit.Agent(engine, tools=[ping], profile="qwen3")
    with caplog.at_level(logging.INFO, logger="agentkit"):
        first = await agent.run("go")
        await agent.run("again")
    assert first.output_text == MISTRAL_CALL  # nothing parsed it: that is what is reported
    (line,) = records(caplog, "tool_format_mismatch")
    assert "profile='qwen3'" in line
    assert "[TOOL_CALLS]" in line
    assert "mistral-v13" in line


@pytest.mark.parametrize(
    ("output", "options"),
    [
        ("Just an answer, with {braces} and <tags>.", {}),
        (MISTRAL_CALL, {"tool_choice": "none"}),
        ('<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>', {}),
        ('{"name": "not_a_tool", "arguments": {}}', {}),
    ],
    ids=["plain text", "tools not offered", "the call parsed", "json naming no tool"],
)
async def test_no_warning_without_a_foreign_call(
    caplog: pytest.LogCaptureFixture, output: str, options: dict[str, str]
) -> None:
    engine = ScriptedEngine([output, "done"])
    agent = agentkit.Agent(engine, tools=[ping], profile="qwen3", **options)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="agentkit"):
        await agent.run("go")
    assert records(caplog, "tool_format_mismatch") == []


async def test_no_warning_when_no_tools_are_registered(caplog: pytest.LogCaptureFixture) -> None:
    agent = agentkit.Agent(ScriptedEngine([MISTRAL_CALL]), profile="qwen3")
    with caplog.at_level(logging.INFO, logger="agentkit"):
        await agent.run("go")
    assert records(caplog, "tool_format_mismatch") == []


async def test_a_bare_json_call_naming_a_tool_suggests_the_json_formats(
    caplog: pytest.LogCaptureFixture,
) -> None:
    output = json.dumps({"name": "ping", "arguments": {}})
    agent = agentkit.Agent(ScriptedEngine([output]), tools=[ping], profile="mistral-v13")
    with caplog.at_level(logging.INFO, logger="agentkit"):
        await agent.run("go")
    (line,) = records(caplog, "tool_format_mismatch")
    assert "llama3" in line
    assert "qwen3" in line


@pytest.mark.parametrize(
    ("text", "formats"),
    [
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f", {"deepseek_v3", "deepseek_v31"}),
        ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">', {"deepseek_v32"}),
        ("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0", {"kimi_k2"}),
        ("<|python_tag|>{", {"llama3_json"}),
        ("<minimax:tool_call>\n<invoke", {"minimax_m2"}),
        ("<|channel|>commentary to=functions.f <|constrain|>json", {"harmony"}),
        ("<tool_call>\n<function=f>\n", {"qwen3_coder"}),
        ("<tool_call>f\n<arg_key>a</arg_key>", {"glm45"}),
    ],
)
def test_each_formats_sign_is_recognised(text: str, formats: set[str]) -> None:
    found = foreign_call(f"Sure. {text}", "hermes", ["f"])
    assert found is not None
    assert formats <= found.formats


def test_a_profiles_own_format_is_not_foreign() -> None:
    assert foreign_call("[TOOL_CALLS]f[ARGS]{}", "mistral", ["f"]) is None
    assert foreign_call('<tool_call>\n{"name": "f"', "hermes", ["f"]) is None


_PLAIN = st.text(
    alphabet=st.characters(blacklist_characters="<[{｜", blacklist_categories=("Cs",)),
    max_size=200,
)


@settings(max_examples=50, deadline=None)
@given(before=_PLAIN, after=_PLAIN)
def test_plain_text_is_never_a_foreign_call_and_a_marker_anywhere_is(
    before: str, after: str
) -> None:
    assert foreign_call(before + after, "hermes", ["f"]) is None
    found = foreign_call(before + "[TOOL_CALLS]" + after, "hermes", ["f"])
    assert found is not None
    assert "mistral" in found.formats
