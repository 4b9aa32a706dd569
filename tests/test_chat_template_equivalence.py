"""agentkit's prompts against the models' own chat templates.

agentkit renders prompts in Python (``ChatMLTemplate``) and extends them token by token across
turns (``PromptBuilder``). Wherever the model's chat template is itself prefix-stable, the two
must be the same text, byte for byte: the model was trained on the template's form.

Qwen3's template is not prefix-stable across user turns: it drops the ``<think>`` block of every
assistant message before the last user query. The qwen3 profile's replay policy,
``drop_on_plain_turns``, does the same, and the prompts are equal; under ``keep_all`` agentkit
keeps that reasoning in place (the prefix cache then covers the whole history), and the tests
state the difference exactly instead of skipping it.

The transcripts are converted to the OpenAI-style messages a client sends
(``role``/``content``/``reasoning_content``/``tool_calls``, one ``tool`` message per result),
and rendered as ``apply_chat_template(messages, tools=tools, add_generation_prompt=True,
tokenize=False)`` would render them (see ``_reference_templates``: the templates are read from
the shared reference folder, never copied into the project). SmolLM2's template is checked in
the slow suite (``tests/slow/test_smollm2_template.py``), as its wheel comes with the cpu extra.

Where agentkit's prompt differs from the template in a prefix-stable part, that is a bug: the
tests expect the template's text (the per-family conformance tests in ``tests/conformance/``
check the standard conversations and pin each deliberate difference).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest
from _reference_templates import QWEN3, QWEN3_CODER, apply_chat_template

import agentkit
from agentkit.engine import GenerationChunk, GenerationRequest, Usage
from agentkit.profiles import ChatMLTemplate, ToolSpec, get_profile
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    Role,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

LOOKUP: ToolSpec = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a key up.",
        "parameters": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "The key."},
                "limit": {"default": 3, "type": "integer"},
            },
            "required": ["key"],
            "additionalProperties": False,
        },
    },
}
WRITE: ToolSpec = {
    "type": "function",
    "function": {
        "name": "write",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
}
"""A tool whose schema has nothing but types: the part of Qwen3-Coder's tool list that
agentkit writes as the template does."""
TOOLS = [LOOKUP, WRITE]


def openai_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """The messages a chat-completions client would send for ``transcript``.

    An assistant's content leaves out the newline between its text and its first call: the
    parser keeps it in the text block (``"Looking.\\n"``), but it is the template's separator,
    which the template writes itself.
    """
    out: list[dict[str, Any]] = []
    for message in transcript.messages:
        if message.role == "tool":
            out.extend(
                {"role": "tool", "tool_call_id": b.call_id, "name": b.name, "content": b.content}
                for b in message.content
                if isinstance(b, ToolResultBlock)
            )
            continue
        text = message.text
        if message.tool_calls and text.endswith("\n"):
            text = text[:-1]
        item: dict[str, Any] = {"role": message.role, "content": text}
        reasoning = [b.text for b in message.content if isinstance(b, ReasoningBlock)]
        if reasoning:
            item["reasoning_content"] = "".join(reasoning)
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        out.append(item)
    return out


def think(text: str) -> str:
    return f"<think>\n{text}\n</think>\n\n"


def call(call_id: str, name: str, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, arguments=arguments)


def result(call_id: str, content: str, name: str = "lookup") -> Message:
    return Message(
        role="tool", content=[ToolResultBlock(call_id=call_id, name=name, content=content)]
    )


def conversation(*messages: Message | tuple[Role, str]) -> Transcript:
    transcript = Transcript()
    for message in messages:
        if isinstance(message, Message):
            transcript.append(message)
        else:
            transcript.add(*message)
    return transcript


def assistant(*blocks: ReasoningBlock | TextBlock | ToolCallBlock) -> Message:
    return Message(role="assistant", content=list(blocks))


SYSTEM: tuple[Role, str] = ("system", "You are terse.")
USER: tuple[Role, str] = ("user", "Look up a and b, then tell me the sum.")


# ---------------------------------------------------------------------------------------------
# Qwen3: the current task (everything from the last user message on) is prefix-stable.

QWEN3_CURRENT_TASK: dict[str, tuple[Transcript, Sequence[ToolSpec]]] = {
    "system and user": (conversation(SYSTEM, USER), ()),
    "user only": (conversation(USER), ()),
    "user and tools, no system": (conversation(USER), TOOLS),
    "system, user and tools": (conversation(SYSTEM, USER), TOOLS),
    "a call and its result": (
        conversation(
            SYSTEM,
            USER,
            assistant(
                ReasoningBlock(text="I need a first."),
                TextBlock(text="Looking a up."),
                call("c1", "lookup", key="a"),
            ),
            result("c1", "1"),
        ),
        TOOLS,
    ),
    "several calls in one turn, several results": (
        conversation(
            SYSTEM,
            USER,
            assistant(
                ReasoningBlock(text="Both at once."),
                call("c1", "lookup", key="a"),
                call("c2", "lookup", key="b", limit=1),
                call("c3", "write", path="notes/é.txt", content='a\n"b"\t<c> ü'),
            ),
            Message(
                role="tool",
                content=[
                    ToolResultBlock(call_id="c1", name="lookup", content="1"),
                    ToolResultBlock(call_id="c2", name="lookup", content="2"),
                ],
            ),
            result("c3", "written", name="write"),
        ),
        TOOLS,
    ),
    "calls with nested, non-ASCII and non-string arguments": (
        conversation(
            USER,
            assistant(
                call("c1", "lookup", key="café", limit=2, options={"deep": [True, None, 1.5]}),
            ),
            result("c1", '{"value": "ü"}'),
        ),
        TOOLS,
    ),
    "several tool turns, reasoning kept in each": (
        conversation(
            SYSTEM,
            USER,
            assistant(ReasoningBlock(text="a first."), call("c1", "lookup", key="a")),
            result("c1", "1"),
            assistant(
                ReasoningBlock(text="\nnow b.\n"),  # newlines around reasoning are stripped
                TextBlock(text="Now b."),
                call("c2", "lookup", key="b"),
            ),
            result("c2", "2"),
        ),
        TOOLS,
    ),
    "a turn without reasoning": (
        conversation(
            SYSTEM,
            USER,
            assistant(TextBlock(text="Looking."), call("c1", "lookup", key="a")),
            result("c1", "1"),
        ),
        TOOLS,
    ),
}


@pytest.mark.parametrize("case", QWEN3_CURRENT_TASK)
def test_qwen3_current_task_is_the_chat_template(case: str) -> None:
    transcript, tools = QWEN3_CURRENT_TASK[case]
    expected = apply_chat_template(QWEN3, openai_messages(transcript), tools)
    assert get_profile("qwen3").render(transcript, tools) == expected


def _two_user_turns() -> Transcript:
    return conversation(
        SYSTEM,
        USER,
        assistant(
            ReasoningBlock(text="I need a."),
            TextBlock(text="Looking."),
            call("c1", "lookup", key="a"),
        ),
        result("c1", "1"),
        assistant(ReasoningBlock(text="Got it."), TextBlock(text="a is 1.")),
        ("user", "And b?"),
        assistant(ReasoningBlock(text="Now b."), call("c2", "lookup", key="b")),
        result("c2", "2"),
    )


def test_qwen3_drops_reasoning_before_the_last_user_query_and_agentkit_keeps_it() -> None:
    transcript = _two_user_turns()
    template = apply_chat_template(QWEN3, openai_messages(transcript), TOOLS)
    rendered = get_profile("qwen3").render(transcript, TOOLS)

    # The one difference: the first task's two <think> blocks, which the template drops.
    earlier = ["I need a.", "Got it."]
    assert "<think>" not in template.split("And b?")[0]
    assert rendered != template
    without = rendered
    for text in earlier:
        assert think(text) in without
        without = without.replace(think(text), "", 1)
    assert without == template

    # From the last user message on (the current task), they are the same text.
    last_user = "<|im_start|>user\nAnd b?<|im_end|>\n"
    assert rendered.split(last_user)[1] == template.split(last_user)[1]
    assert think("Now b.") in template.split(last_user)[1]

    # Which is why agentkit keeps it: the template's rendering of the first task is not a
    # prefix of its rendering once the user asks again; agentkit's is.
    first_task = Transcript(messages=transcript.messages[:5])
    before = apply_chat_template(
        QWEN3, openai_messages(first_task), TOOLS, add_generation_prompt=False
    )
    assert not template.startswith(before)
    profile_template = get_profile("qwen3").template
    assert isinstance(profile_template, ChatMLTemplate)
    assert rendered.startswith(
        profile_template.render(first_task, TOOLS, add_generation_prompt=False)
    )


def test_qwen3_newline_between_text_and_a_call() -> None:
    # A model writes "Looking.\n<tool_call>", the template's separator included; the parser
    # keeps that newline in the text ("Looking.\n") and the renderer writes no second one. A
    # client's content ("Looking.") gets the same text from the template.
    for text in ("Looking.", "Looking.\n"):
        transcript = conversation(
            USER, assistant(TextBlock(text=text), call("c1", "lookup", key="a")), result("c1", "1")
        )
        rendered = get_profile("qwen3").render(transcript, TOOLS)
        assert "Looking.\n<tool_call>" in rendered
        messages = openai_messages(transcript)
        assert messages[1]["content"] == "Looking."
        assert apply_chat_template(QWEN3, messages, TOOLS) == rendered
    # Given the newline in the content, the template would write it twice.
    messages[1]["content"] = "Looking.\n"
    assert "Looking.\n\n<tool_call>" in apply_chat_template(QWEN3, messages, TOOLS)


# ---------------------------------------------------------------------------------------------
# Qwen3, incrementally: the prompts the agent sends, built token by token by PromptBuilder.

SPECIAL = {"<|im_start|>": 1_000_001, "<|im_end|>": 1_000_002}
EOS = SPECIAL["<|im_end|>"]
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL) + ")")


def encode(text: str) -> list[int]:
    """A character-level tokenizer whose special tokens are single ids."""
    ids: list[int] = []
    for piece in _SPLIT.split(text):
        ids.extend([SPECIAL[piece]] if piece in SPECIAL else [ord(c) for c in piece])
    return ids


class TokenEngine:
    """Streams scripted outputs with their token ids, then the EOS id (as vLLM does)."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs
        self.requests: list[GenerationRequest] = []

    def encode(self, text: str) -> list[int]:
        return encode(text)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        self.requests.append(request)
        text = self.outputs[len(self.requests) - 1]
        middle = len(text) // 2
        for piece in (text[:middle], text[middle:]):
            yield GenerationChunk(text=piece, token_ids=encode(piece))
        yield GenerationChunk(text="", token_ids=[EOS], finish_reason="stop", usage=Usage())


