"""An existing serving deployment over HTTP: the scale-out path.

:class:`RemoteEngine` streams from the OpenAI-compatible ``/v1/completions`` route that vLLM's
server exposes (SGLang and Dynamo expose the same). It sends the agent's exact prompt token
ids when it has them, asks for raw output (markers kept, stop strings left out, token ids
returned) and turns the server-sent events into the same chunks :class:`VLLMEngine` yields.

What it adds over a plain HTTP client is the contract the agent loop relies on:

* a request is retried (with exponential backoff and jitter) only while *nothing* has been
  streamed to the caller: connection failures, 429/502/503/504/529, a stream that ends before
  its first token. After the first token a retry would repeat output, so failures then are
  final;
* a stream that stalls ends with an :class:`~agentkit.errors.EngineError` after
  ``first_token_timeout`` (before the first token) or ``token_timeout`` (between tokens);
* closing, breaking out of or cancelling the stream closes the HTTP connection, which is how
  the server learns to abort the request;
* with several replicas, each session sticks to one replica (its prefix cache) while that
  replica is up, and fails over to the next one when it is not (see ``_replicas.py``);
* ``flavor="dynamo"`` speaks to an NVIDIA Dynamo frontend, whose router places sessions
  itself: the same route, with the body fields, agent hints and session header Dynamo takes
  (see ``_dynamo.py``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing, suppress
from types import TracebackType
from typing import Any, Literal

import anyio
import httpx

from agentkit._control_tokens import tokenizer_control_tokens
from agentkit._logging import get_logger
from agentkit.engine._base import FinishReason, GenerationChunk, GenerationRequest, Usage
from agentkit.engine._dynamo import (
    SESSION_HEADER,
    agent_hints,
    dynamo_body,
    hint_fields,
    logprob_token_ids,
)
from agentkit.engine._replicas import Replica, ReplicaSet, session_key
from agentkit.engine._vllm import _special_token_ids, sampling_options
from agentkit.errors import ConfigurationError, EngineError, EngineOverloaded

__all__ = ["RemoteEngine"]

_log = get_logger("agentkit.engine.remote")

_RESERVED_BODY = frozenset(
    {"model", "prompt", "stream", "stream_options", "echo", "n", "best_of", "return_token_ids"}
)
"""Body fields the engine owns: one streamed sequence for the prompt it was given."""

_OVERLOADED = frozenset({429, 503, 529})
_TRANSIENT = frozenset({502, 504})
_SETUP = frozenset({401, 403, 404})
_FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}
_MAX_RETRY_AFTER_S = 30.0

FailureKind = Literal["down", "transient", "overloaded", "fatal", "setup"]
Flavor = Literal["vllm", "dynamo"]


class _AttemptFailed(Exception):
    """One attempt on one replica failed; ``kind`` says whether another attempt may help.

    ``down``: the replica cannot be reached (mark it down, fail over). ``transient``: the
    connection broke or a gateway failed; safe to retry while nothing was streamed.
    ``overloaded``: the server refused for now (429/503/529). ``fatal``: retrying would not
    help (bad request, timeout, server error). ``setup``: the URL, model or key is wrong.
    """

    def __init__(self, kind: FailureKind, url: str, message: str, retry_after: float = 0) -> None:
        super().__init__(f"{url}: {message}")
        self.kind = kind
        self.url = url
        self.retry_after = retry_after


_NO_LIMIT = 1 << 30
"""``max_tokens`` for a request without a limit: the server clamps it to the context."""


class RemoteEngine:
    """A model served elsewhere, behind an OpenAI-compatible ``/v1/completions`` route.

    Args:
        base_url: the server's root (``http://host:8000``; a trailing ``/v1`` is accepted).
        base_urls: several replicas of the same model instead of one ``base_url``. Requests
            of one session (``request.extra["session_id"]``, else ``request.session_id``, else
            the agent's run id from ``request.context``, else an agent's request id
            ``run_<id>-<turn>`` without its turn) go to the same replica while it is up.
        api_key: sent as ``Authorization: Bearer <api_key>``.
        model: the served model name (``--served-model-name``, or the model path).
        tokenizer: the model's tokenizer (anything with ``encode``/``decode``, e.g.
            ``transformers.AutoTokenizer.from_pretrained(...)``). With it the engine has
            ``encode``/``decode``, so the agent sends exact prompt token ids (token-exact
            replay, prefix-cache hits every turn); without it the server tokenizes the text.
        connect_timeout: seconds to open a connection (also the ``/health`` timeout).
        first_token_timeout: seconds from sending a request to its first token (prefill of a
            long prompt on a busy server takes a while). Not retried when it expires.
        token_timeout: the longest silence between two streamed tokens.
        max_retries: retries of a request after its first attempt, on top of failing over
            once to each other replica. Never after a token was streamed.
        backoff: base delay in seconds of the exponential backoff (with jitter).
        replica_cooldown: seconds a replica that refused a connection is ranked last.
        http_client: an ``httpx.AsyncClient`` to use (its timeouts, limits, proxies); the
            engine does not close it. By default the engine owns a pooled client.
        flavor: ``"vllm"`` (vLLM's or SGLang's server) or ``"dynamo"`` (an NVIDIA Dynamo
            frontend). With ``"dynamo"`` the body keeps to the fields Dynamo accepts, output
            token ids come back through ``logprobs`` (``return_tokens_as_token_ids``),
            ``request.hints`` (priority, expected output tokens) go to ``nvext.agent_hints``
            and every request carries its session in the ``x-dynamo-session-id`` header, so
            that Dynamo's router keeps the session on the worker holding its KV cache. With
            ``"vllm"`` the hints' priority is the body's ``priority``.
        speculative_prefill: (Dynamo) ask the worker to prefill the predicted next prompt
            after each turn (``nvext.agent_hints.speculative_prefill``);
            ``request.extra["speculative_prefill"]`` overrides it per request.

    Requests ask for raw output (``skip_special_tokens: false``), stop strings left out of
    the text (``include_stop_str_in_output: false``) and the output token ids
    (``return_token_ids``, vLLM); a server that ignores these fields still works, with
    chunks that carry no token ids. ``request.extra`` goes into the body as vLLM's
    ``sampling_options`` would map it (``structured_outputs``, ``logit_bias``, ``priority``,
    ``seed``, any other server field). ``max_tokens=None`` is sent as the replica's context
    length (``max_model_len`` from its ``/v1/models``, asked once), which the server clamps to
    what the prompt leaves — vLLM reads a missing or null value as 16 and refuses more than
    the context; a server that lists no length gets a very large value.

    The first chunk carries a partial ``usage`` (prompt tokens only: the server reports
    cached prompt tokens at the end); the last one the whole usage, with
    ``prompt_tokens_details.cached_tokens`` as ``cached_prompt_tokens`` (vLLM reports it
    with ``--enable-prompt-tokens-details``). ``time_to_first_token_s`` is measured here,
    retries included.

    Raises (from :meth:`generate`):
        EngineOverloaded: the server still answered 429/503/529 after every retry.
        EngineError: no replica could be reached, the stream failed or stalled, or the
            server rejected the request. The message names the endpoint.
        ConfigurationError: the server answered 401/403/404 (key, URL or model name).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        base_urls: Sequence[str] | None = None,
        api_key: str | None = None,
        model: str,
        tokenizer: Any | None = None,
        connect_timeout: float = 10,
        first_token_timeout: float = 120,
        token_timeout: float = 60,
        max_retries: int = 3,
        backoff: float = 0.5,
        replica_cooldown: float = 15,
        http_client: httpx.AsyncClient | None = None,
        flavor: Flavor = "vllm",
        speculative_prefill: bool = False,
    ) -> None:
        if (base_url is None) == (base_urls is None):
            raise ConfigurationError("RemoteEngine takes either base_url or base_urls")
        if isinstance(base_urls, str):
            raise ConfigurationError("base_urls is a list of URLs; for one, use base_url")
        if max_retries < 0 or backoff < 0 or replica_cooldown < 0:
            raise ConfigurationError("max_retries, backoff and replica_cooldown must be >= 0")
        if min(connect_timeout, first_token_timeout, token_timeout) <= 0:
            raise ConfigurationError("timeouts must be > 0 seconds")
        if flavor not in ("vllm", "dynamo"):
            raise ConfigurationError(f"flavor must be 'vllm' or 'dynamo', not {flavor!r}")
        urls = [base_url] if base_url is not None else list(base_urls or ())
        self.flavor: Flavor = flavor
        self.speculative_prefill = speculative_prefill
        self.model = model
        self.replicas = ReplicaSet(urls, cooldown=replica_cooldown)
        self.connect_timeout = connect_timeout
        self.first_token_timeout = first_token_timeout
        self.token_timeout = token_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._limits: dict[str, int | None] = {}
        """Each replica's context length (``max_model_len`` from its ``/v1/models``)."""
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = http_client is None
        self._closed = False
        self._client = http_client or httpx.AsyncClient(
            # Read timeouts are enforced per token by the engine; the pool is unbounded
            # because every streaming request holds its connection for the whole output.
            timeout=httpx.Timeout(connect_timeout, read=None, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        self.tokenizer = tokenizer
        self._special_ids: dict[str, int] = {}
        if tokenizer is not None:
            # Instance attributes, not methods: agentkit detects a tokenizing engine with
            # hasattr(engine, "encode"), and without a tokenizer this engine must not have one.
            self.encode: Callable[[str], list[int]] = _encoder(tokenizer)
            self.decode: Callable[[Sequence[int]], str] = _decoder(tokenizer)
            self._special_ids = _special_token_ids(tokenizer)
            self.control_tokens: frozenset[str] = tokenizer_control_tokens(tokenizer)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Check that at least one replica answers ``GET /health``.

        Optional: :meth:`generate` needs no start. Raises :class:`EngineError` naming every
        endpoint when none is healthy.
        """
        status = await self.health()
        if not any(status.values()):
            raise EngineError(
                "no replica of model "
                f"{self.model!r} is healthy (GET /health): {', '.join(status)}; start the "
                "server (`vllm serve ...`) or fix base_url"
            )

    async def health(self) -> dict[str, bool]:
        """``GET /health`` on every replica at once (each within ``connect_timeout``).

        A replica that fails is marked down (ranked last for the cooldown); one that
        answers 200 is marked up again.
        """
        result: dict[str, bool] = {}

        async def check(replica: Replica) -> None:
            ok = False
            with anyio.move_on_after(self.connect_timeout):
                try:
                    response = await self._client.get(
                        f"{replica.url}/health", headers=self._headers
                    )
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
            result[replica.url] = ok
            if ok:
                self.replicas.mark_up(replica)
            else:
                self.replicas.mark_down(replica)

        async with anyio.create_task_group() as group:
            for replica in self.replicas.replicas:
                group.start_soon(check, replica)
        return {url: result[url] for url in self.replicas.urls}

    async def aclose(self) -> None:
        """Close the connection pool (if the engine created it). Idempotent."""
        self._closed = True
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> RemoteEngine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- generation -------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationChunk, None]:
        """Stream the model's output for ``request``; see :class:`RemoteEngine`."""
        if self._closed:
            raise EngineError(
                f"RemoteEngine({self.model!r}) is closed: create a new one",
                request_id=request.request_id,
            )
        body, key = self._body(request)
        request_id = request.request_id or f"agentkit-{uuid.uuid4().hex}"
        headers = {**self._headers, "X-Request-Id": request_id}
        if self.flavor == "dynamo" and key is not None and key != request.request_id:
            # A conversation's id, not a one-off request's: Dynamo binds each session id to
            # a worker for the affinity TTL.
            headers[SESSION_HEADER] = key
        started = time.perf_counter()
        tried: set[str] = set()
        failures: list[_AttemptFailed] = []
        retries = 0
        while True:
            ranked = self.replicas.ranked(key)
            fresh = [r for r in ranked if r.url not in tried]
            replica = fresh[0] if fresh else ranked[0]
            if not fresh:  # a retry, not a failover: wait before it
                retries += 1
                if retries > self.max_retries:
                    raise _final_error(failures, request_id)
                await anyio.sleep(self._delay(retries, failures[-1]))
            tried.add(replica.url)
            streamed = False
            try:
                sent = body
                if body.get("max_tokens") == _NO_LIMIT:
                    limit = await self._context_length(replica)
                    if limit is not None:
                        sent = {**body, "max_tokens": limit}
                attempt = self._attempt(replica, sent, headers, started)
                async with aclosing(attempt) as chunks:
                    async for chunk in chunks:
                        streamed = True
                        yield chunk
                return
            except _AttemptFailed as failure:
                if failure.kind == "down":
                    self.replicas.mark_down(replica)
                if failure.kind == "setup":
                    raise ConfigurationError(
                        f"{failure} (check base_url, model and api_key)"
                    ) from failure
                if streamed or failure.kind == "fatal":
                    detail = " after output was streamed (not retried)" if streamed else ""
                    raise EngineError(
                        f"request {request_id} failed{detail}: {failure}",
                        request_id=request_id,
                    ) from failure
                failures.append(failure)
                _log.warning(
                    "remote_retry", request_id=request_id, url=failure.url, error=str(failure)
                )

    async def _context_length(self, replica: Replica) -> int | None:
        """The replica's ``max_model_len`` (vLLM lists it in ``/v1/models``), asked once: a
        request without a limit sends it as ``max_tokens``, which the server clamps to what
        the prompt leaves; vLLM refuses a larger value and reads a missing one as 16."""
        if replica.url in self._limits:
            return self._limits[replica.url]
        limit: int | None = None
        try:
            response = await self._client.get(
                f"{replica.url}/v1/models", headers=self._headers, timeout=self.connect_timeout
            )
            models = response.json().get("data", []) if response.status_code == 200 else []
            chosen = next((m for m in models if m.get("id") == self.model), None)
            if chosen is None and len(models) == 1:
                chosen = models[0]
            # vLLM lists max_model_len, Dynamo context_window.
            value = None
            if isinstance(chosen, dict):
                value = chosen.get("max_model_len", chosen.get("context_window"))
            limit = int(value) if isinstance(value, int) and value > 0 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            limit = None
        self._limits[replica.url] = limit
        return limit

    def _delay(self, retry: int, failure: _AttemptFailed) -> float:
        if failure.retry_after:
            return min(failure.retry_after, _MAX_RETRY_AFTER_S)
        return float(self.backoff * 2 ** (retry - 1) * random.uniform(0.5, 1.5))

    def _body(self, request: GenerationRequest) -> tuple[dict[str, Any], str | None]:
        extra = dict(request.extra)
        session = extra.pop("session_id", None)
        hints = hint_fields(request.hints) if request.hints is not None else {}
        # Before GenerationRequest.hints, the hints beyond the priority came this way: kept,
        # each field it sets overriding the typed hint's.
        hints.update(hint_fields(extra.pop("agent_hints", None) or {}))
        speculative = bool(extra.pop("speculative_prefill", self.speculative_prefill))
        if "priority" not in extra and hints.get("priority"):
            extra["priority"] = hints["priority"]
        reserved = sorted(_RESERVED_BODY & extra.keys())
        if reserved:
            raise ConfigurationError(
                f"request.extra sets {', '.join(reserved)}, which RemoteEngine controls: "
                "remove them"
            )
        options, priority = sampling_options(
            dataclasses.replace(request, extra=extra), stop_token_ids=self._special_ids
        )
        prompt: str | list[int] = (
            list(request.prompt_token_ids)
            if request.prompt_token_ids is not None
            else request.prompt
        )
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "stream": True,
            "stream_options": {"include_usage": True},
            "skip_special_tokens": False,
            "include_stop_str_in_output": False,
            "add_special_tokens": False,  # the rendered prompt holds its special tokens
            "return_token_ids": True,
            **options,
        }
        if body.get("max_tokens") is None:
            # vLLM's server reads a missing or null max_tokens as 16; a large value is clamped
            # to what the context leaves (max_model_len - prompt), which is what "no limit"
            # means in-process.
            body["max_tokens"] = _NO_LIMIT
        if session is None:
            session = request.session_id
        if session is None and request.context is not None:
            session = request.context.run_id
        key = str(session) if session is not None else session_key(request.request_id)
        if self.flavor == "dynamo":
            return dynamo_body(body, agent_hints(priority, hints, speculative)), key
        if priority:
            body["priority"] = priority
        return body, key

    async def _attempt(
        self,
        replica: Replica,
        body: dict[str, Any],
        headers: dict[str, str],
        started: float,
    ) -> AsyncGenerator[GenerationChunk, None]:
        """One request to one replica. Raises :class:`_AttemptFailed`; never retries."""
        url = f"{replica.url}/v1/completions"
        deadline = anyio.current_time() + self.first_token_timeout
        response: httpx.Response | None = None
        try:
            try:
                with anyio.fail_after(self.first_token_timeout):
                    response = await self._client.send(
                        self._client.build_request("POST", url, json=body, headers=headers),
                        stream=True,
                    )
            except TimeoutError:
                raise _AttemptFailed(
                    "fatal",
                    url,
                    f"no response within first_token_timeout={self.first_token_timeout}s",
                ) from None
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                raise _AttemptFailed("down", url, f"cannot connect ({_describe(error)})") from error
            except httpx.TransportError as error:
                raise _AttemptFailed("transient", url, _describe(error)) from error
            if response.status_code != 200:
                raise await _status_failure(response, url, deadline)
            self.replicas.mark_up(replica)
            prompt = body["prompt"]
            stream = _Stream(started, len(prompt) if isinstance(prompt, list) else None)
            events = _EventStream(response)
            while True:
                if stream.produced:
                    timeout, name = self.token_timeout, "token_timeout"
                else:
                    timeout = max(deadline - anyio.current_time(), 0)
                    name = "first_token_timeout"
                try:
                    with anyio.fail_after(timeout):
                        event = await anext(events, None)
                except TimeoutError:
                    limit = self.token_timeout if stream.produced else self.first_token_timeout
                    raise _AttemptFailed(
                        "fatal",
                        url,
                        f"stalled: no token within {name}={limit}s "
                        f"({stream.output_tokens} tokens streamed)",
                    ) from None
                except httpx.TransportError as error:
                    raise _AttemptFailed(
                        "transient",
                        url,
                        f"connection lost mid-stream after {stream.output_tokens} tokens "
                        f"({_describe(error)})",
                    ) from error
                except json.JSONDecodeError as error:
                    raise _AttemptFailed("fatal", url, f"invalid event data: {error}") from error
                if event is None:
                    break
                for chunk in stream.feed(event, url):
                    yield chunk
            final = stream.finish(url, done=events.done)
            # Read the body to its end (after [DONE]) so that the connection goes back to the
            # pool instead of being closed as unfinished.
            with anyio.move_on_after(self.token_timeout):
                await events.drain()
            yield final
        finally:
            if response is not None:
                # Closing an unfinished stream drops the connection: the server aborts the
                # request. Shielded, so that a cancelled consumer still closes it.
                with anyio.CancelScope(shield=True):
                    await response.aclose()


class _EventStream:
    """The JSON payloads of a server-sent event stream, up to ``data: [DONE]``."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()
        self.done = False

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while not self.done:
            line = await anext(self._lines)  # StopAsyncIteration: the stream ended
            if not line.startswith("data:"):
                continue  # blank separators, ': keep-alive' comments, event:/id: fields
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                self.done = True
                break
            value = json.loads(data)
            if isinstance(value, dict):
                return value
        raise StopAsyncIteration

    async def drain(self) -> None:
        with suppress(httpx.HTTPError):
            async for _ in self._lines:
                pass


class _Stream:
    """Turns the events of one completion stream into chunks."""

    def __init__(self, started: float, prompt_tokens: int | None) -> None:
        self.started = started
        self.produced = False
        self.output_tokens = 0
        self.prompt_tokens = prompt_tokens
        self.first_token_s: float | None = None
        self.usage: dict[str, Any] | None = None
        self.finished: tuple[str, str, list[int], str | None] | None = None

    def feed(self, event: dict[str, Any], url: str) -> list[GenerationChunk]:
        error = event.get("error")
        if error is not None or event.get("object") == "error":
            detail = error.get("message", error) if isinstance(error, dict) else error
            raise _AttemptFailed(
                "fatal",
                url,
                f"the server reported an error after {self.output_tokens} tokens: "
                f"{detail or event.get('message')}",
            )
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        chunks: list[GenerationChunk] = []
        for choice in event.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            prompt_ids = choice.get("prompt_token_ids")
            if prompt_ids:
                self.prompt_tokens = len(prompt_ids)
            text = choice.get("text") or ""
            token_ids = [int(t) for t in choice.get("token_ids") or ()]
            if not token_ids:  # Dynamo: "token_id:<id>" entries (return_tokens_as_token_ids)
                token_ids = logprob_token_ids(choice.get("logprobs"))
            self.output_tokens += len(token_ids)
            reason = choice.get("finish_reason")
            if (text or token_ids) and self.first_token_s is None:
                self.first_token_s = time.perf_counter() - self.started
            if reason is not None:
                matched = choice.get("stop_reason", choice.get("matched_stop"))
                stop = matched if isinstance(matched, str) else None
                self.finished = (str(reason), text, token_ids, stop)
                self.produced = self.produced or bool(text or token_ids)
            elif text or token_ids:
                early = None
                if not self.produced and self.prompt_tokens is not None:
                    early = Usage(
                        prompt_tokens=self.prompt_tokens,
                        time_to_first_token_s=self.first_token_s,
                    )
                self.produced = True
                chunks.append(GenerationChunk(text=text, token_ids=token_ids, usage=early))
        return chunks

    def finish(self, url: str, *, done: bool) -> GenerationChunk:
        if self.finished is None:
            how = "ended without a finish_reason" if done else "was closed by the server"
            raise _AttemptFailed(
                "transient", url, f"the stream {how} after {self.output_tokens} tokens"
            )
        reason, text, token_ids, stop = self.finished
        if reason == "error":
            raise _AttemptFailed(
                "fatal", url, f"finish_reason 'error' after {self.output_tokens} tokens"
            )
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details") or {}
        return GenerationChunk(
            text=text,
            token_ids=token_ids,
            finish_reason=_FINISH_REASONS.get(reason, "stop"),
            stop_sequence=stop,
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or self.prompt_tokens or 0),
                cached_prompt_tokens=int(details.get("cached_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or self.output_tokens),
                time_to_first_token_s=self.first_token_s,
            ),
        )


async def _status_failure(response: httpx.Response, url: str, deadline: float) -> _AttemptFailed:
    status = response.status_code
    detail = ""
    with anyio.move_on_after(max(deadline - anyio.current_time(), 1.0)):
        with suppress(httpx.HTTPError):
            detail = _error_message((await response.aread()).decode(errors="replace"))
    message = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status in _OVERLOADED:
        return _AttemptFailed("overloaded", url, message, _retry_after(response))
    if status in _TRANSIENT:
        return _AttemptFailed("transient", url, message)
    if status in _SETUP:
        return _AttemptFailed("setup", url, message)
    return _AttemptFailed("fatal", url, message)


def _error_message(text: str) -> str:
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip()[:500]
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if payload.get("message"):
            return str(payload["message"])[:500]
    return text.strip()[:500]


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(float(response.headers.get("retry-after", 0)), 0.0)
    except ValueError:
        return 0.0  # an HTTP date: fall back to the backoff


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _final_error(failures: list[_AttemptFailed], request_id: str) -> EngineError:
    last = {failure.url: failure for failure in failures}  # each endpoint's latest failure
    summary = "; ".join(str(f) for f in last.values())
    if all(f.kind == "overloaded" for f in last.values()):
        return EngineOverloaded(
            f"request {request_id}: the server is overloaded after {len(failures)} attempts "
            f"({summary}); retry later or add replicas",
            request_id=request_id,
        )
    return EngineError(
        f"request {request_id} failed after {len(failures)} attempts, no replica could serve "
        f"it: {summary}",
        request_id=request_id,
    )


def _accepts(method: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _encoder(tokenizer: Any) -> Callable[[str], list[int]]:
    """``encode`` without added special tokens (the prompt holds its own), for Hugging Face
    tokenizers and plain ``encode(text)`` ones (such as ``CharTokenizer``) alike."""
    if _accepts(tokenizer.encode, "add_special_tokens"):
        return lambda text: list(tokenizer.encode(text, add_special_tokens=False))
    return lambda text: list(tokenizer.encode(text))


def _decoder(tokenizer: Any) -> Callable[[Sequence[int]], str]:
    if _accepts(tokenizer.decode, "skip_special_tokens"):
        return lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False))
    return lambda ids: str(tokenizer.decode(list(ids)))
