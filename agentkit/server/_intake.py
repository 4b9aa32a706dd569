"""The request boundary: reading a body, decoding it as strict JSON, and bounding its shape.

Everything a client sends passes through here before any converter, template or tokenizer
sees it, so that what follows can assume well-formed, bounded input:

* **Reading** is linear (the pieces are joined once) and has a deadline: a client that
  announces more body than it sends, or trickles it, gets 408 instead of holding a worker.
* **Strict JSON**: the body must be UTF-8; ``NaN``, ``Infinity`` and ``-Infinity`` are not
  numbers; every string (keys included) must encode as UTF-8, so a lone UTF-16 surrogate
  (``"\\ud800"``) is a 400 naming the field, not a failure deep in a template, a prompt log or
  the response encoder.
* **Depth** is checked by an iterative walk before anything recursive (validation, rendering,
  ``json.dumps`` of a tool's input) runs; the parser's own recursion is caught too.
* **Counts**: messages (or input items), content blocks and tools per request are bounded, so
  a body within the size limit cannot ask for a million tiny messages.

Parsing and the walk are CPU work: the routes run them on a worker thread
(:meth:`ServerContext.work <agentkit.server._context.ServerContext.work>`), off the event loop.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio

from agentkit.server._errors import ApiError

__all__ = [
    "EMBEDDED_MAX_DEPTH",
    "Limits",
    "check_counts",
    "check_tree",
    "decode_ids",
    "embedded_json",
    "parse_json",
    "read_bytes",
]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""Where a lone surrogate could come from: UTF-8 text cannot hold one, only an escape can."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one request may hold (the defaults fit the largest real agent sessions);
    ``agentkit serve``'s ``ServerConfig`` extends it."""

    max_request_bytes: int = 32 * 1024 * 1024
    """The body, and a compressed body once decompressed (413 beyond)."""
    body_timeout: float = 60.0
    """Seconds to receive the whole body (408 beyond)."""
    max_json_depth: int = 64
    """Nesting of arrays and objects, the body itself being level 1."""
    max_messages: int = 10_000
    """``messages`` (Anthropic, Chat Completions) or ``input`` items (Responses)."""
    max_blocks: int = 100_000
    """Content blocks in all messages together (parts, ``tool_calls``, system blocks)."""
    max_tools: int = 2_000
    """Tools, a namespace's members counted one by one."""


async def read_bytes(chunks: AsyncIterator[bytes], limits: Limits) -> bytes:
    """The whole body from ``chunks``, within ``limits.max_request_bytes`` (413) and
    ``limits.body_timeout`` (408)."""
    pieces: list[bytes] = []
    size = 0
    limit = limits.max_request_bytes
    with anyio.move_on_after(limits.body_timeout) as scope:
        async for piece in chunks:
            size += len(piece)
            if size > limit:
                raise ApiError("request_too_large", f"request body exceeds {limit} bytes")
            pieces.append(piece)
    if scope.cancelled_caught:
        raise ApiError(
            "invalid_request_error",
            f"the request body did not arrive within {limits.body_timeout:g} s "
            f"({size} bytes received)",
            status=408,
        )
    return b"".join(pieces)


def parse_json(body: bytes, limits: Limits) -> Any:
    """``body`` as strict JSON within ``limits`` (see the module docstring); a 400
    :class:`ApiError` naming the field otherwise. CPU-bound: call it on a worker thread."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ApiError(
            "invalid_request_error",
            f"the body is not UTF-8 (byte {error.start}): send JSON encoded as UTF-8",
        ) from error
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        _too_deep(None, limits.max_json_depth)
    except ValueError as error:
        raise ApiError("invalid_request_error", f"the body is not valid JSON: {error}") from error
    check_tree(data, limits.max_json_depth, surrogates=bool(_SURROGATE_ESCAPE.search(text)))
    return data


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def check_tree(data: Any, max_depth: int, *, surrogates: bool = True) -> None:
    """Walk ``data`` (decoded JSON) without recursion: nesting within ``max_depth``, strings
    encodable as UTF-8 (checked only where ``surrogates`` says they may not be), numbers
    finite. The first violation is a 400 naming its path."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth > max_depth:
            _too_deep(_path_to(data, node), max_depth)
        for key, value in items:
            if surrogates and isinstance(key, str) and not _encodable(key):
                _bad_text(_path_to(data, node), key)
            if isinstance(value, dict | list):
                stack.append((value, depth + 1))
            elif isinstance(value, str):
                if surrogates and not _encodable(value):
                    _bad_text(_join(_path_to(data, node), key), value)
            elif isinstance(value, float) and not math.isfinite(value):
                # Only a float literal too large for a double (1e999) gets here.
                _fail(_join(_path_to(data, node), key), "the number is out of range")


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path_to(root: Any, target: Any) -> str | None:
    """The dotted path of ``target`` inside ``root`` (found again, iteratively: only errors
    need it, so the walk itself carries no paths)."""
    stack: list[tuple[Any, str | None]] = [(root, None)]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        pairs: Any = ()
        if isinstance(node, dict):
            pairs = node.items()
        elif isinstance(node, list):
            pairs = enumerate(node)
        for key, value in pairs:
            if isinstance(value, dict | list):
                stack.append((value, _join(path, key)))
    return None


