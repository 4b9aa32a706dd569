"""Typed final answers: ``Agent(output_type=T)`` turns the model's last answer into a ``T``.

``T`` is anything pydantic's :class:`~pydantic.TypeAdapter` takes: a pydantic model, a
dataclass, a ``TypedDict`` or a plain type (``int``, ``list[str]``...). The agent

* tells the model, in its system prompt, to answer with one JSON value matching ``T``'s JSON
  schema (:meth:`OutputSchema.instructions`);
* on engines that honour structured outputs, constrains the answer to that schema after the
  model's reasoning, with tool calls in the profile's own format still allowed (the grammar is
  built in :mod:`agentkit.parsing._constraints`, the one builder that ``tool_choice`` uses);
* parses the answer of the turn that calls no tools (:meth:`OutputSchema.parse`): the JSON
  itself, or one fenced ```` ```json ```` block, with surrounding whitespace, nothing looser;
* when it does not validate, shows the model what was wrong as a user message and lets it
  answer again, up to ``output_retries`` times within ``max_turns``, then raises
  :class:`~agentkit.errors.OutputValidationError` with the transcript.

``T = str`` (the default) is plain text: no instructions, no constraint, no parsing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generic

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypeVar

from agentkit._tool_choice import tool_choice_options
from agentkit.engine import Engine, RemoteEngine, VLLMEngine
from agentkit.errors import ConfigurationError, OutputValidationError
from agentkit.profiles import Profile
from agentkit.transcript import Message, TextBlock

__all__ = ["InvalidAnswer", "OutputSchema", "OutputT", "supports_structured_outputs"]

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's ``output``: an agent's ``output_type``, ``str`` when it has none."""

