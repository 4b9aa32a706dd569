"""gpt-oss Harmony output: messages on channels, tool calls addressed to a recipient.

An assistant turn is a run of messages::

    <|channel|>analysis<|message|>Need the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city":"Oslo"}<|call|>

(one line in the output: the break after ``json`` is only for this page).

The first message's ``<|start|>assistant`` is usually the end of the prompt, so the output
starts inside a header. Header parts come in any order: the recipient (``to=functions.NAME``)
may sit before ``<|channel|>`` or after the channel name, and the content type
(``<|constrain|>json`` or a bare ``json``) is optional. A message becomes:

* a tool call when it has a recipient (whatever its channel); ``functions.`` is dropped from
  the name, other recipients (``browser.search``, ``python``) are kept whole;
* a reasoning block on ``analysis``;
* a text block otherwise (``final``, and ``commentary`` without recipient: a preamble).

Messages end at ``<|end|>``, ``<|return|>`` or ``<|call|>``; a ``<|start|>`` or ``<|channel|>``
also ends one whose end marker is missing. Call arguments are scanned as JSON, so a marker
inside a JSON string is text; the consequence is that an unterminated string swallows the
rest of the output into the call (an error call, raw kept).

Whitespace between messages is formatting, owned by the next block (or the last one). Text
outside any message becomes a text block; stray end markers there are formatting. A header cut
short by an end marker, a new message or the end of the output is an empty message of its
kind (for a call: an error call). What only looked like a header (a newline in it, or more
than 256 characters) is kept as text, markers included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from agentkit.events import (
    ParseEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
)
from agentkit.parsing._base import JSONSchema
from agentkit.parsing._json_stream import JsonObjectStream
from agentkit.parsing._turn import TurnParser
from agentkit.transcript import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
)

__all__ = ["HarmonyParser", "render"]

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"
_MARKERS = (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL)
_TERMINATORS = frozenset((END, RETURN, CALL))
_OPENERS = frozenset((START, CHANNEL))
_MAX_HEADER = 256
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*([^\s<]*)")

_Mode = Literal["header", "content", "args", "after_args", "skip", "between"]
_Kind = Literal["reasoning", "text", "call"]


class HarmonyParser(TurnParser):
    """A :class:`~agentkit.parsing.StreamParser` for gpt-oss Harmony output.

    ``tool_schemas`` is accepted for parity with :class:`~agentkit.parsing.MarkerStreamParser`
    (Harmony arguments are JSON, so they are not needed); ``id_factory`` makes call ids.
    """

    def __init__(
        self,
        *,
        tool_schemas: Mapping[str, JSONSchema] = MappingProxyType({}),
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(id_factory)
        self._schemas = tool_schemas
        self._mode: _Mode = "header"
        self._raw: list[str] = []
        self._header: list[str] = []
        self._header_size = 0
        self._formatting = 0
        """Characters of formatting at the start of the header's raw text."""
        self._kind: _Kind = "text"
        self._index = 0
        self._text: list[str] = []
        self._call_id = ""
        self._name = ""
        self._args = JsonObjectStream()
        self._streamed = False
        self._error: str | None = None

    def _finish(self, out: list[ParseEvent]) -> None:
        if self._held and self._mode == "after_args":  # a cut-off <|call|>: forgiven
            self._raw.append(self._held)
        elif self._held:  # a partial marker that never completed is plain text
            self._piece(self._held, out)
        self._held = ""
        mode = self._mode
        if mode == "header":
            self._truncated_header(out)
        elif mode == "content":
            self._close(out)
        elif mode in ("args", "skip"):
            self._error = self._error or (
                "tool call truncated: the output ended before its arguments were complete"
            )
            self._close(out)
        elif mode == "after_args":  # the arguments are whole; only <|call|> is missing
            self._close(out)

    # -- scanning ------------------------------------------------------------------------

    def _run(self, buf: str, out: list[ParseEvent]) -> None:
        n = len(buf)
        pos = 0
        while pos < n:
            if self._mode == "args":
                pos = self._scan_args(buf, pos, out)
                continue
            at = buf.find("<|", pos)
            if at == -1:
                stop = n - 1 if buf.endswith("<") else n
                self._piece(buf[pos:stop], out)
                self._held = buf[stop:]
                return
            self._piece(buf[pos:at], out)
            marker = next((m for m in _MARKERS if buf.startswith(m, at)), None)
            if marker is None:
                if any(n - at < len(m) and m.startswith(buf[at:]) for m in _MARKERS):
                    self._held = buf[at:]
                    return
                self._piece(buf[at : at + 2], out)
                pos = at + 2
                continue
            pos = at + len(marker)
            self._marker(marker, out)

    def _piece(self, piece: str, out: list[ParseEvent]) -> None:
        """Text that is not a marker, in the current mode."""
        if not piece:
            return
        mode = self._mode
        if mode == "content":
            self._raw.append(piece)
            self._text.append(piece)
            cls = ReasoningDelta if self._kind == "reasoning" else TextDelta
            out.append(cls(index=self._index, text=piece))
        elif mode == "header":
            self._raw.append(piece)
            self._header.append(piece)
            self._header_size += len(piece)
            if "\n" in piece or self._header_size > _MAX_HEADER:
                self._header_as_text(out)
        elif mode == "between":
            stripped = piece.lstrip()
            if len(stripped) < len(piece):
                self._pending.append(piece[: len(piece) - len(stripped)])
            if stripped:
                self._open("text")
                self._mode = "content"
                self._piece(stripped, out)
        else:  # after_args, skip: raw of the call
            self._raw.append(piece)
            if mode == "after_args" and piece.strip():
                self._error = "unexpected text after the tool call's JSON arguments"
                self._mode = "skip"

    def _marker(self, marker: str, out: list[ParseEvent]) -> None:
        mode = self._mode
        if mode == "header":
            if marker in (CHANNEL, CONSTRAIN):
                self._raw.append(marker)
                self._header.append(marker)
            elif marker == MESSAGE:
                self._raw.append(marker)
                self._start_message(out)
            elif marker == START:  # a new message: this header had no content
                self._cut_header("the tool call has no arguments", out)
                self._begin_header(marker)
            elif self._raw:  # an end marker before any <|message|>: an empty message
                self._raw.append(marker)
                self._cut_header("the tool call has no arguments", out)
            else:
                self._pending.append(marker)
                self._mode = "between"
        elif mode == "between":
            if marker in _OPENERS:
                self._begin_header(marker)
            else:  # a stray end marker: formatting
                self._pending.append(marker)
        elif marker in _TERMINATORS:
            self._raw.append(marker)
            self._close(out)
        elif marker in _OPENERS:  # the end marker is missing: a new message begins
            self._close(out)
            self._begin_header(marker)
        elif mode == "content":  # <|message|> or <|constrain|> inside a message's text
            self._piece(marker, out)
        else:
            if mode == "after_args":
                self._error = f"unexpected {marker} after the tool call's JSON arguments"
                self._mode = "skip"
            self._raw.append(marker)

    # -- messages ------------------------------------------------------------------------

    def _begin_header(self, marker: str) -> None:
        self._mode = "header"
        self._formatting = sum(map(len, self._pending))
        self._raw = [*self._pending, marker]
        self._pending.clear()
        self._header = [] if marker == START else [marker]
        self._header_size = 0

    def _start_message(self, out: list[ParseEvent]) -> None:
        """The header is complete: open the block it announces."""
        header = "".join(self._header)
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            self._open("call")
            self._name = recipient.group(1).removeprefix("functions.")
            self._call_id = self._id_factory()
            self._args = JsonObjectStream()
            self._streamed = False
            self._error = None if self._name else "the tool call's recipient has no name"
            out.append(ToolCallStarted(index=self._index, id=self._call_id, name=self._name))
            self._mode = "args"
        else:
            channel = _CHANNEL_NAME.search(header)
            analysis = channel is not None and channel.group(1) == "analysis"
            self._open("reasoning" if analysis else "text")
            self._mode = "content"

    def _cut_header(self, call_error: str, out: list[ParseEvent]) -> None:
        """A header that never reached ``<|message|>``: an empty message of its kind."""
        if not self._raw:
            return
        self._start_message(out)
        if self._kind == "call":
            self._error = self._error or call_error
        self._close(out)

    def _open(self, kind: _Kind) -> None:
        self._kind = kind
        self._index = len(self._blocks)
        self._raw = [*self._pending, *self._raw]
        self._pending.clear()
        self._text = []

    def _header_as_text(self, out: list[ParseEvent]) -> None:
        """What looked like a header is not one: keep it (markers included) as text."""
        raw = "".join(self._raw)
        text = raw[self._formatting :].lstrip()
        self._raw = []
        if len(text) < len(raw):
            self._pending.append(raw[: len(raw) - len(text)])
        self._mode = "between"
        self._piece(text, out)

    def _truncated_header(self, out: list[ParseEvent]) -> None:
        if not self._raw:
            return
        if "<|" in "".join(self._raw):
            self._cut_header("tool call truncated: the output ended inside its header", out)
        else:  # plain text, no Harmony at all
            self._header_as_text(out)
            if self._mode == "content":
                self._close(out)

    def _scan_args(self, buf: str, pos: int, out: list[ParseEvent]) -> int:
        delta, stop = self._args.feed(buf, pos)
        self._raw.append(buf[pos:stop])
        if delta:
            self._streamed = True
            out.append(ToolCallArgumentsDelta(index=self._index, id=self._call_id, delta=delta))
        if self._args.done:
            self._mode = "after_args"
        elif self._args.error is not None:
            if not self._streamed and buf.startswith("<", stop):
                self._mode = "after_args"  # no arguments at all: {}
            else:
                self._error = f"the tool call's arguments are not a JSON object: {self._args.error}"
                self._mode = "skip"
        return stop

    def _close(self, out: list[ParseEvent]) -> None:
        """End the open block (of any kind) and go between messages."""
        mode, self._mode = self._mode, "between"
        raw = "".join(self._raw)
        self._raw = []
        if mode in ("args", "after_args", "skip") and self._kind == "call":
            self._close_call(raw, out)
            return
        kind: Literal["text", "reasoning"] = "reasoning" if self._kind == "reasoning" else "text"
        self._add_content(kind, self._index, "".join(self._text), raw, out)

    def _close_call(self, raw: str, out: list[ParseEvent]) -> None:
        arguments: dict[str, object] = {}
        error = self._error
        if error is None and self._streamed:
            arguments, error = self._args.value()
        if error is None and not self._streamed:
            out.append(ToolCallArgumentsDelta(index=self._index, id=self._call_id, delta="{}"))
        self._add_call(self._index, self._call_id, self._name, arguments, raw, error, out)


