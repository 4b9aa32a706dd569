"""The request boundary (``_intake``, ``_guard``): what a hostile or careless client sends
gets a typed 4xx in its API's error shape, never a 500, an empty 200 or a stuck worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from _intake import (
    ALL_PATHS,
    GENERATION_PATHS,
    OPENAI_PATHS,
    build,
    client,
    error_of,
    valid_body,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.server._errors import ApiError
from agentkit.server._guard import is_json_type, is_loopback_host
from agentkit.server._intake import Limits, check_tree, parse_json, read_bytes

pytestmark = pytest.mark.anyio

LONE = "\ud800"


def raw(data: Any) -> bytes:
    """JSON text of ``data`` with non-ASCII escaped (so lone surrogates travel as ``\\ud800``)."""
    return json.dumps(data, ensure_ascii=True, allow_nan=True).encode()


async def post_raw(path: str, content: bytes, **config: Any) -> Any:
    async with client(build(**config)) as c:
        return await c.post(path, content=content, headers={"content-type": "application/json"})


def files(directory: Path) -> list[Path]:
    return list(directory.iterdir())


# -- strict JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", GENERATION_PATHS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_lone_surrogate_is_a_400_naming_the_field(path: str, stream: bool) -> None:
    body = valid_body(path, stream=stream)
    body["model"] = LONE
    response = await post_raw(path, raw(body))
    assert response.status_code == 400, response.text
    error = error_of(path, response)
    assert error["message"].startswith("model:"), error
    assert "surrogate" in error["message"]


async def test_a_surrogate_deep_in_a_message_names_its_path(tmp_path: Path) -> None:
    body = valid_body("/v1/messages")
    body["messages"][1]["content"][1]["input"] = {"a": ["ok", f"x{LONE}y"]}
    response = await post_raw("/v1/messages", raw(body), log_prompts=tmp_path / "log")
    assert response.status_code == 400, response.text
    assert error_of("/v1/messages", response)["message"].startswith(
        "messages.1.content.1.input.a.1:"
    )
    assert not files(tmp_path / "log")  # refused before any prompt was made


async def test_a_surrogate_pair_is_text_and_passes(tmp_path: Path) -> None:
    body = valid_body("/v1/chat/completions")
    body["messages"][1]["content"][0]["text"] = "smile \U0001f600"
    response = await post_raw("/v1/chat/completions", raw(body), log_prompts=tmp_path)
    assert response.status_code == 200, response.text
    (logged,) = files(tmp_path)
    assert "\U0001f600" in logged.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", ALL_PATHS)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_numbers_must_be_finite(path: str, literal: str) -> None:
    text = raw(valid_body(path)).decode()
    text = text[:-1] + f', "temperature": {literal}}}'
    response = await post_raw(path, text.encode())
    assert response.status_code == 400, response.text
    error_of(path, response)


@pytest.mark.parametrize("path", ALL_PATHS)
async def test_a_body_that_is_not_utf8_is_a_400(path: str) -> None:
    response = await post_raw(path, b'{"model": "\xff"}')
    assert response.status_code == 400
    assert "UTF-8" in error_of(path, response)["message"]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("path", ALL_PATHS)
@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
async def test_deep_nesting_is_refused_before_anything_recursive(path: str, depth: int) -> None:
    body = valid_body(path)
    body["x"] = nested(depth)
    text = (
        raw(body)
        if depth < 900
        else raw(valid_body(path))[:-1] + b', "x": ' + (b"[" * depth + b"]" * depth + b"}")
    )
    response = await post_raw(path, text)
    assert response.status_code == 400, response.text
    assert "max_json_depth" in error_of(path, response)["message"]


async def test_depth_inside_tool_input_and_arguments() -> None:
    deep = nested(900)
    anthropic = valid_body("/v1/messages")
    anthropic["messages"][1]["content"][1]["input"] = {"a": deep}
    chat = valid_body("/v1/chat/completions")
    chat["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"a": deep})
    responses = valid_body("/v1/responses")
    responses["tools"][0]["parameters"] = {"type": "object", "properties": nested(300)}
    for path, body in [
        ("/v1/messages", anthropic),
        ("/v1/chat/completions", chat),
        ("/v1/responses", responses),
    ]:
        response = await post_raw(path, raw(body))
        assert response.status_code == 400, (path, response.text)
        assert "max_json_depth" in error_of(path, response)["message"]


async def test_the_depth_limit_is_a_setting() -> None:
    body = valid_body("/v1/messages")
    body["metadata"] = {"a": nested(8)}
    assert (await post_raw("/v1/messages", raw(body))).status_code == 200
    refused = await post_raw("/v1/messages", raw(body), max_json_depth=6)
    assert refused.status_code == 400
    assert "metadata.a" in error_of("/v1/messages", refused)["message"]


# -- counts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "field", "setting"),
    [
        ("/v1/messages", "messages", "max_messages"),
        ("/v1/messages/count_tokens", "messages", "max_messages"),
        ("/v1/chat/completions", "messages", "max_messages"),
        ("/v1/responses", "input", "max_messages"),
        ("/v1/messages", "tools", "max_tools"),
        ("/v1/chat/completions", "tools", "max_tools"),
        ("/v1/responses", "tools", "max_tools"),
    ],
)
async def test_counts_beyond_the_limits_are_a_400_naming_the_limit(
    path: str, field: str, setting: str
) -> None:
    body = valid_body(path)
    limit = len(body[field]) + (1 if path == "/v1/responses" and field == "tools" else 0)
    assert (await post_raw(path, raw(body), **{setting: limit})).status_code == 200
    body[field] = [*body[field], body[field][-1]]
    response = await post_raw(path, raw(body), **{setting: limit})
    assert response.status_code == 400, response.text
    message = error_of(path, response)["message"]
    assert setting in message, message
    assert message.startswith(f"{field}:"), message


@pytest.mark.parametrize(
    ("path", "blocks"),
    [
        ("/v1/messages", 4),  # a system block, the assistant's two, the tool result
        ("/v1/chat/completions", 2),  # a user part, a tool call
        ("/v1/responses", 1),  # a user part
    ],
)
async def test_content_blocks_are_bounded_across_messages(path: str, blocks: int) -> None:
    body = valid_body(path)
    assert (await post_raw(path, raw(body), max_blocks=blocks)).status_code == 200
    response = await post_raw(path, raw(body), max_blocks=blocks - 1)
    assert response.status_code == 400
    assert "max_blocks" in error_of(path, response)["message"]


async def test_a_million_tiny_messages_are_refused() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "a"}] * 1_000_000}
    compact = json.dumps(body, separators=(",", ":")).encode()
    assert len(compact) < 32 * 1024 * 1024  # within the size limit: the count refuses it
    response = await post_raw("/v1/messages/count_tokens", compact)
    assert response.status_code == 400
    assert "max_messages" in error_of("/v1/messages/count_tokens", response)["message"]


# -- Responses shapes, detokenize ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "param"),
    [
        (
            lambda b: b.update(tool_choice={"type": "function", "name": "f", "namespace": 3}),
            "tool_choice.namespace",
        ),
        (lambda b: b["tools"][1].update(tools=["g"]), "tools.1.tools.0"),
        (lambda b: b["tools"][1].update(tools=[None]), "tools.1.tools.0"),
    ],
)
async def test_responses_shapes_are_typed_400s(change: Any, param: str) -> None:
    body = valid_body("/v1/responses")
    change(body)
    response = await post_raw("/v1/responses", raw(body))
    assert response.status_code == 400, response.text
    assert error_of("/v1/responses", response)["param"] == param


@pytest.mark.parametrize("tokens", [[-1], [2**40], [0x110000 + 10_000], [0xD800], [104, 2**31]])
async def test_detokenize_out_of_range_is_a_400(tokens: list[int]) -> None:
    response = await post_raw("/v1/detokenize", raw({"tokens": tokens}))
    assert response.status_code == 400, response.text
    assert error_of("/v1/detokenize", response)["message"].startswith("tokens")


# -- who may call: host, origin, content type, method ------------------------------------------


@pytest.mark.parametrize("path", GENERATION_PATHS)
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "192.168.1.5", "[::2]"])
async def test_without_a_key_a_foreign_host_is_refused(path: str, host: str) -> None:
    async with client(build()) as c:
        response = await c.post(path, json=valid_body(path), headers={"host": host})
    assert response.status_code == 403
    assert error_of(path, response)["type"] == "permission_error"


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1:1", "127.1.2.3", "[::1]:9", "a.localhost"]
)
async def test_loopback_hosts_are_answered(host: str) -> None:
    async with client(build()) as c:
        response = await c.get("/v1/models", headers={"host": host})
    assert response.status_code == 200


async def test_allowed_hosts_and_api_keys_lift_the_host_check() -> None:
    async with client(build(allowed_hosts=("proxy.internal",))) as c:
        assert (
            await c.get("/v1/models", headers={"host": "proxy.internal:443"})
        ).status_code == 200
    async with client(build(api_key="k")) as c:
        response = await c.get("/v1/models", headers={"host": "evil.example", "x-api-key": "k"})
        assert response.status_code == 200


@pytest.mark.parametrize("path", ALL_PATHS)
@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/xml",
    ],
)
async def test_without_a_key_a_post_must_be_json(path: str, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    async with client(build()) as c:
        response = await c.post(path, content=raw(valid_body(path)), headers=headers)
    assert response.status_code == 415, response.text
    error_of(path, response)


async def test_json_content_types_with_parameters_pass() -> None:
    assert is_json_type("application/json; charset=utf-8")
    assert is_json_type("Application/JSON")
    assert is_json_type("application/vnd.api+json")
    assert not is_json_type("text/json+plain")
    async with client(build()) as c:
        body = raw(valid_body("/v1/tokenize"))
        headers = {"content-type": "application/json; charset=utf-8"}
        assert (await c.post("/v1/tokenize", content=body, headers=headers)).status_code == 200


@pytest.mark.parametrize("path", GENERATION_PATHS)
async def test_without_a_key_a_web_origin_is_refused_and_cors_stays_closed(path: str) -> None:
    async with client(build()) as c:
        response = await c.post(path, json=valid_body(path), headers={"origin": "https://a.b"})
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers
        preflight = await c.options(
            path,
            headers={"origin": "https://a.b", "access-control-request-method": "POST"},
        )
        assert preflight.status_code == 403
        assert "access-control-allow-origin" not in preflight.headers
        error_of(path, preflight)


async def test_allowed_origins_get_preflight_and_cors_headers() -> None:
    app = build(allowed_origins=("https://app.example",))
    async with client(app, origin="https://app.example") as c:
        preflight = await c.options(
            "/v1/messages",
            headers={
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, x-api-key",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "DELETE" in preflight.headers["access-control-allow-methods"]  # stored responses
        assert "x-api-key" in preflight.headers["access-control-allow-headers"]
        response = await c.post("/v1/messages", json=valid_body("/v1/messages"))
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        assert "Origin" in response.headers["vary"]
    async with client(app, origin="https://other.example") as c:
        response = await c.post("/v1/messages", json=valid_body("/v1/messages"))
        assert response.status_code == 403


async def test_errors_below_v1_responses_take_openais_shape() -> None:
    async with client(build()) as c:
        missing = await c.get("/v1/responses/resp_x/nothing/here")
        wrong = await c.put("/v1/responses/resp_x", json={})
    for response in (missing, wrong):
        assert response.status_code in (404, 405), response.text
        error = response.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}, error


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/messages", "POST"),
        ("PUT", "/v1/chat/completions", "POST"),
        ("DELETE", "/v1/responses", "GET, HEAD, POST"),
        ("POST", "/v1/models", "GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
    ],
)
async def test_a_wrong_method_is_405_with_allow(method: str, path: str, allow: str) -> None:
    async with client(build()) as c:
        response = await c.request(method, path, json={})
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allow
    error_of(path, response)


@pytest.mark.parametrize("path", [*OPENAI_PATHS, "/v1/messages"])
async def test_errors_keep_each_apis_shape_with_a_key(path: str) -> None:
    async with client(build(api_key="k"), **{"x-api-key": "k", "authorization": "Bearer k"}) as c:
        response = await c.post(path, content=b"{", headers={"content-type": "text/plain"})
    assert response.status_code == 400  # with a key, the content type is not checked
    error_of(path, response)


# -- reading the body ----------------------------------------------------------------------------


async def call(app: Any, path: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Call ``app`` as a server would, the body arriving as ``parts`` then nothing more; the
    messages it sent."""
    sent: list[dict[str, Any]] = []
    parts = list(reversed(parts))

    async def receive() -> dict[str, Any]:
        if parts:
            return parts.pop()
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"content-length", b"9999"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    return sent