_FENCE = re.compile(r"```(?:json)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)


class InvalidAnswer(Exception):
    """An answer that is not a valid ``T``; ``problems`` say why, one line each."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class OutputSchema(Generic[OutputT]):
    """How a final answer becomes a ``T``: its JSON schema, the instructions and retry
    messages the model sees, and the parser.

    Raises :class:`~agentkit.errors.ConfigurationError` for a type pydantic cannot build a
    JSON schema for (an arbitrary class, a callable).
    """

    def __init__(self, output_type: type[OutputT]) -> None:
        self.output_type = output_type
        self.name = _type_name(output_type)
        try:
            self.adapter: TypeAdapter[OutputT] = TypeAdapter(output_type)
            self.json_schema: dict[str, Any] = self.adapter.json_schema()
        except Exception as error:  # pydantic raises several kinds for an unusable type
            raise ConfigurationError(
                f"output_type {self.name} has no JSON schema: use a pydantic model, a "
                f"dataclass, a TypedDict or a plain type ({error})"
            ) from error

    def instructions(self) -> str:
        """What the system prompt tells the model about its final answer."""
        return (
            "When you give your final answer, reply with one JSON value that matches this "
            "JSON schema, and nothing else (no prose, no code fence):\n"
            + json.dumps(self.json_schema, ensure_ascii=False)
        )

    def parse(self, text: str) -> OutputT:
        """The answer in ``text`` as a ``T``: ``text`` is the JSON value, or one fenced
        ```` ```json ```` (or ```` ``` ````) block, either with whitespace around it.
        Validation is pydantic's for ``T`` in JSON mode (``TypeAdapter.validate_json``).

        Raises :class:`InvalidAnswer` naming every problem.
        """
        payload = text.strip()
        fenced = _FENCE.fullmatch(payload)
        if fenced is not None:
            payload = fenced.group("body").strip()
        if not payload:
            raise InvalidAnswer(("the answer is empty",))
        try:
            return self.adapter.validate_json(payload)
        except ValidationError as error:
            raise InvalidAnswer(tuple(_problem(e) for e in error.errors())) from error

    def retry_message(self, problem: InvalidAnswer) -> Message:
        """The user message that shows the model why its answer was refused."""
        lines = "\n".join(f"- {p}" for p in problem.problems)
        text = (
            f"Your final answer is not a valid {self.name}:\n{lines}\n"
            "Answer again with only one JSON value that matches this JSON schema:\n"
            + json.dumps(self.json_schema, ensure_ascii=False)
        )
        return Message(role="user", content=[TextBlock(text=text)])


@dataclass(frozen=True, slots=True)
class OutputRetry:
    """The answer failed validation and the run goes on: append ``message`` and ask again."""

    message: Message


class OutputChecker(Generic[OutputT]):
    """One run's final answers: each one validated, failures counted against ``retries``.

    ``schema=None`` is plain text: every answer is accepted as it is.
    """

    def __init__(self, schema: OutputSchema[OutputT] | None, *, retries: int) -> None:
        if retries < 0:
            raise ValueError("output_retries must be at least 0")
        self.schema = schema
        self.retries = retries
        self.failures = 0

    def check(self, text: str, *, last_turn: bool) -> OutputT | OutputRetry:
        """The answer ``text`` as the run's output, or the retry to send the model.

        Raises :class:`~agentkit.errors.OutputValidationError` when the answer fails and no
        retry is left (``retries`` spent, or the run's last turn).
        """
        if self.schema is None:
            return text  # type: ignore[return-value]  # OutputT is str without a schema
        try:
            return self.schema.parse(text)
        except InvalidAnswer as problem:
            self.failures += 1
            if self.failures > self.retries or last_turn:
                raise OutputValidationError(
                    self.schema.name,
                    raw=text,
                    problems=problem.problems,
                    attempts=self.failures,
                ) from problem
            return OutputRetry(self.schema.retry_message(problem))


def output_schema(output_type: type[OutputT] | None) -> OutputSchema[OutputT] | None:
    """The schema of a typed output, or ``None`` for plain text (no type, or ``str``)."""
    if output_type is None or output_type is str:
        return None
    return OutputSchema(output_type)


def system_prompt(system: str | None, schema: OutputSchema[Any] | None) -> str | None:
    """The agent's system prompt with the answer instructions appended."""
    if schema is None:
        return system
    if not system:
        return schema.instructions()
    return f"{system}\n\n{schema.instructions()}"


def supports_structured_outputs(engine: Engine) -> bool:
    """Whether ``engine`` applies vLLM structured outputs (``request.extra``'s
    ``structured_outputs``) to what it generates.

    An engine says so with a boolean ``supports_structured_outputs`` attribute; without one,
    :class:`~agentkit.engine.VLLMEngine` and :class:`~agentkit.engine.RemoteEngine` do and
    every other engine (scripted, user-written) is assumed not to.
    """
    declared = getattr(engine, "supports_structured_outputs", None)
    if isinstance(declared, bool):
        return declared
    return isinstance(engine, VLLMEngine | RemoteEngine)


def answer_constraint(
    schema: OutputSchema[Any] | None,
    constrain: bool | None,
    *,
    engine: Engine,
    profile: Profile,
    tools: dict[str, dict[str, Any]],
    thinking: bool,
) -> dict[str, Any] | None:
    """The JSON schema to constrain final answers to, or ``None`` to only validate them.

    ``constrain=None`` constrains where it can: a typed output, an engine that supports
    structured outputs, and a profile whose call format has a grammar (or no tools to call).
    ``True`` insists, and is a :class:`~agentkit.errors.ConfigurationError` where it cannot.
    """
    if constrain is False:
        return None
    if schema is None:
        if constrain:
            raise ConfigurationError("constrain_output=True needs an output_type other than str")
        return None
    if constrain is None and not supports_structured_outputs(engine):
        return None
    try:
        tool_choice_options(profile, "auto", tools, thinking=thinking, answer=schema.json_schema)
    except ConfigurationError:
        if constrain:
            raise
        return None
    return schema.json_schema


def _type_name(output_type: object) -> str:
    name = getattr(output_type, "__name__", None)
    if isinstance(name, str) and isinstance(output_type, type):
        return name
    return str(output_type).replace("typing.", "")


def _problem(error: Any) -> str:
    """One pydantic error as a line the model can act on: where, what, and what it got."""
    where = ".".join(str(part) for part in error.get("loc", ())) or "the answer"
    line = f"{where}: {error.get('msg', 'invalid')}"
    if error.get("type") not in ("json_invalid", "missing") and "input" in error:
        got = json.dumps(error["input"], ensure_ascii=False, default=str)
        if len(got) > 80:
            got = got[:77] + "..."
        line += f" (got {got})"
    return line
