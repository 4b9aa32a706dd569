"""``POST /v1/responses`` end to end, with the official ``openai`` SDK as the client.

A real uvicorn server runs in a thread with a tokenizing scripted engine (Qwen3's format), as
in ``test_server_sdk.py``; requests are shaped like Codex's (``store: false``, a developer
message for the base prompt, ``include: ["reasoning.encrypted_content"]``, reasoning sent
back with ``content: null``).
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from _harness import running
from openai.types.responses import Response

from agentkit.engine import ScriptedOutput, TokenizedScriptedEngine
from agentkit.errors import EngineError
from agentkit.profiles import get_profile
from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer, SealError, load_sealing_key

QWEN3 = get_profile("qwen3")
KEY = "test-key"
SEAL_KEY = b"s" * 32
MODEL = "org/served-model"
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
}
NAMESPACE = {
    "type": "namespace",
    "name": "mcp__fs",
    "description": "A file server.",
    "tools": [
        {
            "type": "function",
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ],
}


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@contextmanager
def serve(
    outputs: Sequence[Any],
    tmp_path: Path,
    *,
    seal_key: bytes = SEAL_KEY,
    unverifiable: Any = "reject",
    **config: Any,
) -> Iterator[tuple[str, TokenizedScriptedEngine]]:
    engine = TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])
    runtime = ServerRuntime(
        engine, QWEN3, log_prompts=tmp_path / "prompts", id_factory=new_tool_use_id
    )
    factory = responses_routes_factory(Sealer(seal_key), unverifiable_reasoning=unverifiable)
    settings = {"model_name": MODEL, "api_key": KEY, **config}
    app = create_app(runtime, ServerConfig(**settings), adapters=[factory])
    with running(app) as url:
        yield url, engine


@contextmanager
def sdk(url: str) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
    try:
        yield client
    finally:
        client.close()


def codex_request(input_items: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A request body shaped like Codex's."""
    return {
        "model": MODEL,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "You are Codex."}],
            },
            *input_items,
        ],
        "tools": [SHELL, {"type": "web_search", "external_web_access": False}],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
        "text": {"verbosity": "medium"},
        "client_metadata": {"x-codex-turn": "1"},
        **extra,
    }


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def events_of(url: str, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    """The data of each server-sent event of a streamed request."""
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}", **headers}) as h:
        response = h.post("/v1/responses", json=body)
        assert response.status_code == 200, response.text
    return [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def as_input(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as Codex sends it back: reasoning without its content."""
    if item["type"] == "reasoning":
        return {**item, "content": None}
    return item


FIRST = (
    "<think>\nList it first.\n</think>\n\n"
    + call("shell", command="ls")
    + "\n<think>\nAnd the other.\n</think>\n\n"
    + call("shell", command="pwd")
)


def test_streaming_function_calls_with_the_sdk(tmp_path: Path) -> None:
    with serve([FIRST], tmp_path) as (url, engine), sdk(url) as client:
        body = codex_request([user("List files.")])
        body.pop("stream")
        extra = {k: body.pop(k) for k in ("client_metadata", "text")}
        kinds: list[str] = []
        sequence: list[int] = []
        with client.responses.stream(**body, extra_body=extra) as stream:
            for event in stream:
                kinds.append(event.type)
                sequence.append(event.sequence_number)
            final = stream.get_final_response()
        assert sequence == list(range(len(sequence)))
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        for kind in (
            "response.reasoning_text.delta",
            "response.reasoning_summary_text.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ):
            assert kind in kinds
        Response.model_validate(final.model_dump())
        assert [item.type for item in final.output] == [
            "reasoning",
            "function_call",
            "reasoning",
            "function_call",
        ]
        calls = [item for item in final.output if item.type == "function_call"]
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            ("shell", {"command": "ls"}),
            ("shell", {"command": "pwd"}),
        ]
        assert all(c.call_id.startswith("call_") for c in calls)
        reasoning = final.output[0]
        assert reasoning.type == "reasoning"
        assert reasoning.encrypted_content is not None
        assert reasoning.encrypted_content.startswith("aks1.")
        assert reasoning.summary[0].text.strip() == "List it first."
        assert reasoning.content is not None
        assert reasoning.content[0].text.strip() == "List it first."
        usage = final.usage
        assert usage is not None
        assert usage.output_tokens == len(engine.encode(FIRST)) + 1
        assert 0 < usage.output_tokens_details.reasoning_tokens < usage.output_tokens
        assert usage.total_tokens == usage.input_tokens + usage.output_tokens
        # The hosted web_search tool was dropped, not refused; the developer message leads.
        (request,) = engine.requests
        assert "web_search" not in request.prompt
        assert request.prompt.startswith("<|im_start|>system\nYou are Codex.")


def test_a_round_trip_with_only_encrypted_reasoning_replays_exact_tokens(tmp_path: Path) -> None:
    second = "<think>\nBoth done.\n</think>\n\nThey are a and b."
    history: list[dict[str, Any]] = [user("List and locate.")]
    with serve([FIRST], tmp_path / "1") as (url, engine1):
        events = events_of(url, codex_request(history))
        prompt1 = engine1.requests[0].prompt_token_ids
    # Codex records items as their `output_item.done` events arrive, in that order.
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [d["type"] for d in done] == ["reasoning", "function_call"] * 2
    history += [as_input(item) for item in done]
    calls = [d for d in done if d["type"] == "function_call"]
    history += [
        {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "a"},
        {"type": "function_call_output", "call_id": calls[1]["call_id"], "output": "b"},
    ]
    # A restarted server (same sealing key, empty turn store) restores the turn exactly.
    with serve([second], tmp_path / "2") as (url, engine2), sdk(url) as client:
        body = codex_request(history)
        body.update(stream=False)
        extra = {k: body.pop(k) for k in ("client_metadata", "text")}
        final = client.responses.create(**body, extra_body=extra)
        assert final.output_text == "They are a and b."
        (request,) = engine2.requests
    assert prompt1 is not None
    assert request.prompt_token_ids is not None
    generated = engine2.encode(FIRST) + engine2.encode(QWEN3.stop[0])
    prefix = [*prompt1, *generated]
    assert request.prompt_token_ids[: len(prefix)] == prefix
    rest = engine2.decode(request.prompt_token_ids[len(prefix) :])
    assert rest.index("a") < rest.index("b")
    assert rest.endswith("<|im_start|>assistant\n")
    assert final.usage is not None
    assert final.usage.input_tokens_details.cached_tokens == 0  # a new engine: nothing cached


def test_tampered_or_foreign_encrypted_content(tmp_path: Path) -> None:
    with serve([FIRST], tmp_path / "1") as (url, _):
        events = events_of(url, codex_request([user("go")]))
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    calls = [d for d in done if d["type"] == "function_call"]
    outputs = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": "x"} for c in calls
    ]

    def history(first_reasoning: dict[str, Any]) -> list[dict[str, Any]]:
        return [user("go"), first_reasoning, *[as_input(d) for d in done[1:]], *outputs]

    token = done[0]["encrypted_content"]
    flipped = token[:20] + ("A" if token[20] != "A" else "B") + token[21:]
    tampered = {**as_input(done[0]), "encrypted_content": flipped}
    with serve(["ok"], tmp_path / "2") as (url, _), sdk(url) as client:
        with pytest.raises(openai.BadRequestError, match="altered") as bad:
            client.responses.create(model=MODEL, input=history(tampered))  # type: ignore[arg-type]
        assert bad.value.body["param"] == "input.1.encrypted_content"  # type: ignore[index]
    # Another server's key: refused as foreign, or ignored on request.
    with (
        serve(["ok"], tmp_path / "3", seal_key=b"o" * 32) as (url, _),
        sdk(url) as client,
        pytest.raises(openai.BadRequestError, match="another key"),
    ):
        client.responses.create(model=MODEL, input=history(as_input(done[0])))  # type: ignore[arg-type]
    with (
        serve(["ok"], tmp_path / "4", seal_key=b"o" * 32, unverifiable="ignore") as (
            url,
            engine,
        ),
        sdk(url) as client,
    ):
        answer = client.responses.create(model=MODEL, input=history(as_input(done[0])))  # type: ignore[arg-type]
        assert answer.output_text == "ok"
        (request,) = engine.requests
        # The summary stands in for the reasoning it could not open.
        assert "<think>\nList it first.\n</think>" in request.prompt


def test_compressed_request_bodies(tmp_path: Path) -> None:
    import zstandard  # a dev dependency: a missing one fails the test, never skips it

    with serve(["one", "two", "three"], tmp_path) as (url, engine):
        body = json.dumps({"model": MODEL, "input": "hi", "stream": False}).encode()
        headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
        with httpx.Client(base_url=url, headers=headers) as http:
            for encoding, data in (
                ("gzip", gzip.compress(body)),
                ("zstd", zstandard.ZstdCompressor().compress(body)),
            ):
                response = http.post(
                    "/v1/responses", content=data, headers={"content-encoding": encoding}
                )
                assert response.status_code == 200, response.text
                Response.model_validate(response.json())
            unknown = http.post("/v1/responses", content=body, headers={"content-encoding": "br"})
            assert unknown.status_code == 415
            assert "br" in unknown.json()["error"]["message"]
            broken = http.post(
                "/v1/responses", content=b"\x1f\x8b garbage", headers={"content-encoding": "gzip"}
            )
            assert broken.status_code == 400
        assert len(engine.requests) == 2


def test_custom_and_namespace_tools_map_both_ways(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** End Patch"
    output = call("apply_patch", input=patch) + "\n" + call("mcp__fs__read", path="/a")
    with serve([output, "done"], tmp_path) as (url, engine), sdk(url) as client:
        tools: Any = [APPLY_PATCH, NAMESPACE, {"type": "image_generation"}]
        first = client.responses.create(model=MODEL, input="patch it", tools=tools)
        custom, function = first.output
        assert custom.type == "custom_tool_call"
        assert (custom.name, custom.input) == ("apply_patch", patch)
        assert function.type == "function_call"
        assert (function.name, function.namespace) == ("read", "mcp__fs")
        assert json.loads(function.arguments) == {"path": "/a"}
        prompt = engine.requests[0].prompt
        assert '"name": "mcp__fs__read"' in prompt
        assert "lark grammar" in prompt
        history: Any = [
            {"role": "user", "content": "patch it"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "custom_tool_call_output", "call_id": custom.call_id, "output": "patched"},
            {
                "type": "function_call_output",
                "call_id": function.call_id,
                "id": "fco_nonstandard",
                "output": [{"type": "input_text", "text": "contents"}],
            },
        ]
        client.responses.create(model=MODEL, input=history, tools=tools)
        first_ids = engine.requests[0].prompt_token_ids
        second_ids = engine.requests[1].prompt_token_ids
        assert first_ids is not None
        assert second_ids is not None
        assert second_ids[: len(first_ids)] == first_ids  # restored from the turn store
        assert "patched" in engine.requests[1].prompt
        assert "contents" in engine.requests[1].prompt


def test_parallel_tool_calls_and_tool_choice(tmp_path: Path) -> None:
    with (
        serve([FIRST, "a", call("shell", command="ls")], tmp_path) as (url, engine),
        sdk(url) as client,
    ):
        response = client.responses.create(
            model=MODEL,
            input="go",
            tools=[SHELL],  # type: ignore[list-item]
            parallel_tool_calls=False,
        )
        assert [item.type for item in response.output] == ["reasoning", "function_call"]
        # A hosted tool's choice falls back to "auto"; a function's is the model's name for it.
        for choice in ({"type": "web_search"}, {"type": "function", "name": "shell"}):
            client.responses.create(
                model=MODEL,
                input="go",
                tools=[SHELL, NAMESPACE],  # type: ignore[list-item]
                tool_choice=choice,  # type: ignore[arg-type]
            )
        assert engine.requests[1].extra == {}
        assert "structured_outputs" in engine.requests[2].extra
        with pytest.raises(openai.BadRequestError, match="not in tools"):
            client.responses.create(
                model=MODEL,
                input="go",
                tools=[SHELL],  # type: ignore[list-item]
                tool_choice={"type": "function", "name": "missing"},
            )


def test_max_output_tokens_and_plain_text(tmp_path: Path) -> None:
    outputs = [ScriptedOutput.of("cut sho", finish_reason="length"), "Hello there."]
    with serve(outputs, tmp_path) as (url, engine), sdk(url) as client:
        cut = client.responses.create(model=MODEL, input="hi", max_output_tokens=5)
        assert cut.status == "incomplete"
        assert cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens"
        assert engine.requests[0].max_tokens == 5
        events = events_of(
            url, {"model": MODEL, "input": "hi", "stream": True, "instructions": "Be brief."}
        )
        kinds = [e["type"] for e in events]
        assert kinds == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            *["response.output_text.delta"] * kinds.count("response.output_text.delta"),
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        final = Response.model_validate(events[-1]["response"])
        assert final.output_text == "Hello there."
        assert engine.requests[1].prompt.startswith("<|im_start|>system\nBe brief.")


def test_errors_failures_and_the_websocket_probe(tmp_path: Path) -> None:
    outputs = [ScriptedOutput(["partial ", EngineError("the engine died")])]
    with serve(outputs, tmp_path) as (url, _), sdk(url) as client:
        events = events_of(url, {"model": MODEL, "input": "hi", "stream": True})
        assert events[-1]["type"] == "response.failed"
        assert events[-1]["response"]["error"]["message"] == "the engine died"
        with pytest.raises(openai.NotFoundError, match="resp_1"):
            client.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
        with pytest.raises(openai.BadRequestError, match="item_reference"):
            client.responses.create(model=MODEL, input=[{"type": "item_reference", "id": "x"}])
        with pytest.raises(openai.AuthenticationError):
            client.with_options(api_key="wrong").responses.create(model=MODEL, input="hi")
        started = time.monotonic()
        probe = httpx.get(
            url + "/v1/responses",
            headers={"connection": "upgrade", "upgrade": "websocket"},
        )
        assert probe.status_code == 426
        assert time.monotonic() - started < 2


def test_the_sealing_key_is_created_once_and_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTKIT_SEALING_KEY", raising=False)
    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path))
    key = load_sealing_key()
    path = tmp_path / "sealing.key"
    assert path.read_bytes() == key
    assert len(key) == 32
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_sealing_key() == key
    monkeypatch.setenv("AGENTKIT_SEALING_KEY", "an operator's configured key")
    assert load_sealing_key() == b"an operator's configured key"


@pytest.mark.parametrize("scheme", ["aes-gcm", "hmac"])
def test_both_sealing_schemes_open_each_other(scheme: Any) -> None:
    sealer, stdlib = Sealer(SEAL_KEY, scheme=scheme), Sealer(SEAL_KEY, scheme="hmac")
    token = sealer.seal(b"secret reasoning", purpose=b"p")
    assert b"secret" not in token.encode()
    assert stdlib.open(token, purpose=b"p") == b"secret reasoning"
    with pytest.raises(SealError) as wrong_purpose:
        sealer.open(token, purpose=b"q")
    assert wrong_purpose.value.reason == "tampered"
    with pytest.raises(SealError) as foreign:
        Sealer(b"x" * 32, scheme="hmac").open(token, purpose=b"p")
    assert foreign.value.reason == "foreign"
    with pytest.raises(SealError) as malformed:
        sealer.open("gAAAAABopenai", purpose=b"p")
    assert malformed.value.reason == "malformed"
