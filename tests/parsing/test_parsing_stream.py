"""The driver: modes, whitespace ownership, reasoning edge cases, calls inside reasoning."""

from __future__ import annotations

from typing import Any

import pytest
from _parsing_helpers import calls, check, content, factory, run, splits
from hypothesis import given, settings
from hypothesis import strategies as st

import agentkit.parsing
import agentkit.parsing.tools
from agentkit.errors import ConfigurationError
from agentkit.parsing import (
    MarkerStreamParser,
    get_reasoning_syntax,
    get_tool_syntax,
    render_blocks,
)
from agentkit.parsing.reasoning import DEEPSEEK_R1, THINK
from agentkit.parsing.tools import HERMES, tool_syntax_names
from agentkit.transcript import ReasoningBlock, ToolCallBlock, ToolResultBlock

MAKE = factory(THINK, HERMES)
CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
F_CALL = {"type": "tool_call", "name": "f", "arguments": {"a": 1}, "error": None}


def texts(blocks: list[Any]) -> list[tuple[str, str | None]]:
    return [(b.type, b.raw) for b in blocks]


# -- releasing and holding text ------------------------------------------------------------------


def test_text_is_released_at_once_and_only_a_possible_marker_is_held() -> None:
    parser = MAKE()
    assert [e.model_dump() for e in parser.feed("Hello <")] == [
        {"type": "text_delta", "index": 0, "text": "Hello "}
    ]
    assert [e.model_dump() for e in parser.feed("b> and <tool")] == [
        {"type": "text_delta", "index": 0, "text": "<b> and "}
    ]
    assert [e.type for e in parser.feed("_call>")] == ["text_complete"]


def test_a_partial_marker_at_the_end_is_text() -> None:
    blocks = check(MAKE, "Use <tool_ca")
    assert content(blocks) == [{"type": "text", "text": "Use <tool_ca"}]
    blocks = check(MAKE, "<think>unfinished </thi")
    assert content(blocks) == [{"type": "reasoning", "text": "unfinished </thi"}]


def test_held_text_stays_bounded_over_a_long_output() -> None:
    parser = MAKE()
    longest = max(len(m) for m in ("<think>", "</think>", "<tool_call>"))
    for ch in "<think>" + "x < y </thin " * 200 + "</think>" + "a <tool_cal " * 200:
        parser.feed(ch)
        assert len(parser._held) < longest
    parser.finish()


# -- whitespace is formatting, owned by the block that follows -----------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("\n\nHello  \n", [("text", "\n\nHello  \n")]),
        ("<think>\nr\n</think>\n\n", [("reasoning", "<think>\nr\n</think>\n\n")]),
        ("\n<think>r</think>\n\nHi", [("reasoning", "\n<think>r</think>"), ("text", "\n\nHi")]),
        ("Hi\n\n" + CALL + "\n", [("text", "Hi\n\n"), ("tool_call", CALL + "\n")]),
        (
            "<think>r</think>\n\n" + CALL,
            [("reasoning", "<think>r</think>"), ("tool_call", "\n\n" + CALL)],
        ),
    ],
)
def test_whitespace_between_structures_is_raw(output: str, expected: list[Any]) -> None:
    assert texts(check(MAKE, output)) == expected


