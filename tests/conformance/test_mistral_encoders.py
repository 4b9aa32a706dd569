"""The mistral-v11 and mistral-v13 profiles against mistral-common's encoders (v11, v13) and
llama.cpp's Mistral-Small-3.2 template (v11).

mistral-common ships only v3 vocabularies; the text of a prompt depends on the version's
instruct encoder and on the special tokens' strings, not on the vocabulary or the tokens'
ranks, so the reference reuses ``tekken_240911.json`` with the version set and the v7+
special tokens. The v11 validator wants nine-character call ids (the standard conversations
have ``call_1``): the reference normalizes and encodes without it, and one conversation with
valid ids also goes through the whole validated pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mistral_common
import pytest
from _references import jinja_reference
from mistral_common.protocol.instruct.chunk import TextChunk, ThinkChunk
from mistral_common.protocol.instruct.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mistral_common.protocol.instruct.normalize import get_normalizer
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.tool_calls import FunctionCall, Tool, ToolCall
from mistral_common.protocol.instruct.validator import ValidationMode, get_validator
from mistral_common.tokens.tokenizers.base import (
    SpecialTokenPolicy,
    SpecialTokens,
    TokenizerVersion,
)
from mistral_common.tokens.tokenizers.instruct import (
    InstructTokenizerV11,
    InstructTokenizerV13,
)
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
from mistral_common.tokens.tokenizers.tekken import SpecialTokenInfo, Tekkenizer

from agentkit._prompt import PromptBuilder
from agentkit.engine import TokenizedScriptedEngine
from agentkit.profiles import get_profile, profile_for_model
from agentkit.template_check import (
    STANDARD_TOOLS,
    Conversation,
    Render,
    conversations_for,
    first_difference,
    profile_prompt,
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

V11 = get_profile("mistral-v11")
V13 = get_profile("mistral-v13")
VERSIONS = {"v11": TokenizerVersion.v11, "v13": TokenizerVersion.v13}


# --- the reference --------------------------------------------------------------------------


def _instruct(version: str) -> InstructTokenizerV11:
    data = json.loads(
        (Path(mistral_common.__file__).parent / "data" / "tekken_240911.json").read_text()
    )
    specials = list(Tekkenizer.DEPRECATED_SPECIAL_TOKENS)
    for token in (
        SpecialTokens.args,
        SpecialTokens.call_id,
        SpecialTokens.begin_think,
        SpecialTokens.end_think,
    ):
        specials.append(SpecialTokenInfo(rank=len(specials), token_str=token, is_control=True))
    config = data["config"]
    tekken = Tekkenizer(
        data["vocab"],
        specials,
        config["pattern"],
        config["default_vocab_size"],
        config["default_num_special_tokens"],
        VERSIONS[version],
    )
    return InstructTokenizerV11(tekken) if version == "v11" else InstructTokenizerV13(tekken)


_INSTRUCT = {version: _instruct(version) for version in VERSIONS}


def _assistant(blocks: list[ContentBlock]) -> AssistantMessage:
    chunks: list[TextChunk | ThinkChunk] = []
    calls = []
    for block in blocks:
        if isinstance(block, ReasoningBlock):
            chunks.append(ThinkChunk(thinking=block.text))
        elif isinstance(block, TextBlock):
            chunks.append(TextChunk(text=block.text))
        elif isinstance(block, ToolCallBlock):
            arguments = json.dumps(block.arguments, ensure_ascii=False)
            calls.append(
                ToolCall(id=block.id, function=FunctionCall(name=block.name, arguments=arguments))
            )
    content: Any = chunks
    if not any(isinstance(c, ThinkChunk) for c in chunks):  # a client's plain string
        content = "".join(c.text for c in chunks if isinstance(c, TextChunk)) or None
    return AssistantMessage(content=content, tool_calls=calls or None)


def request(conversation: Conversation) -> ChatCompletionRequest:  # type: ignore[type-arg]
    """The conversation as the OpenAI-style request a client sends (one tool message per
    result, reasoning as a thinking chunk)."""
    messages: list[Any] = []
    for message in conversation.transcript.messages:
        if message.role == "system":
            messages.append(SystemMessage(content=message.text))
        elif message.role == "user":
            messages.append(UserMessage(content=message.text))
        elif message.role == "assistant":
            messages.append(_assistant(message.content))
        else:
            messages.extend(
                ToolMessage(content=r.content, tool_call_id=r.call_id, name=r.name)
                for r in message.content
                if isinstance(r, ToolResultBlock)
            )
    tools = [Tool.model_validate(dict(t)) for t in conversation.tools] or None
    return ChatCompletionRequest(messages=messages, tools=tools)


def encoder(version: str) -> Render:
    """mistral-common's prompt text for ``version``: the version's normalizer, then its
    instruct encoder, decoded with the special tokens kept."""
    instruct = _INSTRUCT[version]

    def render(conversation: Conversation) -> str:
        normalized = get_normalizer(VERSIONS[version]).from_chat_completion_request(
            request(conversation)
        )
        tokens = instruct.encode_instruct(normalized).tokens
        return str(instruct.decode(tokens, special_token_policy=SpecialTokenPolicy.KEEP))

    return render


def validated_encoder(version: str) -> Render:
    """The whole pipeline vLLM runs (validation included)."""
    instruct = _INSTRUCT[version]
    tokenizer: Any = MistralTokenizer(
        instruct,
        get_validator(VERSIONS[version], mode=ValidationMode.test),
        get_normalizer(VERSIONS[version]),
    )

    def render(conversation: Conversation) -> str:
        tokens = tokenizer.encode_chat_completion(request(conversation)).tokens
        return str(instruct.decode(tokens, special_token_policy=SpecialTokenPolicy.KEEP))

    return render


# --- family-specific conversations ----------------------------------------------------------


def _transcript(*messages: tuple[str, str | list[ContentBlock]]) -> Transcript:
    t = Transcript()
    for role, content in messages:
        t.add(role, content)  # type: ignore[arg-type]
    return t


def _result(call: ToolCallBlock, content: str) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, name=call.name, content=content)


PARIS = ToolCallBlock(id="a1B2c3D4e", name="lookup", arguments={"key": "Paris"})
OSLO = ToolCallBlock(id="Z9y8X7w6V", name="lookup", arguments={"key": "Oslo", "limit": 1})
BARE_TOOL = {"type": "function", "function": {"name": "now", "parameters": {}}}


def family_conversations(*, reasoning: bool) -> list[Conversation]:
    """What the standard set leaves out and the encoders treat in their own way."""
    think: list[ContentBlock] = [ReasoningBlock(text="Both cities.")] if reasoning else []
    return [
        Conversation(
            "consecutive user messages, a later system message",
            _transcript(
                ("system", "Be terse."),
                ("user", "First part."),
                ("user", "Second part."),
                ("assistant", [TextBlock(text="Noted.  ")]),
                ("system", "Now answer in French."),
                ("user", "Go on."),
            ),
        ),
        Conversation(
            "two system messages before the first user message, a tool without a description",
            _transcript(("system", "One."), ("system", "Two."), ("user", "Hi.")),
            (*STANDARD_TOOLS, BARE_TOOL),
        ),
        Conversation(
            "results in another order than the calls",
            _transcript(
                ("user", "Paris and Oslo?"),
                ("assistant", [*think, PARIS, OSLO]),
                ("tool", [_result(OSLO, "5C")]),
                ("tool", [_result(PARIS, "20C")]),
            ),
            STANDARD_TOOLS,
        ),
    ]


VALID_IDS = Conversation(
    "nine-character ids, a system message, calls without text",
    _transcript(
        ("system", "Be terse."),
        ("user", "Paris and Oslo?"),
        ("assistant", [PARIS, OSLO]),
        ("tool", [_result(PARIS, "20C")]),
        ("tool", [_result(OSLO, "5C")]),
        ("assistant", [TextBlock(text="Paris 20C, Oslo 5C.")]),
        ("user", "Thanks. Rome?"),
    ),
    STANDARD_TOOLS,
)
"""What llama.cpp's template can express: it wants nine-character ids, puts its own default
system prompt where there is none, and drops the text of a message with calls."""


def _ids(conversations: list[Conversation]) -> list[Any]:
    return [pytest.param(c, id=c.name) for c in conversations]


# --- v13 ------------------------------------------------------------------------------------

V13_CONVERSATIONS = [*conversations_for(V13), *family_conversations(reasoning=True), VALID_IDS]


@pytest.mark.parametrize("conversation", _ids(V13_CONVERSATIONS))
def test_v13_prompts_equal_the_encoder(conversation: Conversation) -> None:
    expected = encoder("v13")(conversation)
    difference = first_difference(expected, profile_prompt(V13, conversation))
    assert difference is None, difference.describe(expected="encoder")


def test_v13_has_no_deviations() -> None:
    assert V13.deviations == ()
    assert V13.reasoning == "mistral"
    assert V13.replay == "keep_all"  # the encoder keeps every [THINK] block


# --- v11 ------------------------------------------------------------------------------------

V11_CONVERSATIONS = [*conversations_for(V11), *family_conversations(reasoning=False), VALID_IDS]


@pytest.mark.parametrize("conversation", _ids(V11_CONVERSATIONS))
def test_v11_prompts_equal_the_encoder(conversation: Conversation) -> None:
    expected = encoder("v11")(conversation)
    difference = first_difference(expected, profile_prompt(V11, conversation))
    assert difference is None, difference.describe(expected="encoder")


def test_v11_has_no_deviations() -> None:
    assert V11.deviations == ()


def test_a_new_user_message_moves_the_v11_tools_and_the_prompt_is_rebuilt() -> None:
    """v11's tools block stands before the last user message: a new one moves it, so the
    prompt builder renders that prompt whole and says why (the encoder's text, every turn)."""
    engine = TokenizedScriptedEngine([], specials=V11.special_tokens)
    builder = PromptBuilder(V11, engine, list(STANDARD_TOOLS))
    messages = VALID_IDS.transcript.messages
    transcript = Transcript(messages=list(messages[:2]))
    builder.next_prompt(transcript)
    output = '[TOOL_CALLS]lookup[CALL_ID]a1B2c3D4e[ARGS]{"key": "Paris"}'
    parser = V11.new_parser({"lookup": {}})
    parser.feed(output)
    parser.finish()
    generated = Message(
        role="assistant",
        content=list(parser.blocks),
        token_ids=[*engine.encode(output), *engine.encode("</s>")],
    )
    transcript.append(generated)
    builder.record(transcript, generated)
    transcript.add("tool", [_result(PARIS, "20C")])
    in_loop = builder.next_prompt(transcript)
    assert in_loop.rebuilt is None  # no new user message: the prompt extends the last
    answer = Message(
        role="assistant",
        content=[TextBlock(text="Paris 20C.", raw="Paris 20C.")],
        token_ids=[*engine.encode("Paris 20C."), *engine.encode("</s>")],
    )
    transcript.append(answer)
    builder.record(transcript, answer)
    transcript.add("user", "And Rome?")
    moved = builder.next_prompt(transcript)
    assert (
        moved.rebuilt
        == "the chat template moves [AVAILABLE_TOOLS] before the last user message (Mistral v11)"
    )
    assert moved.text.index("[AVAILABLE_TOOLS]") > moved.text.index("Paris and Oslo?")
    assert moved.text == V11.template.render(transcript, STANDARD_TOOLS)


def test_v11_calls_and_results_carry_the_ids() -> None:
    prompt = profile_prompt(V11, VALID_IDS)
    assert '[TOOL_CALLS]lookup[CALL_ID]a1B2c3D4e[ARGS]{"key": "Paris"}' in prompt
    assert "[TOOL_RESULTS]Z9y8X7w6V[TOOL_CONTENT]5C[/TOOL_RESULTS]" in prompt


def test_v11_validated_pipeline_and_jinja_template_agree() -> None:
    """With ids the v11 validator accepts and nothing llama.cpp's template cannot express, the
    validated encoder, the template and the profile (tools moved back) write the same text."""
    expected = validated_encoder("v11")(VALID_IDS)
    assert expected == encoder("v11")(VALID_IDS)
    jinja = jinja_reference("mistral-small-3.2.jinja", bos_token="<s>", eos_token="</s>")
    assert jinja(VALID_IDS) == expected
    assert profile_prompt(V11, VALID_IDS) == expected


def test_v11_has_no_reasoning_form() -> None:
    """mistral-common refuses thinking chunks before v13; the v11 profile parses none and its
    prompt leaves reasoning blocks out."""
    think = _transcript(
        ("user", "Hi."), ("assistant", [ReasoningBlock(text="hm"), TextBlock(text="Hello.")])
    )
    with pytest.raises(Exception, match=r"[Tt]hink"):
        encoder("v11")(Conversation("reasoning", think))
    assert V11.reasoning is None
    assert V11.template.render(think, []) == "<s>[INST]Hi.[/INST]Hello.</s>"


# --- which profile a served name gets -------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral-v11"),
        ("mistralai/Magistral-Small-2506", "mistral-v11"),
        ("mistralai/Magistral-Small-2507", "mistral-v13"),
        ("mistralai/Magistral-Small-2509", "mistral-v13"),
        ("mistralai/Devstral-Small-2507", "mistral-v13"),
        ("mistral", "mistral-v11"),
    ],
)
def test_served_names_pick_the_version(model: str, profile: str) -> None:
    assert profile_for_model(model).name == profile


