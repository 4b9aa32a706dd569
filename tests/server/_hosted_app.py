"""The agent the hosting tests serve (``agentkit serve --agent _hosted_app:agent``, with this
directory on ``PYTHONPATH``): two tools of its own (``weather``, ``clock``) on a scripted
Qwen3 model, and an ordering record that shows when each tool started relative to the end
of each model turn."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, TokenizedScriptedEngine
from agentkit.profiles import get_profile

QWEN3 = get_profile("qwen3")

KEY = "test-key"
"""The API key the tests' servers require."""

ORDER: list[str] = []
"""``start:<tool>`` when a tool starts, ``end:<n>`` when model request ``n`` (from 1) has
yielded its last chunk, ``aborted:<n>`` when it was closed before."""


def hermes(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


ASK = {
    "type": "function",
    "name": "ask_user",
    "description": "Ask the person a question.",
    "parameters": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}
"""The client's tool (the Responses shape)."""

SCRIPT = [
    "<think>\nWeather and time first.\n</think>\n\n"
    + hermes("weather", city="Paris")
    + "\n"
    + hermes("clock"),
    "<think>\nAsk about the unit.\n</think>\n\nLet me ask you one thing.\n\n"
    + hermes("ask_user", question="Celsius or Fahrenheit?"),
    "<think>\nAnswer now.\n</think>\n\nIt is 21 degrees Celsius in Paris at 12:00.",
]
"""The run the tests drive: the server's two tools, then the client's, then the answer."""


class RecordingEngine(TokenizedScriptedEngine):
    """Qwen3's markers as tokens (the other tokens are characters); records each request's
    end in :data:`ORDER`."""

    def __init__(self, outputs: Sequence[str], *, token_delay: float = 0.001) -> None:
        super().__init__(
            outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0], token_delay=token_delay
        )

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        n = len(self.requests) + 1
        finished = False
        try:
            async for chunk in super().generate(request):
                yield chunk
            finished = True
            ORDER.append(f"end:{n}")
        finally:
            if not finished:
                ORDER.append(f"aborted:{n}")


@agentkit.tool
async def weather(city: str) -> str:
    """The weather in a city."""
    ORDER.append("start:weather")
    return f"21 degrees Celsius in {city}"


@agentkit.tool
async def clock() -> str:
    """The time."""
    ORDER.append("start:clock")
    return "12:00"


def make(outputs: Sequence[str] = SCRIPT, *tools: agentkit.Tool) -> agentkit.Agent[str]:
    """A fresh agent on ``outputs`` with the two tools (and ``tools``)."""
    return agentkit.Agent(
        engine=RecordingEngine(outputs),
        tools=[weather, clock, *tools],
        profile="qwen3",
        system="You help with the weather.",
    )


def agent() -> agentkit.Agent[str]:
    """What ``--agent _hosted_app:agent`` serves: a zero-argument callable."""
    return make()


CURRENT: list[agentkit.Agent[str]] = []
"""The agent ``--agent _hosted_app:current`` serves: a test puts it here, so that one engine
(and its script) outlives a server's restart."""


def current() -> agentkit.Agent[str]:
    return CURRENT[-1]
