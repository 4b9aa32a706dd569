"""``tool_choice``: whether the model may, must or must not call tools, or which one.

``"auto"`` leaves it to the model. ``"required"`` and a tool's name constrain the output with
a grammar of the profile's own call format (vLLM structured outputs), so even a small model
emits a valid call that the format's parser reads. ``"none"`` asks the engine never to emit
the format's call markers (``bad_words``) and parses the turn without a tool syntax, so
anything call-like stays text and nothing is dispatched. Tools stay in the prompt in every
case: the prompt, and with it the prefix cache, does not depend on the choice.

The same grammar carries a typed final answer (``Agent(output_type=T)``): under ``"auto"``
the model may, after its reasoning, either call tools in its format or answer with JSON that
matches ``T``'s schema; under ``"none"`` only answer.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.parsing import (
    ToolSyntax,
    get_reasoning_syntax,
    get_tool_syntax,
    tool_call_constraint,
)
from agentkit.profiles import Profile

__all__ = ["ToolChoice", "tool_choice_options", "validate_tool_choice"]

ToolChoice = str
"""``"auto"``, ``"required"``, ``"none"``, or the name of one of the agent's tools."""

_MODES = frozenset({"auto", "required", "none"})


def validate_tool_choice(choice: ToolChoice, tool_names: Collection[str]) -> None:
    """A :class:`ConfigurationError` unless ``choice`` is a mode or one of ``tool_names``."""
    if choice in _MODES:
        if choice == "required" and not tool_names:
            raise ConfigurationError("tool_choice='required' needs at least one tool")
        return
    if choice not in tool_names:
        known = ", ".join(sorted(tool_names)) or "none"
        raise ConfigurationError(
            f"tool_choice {choice!r} is neither 'auto', 'required', 'none' nor a tool's name "
            f"(tools: {known})"
        )


def tool_choice_options(
    profile: Profile,
    choice: ToolChoice,
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    thinking: bool = True,
    answer: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request options (``GenerationRequest.extra``) that enforce ``choice``.

    ``thinking=False`` (the request turned thinking off, where the profile has a switch): the
    prompt closed the reasoning block, so a grammar does not make the model close one first.

    ``answer``: the JSON schema a final answer must match (``Agent(output_type=T)`` with its
    constraint on). Under ``"auto"`` the grammar then admits, after the reasoning, either
    calls in the profile's format or that JSON answer; under ``"none"`` only the answer. A
    turn that must call a tool (``"required"``, a name) ignores it.
    """
    if choice == "auto" and answer is None:
        return {}
    if choice in ("auto", "none") and answer is not None:
        # Calls stay open beside the answer only where the model can make one.
        syntax = None
        if choice == "auto" and profile.tool_format is not None and schemas:
            syntax = get_tool_syntax(profile.tool_format)
        options = _structural_tag(
            profile, syntax, schemas if syntax else {}, name=None, thinking=thinking, answer=answer
        )
        if choice == "none":
            options.update(tool_choice_options(profile, "none", schemas))
        return options
    if profile.tool_format is None:
        raise ConfigurationError(
            f"tool_choice={choice!r} needs a tool-call format, and profile "
            f"{profile.name!r} has none"
        )
    syntax = get_tool_syntax(profile.tool_format)
    if choice == "none":
        markers = list(syntax.start_markers)
        return {"bad_words": markers} if markers else {}
    return _structural_tag(
        profile,
        syntax,
        schemas,
        name=None if choice == "required" else choice,
        thinking=thinking,
        answer=None,
    )


def _structural_tag(
    profile: Profile,
    syntax: ToolSyntax | None,
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    name: str | None,
    thinking: bool,
    answer: Mapping[str, Any] | None,
) -> dict[str, Any]:
    reasoning = get_reasoning_syntax(profile.reasoning) if profile.reasoning else None
    if (
        reasoning is not None
        and reasoning.starts_inside
        and not thinking
        and profile.thinking_switch
    ):
        reasoning = dataclasses.replace(reasoning, starts_inside=False)
    document = tool_call_constraint(syntax, schemas, name=name, reasoning=reasoning, answer=answer)
    return {"structured_outputs": {"structural_tag": json.dumps(document, ensure_ascii=False)}}
