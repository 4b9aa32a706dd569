"""The span tree of instrumented runs, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json

import anyio
import pytest
from _otel_memory import TWO_CALLS, Otel
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

import agentkit
from agentkit.engine import ScriptedEngine
from agentkit.errors import ConfigurationError, EngineError
from agentkit.events import ToolCallComplete
from agentkit.telemetry import Instrumentation

pytestmark = pytest.mark.anyio


def _parallel_tools() -> list[agentkit.Tool]:
    """Two tools that can only both finish if they run at the same time."""
    second_started = anyio.Event()

    @agentkit.tool
    async def first(x: int) -> str:
        await second_started.wait()
        return f"first {x}"

    @agentkit.tool
    async def second(x: int) -> str:
        second_started.set()
        return f"second {x}"

    return [first, second]


class _OnEnd(SpanProcessor):
    """Sets ``event`` when a span named ``name`` ends."""

    def __init__(self, name: str, event: anyio.Event) -> None:
        self._name = name
        self._event = event

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == self._name:
            self._event.set()


def _span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


async def test_a_run_with_two_parallel_tools_is_one_tree() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"], token_delay=0.001)
    agent = agentkit.Agent(
        engine, tools=_parallel_tools(), profile="qwen3", instrument=otel.settings()
    )
    result = await agent.run("go")

    (run,) = otel.named("invoke_agent")
    chats = otel.named("chat")
    tools = otel.named("execute_tool")
    assert len(otel.finished()) == 5
    assert run.name == "invoke_agent"
    assert run.parent is None
    assert run.status.status_code is StatusCode.UNSET
    assert [s.name for s in chats] == ["chat", "chat"]
    assert [s.name for s in tools] == ["execute_tool first", "execute_tool second"]
    for span in [*chats, *tools]:  # tools are the run's children, siblings of the turns
        assert _parent_id(span) == _span_id(run)
        assert span.context is not None
        assert span.context.trace_id == run.context.trace_id

    attributes = dict(run.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.provider.name"] == "scripted"
    assert attributes["agentkit.run_id"] == result.run_id
    assert attributes["agentkit.profile"] == "qwen3"
    assert attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
    assert attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert attributes["agentkit.turns"] == 2

    for number, (chat, usage) in enumerate(zip(chats, result.usage.turns, strict=True), 1):
        attributes = dict(chat.attributes or {})
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["agentkit.turn"] == number
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
        assert attributes["gen_ai.usage.output_tokens"] == usage.output_tokens
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == usage.cached_prompt_tokens
        assert attributes["gen_ai.response.time_to_first_chunk"] == usage.time_to_first_token_s
        assert chat.status.status_code is StatusCode.UNSET
    assert dict(chats[0].attributes or {})["agentkit.tool_calls"] == 2
    assert dict(chats[1].attributes or {})["gen_ai.usage.cache_read.input_tokens"] > 0

    calls = result.transcript.messages[1].tool_calls
    for span, call in zip(tools, calls, strict=True):
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == call.name
        assert attributes["gen_ai.tool.call.id"] == call.id
        assert attributes["gen_ai.tool.type"] == "function"
        assert attributes["agentkit.turn"] == 1
        assert attributes["agentkit.tool.dispatch_offset_s"] > 0
        assert [link.context.span_id for link in span.links] == [_span_id(chats[0])]
        assert span.status.status_code is StatusCode.UNSET
        # Dispatched while the model was still writing the turn's last words.
        assert chats[0].start_time is not None
        assert chats[0].end_time is not None
        assert span.start_time is not None
        assert chats[0].start_time < span.start_time < chats[0].end_time
    first, second = tools
    assert first.end_time is not None
    assert second.end_time is not None
    assert second.start_time is not None
    assert first.start_time is not None
    assert second.start_time < first.end_time  # they overlapped
    offsets = [dict(s.attributes or {})["agentkit.tool.dispatch_offset_s"] for s in tools]
    assert offsets[0] < offsets[1]


async def test_span_names_carry_the_model_and_the_agent_name() -> None:
    otel = Otel()
    engine = ScriptedEngine(["hello"])
    engine.model = "Qwen/Qwen3-8B"  # type: ignore[attr-defined]
    settings = otel.settings(agent_name="researcher")
    await agentkit.Agent(engine, profile="qwen3", instrument=settings).run("hi")
    run, chat = otel.finished()
    assert run.name == "invoke_agent researcher"
    assert dict(run.attributes or {})["gen_ai.agent.name"] == "researcher"
    assert chat.name == "chat Qwen/Qwen3-8B"
    assert dict(chat.attributes or {})["gen_ai.request.model"] == "Qwen/Qwen3-8B"


async def test_content_is_not_captured_by_default() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"])
    agent = agentkit.Agent(
        engine, tools=_parallel_tools(), profile="qwen3", system="be brief", instrument=True
    )
    agent.instrument = otel.settings()
    await agent.run("a private question")
    captured = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    for span in otel.finished():
        assert not captured & set(span.attributes or {}), span.name
        assert "private" not in json.dumps(dict(span.attributes or {}), default=str)


async def test_content_capture_records_the_conversation() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"])
    agent = agentkit.Agent(
        engine,
        tools=_parallel_tools(),
        profile="qwen3",
        system="be brief",
        instrument=otel.settings(capture_content=True),
    )
    result = await agent.run("the question")
    chats = otel.named("chat")
    first = dict(chats[0].attributes or {})
    assert json.loads(str(first["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "the question"}]}
    ]
    assert json.loads(str(first["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "be brief"}
    ]
    output = json.loads(str(first["gen_ai.output.messages"]))
    calls = result.transcript.messages[2].tool_calls
    assert output[0]["finish_reason"] == "stop"
    assert output[0]["parts"][:2] == [
        {"type": "tool_call", "id": calls[0].id, "name": "first", "arguments": {"x": 1}},
        {"type": "tool_call", "id": calls[1].id, "name": "second", "arguments": {"x": 2}},
    ]
    second_input = json.loads(str(dict(chats[1].attributes or {})["gen_ai.input.messages"]))
    assert second_input[-1] == {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": calls[0].id, "response": "first 1"},
            {"type": "tool_call_response", "id": calls[1].id, "response": "second 2"},
        ],
    }
    tool = dict(otel.named("execute_tool first")[0].attributes or {})
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"x": 1}
    assert tool["gen_ai.tool.call.result"] == "first 1"


async def test_failed_tool_calls_are_error_spans() -> None:
    @agentkit.tool
    def broken(x: int) -> str:
        raise ValueError("bad input")

    otel = Otel()
    engine = ScriptedEngine(
        [
            '<tool_call>\n{"name": "broken", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>\n{"name": "missing", "arguments": {}}\n</tool_call>',
            "done",
        ]
    )
    agent = agentkit.Agent(engine, tools=[broken], profile="qwen3", instrument=otel.settings())
    await agent.run("go")
    crashed, unknown = otel.named("execute_tool")
    assert crashed.status.status_code is StatusCode.ERROR
    assert dict(crashed.attributes or {})["error.type"] == "ToolExecutionError"
    (event,) = [e for e in crashed.events if e.name == "exception"]
    assert dict(event.attributes or {})["exception.type"] == "ValueError"
    assert unknown.name == "execute_tool missing"
    assert unknown.status.status_code is StatusCode.ERROR
    assert dict(unknown.attributes or {})["error.type"] == "UnknownToolError"
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code is StatusCode.UNSET  # the model saw the errors and went on


async def test_an_engine_failure_ends_the_turn_and_the_run_with_errors() -> None:
    otel = Otel()
    engine = ScriptedEngine([["partial", RuntimeError("engine down")]])
    agent = agentkit.Agent(engine, profile="qwen3", instrument=otel.settings())
    with pytest.raises(EngineError):
        await agent.run("hi")
    run, chat = otel.finished()
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["gen_ai.response.finish_reasons"] == ("error",)
    assert dict(chat.attributes or {})["error.type"] == "EngineError"
    assert dict(run.attributes or {})["error.type"] == "EngineError"


async def test_a_run_cancelled_while_its_tool_runs_ends_every_span() -> None:
    started = anyio.Event()

    @agentkit.tool
    async def forever() -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    otel = Otel()
    chat_ended = anyio.Event()
    otel.tracer_provider.add_span_processor(_OnEnd("chat", chat_ended))
    engine = ScriptedEngine(['<tool_call>\n{"name": "forever", "arguments": {}}\n</tool_call>'])
    agent = agentkit.Agent(engine, tools=[forever], profile="qwen3", instrument=otel.settings())
    async with anyio.create_task_group() as group:
        group.start_soon(agent.run, "go")
        await started.wait()
        await chat_ended.wait()  # the model's part of the turn is over; the tool runs on
        group.cancel_scope.cancel()
    run, chat, tool = otel.finished()
    assert chat.status.status_code is StatusCode.UNSET  # the model's part had ended
    for span in (run, tool):
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "CancelledError"


async def test_leaving_the_stream_mid_turn_ends_the_open_chat_span() -> None:
    otel = Otel()
    engine = ScriptedEngine([TWO_CALLS, "done"], token_delay=0.001)
    agent = agentkit.Agent(
        engine, tools=_parallel_tools(), profile="qwen3", instrument=otel.settings()
    )
    async with agent.stream("go") as events:
        async for event in events:
            if isinstance(event, ToolCallComplete):
                break
    names = [s.name for s in otel.finished()]
    assert names[:2] == ["invoke_agent", "chat"]
    (run,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
    for span in otel.named("execute_tool"):
        assert span.end_time is not None


async def test_the_tool_span_is_current_inside_the_tool_and_its_thread() -> None:
    seen: dict[str, int] = {}

    @agentkit.tool
    async def in_task() -> str:
        seen["in_task"] = trace.get_current_span().get_span_context().span_id
        return "ok"

    @agentkit.tool
    def in_thread() -> str:
        seen["in_thread"] = trace.get_current_span().get_span_context().span_id
        return "ok"

    otel = Otel()
    engine = ScriptedEngine(
        [
            '<tool_call>\n{"name": "in_task", "arguments": {}}\n</tool_call>\n'
            '<tool_call>\n{"name": "in_thread", "arguments": {}}\n</tool_call>',
            "done",
        ]
    )
    agent = agentkit.Agent(
        engine, tools=[in_task, in_thread], profile="qwen3", instrument=otel.settings()
    )
    await agent.run("go")
    spans = {s.name: _span_id(s) for s in otel.named("execute_tool")}
    assert seen == {
        "in_task": spans["execute_tool in_task"],
        "in_thread": spans["execute_tool in_thread"],
    }


async def test_instrument_all_applies_to_agents_without_their_own_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentkit.telemetry import _settings

    monkeypatch.setattr(_settings, "_default", None)
    otel = Otel()
    default = agentkit.Agent(ScriptedEngine(["a", "a"]), profile="qwen3")
    opted_out = agentkit.Agent(ScriptedEngine(["b"]), profile="qwen3", instrument=False)
    agentkit.telemetry.instrument_all(otel.settings())
    await default.run("hi")
    await opted_out.run("hi")
    assert [s.name for s in otel.finished()] == ["invoke_agent", "chat"]
    agentkit.telemetry.instrument_all(False)
    await default.run("hi")
    assert len(otel.finished()) == 2


async def test_instrumenting_without_opentelemetry_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentkit.telemetry import _settings

    monkeypatch.setattr(_settings.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"pip install 'agentkit-local\[otel\]'"):
        agentkit.Agent(ScriptedEngine(["a"]), profile="qwen3", instrument=True)
    with pytest.raises(ConfigurationError):
        agentkit.telemetry.instrument_all(Instrumentation())
