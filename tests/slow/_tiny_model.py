"""Build a tiny random-weight Qwen2 model with a locally trained byte-level BPE tokenizer.

Real-engine tests and benchmarks run vLLM on the CPU with it: no hub access, a few seconds to
build, ~150 tok/s. Its output is noise unless forced, which is what vLLM structured outputs
are for (see :func:`forced`): a regex equal to ``re.escape(text)`` makes the model emit exactly
``text``, and a logit bias on the marker tokens makes each marker come out as one token, as a
trained model's would.

Usage: ``build_tiny_model(path)`` returns the directory (idempotent), or from the command line
``python tests/slow/_tiny_model.py DIR``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["MARKERS", "SPECIALS", "build_tiny_model", "forced"]

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Special tokens (ids 0, 1, 2); ``<|im_end|>`` is the end-of-sequence token."""
MARKERS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
"""Qwen's reasoning and tool markers, added as single (non-special) tokens."""

_CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    'def f(x):\n    return {"a": 1, "b": [1, 2]}\n',
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n',
    "user assistant system tool weather Paris Lisbon reasoning answer done\n",
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n",
]

_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_model(path: str | Path, *, seed: int = 0) -> Path:
    """Write the tokenizer, config and random weights to ``path`` (skipped if already there)."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(path)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 50, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKERS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = _CHAT_TEMPLATE
    fast.save_pretrained(out)
    # head_dim 64: vLLM's CPU attention backend rejects small head sizes such as 16.
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        bos_token_id=None,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


def forced(text: str, marker_ids: dict[str, int], *, bias: float = 100.0) -> dict[str, Any]:
    """``GenerationRequest.extra`` that makes the tiny model emit exactly ``text``.

    The regex admits only ``text``; the bias on ``marker_ids`` (marker -> token id) makes the
    sampler pick a marker's single token rather than spelling it out byte by byte.
    """
    return {
        "structured_outputs": {"regex": re.escape(text)},
        "logit_bias": dict.fromkeys(marker_ids.values(), bias),
    }


if __name__ == "__main__":
    print(build_tiny_model(sys.argv[1]))
