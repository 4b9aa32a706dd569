"""The replay report with a real byte-level BPE tokenizer (the tiny model's), where BPE merges
across block boundaries would break a prompt that re-tokenized the history."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.errors import ConfigurationError
from agentkit.replay_check import check_replay, load_tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.mark.parametrize("policy", ["keep_all", "drop_on_plain_turns"])
async def test_a_real_tokenizer_reuses_every_token_the_policy_keeps(
    tiny_model: Path, policy: str
) -> None:
    tokenizer = load_tokenizer(str(tiny_model), "qwen3")
    report = await check_replay("qwen3", turns=12, policy=policy, tokenizer=tokenizer)  # type: ignore[arg-type]
    assert report.ok, report.to_json()
    assert all(t.exact for t in report.turns)
    for turn in report.turns[1:]:
        if turn.divergence is None:
            assert turn.reused_tokens == turn.previous_tokens
        else:
            assert policy == "drop_on_plain_turns"
            assert (turn.turn - 1) % 3 == 0


def test_a_tokenizer_that_cannot_be_loaded_names_the_path_and_profile(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"'deepseek-v4'.*nowhere"):
        load_tokenizer(str(tmp_path / "nowhere"), "deepseek-v4")
