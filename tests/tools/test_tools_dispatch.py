"""The dispatcher: tools start when their call completes, overlap, and report in call order.

Ordering and overlap are proven with anyio events (a tool that can only finish once another
has run), never with wall-clock timings.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import anyio
import pytest

from agentkit.errors import ConfigurationError, ToolError
from agentkit.events import ToolCallComplete, ToolResultEvent
from agentkit.tools import Dispatcher, Tool, ToolRegistry, tool
from agentkit.transcript import ToolResultBlock

pytestmark = pytest.mark.anyio


def call(
    call_id: str, name: str, *, error: str | None = None, raw: str = "", **arguments: Any
) -> ToolCallComplete:
    return ToolCallComplete(
        index=0, id=call_id, name=name, arguments=arguments, raw=raw, error=error
    )


class Recorder:
    """An ``on_result`` callback that keeps the events it receives."""

    def __init__(self) -> None:
        self.events: list[ToolResultEvent] = []

    async def __call__(self, event: ToolResultEvent) -> None:
        self.events.append(event)

    @property
    def order(self) -> list[str]:
        return [event.call_id for event in self.events]


async def test_results_in_call_order_when_the_second_finishes_first() -> None:
    second_done = anyio.Event()

    @tool
    async def slow() -> str:
        await second_done.wait()  # cannot finish before `fast` has run
        return "slow"

    @tool
    async def fast() -> str:
        second_done.set()
        return "fast"

    recorder = Recorder()
    dispatcher = Dispatcher([slow, fast])
    with anyio.fail_after(5):
        async with dispatcher.turn(on_result=recorder) as turn:
            turn.start(call("c1", "slow"))
            turn.start(call("c2", "fast"))
    assert turn.results == [
        ToolResultBlock(call_id="c1", name="slow", content="slow"),
        ToolResultBlock(call_id="c2", name="fast", content="fast"),
    ]
    assert recorder.order == ["c2", "c1"]  # on_result follows completion order
    first = recorder.events[0]
    assert (first.name, first.content, first.is_error) == ("fast", "fast", False)
    assert first.result == turn.results[1]
    assert first.duration_s >= 0


async def test_start_does_not_wait_and_the_tool_runs_while_the_caller_streams() -> None:
    tool_started = anyio.Event()
    caller_done = anyio.Event()

    @tool
    async def background() -> str:
        tool_started.set()
        await caller_done.wait()
        return "done"

    with anyio.fail_after(5):
        async with Dispatcher([background]).turn() as turn:
            turn.start(call("c1", "background"))  # returns although the tool blocks
            await tool_started.wait()  # ... and the tool is already running
            caller_done.set()
    assert turn.results[0].content == "done"


async def test_all_calls_run_concurrently() -> None:
    count = 4
    arrived = 0
    everyone_here = anyio.Event()

    @tool
    async def meet() -> str:
        nonlocal arrived
        arrived += 1
        if arrived == count:
            everyone_here.set()
        await everyone_here.wait()  # deadlocks unless all calls overlap
        return "met"

    with anyio.fail_after(5):
        results = await Dispatcher([meet]).run(call(f"c{i}", "meet") for i in range(count))
    assert [r.content for r in results] == ["met"] * count


async def test_max_concurrency_is_respected() -> None:
    running = 0
    peak = 0
    gate = anyio.Event()

    @tool
    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1
        return n

    dispatcher = Dispatcher([work], max_concurrency=2)
    with anyio.fail_after(5):
        async with dispatcher.turn() as turn:
            for i in range(5):
                turn.start(call(f"c{i}", "work", n=i))
            await anyio.wait_all_tasks_blocked()
            assert running == 2  # three calls are queued, not running
            gate.set()
    assert peak == 2
    assert [r.content for r in turn.results] == ["0", "1", "2", "3", "4"]


async def test_timeout_cancels_the_tool_and_reports_an_error() -> None:
    cancelled = False

    @tool(timeout=0.01)
    async def hang() -> None:
        nonlocal cancelled
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise

    with anyio.fail_after(5):
        (result,) = await Dispatcher([hang], timeout=None).run([call("c1", "hang")])
    assert cancelled
    assert result.is_error
    assert result.content == "Tool 'hang' timed out after 0.01 seconds and was cancelled."


async def test_tool_timeout_overrides_the_dispatcher_default() -> None:
    hang_result = anyio.Event()

    @tool
    async def hang() -> None:
        await anyio.sleep_forever()

    @tool(timeout=math.inf)
    async def patient() -> str:
        await hang_result.wait()  # outlives the dispatcher's default timeout
        return "still here"

    async def on_result(event: ToolResultEvent) -> None:
        if event.name == "hang":
            hang_result.set()

    with anyio.fail_after(5):
        results = await Dispatcher([hang, patient], timeout=0.01).run(
            [call("c1", "hang"), call("c2", "patient")], on_result=on_result
        )
    assert results[0].is_error
    assert "0.01 seconds" in results[0].content
    assert (results[1].content, results[1].is_error) == ("still here", False)


async def test_timeout_of_a_blocking_sync_tool() -> None:
    release = threading.Event()

    @tool(timeout=0.01)
    def block() -> str:
        release.wait(5)
        return "late"

    try:
        with anyio.fail_after(5):
            (result,) = await Dispatcher([block]).run([call("c1", "block")])
    finally:
        release.set()  # let the abandoned worker thread end
    assert result.is_error
    assert "timed out" in result.content


async def test_exception_becomes_an_execution_error_result() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        return a / b

    @tool
    async def empty() -> None:
        raise KeyError

    results = await Dispatcher([divide, empty]).run(
        [call("c1", "divide", a=1, b=0), call("c2", "empty"), call("c3", "divide", a=1, b=4)]
    )
    assert results[0] == ToolResultBlock(
        call_id="c1", name="divide", content="ZeroDivisionError: division by zero", is_error=True
    )
    assert (results[1].content, results[1].is_error) == ("KeyError", True)
    assert (results[2].content, results[2].is_error) == ("0.25", False)


async def test_tool_raising_a_tool_error_keeps_its_message() -> None:
    @tool
    async def picky() -> None:
        raise ToolError("Use an absolute path.", call_id="", tool_name="picky")

    (result,) = await Dispatcher([picky]).run([call("c1", "picky")])
    assert (result.content, result.is_error) == ("Use an absolute path.", True)


async def test_bad_arguments_become_an_error_result() -> None:
    @tool
    def square(n: int) -> int:
        return n * n

    (result,) = await Dispatcher([square]).run([call("c1", "square", n="four")])
    assert result.is_error
    assert "- n: 'four' is not of type 'integer'" in result.content


async def test_unknown_tool_lists_the_available_ones() -> None:
    @tool
    def alpha() -> None:
        pass

    @tool
    def beta() -> None:
        pass

    results = await Dispatcher([alpha, beta]).run([call("c1", "gamma")])
    assert results == [
        ToolResultBlock(
            call_id="c1",
            name="gamma",
            content="Unknown tool 'gamma'. Available tools: alpha, beta.",
            is_error=True,
        )
    ]
    (empty,) = await Dispatcher([]).run([call("c1", "gamma")])
    assert empty.content == "Unknown tool 'gamma': no tools are available."


async def test_malformed_call_reports_the_error_and_the_raw_text_without_running() -> None:
    ran = False

    @tool
    def search(query: str) -> None:
        nonlocal ran
        ran = True

    raw = '<tool_call>{"name": "search", "arguments": {"query": "x"</tool_call>'
    (result,) = await Dispatcher([search]).run(
        [call("c1", "search", error="invalid JSON: unexpected end", raw=raw)]
    )
    assert not ran
    assert result.is_error
    assert result.name == "search"
    assert "invalid JSON: unexpected end" in result.content
    assert raw in result.content


async def test_long_raw_text_is_excerpted() -> None:
    raw = "HEAD" + "x" * 5000 + "TAIL"
    (result,) = await Dispatcher([]).run([call("c1", "f", error="truncated", raw=raw)])
    assert "HEAD" in result.content
    assert "TAIL" in result.content
    assert "[... 4488 characters ...]" in result.content
    assert len(result.content) < 1000


async def test_a_repeated_call_id_runs_once() -> None:
    runs = 0

    @tool
    async def once() -> int:
        nonlocal runs
        runs += 1
        return runs

    recorder = Recorder()
    async with Dispatcher([once]).turn(on_result=recorder) as turn:
        turn.start(call("c1", "once"))
        turn.start(call("c1", "once"))
    assert runs == 1
    assert [r.call_id for r in turn.results] == ["c1"]
    assert recorder.order == ["c1"]


async def test_outer_cancellation_propagates() -> None:
    running = anyio.Event()
    cancelled = False

    @tool
    async def hang() -> None:
        nonlocal cancelled
        running.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise

    recorder = Recorder()
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with Dispatcher([hang]).turn(on_result=recorder) as turn:
            turn.start(call("c1", "hang"))
            await running.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert cancelled
    assert recorder.events == []  # no error result for a cancelled turn


async def test_cancellation_while_waiting_for_tools_on_exit() -> None:
    cancelled = False

    @tool
    async def hang() -> None:
        nonlocal cancelled
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise

    with anyio.fail_after(5), anyio.CancelScope() as scope:

        @tool
        async def stop() -> str:
            scope.cancel()
            return "stopping"

        recorder = Recorder()
        async with Dispatcher([hang, stop]).turn(on_result=recorder) as turn:
            turn.start(call("c1", "hang"))
            turn.start(call("c2", "stop"))
    assert scope.cancelled_caught
    assert cancelled
    assert not any(event.is_error for event in recorder.events)


async def test_an_error_in_the_body_cancels_tools_and_propagates_unwrapped() -> None:
    running = anyio.Event()
    cancelled = False

    @tool
    async def hang() -> None:
        nonlocal cancelled
        running.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise

    async def stream_that_breaks() -> None:
        async with Dispatcher([hang]).turn() as turn:
            turn.start(call("c1", "hang"))
            await running.wait()
            raise RuntimeError("stream broke")

    with anyio.fail_after(5), pytest.raises(RuntimeError, match="stream broke"):
        await stream_that_breaks()
    assert cancelled


async def test_an_error_in_on_result_propagates_unwrapped() -> None:
    @tool
    def ok() -> str:
        return "ok"

    async def on_result(event: ToolResultEvent) -> None:
        raise LookupError("consumer gone")

    with anyio.fail_after(5), pytest.raises(LookupError, match="consumer gone"):
        await Dispatcher([ok]).run([call("c1", "ok")], on_result=on_result)


async def test_misuse_is_reported() -> None:
    dispatcher = Dispatcher([])
    turn = dispatcher.turn()
    with pytest.raises(RuntimeError, match="async with"):
        turn.start(call("c1", "x"))
    async with turn:
        with pytest.raises(RuntimeError, match="results"):
            _ = turn.results
    with pytest.raises(RuntimeError, match="async with"):
        turn.start(call("c2", "x"))
    with pytest.raises(RuntimeError, match="once"):
        async with turn:
            pass
    assert turn.results == []


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        Dispatcher([], max_concurrency=0)
    with pytest.raises(ConfigurationError, match="timeout"):
        Dispatcher([], timeout=0)


def test_dispatcher_wraps_plain_functions_or_takes_a_registry() -> None:
    def f() -> None:
        pass

    registry = ToolRegistry([f])
    assert Dispatcher(registry).registry is registry
    dispatcher = Dispatcher([f], timeout=5, max_concurrency=3)
    assert dispatcher.registry.names == ["f"]
    assert (dispatcher.timeout, dispatcher.max_concurrency) == (5, 3)


async def test_one_log_record_per_tool_call(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentkit.tools")

    @tool
    def ok() -> str:
        return "ok"

    await Dispatcher([ok]).run([call("c1", "ok"), call("c2", "missing")])
    messages = [r.getMessage() for r in caplog.records if r.name == "agentkit.tools"]
    assert len(messages) == 2
    by_id = {next(m for m in messages if f"call_id='{cid}'" in m): cid for cid in ("c1", "c2")}
    assert len(by_id) == 2
    for message in messages:
        assert "event='tool_call'" in message
        assert "duration_s=" in message
    ok_line, missing_line = sorted(messages, key=lambda m: "c2" in m)
    assert "is_error=False" in ok_line
    assert "tool='ok'" in ok_line
    assert "is_error=True" in missing_line
    assert "error='UnknownToolError'" in missing_line


async def test_concurrency_limit_is_shared_by_turns_of_one_dispatcher() -> None:
    running = 0
    peak = 0
    gate = anyio.Event()

    async def work() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1

    dispatcher = Dispatcher([Tool.from_function(work)], max_concurrency=1)

    async def one_turn(call_id: str) -> list[ToolResultBlock]:
        return await dispatcher.run([call(call_id, "work")])

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(one_turn, "a")
            group.start_soon(one_turn, "b")
            await anyio.wait_all_tasks_blocked()
            assert running == 1
            gate.set()
    assert peak == 1
