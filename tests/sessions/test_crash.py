"""Processes and files: a process killed (SIGKILL) mid-turn leaves a file that opens cleanly
with every completed turn and none of the half turn, and the next run replays it token for
token; two processes share one file without losing a turn."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import agentkit
from agentkit.engine import GenerationRequest, TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.sessions import SQLiteSessionStore

QWEN3 = get_profile("qwen3")
LIMIT_S = 120
"""The most any child process may take (a bound on a hung test, never a timing assertion)."""

_COMMON = """
import json, sys
import anyio, agentkit
from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.sessions import SQLiteSessionStore, SessionConflictError

QWEN3 = get_profile("qwen3")

def call(name, **arguments):
    return f"<tool_call>\\n{json.dumps({'name': name, 'arguments': arguments})}\\n</tool_call>"

def say(line):
    print(line, flush=True)
"""

_MID_TURN = """
@agentkit.tool
async def echo(text: str) -> str:
    '''Say it back.'''
    return text

@agentkit.tool
async def hang() -> str:
    '''Never returns.'''
    say("HANG")
    await anyio.sleep_forever()
    return ""

async def main(path, where):
    endless = "x" * 100_000
    engine = TokenizedScriptedEngine(
        [call("echo", text="hi"), "Said hi.", call("hang") if where == "tool" else endless],
        specials=QWEN3.special_tokens, stop=QWEN3.stop[0], token_delay=0.001,
    )
    agent = agentkit.Agent(engine, tools=[echo, hang], profile="qwen3")
    async with SQLiteSessionStore(path) as store:
        session = store.session("u")
        await agent.run("say hi", session=session)
        say("PROMPT " + json.dumps(engine.requests[-1].prompt_token_ids))
        if where == "generation":
            engine.on_first_token = lambda: say("GENERATING")
        await agent.run("now hang", session=session)

anyio.run(main, sys.argv[1], sys.argv[2])
"""

_WRITER = """
from agentkit.transcript import Message, TextBlock

async def main(path, name, count):
    async with SQLiteSessionStore(path) as store:
        async def own(i):
            session = store.session(f"{name}-{i}")
            for n in range(count):
                await session.append(
                    [Message(role="user", content=[TextBlock(text=f"{name} {i} {n}")])],
                    expected_turns=n,
                )
                say(f"OK {name}-{i} {n + 1}")

        async def shared():
            session = store.session("shared")
            for n in range(count):
                while True:  # optimistic: read the count, write, retry on a conflict
                    turns = len(await session.turns())
                    try:
                        await session.append(
                            [Message(role="user", content=[TextBlock(text=f"{name} {n}")])],
                            expected_turns=turns,
                        )
                        break
                    except SessionConflictError:
                        await anyio.sleep(0)

        async with anyio.create_task_group() as group:
            for i in range(10):
                group.start_soon(own, i)
            group.start_soon(shared)
    say("DONE")

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


@agentkit.tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@agentkit.tool
async def hang() -> str:
    """Never returns."""
    await anyio.sleep_forever()
    return ""