def _join(path: str | None, key: object) -> str:
    return str(key) if path is None else f"{path}.{key}"


def _too_deep(path: str | None, limit: int) -> NoReturn:
    where = f"{path}: " if path else ""
    raise ApiError(
        "invalid_request_error",
        f"{where}the body nests arrays and objects more than {limit} levels deep "
        "(limit max_json_depth)",
        param=path,
    )


def _bad_text(path: str | None, text: str) -> NoReturn:
    index = next(i for i, c in enumerate(text) if 0xD800 <= ord(c) <= 0xDFFF)
    _fail(
        path,
        f"the text holds a lone UTF-16 surrogate (U+{ord(text[index]):04X} at character "
        f"{index}), which is not Unicode text",
    )


def _fail(path: str | None, detail: str) -> NoReturn:
    raise ApiError("invalid_request_error", f"{path}: {detail}" if path else detail, param=path)


def check_counts(data: Any, limits: Limits) -> None:
    """Bound a request body's messages, content blocks and tools, whatever its wire format
    (Anthropic ``messages``/``system``, Chat Completions ``messages``, Responses ``input``);
    400 naming the limit beyond any."""
    if not isinstance(data, Mapping):
        return
    for field in ("messages", "input"):
        items = data.get(field)
        if isinstance(items, list) and len(items) > limits.max_messages:
            _over(field, f"{len(items)} items", limits.max_messages, "max_messages")
    blocks = 0
    system = data.get("system")
    if isinstance(system, list):
        blocks += len(system)
    for field in ("messages", "input"):
        items = data.get(field)
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, Mapping):
                continue
            for key in ("content", "tool_calls", "output", "summary"):
                value = item.get(key)
                if isinstance(value, list):
                    blocks += len(value)
    if blocks > limits.max_blocks:
        _over("messages", f"{blocks} content blocks", limits.max_blocks, "max_blocks")
    tools = data.get("tools")
    if isinstance(tools, list):
        count = len(tools)
        for tool in tools:
            inner = tool.get("tools") if isinstance(tool, Mapping) else None
            if isinstance(inner, list):
                count += len(inner)
        if count > limits.max_tools:
            _over("tools", f"{count} tools", limits.max_tools, "max_tools")


def _over(path: str, what: str, limit: int, name: str) -> NoReturn:
    raise ApiError(
        "invalid_request_error",
        f"{path}: {what} exceed this server's limit of {limit} ({name})",
        param=path,
    )


_MAX_TOKEN_ID = 2**31 - 1


def decode_ids(decode: Callable[[list[int]], str | None], ids: list[int]) -> str | None:
    """``decode(ids)`` for ``/v1/detokenize``: ids outside the tokenizer's range, and ids
    that decode to no Unicode text, are a 400 naming the id rather than a crash."""
    for i, token in enumerate(ids):
        if not 0 <= token <= _MAX_TOKEN_ID:
            _fail(f"tokens.{i}", f"token id {token} is out of range")
    try:
        text = decode(ids)
    except (ValueError, OverflowError, IndexError, KeyError, TypeError) as error:
        _fail("tokens", f"the ids are not all in the tokenizer's vocabulary ({error})")
    if text is not None and not _encodable(text):
        _fail("tokens", "the ids decode to text that is not Unicode (a lone surrogate)")
    return text


EMBEDDED_MAX_DEPTH = Limits().max_json_depth
"""How deep JSON carried inside a string (a tool call's ``arguments``) may nest."""


def embedded_json(text: str, path: str, max_depth: int = EMBEDDED_MAX_DEPTH) -> Any:
    """JSON carried in a string of the body (a tool call's ``arguments``), held to the body's
    rules: ``ValueError`` when it is not JSON (``NaN`` included), a 400 :class:`ApiError`
    naming ``path`` when it nests too deep or holds a lone surrogate."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        _too_deep(path, max_depth)
    try:
        check_tree(value, max_depth, surrogates=bool(_SURROGATE_ESCAPE.search(text)))
    except ApiError as error:
        raise ApiError(error.kind, f"{path}: {error.message}", param=path) from None
    if isinstance(value, str) and not _encodable(value):
        _bad_text(path, value)
    return value
