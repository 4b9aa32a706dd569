"""Noticing a profile whose tool-call format does not match the model's.

With the wrong profile, a model's tool calls are never parsed: they arrive as text, no tool
runs, and the run ends with the call markup as its "answer". Nothing fails, so nothing says
why. The watch looks at a turn that was offered tools and produced no parsed call: if its
text carries another format's call (a marker the profile's parser does not use, or a bare
``{"name": ..., "arguments": ...}`` naming one of the tools), it logs one warning per agent
naming the profile and the profiles whose format the text matches. It costs a few substring
and regex searches of that turn's text, once per turn, and nothing after it has warned.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from agentkit._logging import get_logger
from agentkit.profiles import Profile, list_profiles
from agentkit.transcript import Message, TextBlock

__all__ = ["ForeignCall", "FormatWatch", "foreign_call"]

_log = get_logger("agentkit.agent")

_BARE_JSON = re.compile(r'\{\s*"name"\s*:\s*"([^"]+)"\s*,\s*"(?:arguments|parameters)"\s*:')


@dataclass(frozen=True, slots=True)
class _Sign:
    pattern: re.Pattern[str]
    formats: frozenset[str]
    """The tool formats (``Profile.tool_format``) whose calls look like this."""


def _sign(pattern: str, *formats: str) -> _Sign:
    return _Sign(re.compile(pattern), frozenset(formats))


# Most specific first: a `<tool_call>` is Hermes only when no other format's shape follows it.
_SIGNS = (
    _sign(r"<｜tool▁calls?▁begin｜>", "deepseek_v3", "deepseek_v31"),
    _sign(r"｜DSML｜", "deepseek_v32", "deepseek_v4", "deepseek_v41"),
    _sign(r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>", "kimi_k2"),
    _sign(r"\[TOOL_CALLS\]", "mistral", "mistral_v11", "mistral_legacy"),
    _sign(r"<\|python_tag\|>", "llama3_json"),
    _sign(r"<TOOLCALL>", "nemotron_deci"),
    _sign(r"<minimax:tool_call>", "minimax_m2"),
    _sign(r"to=functions\.\w", "harmony"),
    _sign(r"<tool_call>\s*<function=", "qwen3_coder"),
    _sign(r"<tool_call>[^<{]*<arg_key>", "glm45", "glm47"),
    _sign(r"<tool_call>\s*\{", "hermes"),
)


@dataclass(frozen=True, slots=True)
class ForeignCall:
    """A tool call in a format the profile does not parse, found in a turn's text."""

    found: str
    """The text that gave it away (a marker, or the start of a JSON call)."""
    formats: frozenset[str]
    """The tool formats it belongs to."""

    def profiles(self) -> list[str]:
        """The catalog's profiles that parse this format."""
        return [p.name for p in list_profiles() if p.tool_format in self.formats]


def foreign_call(text: str, tool_format: str | None, tools: Collection[str]) -> ForeignCall | None:
    """The first sign in ``text`` of a tool call in a format other than ``tool_format``; a
    bare JSON call counts only when it names one of ``tools``."""
    for sign in _SIGNS:
        if tool_format in sign.formats:
            continue
        match = sign.pattern.search(text)
        if match is not None:
            return ForeignCall(match.group(0), sign.formats)
    if tool_format not in ("hermes", "llama3_json"):
        for match in _BARE_JSON.finditer(text):
            if match.group(1) in tools:
                return ForeignCall(match.group(0), frozenset({"hermes", "llama3_json"}))
    return None


class FormatWatch:
    """One agent's watch: checks turns until it has warned once."""

    def __init__(self, profile: Profile, tools: Collection[str]) -> None:
        self._profile = profile
        self._tools = frozenset(tools)
        self.warned = False

    def check(self, message: Message, *, tools_offered: bool) -> None:
        """Look at a finished turn's message (cheap; nothing once the watch has warned)."""
        if self.warned or not tools_offered or not self._tools or message.tool_calls:
            return
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        if not text:
            return
        found = foreign_call(text, self._profile.tool_format, self._tools)
        if found is None:
            return
        self.warned = True
        suggested = found.profiles()
        _log.warning(
            "tool_format_mismatch",
            profile=self._profile.name,
            tool_format=self._profile.tool_format,
            found=found.found[:80],
            found_formats=sorted(found.formats),
            suggested_profiles=suggested,
            hint=(
                "the model wrote a tool call the profile does not parse, so no tool ran; "
                f"pass Agent(profile=...) with one of {', '.join(suggested) or 'a profile'} "
                "whose format matches (see agentkit.profiles.profile_for_model)"
            ),
        )
