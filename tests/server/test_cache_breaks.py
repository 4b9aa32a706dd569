"""A conversation whose assistant turns this server did not generate is rendered
canonically: one WARNING per request says how many turns and why the first did not match,
whichever API it came through (not one record per turn: a long conversation imported from
elsewhere would flood the log)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _intake import build, client

pytestmark = pytest.mark.anyio

TURNS = 3


def conversation(api: str) -> tuple[str, dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for n in range(TURNS):
        turns.append({"role": "user", "content": f"question {n}"})
        turns.append({"role": "assistant", "content": f"answer {n}"})
    turns.append({"role": "user", "content": "last question"})
    if api == "anthropic":
        return "/v1/messages", {"model": "m", "max_tokens": 4, "messages": turns}
    if api == "chat":
        return "/v1/chat/completions", {"model": "m", "max_tokens": 4, "messages": turns}
    return "/v1/responses", {"model": "m", "max_output_tokens": 4, "input": turns}


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
async def test_one_warning_per_request_counts_the_turns(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentkit.server")
    path, body = conversation(api)
    async with client(build()) as c:
        response = await c.post(path, json=body)
    assert response.status_code == 200, response.text
    breaks = [r.getMessage() for r in caplog.records if "cache break" in r.getMessage()]
    assert len(breaks) == 1, breaks
    assert f"turns={TURNS}" in breaks[0]
