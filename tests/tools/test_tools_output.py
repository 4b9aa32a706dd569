"""What a tool returns, as text the model reads and the transcript can always serialise."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallComplete
from agentkit.tools import Dispatcher, tool
from agentkit.tools._output import clean_text, exception_text, to_text
from agentkit.transcript import Message, ToolResultBlock, Transcript

pytestmark = pytest.mark.anyio

# Every code point, lone surrogates included (hypothesis leaves them out by default).
_ANY_CHARACTER = st.characters(exclude_categories=())
_BINARY_NOTE = "binary data, not UTF-8"


def _call(name: str) -> ToolCallComplete:
    return ToolCallComplete(index=0, id=f"call-{name}", name=name, arguments={}, raw="")


def _serialises(text: str) -> bool:
    block = ToolResultBlock(call_id="c1", name="t", content=text)
    transcript = Transcript(messages=[Message(role="tool", content=[block])])
    return Transcript.model_validate_json(transcript.model_dump_json()) == transcript


def test_utf8_bytes_become_their_text() -> None:
    assert to_text("naïve ✓".encode()) == "naïve ✓"
    assert to_text(bytearray(b"abc")) == "abc"
    assert to_text(memoryview(b"abc")) == "abc"
    assert to_text(b"") == ""


def test_other_bytes_become_base64_with_a_note() -> None:
    text = to_text(b"\xff\x00\xfe")
    head, body = text.split("\n", 1)
    assert head == f"[3 bytes of {_BINARY_NOTE}, base64:]"
    assert base64.b64decode(body) == b"\xff\x00\xfe"


def test_bytes_inside_data() -> None:
    assert to_text({"a": b"ok"}) == '{"a": "ok"}'
    assert to_text({"a": b"\xff"}) == '{"a": "_w=="}'  # URL-safe base64 inside JSON


@given(st.binary(max_size=64))
@settings(max_examples=200, deadline=None)
def test_bytes_are_kept_losslessly(data: bytes) -> None:
    text = to_text(data)
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        head, body = text.split("\n", 1)
        assert head == f"[{len(data)} bytes of {_BINARY_NOTE}, base64:]"
        assert base64.b64decode(body, validate=True) == data
    else:
        assert text == clean_text(decoded)
    assert _serialises(text)


def test_lone_surrogates_become_replacement_characters_and_pairs_join() -> None:
    assert clean_text("a\ud800b") == "a\ufffdb"
    assert clean_text("\udcff") == "\ufffd"  # a surrogate-escaped byte (os.fsdecode)
    assert clean_text("\ud83d\ude00") == "😀"  # a pair that was split into two code points
    assert clean_text("\ude00\ud83d") == "\ufffd\ufffd"  # reversed: not a pair
    assert clean_text("plain ✓") == "plain ✓"
    assert to_text("x\ud800") == "x\ufffd"
    assert to_text({"k": "x\ud800"}) == '{"k": "x\ufffd"}'


@given(st.text(alphabet=_ANY_CHARACTER, max_size=40))
@settings(max_examples=300, deadline=None)
def test_clean_text_always_serialises_and_changes_only_surrogates(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # never raises
    assert _serialises(cleaned)
    assert clean_text(cleaned) == cleaned
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert cleaned == text
    assert len(cleaned) <= len(text)


def test_str_subclass_is_its_characters() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return "LOUD"

    assert to_text(Loud("quiet")) == "quiet"


def test_objects_that_cannot_be_printed_still_give_text() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no str")

        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert to_text(Broken()) == "<unprintable Broken object>"
    loop: list[object] = []
    loop.append(loop)
    assert to_text(loop) == "[[...]]"


def test_exception_text_survives_a_str_that_raises() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise ValueError("nope")

    assert exception_text(Nasty()) == "Nasty (its message could not be read: ValueError)"
    assert exception_text(KeyError("k")) == "KeyError: 'k'"
    assert exception_text(SystemExit()) == "SystemExit"
    assert exception_text(ValueError("x\ud800")) == "ValueError: x\ufffd"


async def test_a_tool_returning_bytes_succeeds() -> None:
    @tool
    def utf8() -> bytes:
        return b"hello"

    @tool
    def binary() -> bytes:
        return b"\x89PNG\r\n"

    ok, png = await Dispatcher([utf8, binary]).run([_call("utf8"), _call("binary")])
    assert (ok.content, ok.is_error) == ("hello", False)
    assert not png.is_error
    assert png.content.startswith(f"[6 bytes of {_BINARY_NOTE}")


async def test_a_tool_output_with_a_lone_surrogate_keeps_the_transcript_serialisable() -> None:
    @tool
    def listing() -> str:
        return "report\udce9.txt"  # what os.listdir gives for a latin-1 file name

    @tool
    def failing() -> None:
        raise ValueError("bad name \udce9")

    results = await Dispatcher([listing, failing]).run([_call("listing"), _call("failing")])
    assert results[0].content == "report\ufffd.txt"
    assert results[1].content == "ValueError: bad name \ufffd"
    transcript = Transcript(messages=[Message(role="tool", content=list(results))])
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript
