"""VLLMEngine without vLLM: argument mapping, errors, streaming and abort, on a fake AsyncLLM.

The fake is deliberately stricter than vLLM: it never aborts a request by itself when its
stream is closed, so only VLLMEngine's own abort can end a request early. The real engine is
exercised by ``tests/slow/test_vllm_engine.py``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from agentkit import AgentHints
from agentkit.engine import Engine, GenerationChunk, GenerationRequest, VLLMEngine, _vllm
from agentkit.engine._vllm import sampling_options
from agentkit.errors import ConfigurationError, EngineError

pytestmark = pytest.mark.anyio

IM_END = 2


class FakeTokenizer:
    """One token per character (ids are code points); ``<|im_end|>`` is special id 2."""

    added_tokens_decoder = {  # noqa: RUF012
        IM_END: SimpleNamespace(content="<|im_end|>", special=True),
        400: SimpleNamespace(content="<tool_call>", special=False),
    }

    def __init__(self) -> None:
        self.encode_calls: list[dict[str, Any]] = []

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        self.encode_calls.append(kwargs)
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int], **kwargs: Any) -> str:
        return "".join("<|im_end|>" if i == IM_END else chr(i) for i in ids)


@dataclass
class Step:
    text: str
    token_ids: list[int]


@dataclass
class FakeLLM:
    """Streams ``steps`` per request (an exception among them is raised there), then
    finishes with ``finish_reason``; ``steps=None`` streams forever."""

    steps: Sequence[Step | Exception] | None = ()
    finish_reason: str = "stop"
    final_token_ids: list[int] = field(default_factory=lambda: [IM_END])
    cached: int = 0
    defaults: dict[str, Any] = field(default_factory=dict)
    unfinished: set[str] = field(default_factory=set)
    aborted: list[str] = field(default_factory=list)
    received: list[tuple[Any, Any, str, int]] = field(default_factory=list)
    shut_down: bool = False
    starts: list[dict[str, Any]] = field(default_factory=list)
    """The engine arguments of every engine start."""
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)

    def __post_init__(self) -> None:
        self.model_config = SimpleNamespace(get_diff_sampling_param=lambda: dict(self.defaults))

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tokenizer

    def get_num_unfinished_requests(self) -> int:
        return len(self.unfinished)

    async def abort(self, request_id: str | Sequence[str]) -> None:
        await anyio.lowlevel.checkpoint()  # a real abort awaits a socket send
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        for rid in ids:
            self.aborted.append(rid)
            self.unfinished.discard(rid)

    def shutdown(self) -> None:
        self.shut_down = True

    @staticmethod
    def _output(
        text: str, ids: list[int], *, finished: bool, reason: str | None, cached: int
    ) -> Any:
        completion = SimpleNamespace(text=text, token_ids=ids, finish_reason=reason)
        return SimpleNamespace(outputs=[completion], finished=finished, num_cached_tokens=cached)

    def _steps(self) -> Iterator[Step | Exception]:
        if self.steps is None:
            while True:
                yield Step("x", [120])
        yield from self.steps

    async def generate(
        self, prompt: Any, params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[Any]:
        self.received.append((prompt, params, request_id, priority))
        self.unfinished.add(request_id)
        for step in self._steps():
            await anyio.sleep(0.001)
            if request_id not in self.unfinished:  # aborted
                yield self._output("", [], finished=True, reason="abort", cached=self.cached)
                return
            if isinstance(step, Exception):
                self.unfinished.discard(request_id)
                raise step
            yield self._output(step.text, step.token_ids, finished=False, reason=None, cached=0)
        self.unfinished.discard(request_id)
        yield self._output(
            "", self.final_token_ids, finished=True, reason=self.finish_reason, cached=self.cached
        )


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    """Pretend vLLM is installed; VLLMEngine starts a FakeLLM (``fake.starts`` counts)."""
    llm = FakeLLM(steps=[Step("<tool_call>", [400]), Step("hi", [104, 105])], cached=16)

    def create_engine_config(args: dict[str, Any]) -> tuple[Any, Any]:
        llm.starts.append(args)
        return SimpleNamespace(), SimpleNamespace()

    monkeypatch.setattr(_vllm, "_check_vllm_installed", lambda: None)
    monkeypatch.setattr(
        _vllm,
        "_engine_argument_names",
        lambda: frozenset({"model", "tokenizer", "enable_prefix_caching", "max_model_len"}),
    )
    monkeypatch.setattr(_vllm, "_create_engine_config", create_engine_config)
    monkeypatch.setattr(_vllm, "_create_llm", lambda args, config: llm)
    monkeypatch.setattr(_vllm, "_make_sampling_params", lambda options: options)
    return llm


async def collect(engine: VLLMEngine, request: GenerationRequest) -> list[GenerationChunk]:
    return [chunk async for chunk in engine.generate(request)]


# -- argument mapping -------------------------------------------------------------------------


def test_request_fields_override_model_defaults_and_max_tokens_is_never_vllms_16() -> None:
    options, priority = sampling_options(
        GenerationRequest(prompt="p", temperature=0.2),
        defaults={"temperature": 0.6, "top_p": 0.95, "top_k": 20},
    )
    assert options == {"temperature": 0.2, "top_p": 0.95, "top_k": 20, "max_tokens": None}
    assert priority == 0
    options, _ = sampling_options(GenerationRequest(prompt="p", max_tokens=7, top_p=0.5))
    assert options == {"max_tokens": 7, "top_p": 0.5}


def test_extra_passes_structured_outputs_bias_seed_priority_and_sampling_fields() -> None:
    regex = re.escape("<think>a</think>")
    request = GenerationRequest(
        prompt="p",
        temperature=0.7,
        extra={
            "structured_outputs": {"regex": regex},
            "logit_bias": {"5": 100, 6: -1.5},
            "priority": -3,
            "seed": 11,
            "temperature": 0.0,
            "min_p": 0.1,
        },
    )
    options, priority = sampling_options(request)
    assert options == {
        "max_tokens": None,
        "temperature": 0.0,
        "structured_outputs": {"regex": regex},
        "logit_bias": {5: 100.0, 6: -1.5},
        "seed": 11,
        "min_p": 0.1,
    }
    assert priority == -3


def test_a_stop_string_that_is_one_special_token_becomes_a_stop_token_id() -> None:
    options, _ = sampling_options(
        GenerationRequest(prompt="p", stop=("<|im_end|>", "END"), extra={"stop_token_ids": [9]}),
        stop_token_ids={"<|im_end|>": IM_END},
    )
    assert options["stop"] == ["END"]
    assert options["stop_token_ids"] == [9, IM_END]


@pytest.mark.parametrize("key", ["n", "output_kind", "detokenize", "skip_special_tokens"])
def test_options_the_engine_owns_are_refused(key: str) -> None:
    with pytest.raises(ConfigurationError, match=key):
        sampling_options(GenerationRequest(prompt="p", extra={key: 2}))


def test_the_hints_priority_is_the_scheduling_priority_unless_extra_sets_one() -> None:
    hints = AgentHints(priority=-2, expected_output_tokens=9)
    _, priority = sampling_options(GenerationRequest(prompt="p", hints=hints))
    assert priority == -2
    explicit = GenerationRequest(prompt="p", hints=hints, extra={"priority": 5})
    assert sampling_options(explicit)[1] == 5


def test_priority_must_be_an_int() -> None:
    with pytest.raises(ConfigurationError, match="priority"):
        sampling_options(GenerationRequest(prompt="p", extra={"priority": "high"}))


# -- configuration errors ---------------------------------------------------------------------


def test_without_vllm_installed_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_vllm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError) as info:
        VLLMEngine("Qwen/Qwen3-8B")
    assert "pip install 'agentkit-local[cpu]'" in str(info.value)
    assert "pip install 'agentkit-local[gpu]'" in str(info.value)


@pytest.mark.parametrize("path", ["/no/such/model", "./missing-model", "~/nowhere/model"])
def test_a_missing_model_path_is_a_configuration_error(fake: FakeLLM, path: str) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        VLLMEngine(path)


async def test_an_unknown_engine_argument_is_named_with_a_suggestion(fake: FakeLLM) -> None:
    engine = VLLMEngine("org/model", max_model_length=2048)
    with pytest.raises(
        ConfigurationError, match=r"'max_model_length' \(did you mean 'max_model_len'"
    ):
        await engine.start()


async def test_a_model_vllm_cannot_find_is_a_configuration_error(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(args: dict[str, Any]) -> Any:
        raise FileNotFoundError("Cannot find an appropriate cached snapshot folder")

    monkeypatch.setattr(_vllm, "_create_engine_config", missing)
    with pytest.raises(ConfigurationError, match="Download it first or pass a local path"):
        await VLLMEngine("org/not-downloaded").start()


async def test_an_engine_that_cannot_start_is_an_engine_error_with_advice(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(args: Any, config: Any) -> Any:
        raise RuntimeError("Engine core initialization failed")

    monkeypatch.setattr(_vllm, "_create_llm", fail)
    with pytest.raises(EngineError, match="not enough memory") as info:
        await VLLMEngine("org/model").start()
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_invalid_sampling_options_are_a_configuration_error(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reject(options: dict[str, Any]) -> Any:
        raise TypeError("Unexpected keyword argument 'tempreature'")

    monkeypatch.setattr(_vllm, "_make_sampling_params", reject)
    engine = VLLMEngine("org/model")
    with pytest.raises(ConfigurationError, match="tempreature"):
        await collect(engine, GenerationRequest(prompt="p", extra={"tempreature": 0}))


# -- streaming ------------------------------------------------------------------------------


def test_is_an_engine(fake: FakeLLM) -> None:
    assert isinstance(VLLMEngine("org/model"), Engine)


async def test_streams_deltas_then_a_final_chunk_with_usage(fake: FakeLLM) -> None:
    engine = VLLMEngine("org/model", max_model_len=2048)
    assert not engine.started
    chunks = await collect(engine, GenerationRequest(prompt="ab", stop=("<|im_end|>",)))
    assert engine.started
    assert fake.starts == [
        {
            "max_model_len": 2048,
            "model": "org/model",
            "tokenizer": None,
            "enable_prefix_caching": True,
        }
    ]
    assert [(c.text, list(c.token_ids), c.finish_reason) for c in chunks] == [
        ("<tool_call>", [400], None),
        ("hi", [104, 105], None),
        ("", [IM_END], "stop"),
    ]
    usage = chunks[-1].usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cached_prompt_tokens, usage.output_tokens) == (2, 16, 4)
    assert usage.time_to_first_token_s is not None
    prompt, params, _, _ = fake.received[0]
    assert prompt == {"prompt_token_ids": [97, 98]}
    assert fake.tokenizer.encode_calls == [{"add_special_tokens": False}]
    assert params["stop_token_ids"] == [IM_END]
    assert "stop" not in params
    assert engine.num_unfinished_requests == 0


async def test_prompt_token_ids_win_over_the_text(fake: FakeLLM) -> None:
    engine = VLLMEngine("org/model")
    await collect(engine, GenerationRequest(prompt="ignored", prompt_token_ids=[5, 6, 7]))
    assert fake.received[0][0] == {"prompt_token_ids": [5, 6, 7]}
    assert fake.tokenizer.encode_calls == []


@pytest.mark.parametrize(
    ("vllm_reason", "reason"), [("length", "length"), ("abort", "abort"), ("repetition", "stop")]
)
async def test_finish_reasons(fake: FakeLLM, vllm_reason: str, reason: str) -> None:
    fake.finish_reason = vllm_reason
    chunks = await collect(VLLMEngine("org/model"), GenerationRequest(prompt="p"))
    assert chunks[-1].finish_reason == reason


async def test_a_request_vllm_failed_is_an_engine_error(fake: FakeLLM) -> None:
    fake.finish_reason = "error"
    with pytest.raises(EngineError, match="finish_reason 'error'"):
        await collect(VLLMEngine("org/model"), GenerationRequest(prompt="p"))


async def test_failure_mid_stream_is_an_engine_error_after_the_output_so_far(
    fake: FakeLLM,
) -> None:
    class EngineDeadError(Exception):
        pass

    fake.steps = [Step("partial", [1]), EngineDeadError("EngineCore encountered an issue")]
    got: list[str] = []
    engine = VLLMEngine("org/model")

    async def drain() -> None:
        async for chunk in engine.generate(GenerationRequest(prompt="p", request_id="r1")):
            got.append(chunk.text)

    with pytest.raises(EngineError, match="died during request r1") as info:
        await drain()
    assert got == ["partial"]
    assert info.value.request_id == "r1"
    assert isinstance(info.value.__cause__, EngineDeadError)


async def test_closing_the_stream_early_aborts_the_request(fake: FakeLLM) -> None:
    fake.steps = None
    engine = VLLMEngine("org/model")
    stream = engine.generate(GenerationRequest(prompt="p", request_id="r1"))
    assert (await stream.__anext__()).text == "x"
    assert engine.num_unfinished_requests == 1
    await stream.aclose()
    assert fake.aborted == ["r1"]
    assert engine.num_unfinished_requests == 0


async def test_cancelling_the_consumer_aborts_the_request_despite_the_cancellation(
    fake: FakeLLM,
) -> None:
    fake.steps = None
    engine = VLLMEngine("org/model")
    seen = 0
    # Cancelled from outside while the stream is live (after a few chunks, not after a wall
    # clock delay: the engine's start in a worker thread takes long on a loaded machine).
    with anyio.CancelScope() as scope:
        async for _ in engine.generate(GenerationRequest(prompt="p", request_id="r1")):
            seen += 1
            if seen == 3:
                scope.cancel()
    assert scope.cancelled_caught
    assert seen == 3
    assert fake.aborted == ["r1"]
    assert engine.num_unfinished_requests == 0


async def test_concurrent_requests_start_one_engine_and_keep_distinct_ids(fake: FakeLLM) -> None:
    engine = VLLMEngine("org/model")
    results: list[list[GenerationChunk]] = []

    async def one() -> None:
        results.append(await collect(engine, GenerationRequest(prompt="p", request_id="same")))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert len(fake.starts) == 1
    assert all(r[-1].finish_reason == "stop" for r in results)
    ids = [rid for _, _, rid, _ in fake.received]
    assert len(set(ids)) == 4
    assert all(rid.startswith("same") for rid in ids)


async def test_aclose_aborts_streams_in_flight_and_shuts_down(fake: FakeLLM) -> None:
    fake.steps = None
    reasons: list[str | None] = []
    async with VLLMEngine("org/model") as engine:
        stream = engine.generate(GenerationRequest(prompt="p", request_id="r1"))
        await stream.__anext__()
        await engine.aclose()
        reasons.extend([c.finish_reason async for c in stream])
    assert reasons[-1] == "abort"
    assert fake.shut_down
    assert fake.aborted == ["r1"]
    with pytest.raises(EngineError, match="closed"):
        await collect(engine, GenerationRequest(prompt="p"))


async def test_tokenizer_encode_and_decode(fake: FakeLLM) -> None:
    async with VLLMEngine("org/model") as engine:
        assert engine.tokenizer is fake.tokenizer
        assert engine.encode("hi") == [104, 105]
        assert fake.tokenizer.encode_calls == [{"add_special_tokens": False}]
        assert engine.decode([104, 105, IM_END]) == "hi<|im_end|>"


def test_engine_package_exports() -> None:
    import agentkit.engine

    assert agentkit.engine.__all__ == [
        "CharTokenizer",
        "ConstraintViolationError",
        "Engine",
        "FinishReason",
        "FunctionEngine",
        "FunctionOutput",
        "GenerationChunk",
        "GenerationRequest",
        "OutputConstraints",
        "RemoteEngine",
        "RequestContext",
        "ScriptItem",
        "ScriptedCall",
        "ScriptedEngine",
        "ScriptedOutput",
        "TokenizedScriptedEngine",
        "Usage",
        "VLLMEngine",
        "split_pseudo_tokens",
    ]
    for name in agentkit.engine.__all__:
        assert getattr(agentkit.engine, name) is not None