def hermes(name: str, **arguments: Any) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


@agentkit.tool
def lookup(key: str, limit: int = 3) -> str:
    """Look a key up."""
    return {"a": "1", "b": "2"}.get(key, "unknown")


def _transcripts_before_each_turn(transcript: Transcript) -> list[Transcript]:
    return [
        Transcript(messages=transcript.messages[:i])
        for i, message in enumerate(transcript.messages)
        if message.role == "assistant"
    ]


@pytest.mark.anyio
async def test_qwen3_incremental_prompts_are_the_chat_template() -> None:
    # Outputs in the template's own form of each turn, as a Qwen3 model writes them.
    two_calls = hermes("lookup", key="a") + "\n" + hermes("lookup", key="b", limit=1)
    engine = TokenEngine(
        [
            think("I need both.") + "Looking both up.\n" + two_calls,
            think("Check a again, in depth.") + hermes("lookup", key="a", limit=9),
            think("1 + 2 = 3.") + "The sum is 3.",
            think("c is unknown.") + hermes("lookup", key="c"),
            "c is unknown.",
        ]
    )
    agent = agentkit.Agent(engine=engine, tools=[lookup], system="You are terse.", profile="qwen3")
    tools = agent.registry.specs()
    first = await agent.run("Look up a and b, then tell me the sum.")
    assert first.transcript.messages[-1].text == "The sum is 3."

    # Within one task every prompt, the first rendered whole and the others extended from the
    # previous prompt's ids and the ids generated, is the template's rendering, ids included.
    for request, before in zip(
        engine.requests, _transcripts_before_each_turn(first.transcript), strict=True
    ):
        expected = apply_chat_template(QWEN3, openai_messages(before), tools)
        assert request.prompt == expected
        assert request.prompt_token_ids == encode(expected)

    # A new user message: the template now drops the first task's reasoning, and so does the
    # qwen3 profile's replay policy (drop_on_plain_turns): the prompts are the template's
    # again. The first prompt after the new user message is rebuilt, a deliberate divergence.
    follow_up = first.transcript.model_copy(deep=True)
    follow_up.add("user", "And c?")
    assert agent.replay == "drop_on_plain_turns"
    second = await agent.run(follow_up)
    assert second.transcript.messages[-1].text == "c is unknown."
    later = _transcripts_before_each_turn(second.transcript)[3:]
    for request, before in zip(engine.requests[3:], later, strict=True):
        expected = apply_chat_template(QWEN3, openai_messages(before), tools)
        assert request.prompt == expected
        assert request.prompt_token_ids == encode(expected)

    # keep_all keeps the first task's reasoning in place (a prompt that extends the history):
    # the same text as the template's, plus exactly the blocks the template drops.
    engine_keep = TokenEngine([think("c is unknown.") + hermes("lookup", key="c"), "c is unknown."])
    keep = agentkit.Agent(
        engine=engine_keep,
        tools=[lookup],
        system="You are terse.",
        replay="keep_all",
        profile="qwen3",
    )
    kept = await keep.run(follow_up)
    earlier = [think("I need both."), think("Check a again, in depth."), think("1 + 2 = 3.")]
    later = _transcripts_before_each_turn(kept.transcript)[3:]
    for request, before in zip(engine_keep.requests, later, strict=True):
        expected = apply_chat_template(QWEN3, openai_messages(before), tools)
        assert request.prompt != expected
        prompt = request.prompt
        for block in earlier:
            prompt = prompt.replace(block, "", 1)
        assert prompt == expected
        assert request.prompt_token_ids == encode(request.prompt)


