"""The same scripted turns through ``agentkit serve`` and through Dynamo's own frontend.

Both front doors drive the same Dynamo deployment (two script workers behind the KV-aware
router, see ``tests/e2e/_dynamo_worker.py``), which streams the same raw model output
(Qwen3 markup: reasoning, then two Hermes tool calls; then a final answer) at a fixed pace:

* **agentkit**: the agentkit server app (as ``agentkit serve`` builds it) on
  ``RemoteEngine(flavor="dynamo")``: agentkit renders the prompt, parses the stream and
  adapts it to each wire API;
* **dynamo**: Dynamo's frontend (``--enable-anthropic-api --enable-streaming-tool-dispatch``)
  with its own chat template rendering, its ``qwen3`` reasoning parser and ``hermes`` tool
  parser (set on the workers) and its Anthropic / Responses / Chat adapters.

For each it measures, in one run: when each tool call is complete on the wire (Anthropic
``content_block_stop`` of a ``tool_use``, Chat ``tool_call_dispatch`` events, Responses
``function_call`` items done) against the end of the stream, ``message_start`` input tokens
next to ``/v1/messages/count_tokens``, whether thinking blocks carry a signature and whether
a Responses reasoning item carries ``encrypted_content``, and the second turn's input and
cached tokens when the client sends the first turn back.

Run (root, or with unprivileged user namespaces; Dynamo installed by
``scripts/dynamo_setup.sh``):

    .venv/bin/python bench/dynamo_side_by_side.py [--json out.json]

It re-runs itself inside ``unshare -n`` (Dynamo's ZMQ sockets bind 0.0.0.0) and prints a
Markdown table; ``docs/dynamo-side-by-side.md`` holds one run's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "tests" / "slow")]

TOKEN_DELAY = 0.03
"""Seconds per output token on the workers: the stream is slow enough to see when each tool
call leaves the server."""

CALL_A = '<tool_call>\n{"name": "lookup", "arguments": {"q": "a"}}\n</tool_call>'
CALL_B = '<tool_call>\n{"name": "lookup", "arguments": {"q": "b"}}\n</tool_call>'
SCRIPT = [
    "<think>I will look up a, then b.</think>\n\n" + CALL_A + "\n" + CALL_B,
    "<think>Both found.</think>\n\nThe results are result-a and result-b.",
]
QUESTION = "Look up a and b."
TOOL_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
ANTHROPIC_TOOLS = [{"name": "lookup", "description": "Look q up.", "input_schema": TOOL_SCHEMA}]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {"name": "lookup", "description": "Look q up.", "parameters": TOOL_SCHEMA},
    }
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "lookup", "description": "Look q up.", "parameters": TOOL_SCHEMA}
]
SERVED = "tiny"
HEADERS = {"x-api-key": "side-by-side", "anthropic-version": "2023-06-01"}


def events(client: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed response's events: ``{"t": seconds, "event": name, "data": payload}``."""
    out: list[dict[str, Any]] = []
    started = time.perf_counter()
    name = ""
    with client.stream("POST", path, json=body, headers=HEADERS) as response:
        if response.status_code != 200:
            response.read()
            return [{"t": 0.0, "event": "http_error", "data": response.text[:500]}]
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                raw = line[len("data:") :].strip()
                data: Any = raw if raw == "[DONE]" else json.loads(raw)
                kind = name or (data.get("type", "") if isinstance(data, dict) else "")
                out.append({"t": time.perf_counter() - started, "event": kind, "data": data})
                name = ""
    return out


def anthropic_turns(client: httpx.Client) -> dict[str, Any]:
    first = {
        "model": SERVED,
        "max_tokens": 512,
        "stream": True,
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    stream = events(client, "/v1/messages", first)
    result: dict[str, Any] = {"stream": summarise_anthropic(stream)}
    counted = client.post(
        "/v1/messages/count_tokens",
        json={k: v for k, v in first.items() if k not in ("stream", "max_tokens")},
        headers=HEADERS,
    )
    result["count_tokens"] = (
        counted.json().get("input_tokens") if counted.status_code == 200 else counted.status_code
    )
    blocks = assistant_blocks(stream)
    uses = [b for b in blocks if b["type"] == "tool_use"]
    second = {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u["id"], "content": f"result-{i}"}
                    for i, u in zip("ab", uses, strict=False)
                ],
            },
        ],
    }
    result["second"] = summarise_anthropic(events(client, "/v1/messages", second))
    return result


