"""Shared checks for the parser tests: run a parser over any split, rebuild blocks from events,
the standard corpus tests and the strategies they draw from."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import (
    ParseEvent,
    ReasoningComplete,
    ReasoningDelta,
    TextComplete,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallComplete,
    ToolCallStarted,
)
from agentkit.parsing import (
    CallArguments,
    CallEnd,
    CallsInReasoning,
    MarkerStreamParser,
    ReasoningSyntax,
    StreamParser,
    ToolSyntax,
)
from agentkit.parsing._base import SectionEvent
from agentkit.transcript import ContentBlock, ToolCallBlock

ParserFactory = Callable[[], StreamParser]
Expected = list[dict[str, Any]]
"""Blocks as :func:`content` shows them."""


def factory(
    reasoning: ReasoningSyntax | None,
    tools: ToolSyntax | None,
    *,
    schemas: Mapping[str, Any] | None = None,
    calls_in_reasoning: CallsInReasoning = "end_reasoning",
) -> ParserFactory:
    """A parser factory whose parsers number call ids ``call_0``, ``call_1``, ..."""

    def make() -> StreamParser:
        ids = itertools.count()
        return MarkerStreamParser(
            reasoning,
            tools,
            tool_schemas=schemas or {},
            calls_in_reasoning=calls_in_reasoning,
            id_factory=lambda: f"call_{next(ids)}",
        )

    return make


def run(make: ParserFactory, chunks: Iterable[str]) -> tuple[list[ContentBlock], list[ParseEvent]]:
    parser = make()
    events: list[ParseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return parser.blocks, events


def content(blocks: Sequence[ContentBlock]) -> Expected:
    """Blocks without ``raw`` and ids: what a render/parse round trip must preserve."""
    return [block.model_dump(exclude={"raw", "id", "signature"}) for block in blocks]


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def reasoning_block(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text}


def tool_call(name: str, arguments: Any, error: str | None = None) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": arguments, "error": error}


def assert_content(blocks: Sequence[ContentBlock], expected: Expected) -> None:
    """``content(blocks) == expected``, except that an expected call's ``error`` need only be
    part of the actual one."""
    got = content(blocks)
    assert len(got) == len(expected), got
    for block, want in zip(got, expected, strict=True):
        if want.get("error") and want["error"] in (block.get("error") or ""):
            block = {**block, "error": want["error"]}
        assert block == want


def rebuild(events: Sequence[ParseEvent]) -> list[dict[str, Any]]:
    """The blocks a consumer of the events alone would build, checking the event grammar."""
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    deltas: list[str] = []
    for event in events:
        if current is None:
            assert event.index == len(blocks), f"{event!r} does not open block {len(blocks)}"
            if isinstance(event, ReasoningDelta | ReasoningComplete):
                current = {"type": "reasoning", "text": ""}
            elif isinstance(event, TextDelta | TextComplete):
                current = {"type": "text", "text": ""}
            else:
                assert isinstance(event, ToolCallStarted), f"a call must start first: {event!r}"
                current = {"type": "tool_call", "name": event.name, "call_id": event.id}
                continue
        assert event.index == len(blocks), f"{event!r} interleaves with block {len(blocks)}"
        if isinstance(event, ReasoningDelta | TextDelta):
            assert event.type.startswith(current["type"])
            deltas.append(event.text)
        elif isinstance(event, ReasoningComplete | TextComplete):
            assert event.type.startswith(current["type"])
            assert "".join(deltas) == event.text
            current["text"] = event.text
            blocks.append(current)
            current, deltas = None, []
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.id == current["call_id"]
            deltas.append(event.delta)
        else:
            assert isinstance(event, ToolCallComplete), f"unexpected {event!r}"
            assert event.id == current.pop("call_id")
            assert event.name == current["name"]
            if event.error is None:
                assert json.loads("".join(deltas)) == event.arguments, "deltas != arguments"
            current.update(arguments=event.arguments, error=event.error)
            blocks.append(current)
            current, deltas = None, []
    assert current is None, "a block was left open"
    return blocks


def structural(events: Sequence[ParseEvent]) -> list[ParseEvent]:
    """The events whose number and content do not depend on how the output was split."""
    return [e for e in events if not isinstance(e, TextDelta | ReasoningDelta)]


def merge_deltas(events: Sequence[ParseEvent]) -> list[Any]:
    """Events with consecutive argument deltas of one call joined (their split varies)."""
    merged: list[Any] = []
    for event in structural(events):
        last = merged[-1] if merged else None
        if (
            isinstance(event, ToolCallArgumentsDelta)
            and isinstance(last, tuple)
            and last[0] == event.id
        ):
            merged[-1] = (event.id, last[1] + event.delta)
        elif isinstance(event, ToolCallArgumentsDelta):
            merged.append((event.id, event.delta))
        else:
            merged.append(event)
    return merged


def check(
    make: ParserFactory, output: str, chunks: Sequence[str] | None = None
) -> list[ContentBlock]:
    """Parse ``output`` whole and as ``chunks`` (default: one character at a time); assert
    every invariant; return the blocks."""
    blocks, events = run(make, [output])
    assert "".join(b.raw or "" for b in blocks) == output
    assert all(b.raw is not None for b in blocks)
    expected = content(blocks)
    assert _rebuilt_matches(rebuild(events), expected)
    for split in [list(chunks) if chunks is not None else list(output)]:
        assert "".join(split) == output
        other_blocks, other_events = run(make, split)
        assert [b.model_dump() for b in other_blocks] == [b.model_dump() for b in blocks]
        assert merge_deltas(other_events) == merge_deltas(events)
        assert _rebuilt_matches(rebuild(other_events), expected)
    return blocks


def _rebuilt_matches(rebuilt: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    return rebuilt == [{k: v for k, v in b.items() if k != "id"} for b in expected]


@st.composite
def splits(draw: st.DrawFn, text: str) -> list[str]:
    """A random split of ``text`` into chunks of 1-12 characters (token-like)."""
    chunks: list[str] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 12))
        chunks.append(text[pos : pos + size])
        pos += size
    return chunks


def seeded_splits(output: str, seed: int) -> list[str]:
    """Token-like chunks (1-12 characters) of ``output``: like ``splits``, but one draw for
    the whole split, which keeps the properties on long outputs fast."""
    rng = random.Random(seed)
    cuts = [0]
    while cuts[-1] < len(output):
        cuts.append(cuts[-1] + rng.randint(1, 12))
    return [output[a:b] for a, b in itertools.pairwise(cuts)]


TAG_PIECES = ("<", "</", ">", "\n", " ", "<think>", "</think>")
"""Pieces of any tag-based output, to mix with a format's own tags in :func:`soups`."""


