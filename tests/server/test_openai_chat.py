"""``POST /v1/chat/completions`` end to end, with the official ``openai`` SDK as the client
(and ``httpx`` for the dispatch side channel, which the SDK does not read).

A real uvicorn server runs in a thread on 127.0.0.1 with a tokenizing scripted engine that
answers in Qwen3's format (``<think>`` reasoning, hermes ``<tool_call>`` calls).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from _harness import running

from agentkit.engine import (
    GenerationChunk,
    GenerationRequest,
    ScriptedOutput,
    TokenizedScriptedEngine,
)
from agentkit.errors import EngineError, EngineOverloaded
from agentkit.events import (
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
)
from agentkit.profiles import get_profile
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_chat import ChatStream, chat_routes
from agentkit.server._runtime import ServerRuntime

QWEN3 = get_profile("qwen3")
KEY = "test-key"
READ: Any = {
    "type": "function",
    "function": {
        "name": "Read",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
}
INTERLEAVED = (
    "<think>\nRead it first.\n</think>\n\n"
    + "<tool_call>\n"
    + json.dumps({"name": "Read", "arguments": {"file_path": "/tmp/a.txt"}})
    + "\n</tool_call>"
    + "\n<think>\nAnd the other.\n</think>\n\n"
    + "<tool_call>\n"
    + json.dumps({"name": "Read", "arguments": {"file_path": "/tmp/b.txt"}})
    + "\n</tool_call>"
)


class Recording(TokenizedScriptedEngine):
    """Counts streams closed before they finished (aborted requests)."""

    def __init__(self, outputs: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0], **kwargs)
        self.aborted = 0

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        finished = False
        try:
            async for chunk in super().generate(request):
                finished = finished or chunk.finish_reason is not None
                yield chunk
        finally:
            self.aborted += not finished


@contextmanager
def serve(
    outputs: Sequence[Any], tmp_path: Path, *, token_delay: float = 0.0, **config: Any
) -> Iterator[tuple[str, Recording]]:
    engine = Recording(outputs, token_delay=token_delay)
    runtime = ServerRuntime(engine, QWEN3, log_prompts=tmp_path / "prompts")
    settings = {"model_name": "org/served-model", "api_key": KEY, **config}
    app = create_app(runtime, ServerConfig(**settings), adapters=[chat_routes])
    try:
        with running(app) as url:
            yield url, engine
    finally:
        while _CLIENTS:  # their pooled connections, closed now rather than by a later GC
            _CLIENTS.pop().close()


_CLIENTS: list[openai.OpenAI] = []


def client(url: str, key: str = KEY) -> openai.OpenAI:
    """An SDK client for the server; closed when the ``serve`` block that made it ends."""
    sdk = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    _CLIENTS.append(sdk)
    return sdk


def prompts(tmp_path: Path) -> list[str]:
    return [p.read_text() for p in sorted((tmp_path / "prompts").glob("*.txt"))]


def accumulate(stream: Any, field: str = "reasoning_content") -> dict[str, Any]:
    """What a client builds from the chunks."""
    out: dict[str, Any] = {
        "roles": [],
        "reasoning": "",
        "content": "",
        "calls": {},
        "finish": [],
        "usage": None,
        "ids": set(),
    }
    for chunk in stream:
        out["ids"].add(chunk.id)
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            assert chunk.choices == []
            out["usage"] = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            out["roles"].append(delta.role)
            out["reasoning"] += (delta.model_extra or {}).get(field) or ""
            out["content"] += delta.content or ""
            for call in delta.tool_calls or []:
                entry = out["calls"].setdefault(call.index, {"id": None, "name": "", "args": ""})
                if call.id:
                    assert entry["id"] is None, "a call's id is sent once"
                    entry["id"] = call.id
                if call.function and call.function.name:
                    entry["name"] += call.function.name
                if call.function and call.function.arguments:
                    entry["args"] += call.function.arguments
            if choice.finish_reason:
                out["finish"].append(choice.finish_reason)
    return out


def test_streaming_with_reasoning_and_tools(tmp_path: Path) -> None:
    with serve([INTERLEAVED], tmp_path) as (url, engine):
        stream = client(url).chat.completions.create(
            model="org/served-model",
            messages=[{"role": "user", "content": "Read a and b."}],
            tools=[READ],
            stream=True,
            stream_options={"include_usage": True},
        )
        got = accumulate(stream)
    assert len(got["ids"]) == 1
    assert next(iter(got["ids"])).startswith("chatcmpl-")
    assert got["roles"][0] == "assistant"
    assert got["reasoning"] == "Read it first.\nAnd the other.\n"
    assert got["content"] == ""  # the whitespace between blocks is not content
    calls = got["calls"]
    assert sorted(calls) == [0, 1]
    assert [calls[i]["name"] for i in (0, 1)] == ["Read", "Read"]
    assert [json.loads(calls[i]["args"]) for i in (0, 1)] == [
        {"file_path": "/tmp/a.txt"},
        {"file_path": "/tmp/b.txt"},
    ]
    assert calls[0]["id"] != calls[1]["id"]
    assert all(calls[i]["id"].startswith("call_") for i in (0, 1)), "OpenAI's id style"
    assert got["finish"] == ["tool_calls"]
    usage = got["usage"]
    (sent,) = engine.requests
    assert sent.prompt_token_ids is not None
    assert usage.prompt_tokens == len(sent.prompt_token_ids)
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0


def test_non_streaming(tmp_path: Path) -> None:
    outputs = ["<think>\nA greeting.\n</think>\n\nHello there.", "no usage asked"]
    with serve(outputs, tmp_path) as (url, _):
        sdk = client(url)
        completion = sdk.chat.completions.create(
            model="org/served-model", messages=[{"role": "user", "content": "hi"}]
        )
        assert completion.object == "chat.completion"
        assert completion.id.startswith("chatcmpl-")
        assert completion.model == "org/served-model"
        (choice,) = completion.choices
        assert choice.finish_reason == "stop"
        assert choice.message.role == "assistant"
        assert choice.message.content == "Hello there."
        assert choice.message.tool_calls is None
        assert (choice.message.model_extra or {})["reasoning_content"] == "A greeting.\n"
        assert completion.usage is not None
        assert completion.usage.prompt_tokens > 0
        # Without include_usage no usage chunk comes.
        stream = sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        got = accumulate(stream)
        assert got["usage"] is None
        assert got["content"] == "no usage asked"
        assert got["finish"] == ["stop"]


def test_non_streaming_tool_calls_and_length(tmp_path: Path) -> None:
    call = '<tool_call>\n{"name": "Read", "arguments": {"file_path": "x"}}\n</tool_call>'
    outputs = [
        "Let me look.\n\n" + call,
        ScriptedOutput.of("cut off", finish_reason="length"),
    ]
    with serve(outputs, tmp_path) as (url, _):
        sdk = client(url)
        message: Any = {"role": "user", "content": "x"}
        first = sdk.chat.completions.create(model="m", messages=[message], tools=[READ])
        assert first.choices[0].finish_reason == "tool_calls"
        assert first.choices[0].message.content == "Let me look.\n\n"
        (tool_call,) = first.choices[0].message.tool_calls or []
        assert tool_call.type == "function"
        assert re.fullmatch(r"call_[0-9A-Za-z]{24}", tool_call.id), "OpenAI's id style"
        assert tool_call.function.name == "Read"
        assert json.loads(tool_call.function.arguments) == {"file_path": "x"}
        second = sdk.chat.completions.create(model="m", messages=[message], max_tokens=2)
        assert second.choices[0].finish_reason == "length"


def _round_trip(
    tmp_path: Path, assistant: Any, *, field: str = "reasoning_content", **config: Any
) -> None:
    """Serve INTERLEAVED then an answer; the client sends the first turn back as
    ``assistant(turn)`` (a list of assistant messages) and the results."""
    second = "<think>\nBoth read.\n</think>\n\nThey say A and B."
    with serve([INTERLEAVED, second], tmp_path, **config) as (url, engine):
        sdk = client(url)
        request: dict[str, Any] = {"model": "m", "tools": [READ]}
        messages: list[Any] = [
            {"role": "system", "content": "You read files."},
            {"role": "user", "content": "Read a and b."},
        ]
        got = accumulate(
            sdk.chat.completions.create(messages=messages, stream=True, **request),
            field,
        )
        calls = [got["calls"][i] for i in sorted(got["calls"])]
        messages += assistant(got, calls, field)
        messages += [
            {"role": "tool", "tool_call_id": calls[0]["id"], "content": "A"},
            {
                "role": "tool",
                "tool_call_id": calls[1]["id"],
                "content": [{"type": "text", "text": "B"}],
            },
        ]
        final = sdk.chat.completions.create(messages=messages, **request)
        assert final.choices[0].message.content == "They say A and B."
        assert (final.choices[0].message.model_extra or {})[field] == "Both read.\n"
        r1, r2 = engine.requests
        assert r1.prompt_token_ids is not None
        assert r2.prompt_token_ids is not None
        generated = engine.encode(INTERLEAVED) + engine.encode(QWEN3.stop[0])
        assert r2.prompt_token_ids[: len(r1.prompt_token_ids) + len(generated)] == [
            *r1.prompt_token_ids,
            *generated,
        ]
        assert final.usage is not None
        assert final.usage.prompt_tokens_details is not None
        cached = final.usage.prompt_tokens_details.cached_tokens
        assert cached == len(r1.prompt_token_ids) + len(generated)
        text = prompts(tmp_path)[1]
        order = [
            text.index(s) for s in ("Read it first.", "/tmp/a.txt", "And the other.", "/tmp/b.txt")
        ]
        assert order == sorted(order)
        assert text.index("/tmp/b.txt") < text.index("A\n") < text.index("B\n")


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = {"name": call["name"], "arguments": call["args"]}
    return {"id": call["id"], "type": "function", "function": function}


def test_a_round_trip_replays_the_exact_tokens(tmp_path: Path) -> None:
    def one_message(got: dict[str, Any], calls: list[Any], field: str) -> list[Any]:
        return [
            {
                "role": "assistant",
                "content": None,
                field: got["reasoning"],
                "tool_calls": [_call(c) for c in calls],
            }
        ]

    _round_trip(tmp_path, one_message)


def test_a_round_trip_split_per_reasoning_block_keeps_its_order(tmp_path: Path) -> None:
    def split(got: dict[str, Any], calls: list[Any], field: str) -> list[Any]:
        return [
            {"role": "assistant", field: "Read it first.", "tool_calls": [_call(calls[0])]},
            {"role": "assistant", field: "And the other.", "tool_calls": [_call(calls[1])]},
        ]

    _round_trip(tmp_path, split)


def test_the_reasoning_field_is_configurable(tmp_path: Path) -> None:
    def one_message(got: dict[str, Any], calls: list[Any], field: str) -> list[Any]:
        assert got["reasoning"]
        return [
            {
                "role": "assistant",
                "content": "",
                "reasoning": got["reasoning"],
                "tool_calls": [_call(c) for c in calls],
            }
        ]

    _round_trip(tmp_path, one_message, field="reasoning", reasoning_field="reasoning")


def test_an_edited_turn_is_rendered_canonically(tmp_path: Path) -> None:
    with serve([INTERLEAVED, "ok"], tmp_path) as (url, engine):
        sdk = client(url)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        first = sdk.chat.completions.create(model="m", messages=messages, tools=[READ])
        message = first.choices[0].message
        calls = [c.model_dump(exclude_none=True) for c in message.tool_calls or []]
        messages += [
            {"role": "assistant", "reasoning_content": "edited", "tool_calls": calls},
            {"role": "tool", "tool_call_id": calls[0]["id"], "content": "A"},
            {"role": "tool", "tool_call_id": calls[1]["id"], "content": "B"},
        ]
        sdk.chat.completions.create(model="m", messages=messages, tools=[READ])
        text = prompts(tmp_path)[1]
        assert "edited" in text
        assert text.index("edited") < text.index("/tmp/a.txt") < text.index("/tmp/b.txt")
        r1, r2 = engine.requests
        assert r1.prompt_token_ids is not None
        assert r2.prompt_token_ids is not None
        assert r2.prompt_token_ids[: len(r1.prompt_token_ids)] == r1.prompt_token_ids


def sse_events(response: httpx.Response) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event, comments skipped."""
    events: list[tuple[str | None, str]] = []
    name: str | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if not line:
            if data:
                events.append((name, "\n".join(data)))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    return events


