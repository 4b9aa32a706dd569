"""Sessions: a conversation that outlives the process, in one SQLite file.

A support agent answers a user across several runs, as a web service would across requests:
each run passes `session=store.session("user-42")`, continues the stored conversation and
writes each completed turn (the assistant message with its token ids, and its tool results)
to the file. The store is closed and reopened between runs, as a restarted service would,
and the next run's prompt still extends the last one token for token: the engine's prefix
cache serves every earlier token. Then the session is forked to try another answer, listed,
and a session is deleted.

The engine is scripted with a tokenizer (it replays what a Qwen3 model would write and counts
cached prompt tokens as vLLM's prefix cache would), so this runs offline:

    python examples/sessions.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio

import agentkit
from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.sessions import SQLiteSessionStore

ORDERS = {"A-1001": "shipped on Monday", "A-1002": "waiting for stock"}


@agentkit.tool
def order_status(order: str) -> str:
    """The status of a customer's order.

    Args:
        order: The order number, such as A-1001.
    """
    return ORDERS.get(order, "no such order")


def call(name: str, **arguments: object) -> str:
    """A tool call as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


QWEN3 = get_profile("qwen3")
engine = TokenizedScriptedEngine(
    [
        call("order_status", order="A-1001"),
        "Order A-1001 shipped on Monday.",
        call("order_status", order="A-1002"),
        "Order A-1002 is waiting for stock.",
        "A-1002 should ship within a week.",
    ],
    specials=QWEN3.special_tokens,
    stop=QWEN3.stop[0],
)
agent = agentkit.Agent(
    engine, tools=[order_status], profile="qwen3", system="You are a support agent."
)


async def ask(path: Path, session_id: str, question: str) -> agentkit.RunResult[str]:
    """One request of the service: open the store, run on the user's session, close."""
    async with SQLiteSessionStore(path) as store:
        result = await agent.run(question, session=store.session(session_id))
    usage = result.usage.turns[0]
    print(f"> {question}\n  {result.output_text}")
    print(f"  first prompt: {usage.prompt_tokens} tokens, {usage.cached_prompt_tokens} cached")
    return result


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "sessions.db"

        first = await ask(path, "user-42", "Where is my order A-1001?")
        second = await ask(path, "user-42", "And A-1002?")
        # The second run's first prompt is the first run's last prompt, plus what the model
        # generated, plus the new question: everything before the question was cached.
        last_prompt = engine.requests[1].prompt_token_ids
        generated = first.transcript.messages[-1].token_ids
        assert last_prompt is not None
        assert generated is not None
        assert second.usage.turns[0].cached_prompt_tokens == len(last_prompt) + len(generated)

        async with SQLiteSessionStore(path) as store:
            session = store.session("user-42")
            turns = await session.turns()
            for turn in turns:
                print(f"turn {turn.index}: {[m.role for m in turn.messages]}")
            assert len(turns) == 4  # two runs of two model turns each

            # Fork after the first question and ask something else there; the original stays.
            branch = await session.fork("user-42-branch", turns=2)
            await agent.run("When will A-1002 ship?", session=branch)
            print([(info.id, info.turns) for info in await store.list_sessions()])
            assert [m.text for m in await session.transcript()][-1].startswith("Order A-1002")

            assert await store.delete("user-42-branch")
            assert [info.id for info in await store.list_sessions()] == ["user-42"]


if __name__ == "__main__":
    anyio.run(main)
