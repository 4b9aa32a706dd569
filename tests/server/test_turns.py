"""The turn store: generated assistant messages found again from their visible content."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit.server._turns import TurnStore, visible_key
from agentkit.transcript import ContentBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock


def generated(*blocks: ContentBlock, ids: list[int] | None = None) -> Message:
    return Message(role="assistant", content=list(blocks), token_ids=ids or [1, 2, 3])


def visible(message: Message) -> list[ContentBlock]:
    """What a client sends back: the blocks without ``raw``."""
    return [block.model_copy(update={"raw": None}) for block in message.content]


INTERLEAVED = generated(
    ReasoningBlock(text="first look", raw="<think>\nfirst look\n</think>\n\n"),
    ToolCallBlock(id="c0", name="ls", arguments={"path": "."}, raw='<tool_call>{"ls"}'),
    ReasoningBlock(text="then read", raw="<think>then read</think>"),
    ToolCallBlock(id="c1", name="read", arguments={"path": "a.py", "n": 1}, raw="<tc1>"),
    ids=[7, 8, 9],
)


def test_restore_returns_the_stored_message_with_raw_and_token_ids() -> None:
    store = TurnStore()
    store.remember(INTERLEAVED)
    restored = store.restore(visible(INTERLEAVED))
    assert restored == INTERLEAVED
    assert restored is not None
    assert restored.token_ids == [7, 8, 9]
    assert restored.raw == INTERLEAVED.raw
    assert len(store) == 1
    assert visible(INTERLEAVED) in store


def test_restore_returns_a_copy() -> None:
    store = TurnStore()
    store.remember(INTERLEAVED)
    first = store.restore(visible(INTERLEAVED))
    assert first is not None
    first.content.clear()
    assert store.restore(visible(INTERLEAVED)) == INTERLEAVED


def test_restore_ignores_whitespace_around_text_and_reasoning() -> None:
    store = TurnStore()
    message = generated(
        ReasoningBlock(text="\nplan\n", raw="<think>\nplan\n</think>"),
        TextBlock(text="\n\n", raw="\n\n"),
        TextBlock(text="  Answer.\n", raw="  Answer.\n"),
        ToolCallBlock(id="c", name="f", arguments={}, raw="<call>"),
    )
    store.remember(message)
    sent = [
        ReasoningBlock(text="plan"),
        TextBlock(text="Answer."),
        ToolCallBlock(id="c", name="f", arguments={}),
    ]
    assert store.restore(sent) == message


def test_integral_floats_equal_ints_in_arguments() -> None:
    store = TurnStore()
    message = generated(ToolCallBlock(id="c", name="f", arguments={"n": 2.0, "xs": [1.0, 0.5]}))
    store.remember(message)
    assert store.restore([ToolCallBlock(id="c", name="f", arguments={"xs": [1, 0.5], "n": 2})])


@pytest.mark.parametrize(
    "edited",
    [
        pytest.param(
            [ReasoningBlock(text="first look!"), *visible(INTERLEAVED)[1:]], id="reasoning"
        ),
        pytest.param(
            [*visible(INTERLEAVED)[:3], ToolCallBlock(id="c1", name="read", arguments={})],
            id="arguments",
        ),
        pytest.param(
            [
                *visible(INTERLEAVED)[:3],
                ToolCallBlock(id="c9", name="read", arguments={"path": "a.py", "n": 1}),
            ],
            id="call-id",
        ),
        pytest.param(
            [
                *visible(INTERLEAVED)[:3],
                ToolCallBlock(id="c1", name="open", arguments={"path": "a.py", "n": 1}),
            ],
            id="tool-name",
        ),
        pytest.param(
            [
                *visible(INTERLEAVED)[:3],
                ToolCallBlock(id="c1", name="read", arguments={"path": "a.py", "n": True}),
            ],
            id="bool-is-not-int",
        ),
        pytest.param(visible(INTERLEAVED)[1:], id="block-removed"),
        pytest.param([*visible(INTERLEAVED), TextBlock(text="more")], id="block-added"),
        pytest.param([visible(INTERLEAVED)[i] for i in (0, 2, 1, 3)], id="interleaving-collapsed"),
        pytest.param(
            [TextBlock(text="first look"), *visible(INTERLEAVED)[1:]], id="reasoning-as-text"
        ),
    ],
)
def test_an_edit_misses(edited: list[ContentBlock]) -> None:
    store = TurnStore()
    store.remember(INTERLEAVED)
    assert store.restore(edited) is None


def test_least_recently_used_turn_is_evicted() -> None:
    store = TurnStore(max_turns=2)
    a, b, c = (generated(TextBlock(text=t, raw=t)) for t in "abc")
    store.remember(a)
    store.remember(b)
    assert store.restore(visible(a)) == a  # a is now the most recently used
    store.remember(c)
    assert len(store) == 2
    assert store.restore(visible(b)) is None
    assert store.restore(visible(a)) == a
    assert store.restore(visible(c)) == c


def test_same_visible_content_keeps_the_newest() -> None:
    store = TurnStore()
    store.remember(generated(TextBlock(text="ok", raw="ok"), ids=[1]))
    store.remember(generated(TextBlock(text="ok", raw=" ok"), ids=[2]))
    restored = store.restore([TextBlock(text="ok")])
    assert restored is not None
    assert restored.token_ids == [2]
    assert len(store) == 1


def test_only_assistant_messages_and_a_positive_bound() -> None:
    with pytest.raises(ValueError, match="assistant"):
        TurnStore().remember(Message(role="user", content=[TextBlock(text="hi")]))
    with pytest.raises(ValueError, match="max_turns"):
        TurnStore(max_turns=0)
    assert 3 not in TurnStore()


_words = st.text(st.sampled_from('ab <>{}"\n'), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-3, 3) | _words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_words, inner, max_size=3),
    max_leaves=8,
)
_block = st.one_of(
    _words.map(lambda t: ReasoningBlock(text=t, raw=f"<think>{t}</think>")),
    _words.map(lambda t: TextBlock(text=t, raw=t)),
    st.builds(
        lambda i, n, a: ToolCallBlock(id=f"call_{i}", name=n, arguments=a, raw="<call>"),
        st.integers(0, 3),
        st.sampled_from(["f", "g"]),
        st.dictionaries(_words, _json, max_size=3),
    ),
)


@given(st.lists(_block, max_size=6), st.sampled_from(["", " ", "\n", "\n\n "]))
def test_visible_round_trip_restores(blocks: list[ContentBlock], pad: str) -> None:
    """Whatever the blocks, a client that trims or pads text, and drops blank text blocks,
    gets the stored message back."""
    message = generated(*blocks)
    store = TurnStore()
    store.remember(message)
    sent: list[ContentBlock] = []
    for block in visible(message):
        if isinstance(block, TextBlock):
            if block.text.strip():
                sent.append(TextBlock(text=pad + block.text.strip() + pad))
        else:
            sent.append(block)
    assert visible_key(sent) == visible_key(message.content)
    assert store.restore(sent) == message
