"""Testing an agent without a model: three checks you can copy into your own test suite.

1. A ``FunctionEngine`` plays the model: it reads the conversation (the question, the tool
   results) and answers, so the test exercises the real loop, parsers and tools.
2. Every request is recorded (``engine.calls``) with its run, turn, tool choice and output
   constraints; an output that breaks a constraint fails loudly.
3. ``ScriptedEngine.per_run`` gives each concurrent run its own copy of a script.

Offline, in well under a second:

    python examples/testing.py
"""

from __future__ import annotations

import json

import anyio

import agentkit
from agentkit.engine import ConstraintViolationError, FunctionEngine, ScriptedCall, ScriptedEngine

STOCK = {"apples": 12, "pears": 0}


@agentkit.tool
def stock(item: str) -> int:
    """How many of an item are in stock.

    Args:
        item: The item's name, e.g. "apples".
    """
    return STOCK[item]


def call(name: str, **arguments: object) -> str:
    """A tool call as Qwen3 writes it (the agent's default profile)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def shopkeeper(request: ScriptedCall) -> str:
    """The fake model: look the item up, then answer from the tool's result."""
    item = (request.first_user_text or "").split()[-1].rstrip("?")
    if not request.tool_results:
        return f"<think>\nCheck the stock of {item}.\n</think>\n\n" + call("stock", item=item)
    count = int(request.tool_results[0].content)
    return f"We have {count} {item}." if count else f"Sorry, no {item} left."


async def decide_from_the_transcript() -> None:
    engine = FunctionEngine(shopkeeper)
    agent = agentkit.Agent(engine, tools=[stock], profile="qwen3")
    result = await agent.run("Do you have pears?")
    assert result.output_text == "Sorry, no pears left."
    (assistant, tool_message, _) = result.transcript.messages[1:]
    assert [(c.name, c.arguments) for c in assistant.tool_calls] == [("stock", {"item": "pears"})]
    assert tool_message.content[0].type == "tool_result"
    print("1. the function engine answered from the tool result:", result.output_text)


async def assert_on_constraints() -> None:
    engine = FunctionEngine(shopkeeper)
    agent = agentkit.Agent(engine, tools=[stock], tool_choice="required", profile="qwen3")
    await agent.run("Do you have apples?")
    first, second = engine.calls
    assert (first.tool_choice, second.tool_choice) == ("required", "auto")
    assert first.constraints.names == ("structured_outputs.structural_tag",)
    # A script that answers in prose where the grammar forces a call is a broken test.
    prose = agentkit.Agent(
        ScriptedEngine(["We have apples."]), tools=[stock], tool_choice="required", profile="qwen3"
    )
    caught: ConstraintViolationError | None = None
    try:
        await prose.run("Do you have apples?")
    except ConstraintViolationError as error:
        caught = error
    assert caught is not None, "prose should have broken the tool-call grammar"
    assert caught.constraint == "structured_outputs.structural_tag"
    print("2. recorded:", first.constraints.names[0], "| caught:", caught.constraint)


async def script_each_run() -> None:
    engine = ScriptedEngine.per_run([call("stock", item="apples"), "We have 12 apples."])
    agent = agentkit.Agent(engine, tools=[stock], profile="qwen3")
    answers: list[str] = []

    async def ask() -> None:
        answers.append((await agent.run("Do you have apples?")).output_text)

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(ask)
    assert answers == ["We have 12 apples."] * 3
    assert len({c.run_id for c in engine.calls}) == 3
    print("3. three concurrent runs, each with its own script:", answers[0])


async def main() -> None:
    await decide_from_the_transcript()
    await assert_on_constraints()
    await script_each_run()


if __name__ == "__main__":
    anyio.run(main)
