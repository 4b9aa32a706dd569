"""Model profiles: per-family parsers, prompt templates and policies."""

from agentkit.profiles._catalog import get_profile as get_profile
from agentkit.profiles._catalog import list_profiles as list_profiles
from agentkit.profiles._catalog import register_profile as register_profile
from agentkit.profiles._chatml import ChatMLTemplate as ChatMLTemplate
from agentkit.profiles._profile import ChatTemplate as ChatTemplate
from agentkit.profiles._profile import IncrementalTemplate as IncrementalTemplate
from agentkit.profiles._profile import Profile as Profile
from agentkit.profiles._profile import ToolSpec as ToolSpec

__all__ = [
    "ChatMLTemplate",
    "ChatTemplate",
    "IncrementalTemplate",
    "Profile",
    "ToolSpec",
    "get_profile",
    "list_profiles",
    "register_profile",
]
