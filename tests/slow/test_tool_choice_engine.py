"""tool_choice on the real engine: xgrammar compiles every format's grammar and accepts the
format's canonical calls, and a random model, constrained, emits a call the agent runs."""

from __future__ import annotations

import json
from typing import Literal

import pytest

import agentkit
from agentkit.engine import VLLMEngine
from agentkit.errors import MaxTurnsExceeded
from agentkit.parsing import get_tool_syntax, tool_call_constraint
from agentkit.parsing.tools import tool_syntax_names
from agentkit.transcript import ToolCallBlock, ToolResultBlock

pytestmark = pytest.mark.slow

CONSTRAINED = sorted({get_tool_syntax(n).name for n in tool_syntax_names()} - {"pythonic"})
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


@pytest.mark.parametrize("fmt", CONSTRAINED)
def test_xgrammar_accepts_each_formats_canonical_calls(fmt: str) -> None:
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    syntax = get_tool_syntax(fmt)
    schemas = {"get_weather": WEATHER, "clock": {}}
    weather = ToolCallBlock(id="a", name="get_weather", arguments={"city": "Paris", "days": 2})
    clock = ToolCallBlock(id="b", name="clock", arguments={})
    for name, calls in (("get_weather", [weather]), (None, [weather, clock, weather])):
        document = tool_call_constraint(syntax, schemas, name=name)
        grammar = xgrammar.Grammar.from_structural_tag(json.dumps(document))
        text = syntax.render(calls)
        assert _is_grammar_accept_string(grammar, text), (name, text)
        # And nothing but calls: free text before them is not in the grammar.
        assert not _is_grammar_accept_string(grammar, "Sure. " + text)
    named = xgrammar.Grammar.from_structural_tag(
        json.dumps(tool_call_constraint(syntax, schemas, name="get_weather"))
    )
    assert not _is_grammar_accept_string(named, syntax.render([clock]))


City = Literal["Paris", "Rome", "Lisbon"]


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["required", "pick"])
async def test_a_random_model_under_tool_choice_calls_a_tool(
    engine: VLLMEngine, choice: str
) -> None:
    ran: list[str] = []

    @agentkit.tool
    def pick(city: City) -> str:
        """Pick a city."""
        ran.append(city)
        return f"picked {city}"

    @agentkit.tool
    def other(flag: bool) -> str:
        """Another tool."""
        return "other"

    tools = [pick] if choice == "pick" else [pick, other]
    agent = agentkit.Agent(
        engine,
        tools=tools,
        profile="smollm2",  # ChatML + Hermes calls, no reasoning: the tiny model's markers
        system=f"tool choice test {choice}",
        max_turns=1,
        max_tokens=400,
        temperature=1.0,
        tool_choice=choice,
    )
    with pytest.raises(MaxTurnsExceeded) as raised:
        await agent.run("Which city?")
    transcript = raised.value.transcript
    assert transcript is not None
    assistant = next(m for m in transcript.messages if m.role == "assistant")
    calls = assistant.tool_calls
    assert calls, assistant.raw
    assert all(isinstance(c, ToolCallBlock) for c in calls)
    if choice == "pick":
        assert len(calls) == 1
        assert calls[0].name == "pick"
    for call in calls:
        if call.name == "pick":
            assert call.arguments["city"] in ("Paris", "Rome", "Lisbon")
        else:
            assert isinstance(call.arguments["flag"], bool)
    results = [b for m in transcript.messages if m.role == "tool" for b in m.content]
    assert len(results) == len(calls)
    assert all(isinstance(r, ToolResultBlock) and not r.is_error for r in results)
    assert len(ran) == sum(c.name == "pick" for c in calls)
