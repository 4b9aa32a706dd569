"""Model profiles: per-family parsers, prompt templates and policies."""

from agentkit.profiles import _builtin  # noqa: F401 - registers the shipped profiles
from agentkit.profiles._catalog import FALLBACK_PROFILE as FALLBACK_PROFILE
from agentkit.profiles._catalog import get_profile as get_profile
from agentkit.profiles._catalog import list_profiles as list_profiles
from agentkit.profiles._catalog import load_aliases as load_aliases
from agentkit.profiles._catalog import match_profile as match_profile
from agentkit.profiles._catalog import profile_for_model as profile_for_model
from agentkit.profiles._catalog import register_alias as register_alias
from agentkit.profiles._catalog import register_profile as register_profile
from agentkit.profiles._chatml import ChatMLTemplate as ChatMLTemplate
from agentkit.profiles._hf_template import HFChatTemplate as HFChatTemplate
from agentkit.profiles._hf_template import chat_messages as chat_messages
from agentkit.profiles._native import NATIVE as NATIVE
from agentkit.profiles._native import has_chat_template as has_chat_template
from agentkit.profiles._native import native_profile as native_profile
from agentkit.profiles._native import resolve_profile as resolve_profile
from agentkit.profiles._profile import ChatTemplate as ChatTemplate
from agentkit.profiles._profile import IncrementalTemplate as IncrementalTemplate
from agentkit.profiles._profile import Profile as Profile
from agentkit.profiles._profile import ToolSpec as ToolSpec
from agentkit.profiles._replay import TOOL_OUTPUT_REMOVED as TOOL_OUTPUT_REMOVED
from agentkit.profiles._replay import ReplayPolicy as ReplayPolicy
from agentkit.profiles._replay import dropped_reasoning as dropped_reasoning
from agentkit.profiles._replay import has_reasoning as has_reasoning
from agentkit.profiles._replay import replay_view as replay_view

__all__ = [
    "FALLBACK_PROFILE",
    "NATIVE",
    "TOOL_OUTPUT_REMOVED",
    "ChatMLTemplate",
    "ChatTemplate",
    "HFChatTemplate",
    "IncrementalTemplate",
    "Profile",
    "ReplayPolicy",
    "ToolSpec",
    "chat_messages",
    "dropped_reasoning",
    "get_profile",
    "has_chat_template",
    "has_reasoning",
    "list_profiles",
    "load_aliases",
    "match_profile",
    "native_profile",
    "profile_for_model",
    "register_alias",
    "register_profile",
    "replay_view",
    "resolve_profile",
]
