"""Typed output on the real engine: xgrammar compiles the answer-or-calls grammar of every call
format and accepts what it should, and a random model, constrained, gives a typed answer after
a tool call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import pytest
from pydantic import BaseModel, TypeAdapter

import agentkit
from agentkit.engine import VLLMEngine
from agentkit.parsing import get_reasoning_syntax, get_tool_syntax, tool_call_constraint
from agentkit.parsing.tools import tool_syntax_names
from agentkit.transcript import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

pytestmark = pytest.mark.slow

CONSTRAINED = sorted({get_tool_syntax(n).name for n in tool_syntax_names()} - {"pythonic"})
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


class Verdict(BaseModel):
    city: Literal["Paris", "Rome", "Lisbon"]
    sunny: bool


ANSWER = '{"city": "Rome", "sunny": false}'


@pytest.mark.parametrize("fmt", CONSTRAINED)
def test_xgrammar_takes_reasoning_then_an_answer_or_calls(fmt: str) -> None:
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    syntax = get_tool_syntax(fmt)
    document = tool_call_constraint(
        syntax,
        {"get_weather": WEATHER},
        reasoning=get_reasoning_syntax("think"),
        answer=TypeAdapter(Verdict).json_schema(),
    )
    grammar = xgrammar.Grammar.from_structural_tag(json.dumps(document))
    call = syntax.render([ToolCallBlock(id="a", name="get_weather", arguments={"city": "Rome"})])

    def accepts(text: str) -> bool:
        return bool(_is_grammar_accept_string(grammar, text))

    assert accepts(ANSWER)
    assert accepts("<think>Rome, I think.</think>\n\n" + ANSWER)
    assert accepts("<think>Look it up.</think>\n" + call)
    assert not accepts("Here: " + ANSWER)
    assert not accepts(ANSWER + " Done.")
    assert not accepts('{"city": "Oslo", "sunny": false}')
    assert not accepts('{"city": "Rome"}')


@pytest.mark.anyio
async def test_a_random_model_gives_a_typed_answer_after_a_tool_call(
    engine: VLLMEngine, marker_ids: dict[str, int]
) -> None:
    ran: list[str] = []

    @agentkit.tool
    def pick(city: Literal["Paris", "Rome", "Lisbon"]) -> str:
        """Pick a city."""
        ran.append(city)
        return f"picked {city}"

    def bias(turn: int, transcript: Transcript) -> Mapping[str, Any]:
        """Steer the random model among what the grammar leaves open (a bias applies at every
        position, so it cannot say "first this, then that"). Turn 1, a forced call: no
        reasoning, each call marker one token. Turn 2, calls or the typed answer: likely open
        the reasoning, likely close it soon, never a call (its marker is out, and "<" is out,
        so it cannot be spelled either); the grammar does the rest. The seed fixes the draw."""
        ids = dict.fromkeys(marker_ids.values(), -100.0)
        ids[engine.encode("<")[0]] = -100.0  # markers come as their tokens, never spelled out
        if turn == 1:
            ids[marker_ids["<tool_call>"]] = ids[marker_ids["</tool_call>"]] = 100.0
        else:
            ids[marker_ids["<think>"]] = 6.0
            ids[marker_ids["</think>"]] = 9.0
        ids.update({engine.encode(s)[0]: -100.0 for s in ("<|endoftext|>", "<|im_start|>")})
        return {"logit_bias": ids, "seed": 7}

    agent = agentkit.Agent(
        engine,
        tools=[pick],
        profile="qwen3",
        system="typed output test",
        max_turns=2,
        max_tokens=400,
        temperature=1.0,
        tool_choice="pick",
        output_type=Verdict,
        output_retries=0,
        request_options=bias,
    )
    assert agent.output_constraint == TypeAdapter(Verdict).json_schema()
    result = await agent.run("Which city, and is it sunny?")

    assert isinstance(result.output, Verdict)
    assert Verdict.model_validate_json(result.output_text) == result.output
    first, tool, second = result.transcript.messages[2:]
    assert [c.name for c in first.tool_calls] == ["pick"]
    assert len(ran) == 1
    assert isinstance(tool.content[0], ToolResultBlock)
    assert not tool.content[0].is_error
    # The answer came after the model's reasoning, and nothing else was written.
    kinds = [type(b) for b in second.content]
    assert kinds == [ReasoningBlock, TextBlock], second.raw
    assert len(result.usage.turns) == 2
