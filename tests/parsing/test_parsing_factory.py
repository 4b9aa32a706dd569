"""Building parsers by format name, and formats that open only at the start of the output."""

from __future__ import annotations

import pytest

from agentkit.errors import ConfigurationError
from agentkit.parsing import (
    MarkerStreamParser,
    create_parser,
    get_reasoning_syntax,
    stream_format_names,
)
from agentkit.parsing.harmony import HarmonyParser
from agentkit.parsing.reasoning import DEEPSEEK_V4, KIMI, MISTRAL, THINK
from agentkit.transcript import ContentBlock, TextBlock, ToolCallBlock


def parse(parser_args: tuple[str | None, str | None], output: str, step: int) -> list[ContentBlock]:
    parser = create_parser(*parser_args)
    for i in range(0, len(output), step):
        parser.feed(output[i : i + step])
    parser.finish()
    blocks = parser.blocks
    assert "".join(b.raw or "" for b in blocks) == output
    return blocks


def test_composed_formats_use_the_marker_driver() -> None:
    assert isinstance(create_parser("think", "hermes"), MarkerStreamParser)
    assert isinstance(create_parser(None, "kimi_k2"), MarkerStreamParser)
    assert isinstance(create_parser("deepseek_r1", None), MarkerStreamParser)


def test_harmony_owns_the_whole_stream() -> None:
    assert stream_format_names() == ["harmony"]
    assert isinstance(create_parser("harmony", "harmony"), HarmonyParser)
    assert isinstance(create_parser(None, "harmony"), HarmonyParser)
    with pytest.raises(ConfigurationError, match="cannot be combined"):
        create_parser("think", "harmony")


def test_unknown_names_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="unknown tool-call syntax"):
        create_parser(None, "nope")
    with pytest.raises(ConfigurationError, match="unknown reasoning syntax"):
        create_parser("nope", None)


def test_reasoning_registry_knows_every_family() -> None:
    assert get_reasoning_syntax("kimi") is KIMI
    assert get_reasoning_syntax("mistral") is MISTRAL
    assert get_reasoning_syntax("deepseek-v4") is DEEPSEEK_V4
    assert get_reasoning_syntax("DeepSeek-V3.1").starts_inside
    for name in ("glm45", "minimax_m2", "nemotron_deci"):
        assert get_reasoning_syntax(name) is THINK


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_leading_marker_opens_a_section_only_at_the_start(step: int) -> None:
    output = ' \n{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}'
    blocks = parse((None, "llama3_json"), output, step)
    assert [(b.name, b.arguments) for b in blocks if isinstance(b, ToolCallBlock)] == [
        ("f", {"a": 1}),
        ("g", {}),
    ]
    later = 'Sure: {"name": "f", "parameters": {"a": 1}}'
    assert parse((None, "llama3_json"), later, step) == [TextBlock(text=later, raw=later)]


@pytest.mark.parametrize("step", [1, 2, 1000])
def test_a_rejected_leading_section_becomes_text(step: int) -> None:
    for output in ("[1, 2] is a list", "[link](https://example.com)"):
        blocks = parse((None, "pythonic"), output, step)
        assert blocks == [TextBlock(text=output, raw=output)]
    blocks = parse((None, "pythonic"), '[f(a=1, b="x"), g()]', step)
    assert [(b.name, b.arguments) for b in blocks if isinstance(b, ToolCallBlock)] == [
        ("f", {"a": 1, "b": "x"}),
        ("g", {}),
    ]
