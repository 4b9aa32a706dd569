"""Sync tools run in a bounded set of threads; what a timeout cannot stop is counted and logged.

A thread cannot be killed, so these tests hold sync tools on ``threading.Event`` objects and
release them at the end; nothing here depends on how long anything takes.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from agentkit.errors import ConfigurationError
from agentkit.events import ToolCallComplete
from agentkit.tools import Dispatcher, DispatchStats, tool
from agentkit.tools._threads import ToolThreads

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str, **arguments: Any) -> ToolCallComplete:
    return ToolCallComplete(index=0, id=call_id, name=name, arguments=arguments, raw="")


async def _until(condition: Any) -> None:
    # Threads finish on their own schedule and signal nothing to the test: poll.
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.001)


async def test_timed_out_sync_tools_hold_their_threads_and_the_pool_stays_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentkit.tools")
    release = threading.Event()
    started: list[str] = []

    @tool
    def hang(n: int) -> str:
        started.append(threading.current_thread().name)
        release.wait(10)
        return f"late {n}"

    @tool
    def quick() -> str:
        return "quick"

    dispatcher = Dispatcher([hang, quick], timeout=0.01, max_threads=2)
    assert dispatcher.stats == DispatchStats(max_threads=2)
    try:
        with anyio.fail_after(5):
            results = await dispatcher.run(call(f"c{i}", "hang", n=i) for i in range(3))
            # The two threads are still inside `hang`: a new call finds no thread either.
            (blocked,) = await dispatcher.run([call("c9", "quick")])
        stats = dispatcher.stats
        assert stats.threads_running == 2
        assert stats.threads_abandoned == 2
        assert stats.abandoned_total == 2
        await _until(lambda: len(started) == 2)  # the third call never got a thread
        assert sorted(started) == ["agentkit-tool hang c0", "agentkit-tool hang c1"]
    finally:
        release.set()
    for result in results[:2]:
        assert result.is_error
        assert "may still complete in the background" in result.content
    assert results[2].is_error
    assert "waiting for a worker thread" in results[2].content
    assert "did not run" in results[2].content
    assert "waiting for a worker thread" in blocked.content

    abandoned = [r for r in caplog.records if "tool_thread_abandoned" in r.getMessage()]
    assert len(abandoned) == 2
    assert all(r.levelno == logging.WARNING for r in abandoned)
    assert "call_id='c0'" in abandoned[0].getMessage()

    await _until(lambda: dispatcher.stats.threads_running == 0)
    assert dispatcher.stats.threads_abandoned == 0
    assert dispatcher.stats.abandoned_total == 2
    (after,) = await dispatcher.run([call("c10", "quick")])
    assert (after.content, after.is_error) == ("quick", False)


async def test_a_waiting_call_gets_the_thread_a_finished_call_frees() -> None:
    release = threading.Event()

    @tool
    def hold() -> str:
        release.wait(10)
        return "held"

    @tool
    def quick() -> str:
        return "quick"

    dispatcher = Dispatcher([hold, quick], timeout=None, max_threads=1)
    try:
        with anyio.fail_after(5):
            async with dispatcher.turn() as turn:
                turn.start(call("c1", "hold"))
                await _until(lambda: dispatcher.stats.threads_running == 1)
                turn.start(call("c2", "quick"))  # waits for the only thread
                await anyio.wait_all_tasks_blocked()
                release.set()
    finally:
        release.set()
    assert [r.content for r in turn.results] == ["held", "quick"]
    assert dispatcher.stats.abandoned_total == 0


async def test_sync_tools_run_in_daemon_threads_with_the_callers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("from the caller")

    @tool
    def where() -> dict[str, object]:
        thread = threading.current_thread()
        return {"daemon": thread.daemon, "name": thread.name, "var": var.get()}

    (result,) = await Dispatcher([where]).run([call("c1", "where")])
    assert result.content == (
        '{"daemon": true, "name": "agentkit-tool where c1", "var": "from the caller"}'
    )


async def test_an_async_tool_that_blocks_the_loop_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentkit.tools")

    @tool
    async def blocker() -> str:
        await anyio.lowlevel.checkpoint()
        time.sleep(0.05)  # noqa: ASYNC251 - a blocking call inside an async tool: the loop stands still
        await anyio.lowlevel.checkpoint()
        time.sleep(0.05)  # noqa: ASYNC251
        return "done"

    @tool
    async def polite() -> str:
        await anyio.lowlevel.checkpoint()
        return "done"

    dispatcher = Dispatcher([blocker, polite], block_warning_after=0.01)
    results = await dispatcher.run([call("c1", "blocker"), call("c2", "polite")])
    assert [r.content for r in results] == ["done", "done"]
    assert dispatcher.stats.loop_blocks == 1  # one report per call, however many steps
    (record,) = [r for r in caplog.records if "tool_blocked_event_loop" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "tool='blocker'" in record.getMessage()
    assert "call_id='c1'" in record.getMessage()

    quiet = Dispatcher([blocker], block_warning_after=None)
    await quiet.run([call("c1", "blocker")])
    assert quiet.stats.loop_blocks == 0


async def test_a_blocking_async_tool_is_not_interrupted_by_its_timeout() -> None:
    @tool(timeout=0.01)
    async def stubborn() -> str:
        time.sleep(0.05)  # noqa: ASYNC251 - past its timeout, but it never gives the loop a chance
        return "finished anyway"

    (result,) = await Dispatcher([stubborn], block_warning_after=None).run([call("c1", "stubborn")])
    assert (result.content, result.is_error) == ("finished anyway", False)


async def test_the_pool_runs_without_a_dispatcher() -> None:
    pool = ToolThreads(max_threads=1)
    assert await pool.run(lambda: 41 + 1, name="direct") == 42
    with pytest.raises(KeyError):
        await pool.run(lambda: {}["x"], name="direct")
    assert pool.running == 0


def test_thread_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_threads"):
        Dispatcher([], max_threads=0)
    with pytest.raises(ConfigurationError, match="block_warning_after"):
        Dispatcher([], block_warning_after=0)
    assert Dispatcher([]).stats.max_threads >= 1


async def test_a_thread_the_system_refuses_is_an_error_result_and_frees_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @tool
    def work() -> str:
        return "worked"

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    dispatcher = Dispatcher([work], max_threads=1)
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", refuse)
        (refused,) = await dispatcher.run([call("c1", "work")])
    assert (refused.content, refused.is_error) == ("RuntimeError: can't start new thread", True)
    assert dispatcher.stats.threads_running == 0
    (result,) = await dispatcher.run([call("c2", "work")])
    assert result.content == "worked"


async def test_a_refused_thread_passes_its_place_on_to_the_next_waiting_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    start = threading.Thread.start

    def refuse_c2(self: threading.Thread) -> None:
        if self.name.endswith(" c2"):
            raise RuntimeError("can't start new thread")
        start(self)

    @tool
    def hold() -> str:
        release.wait(10)
        return "held"

    @tool
    def work() -> str:
        return "worked"

    monkeypatch.setattr(threading.Thread, "start", refuse_c2)
    dispatcher = Dispatcher([hold, work], timeout=None, max_threads=1)
    try:
        with anyio.fail_after(5):
            async with dispatcher.turn() as turn:
                turn.start(call("c1", "hold"))
                await _until(lambda: dispatcher.stats.threads_running == 1)
                turn.start(call("c2", "work"))  # will be refused its thread
                turn.start(call("c3", "work"))  # must get the place c2 gives back
                await anyio.wait_all_tasks_blocked()
                release.set()
    finally:
        release.set()
    assert [r.content for r in turn.results] == [
        "held",
        "RuntimeError: can't start new thread",
        "worked",
    ]
