"""The Anthropic response side: parse events to SSE and JSON bodies, read back the way clients
read them (the official SDK, through its own HTTP stack, when it is installed)."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import (
    ParseEvent,
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
)
from agentkit.parsing import create_parser
from agentkit.server._anthropic_response import (
    ERROR_STATUS,
    MessageStream,
    error_json,
    message_json,
    new_message_id,
    new_tool_use_id,
    sse,
    stop_reason,
)
from agentkit.transcript import Message

MODEL = "local-model"


def sign(text: str) -> str:
    return "sig-" + hashlib.sha256(text.encode()).hexdigest()[:16]


# -- event builders ----------------------------------------------------------------------


def thinking(index: int, *pieces: str, complete: bool = True) -> list[ParseEvent]:
    events: list[ParseEvent] = [ReasoningDelta(index=index, text=p) for p in pieces]
    if complete:
        events.append(ReasoningComplete(index=index, text="".join(pieces)))
    return events


def text(index: int, *pieces: str, complete: bool = True) -> list[ParseEvent]:
    events: list[ParseEvent] = [TextDelta(index=index, text=p) for p in pieces]
    if complete:
        events.append(TextComplete(index=index, text="".join(pieces)))
    return events


def call(
    index: int,
    name: str,
    arguments: dict[str, Any],
    *deltas: str,
    error: str | None = None,
    complete: bool = True,
) -> list[ParseEvent]:
    call_id = f"toolu_{index:024d}"
    events: list[ParseEvent] = [ToolCallStarted(index=index, id=call_id, name=name)]
    events += [ToolCallArgumentsDelta(index=index, id=call_id, delta=d) for d in deltas]
    if complete:
        raw = "".join(deltas)
        events.append(
            ToolCallComplete(
                index=index, id=call_id, name=name, arguments=arguments, raw=raw, error=error
            )
        )
    return events


# -- reading the wire back ---------------------------------------------------------------


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """The events' data, checking the framing and that each event is named as its type."""
    body = raw.decode("utf-8")
    assert body.endswith("\n\n")
    events = []
    for frame in body[:-2].split("\n\n"):
        name_line, data_line = frame.split("\n")
        assert name_line.startswith("event: ")
        assert data_line.startswith("data: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name_line.removeprefix("event: ")
        events.append(data)
    return events


def check_wire(events: Sequence[dict[str, Any]]) -> None:
    """Block indexes 0..n-1 in start order, one block open at a time, each one closed."""
    assert events[0]["type"] == "message_start"
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    open_index: int | None = None
    started = 0
    for e in events[1:-2]:
        if e["type"] == "content_block_start":
            assert open_index is None
            assert e["index"] == started
            open_index, started = e["index"], started + 1
        elif e["type"] == "content_block_delta":
            assert e["index"] == open_index
        elif e["type"] == "content_block_stop":
            assert e["index"] == open_index
            open_index = None
        else:
            assert e["type"] == "ping"
    assert open_index is None


def accumulate(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The final message, accumulated as a strict client would (tool input parsed whole)."""
    message: dict[str, Any] = json.loads(json.dumps(events[0]["message"]))
    buffers: dict[int, str] = {}
    for e in events[1:]:
        if e["type"] == "content_block_start":
            message["content"].append(json.loads(json.dumps(e["content_block"])))
        elif e["type"] == "content_block_delta":
            block, delta = message["content"][e["index"]], e["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                buffers[e["index"]] = buffers.get(e["index"], "") + delta["partial_json"]
        elif e["type"] == "content_block_stop" and e["index"] in buffers:
            message["content"][e["index"]]["input"] = json.loads(buffers[e["index"]])
        elif e["type"] == "message_delta":
            message.update(e["delta"])
            message["usage"].update(e["usage"])
    return message


def stream(
    events: Iterable[ParseEvent],
    *,
    stop: str = "end_turn",
    output_tokens: int = 42,
    live_arguments: bool = False,
) -> tuple[bytes, MessageStream]:
    s = MessageStream(
        message_id="msg_test", model=MODEL, sign=sign, stream_tool_arguments=live_arguments
    )
    out = s.start(input_tokens=100, cache_read_input_tokens=64)
    for e in events:
        out += s.event(e)
    out += s.ping()
    out += s.finish(stop, output_tokens)
    return out, s


def streamed(events: Iterable[ParseEvent], **kwargs: Any) -> dict[str, Any]:
    raw, s = stream(events, **kwargs)
    wire = parse_sse(raw)
    check_wire(wire)
    message = accumulate(wire)
    assert message["content"] == s.content
    return message


# -- the official SDK --------------------------------------------------------------------


def _sdk_client(body: bytes, content_type: str) -> Any:
    import anthropic

    try:
        http = importlib.import_module("httpx2")  # the HTTP stack of anthropic >= 2
    except ImportError:
        http = importlib.import_module("httpx")

    def handler(request: Any) -> Any:
        return http.Response(200, content=body, headers={"content-type": content_type})

    client = http.Client(transport=http.MockTransport(handler))
    return anthropic.Anthropic(
        api_key="test", http_client=client, max_retries=0, _strict_response_validation=True
    )


def sdk_stream(raw: bytes) -> dict[str, Any]:
    """Read ``raw`` with the SDK's own streaming helper; its final message, as JSON."""
    client = _sdk_client(raw, "text/event-stream")
    with client.messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as s:
        message = s.get_final_message()
    return dict(message.model_dump(mode="json", exclude_none=True))


def sdk_create(body: dict[str, Any]) -> dict[str, Any]:
    client = _sdk_client(json.dumps(body).encode(), "application/json")
    message = client.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    return dict(message.model_dump(mode="json", exclude_none=True))


# -- scenarios ---------------------------------------------------------------------------

INTERLEAVED = [
    *thinking(0, "I should ", "list files."),
    *call(1, "ls", {"path": "/tmp"}, '{"path":', ' "/tmp"}'),
    *thinking(2, "Now ", "read it."),
    *call(3, "read", {"file": "a.txt", "lines": [1, 2]}),  # no argument deltas
]

Expected = list[tuple[str, Any]]
"""Blocks as (kind, text) or ("tool_use", (index, name)); :func:`expected_content` fills in
the rest."""

SCENARIOS: dict[str, tuple[list[ParseEvent], Expected]] = {
    "interleaved": (
        INTERLEAVED,
        [
            ("thinking", "I should list files."),
            ("tool_use", (1, "ls")),
            ("thinking", "Now read it."),
            ("tool_use", (3, "read")),
        ],
    ),
    "text_only": (text(0, "Hello", ", wörld ✓"), [("text", "Hello, wörld ✓")]),
    "malformed_call": (
        [*text(0, "Calling."), *call(1, "f", {}, '{"b": 1,', ",}", error="invalid JSON")],
        [("text", "Calling."), ("tool_use", (1, "f"))],
    ),
    "whitespace_between_blocks": (
        [
            *thinking(0, "plan"),
            *text(1, "\n", "  \n"),
            *call(2, "f", {"x": 1}, '{"x": 1}'),
            *text(3, "\n\n", "Done", ".\n"),
        ],
        [("thinking", "plan"), ("tool_use", (2, "f")), ("text", "\n\nDone.\n")],
    ),
    "empty_reasoning": ([*thinking(0), *text(1, "Answer")], [("text", "Answer")]),
    "complete_without_deltas": (
        [ReasoningComplete(index=0, text="quiet"), TextComplete(index=1, text="loud")],
        [("thinking", "quiet"), ("text", "loud")],
    ),
    "index_gap": ([*text(0, "a"), *text(5, "b")], [("text", "a"), ("text", "b")]),
    "truncated_at_max_tokens": (
        [*thinking(0, "long "), *text(1, "cut", complete=False)],
        [("thinking", "long "), ("text", "cut")],
    ),
    "truncated_call": (
        [*text(0, "Run:"), *call(1, "sh", {}, '{"cmd": "rm -rf /tmp/bu', complete=False)],
        [("text", "Run:"), ("tool_use", (1, "sh"))],
    ),
}


def expected_content(events: Sequence[ParseEvent], blocks: Expected) -> list[dict[str, Any]]:
    """Full blocks: signatures, and the input of a call that parsed (``{}`` otherwise)."""
    arguments = {
        e.id: e.arguments for e in events if isinstance(e, ToolCallComplete) and e.error is None
    }
    filled: list[dict[str, Any]] = []
    for kind, value in blocks:
        if kind == "thinking":
            filled.append({"type": kind, "thinking": value, "signature": sign(value)})
        elif kind == "text":
            filled.append({"type": kind, "text": value})
        else:
            index, name = value
            tool_id = f"toolu_{index:024d}"
            filled.append(
                {"type": kind, "id": tool_id, "name": name, "input": arguments.get(tool_id, {})}
            )
    return filled


@pytest.mark.parametrize(
    ("name", "live_arguments"),
    [(name, False) for name in SCENARIOS]
    # Live arguments send a failed call's text as the model wrote it: tested below.
    + [(name, True) for name in SCENARIOS if name not in ("malformed_call", "truncated_call")],
)
def test_scenarios(name: str, live_arguments: bool) -> None:
    events, blocks = SCENARIOS[name]
    message = streamed(events, stop="max_tokens", live_arguments=live_arguments)
    assert message["content"] == expected_content(events, blocks)
    assert message["stop_reason"] == "max_tokens"
    assert message["usage"] == {
        "input_tokens": 100,
        "output_tokens": 42,
        "cache_read_input_tokens": 64,
        "cache_creation_input_tokens": 0,
    }


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_sdk_accumulates_the_same_message(name: str) -> None:
    events, _ = SCENARIOS[name]
    raw, s = stream(events, stop="tool_use")
    message = sdk_stream(raw)
    assert message["content"] == s.content
    assert message["id"] == "msg_test"
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["output_tokens"] == 42
    assert message["usage"]["input_tokens"] == 100
    assert message["usage"]["cache_read_input_tokens"] == 64


def test_message_start_matches_the_api() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    [start] = parse_sse(s.start(input_tokens=7, cache_read_input_tokens=3))
    assert start == {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 7,
                "output_tokens": 1,
                "cache_read_input_tokens": 3,
                "cache_creation_input_tokens": 0,
            },
        },
    }


