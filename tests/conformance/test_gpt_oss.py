"""The gpt-oss profile against OpenAI's Harmony renderer (``openai-harmony``, the reference)
and against the model's own chat template (``gpt-oss-120b.jinja``, where it disagrees).

The conversation reaches Harmony as vLLM's gpt-oss serving hands it over: a system message
with the date, a developer message with the instructions and the function tools, one message
per block (reasoning on ``analysis``, text before a call a ``commentary`` preamble, other text
``final``, a call on ``commentary`` to ``functions.NAME`` with content type ``json``), one tool
message per result. Which analysis goes back is the Harmony guide's rule, which vLLM applies
before rendering: analysis before the last final answer is dropped. Harmony's own
``auto_drop_analysis`` drops only the analysis before the *first* final answer; that
difference is pinned below.
"""

from __future__ import annotations

import datetime
import gzip
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import openai_harmony as harmony
import pytest
from _references import jinja_reference

from agentkit.errors import ConfigurationError
from agentkit.parsing import create_parser
from agentkit.profiles import ToolSpec, get_profile
from agentkit.profiles._harmony_template import HarmonyTemplate, history_messages
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    conversations_for,
    first_difference,
    profile_prompt,
)
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

PROFILE = get_profile("gpt-oss")
TEMPLATE = PROFILE.template
assert isinstance(TEMPLATE, HarmonyTemplate)
DATE = TEMPLATE.date


