"""The Messages stream's final usage, as the official ``anthropic`` SDK accumulates it.

A remote engine knows the cached prompt tokens only at the end of its stream, after
``message_start`` went out; the API's ``message_delta`` usage is cumulative and replaces the
start's counts in the client's message, so the server sends them there.
"""

from __future__ import annotations

from typing import Any

import anthropic
from _fake_dynamo import FakeDynamo, engine_for
from _harness import running

from agentkit.profiles import get_profile
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._runtime import ServerRuntime

KEY = "test-key"


def test_cached_tokens_known_only_at_the_end_reach_the_sdks_final_message() -> None:
    fake = FakeDynamo(outputs=["Hello there."], cached=16)
    runtime = ServerRuntime(engine_for(fake), get_profile("qwen3"))
    app = create_app(runtime, ServerConfig(model_name="tiny", api_key=KEY))
    request: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    with (
        running(app) as url,
        anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0) as sdk,
    ):
        with sdk.messages.stream(**request) as stream:
            start = next(e for e in stream if e.type == "message_start")
            message = stream.get_final_message()
        whole = sdk.messages.create(**request)
    assert start.message.usage.cache_read_input_tokens == 0  # not known yet
    assert message.content[0].text == "Hello there."  # type: ignore[union-attr]
    (body, _) = fake.bodies
    prompt_tokens = len(body["prompt"])
    assert message.usage.cache_read_input_tokens == 16
    assert message.usage.cache_creation_input_tokens == 0
    # input_tokens counts what the cache did not serve: the three add up to the prompt.
    assert message.usage.input_tokens == prompt_tokens - 16
    assert start.message.usage.input_tokens == prompt_tokens  # nothing known cached yet
    assert message.usage.output_tokens == whole.usage.output_tokens > 0
    assert whole.usage.cache_read_input_tokens == 16
