"""``GET /metrics``: Prometheus' text format, written by agentkit and read back with
``prometheus_client``'s own parser after requests of every wire format (streaming and not,
errors, Chat's dispatch side channel)."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import httpx
import pytest
from _harness import running
from _serving import HEADERS, MODEL, PATHS, Counting, body, build, sse_events
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from agentkit.server._metrics import _STATS, Counter, Histogram, ServerMetrics
from agentkit.server._stats import ServerStats

CALLS = (
    '<tool_call>\n{"name": "Read", "arguments": {"file_path": "a"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "Read", "arguments": {"file_path": "b"}}\n</tool_call>'
)
READ: Any = {
    "type": "function",
    "function": {
        "name": "Read",
        "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
}


def samples(text: str) -> dict[str, list[Sample]]:
    """Every sample, by metric family name, as ``prometheus_client`` parses ``text``."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(found: dict[str, list[Sample]], family: str, name: str, **labels: str) -> float:
    matching = [s.value for s in found[family] if s.name == name and s.labels == labels]
    assert len(matching) == 1, (name, labels, found[family])
    return matching[0]


def scrape(http: httpx.Client) -> dict[str, list[Sample]]:
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


def test_metrics_after_requests_of_every_api() -> None:
    engine = Counting(["One.", "Two.", "Three.", CALLS, "Five.", "Six."])
    with running(build(engine)) as url, httpx.Client(base_url=url, headers=HEADERS) as http:
        usage: list[dict[str, int]] = []
        first = http.post(PATHS["anthropic"], json=body("anthropic", stream=False))
        usage.append(first.json()["usage"])
        second = http.post(PATHS["anthropic"], json=body("anthropic", stream=False))
        usage.append(second.json()["usage"])
        assert http.post(PATHS["chat"], json=body("chat", stream=False)).status_code == 200
        chat = {**body("chat", stream=True), "tools": [READ]}
        dispatch = {"x-agentkit-dispatch": "1"}
        streamed = http.post(PATHS["chat"], json=chat, headers=dispatch)
        names = [name for name, _ in sse_events(streamed.content)]
        assert names.count("tool_call_dispatch") == 2
        assert http.post(PATHS["responses"], json=body("responses", stream=False)).is_success
        assert http.post(PATHS["responses"], json=body("responses", stream=True)).is_success
        assert http.post(PATHS["anthropic"], json={"model": MODEL}).status_code == 400
        assert http.get("/no/such/path").status_code == 404
        stats = http.get("/v1/stats").json()
        found = scrape(http)

    requests = "agentkit_http_requests"
    for route, status, count in [
        ("/v1/messages", "200", 2),
        ("/v1/messages", "400", 1),
        ("/v1/chat/completions", "200", 2),
        ("/v1/responses", "200", 2),
        ("unmatched", "404", 1),
        ("/v1/stats", "200", 1),
    ]:
        method = "GET" if route in ("unmatched", "/v1/stats") else "POST"
        labels = {"route": route, "method": method, "status": status}
        assert value(found, requests, f"{requests}_total", **labels) == count
    # The scrape itself is the one request in flight; no model turn is.
    assert value(found, "agentkit_http_requests_in_flight", "agentkit_http_requests_in_flight") == 1
    assert value(found, "agentkit_turns_in_flight", "agentkit_turns_in_flight") == 0

    ttft = "agentkit_time_to_first_token_seconds"
    assert value(found, ttft, f"{ttft}_count") == 6
    assert value(found, ttft, f"{ttft}_bucket", le="+Inf") == 6
    dispatch_latency = "agentkit_tool_dispatch_latency_seconds"
    assert value(found, dispatch_latency, f"{dispatch_latency}_count") == 2
    assert value(found, dispatch_latency, f"{dispatch_latency}_sum") > 0

    prompt = value(found, "agentkit_prompt_tokens", "agentkit_prompt_tokens_total")
    output = value(found, "agentkit_output_tokens", "agentkit_output_tokens_total")
    prompts = [u["input_tokens"] + (u.get("cache_read_input_tokens") or 0) for u in usage]
    assert prompt >= sum(prompts) > 0
    assert output >= sum(u["output_tokens"] for u in usage) > 0
    ratio = "agentkit_cached_prompt_ratio"
    assert value(found, ratio, f"{ratio}_count") == 6
    for field, metric in _STATS.items():
        family = metric.removesuffix("_total")
        assert value(found, family, metric) == stats[field]


