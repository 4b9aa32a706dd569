"""``agentkit serve --agent``: a user's agent over Responses and Chat Completions, driven by the
official ``openai`` SDK. The agent's two tools run on the server mid-stream and are shown as
server-side work (``mcp_call`` items, Chat's ``agentkit_server_tool``); the client's tool
comes back as a function call; the client answers it and the conversation continues, each
prompt extending the previous one token for token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from _harness import eventually, running
from _hosted_app import ASK, CURRENT, KEY, ORDER, SCRIPT, RecordingEngine, make
from _toolsets import FakeToolset
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses.response_output_item import McpCall

import agentkit
from agentkit.server._app import ServerConfig, create_app
from agentkit.server._hosted_routes import hosted_routes
from agentkit.server._runtime import ServerRuntime
from agentkit.server._serve import ServeOptions, build_app

pytestmark = pytest.mark.anyio

CHAT_ASK = {
    "type": "function",
    "function": {k: v for k, v in ASK.items() if k != "type"},
}


def app_for(agent: agentkit.Agent[str], **config: Any) -> Any:
    runtime = ServerRuntime(agent.engine, agent.profile)
    settings = ServerConfig(model_name="hosted", api_key=KEY, **config)
    return create_app(runtime, settings, adapters=[hosted_routes(agent)])


@asynccontextmanager
async def client(agent: agentkit.Agent[str]) -> AsyncIterator[openai.AsyncOpenAI]:
    app = app_for(agent)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as http:
        yield openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key=KEY, http_client=http, max_retries=0
        )


def extends(engine: RecordingEngine, turn: int) -> None:
    """Model request ``turn``'s prompt begins with request ``turn - 1``'s prompt and the
    tokens generated for it (the stop token included)."""
    before, after = engine.requests[turn - 2], engine.requests[turn - 1]
    assert before.prompt_token_ids is not None
    assert after.prompt_token_ids is not None
    generated = engine.encode(SCRIPT[turn - 2]) + engine.encode("<|im_end|>")
    history = [*before.prompt_token_ids, *generated]
    assert after.prompt_token_ids[: len(history)] == history, f"request {turn} breaks the prefix"


@pytest.fixture(autouse=True)
def fresh_order() -> None:
    ORDER.clear()


# -- Responses -------------------------------------------------------------------------------


async def test_responses_stream_runs_the_servers_tools_mid_stream_and_returns_the_clients() -> None:
    agent = make()
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        events = []
        async with sdk.responses.stream(
            model="hosted", input="Weather in Paris?", tools=[ASK]
        ) as stream:
            async for event in stream:
                events.append(event)
            first = await stream.get_final_response()

        # The server's tools ran while the model was still generating its first turn.
        assert ORDER.index("start:weather") < ORDER.index("end:1")
        assert ORDER.index("start:clock") < ORDER.index("end:2")
        kinds = [e.type for e in events]
        weather_done = next(
            i
            for i, e in enumerate(events)
            if e.type == "response.mcp_call.completed"
            and first.output[e.output_index].name == "weather"  # type: ignore[union-attr]
        )
        clock_added = next(
            i
            for i, e in enumerate(events)
            if e.type == "response.output_item.added" and getattr(e.item, "name", "") == "clock"
        )
        assert weather_done < clock_added  # weather's result streamed before clock's call
        assert "response.mcp_call_arguments.delta" in kinds
        assert "response.mcp_call.in_progress" in kinds

        mcp = [item for item in first.output if isinstance(item, McpCall)]
        assert [(m.name, json.loads(m.arguments), m.output, m.status) for m in mcp] == [
            ("weather", {"city": "Paris"}, "21 degrees Celsius in Paris", "completed"),
            ("clock", {}, "12:00", "completed"),
        ]
        assert {m.server_label for m in mcp} == {"agentkit"}
        [ask] = [item for item in first.output if isinstance(item, ResponseFunctionToolCall)]
        assert ask.name == "ask_user"
        assert json.loads(ask.arguments) == {"question": "Celsius or Fahrenheit?"}
        assert len(engine.requests) == 2  # the run ended at the client's call

        final = await sdk.responses.create(
            model="hosted",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": ask.call_id, "output": "Celsius"}],
            tools=[ASK],
        )
        stored = await sdk.responses.retrieve(first.id)
        kept = [item.model_dump() for item in stored.output if isinstance(item, McpCall)]
        assert kept == [item.model_dump() for item in mcp]  # as they were returned
        await sdk.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            await sdk.responses.retrieve(first.id)
    assert final.output_text == "It is 21 degrees Celsius in Paris at 12:00."
    extends(engine, 2)
    extends(engine, 3)
    assert "Celsius" in engine.requests[2].prompt


async def test_responses_stateless_clients_send_the_mcp_items_back() -> None:
    agent = make()
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        first = await sdk.responses.create(
            model="hosted", input="Weather in Paris?", tools=[ASK], store=False
        )
        [ask] = [item for item in first.output if isinstance(item, ResponseFunctionToolCall)]
        conversation: list[Any] = [
            {"role": "user", "content": "Weather in Paris?"},
            *(item.model_dump(exclude_none=True) for item in first.output),
            {"type": "function_call_output", "call_id": ask.call_id, "output": "Celsius"},
        ]
        final = await sdk.responses.create(
            model="hosted", input=conversation, tools=[ASK], store=False
        )
    assert final.output_text == "It is 21 degrees Celsius in Paris at 12:00."
    extends(engine, 3)  # the server's turns and results restored exactly


async def test_a_client_tool_named_like_an_agent_tool_is_a_400() -> None:
    clash = {**ASK, "name": "weather"}
    async with client(make()) as sdk:
        with pytest.raises(openai.BadRequestError, match="weather"):
            await sdk.responses.create(model="hosted", input="hi", tools=[clash])
        with pytest.raises(openai.BadRequestError, match="weather"):
            await sdk.chat.completions.create(
                model="hosted",
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "function", "function": {"name": "weather"}}],
            )
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            await sdk.responses.create(
                model="hosted",
                input="hi",
                tool_choice={"type": "function", "name": "nowhere"},
            )


@agentkit.tool
async def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError(f"no data for {city}")


async def test_a_failing_server_tool_is_a_failed_mcp_call_the_model_recovers_from() -> None:
    from _hosted_app import hermes

    outputs = [hermes("broken", city="Oslo"), "Sorry, no data for Oslo."] * 2
    async with client(make(outputs, broken)) as sdk:
        response = await sdk.responses.create(model="hosted", input="Oslo?", tools=[ASK])
        chat = await sdk.chat.completions.create(
            model="hosted", messages=[{"role": "user", "content": "Oslo?"}]
        )
    [failed] = [item for item in response.output if isinstance(item, McpCall)]
    assert failed.status == "failed"
    assert failed.error is not None
    assert "no data for Oslo" in (failed.output or "")
    assert [i for i in response.output if isinstance(i, ResponseOutputMessage)]
    assert response.output_text == "Sorry, no data for Oslo."
    [shown] = (chat.choices[0].message.model_extra or {})["agentkit_server_tools"]
    assert shown["is_error"]
    assert "no data for Oslo" in shown["output"]
    assert chat.choices[0].message.content == "Sorry, no data for Oslo."


async def test_a_client_tool_call_the_agent_cannot_read_never_reaches_the_client() -> None:
    # The agent answers a call it cannot parse with an error result and the run goes on: the
    # client must not see a function_call to run, streamed or in the response. (Arguments
    # that parse but miss the schema go to the client, as the API returns them unchecked.)
    bad_call = '<tool_call>\n{"name": "ask_user", "arguments": {"question": }}\n</tool_call>'
    outputs = [bad_call, "Which unit do you prefer?"]
    async with client(make(outputs)) as sdk:
        stream = await sdk.responses.create(
            model="hosted", input="Weather?", tools=[ASK], stream=True
        )
        events = [event async for event in stream]
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert "function_call" not in added
    final = next(e.response for e in events if e.type == "response.completed")
    assert not [i for i in final.output if isinstance(i, ResponseFunctionToolCall)]
    [failed] = [i for i in final.output if isinstance(i, McpCall)]
    assert failed.status == "failed"
    assert final.output_text == "Which unit do you prefer?"


# -- Chat Completions ------------------------------------------------------------------------


async def test_chat_stream_shows_server_tools_in_the_extension_and_continues_exactly() -> None:
    agent = make()
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        stream = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[CHAT_ASK],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        server: list[dict[str, Any]] = []
        content = ""
        calls: dict[int, dict[str, str]] = {}
        finish = None
        usage = None
        async for chunk in stream:
            if not chunk.choices:
                usage = chunk.usage or usage
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            extra = delta.model_extra or {}
            if "agentkit_server_tool" in extra:
                server.append(extra["agentkit_server_tool"])
            content += delta.content or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
        assert ORDER.index("start:weather") < ORDER.index("end:1")
        assert [(s["type"], s["name"]) for s in server] == [
            ("call", "weather"),
            ("result", "weather"),
            ("call", "clock"),
            ("result", "clock"),
        ]
        assert server[1]["output"] == "21 degrees Celsius in Paris"
        assert finish == "tool_calls"
        assert usage is not None  # the run's two model turns, added up
        assert usage.completion_tokens == sum(
            len(engine.encode(output)) + 1 for output in SCRIPT[:2]
        )
        [ask] = calls.values()
        assert ask["name"] == "ask_user"

        final = await sdk.chat.completions.create(
            model="hosted",
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": ask["id"],
                            "type": "function",
                            "function": {"name": "ask_user", "arguments": ask["arguments"]},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": ask["id"], "content": "Celsius"},
            ],
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
    assert final.choices[0].message.content == "It is 21 degrees Celsius in Paris at 12:00."
    assert (final.choices[0].message.model_extra or {})["agentkit_server_tools"] == []
    extends(engine, 2)
    extends(engine, 3)  # the hidden turns restored: the client never sent them


async def test_a_chat_client_tool_call_the_agent_cannot_read_never_reaches_the_client() -> None:
    bad_call = '<tool_call>\n{"name": "ask_user", "arguments": {"question": }}\n</tool_call>'
    async with client(make([bad_call, "Which unit do you prefer?"])) as sdk:
        stream = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather?"}],
            tools=[CHAT_ASK],
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    calls = [c for chunk in chunks for ch in chunk.choices for c in ch.delta.tool_calls or []]
    assert calls == []
    reasons = [ch.finish_reason for chunk in chunks for ch in chunk.choices if ch.finish_reason]
    assert reasons == ["stop"]
    text = "".join(ch.delta.content or "" for chunk in chunks for ch in chunk.choices)
    assert text.endswith("Which unit do you prefer?")


async def test_chat_without_streaming_lists_the_server_tools_on_the_message() -> None:
    async with client(make()) as sdk:
        first = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
    message = first.choices[0].message
    shown = (message.model_extra or {})["agentkit_server_tools"]
    assert [(s["name"], s["output"], s["is_error"]) for s in shown] == [
        ("weather", "21 degrees Celsius in Paris", False),
        ("clock", "12:00", False),
    ]
    assert [c.function.name for c in message.tool_calls or []] == ["ask_user"]  # type: ignore[union-attr]
    assert first.choices[0].finish_reason == "tool_calls"


# -- a client that leaves --------------------------------------------------------------------


@agentkit.tool
async def slow() -> str:
    """A tool that takes as long as it is allowed to."""
    ORDER.append("start:slow")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        ORDER.append("cancelled:slow")
        raise
    return "done"


def test_a_client_that_leaves_mid_run_aborts_the_model_and_cancels_the_servers_tools() -> None:
    from _hosted_app import hermes

    long_answer = "and so on " * 2000  # minutes of tokens at the engine's delay
    agent = make([hermes("slow") + long_answer, "Next."], slow)
    app = app_for(agent, max_concurrency=1)
    headers = {"authorization": f"Bearer {KEY}"}
    request = {"model": "hosted", "input": "go", "stream": True}
    with running(app) as url:
        with (
            httpx.Client(base_url=url, headers=headers, timeout=10) as http,
            http.stream("POST", "/v1/responses", json=request) as response,
        ):
            assert response.status_code == 200
            for line in response.iter_lines():
                if "response.mcp_call.in_progress" in line:
                    break  # the tool is dispatched, the model still generating: leave
        assert eventually(lambda: "cancelled:slow" in ORDER), ORDER
        assert "aborted:1" in ORDER  # the model's request was aborted too
        assert eventually(lambda: stats(url)["in_flight"] == 0)
        with httpx.Client(base_url=url, headers=headers, timeout=10) as http:
            following = http.post("/v1/responses", json={"model": "hosted", "input": "again"})
        assert following.status_code == 200, following.text  # the slot is free
        assert following.json()["output"][-1]["content"][0]["text"] == "Next."


def stats(url: str) -> dict[str, int]:
    response = httpx.get(url + "/v1/stats", headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    data: dict[str, int] = response.json()
    return data


async def test_chat_restores_hidden_turns_only_in_their_own_conversation() -> None:
    agent = make([*SCRIPT[:2], "Fine."])
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        first = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
        message = first.choices[0].message
        [ask] = message.tool_calls or []
        # Another conversation that ends with the same answer must not get this run's turns.
        await sdk.chat.completions.create(
            model="hosted",
            messages=[
                {"role": "user", "content": "Something else entirely"},
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [ask.model_dump()],
                },
                {"role": "tool", "tool_call_id": ask.id, "content": "Celsius"},
            ],
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
    assert "21 degrees Celsius in Paris" in engine.requests[1].prompt  # the first run's
    assert "21 degrees Celsius in Paris" not in engine.requests[2].prompt


async def test_tool_choice_applies_to_the_runs_first_turn_and_may_name_either_side() -> None:
    from _hosted_app import hermes

    agent = make([hermes("weather", city="Paris"), "Done.", hermes("ask_user", question="?")])
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        answered = await sdk.responses.create(
            model="hosted",
            input="Weather?",
            tools=[ASK],
            tool_choice={"type": "function", "name": "weather"},  # the agent's tool
        )
        asked = await sdk.chat.completions.create(
            model="hosted",
            messages=[{"role": "user", "content": "Ask me."}],
            tools=[CHAT_ASK],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "ask_user"}},  # the client's
        )
    assert answered.output_text == "Done."
    first, second, third = engine.requests
    assert "structured_outputs" in first.extra  # the first turn is held to the named tool
    assert "structured_outputs" not in second.extra  # later turns are "auto"
    assert "structured_outputs" in third.extra
    assert [c.function.name for c in asked.choices[0].message.tool_calls or []] == ["ask_user"]  # type: ignore[union-attr]


async def test_chat_continues_token_for_token_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_SEALING_KEY", "s" * 32)
    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path / "cache"))
    agent = make()
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    CURRENT.append(agent)
    store = tmp_path / "turns.sqlite"
    asked = [{"role": "user", "content": "Weather in Paris?"}]
    async with serving(store) as sdk:
        first = await sdk.chat.completions.create(
            model="hosted",
            messages=asked,  # type: ignore[arg-type]
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
    message = first.choices[0].message
    [ask] = message.tool_calls or []
    async with serving(store) as sdk:  # a new process over the same turn file
        final = await sdk.chat.completions.create(
            model="hosted",
            messages=[  # type: ignore[list-item]
                *asked,
                {"role": "assistant", "content": message.content, "tool_calls": [ask.model_dump()]},
                {"role": "tool", "tool_call_id": ask.id, "content": "Celsius"},
            ],
            tools=[CHAT_ASK],  # type: ignore[list-item]
        )
    assert final.choices[0].message.content == "It is 21 degrees Celsius in Paris at 12:00."
    extends(engine, 3)


@asynccontextmanager
async def serving(store: Path | None) -> AsyncIterator[openai.AsyncOpenAI]:
    """One ``agentkit serve --agent _hosted_app:current`` process, its lifespan entered (the
    turn file opened, then closed)."""
    app, _, _ = build_app(ServeOptions(agent="_hosted_app:current", turn_store=store, api_key=KEY))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as http,
    ):
        yield openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key=KEY, http_client=http, max_retries=0
        )


def test_an_agent_that_holds_calls_for_approval_needs_a_handler_to_be_hosted() -> None:
    from agentkit.errors import ConfigurationError

    @agentkit.tool(requires_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        return path

    with pytest.raises(ConfigurationError, match="approval_handler"):
        app_for(make(SCRIPT, delete))


async def test_the_clients_system_text_follows_the_agents_own() -> None:
    agent = make(["Hello.", "Hello."])
    engine = agent.engine
    assert isinstance(engine, RecordingEngine)
    async with client(agent) as sdk:
        await sdk.responses.create(model="hosted", input="Hi", instructions="Be brief.")
        await sdk.chat.completions.create(
            model="hosted",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
        )
    for request in engine.requests:
        assert "You help with the weather.\n\nBe brief." in request.prompt


async def test_a_hosted_agents_toolsets_run_as_long_as_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _hosted_app import hermes

    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path / "cache"))
    docs = FakeToolset("docs", "lookup")
    agent = agentkit.Agent(
        engine=RecordingEngine([hermes("lookup"), "Done."] * 2),
        tools=[docs],
        profile="qwen3",
    )
    CURRENT.append(agent)
    async with serving(None) as sdk:
        for _ in range(2):
            response = await sdk.responses.create(model="hosted", input="Find it.")
            [call] = [item for item in response.output if isinstance(item, McpCall)]
            assert call.output == "docs.lookup"
        assert (docs.started, docs.closed) == (1, 0)  # not once per request
    assert (docs.started, docs.closed) == (1, 1)
