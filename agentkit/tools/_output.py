"""Turning whatever a tool returns or raises into text the model can read.

The text ends up in the transcript, which is serialised to JSON and tokenized, so it must be
valid Unicode that UTF-8 can encode, and producing it must never fail: a tool that succeeded
must not turn into an error because its value was awkward to print, and a tool that failed
must be reported even when its exception cannot say what went wrong.

The rules, in order:

* ``None`` is the empty string; a ``str`` (or subclass) is its characters.
* ``bytes``, ``bytearray`` and ``memoryview`` are their UTF-8 text when they decode as UTF-8;
  otherwise a one-line note (``[N bytes of binary data, not UTF-8, base64:]``) followed by
  the base64 of the bytes, so nothing is lost and the model knows what it is looking at.
* Anything else is JSON (pydantic's rules: models, dataclasses, enums, dates...); bytes
  inside data are UTF-8 text where they can be and URL-safe base64 where they cannot.
* What JSON cannot express falls back to ``str()``, then ``repr()``, then a placeholder.
* Lone surrogates (``"\\udce9"``, as ``os.fsdecode`` produces for undecodable file names, or
  JSON escapes of half a pair) become U+FFFD REPLACEMENT CHARACTER; a high and a low
  surrogate that follow each other are joined into the character they encode.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping

from pydantic_core import to_jsonable_python

__all__ = ["clean_text", "exception_text", "to_text"]

_SURROGATES = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")
_BINARY = (bytes, bytearray, memoryview)
_CONTAINERS = (Mapping, list, tuple, set, frozenset)


def to_text(value: object) -> str:
    """What the model reads for a tool's return value (see the module docstring)."""
    return clean_text(_raw_text(value))


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD and split pairs joined, so
    that it encodes as UTF-8; text without surrogates is returned as it is."""
    if _SURROGATES.search(text) is None:
        return text
    return _SURROGATES.sub(_replace_surrogate, text)


def exception_text(exc: BaseException) -> str:
    """``"Type: message"`` for an exception, or ``"Type"`` when it has no message, even when
    its ``__str__`` raises."""
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException as failure:  # a broken __str__ must not hide the real failure
        return f"{name} (its message could not be read: {type(failure).__name__})"
    return clean_text(f"{name}: {message}" if message else name)


def _raw_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)  # the characters, not a subclass's idea of itself
    if isinstance(value, _BINARY):
        return _bytes_text(bytes(value))
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False)
    except Exception:
        return _printed(value)


def _jsonable(value: object) -> object:
    try:
        return to_jsonable_python(value)
    except Exception:
        if not isinstance(value, _CONTAINERS):
            raise  # a scalar JSON cannot express: print it instead
    # Data with something awkward inside: bytes as base64, the rest printed.
    return to_jsonable_python(value, bytes_mode="base64", fallback=_printed)


def _bytes_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        encoded = base64.b64encode(data).decode("ascii")
        return f"[{len(data)} bytes of binary data, not UTF-8, base64:]\n{encoded}"


def _printed(value: object) -> str:
    for render in (str, repr):
        try:
            return render(value)
        except Exception:
            continue
    return f"<unprintable {type(value).__name__} object>"


def _replace_surrogate(match: re.Match[str]) -> str:
    pair = match.group(1)
    if pair is None:
        return "\ufffd"
    high, low = ord(pair[0]), ord(pair[1])
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