def test_whitespace_is_held_until_text_arrives() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    s.start(0, 0)
    assert s.event(TextDelta(index=0, text="\n")) == b""
    assert s.event(TextDelta(index=0, text=" ")) == b""
    wire = parse_sse(s.event(TextDelta(index=0, text="x")))
    assert [e["type"] for e in wire] == ["content_block_start", "content_block_delta"]
    assert wire[1]["delta"] == {"type": "text_delta", "text": "\n x"}
    assert s.event(TextComplete(index=0, text="\n x")) == sse(
        "content_block_stop", {"type": "content_block_stop", "index": 0}
    )


def test_thinking_closes_with_the_signature_of_its_text() -> None:
    raw, _ = stream(thinking(0, "a", "b"))
    wire = parse_sse(raw)
    assert [e["type"] for e in wire] == [
        "message_start",
        *["content_block_start"] + ["content_block_delta"] * 3 + ["content_block_stop"],
        "ping",
        "message_delta",
        "message_stop",
    ]
    assert wire[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert wire[4]["delta"] == {"type": "signature_delta", "signature": sign("ab")}


def test_tool_input_is_sent_once_complete_by_default() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    raw = s.start(0, 0) + b"".join(s.event(e) for e in call(0, "f", {"q": "é"}, '{"q": ', '"é"}'))
    wire = parse_sse(raw)
    deltas = [e["delta"] for e in wire if e["type"] == "content_block_delta"]
    assert deltas == [{"type": "input_json_delta", "partial_json": '{"q":"é"}'}]
    assert wire[1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_" + "0".zfill(24),
        "name": "f",
        "input": {},
    }


def test_live_arguments_forward_each_delta() -> None:
    raw, _ = stream(call(0, "f", {"q": 1}, '{"q"', ": 1}"), live_arguments=True)
    deltas = [e["delta"] for e in parse_sse(raw) if e["type"] == "content_block_delta"]
    assert [d["partial_json"] for d in deltas] == ['{"q"', ": 1}"]


def test_live_arguments_of_a_call_without_deltas_are_sent_whole() -> None:
    raw, _ = stream(call(0, "f", {"q": 1}), live_arguments=True)
    deltas = [e["delta"] for e in parse_sse(raw) if e["type"] == "content_block_delta"]
    assert deltas == [{"type": "input_json_delta", "partial_json": '{"q":1}'}]


def test_live_arguments_of_a_malformed_call_break_the_sdk() -> None:
    """Why arguments are buffered by default: the SDK parses every delta as partial JSON."""
    events = call(0, "f", {}, '{"b": 1,', ",}", error="invalid JSON")
    raw, _ = stream(events, live_arguments=True)
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        sdk_stream(raw)
    assert sdk_stream(stream(events)[0])["content"][0]["input"] == {}


def test_finish_closes_an_open_call_with_empty_input() -> None:
    message = streamed(call(0, "sh", {}, '{"cmd": "ls', complete=False))
    assert message["content"][0]["input"] == {}


def test_a_late_event_for_a_closed_block_is_ignored() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    s.start(0, 0)
    s.event(TextDelta(index=0, text="a"))
    s.event(TextDelta(index=1, text="b"))  # closes block 0 on the wire
    assert s.event(TextComplete(index=0, text="a")) == b""
    assert [b["text"] for b in s.content] == ["a", "b"]


def test_misuse_is_an_error() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    with pytest.raises(RuntimeError):
        s.event(TextDelta(index=0, text="a"))
    s.start(0, 0)
    s.event(TextDelta(index=0, text="a"))
    with pytest.raises(ValueError, match="block 0 is text"):
        s.event(ReasoningDelta(index=0, text="b"))
    s.finish("end_turn", 1)
    with pytest.raises(RuntimeError):
        s.finish("end_turn", 1)


def test_stop_sequence() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    s.start(0, 0)
    wire = parse_sse(s.finish("stop_sequence", 3, stop_sequence="END"))
    assert wire[0] == {
        "type": "message_delta",
        "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
        "usage": {"output_tokens": 3},
    }


def test_error_event() -> None:
    s = MessageStream(message_id="msg_1", model=MODEL, sign=sign)
    raw = s.start(0, 0) + s.event(TextDelta(index=0, text="a")) + s.error("api_error", "boom")
    assert parse_sse(raw)[-1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "boom"},
    }
    import anthropic

    with pytest.raises(anthropic.APIStatusError, match="boom"):
        sdk_stream(raw)


