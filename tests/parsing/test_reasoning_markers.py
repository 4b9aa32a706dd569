"""The extra reasoning syntaxes, through the driver, under any split."""

from __future__ import annotations

from typing import Any

import pytest
from _parsing_helpers import check, content, factory, splits
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
FORMATS: dict[str, tuple[ReasoningSyntax, str, list[dict[str, Any]]]] = {
    "kimi": (
        KIMI,
        "◁think▷The user greets me.◁/think▷Hello! ◁think (not a marker)",
        [
            {"type": "reasoning", "text": "The user greets me."},
            {"type": "text", "text": "Hello! ◁think (not a marker)"},
        ],
    ),
    "mistral": (
        MISTRAL,
        "[THINK]Need f.[/THINK]\n\n" + CALL,
        [
            {"type": "reasoning", "text": "Need f."},
            {"type": "tool_call", "name": "f", "arguments": {"a": 1}, "error": None},
        ],
    ),
    "deepseek v4 starts inside": (
        DEEPSEEK_V4,
        "Thinking already.\n</think>\n\nAnswer.",
        [
            {"type": "reasoning", "text": "Thinking already.\n"},
            {"type": "text", "text": "Answer."},
        ],
    ),
    "deepseek v3.1 cut off while thinking": (
        DEEPSEEK_V3_1,
        "Still thinking about <b>",
        [{"type": "reasoning", "text": "Still thinking about <b>"}],
    ),
    "seed-oss": (
        SEED_OSS,
        "<seed:think>hmm</seed:think>ok <seed:thin",
        [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "ok <seed:thin"}],
    ),
}


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_reasoning_syntaxes(name: str, data: st.DataObject) -> None:
    syntax, output, expected = FORMATS[name]
    make = factory(syntax, HERMES)
    assert content(check(make, output)) == expected
    assert content(check(make, output, data.draw(splits(output)))) == expected


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
