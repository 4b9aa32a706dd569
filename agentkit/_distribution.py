"""The name agentkit is installed under. The import name is ``agentkit``; the distribution on
the package index is ``agentkit-local``, because ``agentkit`` there is an unrelated project."""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "pip_install"]

DISTRIBUTION = "agentkit-local"


def pip_install(extra: str) -> str:
    """The command that installs agentkit with ``extra``: ``pip install 'agentkit-local[cpu]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
