"""Exact replay at the token level: each prompt extends the previous prompt and output."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence

import pytest
from _hermes import hermes

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, ScriptedEngine, Usage
from agentkit.profiles import get_profile
from agentkit.transcript import Transcript

pytestmark = pytest.mark.anyio

SPECIAL = {"<|im_start|>": 1_000_001, "<|im_end|>": 1_000_002}
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL) + ")")
EOS = SPECIAL["<|im_end|>"]


def encode(text: str) -> list[int]:
    """A character-level tokenizer whose special tokens are single ids."""
    ids: list[int] = []
    for piece in _SPLIT.split(text):
        ids.extend([SPECIAL[piece]] if piece in SPECIAL else [ord(c) for c in piece])
    return ids


def decode(ids: Sequence[int]) -> str:
    names = {v: k for k, v in SPECIAL.items()}
    return "".join(names.get(i) or chr(i) for i in ids)


class TokenEngine:
    """Streams scripted outputs with token ids; ends with the EOS id unless told it ran out."""

    def __init__(self, outputs: list[tuple[str, str]]) -> None:
        self.outputs = outputs
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        return encode(text)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        text, finish = self.outputs[len(self.requests) - 1]
        for piece in ScriptedEngine([text])._outputs[0].chunks:
            assert isinstance(piece, str)
            yield GenerationChunk(text=piece, token_ids=encode(piece))
        # Like vLLM: the EOS id is in the token ids, its text is not.
        tail = [EOS] if finish == "stop" else []
        yield GenerationChunk(text="", token_ids=tail, finish_reason="stop", usage=Usage())


@agentkit.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_each_prompt_is_the_previous_prompt_plus_the_generated_tokens() -> None:
    outputs = [
        ("<think>\nfirst\n</think>\n\n" + hermes("lookup", key="a"), "stop"),
        ("<think>second</think>" + hermes("lookup", key="b"), "length"),  # no EOS generated
        ("Both looked up.", "stop"),
    ]
    engine = TokenEngine(outputs)
    agent = agentkit.Agent(engine=engine, tools=[lookup], system="sys", profile="qwen3")
    result = await agent.run("look a and b up")

    r1, _, r3 = engine.requests
    for request in engine.requests:
        assert request.prompt_token_ids is not None
        # The ids spell the same text that the template renders for the whole history.
        assert decode(request.prompt_token_ids) == request.prompt
    ids1, ids2, ids3 = (list(r.prompt_token_ids or []) for r in engine.requests)
    out1 = [*encode(outputs[0][0]), EOS]
    assert ids2[: len(ids1) + len(out1)] == ids1 + out1
    out2 = encode(outputs[1][0])  # stopped without EOS: the prompt closes the message itself
    assert ids3[: len(ids2) + len(out2)] == ids2 + out2
    assert decode(ids3[len(ids2) + len(out2) :]).startswith("<|im_end|>\n<|im_start|>user\n")
    # And the incrementally built text is exactly the template's full rendering.
    before_last_turn = Transcript(messages=result.transcript.messages[:-1])
    template_text = get_profile("qwen3").render(before_last_turn, agent.registry.specs())
    assert r3.prompt == template_text
    assert r1.prompt.startswith("<|im_start|>system\nsys")


async def test_engines_without_a_tokenizer_get_text_prompts() -> None:
    engine = ScriptedEngine([hermes("lookup", key="a"), "done"])
    agent = agentkit.Agent(engine=engine, tools=[lookup], profile="qwen3")
    await agent.run("go")
    assert all(r.prompt_token_ids is None for r in engine.requests)
    p1, p2 = (r.prompt for r in engine.requests)
    assert p2.startswith(p1)


async def test_request_options_reach_the_engine_per_turn() -> None:
    engine = ScriptedEngine([hermes("lookup", key="a"), "done"])
    seen: list[int] = []

    def options(turn: int, transcript: Transcript) -> dict[str, object]:
        seen.append(len(transcript.messages))
        return {"seed": turn}

    agent = agentkit.Agent(engine=engine, tools=[lookup], request_options=options, profile="qwen3")
    await agent.run("go")
    assert [r.extra for r in engine.requests] == [{"seed": 1}, {"seed": 2}]
    assert seen == [1, 3]

    fixed = ScriptedEngine(["ok"])
    await agentkit.Agent(engine=fixed, request_options={"priority": 5}, profile="qwen3").run("go")
    assert fixed.requests[0].extra == {"priority": 5}


def _assistant(text: str) -> agentkit.transcript.Message:
    """An assistant message as the agent records it: its raw text and generated ids (the
    EOS id last, as vLLM reports it)."""
    from agentkit.transcript import Message, TextBlock

    return Message(
        role="assistant",
        content=[TextBlock(text=text, raw=text)],
        token_ids=[*encode(text), EOS],
    )


@pytest.mark.parametrize("messages_between_prompts", [1, 2])
def test_the_next_prompt_extends_the_last_one_by_the_recorded_message(
    messages_between_prompts: int,
) -> None:
    from agentkit._prompt import PromptBuilder
    from agentkit.transcript import Message, TextBlock

    profile = get_profile("qwen3")
    builder = PromptBuilder(profile, TokenEngine([]), [])
    transcript = Transcript.from_prompt("first question")
    first = builder.next_prompt(transcript)
    assert first.token_ids is not None
    generated: list[int] = []
    for i in range(messages_between_prompts):
        message = _assistant(f"answer {i}")
        transcript.append(message)
        builder.record(transcript, message)
        assert message.token_ids is not None
        generated += message.token_ids
    transcript.append(Message(role="user", content=[TextBlock(text="second question")]))
    second = builder.next_prompt(transcript)

    assert second.token_ids is not None
    assert second.text == profile.render(transcript)
    if messages_between_prompts == 1:
        assert second.rebuilt is None  # extended, not re-rendered
        assert second.token_ids[: len(first.token_ids) + len(generated)] == (
            first.token_ids + generated
        )
    else:  # the second message's header is in no prompt: rendered anew
        assert second.rebuilt == "two assistant messages were recorded for one prompt"
    assert decode(second.token_ids) == second.text
    # The first prompt handed out is not changed by building the second.
    assert decode(first.token_ids) == first.text