def test_leading_whitespace_is_not_text() -> None:
    blocks = check(MAKE, "<think>\n  thought</think>\n\n  answer")
    assert content(blocks) == [
        {"type": "reasoning", "text": "thought"},
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize("output", [" ", "\n\n", " \t\n "])
def test_whitespace_only_output_is_one_text_block(output: str) -> None:
    blocks = check(MAKE, output)
    assert texts(blocks) == [("text", output)]
    assert content(blocks) == [{"type": "text", "text": output}]


def test_empty_output_has_no_blocks() -> None:
    assert run(MAKE, []) == ([], [])
    assert run(MAKE, ["", ""]) == ([], [])


def test_consecutive_reasoning_blocks_stay_separate() -> None:
    blocks = check(MAKE, "<think>a</think><think>b</think>")
    assert content(blocks) == [
        {"type": "reasoning", "text": "a"},
        {"type": "reasoning", "text": "b"},
    ]


# -- reasoning that never ends, or starts in the prompt ------------------------------------------


def test_unterminated_reasoning_is_reasoning() -> None:
    blocks = check(MAKE, "<think>\nstill thinking when cut off")
    assert content(blocks) == [{"type": "reasoning", "text": "still thinking when cut off"}]


R1 = factory(DEEPSEEK_R1, HERMES)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "thinking...\n</think>\n\nanswer",
            [{"type": "reasoning", "text": "thinking...\n"}, {"type": "text", "text": "answer"}],
        ),
        (
            "\n<think>\nthinking</think>answer",
            [{"type": "reasoning", "text": "thinking"}, {"type": "text", "text": "answer"}],
        ),
        ("never finished <thi", [{"type": "reasoning", "text": "never finished <thi"}]),
        ("</think>answer", [{"type": "reasoning", "text": ""}, {"type": "text", "text": "answer"}]),
        ("a<think>b</think>", [{"type": "reasoning", "text": "a<think>b"}]),
        ("<thin", [{"type": "reasoning", "text": "<thin"}]),
    ],
)
def test_reasoning_that_starts_in_the_prompt(output: str, expected: list[Any]) -> None:
    assert content(check(R1, output)) == expected


def test_a_start_marker_written_anyway_is_raw() -> None:
    (block, _) = check(R1, "<think>\nr</think>x")
    assert block.raw == "<think>\nr</think>"


# -- tool calls inside reasoning -----------------------------------------------------------------

INSIDE = "<think>Let me call it.\n" + CALL + "\nmore thought</think>\n\nanswer"


def test_call_inside_reasoning_ends_the_reasoning_by_default() -> None:
    blocks = check(MAKE, INSIDE)
    assert content(blocks) == [
        {"type": "reasoning", "text": "Let me call it.\n"},
        F_CALL,
        {"type": "text", "text": "more thought</think>\n\nanswer"},
    ]


def test_call_inside_reasoning_can_be_an_error() -> None:
    make = factory(THINK, HERMES, calls_in_reasoning="error")
    blocks = check(make, INSIDE)
    assert [b.type for b in blocks] == ["reasoning", "tool_call", "reasoning", "text"]
    assert content(blocks)[0] == {"type": "reasoning", "text": "Let me call it.\n"}
    assert content(blocks)[2:] == [
        {"type": "reasoning", "text": "more thought"},
        {"type": "text", "text": "answer"},
    ]
    (bad,) = calls(blocks)
    assert bad.arguments == {"a": 1}  # parsed, but not to be run
    assert bad.error is not None
    assert "inside the reasoning block" in bad.error
    assert "</think>" in bad.error


def test_malformed_call_inside_reasoning_reports_both_problems() -> None:
    make = factory(THINK, HERMES, calls_in_reasoning="error")
    (bad,) = calls(check(make, "<think>x<tool_call>{nope}</tool_call>y</think>"))
    assert bad.error is not None
    assert "inside the reasoning block" in bad.error
    assert "invalid JSON" in bad.error


def test_r1_call_before_the_end_marker() -> None:
    blocks = check(factory(DEEPSEEK_R1, HERMES), CALL + "after")
    assert content(blocks) == [F_CALL, {"type": "text", "text": "after"}]
    make = factory(DEEPSEEK_R1, HERMES, calls_in_reasoning="error")
    blocks = check(make, "\n" + CALL + "\n</think>answer")
    assert [b.type for b in blocks] == ["tool_call", "reasoning", "text"]
    assert blocks[0].raw == "\n" + CALL


# -- the parser object ---------------------------------------------------------------------------


def test_use_after_finish_is_an_error() -> None:
    parser = MAKE()
    parser.feed("hi")
    parser.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        parser.feed("more")
    with pytest.raises(RuntimeError, match="after finish"):
        parser.finish()