def soups(pieces: Sequence[str], max_size: int = 30) -> st.SearchStrategy[str]:
    """Outputs made of up to ``max_size`` of a format's pieces (markers, punctuation), in any
    order: mostly broken, which is the point."""
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


def json_values(
    strings: st.SearchStrategy[str],
    *,
    keys: st.SearchStrategy[str] | None = None,
    integers: st.SearchStrategy[int] | None = None,
    max_leaves: int = 8,
) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars (finite floats), and lists and objects of up to three items."""
    scalars = (
        st.none()
        | st.booleans()
        | (st.integers() if integers is None else integers)
        | st.floats(allow_nan=False, allow_infinity=False)
        | strings
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(strings if keys is None else keys, inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def tricky_arguments(comment: str, markers: str) -> dict[str, Any]:
    """Argument values that break naive parsers: code with a raw newline and tab and
    ``comment`` at its end, a Windows path, non-BMP and line-separator characters, the
    format's own ``markers``, nested containers, a lone quote and a lone backslash."""
    return {
        "code": f'print("hi")\n\tif a < b: pass  # {comment}',
        "path": "C:\\Users\\me\\file.txt",
        "unicode": "héllo 🌍 中文 \u2028 end",
        "markers": markers,
        "nested": {"and": [{"x": 1}, {"y": [True, None, 2.5, -3e-7]}], "empty": {}, "list": []},
        "quote": '"',
        "backslash": "\\",
    }