@pytest.fixture(scope="session")
def encoding(tmp_path_factory: pytest.TempPathFactory) -> harmony.HarmonyEncoding:
    """Harmony's gpt-oss encoding, offline: ``o200k_base.tiktoken`` from bpe-openai's copy
    (the content harmony checks the sha256 of), in a temporary folder."""
    folder = tmp_path_factory.mktemp("tiktoken")
    # Located, not imported: importing bpe_openai loads all its vocabularies.
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None, "pip install bpe-openai==0.1.4"
    assert spec.origin is not None
    packed = Path(spec.origin).parent / "data" / "o200k_base.tiktoken.gz"
    (folder / "o200k_base.tiktoken").write_bytes(gzip.decompress(packed.read_bytes()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_ENCODINGS_BASE", str(folder))
        return harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


# --- the conversation as Harmony messages -----------------------------------------------------


def _assistant(text: str, channel: str) -> harmony.Message:
    return harmony.Message.from_role_and_content(harmony.Role.ASSISTANT, text).with_channel(channel)


def harmony_messages(conversation: Conversation) -> list[harmony.Message]:
    messages = conversation.transcript.messages
    system = harmony.SystemContent.new().with_conversation_start_date(DATE)
    out = [harmony.Message.from_role_and_content(harmony.Role.SYSTEM, system)]
    start = 0
    developer = harmony.DeveloperContent.new()
    if messages and messages[0].role == "system":
        developer = developer.with_instructions(messages[0].text)
        start = 1
    if conversation.tools:
        developer = developer.with_function_tools(
            [
                harmony.ToolDescription.new(
                    f["name"], f.get("description", ""), f.get("parameters")
                )
                for f in (t["function"] for t in conversation.tools)
            ]
        )
    if start or conversation.tools:
        out.append(harmony.Message.from_role_and_content(harmony.Role.DEVELOPER, developer))
    for message in messages[start:]:
        if message.role == "user":
            out.append(harmony.Message.from_role_and_content(harmony.Role.USER, message.text))
        elif message.role == "tool":
            for result in message.content:
                assert isinstance(result, ToolResultBlock)
                author = harmony.Author.new(harmony.Role.TOOL, f"functions.{result.name}")
                out.append(
                    harmony.Message.from_author_and_content(author, result.content)
                    .with_channel("commentary")
                    .with_recipient("assistant")
                )
        else:
            blocks = message.content
            calls = [i for i, b in enumerate(blocks) if isinstance(b, ToolCallBlock)]
            for i, block in enumerate(blocks):
                if isinstance(block, ReasoningBlock):
                    out.append(_assistant(block.text, "analysis"))
                elif isinstance(block, TextBlock):
                    preamble = bool(calls) and i < calls[-1]
                    out.append(_assistant(block.text, "commentary" if preamble else "final"))
                elif isinstance(block, ToolCallBlock):
                    arguments = json.dumps(block.arguments, ensure_ascii=False)
                    out.append(
                        _assistant(arguments, "commentary")
                        .with_recipient(f"functions.{block.name}")
                        .with_content_type("json")
                    )
    return out


def without_analysis_before_the_last_final(
    messages: list[harmony.Message],
) -> list[harmony.Message]:
    """The Harmony guide's rule (vLLM's ``auto_drop_analysis_messages``)."""
    finals = [
        i
        for i, m in enumerate(messages)
        if m.author.role == harmony.Role.ASSISTANT and m.channel == "final"
    ]
    last = finals[-1] if finals else -1
    return [m for i, m in enumerate(messages) if i >= last or m.channel != "analysis"]


def harmony_prompt(
    encoding: harmony.HarmonyEncoding, conversation: Conversation, *, library_drop: bool = False
) -> str:
    """Harmony's prompt for ``conversation``: with the guide's analysis rule, or with
    ``library_drop`` the library's own ``auto_drop_analysis``."""
    messages = harmony_messages(conversation)
    if not library_drop:
        messages = without_analysis_before_the_last_final(messages)
    tokens = encoding.render_conversation_for_completion(
        harmony.Conversation.from_messages(messages),
        harmony.Role.ASSISTANT,
        harmony.RenderConversationConfig(auto_drop_analysis=library_drop),
    )
    return str(encoding.decode_utf8(tokens))


# --- the conversations ------------------------------------------------------------------------


def _transcript(*messages: tuple[str, Any]) -> Transcript:
    t = Transcript()
    for role, content in messages:
        t.add(role, content)
    return t


LOOKUP_OSLO = ToolCallBlock(id="c1", name="lookup", arguments={"key": "Oslo"})
LOOKUP_BERN = ToolCallBlock(id="c2", name="lookup", arguments={"key": "Bern", "limit": 1})
WRITE = ToolCallBlock(id="c3", name="write_file", arguments={"path": "a.md", "content": "x"})


def _result(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, name=call.name, content=content)


SCHEMA_TOOLS: tuple[ToolSpec, ...] = tuple(
    {"type": "function", "function": f}
    for f in (
        {"name": "ping", "description": "Ping.\nTwice.\n"},
        {"name": "empty", "description": "", "parameters": {"type": "object", "properties": {}}},
        {
            "name": "search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "description": "Search options.",
                "properties": {
                    "query": {"type": "string", "title": "Query", "examples": ["cats", 3]},
                    "units": {
                        "type": "string",
                        "enum": ["metric", "imperial"],
                        "default": "metric",
                    },
                    "lang": {"type": "string", "default": "en", "nullable": True},
                    "count": {"type": ["integer", "null"], "default": 10},
                    "ratio": {"type": "number", "default": 0.5},
                    "flags": {"type": "array", "items": {"type": "boolean"}, "default": []},
                    "anything": {},
                    "list": {"type": "array"},
                    "grid": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                            "required": ["x"],
                        },
                    },
                    "target": {
                        "description": "Where to look.",
                        "oneOf": [
                            {"type": "string", "description": "A URL."},
                            {
                                "type": "object",
                                "properties": {"site": {"type": "string"}},
                                "default": {"site": "a"},
                            },
                            {"type": "null", "nullable": True},
                        ],
                        "default": "web",
                    },
                    "mode": {
                        "description": "Same as the first.",
                        "oneOf": [
                            {"type": "string", "description": "Same as the first."},
                            {"type": "string", "enum": ["x"], "default": "x"},
                        ],
                    },
                    "nested": {
                        "type": "object",
                        "properties": {
                            "inner": {
                                "type": "object",
                                "description": "Deeper.",
                                "properties": {"z": {"type": "boolean", "default": False}},
                            }
                        },
                    },
                },
                "required": ["query", "grid"],
            },
        },
        {"name": "choose", "description": "Pick.", "parameters": {"oneOf": [{"type": "string"}]}},
    )
)
"""Schemas with every construct Harmony's TypeScript rendering knows."""


