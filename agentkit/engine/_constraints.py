"""Output constraints on a request, read back and checked by the test engines.

A real engine enforces ``extra["structured_outputs"]`` (vLLM's keys: ``json``, ``regex``,
``choice``, ``grammar``, ``structural_tag``, ``json_object``) and ``extra["bad_words"]`` while
it samples. A scripted or function engine cannot steer its output, so instead of silently
ignoring them it records them (:class:`OutputConstraints`) and checks the output it is about
to stream against every one it can decide without a grammar engine, failing with a
:class:`ConstraintViolationError` that names the constraint. A script that a constrained model
could never produce is a broken test, not a passing one.

What is checked:

* ``bad_words``: no phrase occurs in the output (vLLM bans the phrase's token sequence; a
  substring is the text-level equivalent).
* ``json``: the output is JSON and satisfies the schema (``jsonschema``); ``json_object``: it
  is a JSON object.
* ``regex``: the whole output matches, with Python's ``re`` (the common regex subset reads the
  same there; a pattern ``re`` cannot compile is recorded only).
* ``choice``: the output is exactly one of the choices.
* ``structural_tag``: a necessary condition only. Every constant the tag makes mandatory
  (constant strings, a tag's begin and end, one of the tags of an ``at_least_one`` group, in
  order) must occur in the output in that order. What lies between them (JSON arguments,
  regexes, free text) is not checked: that needs the grammar engine.
* ``grammar``: recorded only (an EBNF/Lark grammar needs a grammar engine).

An output that did not finish normally (``finish_reason`` other than ``"stop"``, or cut by an
injected failure) may stop mid-constraint, as a real engine's would: only ``bad_words`` is
checked then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentkit.errors import ConfigurationError, EngineError

__all__ = ["ConstraintViolationError", "OutputConstraints"]


class ConstraintViolationError(EngineError):
    """A test engine was about to stream output that the request's constraints forbid.

    ``constraint`` names it (``"bad_words"``, ``"structured_outputs.json"``, ...); ``output``
    is the offending text. Fix the script (or the function), or build the engine with
    ``check_constraints=False`` to simulate an engine that ignores the constraint.
    """

    def __init__(
        self, message: str, *, constraint: str, output: str, request_id: str | None = None
    ) -> None:
        super().__init__(f"{constraint}: {message}", request_id=request_id)
        self.constraint = constraint
        self.output = output


@dataclass(frozen=True, slots=True)
class OutputConstraints:
    """The output constraints a request carried, typed for assertions.

    Each field is ``None`` (or empty) when the request did not set it. ``structural_tag`` is
    the parsed document (vLLM takes it as a JSON string).
    """

    json_schema: Mapping[str, Any] | None = None
    """``structured_outputs["json"]``: the JSON schema the whole output must satisfy."""
    json_object: bool = False
    """``structured_outputs["json_object"]``: the output must be a JSON object."""
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    grammar: str | None = None
    structural_tag: Mapping[str, Any] | None = None
    bad_words: tuple[str, ...] = ()

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> OutputConstraints:
        """Read the constraints from a request's ``extra`` options."""
        outputs = extra.get("structured_outputs") or {}
        if not isinstance(outputs, Mapping):
            outputs = {}
        schema = _document(outputs.get("json"), "json")
        tag = _document(outputs.get("structural_tag"), "structural_tag")
        choice = outputs.get("choice")
        return cls(
            json_schema=schema if isinstance(schema, Mapping) else None,
            json_object=bool(outputs.get("json_object")),
            regex=outputs.get("regex"),
            choice=tuple(choice) if choice is not None else None,
            grammar=outputs.get("grammar"),
            structural_tag=tag if isinstance(tag, Mapping) else None,
            bad_words=tuple(extra.get("bad_words") or ()),
        )

    @property
    def names(self) -> tuple[str, ...]:
        """The constraints present, named as in the request (``"structured_outputs.regex"``,
        ``"bad_words"``...)."""
        present = {
            "structured_outputs.json": self.json_schema is not None,
            "structured_outputs.json_object": self.json_object,
            "structured_outputs.regex": self.regex is not None,
            "structured_outputs.choice": self.choice is not None,
            "structured_outputs.grammar": self.grammar is not None,
            "structured_outputs.structural_tag": self.structural_tag is not None,
            "bad_words": bool(self.bad_words),
        }
        return tuple(name for name, here in present.items() if here)

    def __bool__(self) -> bool:
        return bool(self.names)

    def check(self, output: str, *, complete: bool = True, request_id: str | None = None) -> None:
        """Raise :class:`ConstraintViolationError` if ``output`` breaks a checkable constraint.

        ``complete=False`` (a truncated or failed output) checks only ``bad_words``.
        """

        def fail(constraint: str, message: str) -> ConstraintViolationError:
            return ConstraintViolationError(
                message, constraint=constraint, output=output, request_id=request_id
            )

        for phrase in self.bad_words:
            if phrase and phrase in output:
                at = output.index(phrase)
                raise fail("bad_words", f"the output contains {phrase!r} (at offset {at})")
        if not complete:
            return
        if self.json_schema is not None or self.json_object:
            _check_json(output, self.json_schema, self.json_object, fail)
        if self.regex is not None:
            try:
                pattern = re.compile(self.regex)
            except re.error:
                pattern = None
            if pattern is not None and pattern.fullmatch(output) is None:
                raise fail("structured_outputs.regex", f"the output does not match {self.regex!r}")
        if self.choice is not None and output not in self.choice:
            raise fail("structured_outputs.choice", f"the output is not one of {self.choice!r}")
        if self.structural_tag is not None:
            missing = _missing_literal(output, _mandatory_literals(self.structural_tag))
            if missing is not None:
                wanted, offset = missing
                what = repr(wanted[0]) if len(wanted) == 1 else f"any of {list(wanted)!r}"
                raise fail(
                    "structured_outputs.structural_tag",
                    f"the tag requires {what} after offset {offset}, and the output has none",
                )


