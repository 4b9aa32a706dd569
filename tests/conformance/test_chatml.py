"""The ChatML-family profiles against their models' own templates: ``qwen3`` (Qwen3),
``qwen3-coder`` (Qwen3-Coder) and ``nemotron`` (Nemotron-3 Nano). SmolLM2's template is read
from a wheel of the cpu extra, so its test is in the slow suite
(``tests/slow/test_smollm2_template.py``).

Every conversation of :func:`conversations_for` and a few of the family's own (argument values
of every JSON type, which Qwen3-Coder and Nemotron write Python-style) render to the
template's text; each deliberate difference is pinned by a test of its own. The parsers read
back what the templates write for a call, and Nemotron's prompts extend each other under exact
replay, with thinking on and off.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest
from _references import jinja_reference

import agentkit
from agentkit._tool_choice import tool_choice_options
from agentkit.engine import ScriptedEngine, TokenizedScriptedEngine
from agentkit.profiles import IncrementalTemplate, Profile, ToolSpec, get_profile
from agentkit.server._runtime import ServerRuntime, TurnSpec
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    Render,
    conversations_for,
    first_difference,
    profile_prompt,
    standard_conversations,
)
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

REFERENCES = {
    "qwen3": "qwen3.jinja",
    "qwen3-coder": "qwen3-coder.jinja",
    "nemotron": "nemotron-3-nano.jinja",
}

SETTINGS: ToolSpec = {
    "type": "function",
    "function": {
        "name": "settings",
        "description": "  Change settings.\n",
        "parameters": {
            "type": "object",
            "properties": {
                "flag": {"type": "boolean", "description": "On or off."},
                "note": {"type": ["string", "null"]},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMaximum": 1.5},
                "count": {"type": "integer", "default": 3, "nullable": False},
                "payload": {"type": "object", "additionalProperties": True},
                "level": {"type": "string", "enum": ["low", "high"]},
            },
            "required": ["flag"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
"""A tool whose schema has keys beyond the ones the templates name (written Python-style:
``False``, ``1.5``), an enum and a list of types."""

TYPED_ARGUMENTS: dict[str, Any] = {
    "flag": True,
    "note": None,
    "ratio": 0.25,
    "count": 0,
    "payload": {"deep": [True, None, 1.5], "name": "ü"},
    "level": "high",
}


def _typed_values(reasoning: bool) -> Conversation:
    """Calls with argument values of every JSON type, their results, and an answer."""
    first = ToolCallBlock(id="call_1", name="settings", arguments=TYPED_ARGUMENTS)
    second = ToolCallBlock(
        id="call_2", name="settings", arguments={"flag": False, "note": "later", "count": -2}
    )
    think: list[ContentBlock] = [ReasoningBlock(text="Set both.")] if reasoning else []
    t = Transcript()
    t.add("user", "Change the settings twice.")
    t.add("assistant", [*think, TextBlock(text="Changing them."), first, second])
    t.add("tool", [ToolResultBlock(call_id="call_1", name="settings", content="ok")])
    t.add("tool", [ToolResultBlock(call_id="call_2", name="settings", content="ok")])
    done: list[ContentBlock] = [ReasoningBlock(text="Done.")] if reasoning else []
    t.add("assistant", [*done, TextBlock(text="Both changed.")])
    t.add("user", "Thanks. Once more?")
    return Conversation("typed argument values", t, (*STANDARD_TOOLS, SETTINGS))


def family_conversations(profile: Profile) -> list[Conversation]:
    reasoning = profile.reasoning is not None
    out = [*conversations_for(profile), _typed_values(reasoning)]
    if profile.thinking_switch:
        off = _typed_values(False)
        out.append(dataclasses.replace(off, name=f"{off.name} (thinking off)", thinking=False))
    return out


CASES = [
    pytest.param(name, conversation, id=f"{name}: {conversation.name}")
    for name in REFERENCES
    for conversation in family_conversations(get_profile(name))
]


def reference(name: str, **variables: Any) -> Render:
    return jinja_reference(REFERENCES[name], **variables)


@pytest.mark.parametrize(("name", "conversation"), CASES)
def test_prompts_equal_the_template(name: str, conversation: Conversation) -> None:
    expected = reference(name)(conversation)
    difference = first_difference(expected, profile_prompt(get_profile(name), conversation))
    assert difference is None, difference.describe()


def test_every_chatml_profile_names_its_reference() -> None:
    for name, file in REFERENCES.items():
        profile = get_profile(name)
        assert profile.reference
        assert "llama.cpp" in profile.reference or "vLLM" in profile.reference, file


# --- Qwen3 ------------------------------------------------------------------------------------


def test_qwen3_keep_all_keeps_the_reasoning_the_template_drops() -> None:
    """The opt-in deviation: with replay='keep_all' the reasoning of earlier tasks stays in
    place (the prompt then extends the last one); the template drops it before the last user
    query. The prompts differ by exactly those blocks."""
    profile = dataclasses.replace(get_profile("qwen3"), replay="keep_all")
    (conversation,) = [c for c in conversations_for(profile) if c.name == "plain exchanges"]
    template = reference("qwen3")(conversation)
    kept = profile_prompt(profile, conversation)
    expected = template
    for reasoning, answer in (("Two is prime.", "2 is prime."), ("Even: four.", "4 is even.")):
        head = f"<|im_start|>assistant\n{answer}"
        assert expected.count(head) == 1
        expected = expected.replace(
            head, f"<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{answer}"
        )
    assert kept == expected
    assert kept != template


# --- Qwen3-Coder ------------------------------------------------------------------------------


def test_qwen3_coder_has_no_reasoning_and_leaves_other_models_reasoning_out() -> None:
    profile = get_profile("qwen3-coder")
    assert profile.reasoning is None
    # Reasoning another model wrote earlier in the conversation: the template ignores
    # reasoning_content, and so does the profile.
    for conversation in standard_conversations(reasoning=True):
        difference = first_difference(
            reference("qwen3-coder")(conversation), profile_prompt(profile, conversation)
        )
        assert difference is None, f"{conversation.name}: {difference.describe()}"


def test_qwen3_coder_writes_booleans_and_null_python_style() -> None:
    prompt = profile_prompt(get_profile("qwen3-coder"), _typed_values(False))
    assert "<parameter=flag>\nTrue\n</parameter>" in prompt
    assert "<parameter=flag>\nFalse\n</parameter>" in prompt
    assert "<parameter=note>\nNone\n</parameter>" in prompt
    assert '<parameter=payload>\n{"deep": [true, null, 1.5], "name": "ü"}\n</parameter>' in prompt
    assert "<additionalProperties>False</additionalProperties>" in prompt


# --- Nemotron-3 -------------------------------------------------------------------------------


def test_nemotron_prompt_forms() -> None:
    profile = get_profile("nemotron")
    assert profile.thinking_switch
    (plain,) = [c for c in conversations_for(profile) if c.name == "plain, no system message"]
    on = profile_prompt(profile, plain)
    off = profile_prompt(profile, dataclasses.replace(plain, thinking=False))
    assert on.startswith("<|im_start|>system\n<|im_end|>\n")  # always a system turn
    assert on.endswith("<|im_start|>assistant\n<think>\n")
    assert off.endswith("<|im_start|>assistant\n<think></think>")


def _answer_without_reasoning() -> Conversation:
    t = Transcript()
    t.add("user", "Hi.")
    t.add("assistant", "Hello.")
    t.add("user", "Bye.")
    return Conversation("an answer without reasoning, then a user message", t)


def test_nemotron_old_answer_without_reasoning_in_thinking_mode() -> None:
    """The deviation: with thinking on, an earlier answer without reasoning is taken for one
    whose reasoning was dropped (<think></think> and the newline that followed </think>); the
    template writes <think></think>answer when the message never had reasoning."""
    profile = get_profile("nemotron")
    conversation = _answer_without_reasoning()
    template = reference("nemotron")(conversation)
    prompt = profile_prompt(profile, conversation)
    old = "<|im_start|>assistant\n<think></think>Hello.<|im_end|>"
    assert template.count(old) == 1
    assert prompt == template.replace(
        old, "<|im_start|>assistant\n<think></think>\nHello.<|im_end|>"
    )

    # The same answer whose reasoning was dropped: the template's form exactly.
    with_reasoning = Transcript(messages=[m.model_copy(deep=True) for m in conversation.transcript])
    with_reasoning.messages[1].content.insert(0, ReasoningBlock(text="Greet back."))
    dropped = dataclasses.replace(conversation, transcript=with_reasoning)
    assert profile_prompt(profile, dropped) == reference("nemotron")(dropped) == prompt

    # With thinking off, the answers had no reasoning: the template's form too.
    off = dataclasses.replace(conversation, thinking=False)
    assert profile_prompt(profile, off) == reference("nemotron")(off)


@pytest.mark.parametrize(
    "conversation",
    family_conversations(get_profile("nemotron")),
    ids=lambda c: c.name,
)
def test_nemotron_keep_all_is_the_template_without_history_truncation(
    conversation: Conversation,
) -> None:
    """replay='keep_all' (an opt-in) is the template's own truncate_history_thinking=False."""
    profile = dataclasses.replace(get_profile("nemotron"), replay="keep_all")
    expected = reference("nemotron", truncate_history_thinking=False)(conversation)
    difference = first_difference(expected, profile_prompt(profile, conversation))
    assert difference is None, difference.describe()