async def test_a_body_that_never_ends_gets_408() -> None:
    part = {"type": "http.request", "body": b'{"model": "m", ', "more_body": True}
    sent = await call(build(body_timeout=0.2), "/v1/messages", [part])
    assert sent[0]["status"] == 408
    assert "did not arrive" in json.loads(sent[1]["body"])["error"]["message"]


async def chunks(pieces: list[bytes]) -> Any:
    for piece in pieces:
        yield piece


async def test_read_bytes_joins_pieces_and_enforces_the_size() -> None:
    pieces = [b"x" * 10] * 1000
    assert await read_bytes(chunks(pieces), Limits(max_request_bytes=10_000)) == b"x" * 10_000
    with pytest.raises(ApiError) as caught:
        await read_bytes(chunks(pieces), Limits(max_request_bytes=9_999))
    assert caught.value.status == 413


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_parse_json_accepts_exactly_the_encodable_trees(value: Any) -> None:
    """Any JSON value round-trips unless it holds a lone surrogate (then the error names the
    path of a string holding one)."""
    text = json.dumps({"v": value})
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    limits = Limits(max_json_depth=1_000)
    if encodable:
        assert parse_json(text.encode(), limits) == {"v": value}
    else:
        with pytest.raises(ApiError) as caught:
            parse_json(text.encode(), limits)
        assert "surrogate" in caught.value.message
        assert caught.value.param is None or caught.value.param.startswith("v")


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=80), st.integers(min_value=1, max_value=80))
def test_check_tree_refuses_exactly_beyond_the_depth(depth: int, limit: int) -> None:
    tree = nested(depth + 1)  # `depth` arrays around a number
    if depth <= limit:
        check_tree(tree, limit)
    else:
        with pytest.raises(ApiError, match="max_json_depth"):
            check_tree(tree, limit)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["localhost", "127.0.0.1", "[::1]", "LOCALHOST."]), st.integers(1, 65535))