def assistant_blocks(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant message a client rebuilds from the stream (to send it back)."""
    blocks: list[dict[str, Any]] = []
    for event in stream:
        data = event["data"]
        if event["event"] == "content_block_start":
            block = dict(data["content_block"])
            if block["type"] == "tool_use":
                block["input"] = ""
            blocks.append(block)
        elif event["event"] == "content_block_delta":
            delta, block = data["delta"], blocks[-1]
            kind = delta["type"]
            if kind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif kind == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif kind == "input_json_delta":
                block["input"] += delta["partial_json"]
    for block in blocks:
        if block["type"] == "tool_use":
            block["input"] = json.loads(block["input"] or "{}")
    return blocks


def summarise_anthropic(stream: list[dict[str, Any]]) -> dict[str, Any]:
    if stream and stream[0]["event"] == "http_error":
        return {"error": stream[0]["data"]}
    start = next(e for e in stream if e["event"] == "message_start")
    end = next((e["t"] for e in stream if e["event"] == "message_stop"), stream[-1]["t"])
    usage = start["data"]["message"].get("usage", {})
    kinds: dict[int, str] = {}
    tool_stops: list[float] = []
    signatures: list[bool] = []
    signed: set[int] = set()
    signature_sample = ""
    for event in stream:
        data = event["data"]
        if event["event"] == "content_block_start":
            kinds[data["index"]] = data["content_block"]["type"]
            if data["content_block"].get("signature"):
                signed.add(data["index"])
        elif event["event"] == "content_block_delta":
            if data["delta"]["type"] == "signature_delta" and data["delta"]["signature"]:
                signed.add(data["index"])
                signature_sample = data["delta"]["signature"][:40]
        elif event["event"] == "content_block_stop":
            kind = kinds.get(data["index"])
            if kind == "tool_use":
                tool_stops.append(round(end - event["t"], 3))
            elif kind == "thinking":
                signatures.append(data["index"] in signed)
    delta_usage = next(
        (e["data"].get("usage", {}) for e in stream if e["event"] == "message_delta"), {}
    )
    return {
        "blocks": [kinds[i] for i in sorted(kinds)],
        "message_start_input_tokens": usage.get("input_tokens"),
        "final_input_tokens": delta_usage.get("input_tokens", usage.get("input_tokens")),
        "cache_read_input_tokens": delta_usage.get(
            "cache_read_input_tokens", usage.get("cache_read_input_tokens")
        ),
        "tool_use_stop_before_end_s": tool_stops,
        "thinking_signed": signatures,
        "signature_sample": signature_sample,
        "stream_s": round(end, 3),
    }


def chat_turn(client: httpx.Client) -> dict[str, Any]:
    body = {
        "model": SERVED,
        "max_tokens": 512,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": OPENAI_TOOLS,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    stream = events(client, "/v1/chat/completions", body)
    if stream and stream[0]["event"] == "http_error":
        return {"error": stream[0]["data"]}
    end = stream[-1]["t"]
    dispatch = [round(end - e["t"], 3) for e in stream if "dispatch" in e["event"]]
    dispatch_events = [e["data"] for e in stream if "dispatch" in e["event"]]
    calls: dict[int, float] = {}
    for e in stream:
        data = e["data"]
        if not isinstance(data, dict):
            continue
        for choice in data.get("choices") or ():
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                calls[int(call.get("index", 0))] = e["t"]  # the call's last fragment
    return {
        "dispatch_events_before_end_s": dispatch,
        "dispatch_events": dispatch_events,
        "last_tool_call_fragment_before_end_s": [round(end - t, 3) for t in calls.values()],
        "stream_s": round(end, 3),
    }


def responses_turn(client: httpx.Client) -> dict[str, Any]:
    body = {
        "model": SERVED,
        "stream": True,
        "tools": RESPONSES_TOOLS,
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "input": [{"role": "user", "content": QUESTION}],
    }
    stream = events(client, "/v1/responses", body)
    if stream and stream[0]["event"] == "http_error":
        return {"error": stream[0]["data"]}
    end = stream[-1]["t"]
    done = [e for e in stream if e["event"] == "response.output_item.done"]
    items = [e["data"]["item"] for e in done]
    return {
        "items": [item["type"] for item in items],
        "function_call_done_before_end_s": [
            round(end - e["t"], 3) for e in done if e["data"]["item"]["type"] == "function_call"
        ],
        "reasoning_encrypted_content": [
            bool(item.get("encrypted_content")) for item in items if item["type"] == "reasoning"
        ],
        "stream_s": round(end, 3),
    }


def measure(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=60) as client:
        return {
            "anthropic": anthropic_turns(client),
            "chat": chat_turn(client),
            "responses": responses_turn(client),
        }


@contextmanager
def agentkit_server(dynamo_url: str, model: Path) -> Iterator[str]:
    """The agentkit server app (as ``agentkit serve --remote`` builds it) on RemoteEngine's
    Dynamo flavor, in a thread."""
    import uvicorn
    from _dynamo_deploy import free_port

    from agentkit._hf_tokenizer import load_hf_tokenizer
    from agentkit.engine import RemoteEngine
    from agentkit.server._serve import ServeOptions, build_app, uvicorn_config

    engine = RemoteEngine(
        dynamo_url,
        model=SERVED,
        tokenizer=load_hf_tokenizer(str(model), owner="--tokenizer"),
        flavor="dynamo",
    )
    options = ServeOptions(
        model=SERVED,
        profile="qwen3",
        served_model_name=SERVED,
        engine=engine,
        streaming_tool_dispatch=True,
        signing_key=b"side-by-side",
        turn_store=None,
    )
    app, _, _ = build_app(options)
    port = free_port()
    server = uvicorn.Server(
        uvicorn_config(app, options, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def run(out: Path | None) -> dict[str, Any]:
    from _dynamo_deploy import deployment, script_workers
    from _tiny_model import build_tiny_model

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="agentkit-side-by-side-") as tmp:
        work = Path(tmp)
        model = build_tiny_model(work / "model")
        script = work / "script.json"
        script.write_text(json.dumps(SCRIPT))
        workers = script_workers(
            model,
            script,
            work / "requests.jsonl",
            ("A", "B"),
            *("--delay", str(TOKEN_DELAY)),
            *("--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"),
        )
        frontend_args = ["--enable-anthropic-api", "--enable-streaming-tool-dispatch"]
        with deployment(work, workers, frontend_args=frontend_args) as dynamo_url:
            results = {"dynamo": measure(dynamo_url)}
            results["dynamo"]["worker_requests"] = worker_requests(work / "requests.jsonl")
            with agentkit_server(dynamo_url, model) as agentkit_url:
                results["agentkit"] = measure(agentkit_url)
            every = worker_requests(work / "requests.jsonl")
            results["agentkit"]["worker_requests"] = every[
                len(results["dynamo"]["worker_requests"]) :
            ]
    if out is not None:
        out.write_text(json.dumps(results, indent=1))
    return results


def worker_requests(log: Path) -> list[dict[str, Any]]:
    """What the workers saw: worker, session, turn, prompt and cached tokens per request."""
    keys = ("worker", "turn", "prompt_tokens", "cached_tokens")
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [
        {**{k: row[k] for k in keys}, "session": (row["agent_context"] or {}).get("session_id")}
        for row in rows
    ]


def table(results: dict[str, Any]) -> str:
    rows = [
        ("Anthropic: blocks of turn 1", ("anthropic", "stream", "blocks")),
        (
            "Anthropic: tool_use stops, s before message_stop",
            ("anthropic", "stream", "tool_use_stop_before_end_s"),
        ),
        (
            "Anthropic: message_start input_tokens",
            ("anthropic", "stream", "message_start_input_tokens"),
        ),
        ("Anthropic: final input_tokens", ("anthropic", "stream", "final_input_tokens")),
        ("Anthropic: count_tokens", ("anthropic", "count_tokens")),
        ("Anthropic: thinking blocks signed", ("anthropic", "stream", "thinking_signed")),
        ("Anthropic turn 2: input_tokens", ("anthropic", "second", "final_input_tokens")),
        (
            "Anthropic turn 2: cache_read_input_tokens",
            ("anthropic", "second", "cache_read_input_tokens"),
        ),
        ("Anthropic turn 2: blocks", ("anthropic", "second", "blocks")),
        ("Chat: tool_call_dispatch events, s before end", ("chat", "dispatch_events_before_end_s")),
        (
            "Chat: last fragment of each call, s before end",
            ("chat", "last_tool_call_fragment_before_end_s"),
        ),
        ("Responses: items", ("responses", "items")),
        (
            "Responses: function_call done, s before end",
            ("responses", "function_call_done_before_end_s"),
        ),
        ("Responses: reasoning encrypted_content", ("responses", "reasoning_encrypted_content")),
        ("Turn 1 stream length, s (Anthropic)", ("anthropic", "stream", "stream_s")),
    ]

    def get(side: str, path: tuple[str, ...]) -> str:
        value: Any = results[side]
        for key in path:
            if not isinstance(value, dict):
                return "-"
            if "error" in value and key not in value:
                return f"error: {str(value['error'])[:60]}"
            value = value.get(key, "-")
        return json.dumps(value) if not isinstance(value, str) else value

    lines = ["| | agentkit serve | Dynamo frontend |", "|---|---|---|"]
    lines += [f"| {label} | {get('agentkit', p)} | {get('dynamo', p)} |" for label, p in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if os.environ.get("AGENTKIT_IN_NAMESPACE") != "1":
        command = [sys.executable, __file__, *sys.argv[1:]]
        env = {**os.environ, "AGENTKIT_IN_NAMESPACE": "1"}
        sys.exit(subprocess.call(["unshare", "-n", *command], env=env))
    print(table(run(args.json)))


if __name__ == "__main__":
    main()