def test_sse_framing_keeps_unicode() -> None:
    assert (
        sse("ping", {"type": "ping", "x": "é"})
        == 'event: ping\ndata: {"type":"ping","x":"é"}\n\n'.encode()
    )


@pytest.mark.parametrize(
    ("finish", "calls", "sequence", "expected"),
    [
        ("stop", False, None, "end_turn"),
        ("stop", True, None, "tool_use"),
        ("length", True, None, "tool_use"),
        ("length", False, None, "max_tokens"),
        ("stop", False, "###", "stop_sequence"),
    ],
)
def test_stop_reason(finish: str, calls: bool, sequence: str | None, expected: str) -> None:
    assert stop_reason(finish, calls, sequence) == expected


def test_errors() -> None:
    assert error_json("overloaded_error", "busy") == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    assert ERROR_STATUS["invalid_request_error"] == 400
    assert ERROR_STATUS["overloaded_error"] == 529
    assert len(ERROR_STATUS) == 8


def test_ids() -> None:
    assert re.fullmatch(r"msg_[0-9A-Za-z]{24}", new_message_id())
    assert re.fullmatch(r"toolu_[0-9A-Za-z]{24}", new_tool_use_id())
    assert new_tool_use_id() != new_tool_use_id()


# -- the parser, the stream and the JSON body agree --------------------------------------

