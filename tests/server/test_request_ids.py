"""Every request has an id: in the ``x-request-id`` response header, in every error body (in
each API's shape) and on every log record made while answering it."""

from __future__ import annotations

import logging
import re

import httpx
import pytest
from _harness import running
from _serving import HEADERS, MODEL, PATHS, Counting, body, build

from agentkit.server._request_ids import MAX_LENGTH, accepted_request_id, with_request_id

GENERATED = re.compile(r"req_[0-9a-f]{32}")


def test_each_response_gets_a_new_id() -> None:
    with running(build(Counting([]))) as url, httpx.Client(base_url=url) as http:
        ids = [http.get("/health").headers["x-request-id"] for _ in range(3)]
    assert all(GENERATED.fullmatch(i) for i in ids)
    assert len(set(ids)) == 3


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("trace-7f3a.b_c:1", True),
        ("0" * MAX_LENGTH, True),
        ("0" * (MAX_LENGTH + 1), False),
        ("has space", False),
        ("<script>", False),
        ("-leading-dash", False),
        ("", False),
    ],
)
def test_an_incoming_id_is_kept_only_when_well_formed(sent: str, kept: bool) -> None:
    assert (accepted_request_id(sent) == sent) is kept
    with running(build(Counting([]))) as url, httpx.Client(base_url=url) as http:
        answered = http.get("/health", headers={"x-request-id": sent}).headers["x-request-id"]
    assert answered == sent if kept else GENERATED.fullmatch(answered)


def test_error_bodies_carry_the_id_in_each_apis_shape() -> None:
    with running(build(Counting([]))) as url, httpx.Client(base_url=url) as http:
        anthropic = [
            http.get("/no/such/path"),  # 404 from the router
            http.get(PATHS["anthropic"]),  # 405
            http.post(PATHS["anthropic"], json=body("anthropic", stream=False)),  # 401
            http.post(PATHS["anthropic"], headers=HEADERS, json={"model": MODEL}),  # 400
        ]
        openai = [
            http.post(PATHS["chat"], headers=HEADERS, json={"model": MODEL}),  # 400
            http.post(PATHS["responses"], json=body("responses", stream=False)),  # 401
            http.get(PATHS["responses"], headers=HEADERS),  # 426
        ]
    assert [r.status_code for r in anthropic] == [404, 405, 401, 400]
    assert anthropic[1].headers["allow"] == "POST"
    for response in anthropic:
        data = response.json()
        assert data["type"] == "error"
        assert data["request_id"] == response.headers["x-request-id"]
        assert int(response.headers["content-length"]) == len(response.content)
    assert [r.status_code for r in openai] == [400, 401, 426]
    for response in openai:
        assert response.json()["error"]["request_id"] == response.headers["x-request-id"]


def test_refusals_at_the_boundary_carry_the_id() -> None:
    with running(build(Counting([]), api_key=None)) as url, httpx.Client(base_url=url) as http:
        refused = http.post(PATHS["chat"], content=b"{}", headers={"content-type": "text/plain"})
    assert refused.status_code == 415
    assert refused.json()["error"]["request_id"] == refused.headers["x-request-id"]


def test_an_incoming_id_reaches_the_error_body() -> None:
    with running(build(Counting([]))) as url, httpx.Client(base_url=url) as http:
        refused = http.get("/v1/stats", headers={"x-request-id": "edge-42"})
    assert refused.status_code == 401
    assert refused.json()["request_id"] == "edge-42"


def test_the_shape_decides_where_the_id_goes() -> None:
    anthropic = with_request_id({"type": "error", "error": {"type": "x"}}, "r1")
    assert anthropic == {"type": "error", "error": {"type": "x"}, "request_id": "r1"}
    assert with_request_id({"error": {"message": "m"}}, "r1") == {
        "error": {"message": "m", "request_id": "r1"}
    }
    assert with_request_id(["not", "an", "error"], "r1") == ["not", "an", "error"]


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_every_log_record_of_a_request_carries_its_id(
    api: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentkit")
    engine = Counting(["An answer."])
    sent = {**HEADERS, "x-request-id": f"trace-{api}-{stream}"}
    with running(build(engine)) as url, httpx.Client(base_url=url) as http:
        response = http.post(PATHS[api], headers=sent, json=body(api, stream=stream))
        assert response.status_code == 200
        assert response.headers["x-request-id"] == sent["x-request-id"]
    records = [r for r in caplog.records if r.name.startswith("agentkit")]
    assert any(r.getMessage().startswith("event='turn'") for r in records)
    for record in records:
        assert f"request_id='{sent['x-request-id']}'" in record.getMessage(), record.getMessage()