def family_conversations() -> list[Conversation]:
    """Beyond the standard set: a turn that opens with a call, a task still going (preamble,
    two calls, analysis kept), a second task after a final answer, schemas of every kind."""
    return [
        Conversation(
            "a turn that opens with a call",
            _transcript(
                ("user", "Oslo?"),
                ("assistant", [LOOKUP_OSLO]),
                ("tool", [_result(LOOKUP_OSLO, "5C")]),
            ),
            STANDARD_TOOLS,
        ),
        Conversation(
            "a task still going",
            _transcript(
                ("system", "Be brief."),
                ("user", "Oslo and Bern?"),
                (
                    "assistant",
                    [
                        ReasoningBlock(text="Two lookups."),
                        TextBlock(text="Looking both up."),
                        LOOKUP_OSLO,
                        LOOKUP_BERN,
                    ],
                ),
                ("tool", [_result(LOOKUP_OSLO, "5C")]),
                ("tool", [_result(LOOKUP_BERN, '{"t": "12C"}')]),
            ),
            STANDARD_TOOLS,
        ),
        Conversation(
            "a second task after a final answer",
            _transcript(
                ("user", "Oslo?"),
                ("assistant", [ReasoningBlock(text="Look it up."), LOOKUP_OSLO]),
                ("tool", [_result(LOOKUP_OSLO, "5C")]),
                ("assistant", [ReasoningBlock(text="Got it."), TextBlock(text="5C.")]),
                ("user", "Now write it down."),
                ("assistant", [ReasoningBlock(text="Write."), WRITE]),
                ("tool", [_result(WRITE, "ok")]),
            ),
            STANDARD_TOOLS,
        ),
        Conversation(
            "schemas of every kind",
            _transcript(("user", "Go.")),
            SCHEMA_TOOLS,
        ),
    ]


CONVERSATIONS = conversations_for(PROFILE) + family_conversations()
BY_NAME = {c.name: c for c in CONVERSATIONS}


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda c: c.name)
def test_gpt_oss_prompts_equal_harmony(
    encoding: harmony.HarmonyEncoding, conversation: Conversation
) -> None:
    difference = first_difference(
        harmony_prompt(encoding, conversation), profile_prompt(PROFILE, conversation)
    )
    assert difference is None, difference.describe(expected="harmony")


# --- deliberate differences -------------------------------------------------------------------

HARMONY_LIBRARY_KEEPS = {
    "plain exchanges": (
        "<|start|>assistant<|channel|>final<|message|>4 is even.",
        "<|start|>assistant<|channel|>analysis<|message|>Even: four.<|end|>",
    ),
    "a second task after a final answer": (
        "<|start|>assistant to=functions.lookup",
        "<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|>",
        "<|start|>assistant<|channel|>final<|message|>5C.",
        "<|start|>assistant<|channel|>analysis<|message|>Got it.<|end|>",
    ),
}
"""Analysis Harmony's ``auto_drop_analysis`` keeps that the profile drops: before a message
(first item) the analysis message inserted there (second), in pairs. The library drops
analysis only before the first final answer, and only when the last assistant message is a
final answer; its guide (and vLLM, and the model's template) drop all analysis before the
last final answer."""


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda c: c.name)
def test_harmony_library_drops_analysis_only_before_the_first_final_answer(
    encoding: harmony.HarmonyEncoding, conversation: Conversation
) -> None:
    library = harmony_prompt(encoding, conversation, library_drop=True)
    expected = profile_prompt(PROFILE, conversation)
    kept = HARMONY_LIBRARY_KEEPS.get(conversation.name, ())
    for before, analysis in zip(kept[::2], kept[1::2], strict=True):
        assert expected.count(before) == 1
        expected = expected.replace(before, analysis + before)
    assert library == expected


def test_the_replay_default_drops_analysis_before_the_last_final_answer() -> None:
    assert PROFILE.replay == "drop_on_plain_turns"
    prompt = profile_prompt(PROFILE, BY_NAME["a second task after a final answer"])
    assert "Look it up." not in prompt
    assert "Got it." not in prompt
    assert "<|channel|>analysis<|message|>Write.<|end|>" in prompt


