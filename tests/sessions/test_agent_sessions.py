"""``agent.run(prompt, session=...)``: the stored conversation is loaded, each completed turn
is written atomically with its tool results, a turn cut short is not, the next run replays
token for token, and runs on one session never interleave."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import pytest

import agentkit
from agentkit.approvals import Approve
from agentkit.engine import (
    FunctionEngine,
    ScriptedCall,
    ScriptedEngine,
    ScriptedOutput,
    TokenizedScriptedEngine,
)
from agentkit.errors import EngineError
from agentkit.events import RunComplete
from agentkit.profiles import get_profile
from agentkit.sessions import (
    MemorySessionStore,
    SessionConflictError,
    SessionStore,
    SQLiteSessionStore,
)
from agentkit.transcript import Message, Transcript

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def tokenized(outputs: list[str]) -> TokenizedScriptedEngine:
    return TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])


@agentkit.tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    made: SessionStore = (
        MemorySessionStore()
        if request.param == "memory"
        else SQLiteSessionStore(tmp_path / "sessions.db")
    )
    async with made:
        yield made


def roles(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [m.role for m in messages]


async def test_each_model_turn_is_one_stored_turn_with_its_tool_results(
    store: SessionStore,
) -> None:
    engine = ScriptedEngine([call("echo", text="hi"), "Said hi."])
    agent = agentkit.Agent(engine, tools=[echo], profile="qwen3", system="Be brief.")
    session = store.session("u1")
    result = await agent.run("say hi", session=session)
    turns = await session.turns()
    # the system prompt and the user's prompt travel with the first turn; the assistant's
    # call and its result are written together
    assert [roles(t.messages) for t in turns] == [
        ["system", "user", "assistant", "tool"],
        ["assistant"],
    ]
    assert (await session.transcript()).model_dump_json() == result.transcript.model_dump_json()


async def test_a_second_run_continues_the_stored_conversation(store: SessionStore) -> None:
    engine = ScriptedEngine(["First answer.", "Second answer."])
    agent = agentkit.Agent(engine, profile="qwen3", system="Be brief.")
    session = store.session("u2")
    await agent.run("first question", session=session)
    second = await agent.run("second question", session=session)
    assert [m.text for m in second.transcript] == [
        "Be brief.",
        "first question",
        "First answer.",
        "second question",
        "Second answer.",
    ]
    # the model saw the whole conversation
    assert engine.calls[1].first_user_text == "first question"
    assert "First answer." in engine.requests[1].prompt
    turns = await session.turns()
    assert [roles(t.messages) for t in turns] == [
        ["system", "user", "assistant"],
        ["user", "assistant"],
    ]


async def test_a_transcript_prompt_adds_its_messages_but_not_a_second_system(
    store: SessionStore,
) -> None:
    agent = agentkit.Agent(ScriptedEngine(["A.", "B."]), profile="qwen3", system="Sys.")
    session = store.session("u3")
    await agent.run("one", session=session)
    follow_up = Transcript.from_prompt("two", system="Another system")
    result = await agent.run(follow_up, session=session)
    assert [(m.role, m.text) for m in result.transcript] == [
        ("system", "Sys."),
        ("user", "one"),
        ("assistant", "A."),
        ("user", "two"),
        ("assistant", "B."),
    ]


@pytest.mark.parametrize("replay", [None, "keep_all"])
async def test_a_run_reopened_from_the_file_replays_token_for_token(
    tmp_path: Path, replay: str | None
) -> None:
    """The stored token ids make the next run's first prompt the last prompt plus the model's
    output: the prefix cache serves every token of it. (With ``keep_all`` even reasoning in
    the last answer is kept; the profile's own policy drops a closed task's reasoning, so the
    answer has none there.)"""
    thought = "<think>\nfine\n</think>\n\n" if replay == "keep_all" else ""
    engine = tokenized([call("echo", text="hi"), f"{thought}Said hi.", "Bye."])
    path = tmp_path / "replay.db"
    async with SQLiteSessionStore(path) as store:
        agent = agentkit.Agent(engine, tools=[echo], profile="qwen3", replay=replay)  # type: ignore[arg-type]
        first = await agent.run("say hi", session=store.session("u"))
    async with SQLiteSessionStore(path) as reopened:
        agent = agentkit.Agent(engine, tools=[echo], profile="qwen3", replay=replay)  # type: ignore[arg-type]
        second = await agent.run("now bye", session=reopened.session("u"))
    previous = engine.requests[1].prompt_token_ids
    generated = first.transcript.messages[-1].token_ids
    after = engine.requests[2].prompt_token_ids
    assert previous is not None
    assert generated
    assert after is not None
    assert after[: len(previous) + len(generated)] == [*previous, *generated]
    assert second.usage.turns[0].cached_prompt_tokens == len(previous) + len(generated)


async def test_a_turn_whose_engine_fails_is_not_written(store: SessionStore) -> None:
    engine = ScriptedEngine(
        [call("echo", text="x"), ScriptedOutput(["Half an ans", RuntimeError("boom")])]
    )
    agent = agentkit.Agent(engine, tools=[echo], profile="qwen3")
    session = store.session("fails")
    with pytest.raises(EngineError) as caught:
        await agent.run("go", session=session)
    # the error's transcript keeps the partial turn; the store does not
    assert caught.value.transcript is not None
    assert caught.value.transcript.messages[-1].text == "Half an ans"
    turns = await session.turns()
    assert [roles(t.messages) for t in turns] == [["user", "assistant", "tool"]]


async def test_a_turn_whose_tools_never_finish_is_not_written(store: SessionStore) -> None:
    started = anyio.Event()

    @agentkit.tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    engine = ScriptedEngine(["Hello.", call("wait_forever")])
    agent = agentkit.Agent(engine, tools=[wait_forever], profile="qwen3")
    session = store.session("cancelled")
    await agent.run("hi", session=session)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(agent.run, "wait", session=session))
        await started.wait()
        group.cancel_scope.cancel()
    assert [roles(t.messages) for t in await session.turns()] == [["user", "assistant"]]


async def test_runs_on_one_session_take_turns(store: SessionStore) -> None:
    """Two runs started at once on one session: the second waits for the first, then sees
    its whole conversation; the stored turns never interleave."""

    def answer(request: ScriptedCall) -> str:
        last = request.last_message
        assert last is not None
        if last.role == "user":
            return call("echo", text=last.text)
        return f"done: {request.tool_results[0].content}"

    engine = FunctionEngine(answer)
    agent = agentkit.Agent(engine, tools=[echo], profile="qwen3")
    session = store.session("shared")
    async with anyio.create_task_group() as group:
        for prompt in ["alpha", "beta"]:
            group.start_soon(partial(agent.run, prompt, session=session))
    turns = await session.turns()
    assert [roles(t.messages) for t in turns] == [
        ["user", "assistant", "tool"],
        ["assistant"],
        ["user", "assistant", "tool"],
        ["assistant"],
    ]
    first, second = turns[0].messages[0].text, turns[2].messages[0].text
    assert {first, second} == {"alpha", "beta"}
    assert turns[1].messages[0].text == f"done: {first}"
    # the later run's first request showed the earlier run's whole conversation
    assert len(engine.calls) == 4
    assert [m.role for m in engine.calls[2].messages] == [
        *roles(turns[0].messages),
        "assistant",
        "user",
    ]
    assert engine.calls[2].messages[-1].text == second


async def test_another_writer_between_turns_stops_the_run_with_a_conflict(
    tmp_path: Path,
) -> None:
    """Another process (here: another store on the same file) appends while a run is in a
    turn: the run's save finds a turn count it did not read and stops, writing nothing."""
    path = tmp_path / "conflict.db"
    async with SQLiteSessionStore(path) as mine, SQLiteSessionStore(path) as theirs:

        async def answer(request: ScriptedCall) -> str:
            if request.turn == 1:
                await theirs.append("s", [Message(role="user")], expected_turns=0)
            return "Hello."

        agent = agentkit.Agent(FunctionEngine(answer), profile="qwen3")
        with pytest.raises(SessionConflictError) as caught:
            await agent.run("hi", session=mine.session("s"))
        assert caught.value.transcript is not None
        assert caught.value.transcript.messages[-1].text == "Hello."
        assert len(await mine.load("s")) == 1


