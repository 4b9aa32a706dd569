"""The catalog of model profiles: one place to add a model family."""

from __future__ import annotations

from agentkit.errors import ConfigurationError
from agentkit.parsing import get_tool_syntax
from agentkit.profiles._chatml import (
    IM_END,
    ChatMLTemplate,
    hermes_tools_section,
    qwen3_coder_tools_section,
)
from agentkit.profiles._profile import Profile

__all__ = ["get_profile", "list_profiles", "register_profile"]

_PROFILES: dict[str, Profile] = {}
_ALIASES: dict[str, str] = {}


def register_profile(profile: Profile, *, replace: bool = False) -> None:
    """Add a profile (and its aliases) to the catalog."""
    names = (profile.name, *profile.aliases)
    if not replace:
        taken = [n for n in names if n.lower() in _ALIASES]
        if taken:
            raise ConfigurationError(f"profile name already registered: {', '.join(taken)}")
    _PROFILES[profile.name] = profile
    for name in names:
        _ALIASES[name.lower()] = profile.name


def get_profile(name: str | Profile) -> Profile:
    """Look a profile up by name or alias (case-insensitive); a Profile passes through."""
    if isinstance(name, Profile):
        return name
    key = _ALIASES.get(name.lower())
    if key is None:
        known = ", ".join(sorted(_PROFILES))
        raise ConfigurationError(f"unknown profile {name!r}; known profiles: {known}")
    return _PROFILES[key]


def list_profiles() -> list[Profile]:
    return [_PROFILES[name] for name in sorted(_PROFILES)]


register_profile(
    Profile(
        name="qwen3",
        description="Qwen3 (thinking and instruct): <think> reasoning, Hermes JSON tool calls.",
        template=ChatMLTemplate(get_tool_syntax("hermes"), hermes_tools_section),
        reasoning="think",
        tool_format="hermes",
        stop=(IM_END,),
        aliases=("qwen3-thinking", "qwen3-instruct", "Qwen/Qwen3"),
    )
)
register_profile(
    Profile(
        name="qwen3-coder",
        description="Qwen3-Coder: <think> reasoning, XML <function=...> tool calls.",
        template=ChatMLTemplate(
            get_tool_syntax("qwen3_coder"),
            qwen3_coder_tools_section,
            default_tools_system=(
                "You are Qwen, a helpful AI assistant that can interact with a computer to "
                "solve tasks."
            ),
            call_gap="\n\n",
            response_end="\n",
        ),
        reasoning="think",
        tool_format="qwen3_coder",
        stop=(IM_END,),
        aliases=("qwen3_coder", "Qwen/Qwen3-Coder"),
    )
)
register_profile(
    Profile(
        name="smollm2",
        description="SmolLM2 Instruct (ChatML, no reasoning): Hermes JSON tool calls, prompted.",
        template=ChatMLTemplate(
            get_tool_syntax("hermes"),
            hermes_tools_section,
            default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        ),
        reasoning=None,
        tool_format="hermes",
        stop=(IM_END,),
        aliases=("smollm2-instruct", "HuggingFaceTB/SmolLM2"),
    )
)
