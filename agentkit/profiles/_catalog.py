"""The catalog of model profiles: the registry (the shipped profiles are in ``_builtin.py``).

Profiles are looked up by name or alias (:func:`get_profile`, strict), or by a served model
name (:func:`profile_for_model`): exact aliases first, then glob patterns, most specific first
(``*qwen3-coder*`` before ``*qwen3*``), then the ``generic`` fallback with a logged warning.
Aliases are extendable in code (:func:`register_alias`) and from a TOML or JSON file
(:func:`load_aliases`; the file named by ``$AGENTKIT_PROFILE_ALIASES`` is read on first use).
"""

from __future__ import annotations

import fnmatch
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError
from agentkit.profiles._profile import Profile

__all__ = [
    "ALIASES_ENV",
    "FALLBACK_PROFILE",
    "get_profile",
    "list_profiles",
    "load_aliases",
    "match_profile",
    "profile_for_model",
    "register_alias",
    "register_profile",
]

ALIASES_ENV = "AGENTKIT_PROFILE_ALIASES"
"""Environment variable naming a TOML or JSON alias file read on the first lookup."""
FALLBACK_PROFILE = "generic"

_log = get_logger("agentkit.profiles")

_PROFILES: dict[str, Profile] = {}
_NAMES: dict[str, str] = {}
"""Lower-cased profile name or exact alias -> profile name."""
_PATTERNS: dict[str, str] = {}
"""Lower-cased glob pattern -> profile name."""
_env_loaded = False


def register_profile(profile: Profile, *, replace: bool = False) -> None:
    """Add a profile (and its aliases) to the catalog."""
    names = (profile.name, *profile.aliases)
    if not replace:
        taken = [n for n in names if n.lower() in _NAMES]
        if taken:
            raise ConfigurationError(f"profile name already registered: {', '.join(taken)}")
    _PROFILES[profile.name] = profile
    for name in names:
        _NAMES[name.lower()] = profile.name


def register_alias(alias: str, profile: str) -> None:
    """Map a served model name, or a glob pattern (``org/my-model-*``), to a profile."""
    target = get_profile(profile).name
    key = alias.lower()
    if any(c in alias for c in "*?["):
        _PATTERNS[key] = target
    else:
        _NAMES[key] = target


def load_aliases(path: str | Path) -> dict[str, str]:
    """Register the aliases of a TOML or JSON file and return them.

    The file maps names or patterns to profiles, at the top level or under ``aliases``::

        [aliases]
        "my-org/coder-prod" = "qwen3-coder"
        "*-r1-distill-*" = "deepseek-r1"
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        data: Any = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read the profile alias file {file}: {error}") from error
    table = data.get("aliases", data) if isinstance(data, dict) else None
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    ):
        raise ConfigurationError(
            f"{file}: expected a table of model name -> profile name (optionally under 'aliases')"
        )
    for alias, profile in table.items():
        try:
            register_alias(alias, profile)
        except ConfigurationError as error:
            raise ConfigurationError(f"{file}: alias {alias!r}: {error}") from error
    return dict(table)


def get_profile(name: str | Profile) -> Profile:
    """Look a profile up by name or alias (case-insensitive); a Profile passes through."""
    if isinstance(name, Profile):
        return name
    _load_env_aliases()
    key = _NAMES.get(name.lower())
    if key is None:
        known = ", ".join(sorted(_PROFILES))
        raise ConfigurationError(f"unknown profile {name!r}; known profiles: {known}")
    return _PROFILES[key]


def profile_for_model(model: str) -> Profile:
    """The profile for a served model name or a local model path.

    Exact names and aliases first, then glob patterns (the longest matching pattern wins),
    tried on the whole name and on its last path component; an unknown model gets the
    ``generic`` profile, with a warning that names it.
    """
    matched = match_profile(model)
    if matched is not None:
        return matched
    fallback = _PROFILES[FALLBACK_PROFILE]
    _log.warning(
        "no profile matches the model; using the fallback",
        model=model,
        profile=fallback.name,
        fallback=fallback.description,
        hint="pass profile=... or add an alias (register_alias, $AGENTKIT_PROFILE_ALIASES)",
    )
    return fallback


def match_profile(model: str) -> Profile | None:
    """The profile a served model name or local path matches (as :func:`profile_for_model`
    finds it), or ``None``: no fallback, no warning."""
    _load_env_aliases()
    candidates = [model.lower()]
    base = model.rstrip("/").rsplit("/", 1)[-1].lower()
    if base != candidates[0]:
        candidates.append(base)
    for candidate in candidates:
        if candidate in _NAMES:
            return _PROFILES[_NAMES[candidate]]
    for pattern in sorted(_PATTERNS, key=len, reverse=True):
        if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            return _PROFILES[_PATTERNS[pattern]]
    return None


def list_profiles() -> list[Profile]:
    return [_PROFILES[name] for name in sorted(_PROFILES)]


def _load_env_aliases() -> None:
    global _env_loaded
    if _env_loaded:
        return
    _env_loaded = True
    path = os.environ.get(ALIASES_ENV)
    if path:
        load_aliases(path)