def render(blocks: Iterable[ContentBlock]) -> str:
    """Canonical Harmony text of an assistant turn's blocks, as the model writes it: the
    first message without ``<|start|>assistant`` (the prompt ends with it).

    A text block is a ``final`` message unless a tool call follows it (then it is a
    ``commentary`` preamble); the last ``final`` message ends with ``<|return|>``. Parsing
    the result gives back the same blocks (ignoring ``raw`` and ids) as long as no text
    contains a Harmony marker; tool names with a dot are written as the recipient itself.
    """
    items = list(blocks)
    last_call = max((i for i, b in enumerate(items) if isinstance(b, ToolCallBlock)), default=-1)
    parts: list[str] = []
    for i, block in enumerate(items):
        head = "" if i == 0 else f"{START}assistant"
        if isinstance(block, ReasoningBlock):
            parts.append(f"{head}{CHANNEL}analysis{MESSAGE}{block.text}{END}")
        elif isinstance(block, TextBlock):
            channel = "commentary" if i < last_call else "final"
            end = RETURN if channel == "final" and i == len(items) - 1 else END
            parts.append(f"{head}{CHANNEL}{channel}{MESSAGE}{block.text}{end}")
        elif isinstance(block, ToolCallBlock):
            recipient = block.name if "." in block.name else f"functions.{block.name}"
            header = f"{head}{CHANNEL}commentary to={recipient} {CONSTRAIN}json"
            parts.append(
                f"{header}{MESSAGE}{json.dumps(block.arguments, ensure_ascii=False)}{CALL}"
            )
        else:
            raise ValueError(f"a {block.type} block is not part of a model's output")
    return "".join(parts)