def jinja_prompt(conversation: Conversation) -> str:
    def strftime_now(format: str) -> str:
        return datetime.date.fromisoformat(DATE).strftime(format)

    render = jinja_reference(
        "gpt-oss-120b.jinja", reasoning_key="thinking", strftime_now=strftime_now
    )
    return render(conversation)


_NAMESPACE = re.compile(
    r"## functions\n\nnamespace functions \{\n.*?\} // namespace functions", re.S
)


def _namespace(prompt: str) -> str:
    match = _NAMESPACE.search(prompt)
    assert match is not None
    return match.group()


def test_the_template_agrees_without_nested_objects_or_enums() -> None:
    """The model's template and Harmony write the same namespace for flat schemas."""
    flat = Conversation("flat", _transcript(("user", "Hi")), STANDARD_TOOLS[:1])
    assert jinja_prompt(flat) == profile_prompt(PROFILE, flat)


def test_the_template_renders_nested_objects_and_enums_its_own_way() -> None:
    conversation = BY_NAME["plain exchanges"]
    template, profile = jinja_prompt(conversation), profile_prompt(PROFILE, conversation)
    assert 'mode?: "overwrite" | "append",\n// Extra settings.\noptions?: {\n' in template
    assert (
        'mode?: "overwrite" | "append",\n// Extra settings.\noptions?:     // Extra settings.\n'
        "{\n    encoding?: string,\n    tags?: string[],\n    },\n"
    ) in profile
    # That is the only difference.
    assert _NAMESPACE.sub(lambda _: _namespace(profile), template) == profile


def test_the_template_ends_instructions_without_tools_with_two_newlines() -> None:
    conversation = BY_NAME["plain"]
    template, profile = jinja_prompt(conversation), profile_prompt(PROFILE, conversation)
    assert "# Instructions\n\nYou are a careful assistant. Answer briefly.<|end|>" in profile
    assert template == profile.replace("Answer briefly.<|end|>", "Answer briefly.\n\n<|end|>")


def test_the_template_json_quotes_tool_outputs() -> None:
    conversation = BY_NAME["one tool call"]
    template, profile = jinja_prompt(conversation), profile_prompt(PROFILE, conversation)
    assert "<|channel|>commentary<|message|>5 degrees<|end|>" in profile
    quoted = profile.replace("<|message|>5 degrees<|end|>", '<|message|>"5 degrees"<|end|>')
    assert _NAMESPACE.sub(lambda _: _namespace(profile), template) == quoted


def test_the_template_writes_only_the_first_call_of_a_message() -> None:
    """It cannot express parallel calls: the second call disappears and its result is
    addressed from the first call's tool."""
    conversation = Conversation(
        "two calls",
        _transcript(
            ("user", "Oslo and Bern?"),
            ("assistant", [ReasoningBlock(text="Two lookups."), LOOKUP_OSLO, LOOKUP_BERN]),
            ("tool", [_result(LOOKUP_OSLO, "5C")]),
            ("tool", [_result(LOOKUP_BERN, "12C")]),
        ),
        STANDARD_TOOLS[:1],
    )
    template, profile = jinja_prompt(conversation), profile_prompt(PROFILE, conversation)
    second = (
        '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"key": '
        '"Bern", "limit": 1}<|call|>'
    )
    assert second in profile
    quoted = {"5C": '"5C"', "12C": '"12C"'}
    expected = profile.replace(second, "")
    for output, json_string in quoted.items():
        expected = expected.replace(
            f"<|message|>{output}<|end|>", f"<|message|>{json_string}<|end|>"
        )
    assert template == expected


def test_the_template_refuses_a_preamble_with_analysis() -> None:
    """A preamble and analysis in one message with calls: the template raises (it would turn
    the preamble into analysis); Harmony writes both."""
    with pytest.raises(ConfigurationError, match="Cannot pass both content and thinking"):
        jinja_prompt(BY_NAME["a task still going"])
    assert (
        "<|start|>assistant<|channel|>analysis<|message|>Two lookups.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Looking both up.<|end|>"
        '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"key": '
        '"Oslo"}<|call|><|start|>assistant to=functions.lookup<|channel|>commentary json'
        '<|message|>{"key": "Bern", "limit": 1}<|call|>'
    ) in profile_prompt(PROFILE, BY_NAME["a task still going"])


