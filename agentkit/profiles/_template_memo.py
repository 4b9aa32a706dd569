"""Rendering a chat template again after messages were appended, reusing what it wrote for
the earlier ones where the template's syntax tree proves it would write the same.

A chat template is a program over the whole conversation, so the prompt builder renders it
whole every turn; at 500 turns that is tens of milliseconds of Jinja. Most of that time is the
template's main ``{% for message in messages %}`` loop writing each message again exactly as
it did the turn before. This module rewrites such loops (at compile time) into a call that
runs the loop in Python and, for each iteration, compares the *complete* input of its body
with the input of the same iteration in the previous render: equal inputs give the same
output, which is reused; any other iteration is rendered by the template's own body.

What the body's input is comes from its syntax tree, conservatively:

- every name the body reads (anywhere in it), with its value at the loop's start: scalars by
  value, containers and other objects by identity (kept alive, so an identity is never
  reused; the objects a render receives cannot be changed by the immutable sandbox, and the
  caller hands the same objects again only when they did not change); a ``namespace`` the
  body reads only as ``ns.attr`` by the values of those attributes;
- the item, and the ``loop`` attributes the body reads (``loop.last`` changes when a message is
  appended: the iteration that read it is rendered again);
- a list the body reads only as ``messages[loop.index0 + 1]`` (any constant offset): the items
  at those positions, not the whole list (so the history stays reusable).

A loop is left as it is (always rendered by Jinja) where its body could have an effect on what
follows or could read something not in that input: it assigns a namespace attribute, breaks
or continues, includes or imports, calls ``strftime_now`` or the ``random`` filter, or uses
``loop`` other than through its plain attributes; and a loop with a ``recursive`` flag, an
``else`` block, a filter test or a tuple target. Nothing else changes: the output is the
template's own, byte for byte, as tests compare for every reference template.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentkit.profiles._template_loops import LoopPlan

__all__ = ["RenderMemo"]


class _Unkeyable(Exception):
    pass


@dataclass
class _LoopCache:
    outer_key: tuple[Any, ...]
    keep: list[Any]
    """The objects the keys name by identity, alive while their keys are kept."""
    keys: list[tuple[Any, ...] | None]
    """Each iteration's input (``None``: not comparable)."""
    outputs: list[str]
    """Each iteration's output."""


