"""Tool-output truncation: keep the head and the tail, and say how much was cut.

A tool can print megabytes; the model's context cannot take them. A policy such as
``{"mode": "lines", "limit": 200}`` bounds the part of a tool's output that enters the
context: the start and the end are kept (``head_fraction`` of the budget from the start, the
rest from the end) with a marker line between them that tells the model how much is missing::

    first lines of the output
    [... 1234 lines truncated ...]
    last lines of the output

Truncation only shapes what the model sees; the caller keeps the full output.

Units, one per ``mode``:

``bytes``
    UTF-8 bytes. A cut never falls inside a character: each side moves to the nearest
    character boundary within its budget, so up to 3 bytes a side can go unused.
``lines``
    Whole lines, ending at ``\\n``; a last line without one counts as a line. A single long
    line is never cut in this mode: choose ``bytes`` or ``tokens`` where that matters.
``tokens``
    The profile's tokenizer, passed to :func:`truncate` as ``encode`` and ``decode``. The
    output is encoded once and counted in its own token sequence: the kept text is what its
    first and last tokens decode to. A byte-level BPE token can end inside a multi-byte
    character, whose partial bytes decode to U+FFFD; such a cut moves inward a token at a time
    until the decoded piece is exactly a prefix (or suffix) of the output, so a replacement
    character that was not in the output never reaches the model.

The limit counts the kept content only: a truncated result holds at most ``limit`` units of
the output plus the marker line (:data:`TRUNCATION_MARKER`), which is not counted.

A character here is a code point: a cut can separate a letter from a combining mark after it,
or split an emoji sequence joined by U+200D, but both sides are always valid text.

Cost is linear in the output: one encoding, and in ``tokens`` mode a bounded number of
decodes per side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, overload

from agentkit._sequences import common_prefix_len
from agentkit.errors import ConfigurationError

__all__ = [
    "TRUNCATION_MARKER",
    "Truncated",
    "TruncationMode",
    "TruncationPolicy",
    "truncate",
    "truncation_marker",
]

TruncationMode = Literal["tokens", "bytes", "lines"]
"""The unit a :class:`TruncationPolicy` counts in."""

TRUNCATION_MARKER = "[... {count} {unit} truncated ...]"
"""What stands between the head and the tail: ``count`` units cut, ``unit`` named per mode
(``byte``/``bytes``, ``line``/``lines``, ``token``/``tokens``). It always sits on a line of
its own: a newline precedes it unless the head is empty or ends with one, and a newline
follows it unless the tail is empty."""

_MODES: tuple[TruncationMode, ...] = get_args(TruncationMode)
_UNITS: dict[TruncationMode, tuple[str, str]] = {
    "bytes": ("byte", "bytes"),
    "lines": ("line", "lines"),
    "tokens": ("token", "tokens"),
}
_FIELDS = frozenset({"mode", "limit", "head_fraction"})
# How many tokens a cut may move inward to reach a clean boundary. A UTF-8 character is at
# most 4 bytes, so a byte-level BPE cut is rarely more than 3 tokens away from one; past this
# the decoder is taken not to reproduce its input, and the decoded piece is trimmed instead.
_MAX_BACKOFF = 8
# UTF-8 continuation bytes are 0b10xxxxxx; no character starts with one.
_CONTINUATION_MASK = 0xC0
_CONTINUATION = 0x80

Encode = Callable[[str], Sequence[int]]
Decode = Callable[[list[int]], str]


@dataclass(frozen=True, slots=True)
class TruncationPolicy:
    """How much of a tool's output the model sees: ``limit`` units of ``mode``.

    ``head_fraction`` is the share of the budget kept from the start of the output (rounded to
    the nearest unit), the rest coming from its end: ``1.0`` keeps only the head, ``0.0`` only
    the tail. An invalid value raises :class:`~agentkit.errors.ConfigurationError`.
    """

    mode: TruncationMode
    limit: int
    head_fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigurationError(
                f"truncation mode must be one of {', '.join(map(repr, _MODES))}, not {self.mode!r}"
            )
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit <= 0:
            raise ConfigurationError(
                f"truncation limit must be a positive integer, not {self.limit!r}"
            )
        fraction = self.head_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0.0 <= fraction <= 1.0
        ):
            raise ConfigurationError(
                f"truncation head_fraction must be a number from 0 to 1, not {fraction!r}"
            )
        object.__setattr__(self, "head_fraction", float(fraction))

    @overload
    @classmethod
    def parse(cls, value: None) -> None: ...
    @overload
    @classmethod
    def parse(cls, value: TruncationPolicy | Mapping[str, Any]) -> TruncationPolicy: ...
    @classmethod
    def parse(cls, value: TruncationPolicy | Mapping[str, Any] | None) -> TruncationPolicy | None:
        """A policy from configuration: ``{"mode": ..., "limit": ...}`` (``head_fraction``
        optional), a policy (returned as it is), or ``None`` for no truncation.

        Raises :class:`~agentkit.errors.ConfigurationError` naming what is wrong.
        """
        if value is None or isinstance(value, TruncationPolicy):
            return value
        if not isinstance(value, Mapping):
            raise ConfigurationError(
                "a truncation policy is a mapping such as "
                f'{{"mode": "lines", "limit": 200}}, or None; got {type(value).__name__}'
            )
        unknown = sorted(str(key) for key in value if key not in _FIELDS)
        if unknown:
            raise ConfigurationError(
                f"unknown truncation policy field(s) {', '.join(map(repr, unknown))}; "
                "expected 'mode', 'limit' and optionally 'head_fraction'"
            )
        missing = [key for key in ("mode", "limit") if key not in value]
        if missing:
            raise ConfigurationError(
                f"truncation policy {dict(value)!r} lacks {' and '.join(map(repr, missing))}"
            )
        return cls(**value)


@dataclass(frozen=True, slots=True)
class Truncated:
    """A tool's output as the model will see it, and what was cut to get there.

    ``text`` is ``head``, then the marker line, then ``tail``; when nothing was cut it is the
    output itself (``head`` the whole output, ``tail`` empty). Counts are in the policy's unit,
    or in characters when there was no policy; a token count refers to the output's own token
    sequence.
    """

    text: str
    """What enters the model's context."""
    head: str
    """The kept start of the output: always a prefix of it."""
    tail: str
    """The kept end of the output: always a suffix of it, after ``head``."""
    mode: TruncationMode | None
    """The unit of the counts; ``None`` when no policy applied (counts in characters)."""
    original_chars: int
    original_units: int
    removed_units: int

    @property
    def truncated(self) -> bool:
        """Whether anything was cut."""
        return self.removed_units > 0

    @property
    def kept_units(self) -> int:
        """Units of the output that reach the model, the marker not counted."""
        return self.original_units - self.removed_units


