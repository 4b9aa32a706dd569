"""Every endpoint against bodies mutated from valid requests (wrong types, odd and huge strings,
lone surrogates, deep nesting, ``NaN``, missing and extra fields), streaming and not.

Whatever arrives: no 5xx; every 4xx in the API's own error shape; every 200 stream ends with
its terminal event or its error event; every other 200 is JSON.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from _intake import (
    ALL_PATHS,
    GENERATION_PATHS,
    assert_stream_ends,
    build,
    client,
    error_of,
    valid_body,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

_DEEP = "\x00deep\x00"
_NAN = "\x00nan\x00"
_INF = "\x00inf\x00"
"""Markers the encoder below turns into text ``json.dumps`` cannot write."""

_strings = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\U0001f600", "", " ", "\x00", "<|im_end|>", "{"]),
    st.integers(0, 200_000).map(lambda n: "x" * n),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _strings,
    st.sampled_from([_NAN, _INF, _DEEP]),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    items: Any = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in items:
        found.append((*prefix, key))
        found.extend(paths_of(child, (*prefix, key)))
    return found


def mutate(body: Any, data: st.DataObject) -> Any:
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        paths = paths_of(body)
        if not paths or data.draw(st.integers(0, 9)) == 0:
            body = data.draw(_values, label="whole body")
            continue
        path = data.draw(st.sampled_from(paths), label="path")
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "delete", "add"]), label="action")
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8), label="key")] = data.draw(_values, label="added")
        else:
            parent[path[-1]] = data.draw(_values, label="value")
    return body


def encode(body: Any, depth: int) -> bytes:
    text = json.dumps(body, ensure_ascii=True)
    text = text.replace(json.dumps(_NAN), "NaN").replace(json.dumps(_INF), "-Infinity")
    return text.replace(json.dumps(_DEEP), "[" * depth + "]" * depth).encode()


async def exchange(path: str, content: bytes) -> None:
    async with client(build()) as c:
        response = await c.post(path, content=content, headers={"content-type": "application/json"})
    event(f"{path} {response.status_code}")
    assert response.status_code < 500, (path, content[:300], response.text[:500])
    if response.status_code >= 400:
        error_of(path, response)
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert_stream_ends(path, response.text)
    else:
        assert isinstance(response.json(), dict)


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.sampled_from(ALL_PATHS),
    st.booleans(),
    st.sampled_from([3, 70, 2_000]),
    st.data(),
)
def test_no_body_gets_a_5xx_or_a_broken_answer(
    path: str, stream: bool, depth: int, data: st.DataObject
) -> None:
    body = mutate(valid_body(path, stream=stream and path in GENERATION_PATHS), data)
    anyio.run(exchange, path, encode(body, depth))