# ---------------------------------------------------------------------------------------------
# Qwen3-Coder: its template (no reasoning, XML calls) is prefix-stable throughout.


def test_qwen3_coder_plain_chat_is_the_chat_template() -> None:
    for transcript in (
        conversation(SYSTEM, USER),
        conversation(USER),
        conversation(SYSTEM, ("user", "hi"), ("assistant", "Hello."), ("user", "bye")),
    ):
        expected = apply_chat_template(QWEN3_CODER, openai_messages(transcript))
        assert get_profile("qwen3-coder").render(transcript) == expected


def test_qwen3_coder_calls_are_the_chat_template() -> None:
    # Up to the end of the assistant's turn: a tool without required or extra schema keys,
    # string, integer, float and JSON argument values, several calls.
    transcript = conversation(
        SYSTEM,
        USER,
        assistant(
            call("c1", "write", path="a.py", content='print("hi")\n# é <b>'),
            call("c2", "lookup", key="a", limit=2, options={"deep": [True, None, 1.5]}),
        ),
    )
    expected = apply_chat_template(
        QWEN3_CODER, openai_messages(transcript), [WRITE], add_generation_prompt=False
    )
    template = get_profile("qwen3-coder").template
    assert isinstance(template, ChatMLTemplate)
    assert template.render(transcript, [WRITE], add_generation_prompt=False) == expected