def _stream(url: str, headers: dict[str, str] | None = None) -> list[tuple[str | None, str]]:
    body = {
        "model": "m",
        "stream": True,
        "tools": [READ],
        "messages": [{"role": "user", "content": "Read a and b."}],
    }
    with (
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}) as http,
        http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        return sse_events(response)


def test_the_dispatch_side_channel(tmp_path: Path) -> None:
    with serve([INTERLEAVED, INTERLEAVED], tmp_path, token_delay=0.001) as (url, _):
        events = _stream(url, {"x-agentkit-dispatch": "1"})
        assert all(name is None for name, _ in _stream(url))  # not asked for: none
    assert events[-1] == (None, "[DONE]")
    dispatched: dict[str, dict[str, Any]] = {}
    reasoning: list[Any] = []
    arguments: dict[int, str] = {}
    for position, (name, data) in enumerate(events):
        if name == "tool_call_dispatch":
            body = json.loads(data)
            assert body["choice_index"] == 0
            call = body["tool_call"]
            assert call["id"] not in dispatched, "once per id"
            dispatched[call["id"]] = call
            # Whole arguments, equal to the deltas sent before it; nothing of the call
            # comes after it.
            assert json.loads(call["function"]["arguments"]) == json.loads(arguments[call["index"]])
            for later_name, later in events[position + 1 :]:
                if later_name is None and later != "[DONE]":
                    for delta in json.loads(later)["choices"][0]["delta"].get("tool_calls", []):
                        assert delta["index"] != call["index"]
        elif name == "reasoning_dispatch":
            reasoning.append(json.loads(data))
        elif data != "[DONE]":
            for choice in json.loads(data)["choices"]:
                for delta in choice["delta"].get("tool_calls", []):
                    arguments[delta["index"]] = (
                        arguments.get(delta["index"], "") + delta["function"]["arguments"]
                    )
    assert [c["function"]["name"] for c in dispatched.values()] == ["Read", "Read"]
    assert [c["index"] for c in dispatched.values()] == [0, 1]
    assert [json.loads(c["function"]["arguments"]) for c in dispatched.values()] == [
        {"file_path": "/tmp/a.txt"},
        {"file_path": "/tmp/b.txt"},
    ]
    assert [r["reasoning"] for r in reasoning] == [
        {"index": 0, "text": "Read it first.\n"},
        {"index": 1, "text": "And the other.\n"},
    ]
    names = [name for name, _ in events]
    # Each reasoning block is dispatched before the call that follows it begins.
    first_call = next(i for i, (n, d) in enumerate(events) if n is None and '"tool_calls"' in d)
    assert names.index("reasoning_dispatch") < first_call
    finish = next(i for i, (_, d) in enumerate(events) if '"finish_reason":"tool_calls"' in d)
    assert max(i for i, n in enumerate(names) if n == "tool_call_dispatch") < finish