def test_token_counters_equal_what_the_responses_reported() -> None:
    engine = Counting(["A first answer.", "A second, longer answer than the first."])
    conversation = body("anthropic", stream=False, text="the same long question " * 20)
    with running(build(engine)) as url, httpx.Client(base_url=url, headers=HEADERS) as http:
        usage = [http.post(PATHS["anthropic"], json=conversation).json()["usage"] for _ in "ab"]
        found = scrape(http)
    # Anthropic's input_tokens leave out what the cache served: with it, the whole prompt.
    prompts = [u["input_tokens"] + (u.get("cache_read_input_tokens") or 0) for u in usage]
    assert usage[1].get("cache_read_input_tokens"), "the second request hits the cache"
    assert value(found, "agentkit_prompt_tokens", "agentkit_prompt_tokens_total") == sum(prompts)
    assert value(found, "agentkit_output_tokens", "agentkit_output_tokens_total") == sum(
        u["output_tokens"] for u in usage
    )
    cached = value(found, "agentkit_cached_prompt_tokens", "agentkit_cached_prompt_tokens_total")
    assert cached == sum(u.get("cache_read_input_tokens") or 0 for u in usage)
    ratio = "agentkit_cached_prompt_ratio"
    expected = sum(
        (u.get("cache_read_input_tokens") or 0) / p for u, p in zip(usage, prompts, strict=True)
    )
    assert value(found, ratio, f"{ratio}_sum") == pytest.approx(expected)


def test_stream_failures_and_aborts_are_exported() -> None:
    engine = Counting(["An answer long enough to fail in."], fail_after=2, fail_with=RuntimeError())
    with running(build(engine)) as url, httpx.Client(base_url=url, headers=HEADERS) as http:
        events = sse_events(http.post(PATHS["chat"], json=body("chat", stream=True)).content)
        assert "error" in json.loads(events[-2][1])
        found = scrape(http)
    failures = "agentkit_stream_failures"
    assert value(found, failures, f"{failures}_total") == 1


def test_metrics_need_the_api_key() -> None:
    with running(build(Counting([]))) as url, httpx.Client(base_url=url) as http:
        refused = http.get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"


def test_every_server_stats_counter_is_exported() -> None:
    assert set(_STATS) == {f.name for f in fields(ServerStats)}
    assert all(name.endswith("_total") for name in _STATS.values())


def test_label_values_are_escaped() -> None:
    counter = Counter("x_total", "A help text with \\ and\na newline.", ("path",))
    tricky = 'a "quoted" \\ back\nslash'
    counter.inc(2, tricky)
    text = "\n".join([*counter.header(), *counter.lines()]) + "\n"
    (family,) = text_string_to_metric_families(text)
    assert family.documentation == "A help text with \\ and\na newline."
    (sample,) = family.samples
    assert sample.labels == {"path": tricky}
    assert sample.value == 2


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram("h_seconds", "h", (0.1, 1.0))
    for observed in (0.05, 0.5, 0.7, 3.0):
        histogram.observe(observed)
    text = "\n".join([*histogram.header(), *histogram.lines()]) + "\n"
    found = samples(text)
    buckets = {s.labels["le"]: s.value for s in found["h_seconds"] if s.name.endswith("_bucket")}
    assert buckets == {"0.1": 1, "1.0": 3, "+Inf": 4}
    assert value(found, "h_seconds", "h_seconds_sum") == pytest.approx(4.25)
    assert value(found, "h_seconds", "h_seconds_count") == 4


def test_unusual_methods_share_one_label() -> None:
    metrics = ServerMetrics()
    metrics.request("unmatched", "BREW", 404)
    metrics.request("unmatched", "PROPFIND", 404)
    found = samples(metrics.render(ServerStats(), turns_in_flight=0))
    labels = {"route": "unmatched", "method": "OTHER", "status": "404"}
    assert value(found, "agentkit_http_requests", "agentkit_http_requests_total", **labels) == 2