def test_history_call_headers_are_the_templates() -> None:
    """A call in history: ``assistant to=functions.NAME<|channel|>commentary json`` in the
    template, vLLM and Harmony (given vLLM's content type) alike; the model's own output form
    (``<|channel|>commentary to=... <|constrain|>json``) is kept only under exact replay."""
    conversation = BY_NAME["a turn that opens with a call"]
    header = '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"key"'
    assert header in jinja_prompt(conversation)
    assert header in profile_prompt(PROFILE, conversation)


def test_a_generated_final_answer_is_closed_with_end_in_history() -> None:
    """The model stops a final answer with ``<|return|>``; history writes ``<|end|>`` (the
    one token where exact replay departs from the output, reported as such)."""
    raw = "<|channel|>final<|message|>5C.<|return|>"
    parser = create_parser("harmony", "harmony")
    parser.feed(raw[: -len("<|return|>")])
    parser.finish()
    t = _transcript(("user", "Oslo?"))
    t.append(Message(role="assistant", content=parser.blocks))
    t.add("user", "Thanks.")
    assert TEMPLATE.render(t, []).endswith(
        "<|start|>assistant<|channel|>final<|message|>5C.<|end|>"
        "<|start|>user<|message|>Thanks.<|end|><|start|>assistant"
    )
    assert TEMPLATE.assistant_end_for(t.messages[1]) == "<|end|>"


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda c: c.name)
def test_history_parses_back_to_the_same_blocks(conversation: Conversation) -> None:
    """What the template writes for a turn is output the Harmony parser reads back."""
    for message in conversation.transcript.messages:
        if message.role != "assistant":
            continue
        written = history_messages(message.content).removeprefix("<|start|>assistant")
        parser = create_parser("harmony", "harmony")
        parser.feed(written)
        parser.finish()
        assert [_shape(b) for b in parser.blocks] == [_shape(b) for b in message.content]


def _shape(block: Any) -> tuple[Any, ...]:
    if isinstance(block, ToolCallBlock):
        return ("call", block.name, block.arguments, block.error)
    return (block.type, block.text)


def test_the_date_is_fixed() -> None:
    """The template writes the day it renders on; the profile a fixed date, so that prompts
    stay prefix-stable across days."""
    conversation = BY_NAME["plain"]
    for _ in range(2):  # a render across midnight sees two days: try again
        today = datetime.date.today().isoformat()
        template = jinja_reference("gpt-oss-120b.jinja", reasoning_key="thinking")(conversation)
        if datetime.date.today().isoformat() == today:
            break
    profile = profile_prompt(PROFILE, conversation)
    assert f"Current date: {DATE}\n" in profile
    assert template.replace(f"Current date: {today}\n", f"Current date: {DATE}\n") == (
        profile.replace("Answer briefly.<|end|>", "Answer briefly.\n\n<|end|>")
    )


def test_a_user_message_before_any_final_answer_ends_the_task_here(
    encoding: harmony.HarmonyEncoding,
) -> None:
    """drop_on_plain_turns drops the reasoning before the last user message; Harmony's rule
    (no final answer yet) keeps it. Only a client can write this conversation: agentkit
    itself always lets the model answer tool results."""
    conversation = Conversation(
        "interrupted",
        _transcript(
            ("user", "Oslo?"),
            ("assistant", [ReasoningBlock(text="Look it up."), LOOKUP_OSLO]),
            ("tool", [_result(LOOKUP_OSLO, "5C")]),
            ("user", "Actually, Bern."),
        ),
        STANDARD_TOOLS,
    )
    analysis = "<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|>"
    profile = profile_prompt(PROFILE, conversation)
    assert analysis not in profile
    assert harmony_prompt(encoding, conversation) == profile.replace(
        "<|start|>assistant to=functions.lookup",
        analysis + "<|start|>assistant to=functions.lookup",
    )
