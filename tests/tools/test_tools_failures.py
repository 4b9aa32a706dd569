"""A crashing tool: only cancellation escapes, the traceback is kept, and tests can fail on it."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.errors import ToolError, ToolExecutionError
from agentkit.events import ToolCallComplete, ToolResultEvent
from agentkit.tools import Dispatcher, tool

pytestmark = pytest.mark.anyio


def call(
    call_id: str, name: str, *, error: str | None = None, **arguments: Any
) -> ToolCallComplete:
    return ToolCallComplete(
        index=0, id=call_id, name=name, arguments=arguments, raw="", error=error
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[ToolResultEvent] = []

    async def __call__(self, event: ToolResultEvent) -> None:
        self.events.append(event)


@pytest.mark.parametrize(
    ("exception", "text"),
    [
        (KeyboardInterrupt(), "KeyboardInterrupt"),
        (SystemExit(3), "SystemExit: 3"),
        (GeneratorExit(), "GeneratorExit"),
        (asyncio.CancelledError(), "CancelledError"),  # raised, not a cancellation
    ],
)
@pytest.mark.parametrize("is_async", [False, True])
async def test_base_exceptions_from_a_tool_become_error_results(
    exception: BaseException, text: str, is_async: bool
) -> None:
    def fail() -> None:
        raise exception

    async def fail_async() -> None:
        raise exception

    crashing = agentkit.tool(fail_async if is_async else fail, name="crash")

    @tool
    async def fine() -> str:
        return "fine"

    with anyio.fail_after(5):
        results = await Dispatcher([crashing, fine]).run([call("c1", "crash"), call("c2", "fine")])
    assert (results[0].content, results[0].is_error) == (text, True)
    assert (results[1].content, results[1].is_error) == ("fine", False)


async def test_an_exception_whose_str_raises_is_still_reported() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    @tool
    async def nasty() -> None:
        raise Nasty

    (result,) = await Dispatcher([nasty]).run([call("c1", "nasty")])
    assert result.is_error
    assert result.content == "Nasty (its message could not be read: RuntimeError)"


async def test_a_tool_error_whose_message_is_odd_is_still_reported() -> None:
    class Odd:
        def __str__(self) -> str:
            raise RuntimeError("no")

    @tool
    async def odd() -> None:
        raise ToolError(Odd(), call_id="", tool_name="odd")  # type: ignore[arg-type]

    (result,) = await Dispatcher([odd]).run([call("c1", "odd")])
    assert result.is_error
    assert "ToolError" in result.content


async def test_native_task_cancellation_still_propagates() -> None:
    running = anyio.Event()

    @tool
    async def hang() -> None:
        running.set()
        await anyio.sleep_forever()

    task = asyncio.ensure_future(Dispatcher([hang]).run([call("c1", "hang")]))
    with anyio.fail_after(5):
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()


async def test_a_crash_keeps_its_traceback_on_the_event_and_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentkit.tools")

    def inner_helper() -> None:
        raise ZeroDivisionError("division by zero")

    @tool
    def divide() -> None:
        inner_helper()

    @tool
    def ok() -> str:
        return "ok"

    recorder = Recorder()
    results = await Dispatcher([divide, ok]).run(
        [call("c1", "divide"), call("c2", "ok"), call("c3", "missing")], on_result=recorder
    )
    crash = next(e for e in recorder.events if e.call_id == "c1")
    assert crash.traceback is not None
    assert crash.traceback.startswith("Traceback (most recent call last):")
    assert "inner_helper" in crash.traceback
    assert crash.traceback.rstrip().endswith("ZeroDivisionError: division by zero")
    # What the model sees has no traceback, nor does the transcript's block.
    assert results[0].content == "ZeroDivisionError: division by zero"
    assert "Traceback" not in results[0].model_dump_json()
    # Results without a crash have none: a bad call is the model's, not a traceback's.
    assert all(e.traceback is None for e in recorder.events if e.call_id != "c1")

    records = {
        cid: r for r in caplog.records for cid in ("c1", "c2", "c3") if f"'{cid}'" in r.getMessage()
    }
    assert records["c1"].levelno == logging.ERROR
    assert records["c1"].exc_info is not None
    assert isinstance(records["c1"].exc_info[1], ZeroDivisionError)
    assert "inner_helper" in caplog.text
    assert records["c2"].levelno == logging.INFO
    assert records["c2"].exc_info is None
    assert records["c3"].levelno == logging.INFO


async def test_raise_tool_errors_raises_the_crash_after_the_other_tools_settle() -> None:
    crashed = anyio.Event()
    slow_finished = False

    @tool
    async def crash() -> None:
        crashed.set()
        raise LookupError("missing key")

    @tool
    async def slow() -> str:
        nonlocal slow_finished
        await crashed.wait()  # still running when the crash happens
        await anyio.lowlevel.checkpoint()
        slow_finished = True
        return "slow"

    recorder = Recorder()
    dispatcher = Dispatcher([crash, slow], raise_tool_errors=True)
    assert dispatcher.raise_tool_errors
    with anyio.fail_after(5), pytest.raises(ToolExecutionError) as info:
        await dispatcher.run([call("c1", "slow"), call("c2", "crash")], on_result=recorder)
    assert slow_finished
    assert sorted(e.call_id for e in recorder.events) == ["c1", "c2"]
    error = info.value
    assert isinstance(error.__cause__, LookupError)
    assert (error.call_id, error.tool_name) == ("c2", "crash")
    assert "crash" in str(error)
    assert "LookupError: missing key" in str(error)


async def test_raise_tool_errors_names_the_first_crash_in_call_order() -> None:
    @tool
    async def first() -> None:
        raise ValueError("one")

    @tool
    def second() -> None:
        raise ValueError("two")

    with pytest.raises(ToolExecutionError) as info:
        await Dispatcher([first, second], raise_tool_errors=True).run(
            [call("c1", "first"), call("c2", "second")]
        )
    assert str(info.value.__cause__) == "one"
    assert "1 more" in str(info.value)


async def test_raise_tool_errors_leaves_the_models_mistakes_to_the_model() -> None:
    @tool
    def square(n: int) -> int:
        return n * n

    @tool
    async def refuse() -> None:
        raise ToolError("Use an absolute path.", call_id="", tool_name="refuse")

    @tool(timeout=0.01)
    async def hang() -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(5):
        results = await Dispatcher([square, refuse, hang], raise_tool_errors=True).run(
            [
                call("c1", "nope"),
                call("c2", "square", n="four"),
                call("c3", "square", error="invalid JSON"),
                call("c4", "refuse"),
                call("c5", "hang"),
            ]
        )
    assert all(r.is_error for r in results)


def _hermes(name: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': {}})}\n</tool_call>"


@tool
def broken() -> str:
    """A tool with a bug."""
    raise AttributeError("'NoneType' object has no attribute 'x'")


async def test_agent_raise_tool_errors_makes_the_run_fail() -> None:
    engine = ScriptedEngine([_hermes("broken"), "recovered"])
    agent = agentkit.Agent(engine, tools=[broken], raise_tool_errors=True, profile="qwen3")
    with pytest.raises(ToolExecutionError) as info:
        await agent.run("go")
    assert isinstance(info.value.__cause__, AttributeError)
    assert info.value.tool_name == "broken"


async def test_agent_by_default_shows_the_crash_to_the_model_and_goes_on() -> None:
    engine = ScriptedEngine([_hermes("broken"), "recovered"])
    result = await agentkit.Agent(engine, tools=[broken], profile="qwen3").run("go")
    assert result.output_text == "recovered"
    tool_message = result.transcript.messages[-2]
    assert tool_message.role == "tool"
    assert "AttributeError" in tool_message.content[0].content  # type: ignore[union-attr]
