"""Typed output: the agent's final answer as a validated pydantic model.

The model thinks, calls a tool, then answers with JSON that ``Agent(output_type=Forecast)``
validates into a ``Forecast``. Its first answer here is wrong (a temperature as words), so the
model is shown the validation error and answers again.

The engine is scripted (it replays what a Qwen3 model would write), so this runs offline in
a moment. With ``VLLMEngine`` or ``RemoteEngine`` the answer is also constrained to the schema
while it is generated, after the model's reasoning; see docs/typed-output.md.

    python examples/typed_output.py
"""

from __future__ import annotations

import json
from typing import Literal

import anyio
from pydantic import BaseModel, Field

import agentkit
from agentkit.engine import ScriptedEngine


class Forecast(BaseModel):
    """What the caller wants back: typed, validated, ready to use."""

    city: str
    celsius: float = Field(description="Temperature in degrees Celsius")
    sky: Literal["clear", "cloudy", "rain"]
    take_umbrella: bool


@agentkit.tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather in a city.

    Args:
        city: The city's name, e.g. "Lisbon".
    """
    return {"city": city, "celsius": 23.0, "conditions": "light rain"}


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


SCRIPT = [
    # Turn 1: think, then call the tool.
    "<think>\nI need the current weather in Lisbon.\n</think>\n\n"
    + call("get_weather", city="Lisbon"),
    # Turn 2: an answer that does not validate: celsius is words, not a number.
    "<think>\nLight rain, 23 degrees.\n</think>\n\n"
    '{"city": "Lisbon", "celsius": "twenty-three", "sky": "rain", "take_umbrella": true}',
    # Turn 3: the model read the error and fixes its answer.
    "<think>\nThe temperature must be a number.\n</think>\n\n"
    '```json\n{"city": "Lisbon", "celsius": 23.0, "sky": "rain", "take_umbrella": true}\n```',
]


async def main() -> None:
    agent = agentkit.Agent(
        ScriptedEngine(SCRIPT),
        tools=[get_weather],
        profile="qwen3",
        system="You are a weather assistant.",
        output_type=Forecast,
        output_retries=2,
    )
    result = await agent.run("Do I need an umbrella in Lisbon today?")
    forecast: Forecast = result.output
    print(f"{forecast.city}: {forecast.celsius} °C, {forecast.sky}")
    print("Take an umbrella." if forecast.take_umbrella else "No umbrella needed.")
    retries = [m for m in result.transcript.messages[2:] if m.role == "user"]
    print(f"Turns: {len(result.usage.turns)}, answers corrected: {len(retries)}")
    for message in retries:
        print(f"  the model was told: {message.text.splitlines()[1]}")
    if forecast != Forecast(city="Lisbon", celsius=23.0, sky="rain", take_umbrella=True):
        raise SystemExit(f"unexpected forecast: {forecast!r}")


if __name__ == "__main__":
    anyio.run(main)