def _document(value: object, key: str) -> object:
    """A JSON document given as text (as vLLM takes it) parsed; anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as error:
        raise ConfigurationError(
            f"structured_outputs.{key} is not a JSON document ({error}); no engine could use it"
        ) from None


def _check_json(
    output: str,
    schema: Mapping[str, Any] | None,
    object_only: bool,
    fail: Callable[[str, str], ConstraintViolationError],
) -> None:
    name = "structured_outputs.json" if schema is not None else "structured_outputs.json_object"
    try:
        value = json.loads(output)
    except ValueError as error:
        raise fail(name, f"the output is not JSON ({error})") from None
    if object_only and not isinstance(value, dict):
        raise fail(name, "the output is not a JSON object")
    if schema is None:
        return
    import jsonschema  # the tool registry loads it anyway; imported where it is needed

    validator = jsonschema.validators.validator_for(schema)(schema)
    failure = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if failure is not None:
        where = "/".join(str(p) for p in failure.absolute_path) or "the top level"
        raise fail(name, f"the output fails the schema at {where}: {failure.message}")


Step = tuple[str, ...]
"""One mandatory piece of a structural tag: the output must contain one of these strings."""


def _mandatory_literals(document: Mapping[str, Any]) -> list[Step]:
    """The constants an xgrammar structural tag makes mandatory, in order. The legacy form
    (``structures`` + ``triggers``) makes nothing mandatory."""
    node = document.get("format") if document.get("type") == "structural_tag" else None
    return _steps(node) if isinstance(node, Mapping) else []


def _steps(node: Mapping[str, Any]) -> list[Step]:
    kind = node.get("type")
    if kind == "const_string":
        value = node.get("value") or ""
        return [(value,)] if value else []
    if kind == "sequence":
        return [step for element in node.get("elements", ()) for step in _steps(element)]
    if kind == "tag":
        content = node.get("content")
        inner = _steps(content) if isinstance(content, Mapping) else []
        return _literal(node.get("begin")) + inner + _literal(node.get("end"))
    if kind == "or":
        return _one_of([_steps(e) for e in node.get("elements", ())], first=True)
    if kind == "tags_with_separator" and node.get("at_least_one"):
        tags = [t for t in node.get("tags", ()) if isinstance(t, Mapping)]
        begins = _one_of([_literal(t.get("begin")) for t in tags], first=True)
        ends = _one_of([_literal(t.get("end")) for t in tags], first=False)
        return begins + ends
    if kind == "triggered_tags" and node.get("at_least_one"):
        return _one_of([_literal(t) for t in node.get("triggers", ())], first=True)
    # optional, any_text, regex, json_schema, grammar and forms this reader does not know:
    # nothing is certain to appear.
    return []


def _literal(value: object) -> list[Step]:
    return [(value,)] if isinstance(value, str) and value else []


def _one_of(alternatives: Sequence[list[Step]], *, first: bool) -> list[Step]:
    """One step that one of the alternatives' first (or last) mandatory strings meets; none
    when some alternative has no mandatory string."""
    if not alternatives or any(not steps for steps in alternatives):
        return []
    return [tuple(s for steps in alternatives for s in (steps[0] if first else steps[-1]))]


def _missing_literal(output: str, steps: Sequence[Step]) -> tuple[Step, int] | None:
    """The first step the output does not meet, and where the search for it began.

    Taking, at each step, the alternative that ends earliest leaves the most room for the
    rest, so this finds an order of occurrences whenever one exists.
    """
    position = 0
    for step in steps:
        ends = [found + len(text) for text in step if (found := output.find(text, position)) != -1]
        if not ends:
            return step, position
        position = min(ends)
    return None
