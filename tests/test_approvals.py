"""Approvals: calls held for a person, paused runs saved as JSON and resumed, the in-process
handler, on the scripted engines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from _hermes import hermes
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import agentkit
from agentkit.approvals import (
    ApprovalError,
    Approve,
    Decision,
    Deny,
    PendingApproval,
    RunState,
)
from agentkit.engine import ScriptedEngine, TokenizedScriptedEngine
from agentkit.errors import MaxTurnsExceeded
from agentkit.events import RunComplete, ToolResultEvent, TurnUsage
from agentkit.profiles import get_profile
from agentkit.transcript import Message, TextBlock, ToolCallBlock, ToolResultBlock, Transcript

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")


def tokenized(outputs: list[str]) -> TokenizedScriptedEngine:
    return TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])


class Files:
    """Two tools over a dict of files: reading runs at once, deleting needs approval."""

    def __init__(self) -> None:
        self.files = {"a.txt": "alpha", "b.txt": "beta"}
        self.deleted: list[str] = []
        self.read = agentkit.tool(name="read")(self._read)
        self.delete = agentkit.tool(name="delete", requires_approval=True)(self._delete)

    async def _read(self, path: str) -> str:
        """Read a file."""
        return self.files[path]

    async def _delete(self, path: str) -> str:
        """Delete a file, for good."""
        self.deleted.append(path)
        del self.files[path]
        return f"deleted {path}"

    @property
    def tools(self) -> list[agentkit.Tool]:
        return [self.read, self.delete]


def results_of(message: Message) -> list[ToolResultBlock]:
    return [block for block in message.content if isinstance(block, ToolResultBlock)]


def same_but_ids(a: Transcript, b: Transcript) -> bool:
    """Equal transcripts, but for call ids (random per parse; Qwen's prompts do not show them)."""

    def numbered(transcript: Transcript) -> str:
        text = transcript.model_dump_json()
        ids = [c.id for m in transcript.messages for c in m.tool_calls]
        for n, call_id in enumerate(ids):
            text = text.replace(call_id, f"call_{n}")
        return text

    return numbered(a) == numbered(b)


TURN_1 = (
    "<think>Read a, delete b.</think>"
    + hermes("read", path="a.txt")
    + hermes("delete", path="b.txt")
)
TURN_2 = "<think>Done.</think>Read a.txt (alpha) and deleted b.txt."
SCRIPT = [TURN_1, TURN_2]


# -- the tool flag ------------------------------------------------------------------------


async def pause_on_b(files: Files) -> tuple[agentkit.RunResult[str], RunState, PendingApproval]:
    """The first turn of SCRIPT on a fresh agent: it pauses holding the one call to delete
    b.txt; the paused result, its state and that call."""
    paused = await agentkit.Agent(
        engine=ScriptedEngine(SCRIPT[:1]), tools=files.tools, profile="qwen3"
    ).run("go")
    assert paused.state is not None
    [pending] = paused.pending_approvals
    return paused, paused.state, pending


def test_tool_flag_defaults_off_and_is_set_by_the_decorator_and_constructor() -> None:
    @agentkit.tool
    def plain(x: int) -> int:
        """Plain."""
        return x

    @agentkit.tool(requires_approval=True, timeout=2)
    def guarded(x: int) -> int:
        """Guarded."""
        return x

    async def handler(arguments: dict[str, Any]) -> str:
        return ""

    built = agentkit.Tool("built", "A tool.", {"type": "object"}, handler, requires_approval=True)
    assert not plain.requires_approval
    assert guarded.requires_approval
    assert guarded.timeout == 2.0
    assert built.requires_approval
    assert "requires_approval=True" in repr(built)
    assert agentkit.Tool.from_function(
        lambda: None, name="f", requires_approval=True
    ).requires_approval


# -- pausing ----------------------------------------------------------------------------------


async def test_a_call_that_needs_approval_is_held_and_the_run_pauses_at_the_turn_end() -> None:
    files = Files()
    engine = ScriptedEngine(SCRIPT)
    agent = agentkit.Agent(engine=engine, tools=files.tools, profile="qwen3")
    events = []
    async with agent.stream("tidy up") as stream:
        async for event in stream:
            events.append(event)
    result = stream.result

    assert result.paused
    assert result.output_text == ""
    assert files.deleted == []  # held, not run
    assert len(engine.requests) == 1  # the run stopped instead of asking the model again
    [pending] = result.pending_approvals
    assert pending == PendingApproval(
        id=pending.id,
        name="delete",
        arguments={"path": "b.txt"},
        description="Delete a file, for good.",
    )
    state = result.state
    assert state is not None
    assert state.run_id == result.run_id
    assert state.turns == 1
    assert state.profile == "qwen3"
    assert [r.content for r in state.tool_results] == ["alpha"]  # read ran during the turn
    assert state.pending_approvals == [pending]
    # The tool message waits for every result of the turn.
    assert result.transcript.messages[-1].role == "assistant"
    assert state.transcript == result.transcript
    [read_result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert read_result.name == "read"
    assert isinstance(events[-1], RunComplete)
    assert events[-1].paused
    assert events[-1].output_text == ""


async def test_a_run_without_held_calls_does_not_pause() -> None:
    files = Files()
    script = [hermes("read", path="a.txt"), "alpha"]
    result = await agentkit.Agent(
        engine=ScriptedEngine(script), tools=files.tools, profile="qwen3"
    ).run("read")
    assert not result.paused
    assert result.pending_approvals == []
    assert result.state is None
    assert result.output_text == "alpha"


async def test_the_policy_sees_each_call_and_holds_those_it_returns_true_for() -> None:
    seen: list[PendingApproval] = []

    def policy(call: PendingApproval) -> bool:
        seen.append(call)
        return call.arguments.get("path") == "b.txt"

    files = Files()
    files.delete = agentkit.tool(name="delete")(files._delete)  # no flag: the policy decides
    script = [
        hermes("read", path="a.txt")
        + hermes("delete", path="a.txt")
        + hermes("delete", path="b.txt")
        + hermes("nosuchtool")
        + "<tool_call>\n{not json\n</tool_call>",
    ]
    agent = agentkit.Agent(
        engine=ScriptedEngine(script), tools=files.tools, requires_approval=policy, profile="qwen3"
    )
    result = await agent.run("go")

    # Unknown tools and malformed calls are never asked about: they fail at once.
    assert [(c.name, c.arguments) for c in seen] == [
        ("read", {"path": "a.txt"}),
        ("delete", {"path": "a.txt"}),
        ("delete", {"path": "b.txt"}),
    ]
    assert [p.arguments for p in result.pending_approvals] == [{"path": "b.txt"}]
    assert files.deleted == ["a.txt"]
    state = result.state
    assert state is not None
    assert [r.name for r in state.tool_results[:3]] == ["read", "delete", "nosuchtool"]
    assert [r.is_error for r in state.tool_results] == [False, False, True, True]


async def test_requires_approval_true_holds_every_call() -> None:
    files = Files()
    files.delete = agentkit.tool(name="delete")(files._delete)
    script = [hermes("read", path="a.txt") + hermes("delete", path="a.txt")]
    agent = agentkit.Agent(
        engine=ScriptedEngine(script), tools=files.tools, requires_approval=True, profile="qwen3"
    )
    result = await agent.run("go")
    assert [p.name for p in result.pending_approvals] == ["read", "delete"]
    assert result.state is not None
    assert result.state.tool_results == []


def test_a_policy_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="requires_approval"):
        agentkit.Agent(engine=ScriptedEngine([]), requires_approval="yes", profile="qwen3")  # type: ignore[arg-type]


# -- resuming ---------------------------------------------------------------------------------


async def test_resume_after_a_json_round_trip_on_a_fresh_agent_equals_the_uninterrupted_run() -> (
    None
):
    # The uninterrupted run: the same model output, nothing held.
    files = Files()
    files.delete = agentkit.tool(name="delete")(files._delete)
    straight_engine = tokenized(SCRIPT)
    straight = await agentkit.Agent(engine=straight_engine, tools=files.tools, profile="qwen3").run(
        "tidy up"
    )

    # The same run, paused on the delete, saved as JSON, resumed by a new agent and engine.
    paused_files = Files()
    paused_engine = tokenized(SCRIPT[:1])
    paused = await agentkit.Agent(
        engine=paused_engine, tools=paused_files.tools, profile="qwen3"
    ).run("tidy up")
    assert paused.state is not None
    text = paused.state.to_json()

    resumed_files = Files()
    resumed_engine = tokenized(SCRIPT[1:])
    agent = agentkit.Agent(engine=resumed_engine, tools=resumed_files.tools, profile="qwen3")
    state = RunState.from_json(text)
    [pending] = state.pending_approvals
    resumed = await agent.resume(state, {pending.id: Approve()})

    assert resumed_files.deleted == ["b.txt"]
    assert same_but_ids(resumed.transcript, straight.transcript)
    assert resumed.output_text == straight.output_text
    assert resumed.run_id == paused.run_id
    assert len(resumed.usage.turns) == 2  # the paused turn's usage travels with the state
    assert resumed.usage.turns[0] == paused.usage.turns[0]

    # Prefix-stable replay: the prompt after the resume is the uninterrupted run's second
    # prompt, which extends the first prompt with the tokens the model generated.
    first = paused_engine.requests[0].prompt_token_ids
    after = resumed_engine.requests[0].prompt_token_ids
    generated = paused.transcript.messages[-1].token_ids
    assert first is not None
    assert after is not None
    assert generated
    assert after == straight_engine.requests[1].prompt_token_ids
    assert after[: len(first) + len(generated)] == [*first, *generated]


async def test_resume_in_a_new_process(tmp_path: Path) -> None:
    files = Files()
    paused = await agentkit.Agent(
        engine=tokenized(SCRIPT[:1]), tools=files.tools, profile="qwen3"
    ).run("tidy up")
    assert paused.state is not None
    (tmp_path / "state.json").write_text(paused.state.to_json())
    [pending] = paused.pending_approvals
    child = textwrap.dedent(
        f"""
        import json, sys
        import anyio, agentkit
        from agentkit.approvals import Approve, RunState
        from agentkit.engine import TokenizedScriptedEngine
        from agentkit.profiles import get_profile

        @agentkit.tool(requires_approval=True)
        async def delete(path: str) -> str:
            '''Delete a file, for good.'''
            return f"deleted {{path}}"

        @agentkit.tool
        async def read(path: str) -> str:
            '''Read a file.'''
            return "alpha"

        async def main() -> None:
            qwen3 = get_profile("qwen3")
            engine = TokenizedScriptedEngine(
                {SCRIPT[1:]!r}, specials=qwen3.special_tokens, stop=qwen3.stop[0]
            )
            agent = agentkit.Agent(profile="qwen3", engine=engine, tools=[read, delete])
            state = RunState.from_json(open(sys.argv[1]).read())
            result = await agent.resume(state, {{{pending.id!r}: Approve()}})
            print(result.transcript.model_dump_json())

        anyio.run(main)
        """
    )
    (tmp_path / "child.py").write_text(child)
    done = subprocess.run(  # noqa: ASYNC221 - the test waits for the child on purpose
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "state.json")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    transcript = Transcript.model_validate_json(done.stdout)

    straight_files = Files()
    straight_files.delete = agentkit.tool(name="delete")(straight_files._delete)
    straight = await agentkit.Agent(
        engine=tokenized(SCRIPT), tools=straight_files.tools, profile="qwen3"
    ).run("tidy up")
    assert same_but_ids(transcript, straight.transcript)


async def test_deny_gives_the_model_the_persons_message_as_an_error_result() -> None:
    files = Files()
    _paused, state, pending = await pause_on_b(files)
    engine = ScriptedEngine(["<think>ok</think>I left b.txt alone."])
    agent = agentkit.Agent(engine=engine, tools=files.tools, profile="qwen3")
    events = []
    async with agent.resume_stream(
        state, {pending.id: Deny(message="keep b.txt, it is the backup")}
    ) as stream:
        async for event in stream:
            events.append(event)
    result = stream.result

    assert files.deleted == []
    tool_message = result.transcript.messages[-2]
    assert tool_message.role == "tool"
    read, denied = tool_message.content
    assert isinstance(read, ToolResultBlock)
    assert isinstance(denied, ToolResultBlock)
    assert (read.name, read.content, read.is_error) == ("read", "alpha", False)
    assert denied.call_id == pending.id
    assert denied.is_error
    assert "denied" in denied.content
    assert "keep b.txt, it is the backup" in denied.content
    assert "keep b.txt, it is the backup" in engine.requests[0].prompt
    [event] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert event.call_id == pending.id
    assert event.is_error
    assert result.output_text == "I left b.txt alone."


async def test_approve_with_edited_arguments_runs_them_and_the_result_says_so() -> None:
    files = Files()
    paused, state, pending = await pause_on_b(files)
    agent = agentkit.Agent(engine=ScriptedEngine(["done"]), tools=files.tools, profile="qwen3")
    result = await agent.resume(state, {pending.id: Approve(arguments={"path": "a.txt"})})

    assert files.deleted == ["a.txt"]
    result_block = result.transcript.messages[-2].content[1]
    assert isinstance(result_block, ToolResultBlock)
    assert not result_block.is_error
    assert result_block.content.endswith("deleted a.txt")
    assert '{"path": "a.txt"}' in result_block.content
    # The model's call stays as written: exact replay.
    call = paused.transcript.messages[-1].tool_calls[1]
    assert result.transcript.messages[-3].tool_calls[1] == call
    assert call.arguments == {"path": "b.txt"}


async def test_edited_arguments_are_validated_like_any_call() -> None:
    files = Files()
    _paused, state, pending = await pause_on_b(files)
    agent = agentkit.Agent(engine=ScriptedEngine(["done"]), tools=files.tools, profile="qwen3")
    result = await agent.resume(state, {pending.id: Approve(arguments={"path": 3})})

    assert files.deleted == []
    block = result.transcript.messages[-2].content[1]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert "path" in block.content


async def test_resume_refuses_missing_unknown_and_malformed_decisions_and_another_profile() -> None:
    files = Files()
    paused = await agentkit.Agent(
        engine=ScriptedEngine(SCRIPT[:1]), tools=files.tools, profile="qwen3"
    ).run("go")
    state = paused.state
    assert state is not None
    [pending] = state.pending_approvals
    agent = agentkit.Agent(engine=ScriptedEngine([]), tools=files.tools, profile="qwen3")
    with pytest.raises(ApprovalError, match="no decision") as caught:
        await agent.resume(state, {})
    assert caught.value.state is state
    with pytest.raises(ApprovalError, match="not pending"):
        await agent.resume(state, {pending.id: Approve(), "call_x": Deny()})
    with pytest.raises(ApprovalError, match="use Approve, Deny or ToolOutput"):
        await agent.resume(state, {pending.id: True})  # type: ignore[dict-item]
    other = agentkit.Agent(profile="glm-4.5", engine=ScriptedEngine([]), tools=files.tools)
    with pytest.raises(ApprovalError, match="profile"):
        await other.resume(state, {pending.id: Approve()})
    broken = state.model_copy(update={"transcript": Transcript.from_prompt("go")})
    with pytest.raises(ApprovalError, match="paused turn"):
        await agent.resume(broken, {pending.id: Approve()})
    assert files.deleted == []


async def test_a_resumed_run_counts_its_turns_from_the_paused_run() -> None:
    files = Files()
    agent = agentkit.Agent(
        engine=ScriptedEngine(SCRIPT[:1]), tools=files.tools, max_turns=1, profile="qwen3"
    )
    paused = await agent.run("go")
    assert paused.state is not None
    [pending] = paused.pending_approvals
    again = agentkit.Agent(
        engine=ScriptedEngine(SCRIPT[1:]), tools=files.tools, max_turns=1, profile="qwen3"
    )
    with pytest.raises(MaxTurnsExceeded) as caught:
        await again.resume(paused.state, {pending.id: Approve()})
    # The approved call ran and its result is in the transcript the error carries.
    assert files.deleted == ["b.txt"]
    assert caught.value.transcript is not None
    assert caught.value.transcript.messages[-1].role == "tool"


async def test_a_resumed_run_can_pause_again() -> None:
    files = Files()
    files.files["c.txt"] = "gamma"
    script = [
        hermes("delete", path="b.txt"),
        hermes("delete", path="c.txt"),
        "both gone",
    ]
    paused = await agentkit.Agent(
        engine=ScriptedEngine(script[:1]), tools=files.tools, profile="qwen3"
    ).run("go")
    assert paused.state is not None
    engine = ScriptedEngine(script[1:])
    agent = agentkit.Agent(engine=engine, tools=files.tools, profile="qwen3")
    second = await agent.resume(
        RunState.from_json(paused.state.to_json()),
        {paused.pending_approvals[0].id: Approve()},
    )
    assert second.paused
    assert second.state is not None
    assert second.state.turns == 2
    assert second.run_id == paused.run_id
    final = await agent.resume(
        RunState.from_json(second.state.to_json()),
        {second.pending_approvals[0].id: Approve()},
    )
    assert final.output_text == "both gone"
    assert files.deleted == ["b.txt", "c.txt"]
    roles = [m.role for m in final.transcript.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert len(final.usage.turns) == 3


# -- the in-process handler ----------------------------------------------------------------


async def test_the_handler_approves_at_once_and_the_run_goes_on() -> None:
    asked: list[PendingApproval] = []

    async def handler(call: PendingApproval) -> Approve:
        asked.append(call)
        return Approve()

    files = Files()
    agent = agentkit.Agent(
        engine=ScriptedEngine(SCRIPT), tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    result = await agent.run("go")
    assert not result.paused
    assert [c.name for c in asked] == ["delete"]
    assert asked[0].description == "Delete a file, for good."
    assert files.deleted == ["b.txt"]
    assert [b.content for b in results_of(result.transcript.messages[2])] == [
        "alpha",
        "deleted b.txt",
    ]


async def test_the_handler_is_asked_while_the_model_is_still_generating() -> None:
    tail = "".join(f" w{i}" for i in range(40))
    engine = ScriptedEngine([hermes("delete", path="b.txt") + tail, "done"], token_delay=0.005)
    finished = anyio.Event()
    seen_done: list[bool] = []

    async def handler(call: PendingApproval) -> Approve:
        return Approve()

    @agentkit.tool(requires_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        seen_done.append(finished.is_set())
        return "deleted"

    agent = agentkit.Agent(engine=engine, tools=[delete], approval_handler=handler, profile="qwen3")
    async with agent.stream("go") as stream:
        async for event in stream:
            if event.type == "turn_complete" and event.turn == 1:
                finished.set()
    assert stream.result.output_text == "done"
    assert seen_done == [False]  # the approved tool ran before the turn finished


async def test_waiting_for_the_handler_does_not_count_against_the_tool_timeout() -> None:
    async def handler(call: PendingApproval) -> Approve:
        await anyio.sleep(0.3)  # a person thinking, longer than the tool may run
        return Approve()

    @agentkit.tool(requires_approval=True, timeout=0.1)
    async def quick() -> str:
        """Quick."""
        return "quick result"

    agent = agentkit.Agent(
        engine=ScriptedEngine([hermes("quick"), "done"]),
        tools=[quick],
        approval_handler=handler,
        profile="qwen3",
    )
    result = await agent.run("go")
    [block] = result.transcript.messages[2].content
    assert isinstance(block, ToolResultBlock)
    assert (block.content, block.is_error) == ("quick result", False)


async def test_results_keep_call_order_when_a_slow_approval_lets_a_later_call_finish_first() -> (
    None
):
    async def handler(call: PendingApproval) -> Approve:
        await anyio.sleep(0.05)
        return Approve()

    files = Files()
    script = [hermes("delete", path="b.txt") + hermes("read", path="a.txt"), "done"]
    agent = agentkit.Agent(
        engine=ScriptedEngine(script), tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    events = []
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolResultEvent):
                events.append(event.name)
    assert events == ["read", "delete"]  # completion order
    tool_message = stream.result.transcript.messages[2]
    assert [b.name for b in results_of(tool_message)] == ["delete", "read"]


async def test_the_handler_can_deny_edit_or_hold() -> None:
    decisions: dict[str, Approve | Deny | None] = {
        "a.txt": Deny(message="not that one"),
        "b.txt": Approve(arguments={"path": "c.txt"}),
        "d.txt": None,
    }

    async def handler(call: PendingApproval) -> Approve | Deny | None:
        return decisions[call.arguments["path"]]

    files = Files()
    files.files.update({"c.txt": "gamma", "d.txt": "delta"})
    script = [
        hermes("delete", path="a.txt")
        + hermes("delete", path="b.txt")
        + hermes("delete", path="d.txt"),
        "done",
    ]
    agent = agentkit.Agent(
        engine=ScriptedEngine(script), tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    paused = await agent.run("go")
    assert files.deleted == ["c.txt"]
    assert [p.arguments for p in paused.pending_approvals] == [{"path": "d.txt"}]
    state = paused.state
    assert state is not None
    denied, edited = state.tool_results
    assert denied.is_error
    assert "not that one" in denied.content
    assert "c.txt" in edited.content
    assert not edited.is_error

    result = await agent.resume(state, {paused.pending_approvals[0].id: Approve()})
    assert files.deleted == ["c.txt", "d.txt"]
    assert [b.call_id for b in results_of(result.transcript.messages[2])] == [
        c.id for c in result.transcript.messages[1].tool_calls
    ]


async def test_leaving_the_stream_cancels_a_handler_still_waiting() -> None:
    asked = anyio.Event()
    cancelled: list[bool] = []

    async def handler(call: PendingApproval) -> Approve:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(True)
        raise AssertionError("unreachable")

    files = Files()
    engine = ScriptedEngine([hermes("delete", path="b.txt") + " and more" * 20])
    agent = agentkit.Agent(
        engine=engine, tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    async with agent.stream("go") as stream:
        async for event in stream:
            if event.type == "tool_call_complete":
                await asked.wait()
                break
    assert cancelled == [True]
    assert files.deleted == []


async def test_an_error_in_the_handler_stops_the_run_as_itself() -> None:
    async def handler(call: PendingApproval) -> Approve:
        raise LookupError("the approvals service is down")

    files = Files()
    agent = agentkit.Agent(
        engine=ScriptedEngine(SCRIPT), tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    with pytest.raises(LookupError, match="service is down"):
        await agent.run("go")


async def test_a_handler_returning_something_else_is_an_error() -> None:
    async def handler(call: PendingApproval) -> Any:
        return True

    files = Files()
    agent = agentkit.Agent(
        engine=ScriptedEngine(SCRIPT), tools=files.tools, approval_handler=handler, profile="qwen3"
    )
    with pytest.raises(TypeError, match="Approve"):
        await agent.run("go")


# -- the serialisable types ---------------------------------------------------------------


def test_decisions_parse_from_json() -> None:
    adapter = TypeAdapter(dict[str, Decision])
    parsed = adapter.validate_json(
        '{"c1": {"type": "approve"}, "c2": {"type": "approve", "arguments": {"x": 1}},'
        ' "c3": {"type": "deny", "message": "no"}}'
    )
    assert parsed == {"c1": Approve(), "c2": Approve(arguments={"x": 1}), "c3": Deny(message="no")}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), _json, max_size=4),
    token_ids=st.lists(st.integers(min_value=0, max_value=200_000), max_size=20),
    text=st.text(max_size=30),
    turns=st.integers(min_value=1, max_value=50),
)
def test_run_state_json_round_trip_is_lossless(
    arguments: dict[str, Any], token_ids: list[int], text: str, turns: int
) -> None:
    call = ToolCallBlock(id="call_1", name="delete", arguments=arguments, raw=text)
    transcript = Transcript.from_prompt(text)
    transcript.append(
        Message(
            role="assistant", content=[TextBlock(text=text, raw=text), call], token_ids=token_ids
        )
    )
    state = RunState(
        run_id="run_x",
        profile="qwen3",
        transcript=transcript,
        turns=turns,
        usage=[TurnUsage(prompt_tokens=turns, output_tokens=len(token_ids))],
        tool_results=[ToolResultBlock(call_id="call_0", name="read", content=text)],
        pending_approvals=[
            PendingApproval(id="call_1", name="delete", arguments=arguments, description=text)
        ],
    )
    again = RunState.from_json(state.to_json())
    assert again == state
    assert again.to_json() == state.to_json()


def test_the_module_exports_exactly_its_public_types() -> None:
    import agentkit.approvals

    assert agentkit.approvals.__all__ == sorted(agentkit.approvals.__all__)
    assert set(agentkit.approvals.__all__) == {
        "ApprovalError",
        "ApprovalHandler",
        "ApprovalPolicy",
        "Approve",
        "ClientTool",
        "Decision",
        "Deny",
        "PendingApproval",
        "RunState",
        "ToolOutput",
    }
