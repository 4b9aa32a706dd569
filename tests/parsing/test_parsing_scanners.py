"""The low-level scanners: JSON object state and literal markers across pieces."""

from __future__ import annotations

import json

import pytest
from _parsing_helpers import splits
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.parsing._json_stream import JsonObjectScanner
from agentkit.parsing._markers import (
    MISMATCH,
    Expect,
    MarkerFinder,
    find_first,
    partial_suffix_len,
)


def scan(chunks: list[str], watch: tuple[str, ...] = ("args",)) -> tuple[int, str, dict[str, str]]:
    """Feed chunks; return (end offset in the whole text or -1, error, watched member texts)."""
    scanner = JsonObjectScanner(watch)
    members: dict[str, str] = {}
    offset = 0
    for chunk in chunks:
        step = scanner.feed(chunk)
        for member in step.members:
            members[member.key] = members.get(member.key, "") + member.text
        if step.end >= 0:
            return offset + step.end, "", members
        if step.failed_at >= 0:
            return -1, scanner.error or "", members
        offset += len(chunk)
    return -1, "", members


OBJECTS = [
    '{"name": "f", "args": {"a": [1, {"b": "}"}], "c": "\\"{"}}',
    ' { "args" : "x\\\\" , "n" : -1.5e3 , "t" : true } ',
    '{"args": [1, 2, [3]], "x": null}',
    '{"args": 12}',
    "{}",
]


@pytest.mark.parametrize("text", OBJECTS)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_finds_the_end_and_member_text_for_any_split(text: str, data: st.DataObject) -> None:
    tail = "</tool_call>trailing"
    end, error, members = scan(data.draw(splits(text + tail)))
    assert error == ""
    assert end == len(text.rstrip())
    value = json.loads(text)
    if "args" in value:
        assert json.loads(members["args"]) == value["args"]


def test_raw_control_characters_are_escaped_in_member_text() -> None:
    _, _, members = scan(['{"args": {"s": "a\nb\tc"}}'])
    assert members["args"] == '{"s": "a\\nb\\tc"}'


@pytest.mark.parametrize(
    ("text", "echo"),
    [
        *((text.strip(), text.strip()) for text in OBJECTS),
        ('{"s": "a\nb\tc",\n "n": [1,\n2]}', '{"s": "a\\nb\\tc",\n "n": [1,\n2]}'),
    ],
)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_echo_is_the_object_as_strict_json_for_any_split(
    text: str, echo: str, data: st.DataObject
) -> None:
    scanner = JsonObjectScanner(echo=True)
    echoed = []
    for chunk in data.draw(splits(text + "</tool_call>")):
        step = scanner.feed(chunk)
        echoed.append(step.text)
        if step.end >= 0:
            break
    assert "".join(echoed) == echo
    assert json.loads("".join(echoed)) == json.loads(text, strict=False)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"a": 1</tool_call>', "expected ',' or '}' but found '<'"),
        ('{"a": [1}', "a matching bracket"),
        ("[1]", "expected '{'"),
        ('{"a" 1}', "expected ':'"),
        ('{"a": {"b": 1 <', "found '<'"),
        ("{1: 2}", "a key in double quotes"),
    ],
)
def test_reports_what_cannot_be_json(text: str, error: str) -> None:
    end, message, _ = scan([text])
    assert end == -1
    assert error in message


def test_unfinished_object_waits() -> None:
    assert scan(['{"args": "</tool_call>']) == (-1, "", {"args": '"</tool_call>'})


def test_find_first_and_partial_suffix() -> None:
    assert find_first("a</b><c>", ["<c>", "</b>"]) == (1, "</b>")
    assert find_first("xx", ["<c>"]) is None
    assert find_first("<ab>", ["<a", "<ab>"]) == (0, "<ab>")
    assert partial_suffix_len("hello </thi", ["</think>"]) == 5
    assert partial_suffix_len("hello", ["</think>"]) == 0
    assert partial_suffix_len("x</think>", ["</think>"]) == 0


@settings(max_examples=50, deadline=None)
@given(
    text=st.text(st.sampled_from(list("</ab>")), max_size=30),
    data=st.data(),
)
def test_marker_finder_matches_str_find(text: str, data: st.DataObject) -> None:
    marker = "</ab>"
    finder = MarkerFinder(marker)
    offset = 0
    found = -1
    for chunk in data.draw(splits(text)):
        end = finder.find(chunk)
        if end >= 0:
            found = offset + end
            break
        offset += len(chunk)
    expected = text.find(marker)
    assert found == (expected + len(marker) if expected >= 0 else -1)


def test_expect_skips_whitespace_and_reports_mismatch() -> None:
    expect = Expect(["</a>", "<b>"])
    assert expect.feed("  </", 0) == (4, None)
    assert expect.matched == "</"
    assert expect.feed("a>rest", 0) == (2, "</a>")
    expect = Expect(["</a>"])
    assert expect.feed(" </x", 0) == (3, MISMATCH)
    assert expect.matched == "</"
