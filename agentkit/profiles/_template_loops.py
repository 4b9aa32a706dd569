"""The syntax-tree half of :mod:`agentkit.profiles._template_memo`: which loops of a chat
template can reuse their iterations' output, what each loop body reads, and the template
compiled with those loops rewritten into calls of the memo's loop runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOOP_RUNNER", "POSITIONAL", "LoopPlan", "memoized_template"]

LOOP_RUNNER = "_agentkit_loop"
"""The render variable that runs a rewritten loop."""

_LOOP_ATTRIBUTES = frozenset(
    {
        "index",
        "index0",
        "revindex",
        "revindex0",
        "first",
        "last",
        "length",
        "depth",
        "depth0",
        "previtem",
        "nextitem",
    }
)
_IMPURE_NAMES = frozenset({"strftime_now", "lipsum", "self", "super", LOOP_RUNNER})
_IMPURE_FILTERS = frozenset({"random"})


@dataclass(frozen=True)
class LoopPlan:
    """What one rewritten loop's body reads, from its syntax tree."""

    outer: tuple[str, ...]
    """The names whose values are passed at the loop's start (in the call's order)."""
    attributes: dict[str, tuple[str, ...]]
    """Names read only as ``name.attr``: those attributes (used where the value is a
    namespace, which changes in place)."""
    windows: dict[str, tuple[tuple[str, int], ...]]
    """Names read only as ``name[loop.<attr> + offset]``: the (attr, offset) pairs."""
    loop_attributes: tuple[str, ...]
    """The ``loop`` attributes the body reads that an iteration's position does not fix."""


POSITIONAL = frozenset({"index", "index0", "first", "depth", "depth0"})
"""Loop attributes fixed by an iteration's position (the cache compares iteration i with
iteration i): left out of its key."""


@dataclass
class _Reads:
    """What a loop body reads, collected by :func:`_scan`."""

    names: dict[str, None] = field(default_factory=dict)
    """Every name read, in order of appearance."""
    attributes: dict[str, set[str]] = field(default_factory=dict)
    other_uses: set[str] = field(default_factory=set)
    """Names read other than as ``name.attr``."""
    windows: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    not_windows: set[str] = field(default_factory=set)
    """Names read other than as ``name[loop.<attr> + offset]``."""
    loop_attributes: dict[str, None] = field(default_factory=dict)
    refused: str | None = None


def _window(node: Any) -> tuple[str, int] | None:
    """``loop.<attr>``, ``loop.<attr> + c``, ``loop.<attr> - c``, ``c + loop.<attr>``."""
    from jinja2 import nodes

    def base(n: Any) -> str | None:
        if (
            isinstance(n, nodes.Getattr)
            and isinstance(n.node, nodes.Name)
            and n.node.name == "loop"
            and n.attr in ("index", "index0")
        ):
            return str(n.attr)
        return None

    def offset(n: Any) -> int | None:
        if isinstance(n, nodes.Const) and type(n.value) is int:
            return int(n.value)
        return None

    if (attr := base(node)) is not None:
        return attr, 0
    if isinstance(node, nodes.Add | nodes.Sub):
        left, right = base(node.left), offset(node.right)
        if left is not None and right is not None:
            return left, right if isinstance(node, nodes.Add) else -right
        if isinstance(node, nodes.Add):
            left_c, right_b = offset(node.left), base(node.right)
            if left_c is not None and right_b is not None:
                return right_b, left_c
    return None


def _scan(node: Any, reads: _Reads, outer_loop: bool) -> None:
    """Collect what ``node`` reads; ``outer_loop``: ``loop`` is the rewritten loop's."""
    from jinja2 import nodes

    if reads.refused is not None:
        return
    if isinstance(node, nodes.Break | nodes.Continue) and outer_loop:
        reads.refused = "break or continue"
        return
    if isinstance(
        node,
        nodes.Include
        | nodes.Import
        | nodes.FromImport
        | nodes.Extends
        | nodes.Block
        | nodes.EvalContextModifier
        | nodes.NSRef,
    ):
        reads.refused = type(node).__name__
        return
    if isinstance(node, nodes.Filter | nodes.FilterBlock) and getattr(node, "name", None) in (
        _IMPURE_FILTERS
    ):
        reads.refused = "an impure filter"
        return
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name):
        name = node.node.name
        if name == "loop":
            if outer_loop:
                if node.attr not in _LOOP_ATTRIBUTES:
                    reads.refused = f"loop.{node.attr}"
                    return
                reads.loop_attributes[node.attr] = None
            return
        reads.names[name] = None
        reads.attributes.setdefault(name, set()).add(node.attr)
        reads.not_windows.add(name)
        return
    if isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name):
        name = node.node.name
        window = _window(node.arg) if outer_loop and name != "loop" else None
        if window is not None:
            reads.names[name] = None
            reads.other_uses.add(name)
            reads.windows.setdefault(name, set()).add(window)
            attr, _ = window
            reads.loop_attributes[attr] = None
            return
    if isinstance(node, nodes.Name):
        if node.name in _IMPURE_NAMES:
            reads.refused = f"reads {node.name}"
            return
        if node.name == "loop":
            if outer_loop:
                reads.refused = "uses loop other than through its attributes"
            return
        reads.names[node.name] = None
        reads.other_uses.add(node.name)
        reads.not_windows.add(node.name)
        return
    if isinstance(node, nodes.For):
        # Its iterable and else block see the outer loop, its body its own; its filter test
        # is read both ways (whichever ``loop`` it sees, its reads are in the key).
        _scan(node.iter, reads, outer_loop)
        for child in [*node.else_, *([node.test] if node.test is not None else [])]:
            _scan(child, reads, outer_loop)
        for child in node.body:
            _scan(child, reads, False)
        _scan(node.target, reads, outer_loop)
        return
    for child in node.iter_child_nodes():
        _scan(child, reads, outer_loop)


def _plan(loop: Any) -> LoopPlan | None:
    """The plan of a loop that can be rewritten, or ``None``."""
    from jinja2 import nodes

    if (
        loop.recursive
        or loop.else_
        or loop.test is not None
        or not isinstance(loop.target, nodes.Name)
        or loop.target.name == "loop"
        or not loop.body
    ):
        return None
    reads = _Reads()
    for child in loop.body:
        _scan(child, reads, True)
    if reads.refused is not None:
        return None
    target = loop.target.name
    outer = tuple(n for n in reads.names if n not in (target, "loop"))
    windows = {
        name: tuple(sorted(pairs))
        for name, pairs in reads.windows.items()
        if name not in reads.not_windows and name != target
    }
    attributes = {
        name: tuple(sorted(attrs))
        for name, attrs in reads.attributes.items()
        if name not in reads.other_uses
    }
    keyed = tuple(a for a in reads.loop_attributes if a not in POSITIONAL)
    return LoopPlan(outer, attributes, windows, keyed)


def memoized_template(env: Any, source: str) -> tuple[Any, list[LoopPlan]]:
    """``source`` compiled with its top-level message loops rewritten (see the module's
    docstring), and each rewritten loop's plan; a template with none gives an empty list."""
    from jinja2 import nodes

    if LOOP_RUNNER in source:  # the name is the template's own: leave it alone
        return None, []
    tree = env.parse(source)
    plans: list[LoopPlan] = []

    def rewrite(body: list[Any]) -> None:
        for index, node in enumerate(body):
            if isinstance(node, nodes.If):
                rewrite(node.body)
                for branch in node.elif_:
                    rewrite(branch.body)
                rewrite(node.else_)
            elif isinstance(node, nodes.For):
                plan = _plan(node)
                if plan is None:
                    continue
                lineno = node.lineno
                call = nodes.Call(
                    nodes.Name(LOOP_RUNNER, "load", lineno=lineno),
                    [
                        nodes.Const(len(plans), lineno=lineno),
                        node.iter,
                        *(nodes.Name(n, "load", lineno=lineno) for n in plan.outer),
                    ],
                    [],
                    None,
                    None,
                    lineno=lineno,
                )
                target: Any = node.target
                params = [
                    nodes.Name(target.name, "param", lineno=lineno),
                    nodes.Name("loop", "param", lineno=lineno),
                ]
                block = nodes.CallBlock(call, params, [], node.body, lineno=lineno)
                block.set_environment(env)
                body[index] = block
                plans.append(plan)

    rewrite(tree.body)
    if not plans:
        return None, []
    code = env.compile(tree)
    return env.template_class.from_code(env, code, env.make_globals(None), None), plans