async def test_a_paused_turn_is_written_when_the_run_resumes(store: SessionStore) -> None:
    @agentkit.tool(requires_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    script = [call("delete", path="a.txt"), "Deleted it."]
    agent = agentkit.Agent(ScriptedEngine(script[:1]), tools=[delete], profile="qwen3")
    session = store.session("paused")
    paused = await agent.run("tidy up", session=session)
    assert paused.state is not None
    # the held turn has no results yet: nothing is stored
    assert await session.turns() == []
    [pending] = paused.pending_approvals
    resumer = agentkit.Agent(ScriptedEngine(script[1:]), tools=[delete], profile="qwen3")
    result = await resumer.resume(paused.state, {pending.id: Approve()}, session=session)
    turns = await session.turns()
    assert [roles(t.messages) for t in turns] == [["user", "assistant", "tool"], ["assistant"]]
    assert (await session.transcript()).model_dump_json() == result.transcript.model_dump_json()


async def test_a_resume_after_the_session_moved_on_is_a_conflict(store: SessionStore) -> None:
    @agentkit.tool(requires_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    agent = agentkit.Agent(
        ScriptedEngine([call("delete", path="a")]), tools=[delete], profile="qwen3"
    )
    session = store.session("moved")
    paused = await agent.run("tidy up", session=session)
    assert paused.state is not None
    await session.append([Message(role="user")], expected_turns=0)
    [pending] = paused.pending_approvals
    with pytest.raises(SessionConflictError, match="changed since the run paused"):
        await agent.resume(paused.state, {pending.id: Approve()}, session=session)


async def test_streaming_writes_each_turn_before_the_run_completes(store: SessionStore) -> None:
    agent = agentkit.Agent(
        ScriptedEngine([call("echo", text="x"), "Done."]), tools=[echo], profile="qwen3"
    )
    session = store.session("streamed")
    stored_at_end: int | None = None
    async with agent.stream("go", session=session) as events:
        async for event in events:
            if isinstance(event, RunComplete):
                stored_at_end = len(await store.load("streamed"))
    assert stored_at_end == 2


async def test_a_fork_continues_on_its_own(store: SessionStore) -> None:
    agent = agentkit.Agent(ScriptedEngine(["A.", "B.", "C."]), profile="qwen3")
    main = store.session("main")
    await agent.run("one", session=main)
    await agent.run("two", session=main)
    branch = await main.fork("branch", turns=1)
    result = await agent.run("other two", session=branch)
    assert [m.text for m in result.transcript] == ["one", "A.", "other two", "C."]
    assert [m.text for m in await main.transcript()] == ["one", "A.", "two", "B."]


async def test_two_hundred_sessions_append_concurrently_in_one_file(tmp_path: Path) -> None:
    engine = ScriptedEngine.per_run([call("echo", text="x"), "Done."])
    agent = agentkit.Agent(engine, tools=[echo], profile="qwen3")
    async with SQLiteSessionStore(tmp_path / "many.db") as store:
        for round_ in range(2):
            async with anyio.create_task_group() as group:
                for i in range(200):
                    run = partial(agent.run, session=store.session(f"u{i}"))
                    group.start_soon(run, f"user {i} round {round_}")
        infos = await store.list_sessions()
        assert len(infos) == 200
        assert {i.turns for i in infos} == {4}
        for i in (0, 77, 199):
            messages = list((await store.session(f"u{i}").transcript()).messages)
            assert [m.text for m in messages if m.role == "user"] == [
                f"user {i} round 0",
                f"user {i} round 1",
            ]
            assert roles(messages) == ["user", "assistant", "tool", "assistant"] * 2


def test_import_agentkit_loads_no_sqlite_driver() -> None:
    code = (
        "import sys, agentkit\n"
        "print(sorted(m for m in ('sqlite3', '_sqlite3', 'aiosqlite', 'agentkit.sessions')"
        " if m in sys.modules))\n"
        "import agentkit.sessions\n"
        "print('sqlite3' in sys.modules)\n"
        "agentkit.sessions.SQLiteSessionStore(':memory:')\n"
        "print('sqlite3' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split("\n")[:3] == ["[]", "False", "True"]


async def test_leaving_a_stream_early_releases_the_session(store: SessionStore) -> None:
    agent = agentkit.Agent(
        ScriptedEngine.per_run([call("echo", text="x"), "Done."]), tools=[echo], profile="qwen3"
    )
    session = store.session("left")
    async with agent.stream("first", session=session) as events:
        async for event in events:
            if event.type == "tool_call_complete":
                break  # mid-turn: the turn is not written
    assert await session.turns() == []
    with anyio.fail_after(10):  # a bound on a hang, not a timing assertion
        result = await agent.run("second", session=session)
    assert [m.text for m in result.transcript if m.role == "user"] == ["second"]
    assert len(await session.turns()) == 2