@dataclass
class RenderMemo:
    """What one conversation's renders remember: each rewritten loop's iterations (their
    input and output) from the last render, and the chat messages built for each transcript
    message (so the same message is the same object, render after render). One per prompt
    builder; renders through it must come one at a time, and an object handed to them again
    (a transcript message, the tools, a template variable) must not have changed since."""

    loops: dict[int, _LoopCache] = field(default_factory=dict)
    messages: dict[tuple[int, str, bool], tuple[object, list[dict[str, Any]]]] = field(
        default_factory=dict
    )
    tools: tuple[object, list[dict[str, Any]] | None] | None = None
    reused: int = 0
    """Iterations whose output was reused (over the memo's life)."""
    rendered: int = 0
    """Iterations the template's body rendered (over the memo's life)."""

    def runner(self, env: Any, plans: Sequence[LoopPlan]) -> Callable[..., str]:
        """The callable a memoized template's rewritten loops call, for one render."""
        from jinja2 import Undefined
        from jinja2.runtime import LoopContext
        from jinja2.utils import Namespace

        _Jinja.undefined = Undefined
        undefined = env.undefined

        def run(number: int, iterable: Iterable[Any], *outer: Any, caller: Any) -> str:
            plan = plans[number]
            keep: list[Any] = []
            try:
                outer_key = _outer_key(plan, outer, keep, env, Namespace)
            except _Unkeyable:
                outer_key = None
            previous = self.loops.get(number)
            same_outer = (
                previous is not None and outer_key is not None and previous.outer_key == outer_key
            )
            old_keys = previous.keys if previous is not None and same_outer else []
            old_outputs = previous.outputs if previous is not None and same_outer else []
            windows = [
                (outer[plan.outer.index(name)], pairs) for name, pairs in plan.windows.items()
            ]
            if any(type(v) is not list and type(v) is not tuple for v, _ in windows):
                outer_key, old_keys = None, []  # read by position, but not a sequence: no keys
            attributes = plan.loop_attributes
            keys: list[tuple[Any, ...] | None] | None = None
            if outer_key is not None and (type(iterable) is list or type(iterable) is tuple):
                keys = _sequence_keys(attributes, iterable, windows, keep)
            outputs: list[str] = []
            new_keys: list[tuple[Any, ...] | None] = []
            count = len(old_keys)
            reused = 0
            for i, (item, loop) in enumerate(LoopContext(iterable, undefined)):
                key: tuple[Any, ...] | None
                if keys is not None:
                    key = keys[i]
                elif outer_key is not None:
                    key = _iteration_key(attributes, i, item, loop, windows, keep)
                else:
                    key = None
                if key is not None and i < count and old_keys[i] == key:
                    outputs.append(old_outputs[i])
                    reused += 1
                else:
                    outputs.append(str(caller(item, loop)))
                new_keys.append(key)
            self.reused += reused
            self.rendered += len(outputs) - reused
            if outer_key is None:
                self.loops.pop(number, None)
            else:
                self.loops[number] = _LoopCache(outer_key, keep, new_keys, outputs)
            return "".join(outputs)

        return run

    def chat_messages(
        self,
        message: object,
        reasoning_key: str,
        json_arguments: bool,
        build: Callable[[Any, str, bool], list[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """The chat messages of one transcript message, built once (transcript messages are
        not changed once recorded; the prompt builder relies on that too)."""
        key = (id(message), reasoning_key, json_arguments)
        hit = self.messages.get(key)
        if hit is None or hit[0] is not message:
            hit = (message, build(message, reasoning_key, json_arguments))
            self.messages[key] = hit
        return hit[1]

    def tool_dicts(self, tools: Sequence[Any]) -> list[dict[str, Any]] | None:
        """The tools as the template gets them, the same list while ``tools`` is the same."""
        if self.tools is None or self.tools[0] is not tools:
            self.tools = (tools, [dict(t) for t in tools] or None)
        return self.tools[1]


class _Jinja:
    """``jinja2.Undefined``, imported with the first render (jinja2 is imported lazily)."""

    undefined: type = type(None)


def _token(value: Any, keep: list[Any]) -> Any:
    """What an input is compared by: scalars by value and type, anything else by identity."""
    kind = type(value)
    if kind is str:
        return value
    if kind is bool or kind is int or kind is float or value is None:
        return (kind, value)
    if isinstance(value, _Jinja.undefined):
        undefined: Any = value
        obj = undefined._undefined_obj
        keep.append(obj)
        return ("undefined", kind, undefined._undefined_name, undefined._undefined_hint, id(obj))
    keep.append(value)
    return id(value)  # an int: no other kind of token is one


def _outer_key(
    plan: LoopPlan, outer: Sequence[Any], keep: list[Any], env: Any, namespace: type
) -> tuple[Any, ...]:
    key: list[Any] = []
    for name, value in zip(plan.outer, outer, strict=True):
        if name in plan.windows:
            continue  # read through the iterations' windows only
        attributes = plan.attributes.get(name)
        if isinstance(value, namespace):
            if attributes is None:
                raise _Unkeyable(name)
            key.append(tuple(_token(env.getattr(value, a), keep) for a in attributes))
        else:
            key.append(_token(value, keep))
    return tuple(key)


_TYPED_ATTRIBUTES = frozenset({"revindex", "revindex0", "length", "last"})
"""Loop attributes that are always an int or always a bool: compared as they are."""


def _iteration_key(
    attributes: tuple[str, ...],
    position: int,
    item: Any,
    loop: Any,
    windows: Sequence[tuple[Any, tuple[tuple[str, int], ...]]],
    keep: list[Any],
) -> tuple[Any, ...]:
    """Iteration ``position``'s input beyond the loop's outer values, asked of the loop
    (an iterable that is not a sequence)."""
    key = [_token(item, keep)]
    for attribute in attributes:
        value = getattr(loop, attribute)
        key.append(value if attribute in _TYPED_ATTRIBUTES else _token(value, keep))
    key += _window_tokens(position, windows, keep)
    return tuple(key)


def _window_tokens(
    position: int, windows: Sequence[tuple[Any, tuple[tuple[str, int], ...]]], keep: list[Any]
) -> list[Any]:
    out = []
    for value, pairs in windows:
        count = len(value)
        for attribute, offset in pairs:
            index = position + offset + (attribute == "index")
            out.append(_token(value[index], keep) if -count <= index < count else ("absent", index))
    return out


_NO_PREVIOUS = ("no previtem",)
_NO_NEXT = ("no nextitem",)


def _sequence_keys(
    attributes: tuple[str, ...],
    items: Sequence[Any],
    windows: Sequence[tuple[Any, tuple[tuple[str, int], ...]]],
    keep: list[Any],
) -> list[tuple[Any, ...] | None]:
    """Every iteration's input over a list or tuple, column by column: what
    :func:`_iteration_key` asks the loop, known from the position and the length (the same
    values, so a key from either compares equal for equal input)."""
    size = len(items)
    tokens = [_token(item, keep) for item in items]
    columns: list[Sequence[Any]] = [tokens]
    for attribute in attributes:
        if attribute == "last":
            columns.append([False] * (size - 1) + [True] if size else [])
        elif attribute == "length":
            columns.append([size] * size)
        elif attribute == "revindex":
            columns.append(range(size, 0, -1))
        elif attribute == "revindex0":
            columns.append(range(size - 1, -1, -1))
        elif attribute == "previtem":
            columns.append([_NO_PREVIOUS, *tokens[:-1]] if size else [])
        elif attribute == "nextitem":
            columns.append([*tokens[1:], _NO_NEXT] if size else [])
        else:  # pragma: no cover - the plan only names these
            raise AssertionError(attribute)
    for value, pairs in windows:
        count = len(value)
        value_tokens = [_token(v, keep) for v in value]
        for attribute, offset in pairs:
            shift = offset + (attribute == "index")
            columns.append(
                [
                    value_tokens[j] if -count <= j < count else ("absent", j)
                    for j in range(shift, size + shift)
                ]
            )
    return list(zip(*columns, strict=True))