def test_dispatch_for_every_client_when_the_server_says_so(tmp_path: Path) -> None:
    with serve([INTERLEAVED, INTERLEAVED], tmp_path, streaming_tool_dispatch=True) as (url, _):
        names = [name for name, _ in _stream(url)]
        # The official SDK yields the side channel's events as chunks without choices.
        got = accumulate(
            client(url).chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "x"}],
                tools=[READ],
                stream=True,
            )
        )
    assert names.count("tool_call_dispatch") == 2
    assert names.count("reasoning_dispatch") == 2
    assert [json.loads(c["args"]) for c in got["calls"].values()] == [
        {"file_path": "/tmp/a.txt"},
        {"file_path": "/tmp/b.txt"},
    ]
    assert got["finish"] == ["tool_calls"]


def test_a_malformed_call_sent_back_as_received_is_replayed(tmp_path: Path) -> None:
    malformed = (
        "<think>\nTry.\n</think>\n\n"
        '<tool_call>\n{"name": "Read", "arguments": {"a": [1, \n</tool_call>'
    )
    with serve([malformed, "Sorry."], tmp_path) as (url, engine):
        sdk = client(url)
        messages: list[Any] = [{"role": "user", "content": "go"}]
        got = accumulate(
            sdk.chat.completions.create(model="m", messages=messages, tools=[READ], stream=True)
        )
        (call,) = got["calls"].values()
        assert call["args"] == '{"a": [1, \n'  # streamed as the model wrote it
        messages += [
            {
                "role": "assistant",
                "reasoning_content": got["reasoning"],
                "tool_calls": [_call(call)],
            },
            {"role": "tool", "tool_call_id": call["id"], "content": "invalid arguments"},
        ]
        sdk.chat.completions.create(model="m", messages=messages, tools=[READ])
        r1, r2 = engine.requests
        assert r1.prompt_token_ids is not None
        assert r2.prompt_token_ids is not None
        generated = engine.encode(malformed) + engine.encode(QWEN3.stop[0])
        assert r2.prompt_token_ids[: len(r1.prompt_token_ids) + len(generated)] == [
            *r1.prompt_token_ids,
            *generated,
        ]


