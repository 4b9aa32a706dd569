"""Quickstart: an agent with two tools, streaming its events as they happen.

The engine here is scripted: it replays what a Qwen3 model would write, markers and all, at
a steady token rate, so you can watch each tool start while the model is still generating.
Swap in a real engine and the rest of the program stays the same.

    python examples/quickstart.py
"""

from __future__ import annotations

import json
import sys

import anyio

import agentkit
from agentkit.engine import ScriptedEngine

DIM, RESET = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
CITY_TEMPERATURES_C = {"Paris": 18.5, "Lisbon": 23.0}


@agentkit.tool
async def get_temperature(city: str) -> dict[str, object]:
    """Current temperature in a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    await anyio.sleep(0.05)  # a network call would go here
    if city not in CITY_TEMPERATURES_C:
        raise ValueError(f"no weather station for {city!r}")
    return {"city": city, "celsius": CITY_TEMPERATURES_C[city]}


@agentkit.tool
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from Celsius to Fahrenheit.

    Args:
        celsius: Degrees Celsius.
    """
    return round(celsius * 9 / 5 + 32, 1)


def call(name: str, **arguments: object) -> str:
    payload = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{payload}\n</tool_call>"


SCRIPT = [
    # Turn 1: reason, call, reason again, call again; both tools start mid-stream.
    "<think>\nThe user wants Paris and Lisbon. I'll fetch Paris first.\n</think>\n\n"
    + call("get_temperature", city="Paris")
    + "\n<think>\nAnd Lisbon, in parallel.\n</think>\n\n"
    + call("get_temperature", city="Lisbon"),
    # Turn 2: convert the warmer one.
    "<think>\nLisbon is warmer at 23.0 C. Convert it for the user.\n</think>\n\n"
    + call("celsius_to_fahrenheit", celsius=23.0),
    # Turn 3: the answer.
    "<think>\n23 C is 73.4 F.\n</think>\n\n"
    "Lisbon is warmer today: 23.0 °C (73.4 °F), against 18.5 °C in Paris.",
]


async def main() -> None:
    engine = ScriptedEngine(SCRIPT, token_delay=0.01)
    agent = agentkit.Agent(
        engine=engine,
        tools=[get_temperature, celsius_to_fahrenheit],
        profile="qwen3",
        system="You are a concise weather assistant.",
    )
    async with agent.stream("Which is warmer today, Paris or Lisbon?") as events:
        async for event in events:
            match event.type:
                case "reasoning_delta":
                    print(f"{DIM}{event.text}{RESET}", end="", flush=True)
                case "text_delta":
                    print(event.text, end="", flush=True)
                case "tool_call_complete":
                    print(f"\n  -> dispatch {event.name}({json.dumps(event.arguments)})")
                case "tool_result":
                    print(f"\n  <- {event.name} returned {event.content}")
                case "turn_complete":
                    print(f"\n[turn {event.turn}: {event.tool_calls} tool call(s)]\n")
    result = events.result
    print(f"\nAnswer: {result.output_text}")
    print(f"Turns: {len(result.usage.turns)}, output tokens: {result.usage.output_tokens}")


if __name__ == "__main__":
    anyio.run(main)
