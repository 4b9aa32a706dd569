"""Processes and files: a process killed (SIGKILL) mid-turn leaves a file that opens cleanly
with every completed turn and none of the half turn, and the next run replays it token for
token; two processes share one file without losing a turn. The children are
``_crash_child.py``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentkit.sessions import SQLiteSessionStore

CHILD = Path(__file__).with_name("_crash_child.py")
LIMIT_S = 120
"""The most any child process may take (a bound on a hung test, never a timing assertion)."""


def child(*args: str) -> subprocess.Popen[str]:
    # One hash seed for every child: the scripted engine's character tokenizer numbers
    # special tokens of equal length in set order, which follows the seed (a real
    # tokenizer's ids do not vary); the killed process and the next one must agree.
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env={**os.environ, "PYTHONHASHSEED": "0"},
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
    previous: list[int] | None = None
    with child("mid-turn", str(path), where) as process:
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
            turns = await store.session("u").turns()
        # every completed turn, intact; nothing of the killed run (not even its prompt)
        assert [[m.role for m in t.messages] for t in turns] == [
            ["user", "assistant", "tool"],
            ["assistant"],
        ]
        answer = turns[-1].messages[-1]
        assert answer.text == "Said hi."
        assert answer.token_ids

    anyio.run(reopen)

    # The next run, in another new process: its first prompt extends the last completed
    # request's prompt and output, and the prefix cache serves all of that.
    with child("reopen", str(path), json.dumps(previous)) as process:
        assert process.stderr is not None
        output = list(lines(process))
        assert process.wait() == 0, process.stderr.read()
    report = json.loads(output[-1])
    assert report["extends"] is True
    assert report["cached"] == report["whole"]
    assert report["turns"] == 3


def test_a_process_killed_while_writing_leaves_whole_turns(tmp_path: Path) -> None:
    """Killed in the middle of a stream of writes (10 sessions appending at once): the file
    opens clean, and each session holds at least the turns reported written, contiguous."""
    path = tmp_path / "writes.db"
    reported: dict[str, int] = {}
    with child("writer", str(path), "w", "100000") as process:
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
        child("writer", str(path), "p", "15") as first,
        child("writer", str(path), "q", "15") as second,
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
