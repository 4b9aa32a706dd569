"""What :class:`~agentkit.engine.RemoteEngine` sends to an NVIDIA Dynamo frontend.

Dynamo's frontend serves the same ``/v1/completions`` route as vLLM's server, and takes a
prompt of token ids as it is (no re-tokenization, no BOS added), but it refuses fields it does
not know (HTTP 400, ``Unsupported parameter(s)``) and has its own ways of saying three things
vLLM says with fields of its own. Checked against ``ai-dynamo==1.6.1``:

* **output token ids**: there is no ``return_token_ids``. With ``logprobs: 0`` and
  ``return_tokens_as_token_ids: true`` each streamed choice carries
  ``logprobs.tokens = ["token_id:<id>", ...]``, which the engine reads as the output's ids
  (the worker must return log probabilities, as ``dynamo.vllm`` does); without them the
  chunks carry text only and the agent re-renders its next prompt from text;
* **scheduling**: a top-level ``priority`` is refused. Agent hints go in
  ``nvext.agent_hints``: ``priority`` (higher is more important in Dynamo, which negates it
  for vLLM; agentkit's priority follows vLLM, lower runs earlier, so it is sent negated),
  ``osl`` (expected output tokens: the router's load estimate) and ``speculative_prefill``
  (after the turn, prefill the predicted next prompt on the worker to warm its cache);
* **session affinity**: the ``x-dynamo-session-id`` header. The router keeps a session on
  one worker when the frontend runs with ``--router-session-affinity-ttl-secs``; the KV-aware
  router (``--router-mode kv``) routes on cached blocks either way.

``structured_outputs`` becomes Dynamo's ``guided_*`` fields; ``add_special_tokens`` is not
sent (a text prompt is tokenized by the frontend as it sees fit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentkit.errors import ConfigurationError

__all__ = ["SESSION_HEADER", "agent_hints", "dynamo_body", "hint_fields", "logprob_token_ids"]

SESSION_HEADER = "x-dynamo-session-id"

_NOT_ACCEPTED = ("return_token_ids", "add_special_tokens")
"""vLLM body fields Dynamo 1.6.1 refuses; their effect is had otherwise (see above)."""

_GUIDED = {
    "regex": "guided_regex",
    "json": "guided_json",
    "grammar": "guided_grammar",
    "choice": "guided_choice",
}

_HINT_NAMES = frozenset({"priority", "latency_sensitive", "expected_output_tokens"})
"""``agentkit.AgentHints`` fields (``request.extra["agent_hints"]`` as a mapping)."""


def hint_fields(value: object) -> dict[str, Any]:
    """``request.hints`` or the older ``request.extra["agent_hints"]`` (an ``AgentHints`` or
    a mapping of its fields) as a plain dict of the fields it sets (an ``AgentHints``' unset
    defaults left out, so that it overrides only what it says); anything else is a
    configuration error."""
    dump = getattr(value, "model_dump", None)
    fields = dump(exclude_unset=True) if callable(dump) else value
    if not isinstance(fields, Mapping):
        raise ConfigurationError(
            f"request.extra['agent_hints'] must be an AgentHints or a mapping, not {value!r}"
        )
    unknown = sorted(set(fields) - _HINT_NAMES)
    if unknown:
        raise ConfigurationError(
            f"request.extra['agent_hints'] has unknown field(s) {', '.join(unknown)}; "
            f"expected {', '.join(sorted(_HINT_NAMES))}"
        )
    return dict(fields)


def agent_hints(
    priority: int, hints: Mapping[str, Any], speculative_prefill: bool
) -> dict[str, Any]:
    """``nvext.agent_hints`` for one request (empty when there is nothing to say).

    ``latency_sensitive`` is not sent: Dynamo's own ``latency_sensitivity`` is a deprecated
    alias of its router priority, which ``priority`` already sets.
    """
    result: dict[str, Any] = {}
    if priority:
        result["priority"] = -priority  # Dynamo: higher is more important
    osl = hints.get("expected_output_tokens")
    if osl is not None:
        result["osl"] = int(osl)
    if speculative_prefill:
        result["speculative_prefill"] = True
    return result


def dynamo_body(body: dict[str, Any], hints: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite a vLLM-shaped completions body for Dynamo's frontend (see the module doc)."""
    out = {k: v for k, v in body.items() if k not in _NOT_ACCEPTED}
    out["logprobs"] = 0
    out["return_tokens_as_token_ids"] = True
    structured = out.pop("structured_outputs", None)
    if structured is not None:
        if not isinstance(structured, Mapping):
            raise ConfigurationError(
                f"request.extra['structured_outputs'] must be a mapping, not {structured!r}"
            )
        for name, value in structured.items():
            if name not in _GUIDED:
                raise ConfigurationError(
                    f"structured_outputs[{name!r}] has no Dynamo equivalent; Dynamo takes "
                    f"{', '.join(sorted(_GUIDED))}"
                )
            out[_GUIDED[name]] = value
    if hints:
        nvext = dict(out.get("nvext") or {})
        nvext["agent_hints"] = {**dict(nvext.get("agent_hints") or {}), **hints}
        out["nvext"] = nvext
    return out


def logprob_token_ids(logprobs: object) -> list[int]:
    """The output ids in a choice's ``logprobs.tokens`` (``"token_id:<id>"`` entries, which a
    server writes when asked for ``return_tokens_as_token_ids``); ``[]`` if there are none."""
    if not isinstance(logprobs, Mapping):
        return []
    ids: list[int] = []
    for token in logprobs.get("tokens") or ():
        if not isinstance(token, str) or not token.startswith("token_id:"):
            return []
        try:
            ids.append(int(token[len("token_id:") :]))
        except ValueError:
            return []
    return ids
