"""vLLM in the same process: the engine for running agents on your own hardware.

:class:`VLLMEngine` wraps vLLM's ``AsyncLLM``. vLLM is imported only when the engine starts
(or its tokenizer is first needed), so ``import agentkit`` stays fast and works without it.

What this module adds to vLLM is the contract the agent loop relies on:

* output arrives as deltas of raw text *with* the model's markers (special tokens are not
  skipped: parsers need ``<think>``, ``<tool_call>``, ...), each with its token ids;
* a request ends when its consumer stops: closing, breaking out of or cancelling the stream
  aborts the request in vLLM at once, shielded from the cancellation that caused it;
* failures become :class:`~agentkit.errors.ConfigurationError` (fix the setup) or
  :class:`~agentkit.errors.EngineError` (the engine could not produce output), each saying
  what to do.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import time
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from agentkit._control_tokens import tokenizer_control_tokens
from agentkit._distribution import pip_install
from agentkit._logging import get_logger
from agentkit.engine._base import FinishReason, GenerationChunk, GenerationRequest, Usage
from agentkit.errors import AgentkitError, ConfigurationError, EngineError

__all__ = ["VLLMEngine", "sampling_options"]

_log = get_logger("agentkit.engine.vllm")

INSTALL_HINT = f"install it with `{pip_install('gpu')}` (CUDA) or `{pip_install('cpu')}` (CPU only)"

_RESERVED_OPTIONS = frozenset({"n", "output_kind", "detokenize", "skip_special_tokens"})
"""SamplingParams fields the engine owns: one sequence per request, streamed as deltas,
detokenized with the markers the parsers need."""

_FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}

# Above this many characters a text prompt is tokenized in a worker thread, so that a long
# transcript does not stall the event loop (and the other requests streaming on it).
_TOKENIZE_IN_THREAD_CHARS = 20_000


def sampling_options(
    request: GenerationRequest,
    *,
    defaults: Mapping[str, Any] | None = None,
    stop_token_ids: Mapping[str, int] | None = None,
) -> tuple[dict[str, Any], int]:
    """The ``vllm.SamplingParams`` keyword arguments and scheduling priority for ``request``.

    Precedence: the model's ``generation_config`` ``defaults`` < the request's own fields
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``) < ``request.extra``. ``extra`` takes
    ``structured_outputs`` (a dict of ``vllm.sampling_params.StructuredOutputsParams`` fields,
    such as ``{"regex": ...}``, ``{"json": schema}`` or ``{"grammar": ...}``), ``logit_bias``
    (token id -> bias; string keys from JSON are accepted), ``priority`` (used when the
    engine runs with ``scheduling_policy="priority"``; default: ``request.hints.priority``),
    ``seed``, and any other ``SamplingParams`` field.

    Stop strings that are exactly one special token (``"<|im_end|>"``; looked up in
    ``stop_token_ids``) become stop token ids: vLLM holds back the last ``len(stop) - 1``
    characters of text while it watches for a stop *string*, which would delay every marker,
    and so every tool dispatch, by that much output.
    """
    options: dict[str, Any] = dict(defaults or {})
    for name in ("max_tokens", "temperature", "top_p"):
        value = getattr(request, name)
        if value is not None:
            options[name] = value
    options.setdefault("max_tokens", None)  # SamplingParams' own default is 16 tokens.
    extra = dict(request.extra)
    reserved = sorted(_RESERVED_OPTIONS & extra.keys())
    if reserved:
        raise ConfigurationError(
            f"request.extra sets {', '.join(reserved)}, which VLLMEngine controls "
            "(one sequence, streamed as deltas, markers kept): remove them"
        )
    hinted = request.hints.priority if request.hints is not None else 0
    priority = extra.pop("priority", hinted)
    if not isinstance(priority, int):
        raise ConfigurationError(f"request.extra['priority'] must be an int, not {priority!r}")

    special = stop_token_ids or {}
    stop = [*request.stop, *_as_list(extra.pop("stop", ()))]
    token_stops = [*_as_list(extra.pop("stop_token_ids", ()))]
    strings: list[str] = []
    for text in stop:
        if text in special:
            token_stops.append(special[text])
        else:
            strings.append(text)
    if strings:
        options["stop"] = strings
    if token_stops:
        options["stop_token_ids"] = list(dict.fromkeys(token_stops))

    bias = extra.pop("logit_bias", None)
    if bias is not None:
        options["logit_bias"] = {int(token): float(value) for token, value in bias.items()}
    options.update(extra)
    return options, priority


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | int):
        return [value]
    return list(value)


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") > 1


def _check_model(model: str) -> None:
    """Fail early, with advice, on a local model path that does not exist."""
    path = Path(model).expanduser()
    if _looks_like_path(model) and not path.exists():
        raise ConfigurationError(
            f"model path {model!r} does not exist: pass a directory holding the model's "
            "config.json, tokenizer and weights, or a Hugging Face repo id ('org/name')"
        )


def _check_vllm_installed() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise ConfigurationError(f"VLLMEngine needs vLLM, which is not installed: {INSTALL_HINT}")


def _engine_argument_names() -> frozenset[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs

    return frozenset(f.name for f in dataclasses.fields(AsyncEngineArgs))


def _create_engine_config(engine_args: dict[str, Any]) -> Any:
    """Validate the arguments and resolve the model's config (fast; no model is loaded)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    args = AsyncEngineArgs(**engine_args)
    return args, args.create_engine_config()


