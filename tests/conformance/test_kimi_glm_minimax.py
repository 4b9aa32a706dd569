"""The kimi-k2, glm-4.5, glm-4.7 and minimax-m2 profiles against their models' own templates.

Each profile renders every conversation of ``conversations_for(profile)`` (thinking-off ones
too for GLM, whose templates have ``enable_thinking``) as its reference does; each deliberate
difference (``Profile.deviations``) is pinned here to exactly what it is. The parsers must read
the calls the references write.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from _references import jinja_reference

from agentkit.profiles import Profile, get_profile
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    compare,
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

KIMI = get_profile("kimi-k2")
GLM45 = get_profile("glm-4.5")
GLM47 = get_profile("glm-4.7")
MINIMAX = get_profile("minimax-m2")

REFERENCES = {
    "kimi-k2": "kimi-k2-thinking.jinja",
    "glm-4.5": "glm-4.6.jinja",
    "glm-4.7": "glm-4.7-flash.jinja",
    "minimax-m2": "minimax-m2.jinja",
}


def _standard(name: str) -> Conversation:
    return next(c for c in standard_conversations() if c.name == name)


def _cases(*profiles: Profile) -> list[tuple[Profile, Conversation]]:
    return [(p, c) for p in profiles for c in conversations_for(p)]


def _case_id(case: object) -> str:
    return case.name if isinstance(case, Profile | Conversation) else str(case)


def _assert_equal(expected: str, actual: str) -> None:
    difference = first_difference(expected, actual)
    assert difference is None, difference.describe()


def _messages(conversation: Conversation, messages: list[Message]) -> Conversation:
    return replace(conversation, transcript=Transcript(messages=messages))


# --- equal to the template ---------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "conversation"), _cases(GLM45, GLM47, MINIMAX), ids=_case_id)
def test_prompts_equal_the_template(profile: Profile, conversation: Conversation) -> None:
    ((_, difference),) = compare(profile, jinja_reference(REFERENCES[profile.name]), [conversation])
    assert difference is None, difference.describe()


def test_glm_profiles_honour_the_thinking_switch() -> None:
    assert GLM45.thinking_switch
    assert GLM47.thinking_switch
    names = [c.name for c in conversations_for(GLM45) if not c.thinking]
    assert names == [
        "plain (thinking off)",
        "plain exchanges (thinking off)",
        "one tool call (thinking off)",
    ]
    off = next(c for c in conversations_for(GLM45) if c.name == "plain exchanges (thinking off)")
    prompt = profile_prompt(GLM45, off)
    assert prompt.count("/nothink") == 3  # every user turn, as the template writes it
    assert prompt.endswith("<|assistant|>\n<think></think>")
    assert profile_prompt(GLM47, off).endswith("<|assistant|></think>")


@pytest.mark.parametrize("conversation", conversations_for(GLM47), ids=_case_id)
def test_glm47_keep_all_is_the_templates_preserved_thinking(conversation: Conversation) -> None:
    """``Agent(replay="keep_all")`` on GLM-4.7 is the template with ``clear_thinking=False``
    (the model's "preserved thinking"), not a difference of agentkit's own."""
    profile = replace(GLM47, replay="keep_all")
    reference = jinja_reference("glm-4.7-flash.jinja", clear_thinking=False)
    ((_, difference),) = compare(profile, reference, [conversation])
    assert difference is None, difference.describe()


def test_glm47_keeps_reasoning_only_on_request() -> None:
    conversation = _standard("plain exchanges")
    default = profile_prompt(GLM47, conversation)
    kept = profile_prompt(replace(GLM47, replay="keep_all"), conversation)
    assert GLM47.replay == "drop_on_plain_turns"
    assert "Two is prime." not in default
    assert "<|assistant|><think>Two is prime.</think>2 is prime." in kept


# --- Kimi: call ids ------------------------------------------------------------------------------


def _with_kimi_ids(conversation: Conversation) -> Conversation:
    """The conversation with each call id written as Kimi's ``functions.NAME:IDX``, ``IDX``
    counting the calls of the conversation from 0 (in the calls and in their results)."""
    counter = itertools.count()
    ids: dict[str, str] = {}
    messages: list[Message] = []
    for message in conversation.transcript.messages:
        content = []
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                ids[block.id] = f"functions.{block.name}:{next(counter)}"
                block = block.model_copy(update={"id": ids[block.id]})
            elif isinstance(block, ToolResultBlock):
                block = block.model_copy(update={"call_id": ids[block.call_id]})
            content.append(block)
        messages.append(Message(role=message.role, content=content))
    return _messages(conversation, messages)


@pytest.mark.parametrize("conversation", conversations_for(KIMI), ids=_case_id)
def test_kimi_prompts_equal_the_template_with_kimi_ids(conversation: Conversation) -> None:
    """The only difference on the standard conversations: a foreign id (``call_1``) is written
    as ``functions.NAME:IDX``; with Kimi's own ids the prompts are the template's."""
    reference = jinja_reference(REFERENCES["kimi-k2"])
    _assert_equal(reference(_with_kimi_ids(conversation)), profile_prompt(KIMI, conversation))
    native = _with_kimi_ids(conversation)
    _assert_equal(reference(native), profile_prompt(KIMI, native))


def test_kimi_foreign_ids_differ_from_the_template() -> None:
    conversation = _standard("tools, results and a new user turn")
    template = jinja_reference(REFERENCES["kimi-k2"])(conversation)
    prompt = profile_prompt(KIMI, conversation)
    assert "<|tool_call_begin|>call_1<|tool_call_argument_begin|>" in template
    assert "## Return of call_2\n" in template
    assert "<|tool_call_begin|>functions.lookup:0<|tool_call_argument_begin|>" in prompt
    assert "<|tool_call_begin|>functions.write_file:1<|tool_call_argument_begin|>" in prompt
    assert "<|im_system|>write_file<|im_middle|>## Return of functions.write_file:1\n" in prompt
    assert "call_1" not in prompt
    assert "call_2" not in prompt


def _two_tasks() -> Conversation:
    """Two tasks with calls: the second task's call is the conversation's third."""
    first = _standard("tools, results and a new user turn")
    again = ToolCallBlock(id="toolu_9", name="lookup", arguments={"key": "Oslo"})
    messages = [
        *first.transcript.messages,
        Message(role="assistant", content=[ReasoningBlock(text="Look Oslo up."), again]),
        Message(
            role="tool",
            content=[ToolResultBlock(call_id="toolu_9", name="lookup", content="5 degrees")],
        ),
    ]
    return _messages(first, messages)


def test_kimi_ids_count_the_calls_of_the_whole_conversation() -> None:
    conversation = _two_tasks()
    prompt = profile_prompt(KIMI, conversation)
    assert "<|tool_call_begin|>functions.lookup:2<|tool_call_argument_begin|>" in prompt
    assert "## Return of functions.lookup:2\n5 degrees" in prompt
    reference = jinja_reference(REFERENCES["kimi-k2"])
    _assert_equal(reference(_with_kimi_ids(conversation)), prompt)


def test_kimi_incremental_prompt_keeps_the_global_ids() -> None:
    """A continuation (the results after a generated call message) numbers the ids as the
    whole prompt does."""
    transcript = _two_tasks().transcript
    n = len(transcript.messages) - 1  # the second task's call message is n - 1
    prefix = Transcript(messages=transcript.messages[: n - 1])
    raw = (
        "<think>Look Oslo up.</think><|tool_calls_section_begin|><|tool_call_begin|>"
        'functions.lookup:2<|tool_call_argument_begin|>{"key": "Oslo"}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    )
    template = KIMI.template
    continuation = template.render_continuation(transcript, n)
    assert continuation.startswith(
        "<|im_system|>lookup<|im_middle|>## Return of functions.lookup:2"
    )
    assert template.render(transcript, STANDARD_TOOLS) == (
        template.render(prefix, STANDARD_TOOLS) + raw + template.assistant_end + continuation
    )


# --- Kimi: reasoning of an interrupted task --------------------------------------------------


def _interrupted() -> Conversation:
    """A task interrupted by the user after its tool results, before any answer."""
    one = _standard("one tool call")
    messages = [*one.transcript.messages, Message(role="user", content=[TextBlock(text="Stop.")])]
    return _messages(one, messages)


def test_kimi_drops_the_reasoning_of_an_interrupted_task() -> None:
    """The template keeps reasoning after the last assistant message without calls (here:
    all of it); ``drop_on_plain_turns`` drops it before the last user message. The prompt is
    the template's for the conversation without that reasoning."""
    conversation = _interrupted()
    reference = jinja_reference(REFERENCES["kimi-k2"])
    template = reference(_with_kimi_ids(conversation))
    prompt = profile_prompt(KIMI, conversation)
    assert "<think>I should look it up.</think>" in template
    assert "<think>I should look it up.</think>" not in prompt
    messages = list(conversation.transcript.messages)
    messages[1] = Message(
        role="assistant", content=[b for b in messages[1].content if b.type != "reasoning"]
    )
    _assert_equal(reference(_with_kimi_ids(_messages(conversation, messages))), prompt)
    # The other three profiles' templates drop it too (they keep reasoning after the last user).
    for profile in (GLM45, GLM47, MINIMAX):
        ((_, difference),) = compare(
            profile, jinja_reference(REFERENCES[profile.name]), [conversation]
        )
        assert difference is None, difference.describe()


# --- MiniMax -----------------------------------------------------------------------------------


def test_minimax_writes_a_later_system_message_as_a_user_turn() -> None:
    """The template leaves a system message after the first out of the prompt; agentkit writes
    it as a user turn, so nothing the caller sent disappears."""
    conversation = _standard("plain exchanges")
    messages = list(conversation.transcript.messages)
    messages.insert(3, Message(role="system", content=[TextBlock(text="Be terse.")]))
    later = _messages(conversation, messages)
    reference = jinja_reference(REFERENCES["minimax-m2"])
    prompt = profile_prompt(MINIMAX, later)
    assert "Be terse." not in reference(later)
    assert "]~b]user\nBe terse.[e~[\n" in prompt
    as_user = list(messages)
    as_user[3] = Message(role="user", content=[TextBlock(text="Be terse.")])
    _assert_equal(reference(_messages(conversation, as_user)), prompt)


@pytest.mark.parametrize("name", ["plain exchanges", "tools, results and a new user turn"], ids=str)
def test_minimax_keep_all_keeps_old_reasoning_in_the_templates_form(name: str) -> None:
    """``Agent(replay="keep_all")`` (an opt-in; the default follows the template) writes the
    reasoning of earlier tasks as the template writes the current task's: removing exactly
    those blocks gives the template's prompt."""
    conversation = _standard(name)
    kept = profile_prompt(replace(MINIMAX, replay="keep_all"), conversation)
    messages = conversation.transcript.messages
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    old = [b.text for m in messages[:last_user] for b in m.content if isinstance(b, ReasoningBlock)]
    assert old
    stripped = kept
    for text in old:
        block = f"]~b]ai\n<think>\n{text}\n</think>\n\n"
        assert kept.count(block) == 1
        stripped = stripped.replace(block, "]~b]ai\n")
    template = jinja_reference(REFERENCES["minimax-m2"])(conversation)
    _assert_equal(template, stripped)
    assert MINIMAX.replay == "drop_on_plain_turns"
    _assert_equal(template, profile_prompt(MINIMAX, conversation))


# --- the parsers read what the templates write -------------------------------------------------


_END = {
    "kimi-k2": "<|im_end|>",
    "glm-4.5": "<|observation|>",
    "glm-4.7": "<|observation|>",
    "minimax-m2": "[e~[",
}


def _parsed_turn(profile: Profile, conversation: Conversation) -> list[ContentBlock]:
    """The reference's text for the first assistant turn of ``conversation`` (messages 2-4:
    the turn and its results), cut from its prompt and parsed by the profile's parser."""
    messages = conversation.transcript.messages
    reference = jinja_reference(REFERENCES[profile.name])
    before = reference(_messages(conversation, messages[:2]))
    after = reference(_messages(conversation, messages[:5]))
    assert after.startswith(before)
    output = after[len(before) :].split(_END[profile.name])[0]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in STANDARD_TOOLS}
    parser = profile.new_parser(schemas)
    parser.feed(output)
    parser.finish()
    return parser.blocks