def test_where_the_jinja_template_departs_from_the_encoder() -> None:
    """Why the encoder is the reference for v11: llama.cpp's template writes its own default
    system prompt (with today's date) where the conversation has none, and drops the text of
    an assistant message that has calls; the encoder, and the profile, do neither."""
    jinja = jinja_reference("mistral-small-3.2.jinja", bos_token="<s>", eos_token="</s>")
    no_system = Conversation("no system message", _transcript(("user", "Hi.")))
    assert jinja(no_system).startswith("<s>[SYSTEM_PROMPT]You are Mistral Small 3")
    assert encoder("v11")(no_system) == profile_prompt(V11, no_system) == "<s>[INST]Hi.[/INST]"
    text_and_calls = Conversation(
        "text beside calls",
        _transcript(
            ("system", "Be terse."),
            ("user", "Paris?"),
            ("assistant", [TextBlock(text="Looking."), PARIS]),
            ("tool", [_result(PARIS, "20C")]),
        ),
    )
    assert "Looking." not in jinja(text_and_calls)
    assert "[/INST]Looking.[TOOL_CALLS]lookup[CALL_ID]a1B2c3D4e" in encoder("v11")(text_and_calls)
    assert encoder("v11")(text_and_calls) == profile_prompt(V11, text_and_calls)
