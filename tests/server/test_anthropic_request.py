"""Anthropic Messages requests into transcripts: what real clients send, every validation
error, the billing header, and exact replay through the turn store."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit.server._anthropic_request import (
    ConvertedRequest,
    CountTokensRequest,
    InvalidRequestError,
    MessagesRequest,
    convert_request,
    parse_count_tokens_request,
    parse_messages_request,
)
from agentkit.server._signing import ThinkingSigner
from agentkit.server._turns import TurnStore
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

SIGNER = ThinkingSigner(b"test-key")


def body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "local", "max_tokens": 256, "messages": messages, **fields}


def convert(
    payload: dict[str, Any], *, turns: TurnStore | None = None, **options: Any
) -> ConvertedRequest:
    return convert_request(
        parse_messages_request(payload),
        turns=turns if turns is not None else TurnStore(),
        signer=SIGNER,
        **options,
    )


def shape(transcript: Transcript) -> list[tuple[str, list[Any]]]:
    """Roles and blocks, without the fields a client cannot send back."""
    return [
        (m.role, [b.model_dump(exclude={"raw", "signature"}) for b in m.content])
        for m in transcript.messages
    ]


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


# -- the request models ----------------------------------------------------------------------


def test_unknown_top_level_fields_and_tolerated_options_are_accepted() -> None:
    req = parse_messages_request(
        body(
            [user("hi")],
            metadata={"user_id": "u"},
            context_management={"edits": []},
            output_config={"effort": "high"},
            mcp_servers=[],
            service_tier="auto",
        )
    )
    assert isinstance(req, MessagesRequest)
    assert req.stream is False
    counted = parse_count_tokens_request({"model": "m", "messages": [user("hi")]})
    assert isinstance(counted, CountTokensRequest)
    converted = convert_request(counted, turns=TurnStore(), signer=SIGNER)
    assert converted.max_tokens is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "the request body must be a JSON object"),
        ({"model": "m", "messages": [user("hi")]}, "max_tokens: field required"),
        (body([user("hi")], max_tokens=0), "max_tokens: input should be greater than"),
        (body([]), "messages: list should have at least 1 item"),
        ({"max_tokens": 1, "messages": [user("hi")]}, "model: field required"),
        (body([user("hi")], stop_sequences="END"), "stop_sequences: input should be"),
        (body(["hi"]), "messages.0: input should be a valid dictionary"),
    ],
)
def test_request_model_errors_name_the_field(payload: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_messages_request(payload)
    assert str(info.value).startswith(message)


# -- system prompt and billing header -----------------------------------------------------------

CLAUDE_CODE_SYSTEM = [
    "You are Claude Code, Anthropic's official CLI for Claude.",
    "You are an interactive agent that helps users with software engineering tasks.",
]
BILLING = "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=sdk-cli;"
BILLING_CCH = "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=cli; cch=9f3a1;"


def text_blocks(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t, "cache_control": {"type": "ephemeral"}} for t in texts]


def test_system_blocks_are_joined_with_a_blank_line_and_empty_ones_skipped() -> None:
    converted = convert(body([user("hi")], system=text_blocks("A", "", "B")))
    assert shape(converted.transcript)[0] == ("system", [{"type": "text", "text": "A\n\nB"}])
    assert convert(body([user("hi")], system="S")).transcript.messages[0].text == "S"
    assert convert(body([user("hi")], system=[])).transcript.messages[0].role == "user"


@pytest.mark.parametrize("header", [BILLING, BILLING_CCH])
@pytest.mark.parametrize(
    "system",
    [
        pytest.param(lambda h: text_blocks(h, *CLAUDE_CODE_SYSTEM), id="own-block"),
        pytest.param(
            lambda h: text_blocks(f"{h}\n{CLAUDE_CODE_SYSTEM[0]}", CLAUDE_CODE_SYSTEM[1]),
            id="first-line-of-block",
        ),
        pytest.param(lambda h: f"{h}\n" + "\n\n".join(CLAUDE_CODE_SYSTEM), id="string"),
        pytest.param(lambda h: text_blocks(f"{h}\n", *CLAUDE_CODE_SYSTEM), id="line-and-newline"),
    ],
)
def test_billing_header_is_stripped(header: str, system: Any) -> None:
    converted = convert(body([user("hi")], system=system(header)))
    assert converted.billing_header == header
    assert converted.transcript.messages[0].text == "\n\n".join(CLAUDE_CODE_SYSTEM)
    plain = convert(body([user("hi")], system=text_blocks(*CLAUDE_CODE_SYSTEM)))
    assert plain.billing_header is None
    assert converted.transcript == plain.transcript


def test_requests_differing_only_in_the_billing_line_give_equal_transcripts() -> None:
    a = convert(body([user("hi")], system=text_blocks(BILLING, *CLAUDE_CODE_SYSTEM)))
    b = convert(body([user("hi")], system=text_blocks(BILLING_CCH, *CLAUDE_CODE_SYSTEM)))
    assert a.transcript == b.transcript
    assert a.billing_header != b.billing_header


def test_billing_header_kept_when_told_and_only_at_the_start() -> None:
    kept = convert(body([user("hi")], system=text_blocks(BILLING, "S")), strip_billing_header=False)
    assert kept.transcript.messages[0].text == f"{BILLING}\n\nS"
    assert kept.billing_header == BILLING
    later = convert(body([user("hi")], system=text_blocks("S", BILLING)))
    assert later.billing_header is None
    assert BILLING in later.transcript.messages[0].text
    alone = convert(body([user("hi")], system=BILLING))
    assert [m.role for m in alone.transcript.messages] == ["user"]


def test_billing_header_in_a_leading_system_message() -> None:
    converted = convert(body([{"role": "system", "content": f"{BILLING}\nS"}, user("hi")]))
    assert converted.billing_header == BILLING
    assert shape(converted.transcript)[0] == ("system", [{"type": "text", "text": "S"}])


def test_system_messages_inside_messages() -> None:
    converted = convert(
        body(
            [
                {"role": "system", "content": "lead"},
                user("hi"),
                assistant("hello"),
                {"role": "system", "content": text_blocks("mid", "dle")},
                user("go"),
            ],
            system="top",
        )
    )
    assert [(m.role, m.text) for m in converted.transcript.messages] == [
        ("system", "top\n\nlead"),
        ("user", "hi"),
        ("assistant", "hello"),
        ("system", "mid\n\ndle"),
        ("user", "go"),
    ]


# -- messages and blocks ------------------------------------------------------------------------


def test_consecutive_messages_of_one_role_are_merged_in_order() -> None:
    converted = convert(
        body(
            [
                user("a"),
                user([{"type": "text", "text": "b"}]),
                assistant("c"),
                assistant([{"type": "tool_use", "id": "t", "name": "f", "input": {}}]),
                user([{"type": "tool_result", "tool_use_id": "t", "content": "r"}]),
                user("d"),
            ]
        )
    )
    assert shape(converted.transcript) == [
        ("user", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        (
            "assistant",
            [
                {"type": "text", "text": "c"},
                {"type": "tool_call", "id": "t", "name": "f", "arguments": {}, "error": None},
            ],
        ),
        ("tool", [tool_result("t", "f", "r")]),
        ("user", [{"type": "text", "text": "d"}]),
    ]


def tool_result(call_id: str, name: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "call_id": call_id,
        "name": name,
        "content": content,
        "is_error": is_error,
        "original_content": None,
    }


def test_tool_results_come_first_named_after_their_calls() -> None:
    converted = convert(
        body(
            [
                user("list and read"),
                assistant(
                    [
                        {"type": "tool_use", "id": "a", "name": "ls", "input": {"p": "."}},
                        {"type": "tool_use", "id": "b", "name": "read", "input": {"p": "x"}},
                    ]
                ),
                user(
                    [
                        {"type": "text", "text": "before"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "b",
                            "content": [
                                {"type": "text", "text": "one"},
                                {"type": "image", "source": {"type": "base64", "data": ""}},
                                {"type": "text", "text": "two"},
                            ],
                            "is_error": True,
                            "cache_control": {"type": "ephemeral"},
                        },
                        {"type": "tool_result", "tool_use_id": "a"},
                        {"type": "tool_result", "tool_use_id": "zz", "content": "?"},
                        {"type": "text", "text": "after"},
                    ]
                ),
            ]
        )
    )
    tool, follow = converted.transcript.messages[2:]
    assert shape(Transcript(messages=[tool]))[0][1] == [
        tool_result("b", "read", "one\n\n[image omitted]\n\ntwo", is_error=True),
        tool_result("a", "ls", ""),
        tool_result("zz", "unknown", "?"),
    ]
    assert follow.role == "user"
    assert [b.text for b in follow.content if isinstance(b, TextBlock)] == ["before", "after"]


def test_assistant_blocks_keep_their_interleaved_order() -> None:
    converted = convert(
        body(
            [
                user("q"),
                assistant(
                    [
                        {"type": "thinking", "thinking": "r0", "signature": ""},
                        {"type": "tool_use", "id": "0", "name": "f", "input": {"x": 1}},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "thinking", "thinking": "r1"},
                        {"type": "tool_use", "id": "1", "name": "g", "input": {}},
                        {"type": "text", "text": "done", "citations": None},
                    ]
                ),
            ]
        )
    )
    blocks = converted.transcript.messages[1].content
    assert [type(b).__name__ for b in blocks] == [
        "ReasoningBlock",
        "ToolCallBlock",
        "ReasoningBlock",
        "ToolCallBlock",
        "TextBlock",
    ]
    assert [getattr(b, "text", getattr(b, "id", None)) for b in blocks] == [
        "r0",
        "0",
        "r1",
        "1",
        "done",
    ]
    assert converted.prefill is True
    assert converted.replayed[0].reason == "prefill"


def test_placeholders_for_what_a_text_model_cannot_read() -> None:
    converted = convert(
        body(
            [
                user(
                    [
                        {"type": "image", "source": {"type": "url", "url": "http://x"}},
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf"},
                        },
                        {"type": "document", "title": "spec.pdf", "source": {"type": "file"}},
                        {
                            "type": "document",
                            "title": "notes",
                            "source": {"type": "text", "media_type": "text/plain", "data": "N"},
                        },
                        {
                            "type": "document",
                            "source": {"type": "content", "content": text_blocks("c1", "c2")},
                        },
                        {"type": "document"},
                        {"type": "search_result", "source": "s", "title": "t", "content": []},
                    ]
                )
            ]
        )
    )
    texts = [b.text for b in converted.transcript.messages[0].content if isinstance(b, TextBlock)]
    assert texts == [
        "[image omitted]",
        "[document omitted: application/pdf]",
        "[document omitted: spec.pdf]",
        "notes\n\nN",
        "c1\n\nc2",
        "[document omitted]",
        "[search_result block omitted]",
    ]


def test_empty_contents_are_kept_as_messages() -> None:
    converted = convert(body([user([]), assistant(""), user("x")]))
    assert [(m.role, len(m.content)) for m in converted.transcript.messages] == [
        ("user", 0),
        ("assistant", 1),
        ("user", 1),
    ]


# -- tools, tool choice, thinking, options ---------------------------------------------------

TOOLS = [
    {
        "name": "read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}},
        "cache_control": {"type": "ephemeral"},
    },
    {"type": "custom", "name": "ls", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "bash_20250124", "name": "bash"},
]


def test_tools_become_function_specs_and_server_tools_are_dropped() -> None:
    converted = convert(body([user("hi")], tools=TOOLS))
    assert converted.tools == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"p": {"type": "string"}}},
            },
        },
        {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}},
    ]
    assert [note.split(":")[0] for note in converted.dropped_tools] == [
        "web_search (web_search_20250305)",
        "bash (bash_20250124)",
    ]
    assert convert(body([user("hi")])).tools == []


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, "auto"),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "tool", "name": "read"}, "read"),
        ({"type": "none"}, "none"),
    ],
)
def test_tool_choice(choice: dict[str, Any] | None, expected: str) -> None:
    assert convert(body([user("hi")], tools=TOOLS, tool_choice=choice)).tool_choice == expected


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [
        (None, (False, None)),
        ({"type": "enabled", "budget_tokens": 2048}, (True, 2048)),
        ({"type": "enabled"}, (True, None)),
        ({"type": "adaptive"}, (True, None)),
        ({"type": "disabled"}, (False, None)),
    ],
)
def test_thinking(thinking: dict[str, Any] | None, expected: tuple[bool, int | None]) -> None:
    converted = convert(body([user("hi")], thinking=thinking))
    assert (converted.thinking, converted.thinking_budget) == expected


def test_sampling_options_pass_through() -> None:
    converted = convert(
        body([user("hi")], temperature=0.2, top_p=0.9, top_k=40, stop_sequences=["END"])
    )
    assert (converted.max_tokens, converted.temperature, converted.top_p, converted.top_k) == (
        256,
        0.2,
        0.9,
        40,
    )
    assert converted.stop == ["END"]
    assert convert(body([user("hi")])).stop == []


# -- validation ---------------------------------------------------------------------------------

TOOL_USE = {"type": "tool_use", "id": "t", "name": "f", "input": {}}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"messages": [{"content": "x"}]}, "messages.0.role: field required"),
        ({"messages": [{"role": 1, "content": "x"}]}, "messages.0.role: expected a string"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role: unknown role 'tool'"),
        ({"messages": [{"role": "user"}]}, "messages.0.content: field required"),
        ({"messages": [user(None)]}, "messages.0.content: expected a string or a list"),
        ({"messages": [user(["x"])]}, "messages.0.content.0: expected a content block"),
        ({"messages": [user([{"text": "x"}])]}, "messages.0.content.0.type: field required"),
        ({"messages": [user([{"type": "text"}])]}, "messages.0.content.0.text: field required"),
        (
            {"messages": [user([{"type": "text", "text": 3}])]},
            "messages.0.content.0.text: expected a string",
        ),
        (
            {"messages": [user([{"type": "video"}])]},
            "messages.0.content.0.type: unknown content block type 'video'",
        ),
        (
            {"messages": [user("a"), assistant("b"), user("c"), user([{"type": "tool_result"}])]},
            "messages.3.content.0.tool_use_id: field required",
        ),
        (
            {"messages": [user([{"type": "tool_result", "tool_use_id": "t", "content": 5}])]},
            "messages.0.content.0.content: expected a string or a list",
        ),
        (
            {"messages": [user([{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}])]},
            "messages.0.content.0.is_error: expected a boolean",
        ),
        (
            {
                "messages": [
                    user([{"type": "tool_result", "tool_use_id": "t", "content": [TOOL_USE]}])
                ]
            },
            "messages.0.content.0.content.0.type: unexpected block type 'tool_use'",
        ),
        (
            {"messages": [user([{"type": "tool_result", "tool_use_id": "t", "content": [1]}])]},
            "messages.0.content.0.content.0: expected a content block",
        ),
        ({"messages": [user([TOOL_USE])]}, "messages.0.content.0.type: tool_use blocks belong"),
        (
            {"messages": [assistant([{"type": "tool_result", "tool_use_id": "t"}])]},
            "messages.0.content.0.type: tool_result blocks belong",
        ),
        (
            {"messages": [user([{"type": "thinking", "thinking": "x"}])]},
            "messages.0.content.0.type: thinking blocks belong",
        ),
        (
            {"messages": [assistant([{**TOOL_USE, "input": "{}"}])]},
            "messages.0.content.0.input: expected an object",
        ),
        (
            {"messages": [assistant([{"type": "tool_use", "name": "f", "input": {}}])]},
            "messages.0.content.0.id: field required",
        ),
        (
            {"messages": [assistant([{"type": "tool_use", "id": "t", "input": {}}])]},
            "messages.0.content.0.name: field required",
        ),
        (
            {"messages": [assistant([{"type": "thinking"}])]},
            "messages.0.content.0.thinking: field required",
        ),
        (
            {"messages": [assistant([{"type": "thinking", "thinking": "x", "signature": 1}])]},
            "messages.0.content.0.signature: expected a string",
        ),
        ({"system": [{"type": "image"}]}, "system.0.type: expected 'text', not 'image'"),
        ({"system": [{"text": "x"}]}, "system.0.type: field required"),
        ({"system": [{"type": "text"}]}, "system.0.text: field required"),
        ({"tools": [{"input_schema": {}}]}, "tools.0.name: field required"),
        ({"tools": [{"name": "", "input_schema": {}}]}, "tools.0.name: must not be empty"),
        ({"tools": [{"name": "f"}]}, "tools.0.input_schema: field required"),
        ({"tools": [{"name": "f", "input_schema": []}]}, "tools.0.input_schema: expected an"),
        ({"tools": [{"name": "f", "input_schema": {}, "description": 2}]}, "tools.0.description"),
        ({"tools": [{"name": "f", "input_schema": {}, "type": 3}]}, "tools.0.type: expected"),
        (
            {"tools": [{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}]},
            "tools.1.name: duplicate tool name 'f'",
        ),
        ({"tool_choice": {}}, "tool_choice.type: field required"),
        ({"tool_choice": {"type": "some"}}, "tool_choice.type: unknown tool_choice type"),
        ({"tool_choice": {"type": "any"}}, "tool_choice.type: 'any' needs at least one"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.name: field required"),
        (
            {"tool_choice": {"type": "tool", "name": "nope"}, "tools": TOOLS},
            "tool_choice.name: 'nope' is not in tools",
        ),
        (
            {"tool_choice": {"type": "tool", "name": "bash"}, "tools": TOOLS},
            "tool_choice.name: 'bash' is a server tool",
        ),
        ({"thinking": {}}, "thinking.type: field required"),
        ({"thinking": {"type": "on"}}, "thinking.type: unknown thinking type 'on'"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": "1k"}},
            "thinking.budget_tokens: expected an integer",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": True}},
            "thinking.budget_tokens: expected an integer",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 0}},
            "thinking.budget_tokens: must be at least 1",
        ),
    ],
)
def test_validation_errors_name_the_path(fields: dict[str, Any], message: str) -> None:
    payload = body([user("hi")])
    payload.update(fields)
    with pytest.raises(InvalidRequestError) as info:
        convert(payload)
    assert str(info.value).startswith(message), str(info.value)
    assert info.value.path == message.split(":")[0]
    assert info.value.message == str(info.value)


# -- exact replay -----------------------------------------------------------------------------


def generated_turn() -> Message:
    return Message(
        role="assistant",
        content=[
            ReasoningBlock(text="look first", raw="<think>\nlook first\n</think>\n\n"),
            TextBlock(text="Listing.", raw="Listing.\n"),
            ToolCallBlock(id="call_0", name="ls", arguments={"p": "."}, raw="<tool_call>…"),
        ],
        token_ids=[11, 12, 13, 14],
    )


def sent_back(message: Message, *, signature: str | None = "sign") -> dict[str, Any]:
    """The turn as Claude Code sends it back."""
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ReasoningBlock):
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.text}
            if signature == "sign":
                thinking["signature"] = SIGNER.sign(block.text)
            elif signature is not None:
                thinking["signature"] = signature
            content.append(thinking)
        elif isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text.strip()})
        elif isinstance(block, ToolCallBlock):
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
    return assistant(content)


RESULT = user([{"type": "tool_result", "tool_use_id": "call_0", "content": "a.py"}])


def test_a_generated_turn_sent_back_is_restored_exactly() -> None:
    turns = TurnStore()
    turn = generated_turn()
    turns.remember(turn)
    converted = convert(body([user("ls"), sent_back(turn), RESULT]), turns=turns)
    replayed = converted.transcript.messages[1]
    assert replayed == turn
    assert replayed.raw == turn.raw
    assert replayed.token_ids == [11, 12, 13, 14]
    (note,) = converted.replayed
    assert (note.restored, note.message_index, note.request_index) == (True, 1, 1)
    assert "restored" in str(note)
    assert converted.transcript.messages[2].content[0] == ToolResultBlock(
        call_id="call_0", name="ls", content="a.py"
    )


@pytest.mark.parametrize(
    ("signature", "edit", "reason"),
    [
        ("sign", False, "restored"),
        ("sign", True, "not_stored"),
        (None, True, "unsigned"),
        ("", True, "unsigned"),
        ("ErUBCkYIBRgCIkD…", True, "bad_signature"),
        ("ak1.forged", True, "bad_signature"),
    ],
)
def test_replay_notes_say_why(signature: str | None, edit: bool, reason: str) -> None:
    turns = TurnStore()
    turn = generated_turn()
    turns.remember(turn)
    back = sent_back(turn, signature=signature)
    if edit:
        back["content"][1]["text"] = "Listing, edited."
    converted = convert(body([user("ls"), back, RESULT]), turns=turns)
    (note,) = converted.replayed
    assert note.reason == reason
    assert note.restored is (reason == "restored")
    assert note.detail
    if not note.restored:
        assert converted.transcript.messages[1].token_ids is None


def test_unknown_turns_and_a_signature_only_from_the_same_key() -> None:
    converted = convert(body([user("a"), assistant("b"), user("c")]))
    assert [n.reason for n in converted.replayed] == ["not_generated_here"]
    turn = generated_turn()
    back = sent_back(turn)
    other = convert_request(
        parse_messages_request(body([user("ls"), back, RESULT])),
        turns=TurnStore(),
        signer=ThinkingSigner(b"another key"),
    )
    assert [n.reason for n in other.replayed] == ["bad_signature"]
    same_key = convert(body([user("ls"), back, RESULT]))
    assert [n.reason for n in same_key.replayed] == ["not_stored"]


def test_a_two_turn_conversation_restores_both_turns() -> None:
    turns = TurnStore()
    first = generated_turn()
    second = Message(
        role="assistant",
        content=[TextBlock(text="There is a.py.", raw="There is a.py.")],
        token_ids=[21, 22],
    )
    turns.remember(first)
    turns.remember(second)
    converted = convert(
        body([user("ls"), sent_back(first), RESULT, sent_back(second), user("thanks")]),
        turns=turns,
    )
    assert [n.reason for n in converted.replayed] == ["restored", "restored"]
    assert converted.transcript.messages[1] == first
    assert converted.transcript.messages[3] == second
    assert converted.prefill is False


def test_conversion_does_not_change_the_request() -> None:
    payload = body(
        [user("ls"), sent_back(generated_turn()), RESULT],
        system=text_blocks(BILLING, "S"),
        tools=TOOLS,
    )
    before = copy.deepcopy(payload)
    req = parse_messages_request(payload)
    convert_request(req, turns=TurnStore(), signer=SIGNER)
    assert req.model_dump(exclude_unset=True) == before


# -- round trip property ------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_args = st.dictionaries(
    st.text(max_size=5), st.none() | st.booleans() | st.integers() | _text, max_size=3
)


@st.composite
def transcripts(draw: st.DrawFn) -> Transcript:
    transcript = Transcript()
    if draw(st.booleans()):
        transcript.add("system", draw(_text))
    transcript.add("user", [TextBlock(text=t) for t in draw(st.lists(_text, min_size=1))])
    calls = 0
    for _ in range(draw(st.integers(0, 4))):
        blocks: list[ContentBlock] = []
        for kind in draw(st.lists(st.sampled_from(["r", "t", "c"]), min_size=1, max_size=5)):
            if kind == "r":
                blocks.append(ReasoningBlock(text=draw(_text)))
            elif kind == "t":
                blocks.append(TextBlock(text=draw(_text)))
            else:
                name = draw(st.sampled_from(["ls", "read", "grep"]))
                blocks.append(ToolCallBlock(id=f"c{calls}", name=name, arguments=draw(_args)))
                calls += 1
        message = transcript.add("assistant", blocks)
        results = [
            ToolResultBlock(
                call_id=c.id, name=c.name, content=draw(st.text()), is_error=draw(st.booleans())
            )
            for c in message.tool_calls
        ]
        if results:
            transcript.add("tool", results)
        texts = draw(st.lists(_text, min_size=0 if results else 1, max_size=2))
        if texts:
            transcript.add("user", [TextBlock(text=t) for t in texts])
    return transcript


def to_anthropic(transcript: Transcript) -> dict[str, Any]:
    """The transcript as an Anthropic client would send it (a test-side reference)."""
    system: str | None = None
    messages: list[dict[str, Any]] = []
    for message in transcript.messages:
        content: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ReasoningBlock):
                content.append(
                    {
                        "type": "thinking",
                        "thinking": block.text,
                        "signature": SIGNER.sign(block.text),
                    }
                )
            elif isinstance(block, ToolCallBlock):
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": block.arguments,
                    }
                )
            elif isinstance(block, ToolResultBlock):
                content.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": block.call_id,
                        "content": [{"type": "text", "text": block.content}],
                        "is_error": block.is_error,
                    }
                )
        if message.role == "system":
            system = message.text
            continue
        role = "user" if message.role == "tool" else message.role
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += content
        else:
            messages.append({"role": role, "content": content})
    return body(messages, system=system) if system is not None else body(messages)


@given(transcripts())
def test_transcript_to_anthropic_and_back_preserves_blocks(transcript: Transcript) -> None:
    converted = convert(to_anthropic(transcript))
    assert shape(converted.transcript) == shape(transcript)
    assert all(not note.restored for note in converted.replayed)


@given(transcripts())
def test_generated_turns_sent_back_are_all_restored(transcript: Transcript) -> None:
    # Turns with equal visible content are one entry in the store (the newest), so what is
    # stored here depends only on the visible content.
    turns = TurnStore()
    for message in transcript.messages:
        if message.role == "assistant":
            for block in message.content:
                block.raw = f"<{block.type}>"
            message.token_ids = [len(message.content)]
            turns.remember(message.model_copy(deep=True))
    converted = convert(to_anthropic(transcript), turns=turns)
    assert converted.transcript == transcript
    assert all(note.restored for note in converted.replayed)


# -- signatures ---------------------------------------------------------------------------------


def test_signer() -> None:
    signature = SIGNER.sign("thought")
    assert signature.startswith("ak1.")
    assert "=" not in signature
    assert SIGNER.verify("thought", signature)
    assert SIGNER.sign("thought") == signature
    assert not SIGNER.verify("thought.", signature)
    assert not SIGNER.verify("thought", None)
    assert not SIGNER.verify("thought", "")
    assert not SIGNER.verify("thought", "EqQBCkgIARABGAIiQ…")
    assert not SIGNER.verify("thought", signature[:-1])
    assert not SIGNER.verify("thought", signature + "é")
    assert not ThinkingSigner(b"other").verify("thought", signature)
    random_a, random_b = ThinkingSigner(), ThinkingSigner()
    assert not random_b.verify("x", random_a.sign("x"))
    assert ThinkingSigner(b"k").verify("x", ThinkingSigner(b"k").sign("x"))
    with pytest.raises(ValueError, match="empty"):
        ThinkingSigner(b"")