def _coder_pair(transcript: Transcript, tools: Sequence[ToolSpec]) -> tuple[str, str]:
    rendered = get_profile("qwen3-coder").render(transcript, tools)
    return rendered, apply_chat_template(QWEN3_CODER, openai_messages(transcript), tools)


def test_qwen3_coder_tool_results() -> None:
    transcript = conversation(
        SYSTEM,
        USER,
        assistant(call("c1", "write", path="a"), call("c2", "write", path="b")),
        Message(
            role="tool",
            content=[
                ToolResultBlock(call_id="c1", name="write", content="ok"),
                ToolResultBlock(call_id="c2", name="write", content="ok"),
            ],
        ),
    )
    rendered, expected = _coder_pair(transcript, [WRITE])
    assert rendered == expected


def test_qwen3_coder_text_before_a_call() -> None:
    transcript = conversation(
        SYSTEM, USER, assistant(TextBlock(text="Looking."), call("c1", "write", path="a"))
    )
    template = get_profile("qwen3-coder").template
    assert isinstance(template, ChatMLTemplate)
    rendered = template.render(transcript, [WRITE], add_generation_prompt=False)
    messages = openai_messages(transcript)
    assert rendered == apply_chat_template(
        QWEN3_CODER, messages, [WRITE], add_generation_prompt=False
    )


def test_qwen3_coder_boolean_and_null_arguments() -> None:
    transcript = conversation(
        SYSTEM, USER, assistant(call("c1", "write", path="a", force=True, mode=None))
    )
    template = get_profile("qwen3-coder").template
    assert isinstance(template, ChatMLTemplate)
    rendered = template.render(transcript, (), add_generation_prompt=False)
    messages = openai_messages(transcript)
    assert rendered == apply_chat_template(QWEN3_CODER, messages, add_generation_prompt=False)


def test_qwen3_coder_tool_schemas() -> None:
    rendered, expected = _coder_pair(conversation(SYSTEM, USER), [LOOKUP])
    assert rendered == expected


def test_qwen3_coder_tools_without_a_system_message() -> None:
    rendered, expected = _coder_pair(conversation(USER), [WRITE])
    assert rendered == expected