def test_unknown_calls_in_reasoning_policy() -> None:
    with pytest.raises(ConfigurationError, match="calls_in_reasoning"):
        MarkerStreamParser(THINK, HERMES, calls_in_reasoning="ignore")  # type: ignore[arg-type]


def test_default_ids_and_model_ids() -> None:
    blocks, _ = run(lambda: MarkerStreamParser(None, HERMES), [CALL + CALL])
    first, second = calls(blocks)
    assert first.id.startswith("call_")
    assert len(first.id) == len("call_") + 24
    assert first.id != second.id


def test_without_syntaxes_everything_is_text() -> None:
    make = factory(None, None)
    assert content(check(make, "<think>x</think>" + CALL)) == [
        {"type": "text", "text": "<think>x</think>" + CALL}
    ]
    make = factory(THINK, None)
    assert [b.type for b in check(make, "<think>x</think>" + CALL)] == ["reasoning", "text"]


# -- render_blocks -------------------------------------------------------------------------------


def test_render_exact_uses_raw_and_canonical_fills_the_rest() -> None:
    output = "<think>\nr\n</think>\n\n" + CALL + "\n" + CALL + "\n\nbye"
    blocks = check(MAKE, output)
    assert render_blocks(blocks, THINK, HERMES) == output
    assert render_blocks(blocks, THINK, HERMES, exact=False) == (
        "<think>r\n</think>" + CALL + "\n" + CALL + "bye"
    )
    mixed = [ReasoningBlock(text="r"), *blocks[1:3], ToolCallBlock(id="z", name="f")]
    assert render_blocks(mixed, THINK, HERMES) == (
        "<think>r</think>"
        + "\n\n"
        + CALL
        + "\n"
        + CALL
        + '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    )


@pytest.mark.parametrize(
    ("block", "reasoning", "tools"),
    [
        (ReasoningBlock(text="r"), None, HERMES),
        (ToolCallBlock(id="x", name="f"), THINK, None),
        (ToolResultBlock(call_id="x", name="f", content="c"), THINK, HERMES),
    ],
)
def test_render_refuses_what_it_cannot_write(block: Any, reasoning: Any, tools: Any) -> None:
    with pytest.raises(ValueError, match=r"(cannot render|not part of)"):
        render_blocks([block], reasoning, tools)


PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<", "/", ">", "t", "\n", " ", "é"]
GARBAGE = st.lists(st.sampled_from([*PIECES, '{"name": "f"}', '"', "}"]), max_size=14).map("".join)


@settings(max_examples=60, deadline=None)
@given(
    output=GARBAGE,
    data=st.data(),
)
def test_any_output_keeps_every_byte_for_any_split(output: str, data: st.DataObject) -> None:
    """Garbage in: still chunk invariant, byte for byte, and renders back exactly."""
    for make in (MAKE, R1, factory(THINK, HERMES, calls_in_reasoning="error")):
        blocks = check(make, output, data.draw(splits(output)))
        assert render_blocks(blocks, THINK, HERMES) == output


# -- registries and exports ----------------------------------------------------------------------


def test_reasoning_registry() -> None:
    assert get_reasoning_syntax("think") is THINK
    assert get_reasoning_syntax("Qwen3") is THINK
    assert get_reasoning_syntax("deepseek-r1") is DEEPSEEK_R1
    assert DEEPSEEK_R1.starts_inside
    assert THINK.render("x") == "<think>x</think>"
    with pytest.raises(ConfigurationError, match=r"deepseek_r1.*think"):
        get_reasoning_syntax("nope")


def test_tool_registry_rejects_unknown_names() -> None:
    with pytest.raises(ConfigurationError, match=r"hermes.*qwen3_coder"):
        get_tool_syntax("nope")


def test_tool_registry_names_every_finished_syntax() -> None:
    tools = agentkit.parsing.tools
    canonical = {
        "deepseek_v3": tools.DEEPSEEK_V3,
        "deepseek_v31": tools.DEEPSEEK_V31,
        "deepseek_v32": tools.DEEPSEEK_V32,
        "deepseek_v4": tools.DEEPSEEK_V4,
        "deepseek_v41": tools.DEEPSEEK_V41,
        "glm45": tools.GLM45,
        "glm47": tools.GLM47,
        "hermes": tools.HERMES,
        "kimi_k2": tools.KIMI_K2,
        "llama3_json": tools.LLAMA3_JSON,
        "minimax_m2": tools.MINIMAX_M2,
        "mistral": tools.MISTRAL,
        "mistral_legacy": tools.MISTRAL_LEGACY,
        "mistral_v11": tools.MISTRAL_V11,
        "nemotron_deci": tools.NEMOTRON_DECI,
        "pythonic": tools.PYTHONIC,
        "qwen3_coder": tools.QWEN3_CODER,
    }
    aliases = {
        "DeepSeek-V3.1": "deepseek_v31",
        "deepseek_v3_2": "deepseek_v32",
        "DeepSeek-V4.1": "deepseek_v41",
        "GLM4.5": "glm45",
        "glm4": "glm45",
        "glm4.7": "glm47",
        "MiniMax": "minimax_m2",
        "Kimi-K2": "kimi_k2",
        "Qwen2.5": "hermes",
        "qwen3-coder": "qwen3_coder",
        "llama3": "llama3_json",
        "Llama4-JSON": "llama3_json",
        "nemotron": "nemotron_deci",
    }
    for name, syntax in canonical.items():
        assert syntax.name == name
        assert get_tool_syntax(name) is syntax
    for alias, name in aliases.items():
        assert get_tool_syntax(alias) is canonical[name]
    assert tool_syntax_names() == [
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "deepseek_v3_1",
        "deepseek_v3_2",
        "deepseek_v4",
        "deepseek_v41",
        "deepseek_v4_1",
        "glm4",
        "glm45",
        "glm47",
        "glm4_5",
        "glm4_7",
        "hermes",
        "kimi_k2",
        "llama3",
        "llama3_json",
        "llama4_json",
        "minimax",
        "minimax_m2",
        "mistral",
        "mistral_legacy",
        "mistral_v11",
        "nemotron",
        "nemotron_deci",
        "pythonic",
        "qwen25",
        "qwen2_5",
        "qwen3_coder",
    ]
    assert tools.__all__ == [
        "DEEPSEEK_V3",
        "DEEPSEEK_V4",
        "DEEPSEEK_V31",
        "DEEPSEEK_V32",
        "DEEPSEEK_V41",
        "GLM45",
        "GLM47",
        "HERMES",
        "KIMI_K2",
        "LLAMA3_JSON",
        "MINIMAX_M2",
        "MISTRAL",
        "MISTRAL_LEGACY",
        "MISTRAL_V11",
        "NEMOTRON_DECI",
        "PYTHONIC",
        "QWEN3_CODER",
        "HermesToolSyntax",
        "Qwen3CoderToolSyntax",
        "get_tool_syntax",
        "tool_syntax_names",
    ]


def test_public_names() -> None:
    assert agentkit.parsing.__all__ == sorted(agentkit.parsing.__all__)
    assert set(agentkit.parsing.__all__) == {
        "CallArguments",
        "CallEnd",
        "CallShape",
        "CallStart",
        "CallsInReasoning",
        "MarkerStreamParser",
        "ReasoningSyntax",
        "SectionStep",
        "StreamParser",
        "ToolSection",
        "ToolSyntax",
        "call_shape",
        "create_parser",
        "get_reasoning_syntax",
        "get_tool_syntax",
        "render_blocks",
        "stream_format_names",
        "tool_call_constraint",
    }
    parser: agentkit.parsing.StreamParser = MAKE()  # satisfies the protocol
    assert parser.blocks == []
