"""The extra reasoning syntaxes, through the driver, under any split."""

from __future__ import annotations

import pytest
from _parsing_helpers import (
    Expected,
    check,
    content,
    factory,
    reasoning_block,
    seeded_splits,
    text_block,
    tool_call,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing import ReasoningSyntax
from agentkit.parsing.reasoning.markers import (
    DEEPSEEK_V3_1,
    DEEPSEEK_V4,
    KIMI,
    MISTRAL,
    SEED_OSS,
)
from agentkit.parsing.tools import HERMES

CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
FORMATS: dict[str, tuple[ReasoningSyntax, str, Expected]] = {
    "kimi": (
        KIMI,
        "◁think▷The user greets me.◁/think▷Hello! ◁think (not a marker)",
        [reasoning_block("The user greets me."), text_block("Hello! ◁think (not a marker)")],
    ),
    "mistral": (
        MISTRAL,
        "[THINK]Need f.[/THINK]\n\n" + CALL,
        [reasoning_block("Need f."), tool_call("f", {"a": 1})],
    ),
    "deepseek v4 starts inside": (
        DEEPSEEK_V4,
        "Thinking already.\n</think>\n\nAnswer.",
        [reasoning_block("Thinking already.\n"), text_block("Answer.")],
    ),
    "deepseek v3.1 cut off while thinking": (
        DEEPSEEK_V3_1,
        "Still thinking about <b>",
        [reasoning_block("Still thinking about <b>")],
    ),
    "seed-oss": (
        SEED_OSS,
        "<seed:think>hmm</seed:think>ok <seed:thin",
        [reasoning_block("hmm"), text_block("ok <seed:thin")],
    ),
}


@pytest.mark.parametrize("name", list(FORMATS))
def test_reasoning_syntaxes_whole_and_by_character(name: str) -> None:
    syntax, output, expected = FORMATS[name]
    assert content(check(factory(syntax, HERMES), output)) == expected


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_reasoning_syntaxes_random_splits(name: str, seed: int) -> None:
    syntax, output, expected = FORMATS[name]
    split = seeded_splits(output, seed)
    assert content(check(factory(syntax, HERMES), output, split)) == expected


def test_names_and_shapes() -> None:
    syntaxes = [KIMI, MISTRAL, DEEPSEEK_V4, DEEPSEEK_V3_1, SEED_OSS]
    assert [s.name for s in syntaxes] == [
        "kimi",
        "mistral",
        "deepseek_v4",
        "deepseek_v3_1",
        "seed_oss",
    ]
    assert [s.starts_inside for s in syntaxes] == [False, False, True, True, False]
    assert KIMI.render("x") == "◁think▷x◁/think▷"
