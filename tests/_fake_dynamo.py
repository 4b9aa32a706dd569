"""A fake of NVIDIA Dynamo 1.6.1's frontend, for RemoteEngine(flavor="dynamo") tests.

The fake does what the real frontend was seen doing (``ai-dynamo==1.6.1``; the end-to-end
test ``tests/e2e/test_dynamo.py`` runs the real one): it refuses body fields it does not know
with HTTP 400, takes a prompt of token ids as is, returns output ids only as ``logprobs``
tokens written ``token_id:<id>`` (when asked with ``return_tokens_as_token_ids``), lists the
context length as ``context_window``, and reads agent hints from ``nvext.agent_hints`` and the
session from the ``x-dynamo-session-id`` header. It records each accepted request's body and
headers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentkit.engine import CharTokenizer
from agentkit.engine._remote import RemoteEngine
from agentkit.profiles import get_profile

QWEN3 = get_profile("qwen3")
STOP = QWEN3.stop[0]
TOKENIZER = CharTokenizer([*QWEN3.special_tokens, STOP])
URL = "http://dynamo.test:8000"

ACCEPTED = frozenset(
    {
        "model",
        "prompt",
        "stream",
        "stream_options",
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "stop_token_ids",
        "seed",
        "logit_bias",
        "n",
        "echo",
        "skip_special_tokens",
        "include_stop_str_in_output",
        "logprobs",
        "return_tokens_as_token_ids",
        "guided_regex",
        "guided_json",
        "guided_grammar",
        "guided_choice",
        "nvext",
    }
)
"""Body fields the fake accepts; Dynamo 1.6.1 refused ``return_token_ids``,
``add_special_tokens``, ``priority`` and ``structured_outputs`` with a 400."""


@dataclass
class FakeDynamo:
    outputs: list[str] = field(default_factory=lambda: ["Hello world"])
    cached: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny", "context_window": 4096}]})
        body = json.loads(request.content)
        unknown = sorted(set(body) - ACCEPTED)
        if unknown:
            names = ", ".join(f"`{name}`" for name in unknown)
            return httpx.Response(
                400,
                json={
                    "message": f"Validation: Unsupported parameter(s): {names}",
                    "type": "Bad Request",
                    "code": 400,
                },
            )
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        text = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        return httpx.Response(
            200,
            content=self._events(body, text).encode(),
            headers={"content-type": "text/event-stream"},
        )

    def _events(self, body: dict[str, Any], text: str) -> str:
        prompt = body["prompt"]
        prompt_ids = prompt if isinstance(prompt, list) else TOKENIZER.encode(prompt)
        as_ids = body.get("logprobs") is not None and body.get("return_tokens_as_token_ids")
        tokens = TOKENIZER.encode(text)
        events: list[dict[str, Any]] = []

        def choice(token: int, piece: str, finish: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"text": piece, "index": 0}
            if as_ids:
                name = f"token_id:{token}"
                out["logprobs"] = {
                    "tokens": [name],
                    "token_logprobs": [0.0],
                    "top_logprobs": [{name: 0.0}],
                    "text_offset": [],
                }
            if finish:
                out["finish_reason"] = finish
            return out

        for token in tokens:
            events.append({"choices": [choice(token, TOKENIZER.decode([token]))]})
        # The end-of-turn token ends the output: a hidden stop, no text.
        events.append({"choices": [choice(TOKENIZER.encode(STOP)[0], "", "stop")]})
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(tokens) + 1,
            "total_tokens": len(prompt_ids) + len(tokens) + 1,
            "prompt_tokens_details": {"audio_tokens": None, "cached_tokens": self.cached},
        }
        events.append({"choices": [], "usage": usage})
        lines = [f"data: {json.dumps(event)}\n\n" for event in events]
        return "".join(lines) + "data: [DONE]\n\n"


def engine_for(fake: FakeDynamo, **kwargs: Any) -> RemoteEngine:
    client = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    options: dict[str, Any] = {"model": "tiny", "tokenizer": TOKENIZER, "flavor": "dynamo"}
    return RemoteEngine(URL, http_client=client, **{**options, **kwargs})