def drive_section(
    syntax: ToolSyntax, start_marker: str, chunks: Iterable[str]
) -> tuple[list[SectionEvent], str, str]:
    """Feed a section's text (after its start marker) to the syntax's section parser alone;
    return its events (argument deltas joined), the raw it owned (calls' raw + tail, in
    order) and the text it handed back."""
    section = syntax.new_section(start_marker, {})
    events: list[SectionEvent] = []
    owned: list[str] = []
    chunks = list(chunks)
    for i, chunk in enumerate(chunks):
        step = section.feed(chunk)
        events.extend(step.events)
        owned.extend(e.raw for e in step.events if isinstance(e, CallEnd))
        if step.done:
            owned.append(step.tail_raw)
            rest = step.unread + chunk[step.consumed :] + "".join(chunks[i + 1 :])
            return _join_arguments(events), "".join(owned), rest
        assert step.consumed == len(chunk)
    step = section.finish()
    events.extend(step.events)
    owned.extend(e.raw for e in step.events if isinstance(e, CallEnd))
    return _join_arguments(events), "".join(owned) + step.tail_raw, ""


def _join_arguments(events: list[SectionEvent]) -> list[SectionEvent]:
    joined: list[SectionEvent] = []
    for event in events:
        if isinstance(event, CallArguments) and joined and isinstance(joined[-1], CallArguments):
            joined[-1] = CallArguments(joined[-1].delta + event.delta)
        else:
            joined.append(event)
    return joined


def calls(blocks: Sequence[ContentBlock]) -> list[ToolCallBlock]:
    return [b for b in blocks if isinstance(b, ToolCallBlock)]


CHARS = st.characters(exclude_categories=["Cs"])
"""Any character (but a lone surrogate, which no output can hold)."""

ARGUMENT_KEYS = st.text(CHARS, max_size=8)
ARGUMENT_VALUES = json_values(
    st.text(CHARS, max_size=12), keys=st.text(max_size=6), integers=st.integers(-(10**12), 10**12)
)


def call_lists(
    names: st.SearchStrategy[str],
    values: st.SearchStrategy[Any] = ARGUMENT_VALUES,
    keys: st.SearchStrategy[str] = ARGUMENT_KEYS,
) -> st.SearchStrategy[list[ToolCallBlock]]:
    """One to four calls, each with up to four arguments."""
    call = st.builds(
        lambda name, arguments: ToolCallBlock(id="x", name=name, arguments=arguments),
        names,
        st.dictionaries(keys, values, max_size=4),
    )
    return st.lists(call, min_size=1, max_size=4)


def corpus_tests(
    make: ParserFactory,
    corpus: Mapping[str, tuple[str, Expected]],
    *,
    examples: int = 15,
    partial_errors: bool = False,
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests of a corpus of ``name: (output, expected content)``: each output whole
    and one character at a time, and each under ``examples`` random token-like splits. With
    ``partial_errors``, an expected call's error need only be part of the actual one (see
    :func:`assert_content`). Assign the tests to ``test_*`` names in the test module."""

    def compare(blocks: list[ContentBlock], expected: Expected) -> None:
        if partial_errors:
            assert_content(blocks, expected)
        else:
            assert content(blocks) == expected

    @pytest.mark.parametrize("name", list(corpus))
    def whole_and_by_character(name: str) -> None:
        output, expected = corpus[name]
        compare(check(make, output), expected)

    @pytest.mark.parametrize("name", list(corpus))
    @settings(max_examples=examples, deadline=None)
    @given(seed=st.integers(0, 2**32))
    def random_splits(name: str, seed: int) -> None:
        output, expected = corpus[name]
        compare(check(make, output, seeded_splits(output, seed)), expected)

    return whole_and_by_character, random_splits


def soup_test(
    make: ParserFactory,
    pieces: Sequence[str],
    *,
    prefix: str = "",
    max_size: int = 14,
    examples: int = 200,
) -> Callable[..., None]:
    """A test that any output made of ``pieces`` (after ``prefix``) keeps every byte and
    every invariant of :func:`check` under random token-like splits."""

    @settings(max_examples=examples, deadline=None)
    @given(soup=soups(pieces, max_size), seed=st.integers(0, 2**32))
    def any_output_keeps_every_byte(soup: str, seed: int) -> None:
        output = prefix + soup
        check(make, output, seeded_splits(output, seed))

    return any_output_keeps_every_byte


def error_call(make: ParserFactory, output: str, message: str, name: str) -> ToolCallBlock:
    """Parse ``output`` (see :func:`check`): it holds one call, an error the model can read
    (containing ``message``) named ``name``, with no arguments."""
    (call,) = calls(check(make, output))
    assert call.error is not None
    assert message in call.error
    assert (call.name, call.arguments) == (name, {})
    return call
