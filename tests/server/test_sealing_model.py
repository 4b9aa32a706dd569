"""Sealed Responses reasoning is bound to the served model as well as the profile: two servers
sharing a key (the machine's default one) and a profile but serving different models cannot
open each other's sealed turns, so neither splices the other's token ids into a prompt. What
another model sealed is treated as content sealed under another key: a 400, or ignored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from _harness import running
from _serving import HEADERS, QWEN3, SEAL_KEY, Counting

from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer, SealError

PURPOSE = b"test"
CALL = {"name": "read", "arguments": {"path": "a.txt"}}
ANSWER = f"<think>\nPlan the answer.\n</think>\n\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
TOOLS = [
    {
        "type": "function",
        "name": "read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def test_a_bound_sealer_opens_only_its_own_context() -> None:
    base = Sealer(SEAL_KEY)
    model_a, model_b = base.bound("model-a"), base.bound("model-b")
    token = model_a.seal(b"token ids", purpose=PURPOSE)
    assert model_a.open(token, purpose=PURPOSE) == b"token ids"
    assert Sealer(SEAL_KEY).bound("model-a").open(token, purpose=PURPOSE) == b"token ids"
    for other in (model_b, base, base.bound("model-a").bound("more")):
        with pytest.raises(SealError) as refused:
            other.open(token, purpose=PURPOSE)
        assert refused.value.reason == "foreign"
        assert "another model" in str(refused.value)
    with pytest.raises(SealError):
        model_a.open(base.seal(b"x", purpose=PURPOSE), purpose=PURPOSE)
    assert base.bound("") is base


def test_binding_works_for_the_standard_library_scheme_too() -> None:
    token = Sealer(SEAL_KEY, scheme="hmac").bound("a").seal(b"x", purpose=PURPOSE)
    assert Sealer(SEAL_KEY, scheme="hmac").bound("a").open(token, purpose=PURPOSE) == b"x"
    with pytest.raises(SealError, match="another model"):
        Sealer(SEAL_KEY, scheme="hmac").bound("b").open(token, purpose=PURPOSE)


def app_for(model: str, engine: Counting, *, unverifiable: Any = "reject") -> Any:
    runtime = ServerRuntime(engine, QWEN3, id_factory=new_tool_use_id)
    factory = responses_routes_factory(Sealer(SEAL_KEY), unverifiable_reasoning=unverifiable)
    config = ServerConfig(model_name=model, api_key="test-key")
    return create_app(runtime, config, adapters=[factory])


def first_turn(url: str) -> list[dict[str, Any]]:
    body = {
        "model": "any",
        "input": "hi",
        "store": False,
        "tools": TOOLS,
        "include": ["reasoning.encrypted_content"],
    }
    response = httpx.post(url + "/v1/responses", json=body, headers=HEADERS, timeout=30)
    assert response.status_code == 200, response.text
    output: list[dict[str, Any]] = response.json()["output"]
    return output


def follow_up(output: list[dict[str, Any]]) -> dict[str, Any]:
    """The conversation with the call's result: the same turn goes on."""
    reasoning = {**output[0], "content": None}
    call = {k: output[1][k] for k in ("type", "call_id", "name", "arguments")}
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "text"}
    history = [{"type": "message", "role": "user", "content": "hi"}, reasoning, call, result]
    return {"model": "any", "input": history, "store": False, "tools": TOOLS}


def test_another_models_sealed_turn_is_refused_and_its_token_ids_never_used() -> None:
    engine_a = Counting([ANSWER, "Again."])
    with running(app_for("org/model-a", engine_a)) as url_a:
        output = first_turn(url_a)
        assert output[0]["type"] == "reasoning"
        assert output[0]["encrypted_content"]
        # The same server (same model) restores the turn token for token.
        again = httpx.post(
            url_a + "/v1/responses", json=follow_up(output), headers=HEADERS, timeout=30
        )
        assert again.status_code == 200, again.text
    first, second = engine_a.requests
    assert first.prompt_token_ids is not None
    assert second.prompt_token_ids is not None
    generated = engine_a.encode(ANSWER) + engine_a.encode(QWEN3.stop[0])
    prefix = [*first.prompt_token_ids, *generated]
    assert second.prompt_token_ids[: len(prefix)] == prefix

    # Another model under the same key and profile: refused, as another key's content is.
    engine_b = Counting(["Other."])
    with running(app_for("org/model-b", engine_b)) as url_b:
        refused = httpx.post(
            url_b + "/v1/responses", json=follow_up(output), headers=HEADERS, timeout=30
        )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert "another model" in error["message"]
    assert error["param"] == "input.1.encrypted_content"
    assert engine_b.requests == []

    # ...or ignored on request: the turn is rendered from what the client sent.
    engine_c = Counting(["Other."])
    with running(app_for("org/model-b", engine_c, unverifiable="ignore")) as url_c:
        ignored = httpx.post(
            url_c + "/v1/responses", json=follow_up(output), headers=HEADERS, timeout=30
        )
    assert ignored.status_code == 200, ignored.text
    (request,) = engine_c.requests
    assert "Plan the answer." not in request.prompt  # content withheld, nothing opened
