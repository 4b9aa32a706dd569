"""A profile for any model with a chat template: the model's own Jinja template renders every
prompt, and the parsers come from a matching profile or are named.

Most models on a hub have no hand-written profile. With their own template, agentkit's prompts
are what the model was trained on by construction; the prompt builder renders the whole
conversation each turn, checks that the last prompt's render is a prefix of the new one, and
tokenizes only the rest (the template's own defaults decide what history keeps; where they
rewrite it, the prompt is rebuilt and the reason reported, as ``check-replay`` reports it).
The render reuses what the template's message loops wrote for the earlier messages wherever
the loop body's syntax proves it unchanged (:mod:`agentkit.profiles._template_memo`), so a
turn costs little more than the new messages' share.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError
from agentkit.profiles._catalog import (
    FALLBACK_PROFILE,
    get_profile,
    match_profile,
    profile_for_model,
)
from agentkit.profiles._hf_template import HFChatTemplate, special_tokens
from agentkit.profiles._profile import Profile

__all__ = ["NATIVE", "has_chat_template", "native_profile", "resolve_profile"]

NATIVE = "native"
"""The profile name that asks for the model's own chat template."""

_log = get_logger("agentkit.profiles")


def has_chat_template(source: str | Path) -> bool:
    """Whether ``source`` (a model directory) carries a chat template of its own."""
    try:
        HFChatTemplate(source, profile=NATIVE)._read()
    except ConfigurationError:
        return False
    return True


def native_profile(
    source: str | Path,
    *,
    base: Profile | None = None,
    reasoning: str | None = None,
    tool_format: str | None = None,
) -> Profile:
    """The profile of the model at ``source`` rendered with its own chat template.

    ``reasoning`` and ``tool_format`` name the parsers (``--reasoning-parser`` /
    ``--tool-parser``); those not given come from ``base`` (the profile the model's name
    matches), else from the ``generic`` profile (``<think>`` reasoning, Hermes JSON calls).
    The stop strings are the tokenizer config's ``eos_token`` and ``base``'s.
    """
    path = Path(source)
    folder = path if path.is_dir() else path.parent
    name = f"{NATIVE}:{folder.name}"
    template = HFChatTemplate(path, profile=name)
    template._read()  # fail now, with the paths it looked at, when there is none
    parsers = base or get_profile(FALLBACK_PROFILE)
    eos = special_tokens(folder / "tokenizer_config.json").get("eos_token")
    stops = tuple(dict.fromkeys([*([eos] if eos else []), *(base.stop if base else ())]))
    return Profile(
        name=name,
        description=f"the chat template of {path} (parsers of {parsers.name!r})",
        template=template,
        reasoning=reasoning if reasoning is not None else parsers.reasoning,
        tool_format=tool_format if tool_format is not None else parsers.tool_format,
        stop=stops or parsers.stop,
        calls_in_reasoning=parsers.calls_in_reasoning,
        special_tokens=tuple(dict.fromkeys([*stops, *parsers.special_tokens])),
        replay="template_native",
        truncation=parsers.truncation,
        context_window=base.context_window if base else None,
        tokenizer=str(folder),
        thinking_switch=True,
        reference=f"the model's own chat template ({path})",
    )


def resolve_profile(
    model: str | None,
    profile: str | None,
    *,
    chat_template: str | Path | None = None,
    reasoning: str | None = None,
    tool_format: str | None = None,
) -> Profile:
    """The profile ``run`` and ``serve`` use for ``model``.

    ``chat_template`` (a model directory, a ``tokenizer_config.json`` or a ``.jinja`` file):
    render with that template, with the parsers of ``profile`` or of the profile the model's
    name matches. ``profile="native"``: the model's own chat template (``model`` is its
    directory). Another name: that profile. None: the profile the model's name matches; a
    model that matches none but has a chat template of its own is rendered with it (not with
    the generic ChatML fallback). ``reasoning`` / ``tool_format`` replace the parsers.
    """
    named = profile is not None and profile.lower() == NATIVE
    base = get_profile(profile) if profile is not None and not named else None
    if base is None and model is not None:
        base = match_profile(model)
    source: str | Path | None = chat_template
    if source is None and (named or base is None) and model is not None:
        if has_chat_template(model):
            source = model
        elif named:
            raise ConfigurationError(
                "--profile native needs a model directory with a chat template "
                f"(chat_template.jinja or tokenizer_config.json): {model}"
            )
    if source is not None:
        chosen = native_profile(source, base=base, reasoning=reasoning, tool_format=tool_format)
        _log.info("rendering with the model's own chat template", profile=chosen.name)
        return chosen
    if named:
        raise ConfigurationError("--profile native needs --model (the model's directory)")
    chosen = base if base is not None else profile_for_model(model or "")
    updates = {
        k: v for k, v in (("reasoning", reasoning), ("tool_format", tool_format)) if v is not None
    }
    return dataclasses.replace(chosen, **updates) if updates else chosen  # type: ignore[arg-type]