RAW_TURN = (
    "<think>\nI will look.\n</think>\n\n"
    '<tool_call>\n{"name": "ls", "arguments": {"path": "/tmp"}}\n</tool_call>\n'
    "<think>Then read.</think>\n  \n"
    '<tool_call>\n{"name": "read", "arguments": {"file": "a",,}}\n</tool_call>'
)


def parsed_turn(pieces: Iterable[str]) -> tuple[list[ParseEvent], Message]:
    ids = iter(f"toolu_{n:024d}" for n in range(100))
    parser = create_parser("qwen3", "hermes", id_factory=lambda: next(ids))
    events = [e for piece in pieces for e in parser.feed(piece)]
    events += parser.finish()
    return events, Message(role="assistant", content=parser.blocks)


def body(message: Message, **kwargs: Any) -> dict[str, Any]:
    return message_json(
        message_id="msg_test",
        model=MODEL,
        message=message,
        stop_reason="tool_use",
        input_tokens=100,
        output_tokens=42,
        cache_read_input_tokens=64,
        sign=sign,
        **kwargs,
    )


@pytest.mark.parametrize("size", [1, 3, len(RAW_TURN)])
def test_stream_and_body_agree_on_a_parsed_turn(size: int) -> None:
    events, message = parsed_turn(RAW_TURN[i : i + size] for i in range(0, len(RAW_TURN), size))
    streamed_message = streamed(events, stop="tool_use")
    json_body = body(message)
    assert json_body == streamed_message
    assert [b["type"] for b in json_body["content"]] == [
        "thinking",
        "tool_use",
        "thinking",
        "tool_use",
    ]
    assert json_body["content"][1]["input"] == {"path": "/tmp"}
    assert json_body["content"][3]["input"] == {}  # the malformed call


