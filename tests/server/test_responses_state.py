"""Stateful Responses (``store``, ``previous_response_id``, ``GET``/``DELETE
/v1/responses/{id}``), with the official ``openai`` SDK as the client.

Each "process" is an app made by ``build_app`` (what ``agentkit serve`` runs) with its
lifespan entered and left, so the turn file is opened and closed as on a real start and
shutdown; a restart builds a new app, runtime and store over the same file. The scripted
engine outlives the restart (as a ``--remote`` vLLM behind a restarted ``agentkit serve``
does), so the cached prompt tokens it reports show what each prompt reuses.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseFunctionToolCall

from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile
from agentkit.server._serve import ServeOptions, build_app

pytestmark = pytest.mark.anyio

QWEN3 = get_profile("qwen3")
KEY = "test-key"
MODEL = "Qwen/Qwen3-8B"
INSTRUCTIONS = "You run shell commands when asked."
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def scripted(outputs: list[str]) -> TokenizedScriptedEngine:
    return TokenizedScriptedEngine(outputs, specials=QWEN3.special_tokens, stop=QWEN3.stop[0])


@pytest.fixture(autouse=True)
def sealing_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTKIT_SEALING_KEY", "s" * 32)
    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path / "cache"))


@asynccontextmanager
async def process(
    engine: TokenizedScriptedEngine, store: Path | None
) -> AsyncIterator[openai.AsyncOpenAI]:
    """One server process: started, serving the SDK, then shut down."""
    app, _, _ = build_app(
        ServeOptions(model=MODEL, profile="qwen3", engine=engine, turn_store=store, api_key=KEY)
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as http,
    ):
        yield openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key=KEY, http_client=http, max_retries=0
        )


def continues(engine: TokenizedScriptedEngine, outputs: list[str], turn: int) -> int:
    """The length of turn ``turn - 1``'s prompt and generated tokens (the stop token
    included), once checked to be where turn ``turn``'s prompt begins."""
    before, after = engine.requests[turn - 1], engine.requests[turn]
    assert before.prompt_token_ids is not None
    assert after.prompt_token_ids is not None
    generated = engine.encode(outputs[turn - 1]) + engine.encode(QWEN3.stop[0])
    history = [*before.prompt_token_ids, *generated]
    assert after.prompt_token_ids[: len(history)] == history, f"turn {turn} breaks the prefix"
    return len(history)


def cached(response: Response) -> int:
    assert response.usage is not None
    return response.usage.input_tokens_details.cached_tokens


def calls(response: Response) -> list[ResponseFunctionToolCall]:
    return [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]


def next_input(response: Response, turn: int) -> str | list[Any]:
    """What the client sends after ``response``: the outputs of its tool calls, or a new
    question."""
    pending = calls(response)
    if not pending:
        return f"And question {turn}?"
    return [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"ran {c.arguments}"}
        for c in pending
    ]


def agent_loop(turns: int) -> list[str]:
    """An agentic task of ``turns`` turns: reasoning and tool calls (two at once every fourth
    turn), then an answer. Qwen3 keeps reasoning in place within a task (its replay policy
    drops it only once a new user message follows), so every prompt can extend the last."""
    outputs = []
    for i in range(turns - 1):
        both = call("shell", command=f"ls {i}") if i % 4 == 0 else ""
        outputs.append(
            f"<think>\nStep {i}.\n</think>\n\n{call('shell', command=f'echo {i}')}{both}"
        )
    return [*outputs, "<think>\nDone.\n</think>\n\nAll done."]


async def test_a_twenty_turn_chain_survives_a_restart_token_for_token(tmp_path: Path) -> None:
    store = tmp_path / "turns.sqlite"
    outputs = agent_loop(20)
    engine = scripted(outputs)
    responses: list[Response] = []
    previous: Response | None = None
    for half in (range(10), range(10, 20)):
        async with process(engine, store) as client:
            for turn in half:
                response = await client.responses.create(
                    model=MODEL,
                    instructions=INSTRUCTIONS,
                    tools=[SHELL],  # type: ignore[list-item]
                    input="Start." if previous is None else next_input(previous, turn),
                    previous_response_id=previous.id if previous is not None else openai.omit,
                )
                assert response.status == "completed"
                assert response.store is True
                assert response.previous_response_id == (previous.id if previous else None)
                responses.append(response)
                previous = response
    assert len(engine.requests) == 20
    for turn in range(1, 20):
        # Each prompt extends the previous prompt and output, and the prefix cache says so,
        # across the restart (turn 10) as anywhere else.
        assert cached(responses[turn]) == continues(engine, outputs, turn)
    assert [len(calls(r)) for r in responses] == [2 if i % 4 == 0 else 1 for i in range(19)] + [0]
    assert responses[19].output_text == "All done."
    # Each call's output came back as a tool response after the call.
    assert 'ran {"command": "ls 0"}' in engine.requests[1].prompt
    # The instructions are the request's own, once, at the start.
    last = engine.requests[19].prompt
    assert last.startswith(f"<|im_start|>system\n{INSTRUCTIONS}")
    assert last.count(INSTRUCTIONS) == 1