# --- What the templates write for a call parses back -----------------------------------------

SCHEMAS = {
    spec["function"]["name"]: spec["function"]["parameters"] for spec in (*STANDARD_TOOLS, SETTINGS)
}


def _blocks(content: list[ContentBlock]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in content:
        if isinstance(block, ToolCallBlock):
            out.append(("call", (block.name, block.arguments)))
        elif isinstance(block, ReasoningBlock | TextBlock):
            out.append((block.type, block.text.strip()))
    return out


def _play(
    name: str, conversation: Conversation, *, same_blocks: bool = True
) -> list[tuple[Transcript, int, str, str]]:
    """Each assistant message of ``conversation`` as a generated turn: the text the profile
    (equal to the template, above) writes for it after the prompt before it, parsed by the
    profile's parser. Returns per turn the transcript up to the next turn, the turn's index
    + 1, the prompt before the turn and the output."""
    profile = get_profile(name)
    template = profile.template
    assert isinstance(template, IncrementalTemplate)
    end = template.assistant_end
    thinking = conversation.thinking
    t = Transcript()
    turns: list[tuple[int, str, str]] = []
    for message in conversation.transcript.messages:
        if message.role != "assistant":
            t.append(message)
            continue
        prompt = template.render(t, conversation.tools, thinking=thinking)
        canonical = Transcript(messages=[*t.messages, message])
        full = template.render(
            canonical, conversation.tools, add_generation_prompt=False, thinking=thinking
        )
        assert full.startswith(prompt)
        assert full.endswith(end)
        output = full[len(prompt) : len(full) - len(end)]
        parser = profile.new_parser(SCHEMAS, thinking=thinking)
        parser.feed(output)
        parser.finish()
        generated = Message(role="assistant", content=parser.blocks)
        assert generated.raw == output
        if same_blocks:
            assert _blocks(generated.content) == _blocks(message.content), output
        t.append(generated)
        turns.append((len(t.messages), prompt, output))
    stops = [n - 1 for n, _, _ in turns[1:]] + [len(t.messages)]
    return [
        (Transcript(messages=t.messages[:stop]), n, prompt, output)
        for (n, prompt, output), stop in zip(turns, stops, strict=True)
    ]


PLAYED = [
    pytest.param(name, c, id=f"{name}: {c.name}")
    for name in REFERENCES
    for c in family_conversations(get_profile(name))
    if any(m.role == "assistant" for m in c.transcript.messages)
    # Qwen3's history leaves out the empty block its thinking-off generation prompt writes:
    # a turn generated with thinking off is not replayed after the prompt it followed.
    and not (name == "qwen3" and not c.thinking)
]


def _xml_cannot_carry(name: str, conversation: Conversation) -> bool:
    """An argument value holding ``</parameter>``: the XML call format cannot carry it (the
    templates write it verbatim, and the value ends there: a documented limitation of the
    ``qwen3_coder`` parser)."""
    return get_profile(name).tool_format == "qwen3_coder" and any(
        "</parameter>" in str(call.arguments)
        for m in conversation.transcript.messages
        for call in m.tool_calls
    )


@pytest.mark.parametrize(("name", "conversation"), PLAYED)
def test_what_the_template_writes_parses_back(name: str, conversation: Conversation) -> None:
    assert _play(name, conversation, same_blocks=not _xml_cannot_carry(name, conversation))


@pytest.mark.parametrize(("name", "conversation"), PLAYED)
def test_incremental_prompt_equals_full_render(name: str, conversation: Conversation) -> None:
    """Under exact replay (keep_all: nothing rewritten) each prompt is the last prompt, the
    model's output, the end of its message and the new messages."""
    template = get_profile(name).template
    assert isinstance(template, IncrementalTemplate)
    thinking = conversation.thinking
    played = _play(name, conversation, same_blocks=False)  # raw replay: whatever was parsed
    for t, n, prompt, output in played:
        full = template.render(t, conversation.tools, thinking=thinking)
        continuation = template.render_continuation(t, n, thinking=thinking)
        assert full == prompt + output + template.assistant_end + continuation
    prompts = [prompt for _, _, prompt, _ in played]
    prompts.append(template.render(played[-1][0], conversation.tools, thinking=thinking))
    for before, after in itertools.pairwise(prompts):
        assert after.startswith(before)


@pytest.mark.parametrize("name", ["qwen3-coder", "nemotron"])
def test_a_string_none_and_null_are_the_same_text(name: str) -> None:
    """The templates write None as ``None``, so a nullable string parameter whose value is the
    string "None" reads back as null: the format cannot tell them apart (JSON-style ``null``
    would be no better)."""
    profile = get_profile(name)
    template = profile.template
    assert isinstance(template, IncrementalTemplate)
    outputs = []
    for note in (None, "None"):
        call = ToolCallBlock(id="c", name="settings", arguments={"flag": True, "note": note})
        t = Transcript()
        t.add("user", "Go.")
        before = template.render(t, [SETTINGS], thinking=False)
        t.add("assistant", [call])
        after = template.render(t, [SETTINGS], add_generation_prompt=False, thinking=False)
        outputs.append(after[len(before) : len(after) - len(template.assistant_end)])
    assert outputs[0] == outputs[1]
    parser = profile.new_parser(SCHEMAS, thinking=False)
    parser.feed(outputs[0])
    parser.finish()
    (call,) = [b for b in parser.blocks if isinstance(b, ToolCallBlock)]
    assert call.arguments == {"flag": True, "note": None}


def test_nemotron_parser_follows_the_thinking_switch() -> None:
    profile = get_profile("nemotron")
    on = profile.new_parser()
    on.feed("Let me see.\n</think>\nHello.")
    on.finish()
    assert _blocks(on.blocks) == [("reasoning", "Let me see."), ("text", "Hello.")]
    # Thinking off: the prompt closed the block (<think></think>), the output is the answer.
    off = profile.new_parser(thinking=False)
    off.feed("Hello.")
    off.finish()
    assert _blocks(off.blocks) == [("text", "Hello.")]
    # A profile without the switch ignores it: Qwen3-Coder, which has no reasoning at all.
    coder = get_profile("qwen3-coder").new_parser(thinking=False)
    coder.feed("<think>x</think>Hi")
    coder.finish()
    assert _blocks(coder.blocks) == [("text", "<think>x</think>Hi")]


def test_nemotron_tool_choice_grammar_follows_the_thinking_switch() -> None:
    """With thinking on the grammar makes the model close the block the prompt opened; with
    it off the prompt closed it, and reasoning is optional."""
    profile = get_profile("nemotron")
    firsts = []
    for thinking in (True, False):
        options = tool_choice_options(profile, "required", SCHEMAS, thinking=thinking)
        document = json.loads(options["structured_outputs"]["structural_tag"])
        firsts.append(document["format"]["elements"][0])
    assert (firsts[0]["type"], firsts[0]["begin"], firsts[0]["end"]) == ("tag", "", "</think>")
    assert firsts[1]["type"] == "optional"
    assert firsts[1]["content"]["begin"] == "<think>"


@pytest.mark.anyio
async def test_nemotron_server_turn_with_thinking_off_is_an_answer() -> None:
    """The server builds the prompt and the parser with the request's thinking switch."""
    engine = ScriptedEngine(["Hello.", "Hmm.\n</think>\nHello."])
    runtime = ServerRuntime(engine, get_profile("nemotron"))
    t = Transcript()
    t.add("user", "Hi.")
    results = []
    for thinking in (False, None):
        turn = runtime.start(TurnSpec(t, thinking=thinking), request_id=f"r{thinking}")
        assert turn.request.prompt.endswith("<think></think>" if thinking is False else "<think>\n")
        async for _ in turn.events():
            pass
        assert turn.message is not None
        results.append(_blocks(turn.message.content))
    assert results == [[("text", "Hello.")], [("reasoning", "Hmm."), ("text", "Hello.")]]


@agentkit.tool
def lookup(key: str, limit: int = 3) -> str:
    """Look a key up in the store."""
    return {"a": "1", "b": "2"}.get(key, "unknown")


def _nemotron_call(key: str) -> str:
    return (
        f"<tool_call>\n<function=lookup>\n<parameter=key>\n{key}\n</parameter>\n</function>\n"
        "</tool_call>\n"
    )


def _as_a_client_sends_it(transcript: Transcript) -> Transcript:
    """The reasoning as a client gets it from vLLM's nemotron_v3 parser, which strips the
    newline before </think> (agentkit's parser keeps it in the block's text; the raw output,
    replayed, is exact either way)."""
    copy = transcript.model_copy(deep=True)
    for message in copy.messages:
        for block in message.content:
            if isinstance(block, ReasoningBlock):
                block.text = block.text.rstrip("\n")
    return copy


@pytest.mark.anyio
async def test_nemotron_agent_prompts_are_the_template() -> None:
    """An agent's prompts, each extended from the last one's ids and the ids generated (or
    rebuilt where the replay policy drops the reasoning of a finished task), are the template's
    rendering of the conversation so far, ids included."""
    profile = get_profile("nemotron")
    outputs = [
        "I need both.\n</think>\nLooking both up.\n" + _nemotron_call("a") + _nemotron_call("b"),
        "1 + 2 = 3.\n</think>\nThe sum is 3.",
        "c is new.\n</think>\n" + _nemotron_call("c"),
        "Nothing there.\n</think>\nc is unknown.",
    ]
    engine = TokenizedScriptedEngine(outputs, specials=profile.special_tokens, stop=profile.stop[0])
    agent = agentkit.Agent(engine=engine, tools=[lookup], profile="nemotron", system="Be terse.")
    first = await agent.run("Look up a and b, then tell me the sum.")
    assert first.output_text == "The sum is 3."
    follow_up = first.transcript.model_copy(deep=True)
    follow_up.add("user", "And c?")
    second = await agent.run(follow_up)
    assert second.output_text == "c is unknown."

    tools = tuple(agent.registry.specs())
    messages = second.transcript.messages
    befores = [
        Transcript(messages=messages[:i]) for i, m in enumerate(messages) if m.role == "assistant"
    ]
    assert len(befores) == len(engine.requests) == 4
    for request, before in zip(engine.requests, befores, strict=True):
        expected = reference("nemotron")(Conversation("", _as_a_client_sends_it(before), tools))
        assert request.prompt == expected
        assert request.prompt_token_ids == engine.encode(expected)
    # The reasoning of the finished task is dropped (the template's truncate_history_thinking),
    # its answer written <think></think>\nThe sum is 3.; the current task's is kept.
    last = engine.requests[-1].prompt
    assert "<think></think>\nThe sum is 3.<|im_end|>" in last
    assert "I need both." not in last
    assert "<think>\nc is new.\n</think>\n<tool_call>" in last


@pytest.mark.parametrize("name", ["qwen3", "nemotron"])
def test_an_interleaved_turn_stays_interleaved(name: str) -> None:
    """Reasoning between the calls of one message (agentkit's own form: no template can
    express it) is written in order, parses back to the same blocks, and replays exactly."""
    paris = ToolCallBlock(id="c1", name="lookup", arguments={"key": "Paris"})
    oslo = ToolCallBlock(id="c2", name="lookup", arguments={"key": "Oslo", "limit": 2})
    t = Transcript()
    t.add("user", "Paris and Oslo?")
    t.add(
        "assistant",
        [ReasoningBlock(text="Paris first."), paris, ReasoningBlock(text="Now Oslo."), oslo],
    )
    t.add("tool", [ToolResultBlock(call_id="c1", name="lookup", content="20C")])
    t.add("tool", [ToolResultBlock(call_id="c2", name="lookup", content="5C")])
    conversation = Conversation("interleaved", t, STANDARD_TOOLS)
    ((transcript, n, prompt, output),) = _play(name, conversation)
    marks = ("Paris first.", "Paris\n</parameter>", "Now Oslo.", "Oslo\n</parameter>")
    if name == "qwen3":
        marks = ("Paris first.", '"Paris"', "Now Oslo.", '"Oslo"')
    positions = [output.index(mark) for mark in marks]
    assert positions == sorted(positions)
    template = get_profile(name).template
    assert isinstance(template, IncrementalTemplate)
    assert template.render(transcript, STANDARD_TOOLS) == (
        prompt + output + template.assistant_end + template.render_continuation(transcript, n)
    )