def _without_parameter_end(conversation: Conversation) -> Conversation:
    """``conversation`` with ``</parameter>`` taken out of the hostile argument value."""
    messages = []
    for message in conversation.transcript.messages:
        content = []
        for block in message.content:
            if isinstance(block, ToolCallBlock) and "content" in block.arguments:
                value = block.arguments["content"].replace("</parameter>\n", "")
                block = block.model_copy(
                    update={"arguments": {**block.arguments, "content": value}}
                )
            content.append(block)
        messages.append(Message(role=message.role, content=content))
    return _messages(conversation, messages)


@pytest.mark.parametrize("profile", [KIMI, GLM45, GLM47, MINIMAX], ids=_case_id)
def test_parser_reads_the_calls_the_template_writes(profile: Profile) -> None:
    """The template's text for an assistant turn with calls (hostile argument values, nested
    objects, an integer), cut from its prompt, parses back to the same blocks. MiniMax writes
    string values raw, so a value holding ``</parameter>`` is ambiguous in its format: that
    one is left out here (see the next test)."""
    conversation = _with_kimi_ids(_standard("tools, results and a new user turn"))
    if profile is MINIMAX:
        conversation = _without_parameter_end(conversation)
    blocks = _parsed_turn(profile, conversation)
    calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
    expected = conversation.transcript.messages[2].tool_calls
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        (c.name, c.arguments, None) for c in expected
    ]
    reasoning = [b.text.strip() for b in blocks if isinstance(b, ReasoningBlock)]
    assert reasoning == ["Two steps: look up, then write."]
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
    assert text == "Doing both now."


