"""Loading a Hugging Face tokenizer from local files, with errors that say what to do."""

from __future__ import annotations

from typing import Any

from agentkit._distribution import pip_install
from agentkit.errors import ConfigurationError

__all__ = ["load_hf_tokenizer"]


def load_hf_tokenizer(source: str, *, owner: str) -> Any:
    """The tokenizer at ``source`` (a local directory, or a hub id already cached), loaded
    with ``local_files_only``; ``owner`` (e.g. ``"profile 'qwen3'"``, ``"--tokenizer"``)
    begins the :class:`ConfigurationError` when it cannot be loaded."""
    try:
        from transformers import AutoTokenizer
    except ImportError as error:
        raise ConfigurationError(
            f"{owner}: loading the tokenizer {source} needs transformers "
            f"({pip_install('cpu')} or pip install transformers)"
        ) from error
    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception as error:  # transformers raises OSError, ValueError, and more
        raise ConfigurationError(
            f"{owner}: cannot load the tokenizer from {source}: {error}"
        ) from error
