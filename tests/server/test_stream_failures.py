"""A failure after the 200 ends each stream with its wire format's own error event (Anthropic
``error``, Chat an error chunk and ``[DONE]``, Responses ``response.failed``), whatever the
failure was, so clients report an error instead of a normal end."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest
from _harness import running
from _serving import HEADERS, MODEL, PATHS, Counting, body, build, json_data, sse_events

from agentkit.errors import EngineError, EngineOverloaded

ANSWER = "Hello there, this is an answer long enough to fail in the middle of."


def failing(error: BaseException) -> Counting:
    return Counting([ANSWER], fail_after=3, fail_with=error)


def raw_stream(url: str, api: str) -> list[tuple[str | None, str]]:
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as http:
        response = http.post(PATHS[api], json=body(api, stream=True))
        assert response.status_code == 200, response.text
        return sse_events(response.content)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (RuntimeError("a bug nobody foresaw"), "api_error"),
        (EngineError("the engine died"), "api_error"),
        (EngineOverloaded("no room"), "overloaded_error"),
    ],
)
def test_anthropic_stream_ends_with_an_error_event(error: BaseException, kind: str) -> None:
    engine = failing(error)
    with running(build(engine)) as url:
        events = raw_stream(url, "anthropic")
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-1] == "error"
    assert "message_stop" not in names
    assert json_data(events[-1])["error"]["type"] == kind
    assert engine.aborted == 1


@pytest.mark.parametrize("error", [RuntimeError("a bug"), EngineError("the engine died")])
def test_chat_stream_ends_with_an_error_chunk_and_done(error: BaseException) -> None:
    with running(build(failing(error))) as url:
        events = raw_stream(url, "chat")
    assert events[-1][1] == "[DONE]"
    last = json_data(events[-2])
    assert set(last) == {"error"}
    assert last["error"]["type"] == "api_error"
    assert not any('"finish_reason":"stop"' in data for _, data in events)


@pytest.mark.parametrize("error", [RuntimeError("a bug"), EngineError("the engine died")])
def test_responses_stream_ends_with_response_failed(error: BaseException) -> None:
    with running(build(failing(error))) as url:
        events = raw_stream(url, "responses")
    names = [name for name, _ in events]
    assert names[-1] == "response.failed"
    assert "response.completed" not in names
    failed = json_data(events[-1])["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "server_error"


def test_an_unforeseen_failure_does_not_leak_its_message() -> None:
    with running(build(failing(RuntimeError("secret /srv/path")))) as url:
        events = raw_stream(url, "anthropic")
    message = json_data(events[-1])["error"]["message"]
    assert "secret" not in message
    assert "RuntimeError" in message


def test_the_sdks_report_an_error_not_a_normal_end() -> None:
    engine = Counting([ANSWER] * 3, fail_after=3, fail_with=RuntimeError("x"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    with running(build(engine)) as url:
        claude = anthropic.Anthropic(base_url=url, api_key="test-key", max_retries=0)
        with claude, pytest.raises(anthropic.APIStatusError, match="RuntimeError"):  # noqa: PT012
            stream = claude.messages.stream(model=MODEL, max_tokens=100, messages=messages)
            with stream as events:
                for _ in events:
                    pass
        client = openai.OpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0)
        with client:
            chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
            with pytest.raises(openai.APIError, match="RuntimeError"):
                for _ in chunks:
                    pass
            kinds = [
                event.type
                for event in client.responses.create(model=MODEL, input="hi", stream=True)
            ]
    assert kinds[-1] == "response.failed"
    assert "response.completed" not in kinds