async def test_retrieve_and_delete_with_the_sdk(tmp_path: Path) -> None:
    outputs = ["First answer.", "Second answer.", "Third answer.", "Fourth answer."]
    engine = scripted(outputs)
    async with process(engine, tmp_path / "turns.sqlite") as client:
        first = await client.responses.create(model=MODEL, input="One?", metadata={"k": "v"})
        again = await client.responses.retrieve(first.id)
        assert again.model_dump() == first.model_dump()
        assert again.output_text == "First answer."
        second = await client.responses.create(
            model=MODEL, input="Two?", previous_response_id=first.id
        )
        assert (await client.responses.retrieve(second.id)).previous_response_id == first.id
        # The input items of the request itself, each with an id, newest first by default.
        items = await client.responses.input_items.list(second.id)
        assert [i.type for i in items.data] == ["message"]
        assert items.data[0].id.startswith("msg_")
        assert items.data[0].content[0].text == "Two?"  # type: ignore[union-attr]
        # Deleting the first leaves the second, which continues it, usable.
        assert await client.responses.delete(first.id) is None
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError) as gone:
            await client.responses.create(model=MODEL, input="x", previous_response_id=first.id)
        assert gone.value.param == "previous_response_id"
        third = await client.responses.create(
            model=MODEL, input="Three?", previous_response_id=second.id
        )
        assert third.output_text == "Third answer."
        assert "One?" in engine.requests[2].prompt
        assert cached(third) == continues(engine, outputs, 2)
        # OpenAI's deletion object, on the wire.
        raw = await client.delete(f"/responses/{third.id}", cast_to=httpx.Response)
        assert raw.json() == {"id": third.id, "object": "response.deleted", "deleted": True}
        assert len(engine.requests) == 3


async def test_unknown_ids_and_the_api_key(tmp_path: Path) -> None:
    async with process(scripted(["Hi."]), tmp_path / "turns.sqlite") as client:
        for attempt in (
            client.responses.retrieve,
            client.responses.delete,
            client.responses.input_items.list,
        ):
            with pytest.raises(openai.NotFoundError) as missing:
                await attempt("resp_unknown")
            body = missing.value.body
            assert isinstance(body, dict)
            assert body["message"] == "Response with id 'resp_unknown' not found."
            assert body["type"] == "invalid_request_error"
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.responses.create(
                model=MODEL, input="hi", previous_response_id="resp_unknown"
            )
        assert unknown.value.param == "previous_response_id"
        assert "resp_unknown" in unknown.value.message
        response = await client.responses.create(model=MODEL, input="hi")
        stranger = client.with_options(api_key="wrong")
        with pytest.raises(openai.AuthenticationError):
            await stranger.responses.retrieve(response.id)
        with pytest.raises(openai.AuthenticationError):
            await stranger.responses.delete(response.id)
        with pytest.raises(openai.AuthenticationError):
            await stranger.responses.input_items.list(response.id)
        assert (await client.responses.retrieve(response.id)).id == response.id
        with pytest.raises(openai.BadRequestError, match="stream"):
            await client.responses.retrieve(response.id, stream=True)


async def test_store_false_keeps_nothing(tmp_path: Path) -> None:
    async with process(scripted(["Hi.", "Again.", "More."]), tmp_path / "turns.sqlite") as client:
        response = await client.responses.create(model=MODEL, input="hi", store=False)
        assert response.store is False
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(response.id)
        with pytest.raises(openai.NotFoundError) as refused:
            await client.responses.create(
                model=MODEL, input="and?", previous_response_id=response.id
            )
        assert refused.value.param == "previous_response_id"
        # A stored response continued without storing the new one.
        stored = await client.responses.create(model=MODEL, input="hi")
        unstored = await client.responses.create(
            model=MODEL, input="and?", previous_response_id=stored.id, store=False
        )
        assert unstored.previous_response_id == stored.id
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(unstored.id)


