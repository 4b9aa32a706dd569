"""CharTokenizer: the test engines' tokenizer gives the same ids in every process."""

from __future__ import annotations

import os
import subprocess
import sys

PROGRAM = (
    "from agentkit.engine import CharTokenizer\n"
    "t = CharTokenizer(['<a>', '<b>', '<c>', '<dd>', '<ee>', '<f>', '<g>', '<h>'])\n"
    "print(t.encode('<a><b><c><dd><ee><f><g><h>'))\n"
)


def _ids(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_special_token_ids_do_not_depend_on_the_hash_seed() -> None:
    # Equal-length specials used to be numbered in set order, which the hash seed decides: a
    # transcript's token ids recorded in one process then meant other markers in the next.
    assert len({_ids(seed) for seed in range(6)}) == 1


def test_a_longer_special_wins_over_its_prefix() -> None:
    from agentkit.engine import CharTokenizer

    tokenizer = CharTokenizer(["<x>", "<x>>"])
    assert len(tokenizer.encode("<x>>")) == 1