def test_minimax_value_with_parameter_end_is_an_error_the_model_sees() -> None:
    """A string value holding ``</parameter>`` followed by other markup cannot be told from
    the value's end (the template writes it raw): the call comes back as an error result, with
    its raw text, never as wrong arguments."""
    conversation = _standard("tools, results and a new user turn")
    blocks = _parsed_turn(MINIMAX, conversation)
    lookup, write = [b for b in blocks if isinstance(b, ToolCallBlock)]
    assert lookup.arguments == {"key": "Paris", "limit": 2}
    assert lookup.error is None
    assert write.name == "write_file"
    assert write.error is not None
    assert write.raw is not None
    assert "He said" in write.raw


@pytest.mark.parametrize(("profile", "gap"), [(GLM45, "\n"), (GLM47, "")], ids=_case_id)
def test_glm_thinking_off_prompts_grow_incrementally(profile: Profile, gap: str) -> None:
    """With thinking off for the request, the prompt after a generated turn is the previous
    prompt (ending with the thinking-off generation prompt), the model's text and the new
    messages: the template's enable_thinking=False form throughout."""
    off = next(c for c in conversations_for(profile) if c.name == "plain exchanges (thinking off)")
    messages = list(off.transcript.messages)
    generated = [
        Message(role="assistant", content=[TextBlock(text=m.text, raw=gap + m.text)])
        if m.role == "assistant"
        else m
        for m in messages
    ]
    transcript = Transcript(messages=generated)
    template = profile.template
    n = len(generated) - 1  # after the last generated turn
    prefix = Transcript(messages=generated[: n - 1])
    raw = generated[n - 1].raw
    assert raw is not None
    whole = template.render(transcript, off.tools, thinking=False)
    assert whole == (
        template.render(prefix, off.tools, thinking=False)
        + raw
        + template.assistant_end
        + template.render_continuation(transcript, n, thinking=False)
    )
    reference = jinja_reference(REFERENCES[profile.name])
    _assert_equal(reference(off), whole)