def test_the_sdk_reads_the_body() -> None:
    _, message = parsed_turn([RAW_TURN])
    json_body = body(message, stop_sequence=None)
    assert sdk_create(json_body) == {k: v for k, v in json_body.items() if v is not None}
    import anthropic

    anthropic.types.Message.model_validate(json_body)


def test_body_drops_whitespace_text() -> None:
    _, message = parsed_turn(["Hi.\n\n"])
    message.content.append(message.content[0].model_copy(update={"text": " \n"}))
    assert body(message)["content"] == [{"type": "text", "text": "Hi.\n\n"}]


# -- any split, the same message ---------------------------------------------------------

_TEXT = st.text(alphabet=st.sampled_from("ab é\n"), min_size=0, max_size=12)


@st.composite
def _turn(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[list[int]]]:
    """Blocks as (kind, text) and, per block, where its text is cut into deltas."""
    kinds = draw(st.lists(st.sampled_from(["thinking", "text", "call"]), max_size=6))
    blocks: list[tuple[str, str]] = []
    for kind in kinds:
        if kind == "call":
            arguments = {"k": draw(_TEXT)}
            blocks.append((kind, json.dumps(arguments, ensure_ascii=False)))
        else:
            blocks.append((kind, draw(_TEXT)))
    cuts = [
        sorted(draw(st.sets(st.integers(1, max(1, len(t) - 1)), max_size=len(t))))
        for _, t in blocks
    ]
    return blocks, cuts


def _split(value: str, cuts: list[int]) -> list[str]:
    bounds = [0, *(c for c in cuts if c < len(value)), len(value)]
    return [value[a:b] for a, b in itertools.pairwise(bounds) if value[a:b]]


def _events(blocks: list[tuple[str, str]], cuts: list[list[int]]) -> list[ParseEvent]:
    builders: dict[str, Callable[..., list[ParseEvent]]] = {"thinking": thinking, "text": text}
    events: list[ParseEvent] = []
    for index, ((kind, value), where) in enumerate(zip(blocks, cuts, strict=True)):
        pieces = _split(value, where)
        if kind == "call":
            events += call(index, "f", json.loads(value), *pieces)
        else:
            events += builders[kind](index, *pieces)
    return events


@settings(max_examples=200, deadline=None)
@given(turn=_turn(), live=st.booleans())
def test_any_split_gives_the_same_message(
    turn: tuple[list[tuple[str, str]], list[list[int]]], live: bool
) -> None:
    blocks, cuts = turn
    whole = streamed(_events(blocks, [[] for _ in blocks]))
    split = streamed(_events(blocks, cuts), live_arguments=live)
    assert split == whole
    kept = [(k, v) for k, v in blocks if k == "call" or (v and not v.isspace())]
    assert len(whole["content"]) == len(kept)