def truncation_marker(count: int, mode: TruncationMode) -> str:
    """The marker line's text for ``count`` units of ``mode`` cut (see
    :data:`TRUNCATION_MARKER`)."""
    singular, plural = _UNITS[mode]
    return TRUNCATION_MARKER.format(count=count, unit=singular if count == 1 else plural)


def truncate(
    text: str,
    policy: TruncationPolicy | None,
    *,
    encode: Encode | None = None,
    decode: Decode | None = None,
) -> Truncated:
    """Cut ``text`` to ``policy``, keeping its head and tail around a marker line.

    Text within the limit comes back unchanged. ``encode`` and ``decode`` are the profile's
    tokenizer, required by (and only used in) ``tokens`` mode; ``encode`` must not add special
    tokens, and ``decode`` should decode invalid UTF-8 to U+FFFD rather than raise, as
    tokenizers do.
    """
    if policy is None:
        return _unchanged(text, None, len(text))
    if policy.mode == "tokens":
        if encode is None or decode is None:
            raise ConfigurationError(
                "a 'tokens' truncation policy counts in the model's tokenizer: "
                "pass its encode= and decode="
            )
        return _truncate_tokens(text, policy, encode, decode)
    if policy.mode == "bytes":
        return _truncate_bytes(text, policy)
    return _truncate_lines(text, policy)


def _budgets(policy: TruncationPolicy) -> tuple[int, int]:
    head = min(policy.limit, math.floor(policy.limit * policy.head_fraction + 0.5))
    return head, policy.limit - head


