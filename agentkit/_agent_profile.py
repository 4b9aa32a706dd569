"""Which profile an :class:`~agentkit.Agent` uses: named, or found from the engine's model.

There is no silent default. ``profile=None`` finds the profile from the engine's model name
(``VLLMEngine.model``, ``RemoteEngine.model``) along the same path as ``agentkit run`` and
``agentkit serve`` (:func:`~agentkit.profiles.resolve_profile`: the catalog's aliases and
patterns, a local model's own chat template, else the ``generic`` fallback with a warning),
and logs what it chose. An engine with no model name (``ScriptedEngine``) needs ``profile=``.
A string is a profile name or alias, else a model id that
:func:`~agentkit.profiles.profile_for_model` recognises (``"Qwen/Qwen3-8B"``).
"""

from __future__ import annotations

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError
from agentkit.profiles import (
    NATIVE,
    Profile,
    get_profile,
    list_profiles,
    match_profile,
    resolve_profile,
)

__all__ = ["agent_profile", "engine_model"]

_log = get_logger("agentkit.agent")


def engine_model(engine: object) -> str | None:
    """The model name an engine serves, where it has one."""
    model = getattr(engine, "model", None)
    return model if isinstance(model, str) and model else None


def agent_profile(engine: object, profile: str | Profile | None) -> Profile:
    """The profile for an agent on ``engine``: ``profile`` itself, or the one its name, alias
    or model id means, or (``None``) the one the engine's model name resolves to."""
    if isinstance(profile, Profile):
        return profile
    model = engine_model(engine)
    if profile is None:
        if model is None:
            raise ConfigurationError(
                f"Agent(profile=None) finds the profile from the engine's model name, and "
                f"{type(engine).__name__} has none: pass profile= (a name such as 'qwen3', "
                f"one of: {_names()}; or profile_for_model('<model id>'))"
            )
        chosen = resolve_profile(model, None)
        _log.info(
            "profile_from_engine",
            model=model,
            profile=chosen.name,
            hint="pass Agent(profile=...) to choose another",
        )
        return chosen
    if profile.lower() == NATIVE:
        return resolve_profile(model, NATIVE)
    try:
        return get_profile(profile)
    except ConfigurationError:
        matched = match_profile(profile)
        if matched is None:
            raise ConfigurationError(
                f"unknown profile {profile!r}: it is neither a profile name or alias "
                f"({_names()}) nor a model id that profile_for_model() recognises; pass a "
                "profile name, or map the model with agentkit.profiles.register_alias"
            ) from None
    _log.info("profile_from_model_id", model=profile, profile=matched.name)
    return matched


def _names() -> str:
    return ", ".join(p.name for p in list_profiles())