async def test_instructions_are_not_carried_over(tmp_path: Path) -> None:
    engine = scripted(["One.", "Two.", "Three."])
    async with process(engine, tmp_path / "turns.sqlite") as client:
        first = await client.responses.create(
            model=MODEL,
            instructions="Be terse.",
            input=[
                {"role": "developer", "content": "Project rules."},
                {"role": "user", "content": "Go."},
            ],
        )
        second = await client.responses.create(
            model=MODEL, input="More.", previous_response_id=first.id
        )
        await client.responses.create(
            model=MODEL, instructions="Be kind.", input="Last.", previous_response_id=second.id
        )
    one, two, three = (r.prompt for r in engine.requests)
    assert one.startswith("<|im_start|>system\nBe terse.\n\nProject rules.<|im_end|>")
    # The developer message was input, so it stays; the instructions were not.
    assert two.startswith("<|im_start|>system\nProject rules.<|im_end|>")
    assert "Be terse." not in two
    assert three.startswith("<|im_start|>system\nBe kind.\n\nProject rules.<|im_end|>")
    assert "One.<|im_end|>" in three
    assert "Two.<|im_end|>" in three


async def test_a_streamed_response_can_be_continued_at_once(tmp_path: Path) -> None:
    outputs = ["<think>\nLook.\n</think>\n\n" + call("shell", command="ls"), "Listed."]
    engine = scripted(outputs)
    async with process(engine, tmp_path / "turns.sqlite") as client:
        stream = await client.responses.create(
            model=MODEL,
            input="List.",
            tools=[SHELL],
            stream=True,  # type: ignore[list-item]
        )
        final: Response | None = None
        async for event in stream:
            if event.type == "response.completed":
                final = event.response
        assert final is not None
        assert final.store is True
        (shell,) = calls(final)
        second = await client.responses.create(
            model=MODEL,
            tools=[SHELL],  # type: ignore[list-item]
            input=[{"type": "function_call_output", "call_id": shell.call_id, "output": "a b"}],
            previous_response_id=final.id,
        )
        assert second.output_text == "Listed."
        assert cached(second) == continues(engine, outputs, 1)
        stored = await client.responses.retrieve(final.id)
        assert stored.model_dump() == final.model_dump()


async def test_a_memory_store_keeps_responses_until_the_restart(tmp_path: Path) -> None:
    """``--turn-store memory``: a chain works within the process (token for token), and a
    restarted server knows none of its responses."""
    outputs = [f"Answer {i}." for i in range(5)]
    engine = scripted(outputs)
    async with process(engine, None) as client:
        previous = await client.responses.create(model=MODEL, input="Question 0?")
        for turn in range(1, 4):
            response = await client.responses.create(
                model=MODEL, input=f"Question {turn}?", previous_response_id=previous.id
            )
            assert cached(response) == continues(engine, outputs, turn)
            previous = response
        assert (await client.responses.retrieve(previous.id)).output_text == "Answer 3."
    async with process(engine, None) as client:
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(previous.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(
                model=MODEL, input="Question 4?", previous_response_id=previous.id
            )


async def test_a_chain_outlives_a_new_sealing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored turn is the store's own: the sealed reasoning a response carried (for a
    stateless client) is not needed to continue it, even once the sealing key changed."""
    outputs = ["<think>\nLook.\n</think>\n\n" + call("shell", command="ls"), "Listed."]
    engine = scripted(outputs)
    store = tmp_path / "turns.sqlite"
    async with process(engine, store) as client:
        first = await client.responses.create(
            model=MODEL,
            input="List.",
            tools=[SHELL],  # type: ignore[list-item]
            include=["reasoning.encrypted_content"],
        )
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert reasoning[0].encrypted_content
    monkeypatch.setenv("AGENTKIT_SEALING_KEY", "t" * 32)
    async with process(engine, store) as client:
        (shell,) = calls(first)
        second = await client.responses.create(
            model=MODEL,
            tools=[SHELL],  # type: ignore[list-item]
            input=[{"type": "function_call_output", "call_id": shell.call_id, "output": "a"}],
            previous_response_id=first.id,
        )
    assert second.output_text == "Listed."
    assert cached(second) == continues(engine, outputs, 1)
