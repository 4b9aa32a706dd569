"""The processes ``test_crash.py`` starts (and kills): ``python _crash_child.py MODE ARGS``.

- ``mid-turn PATH tool|generation``: a completed run on session ``u`` (prints ``PROMPT`` and
  its last request's prompt ids), then a run that stops mid-turn: in a tool that never returns
  (prints ``HANG``) or generating an endless answer (prints ``GENERATING``).
- ``reopen PATH PREVIOUS_IDS_JSON``: the next run on ``u`` with a fresh engine whose prefix
  cache holds the last completed request; prints a JSON report.
- ``writer PATH NAME COUNT``: ten sessions appending ``COUNT`` turns each (prints ``OK id n``
  after each), and one session shared with other writers, with retries on conflicts.

Every child runs with one hash seed (see ``test_crash.child``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator, Callable

import anyio

import agentkit
from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    ScriptedOutput,
    TokenizedScriptedEngine,
)
from agentkit.profiles import get_profile
from agentkit.sessions import SessionConflictError, SQLiteSessionStore
from agentkit.transcript import Message, TextBlock

QWEN3 = get_profile("qwen3")


def say(line: str) -> None:
    print(line, flush=True)


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@agentkit.tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@agentkit.tool
async def hang() -> str:
    """Never returns."""
    say("HANG")
    await anyio.sleep_forever()
    return ""


class Announcing(TokenizedScriptedEngine):
    """Calls ``on_first_token`` once, at the next output's first token."""

    on_first_token: Callable[[], None] | None = None

    async def _stream(
        self, output: ScriptedOutput, request: GenerationRequest
    ) -> AsyncGenerator[GenerationChunk, None]:
        async for chunk in super()._stream(output, request):
            if self.on_first_token is not None and chunk.token_ids:
                self.on_first_token()
                self.on_first_token = None
            yield chunk


def engine(outputs: list[str], *, token_delay: float = 0.0) -> Announcing:
    return Announcing(
        outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0], token_delay=token_delay
    )


async def mid_turn(path: str, where: str) -> None:
    last = call("hang") if where == "tool" else "x" * 100_000
    model = engine([call("echo", text="hi"), "Said hi.", last], token_delay=0.001)
    agent = agentkit.Agent(model, tools=[echo, hang], profile="qwen3")
    async with SQLiteSessionStore(path) as store:
        session = store.session("u")
        await agent.run("say hi", session=session)
        say("PROMPT " + json.dumps(model.requests[-1].prompt_token_ids))
        if where == "generation":
            model.on_first_token = lambda: say("GENERATING")
        await agent.run("now hang", session=session)


async def reopen(path: str, previous: list[int]) -> None:
    async with SQLiteSessionStore(path) as store:
        session = store.session("u")
        answer = (await session.turns())[-1].messages[-1]
        model = engine(["Said hi.", "Welcome back."])
        async for _ in model.generate(GenerationRequest(prompt="", prompt_token_ids=previous)):
            pass
        agent = agentkit.Agent(model, tools=[echo, hang], profile="qwen3")  # as the killed one
        result = await agent.run("hello again", session=session)
        first = model.requests[1].prompt_token_ids or []
        report = {
            "whole": len(previous) + len(answer.token_ids or []),
            "cached": result.usage.turns[0].cached_prompt_tokens,
            "extends": first[: len(previous)] == previous,
            "turns": len(await session.turns()),
        }
        say(json.dumps(report))


async def writer(path: str, name: str, count: int) -> None:
    def message(text: str) -> Message:
        return Message(role="user", content=[TextBlock(text=text)])

    async with SQLiteSessionStore(path) as store:

        async def own(i: int) -> None:
            session = store.session(f"{name}-{i}")
            for n in range(count):
                await session.append([message(f"{name} {i} {n}")], expected_turns=n)
                say(f"OK {name}-{i} {n + 1}")

        async def shared() -> None:
            session = store.session("shared")
            for n in range(count):
                while True:  # optimistic: read the count, write, read again on a conflict
                    turns = len(await session.turns())
                    try:
                        await session.append([message(f"{name} {n}")], expected_turns=turns)
                        break
                    except SessionConflictError:
                        await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as group:
            for i in range(10):
                group.start_soon(own, i)
            group.start_soon(shared)
    say("DONE")


if __name__ == "__main__":
    mode, path, *rest = sys.argv[1:]
    if mode == "mid-turn":
        anyio.run(mid_turn, path, rest[0])
    elif mode == "reopen":
        anyio.run(reopen, path, json.loads(rest[0]))
    else:
        anyio.run(writer, path, rest[0], int(rest[1]))