def _create_llm(args: Any, config: Any) -> Any:
    """Start vLLM: spawn the engine-core process, load the weights, size the KV cache."""
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor import Executor

    return AsyncLLM(
        vllm_config=config,
        executor_class=Executor.get_class(config),
        log_requests=args.enable_log_requests,
        log_stats=not args.disable_log_stats,
    )


def _make_sampling_params(options: dict[str, Any]) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    structured = options.get("structured_outputs")
    if isinstance(structured, Mapping):
        options = {**options, "structured_outputs": StructuredOutputsParams(**structured)}
    return SamplingParams(
        **options,
        n=1,
        output_kind=RequestOutputKind.DELTA,
        skip_special_tokens=False,
    )


def _load_tokenizer(name: str, engine_args: Mapping[str, Any]) -> Any:
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(
        name,
        tokenizer_mode=engine_args.get("tokenizer_mode", "auto"),
        trust_remote_code=engine_args.get("trust_remote_code", False),
        revision=engine_args.get("tokenizer_revision"),
    )


def _is_engine_dead(error: BaseException) -> bool:
    # By name, so that classifying an error never needs vllm importable.
    return any(cls.__name__ == "EngineDeadError" for cls in type(error).__mro__)


class VLLMEngine:
    """A vLLM engine (``AsyncLLM``) running in this process.

    Args:
        model: a local model directory or a Hugging Face repo id.
        tokenizer: the tokenizer's directory or repo id, if not the model's.
        enable_prefix_caching: reuse the KV cache of prompt prefixes seen before. An agent's
            next prompt begins with its previous prompt and output, so this is what makes
            turn N+1 cost only its new tokens.
        **engine_args: any other ``vllm.AsyncEngineArgs`` field, e.g. ``max_model_len``,
            ``gpu_memory_utilization``, ``dtype``, ``quantization``, ``enforce_eager``,
            ``scheduling_policy="priority"`` (then ``request.hints.priority``, or
            ``request.extra["priority"]``, orders requests). Scale-out is vLLM's and passes
            through unchanged:

            - ``tensor_parallel_size``: split each layer across this many GPUs (one node);
            - ``pipeline_parallel_size``: split the layers into this many stages;
            - ``data_parallel_size``: run this many replicas behind this one engine, which
              spreads requests across them;
            - ``distributed_executor_backend``: ``"mp"`` (processes, one node), ``"ray"``
              (several nodes) or ``"uni"`` (one worker in the engine-core process, what a
              CPU-only machine wants).

            For a deployment that already runs elsewhere, use a remote engine instead.

    The engine starts on the first :meth:`generate` or on ``await engine.start()``; starting
    loads the weights and can take minutes. Use it as ``async with VLLMEngine(...) as
    engine:`` or call :meth:`aclose` when done. One engine serves any number of concurrent
    requests (vLLM batches them), so share it between agents.

    Output is raw: special tokens are kept in the text. What stopped the output is in the
    chunks' ``token_ids`` but not in their text: the EOS token, a stop token, or the tokens
    of a stop string (text after the stop string is cut, even within the same token).
    Sampling defaults come from the model's ``generation_config.json``, as in ``vllm serve``.

    Raises:
        ConfigurationError: vLLM is not installed, the model path does not exist, or the
            engine arguments are invalid (at construction or at start).
        EngineError: the engine failed to start (out of memory, no KV cache space, ...) or
            failed while generating.
    """

    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        enable_prefix_caching: bool = True,
        **engine_args: Any,
    ) -> None:
        _check_vllm_installed()
        _check_model(model)
        if tokenizer is not None:
            _check_model(tokenizer)
        self.model = model
        self.engine_args: dict[str, Any] = {
            **engine_args,
            "model": model,
            "tokenizer": tokenizer,
            "enable_prefix_caching": enable_prefix_caching,
        }
        self._tokenizer_name = tokenizer or model
        self._llm: Any = None
        self._tokenizer: Any = None
        self._control_tokens: frozenset[str] | None = None
        self._defaults: dict[str, Any] = {}
        self._special_ids: dict[str, int] = {}
        self._in_flight: set[str] = set()
        self._start_lock = anyio.Lock()
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._llm is not None

    @property
    def llm(self) -> Any:
        """The running ``vllm.v1.engine.async_llm.AsyncLLM``, for what this class does not wrap
        (metrics, LoRA adapters, ``reset_prefix_cache()``, ...)."""
        if self._llm is None:
            raise EngineError(f"VLLMEngine({self.model!r}) is not running: await start() first")
        return self._llm

    async def start(self) -> None:
        """Start vLLM if it is not running yet (idempotent, safe to call concurrently).

        Startup runs in a worker thread, so the event loop keeps serving while the weights
        load.
        """
        async with self._start_lock:
            if self._closed:
                raise EngineError(f"VLLMEngine({self.model!r}) is closed: create a new one")
            if self._llm is not None:
                return
            started = time.perf_counter()
            # Shielded: a start cancelled half-way would still finish in its thread, and the
            # engine it made would be lost with its process still running.
            with anyio.CancelScope(shield=True):
                llm = await anyio.to_thread.run_sync(self._start_sync)
            self._llm = llm
            self._tokenizer = llm.get_tokenizer()
            self._defaults = dict(llm.model_config.get_diff_sampling_param())
            self._special_ids = _special_token_ids(self._tokenizer)
            _log.info(
                "engine_started",
                model=self.model,
                duration_s=round(time.perf_counter() - started, 3),
            )

    def _start_sync(self) -> Any:
        names = _engine_argument_names()
        unknown = sorted(self.engine_args.keys() - names)
        if unknown:
            hints = [
                f"{name!r} (did you mean {close[0]!r}?)"
                if (close := difflib.get_close_matches(name, names, n=1))
                else repr(name)
                for name in unknown
            ]
            raise ConfigurationError(
                f"unknown vLLM engine argument {', '.join(hints)}: VLLMEngine's keyword "
                "arguments are vllm.AsyncEngineArgs fields"
            )
        try:
            args, config = _create_engine_config(self.engine_args)
        except OSError as error:
            raise ConfigurationError(
                f"cannot find model {self.model!r}: it is not a local directory and not in the "
                "Hugging Face cache (or downloads are off, HF_HUB_OFFLINE=1). Download it "
                f"first or pass a local path. ({type(error).__name__}: {error})"
            ) from error
        except Exception as error:  # pydantic's ValidationError (a ValueError) mostly
            raise ConfigurationError(
                f"invalid vLLM configuration for model {self.model!r}: {error}"
            ) from error
        try:
            return _create_llm(args, config)
        except Exception as error:
            raise EngineError(
                f"vLLM could not start model {self.model!r} ({type(error).__name__}: {error}). "
                "The engine process logs the root cause above this error. Common causes: not "
                "enough memory for the weights or the KV cache (lower max_model_len or "
                "max_num_seqs, raise gpu_memory_utilization, or on CPU set "
                "VLLM_CPU_KVCACHE_SPACE in GiB), or a model architecture or dtype this vLLM "
                "build does not support."
            ) from error

    async def aclose(self) -> None:
        """Abort the requests still streaming (their streams end with ``"abort"``) and shut
        vLLM down, ending its engine-core process. Idempotent."""
        async with self._start_lock:
            self._closed = True
            llm, self._llm = self._llm, None
            if llm is None:
                return
            with anyio.CancelScope(shield=True):
                if self._in_flight:
                    await llm.abort(list(self._in_flight))
                llm.shutdown()
                _terminate_zmq_context(llm)
            _log.info("engine_closed", model=self.model)

    async def __aenter__(self) -> VLLMEngine:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- tokenizer --------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (loaded on first use; no engine needed)."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(self._tokenizer_name, self.engine_args)
        return self._tokenizer

    @property
    def control_tokens(self) -> frozenset[str]:
        """The vocabulary's added tokens: only the template may write them (see
        :mod:`agentkit._control_tokens`)."""
        if self._control_tokens is None:
            self._control_tokens = tokenizer_control_tokens(self.tokenizer)
        return self._control_tokens

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, adding no special tokens (prompts already hold theirs)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``, special tokens included."""
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=False))

    @property
    def num_unfinished_requests(self) -> int:
        """Requests vLLM is still tracking (0 once every stream has ended or been closed)."""
        return 0 if self._llm is None else int(self._llm.get_num_unfinished_requests())

    # -- generation -------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        """Stream the model's output for ``request``; see :class:`VLLMEngine`."""
        await self.start()
        llm = self._llm
        if llm is None:  # closed while starting
            raise EngineError(
                f"VLLMEngine({self.model!r}) is closed", request_id=request.request_id
            )
        options, priority = sampling_options(
            request, defaults=self._defaults, stop_token_ids=self._special_ids
        )
        try:
            params = _make_sampling_params(options)
        except Exception as error:  # TypeError, or vLLM's validation errors
            raise ConfigurationError(
                f"invalid generation options {sorted(options)}: {error}. request.extra takes "
                "structured_outputs, logit_bias, priority and vllm.SamplingParams fields"
            ) from error
        prompt_ids = await self._prompt_ids(request)
        request_id = self._new_request_id(request.request_id)
        started = time.perf_counter()
        first_token_s: float | None = None
        output_tokens = 0
        finished = False
        stream = llm.generate(
            {"prompt_token_ids": prompt_ids}, params, request_id, priority=priority
        )
        self._in_flight.add(request_id)
        try:
            async for output in stream:
                completion = output.outputs[0]
                token_ids = list(completion.token_ids)
                if token_ids and first_token_s is None:
                    first_token_s = time.perf_counter() - started
                output_tokens += len(token_ids)
                if not output.finished:
                    if completion.text or token_ids:
                        # The first chunk tells what prefill cost (HTTP adapters report it
                        # before any content); the last one has the whole usage.
                        early = None
                        if output_tokens == len(token_ids):
                            early = Usage(
                                prompt_tokens=len(prompt_ids),
                                cached_prompt_tokens=int(output.num_cached_tokens or 0),
                                time_to_first_token_s=first_token_s,
                            )
                        yield GenerationChunk(
                            text=completion.text, token_ids=token_ids, usage=early
                        )
                    continue
                finished = True
                reason = str(completion.finish_reason)
                if reason == "error":
                    raise EngineError(
                        f"vLLM failed request {request_id} after {output_tokens} tokens "
                        "(finish_reason 'error', e.g. a KV-cache transfer failure): retry it",
                        request_id=request_id,
                    )
                matched = getattr(completion, "stop_reason", None)
                yield GenerationChunk(
                    text=completion.text,
                    token_ids=token_ids,
                    finish_reason=_FINISH_REASONS.get(reason, "stop"),
                    stop_sequence=matched if isinstance(matched, str) else None,
                    usage=Usage(
                        prompt_tokens=len(prompt_ids),
                        cached_prompt_tokens=int(output.num_cached_tokens or 0),
                        output_tokens=output_tokens,
                        time_to_first_token_s=first_token_s,
                    ),
                )
                return
        except AgentkitError:
            raise
        except Exception as error:
            raise self._generation_error(error, request_id) from error
        finally:
            self._in_flight.discard(request_id)
            # Runs on aclose(), break and cancellation alike. Shielded: under a cancelled
            # scope every await would be cancelled again and the abort never sent, leaving
            # the request generating with no one to read it.
            with anyio.CancelScope(shield=True):
                await stream.aclose()
                if not finished and self._llm is llm:
                    await llm.abort(request_id)

    async def _prompt_ids(self, request: GenerationRequest) -> list[int]:
        if request.prompt_token_ids is not None:
            return list(request.prompt_token_ids)
        if len(request.prompt) > _TOKENIZE_IN_THREAD_CHARS:
            return await anyio.to_thread.run_sync(self.encode, request.prompt)
        return self.encode(request.prompt)

    def _new_request_id(self, requested: str | None) -> str:
        # vLLM aborts by the id given here, and aborts *every* request sharing it: keep ours
        # unique among those in flight.
        request_id = requested or f"agentkit-{uuid.uuid4().hex}"
        if request_id in self._in_flight:
            request_id = f"{request_id}-{uuid.uuid4().hex[:8]}"
        return request_id

    def _generation_error(self, error: Exception, request_id: str) -> EngineError:
        if _is_engine_dead(error):
            return EngineError(
                f"the vLLM engine for {self.model!r} died during request {request_id}; its log "
                "above holds the root cause. Create a new VLLMEngine to continue.",
                request_id=request_id,
            )
        cause = error.__cause__ if type(error).__name__ == "EngineGenerateError" else error
        return EngineError(
            f"vLLM request {request_id} failed: {type(cause).__name__}: {cause}",
            request_id=request_id,
        )


def _terminate_zmq_context(llm: Any) -> None:
    """Terminate the zmq context of vLLM's engine-core client.

    vLLM (0.32) closes the client's sockets on shutdown but never terminates their context,
    which then raises ``ResourceWarning: Unclosed context`` when it is collected: noise, or an
    error under ``-W error``. The sockets are closed by now, so terminating cannot block.
    """
    resources = getattr(getattr(llm, "engine_core", None), "resources", None)
    context = getattr(resources, "ctx", None)
    if context is not None and not context.closed:
        context.destroy(linger=0)


def _special_token_ids(tokenizer: Any) -> dict[str, int]:
    """Special tokens by text (``"<|im_end|>" -> id``): stop strings vLLM can match by id."""
    decoder: Mapping[int, Any] = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    return {
        token.content: token_id
        for token_id, token in decoder.items()
        if getattr(token, "special", False)
    }
