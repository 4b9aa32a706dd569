"""What the response-side robustness tests share: an app serving all three wire formats over a
scripted engine that counts what it produced and whether it was aborted, the three APIs'
request bodies, and a raw server-sent-events reader."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from starlette.applications import Starlette

from agentkit.engine import GenerationChunk, GenerationRequest, TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.server._anthropic_response import new_tool_use_id
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._openai_chat import chat_routes
from agentkit.server._openai_responses import responses_routes_factory
from agentkit.server._runtime import ServerRuntime
from agentkit.server._sealing import Sealer
from agentkit.server._signing import ThinkingSigner

QWEN3 = get_profile("qwen3")
KEY = "test-key"
MODEL = "org/served-model"
SEAL_KEY = b"s" * 32
API_NAMES = ("anthropic", "chat", "responses")
PATHS = {
    "anthropic": "/v1/messages",
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
}
HEADERS = {"x-api-key": KEY, "authorization": f"Bearer {KEY}"}


class Counting(TokenizedScriptedEngine):
    """Counts the chunks it produced and the streams closed before they finished; raises
    ``fail_with`` after ``fail_after`` chunks of each request, when given."""

    def __init__(
        self,
        outputs: Sequence[Any],
        *,
        fail_after: int | None = None,
        fail_with: BaseException | None = None,
        token_delay: float = 0.0,
    ) -> None:
        super().__init__(
            outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0], token_delay=token_delay
        )
        self.produced = 0
        self.aborted = 0
        self.finished = 0
        self._fail_after = fail_after
        self._fail_with = fail_with

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        done = False
        mine = 0
        try:
            async for chunk in super().generate(request):
                if self._fail_with is not None and mine == self._fail_after:
                    raise self._fail_with
                mine += 1
                self.produced += 1
                if chunk.finish_reason is not None:
                    done = True
                yield chunk
        finally:
            if done:
                self.finished += 1
            else:
                self.aborted += 1


def build(engine: Counting, **config: Any) -> Starlette:
    """The app with every wire format, on ``engine``."""
    runtime = ServerRuntime(engine, QWEN3, id_factory=new_tool_use_id)
    settings = {"model_name": MODEL, "api_key": KEY, **config}
    return create_app(
        runtime,
        ServerConfig(**settings),
        signer=ThinkingSigner(b"k" * 32),
        adapters=[chat_routes, responses_routes_factory(Sealer(SEAL_KEY))],
    )


def body(api: str, *, stream: bool, text: str = "hi") -> dict[str, Any]:
    """A minimal request in ``api``'s wire format."""
    if api == "anthropic":
        return {
            "model": MODEL,
            "max_tokens": 100_000,
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }
    if api == "chat":
        return {"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": text}]}
    return {"model": MODEL, "stream": stream, "store": False, "input": text}


def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    """``(event name, data)`` for each event of a server-sent-events body (comments, such as
    pings, are left out)."""
    events: list[tuple[str | None, str]] = []
    for frame in raw.decode().split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in frame.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            events.append((name, "\n".join(data)))
    return events


def json_data(event: tuple[str | None, str]) -> Any:
    return json.loads(event[1])