def child(tmp_path: Path, source: str, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / f"child_{abs(hash(source))}.py"
    script.write_text(textwrap.dedent(_COMMON + source))
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(process: subprocess.Popen[str]) -> Iterator[str]:
    """The child's output lines; the child is killed if it outlives ``LIMIT_S``."""
    watchdog = threading.Timer(LIMIT_S, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            yield line.rstrip("\n")
    finally:
        watchdog.cancel()


def integrity(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        (verdict,) = connection.execute("PRAGMA integrity_check").fetchone()
    finally:
        connection.close()
    return str(verdict)


@pytest.mark.parametrize("where", ["tool", "generation"])
def test_a_process_killed_mid_turn_loses_only_that_turn(tmp_path: Path, where: str) -> None:
    path = tmp_path / "crash.db"
    source = _MID_TURN
    if where == "generation":
        # the child announces the first streamed token of the endless turn, then is killed
        source = source.replace(
            "engine = TokenizedScriptedEngine(",
            "engine = Announcing(",
        )
        source = (
            "\nclass Announcing(TokenizedScriptedEngine):\n"
            "    on_first_token = None\n"
            "    async def _stream(self, output, request):\n"
            "        async for chunk in super()._stream(output, request):\n"
            "            if self.on_first_token is not None and chunk.token_ids:\n"
            "                self.on_first_token()\n"
            "                self.on_first_token = None\n"
            "            yield chunk\n"
        ) + source
    previous: list[int] | None = None
    with child(tmp_path, source, str(path), where) as process:
        for line in lines(process):
            if line.startswith("PROMPT "):
                previous = json.loads(line.removeprefix("PROMPT "))
            elif line in ("HANG", "GENERATING"):
                os.kill(process.pid, signal.SIGKILL)
        assert process.stderr is not None
        assert process.wait() == -signal.SIGKILL, process.stderr.read()
    assert previous is not None

    assert integrity(path) == "ok"

    async def reopen() -> None:
        async with SQLiteSessionStore(path) as store:
            session = store.session("u")
            turns = await session.turns()
            # every completed turn, intact; nothing of the killed run (not even its prompt)
            assert [[m.role for m in t.messages] for t in turns] == [
                ["user", "assistant", "tool"],
                ["assistant"],
            ]
            answer = turns[-1].messages[-1]
            assert answer.text == "Said hi."
            assert answer.token_ids
            # A fresh engine's prefix cache holds the last completed request (the killed
            # process's cache died with it), then the next run on the session is served whole.
            engine = TokenizedScriptedEngine(
                ["Said hi.", "Welcome back."], specials=QWEN3.special_tokens, stop=QWEN3.stop[0]
            )
            async for _ in engine.generate(GenerationRequest(prompt="", prompt_token_ids=previous)):
                pass
            # the same tools as the child's agent: the same prompt
            agent = agentkit.Agent(engine, tools=[echo, hang], profile="qwen3")
            result = await agent.run("hello again", session=session)
            assert previous is not None
            assert result.usage.turns[0].cached_prompt_tokens == len(previous) + len(
                answer.token_ids
            )
            assert len(await session.turns()) == 3

    anyio.run(reopen)


def test_a_process_killed_while_writing_leaves_whole_turns(tmp_path: Path) -> None:
    """Killed in the middle of a stream of writes (10 sessions appending at once): the file
    opens clean, and each session holds at least the turns reported written, contiguous."""
    path = tmp_path / "writes.db"
    reported: dict[str, int] = {}
    with child(tmp_path, _WRITER, str(path), "w", "100000") as process:
        for line in lines(process):
            if line.startswith("OK "):
                _, session_id, count = line.split()
                reported[session_id] = int(count)
                if len(reported) == 10 and sum(reported.values()) >= 300:
                    os.kill(process.pid, signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    assert integrity(path) == "ok"

    async def reopen() -> None:
        async with SQLiteSessionStore(path) as store:
            for session_id, count in reported.items():
                turns = await store.load(session_id)
                assert len(turns) >= count
                assert [t.index for t in turns] == list(range(len(turns)))
                name, i = session_id.split("-")
                assert [t.messages[0].text for t in turns] == [
                    f"{name} {i} {n}" for n in range(len(turns))
                ]

    anyio.run(reopen)


def test_two_processes_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    with (
        child(tmp_path, _WRITER, str(path), "p", "15") as first,
        child(tmp_path, _WRITER, str(path), "q", "15") as second,
    ):
        for process in (first, second):
            assert process.stderr is not None
            assert list(lines(process))[-1:] == ["DONE"], process.stderr.read()
            assert process.wait() == 0

    async def check() -> None:
        async with SQLiteSessionStore(path) as store:
            infos = {info.id: info.turns for info in await store.list_sessions()}
            assert len(infos) == 21
            assert all(infos[f"{name}-{i}"] == 15 for name in "pq" for i in range(10))
            # both processes wrote 15 turns to the shared session: none lost to the other
            shared = [t.messages[0].text for t in await store.load("shared")]
            assert sorted(shared) == sorted(f"{name} {n}" for name in "pq" for n in range(15))

    anyio.run(check)
