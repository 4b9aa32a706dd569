"""Tool-output truncation: every mode keeps a prefix and a suffix within its limit, never
splits a character, and never shows the model a U+FFFD that was not in the output."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit.errors import ConfigurationError
from agentkit.truncation import (
    TRUNCATION_MARKER,
    Truncated,
    TruncationMode,
    TruncationPolicy,
    truncate,
    truncation_marker,
)

REPLACEMENT = "\ufffd"

# Multi-byte text on purpose: 2-byte (é), 3-byte (中, combining acute), 4-byte (😀) characters,
# an emoji ZWJ sequence, a skin-tone modifier, and newlines for the lines mode.
_TRICKY = "a\n é中文😀\u0301\u200d👍🏽\r\t"
texts = st.text(st.one_of(st.sampled_from(_TRICKY), st.characters(codec="utf-8")), max_size=80)
limits = st.integers(min_value=1, max_value=40)
fractions = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0))


def policy(mode: TruncationMode, limit: int, head_fraction: float = 0.5) -> TruncationPolicy:
    return TruncationPolicy(mode=mode, limit=limit, head_fraction=head_fraction)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def budgets(p: TruncationPolicy) -> tuple[int, int]:
    head = min(p.limit, math.floor(p.limit * p.head_fraction + 0.5))
    return head, p.limit - head


def check_shape(text: str, result: Truncated) -> None:
    """What holds in every mode: prefix, suffix, disjoint, marker between, nothing invented."""
    if not result.truncated:
        assert result.text == text
        assert (result.head, result.tail) == (text, "")
        assert result.removed_units == 0
        return
    assert text.startswith(result.head)
    assert text.endswith(result.tail)
    assert len(result.head) + len(result.tail) <= len(text)
    assert result.mode is not None
    marker = truncation_marker(result.removed_units, result.mode)
    before = "\n" if result.head and not result.head.endswith("\n") else ""
    after = "\n" if result.tail else ""
    assert result.text == f"{result.head}{before}{marker}{after}{result.tail}"
    assert result.original_chars == len(text)
    if REPLACEMENT not in text:
        assert REPLACEMENT not in result.text


# --- the policy -------------------------------------------------------------------------------


def test_policy_defaults_and_parse() -> None:
    p = TruncationPolicy.parse({"mode": "lines", "limit": 200})
    assert p == TruncationPolicy(mode="lines", limit=200, head_fraction=0.5)
    assert TruncationPolicy.parse(p) is p
    assert TruncationPolicy.parse(None) is None
    q = TruncationPolicy.parse({"mode": "bytes", "limit": 10, "head_fraction": 1})
    assert q.head_fraction == 1.0
    assert isinstance(q.head_fraction, float)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"mode": "chars", "limit": 5}, "mode must be one of 'tokens', 'bytes', 'lines'"),
        ({"mode": "bytes", "limit": 0}, "limit must be a positive integer, not 0"),
        ({"mode": "bytes", "limit": -3}, "limit must be a positive integer"),
        ({"mode": "bytes", "limit": True}, "limit must be a positive integer, not True"),
        ({"mode": "bytes", "limit": 2.5}, "limit must be a positive integer"),
        ({"mode": "bytes", "limit": "100"}, "limit must be a positive integer, not '100'"),
        ({"mode": "bytes", "limit": 5, "head_fraction": 1.5}, "head_fraction must be a number"),
        ({"mode": "bytes", "limit": 5, "head_fraction": -0.1}, "from 0 to 1, not -0.1"),
        ({"mode": "bytes", "limit": 5, "head_fraction": math.nan}, "head_fraction"),
        ({"mode": "bytes", "limit": 5, "head_fraction": False}, "head_fraction"),
        ({"mode": "bytes"}, "lacks 'limit'"),
        ({}, "lacks 'mode' and 'limit'"),
        ({"mode": "bytes", "limit": 5, "max": 3}, "unknown truncation policy field(s) 'max'"),
        ("lines", "got str"),
        ([("mode", "bytes")], "got list"),
    ],
)
def test_parse_rejects_bad_configuration(value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        TruncationPolicy.parse(value)
    assert message in str(info.value)


def test_policy_is_frozen() -> None:
    p = policy("bytes", 5)
    with pytest.raises(AttributeError):
        p.limit = 6  # type: ignore[misc]


def test_marker_format() -> None:
    assert TRUNCATION_MARKER == "[... {count} {unit} truncated ...]"
    assert truncation_marker(1234, "bytes") == "[... 1234 bytes truncated ...]"
    assert truncation_marker(1, "lines") == "[... 1 line truncated ...]"
    assert truncation_marker(2, "tokens") == "[... 2 tokens truncated ...]"


def test_no_policy_keeps_everything() -> None:
    text = "x" * 10_000
    result = truncate(text, None)
    assert result.text is text
    assert not result.truncated
    assert (result.mode, result.original_units, result.removed_units) == (None, 10_000, 0)


# --- bytes ------------------------------------------------------------------------------------


def test_bytes_within_the_limit_is_unchanged() -> None:
    text = "héllo"  # 6 bytes
    result = truncate(text, policy("bytes", 6))
    assert result.text is text
    assert (result.original_units, result.kept_units, result.truncated) == (6, 6, False)


def test_bytes_one_under_the_size_cuts() -> None:
    result = truncate("abcdefghij", policy("bytes", 9))
    assert result.text == "abcde\n[... 1 byte truncated ...]\nghij"
    assert (result.head, result.tail, result.removed_units) == ("abcde", "ghij", 1)


def test_bytes_head_and_tail_with_marker() -> None:
    result = truncate("abcdefghij", policy("bytes", 4))
    assert result.text == "ab\n[... 6 bytes truncated ...]\nij"
    assert (result.original_units, result.kept_units, result.removed_units) == (10, 4, 6)


def test_bytes_never_split_cjk() -> None:
    text = "中文字符"  # 3 bytes each
    result = truncate(text, policy("bytes", 7))  # 4 for the head, 3 for the tail
    assert (result.head, result.tail) == ("中", "符")
    assert result.removed_units == 6
    result = truncate(text, policy("bytes", 5))  # 3 and 2: the tail's 2 bytes hold no character
    assert (result.head, result.tail, result.removed_units) == ("中", "", 9)
    assert result.text == "中\n[... 9 bytes truncated ...]"


def test_bytes_emoji_that_fit_nowhere_leave_only_the_marker() -> None:
    result = truncate("😀😀😀", policy("bytes", 5))
    assert result.text == "[... 12 bytes truncated ...]"
    assert (result.head, result.tail) == ("", "")


def test_bytes_combining_marks_stay_whole_code_points() -> None:
    text = "e\u0301" * 6  # 'e' (1 byte) + combining acute (2 bytes)
    result = truncate(text, policy("bytes", 8))
    assert result.head == "e\u0301e"  # 4 bytes: the next cut would split U+0301
    assert result.tail == "e\u0301"  # the last 4 bytes start inside U+0301: 3 kept
    check_shape(text, result)


def test_bytes_lone_surrogates_count_as_three_bytes() -> None:
    text = "\udcff" * 10
    result = truncate(text, policy("bytes", 7))
    assert (result.head, result.tail, result.removed_units) == ("\udcff", "\udcff", 24)


def test_bytes_head_fraction_extremes() -> None:
    assert truncate("abcdef", policy("bytes", 2, 1.0)).text == "ab\n[... 4 bytes truncated ...]"
    assert truncate("abcdef", policy("bytes", 2, 0.0)).text == "[... 4 bytes truncated ...]\nef"


@given(texts, limits, fractions)
def test_bytes_properties(text: str, limit: int, fraction: float) -> None:
    p = policy("bytes", limit, fraction)
    result = truncate(text, p)
    check_shape(text, result)
    size = utf8_len(text)
    assert result.original_units == size
    assert result.truncated == (size > limit)
    kept = utf8_len(result.head) + utf8_len(result.tail)
    assert kept <= limit
    assert result.removed_units == size - kept
    if result.truncated:
        head_budget, tail_budget = budgets(p)
        assert utf8_len(result.head) <= head_budget
        assert utf8_len(result.tail) <= tail_budget
        # No more was dropped than the character straddling each cut.
        assert utf8_len(result.head) > head_budget - 4
        assert utf8_len(result.tail) > tail_budget - 4
    # The kept content fits, so truncating it again changes nothing.
    again = result.head + result.tail
    assert truncate(again, p).text is again


# --- lines ------------------------------------------------------------------------------------


def test_lines_count_a_last_line_without_newline() -> None:
    assert truncate("a\nb\nc", policy("lines", 3)).original_units == 3
    assert truncate("a\nb\nc\n", policy("lines", 3)).original_units == 3
    assert truncate("", policy("lines", 1)).original_units == 0
    assert truncate("\n", policy("lines", 1)).original_units == 1
    assert truncate("\n\n", policy("lines", 1)).original_units == 2


@pytest.mark.parametrize("text", ["1\n2\n3\n4\n5\n", "1\n2\n3\n4\n5"])
def test_lines_exact_size_and_one_less(text: str) -> None:
    assert truncate(text, policy("lines", 5)).text is text
    result = truncate(text, policy("lines", 4))
    assert (result.head, result.tail) == ("1\n2\n", text[6:])
    assert result.text == f"1\n2\n[... 1 line truncated ...]\n{text[6:]}"


def test_lines_head_and_tail() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    result = truncate(text, policy("lines", 3))
    assert result.text == "line 0\nline 1\n[... 97 lines truncated ...]\nline 99\n"
    assert (result.original_units, result.removed_units) == (100, 97)


def test_lines_head_fraction_extremes() -> None:
    text = "1\n2\n3\n"
    assert truncate(text, policy("lines", 1, 1.0)).text == "1\n[... 2 lines truncated ...]"
    assert truncate(text, policy("lines", 1, 0.0)).text == "[... 2 lines truncated ...]\n3\n"


def test_lines_keep_multibyte_lines_whole() -> None:
    text = "中文\n😀\u200d👍🏽\ne\u0301\n終わり"
    result = truncate(text, policy("lines", 2))
    assert (result.head, result.tail) == ("中文\n", "終わり")
    assert result.removed_units == 2


def test_lines_only_newline_separates() -> None:
    text = "a\rb\u2028c\r\nd\ne"  # \r and U+2028 are not line ends here: 3 lines
    assert truncate(text, policy("lines", 3)).text is text
    result = truncate(text + "\nf", policy("lines", 2))
    assert (result.head, result.tail, result.removed_units) == ("a\rb\u2028c\r\n", "f", 2)


@given(texts, limits, fractions)
def test_lines_properties(text: str, limit: int, fraction: float) -> None:
    p = policy("lines", limit, fraction)
    result = truncate(text, p)
    check_shape(text, result)
    count = line_count(text)
    assert result.original_units == count
    assert result.truncated == (count > limit)
    if result.truncated:
        head_budget, tail_budget = budgets(p)
        assert line_count(result.head) == head_budget
        assert line_count(result.tail) == tail_budget
        assert result.head == "" or result.head.endswith("\n")
        assert result.tail == "" or text[len(text) - len(result.tail) - 1] == "\n"
        assert result.removed_units == count - limit
    again = result.head + result.tail
    assert truncate(again, p).text is again


# --- tokens -----------------------------------------------------------------------------------


class CharTokenizer:
    """One token per code point: token cuts are character cuts."""

    def __init__(self) -> None:
        self.encodes = 0
        self.decoded_tokens = 0

    def encode(self, text: str) -> list[int]:
        self.encodes += 1
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        self.decoded_tokens += len(ids)
        return "".join(map(chr, ids))


class ByteChunkTokenizer:
    """Byte-level like BPE, but cruder: UTF-8 bytes in chunks of ``size``, so tokens straddle
    character boundaries and a prefix of tokens often ends inside a character, which decodes
    to U+FFFD as a real byte-level decoder does."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.vocab: dict[bytes, int] = {}
        self.pieces: list[bytes] = []

    def encode(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        ids = []
        for i in range(0, len(data), self.size):
            chunk = data[i : i + self.size]
            if chunk not in self.vocab:
                self.vocab[chunk] = len(self.pieces)
                self.pieces.append(chunk)
            ids.append(self.vocab[chunk])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", "replace")

    def bytes_of(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.pieces[i] for i in ids)


def test_tokens_mode_needs_the_tokenizer() -> None:
    tok = CharTokenizer()
    for encode, decode in [(None, None), (tok.encode, None), (None, tok.decode)]:
        with pytest.raises(ConfigurationError, match="pass its encode= and decode="):
            truncate("", policy("tokens", 5), encode=encode, decode=decode)


def test_tokens_exact_size_and_one_less() -> None:
    tok = CharTokenizer()
    text = "中文字符😀"
    assert truncate(text, policy("tokens", 5), encode=tok.encode, decode=tok.decode).text is text
    result = truncate(text, policy("tokens", 4), encode=tok.encode, decode=tok.decode)
    assert result.text == "中文\n[... 1 token truncated ...]\n符😀"
    assert (result.original_units, result.kept_units) == (5, 4)


def test_tokens_empty_text() -> None:
    tok = CharTokenizer()
    result = truncate("", policy("tokens", 1), encode=tok.encode, decode=tok.decode)
    assert (result.text, result.original_units, result.truncated) == ("", 0, False)


def test_tokens_cut_inside_a_character_moves_inward() -> None:
    tok = ByteChunkTokenizer(2)
    text = "中文字符"  # bytes e4 b8 ad | e6 96 87 | e5 ad 97 | e7 ac a6, six 2-byte tokens
    result = truncate(text, policy("tokens", 4), encode=tok.encode, decode=tok.decode)
    # Two tokens are "中" and the first byte of "文"; one token ends inside "中": the head backs
    # off to no token. The tail's two tokens start inside "字", its last inside "符": none.
    assert REPLACEMENT not in result.text
    assert (result.head, result.tail, result.removed_units) == ("", "", 6)
    result = truncate(text, policy("tokens", 5), encode=tok.encode, decode=tok.decode)
    # Three head tokens end exactly after "文"; two tail tokens start inside "字".
    assert (result.head, result.tail) == ("中文", "")
    assert result.removed_units == 3


def test_tokens_decode_work_is_bounded() -> None:
    for size in (1_000, 100_000):
        tok = CharTokenizer()
        text = "x" * size
        truncate(text, policy("tokens", size // 2), encode=tok.encode, decode=tok.decode)
        assert tok.encodes == 1
        assert tok.decoded_tokens == size // 2  # one clean decode a side


def test_tokens_decoder_that_does_not_round_trip() -> None:
    def encode(text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(ids: Sequence[int]) -> str:  # a normalizing tokenizer: lower case
        return "".join(map(chr, ids)).lower()

    # A few tokens inward, the decoded pieces match the output again.
    text = "abcDEFghijklmnopqrstuvwXYz"
    result = truncate(text, policy("tokens", 10), encode=encode, decode=decode)
    assert (result.head, result.tail, result.removed_units) == ("abc", "z", 22)
    check_shape(text, result)
    # Too far inward: what of the decoded piece matches the output is kept, and the count
    # is the budget's.
    text = "a" + "B" * 30 + "c" * 30
    result = truncate(text, policy("tokens", 40), encode=encode, decode=decode)
    assert (result.head, result.tail, result.removed_units) == ("a", "c" * 20, 21)
    check_shape(text, result)


def check_tokens(
    text: str,
    p: TruncationPolicy,
    encode: Callable[[str], Sequence[int]],
    decode: Callable[[list[int]], str],
) -> tuple[Truncated, list[int]]:
    ids = list(encode(text))
    result = truncate(text, p, encode=encode, decode=decode)
    check_shape(text, result)
    assert result.original_units == len(ids)
    assert result.truncated == (len(ids) > p.limit)
    if result.truncated:
        assert len(ids) - p.limit <= result.removed_units <= len(ids)
    return result, ids


@given(texts, limits, fractions)
def test_tokens_properties_one_token_per_character(text: str, limit: int, fraction: float) -> None:
    tok = CharTokenizer()
    p = policy("tokens", limit, fraction)
    result, ids = check_tokens(text, p, tok.encode, tok.decode)
    if result.truncated:
        head_budget, tail_budget = budgets(p)
        assert result.head == text[:head_budget]
        assert result.tail == text[len(text) - tail_budget :]
        assert result.removed_units == len(ids) - limit
    again = result.head + result.tail
    assert truncate(again, p, encode=tok.encode, decode=tok.decode).text is again


@given(texts, limits, fractions, st.sampled_from([2, 3]))
def test_tokens_properties_tokens_straddling_characters(
    text: str, limit: int, fraction: float, chunk: int
) -> None:
    tok = ByteChunkTokenizer(chunk)
    p = policy("tokens", limit, fraction)
    result, ids = check_tokens(text, p, tok.encode, tok.decode)
    if result.truncated:
        # The kept text lies within the budgeted tokens at each end.
        head_budget, tail_budget = budgets(p)
        assert tok.bytes_of(ids[:head_budget]).startswith(result.head.encode())
        assert tok.bytes_of(ids[len(ids) - tail_budget :]).endswith(result.tail.encode())


@pytest.fixture(scope="module")
def byte_level_bpe() -> Any:
    """A tiny byte-level BPE trained here, with few enough merges that CJK characters and
    emoji span several tokens."""
    import tokenizers  # installed with vLLM for the slow suite: missing fails, never skips

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=320,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = ["The quick brown fox. 中文字符 日本語のテキスト 😀👍🏽 café naïve e\u0301\n"] * 20
    tok.train_from_iterator(corpus, trainer)
    return tok


# Needs the `tokenizers` package, which comes with the `cpu` extra the slow suite installs.
@pytest.mark.slow
@given(text=texts, limit=limits, fraction=fractions)
def test_tokens_properties_real_byte_level_bpe(
    byte_level_bpe: Any, text: str, limit: int, fraction: float
) -> None:
    def encode(s: str) -> list[int]:
        return list(byte_level_bpe.encode(s, add_special_tokens=False).ids)

    def decode(ids: list[int]) -> str:
        return str(byte_level_bpe.decode(ids))

    p = policy("tokens", limit, fraction)
    result, ids = check_tokens(text, p, encode, decode)
    if result.truncated:
        # The kept text lies within the budgeted tokens at each end.
        head_budget, tail_budget = budgets(p)
        assert decode(ids[:head_budget]).startswith(result.head)
        assert decode(ids[len(ids) - tail_budget :]).endswith(result.tail)


@pytest.mark.slow
def test_tokens_real_byte_level_bpe_never_shows_a_split_character(byte_level_bpe: Any) -> None:
    def encode(s: str) -> list[int]:
        return list(byte_level_bpe.encode(s, add_special_tokens=False).ids)

    def decode(ids: list[int]) -> str:
        return str(byte_level_bpe.decode(ids))

    text = "中文字符 日本語のテキスト 😀👍🏽 " * 5
    ids = encode(text)
    split = [k for k in range(len(ids)) if REPLACEMENT in decode(ids[:k])]
    assert split, "the fixture should have token cuts inside characters"
    for limit in range(1, len(ids)):
        result = truncate(text, policy("tokens", limit), encode=encode, decode=decode)
        check_shape(text, result)
        assert REPLACEMENT not in result.text