def test_a_call_without_argument_deltas_is_dispatched_before_its_chunk() -> None:
    stream = ChatStream(completion_id="chatcmpl-x", model="m", created=0, dispatch=True)
    out = stream.start()
    complete = ToolCallComplete(index=0, id="call_1", name="Read", arguments={"a": 1}, raw="")
    out += stream.event(complete) + stream.event(complete)
    text = out.decode()
    assert text.count("event: tool_call_dispatch") == 1
    dispatch = text.index("event: tool_call_dispatch")
    assert dispatch < text.index('"id":"call_1","type":"function"')
    assert text.index('"arguments":"{\\"a\\":1}"}}]') > text.index('"arguments":""')
    assert stream.message()["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": '{"a":1}'}}
    ]


def test_whitespace_only_blocks_are_not_sent() -> None:
    stream = ChatStream(completion_id="c", model="m", created=0)
    events: list[Any] = [
        ReasoningDelta(index=0, text="  "),
        ReasoningComplete(index=0, text="  "),
        TextDelta(index=1, text="\n\n"),
        TextComplete(index=1, text="\n\n"),
        ToolCallStarted(index=2, id="call_1", name="f"),
        ToolCallArgumentsDelta(index=2, id="call_1", delta="{}"),
        ToolCallComplete(index=2, id="call_1", name="f", arguments={}, raw=""),
        TextDelta(index=3, text="one"),
        TextComplete(index=3, text="one"),
        TextComplete(index=4, text="two"),
    ]
    out = b"".join(stream.event(e) for e in events).decode()
    assert '"content":"\\n\\n"' not in out
    assert stream.message()["content"] == "one\n\ntwo"
    assert stream.message()["reasoning_content"] is None


def test_request_conversion_details(tmp_path: Path) -> None:
    with serve(["a", "b", "c"], tmp_path) as (url, engine):
        sdk = client(url)
        sdk.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "Sys one."},
                {"role": "developer", "content": [{"type": "text", "text": "Dev two."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look:"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    ],
                },
            ],
            stop="STOP",
            temperature=0.5,
            top_p=0.9,
            max_completion_tokens=7,
            extra_body={"unknown_field": {"ignored": True}},
        )
        sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "x"}],
            tools=[READ],
            tool_choice={"type": "function", "function": {"name": "Read"}},
        )
        sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "x"}],
            tools=[READ],
            tool_choice="none",
        )
        first, named, none = engine.requests
    assert "Sys one.\n\nDev two." in first.prompt
    assert "Look:\n[image omitted]" in first.prompt
    assert "STOP" in first.stop
    assert (first.max_tokens, first.temperature, first.top_p) == (7, 0.5, 0.9)
    assert "structured_outputs" in named.extra
    assert "bad_words" in none.extra


def _body(error: pytest.ExceptionInfo[openai.APIStatusError]) -> Any:
    return error.value.body


def test_errors(tmp_path: Path) -> None:
    outputs: list[Any] = [
        ScriptedOutput([EngineOverloaded("queue full")]),
        ScriptedOutput(["partial ", EngineError("the engine died")]),
        "slow " * 40,
    ]
    with serve(outputs, tmp_path, max_concurrency=1, token_delay=0.01) as (url, engine):
        sdk = client(url)
        messages: Any = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.BadRequestError) as bad:
            sdk.chat.completions.create(model="m", messages=messages, n=2)
        assert bad.value.status_code == 400
        assert _body(bad)["param"] == "n"
        assert _body(bad)["type"] == "invalid_request_error"
        call: Any = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "Read", "arguments": "{"},
        }
        with pytest.raises(openai.BadRequestError) as invalid:
            sdk.chat.completions.create(
                model="m",
                messages=[*messages, {"role": "assistant", "tool_calls": [call]}],
            )
        assert _body(invalid)["param"] == "messages.1.tool_calls.0.function.arguments"
        robot: Any = {"role": "robot", "content": "x"}
        with pytest.raises(openai.BadRequestError, match=r"messages\.0\.role"):
            sdk.chat.completions.create(model="m", messages=[robot])
        with pytest.raises(openai.BadRequestError, match="messages"):
            sdk.chat.completions.create(model="m", messages=[])
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            sdk.chat.completions.create(
                model="m",
                messages=messages,
                tools=[READ],
                tool_choice={"type": "function", "function": {"name": "Write"}},
            )
        with pytest.raises(openai.AuthenticationError) as unauthorized:
            client(url, "wrong").chat.completions.create(model="m", messages=messages)
        assert _body(unauthorized)["code"] == "invalid_api_key"
        with pytest.raises(openai.APIStatusError) as overloaded:
            sdk.chat.completions.create(model="m", messages=messages, stream=True)
        assert overloaded.value.status_code == 529
        # A failure after output has streamed: an error chunk, after the partial text.
        seen: list[str] = []

        def consume() -> None:
            for chunk in sdk.chat.completions.create(model="m", messages=messages, stream=True):
                seen.extend(c.delta.content or "" for c in chunk.choices)

        with pytest.raises(openai.APIError, match="the engine died"):
            consume()
        assert "".join(seen) == "partial "
        # 429 while another request is in flight (max_concurrency=1).
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}) as http:
            body = {"model": "m", "stream": True, "messages": messages}
            with http.stream("POST", "/v1/chat/completions", json=body) as slow:
                assert slow.status_code == 200
                chunks = slow.iter_bytes()
                next(chunks)
                busy = http.post("/v1/chat/completions", json={**body, "stream": False})
                assert busy.status_code == 429, busy.text
                error = busy.json()["error"]
                assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded")
                assert set(error) == {"message", "type", "param", "code", "request_id"}
                assert error["request_id"] == busy.headers["x-request-id"]
        assert engine.aborted >= 1