def test_loopback_hosts_with_any_port(name: str, port: int) -> None:
    assert is_loopback_host(name)
    assert is_loopback_host(f"{name}:{port}")
    assert not is_loopback_host(f"{name}.evil.example:{port}")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
@pytest.mark.parametrize(
    "arguments", ['{"a": "\\ud800"}', '{"a": ' + "[" * 100 + "]" * 100 + "}", '{"a": NaN}']
)
async def test_tool_call_arguments_inside_strings_follow_the_body_rules(
    path: str, arguments: str
) -> None:
    body = valid_body(path)
    if path == "/v1/responses":
        body["input"][1]["arguments"] = arguments
    else:
        body["messages"][2]["tool_calls"][0]["function"]["arguments"] = arguments
    response = await post_raw(path, raw(body))
    if "NaN" in arguments and path == "/v1/responses":
        assert response.status_code == 200  # not JSON: replayed as {}, as it was sent out
        return
    assert response.status_code == 400, response.text
    assert "arguments" in error_of(path, response)["message"]


@pytest.mark.parametrize("path", ALL_PATHS)
async def test_a_client_gone_before_its_body_ends_is_no_server_error(path: str) -> None:
    part = {"type": "http.request", "body": b'{"model": "m", ', "more_body": True}
    sent = await call(build(), path, [part, {"type": "http.disconnect"}])
    assert sent[0]["status"] == 400


@pytest.mark.parametrize("kind", [[], {}, 3, None])
async def test_a_responses_tool_choice_type_must_be_a_string(kind: Any) -> None:
    body = valid_body("/v1/responses")
    body["tool_choice"] = {"type": kind, "name": "f"}
    response = await post_raw("/v1/responses", raw(body))
    assert response.status_code == 400, response.text
    assert error_of("/v1/responses", response)["param"] == "tool_choice.type"