def _unchanged(text: str, mode: TruncationMode | None, units: int) -> Truncated:
    return Truncated(
        text=text,
        head=text,
        tail="",
        mode=mode,
        original_chars=len(text),
        original_units=units,
        removed_units=0,
    )


def _cut(
    text: str, head: str, tail: str, mode: TruncationMode, units: int, removed: int
) -> Truncated:
    before = "\n" if head and not head.endswith("\n") else ""
    after = "\n" if tail else ""
    return Truncated(
        text=f"{head}{before}{truncation_marker(removed, mode)}{after}{tail}",
        head=head,
        tail=tail,
        mode=mode,
        original_chars=len(text),
        original_units=units,
        removed_units=removed,
    )


def _truncate_bytes(text: str, policy: TruncationPolicy) -> Truncated:
    # surrogatepass: a lone surrogate (from a surrogateescape decode) is kept, as 3 bytes.
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    if size <= policy.limit:
        return _unchanged(text, "bytes", size)
    head_budget, tail_budget = _budgets(policy)
    # Both budgets are below `size`, so the indexing below stays in range, and
    # end <= head_budget < size - tail_budget <= start keeps the two sides apart.
    end = head_budget
    while end > 0 and data[end] & _CONTINUATION_MASK == _CONTINUATION:
        end -= 1
    start = size - tail_budget
    while start < size and data[start] & _CONTINUATION_MASK == _CONTINUATION:
        start += 1
    head = data[:end].decode("utf-8", "surrogatepass")
    tail = data[start:].decode("utf-8", "surrogatepass")
    return _cut(text, head, tail, "bytes", size, start - end)


def _truncate_lines(text: str, policy: TruncationPolicy) -> Truncated:
    count = text.count("\n")
    if text and not text.endswith("\n"):
        count += 1
    if count <= policy.limit:
        return _unchanged(text, "lines", count)
    head_budget, tail_budget = _budgets(policy)
    end = 0
    for _ in range(head_budget):
        end = text.index("\n", end) + 1  # there are more lines than the head keeps
    # The tail's lines start after the newlines that precede them; a final newline ends the
    # last line rather than starting another.
    start = len(text)
    search_end = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(tail_budget):
        newline = text.rindex("\n", 0, search_end)
        start = newline + 1
        search_end = newline
    return _cut(text, text[:end], text[start:], "lines", count, count - policy.limit)


def _truncate_tokens(
    text: str, policy: TruncationPolicy, encode: Encode, decode: Decode
) -> Truncated:
    ids = list(encode(text))
    size = len(ids)
    if size <= policy.limit:
        return _unchanged(text, "tokens", size)
    head_budget, tail_budget = _budgets(policy)
    head, kept_head = _token_head(text, ids, head_budget, decode)
    tail, kept_tail = _token_tail(text, ids, tail_budget, decode)
    overlap = len(head) + len(tail) - len(text)
    if overlap > 0:  # only a decoder that invents text can get here
        tail = tail[overlap:]
    return _cut(text, head, tail, "tokens", size, size - kept_head - kept_tail)


def _token_head(text: str, ids: list[int], budget: int, decode: Decode) -> tuple[str, int]:
    """The longest clean head of at most ``budget`` tokens, and its token count."""
    first: str | None = None
    for count in range(budget, max(budget - _MAX_BACKOFF, 0) - 1, -1):
        if count == 0:
            return "", 0
        piece = decode(ids[:count])
        if text.startswith(piece):
            return piece, count
        if first is None:
            first = piece
    assert first is not None
    return text[: common_prefix_len(first, text)], budget


def _token_tail(text: str, ids: list[int], budget: int, decode: Decode) -> tuple[str, int]:
    """The longest clean tail of at most ``budget`` tokens, and its token count."""
    first: str | None = None
    for count in range(budget, max(budget - _MAX_BACKOFF, 0) - 1, -1):
        if count == 0:
            return "", 0
        piece = decode(ids[len(ids) - count :])
        if text.endswith(piece):
            return piece, count
        if first is None:
            first = piece
    assert first is not None
    return text[len(text) - _common_suffix(first, text) :], budget


def _common_suffix(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(reversed(a), reversed(b), strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))
