"""Side queries: small judgement tasks on the prompt the engine has already prefilled.

A chat product asks small questions around an answer: does this need a web search, what
should the search query be, which domain is it, how authoritative must the sources be, should
this URL be read, what is the conversation's title. Asked as separate conversations, each costs
a full prefill. Asked here, each is the transcript's exact prompt (token ids, built as the next
turn would build it) plus a short suffix, so the engine's prefix cache serves everything before
the suffix and a side query costs about a decode step or two.

Suffixes:

* **DeepSeek-V4** (and V4.1) was trained with one special token per task ("quick
  instructions"), at the positions its encoder writes (``vllm/tokenizers/deepseek_v4_encoding.py``;
  V4.1's ``deepseek_v41_encoding.py`` has the same tokens and positions)::

      action      ...<｜User｜>{prompt}<｜Assistant｜><think><｜action｜>   (chat mode: </think>)
      query       ...<｜User｜>{prompt}<｜query｜>
      authority   ...<｜User｜>{prompt}<｜authority｜>
      domain      ...<｜User｜>{prompt}<｜domain｜>
      read_url    ...<｜User｜>{prompt}<｜extracted_url｜>{url}<｜read_url｜>
      title       ...<｜Assistant｜>{response}<｜end▁of▁sentence｜><｜title｜>

  ``action`` extends the main prompt itself; the user-position tasks replace its two-token
  generation prompt; ``title`` extends the main prompt and the answer. The answers are free
  text in the model's trained vocabulary, parsed leniently.
* **Every other profile**: a short user instruction appended after the current state (the
  template's own rendering of one more user message and the generation prompt), answered as
  JSON under a schema (vLLM structured outputs), so any model gets the same KV sharing.

A side query never changes the transcript it is asked about; several run concurrently.
Malformed answers become :class:`SideQueryError` (carrying the raw text), never another
exception.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

import anyio
from pydantic import BaseModel, ConfigDict, Field

from agentkit._control_tokens import guard_for
from agentkit._hints import AgentHints
from agentkit._model_turn import conversation_id
from agentkit._prompt import PromptBuilder
from agentkit._sequences import common_prefix_len
from agentkit.engine import Engine, GenerationRequest, Usage
from agentkit.errors import AgentkitError, ConfigurationError
from agentkit.profiles import Profile, ReplayPolicy, ToolSpec, dropped_reasoning, replay_view
from agentkit.profiles._deepseek import EOS, DeepSeekDsmlTemplate
from agentkit.profiles._deepseek_v41 import DeepSeekV41Template
from agentkit.transcript import Message, TextBlock, Transcript

__all__ = [
    "ActionResult",
    "AgentHints",
    "AuthorityResult",
    "DomainResult",
    "QueryResult",
    "SideQueryError",
    "SideQueryKind",
    "SideQueryPrompt",
    "SideQueryResult",
    "TitleResult",
    "UrlsResult",
    "parse_side_answer",
    "run_side_queries",
    "run_side_query",
    "side_query_prompts",
]

SideQueryKind = Literal["action", "query", "authority", "domain", "title", "read_url"]
SIDE_QUERY_KINDS: tuple[SideQueryKind, ...] = get_args(SideQueryKind)

AUTHORITY_LEVELS = ("low", "medium", "high")

# -- results and errors -----------------------------------------------------------------------


class SideQueryError(AgentkitError):
    """A side query's answer could not be read (or the query cannot be asked here).

    ``raw`` is the model's text, kept whole.
    """

    def __init__(self, message: str, *, kind: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.raw = raw


class SideQueryResult(BaseModel):
    """What a side query answered, with its raw text and cost."""

    model_config = ConfigDict(frozen=True)

    kind: ClassVar[SideQueryKind]
    raw: str = ""
    """The model's text, as produced."""
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens the engine's prefix cache served (ideally all but the suffix)."""
    output_tokens: int = 0
    shared_prefix_tokens: int | None = None
    """Tokens of the side prompt that are the transcript's own prompt (``None``: the engine
    does not tokenize here)."""


class ActionResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "action"
    needs_search: bool


class QueryResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "query"
    query: str
    """The first (or only) search query."""
    queries: list[str] = Field(default_factory=list)
    """Every query the model wrote, one per line."""


class AuthorityResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "authority"
    level: str
    """How authoritative the sources must be (``low`` / ``medium`` / ``high`` from the
    instruction path; DeepSeek-V4's own label otherwise)."""


class DomainResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "domain"
    domain: str


class TitleResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "title"
    title: str


class UrlsResult(SideQueryResult):
    kind: ClassVar[SideQueryKind] = "read_url"
    urls_to_read: list[str]
    """The URLs the model says should be fetched, in the order asked."""
    decisions: dict[str, bool] = Field(default_factory=dict)


# -- prompts ----------------------------------------------------------------------------------

_DS_TOKENS: dict[SideQueryKind, str] = {
    "action": "<｜action｜>",
    "query": "<｜query｜>",
    "authority": "<｜authority｜>",
    "domain": "<｜domain｜>",
    "title": "<｜title｜>",
    "read_url": "<｜read_url｜>",
}
DS_EXTRACTED_URL = "<｜extracted_url｜>"

_INSTRUCTIONS: dict[SideQueryKind, str] = {
    "action": "Side task: does answering the user's last message need a web search? "
    'Reply only with JSON: {"needs_search": true|false}.',
    "query": "Side task: write the web search query for the user's last message. "
    'Reply only with JSON: {"query": "..."}.',
    "authority": "Side task: how authoritative must the sources for the user's last message "
    'be? Reply only with JSON: {"level": "low"|"medium"|"high"}.',
    "domain": "Side task: name the domain (subject area) of the user's last message in one "
    'or two words. Reply only with JSON: {"domain": "..."}.',
    "title": "Side task: give this conversation a short title (at most eight words). "
    'Reply only with JSON: {"title": "..."}.',
    "read_url": "Side task: should the URL {url} from the user's message be fetched and read "
    'to answer it? Reply only with JSON: {"read": true|false}.',
}

_SCHEMAS: dict[SideQueryKind, dict[str, Any]] = {
    "action": {"needs_search": {"type": "boolean"}},
    "query": {"query": {"type": "string", "maxLength": 200}},
    "authority": {"level": {"enum": list(AUTHORITY_LEVELS)}},
    "domain": {"domain": {"type": "string", "maxLength": 60}},
    "title": {"title": {"type": "string", "maxLength": 100}},
    "read_url": {"read": {"type": "boolean"}},
}

_MAX_TOKENS: dict[SideQueryKind, int] = {
    # Room for the JSON answer (``{"needs_search": false}`` is ~8 tokens with a real
    # vocabulary, 18 with a small one) and a little whitespace.
    "action": 32,
    "query": 96,
    "authority": 32,
    "domain": 32,
    "title": 48,
    "read_url": 32,
}

_URL = re.compile(r"https?://[^\s<>\"')\]]+")


def _schema(kind: SideQueryKind) -> dict[str, Any]:
    properties = _SCHEMAS[kind]
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class SideQueryPrompt:
    """One side query's request: the transcript's prompt and the suffix after it."""

    kind: SideQueryKind
    text: str
    token_ids: list[int] | None
    shared_prefix_tokens: int | None
    """How many of ``token_ids`` are the transcript's own prompt."""
    suffix: str
    max_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)
    url: str | None = None


def is_deepseek_v4(profile: Profile) -> bool:
    """DeepSeek-V4 or V4.1: their encoders write the same task tokens at the same places."""
    template = profile.template
    if isinstance(template, DeepSeekV41Template):
        return True
    return isinstance(template, DeepSeekDsmlTemplate) and template.version == "v4"


def side_query_prompts(
    profile: Profile,
    engine: object,
    transcript: Transcript,
    kind: SideQueryKind,
    *,
    tools: Sequence[ToolSpec] = (),
    replay: ReplayPolicy | None = None,
    urls: Sequence[str] | None = None,
) -> list[SideQueryPrompt]:
    """The prompts of one side query (one per URL for ``read_url``, one otherwise).

    ``transcript`` is not modified. ``urls`` (``read_url`` only) defaults to the URLs in the
    last user message.
    """
    if kind not in SIDE_QUERY_KINDS:
        raise ConfigurationError(
            f"unknown side query {kind!r} (known: {', '.join(SIDE_QUERY_KINDS)})"
        )
    view = transcript.model_copy(deep=True)
    targets: list[str | None] = [None]
    if kind == "read_url":
        targets = list(urls if urls is not None else _urls_of(view))
        if not targets:
            return []
    if is_deepseek_v4(profile):
        return [_deepseek_prompt(profile, engine, view, kind, tools, replay, u) for u in targets]
    return [_instruction_prompt(profile, engine, view, kind, tools, replay, u) for u in targets]


def _urls_of(transcript: Transcript) -> list[str]:
    last = _last_user(transcript)
    if last is None:
        return []
    found = _URL.findall(transcript.messages[last].text)
    return list(dict.fromkeys(u.rstrip(".,;:") for u in found))


def _last_user(transcript: Transcript) -> int | None:
    for i in range(len(transcript.messages) - 1, -1, -1):
        if transcript.messages[i].role == "user":
            return i
    return None


def _main_prompt(
    profile: Profile,
    engine: object,
    transcript: Transcript,
    tools: Sequence[ToolSpec],
    replay: ReplayPolicy | None,
) -> tuple[str, list[int] | None]:
    """The prompt the next turn would send for ``transcript``, token-exact where the engine
    tokenizes (assistant turns replayed from the ids the model generated)."""
    specs = [dict(spec) for spec in tools]
    prompt = PromptBuilder(profile, engine, specs, replay=replay).next_prompt(transcript)
    return prompt.text, prompt.token_ids


def _extend(
    text: str, ids: list[int] | None, suffix: str, engine: object
) -> tuple[str, list[int] | None, int | None]:
    if ids is None:
        return text + suffix, None, None
    encode = getattr(engine, "encode")  # noqa: B009 - ids exist only where it does
    return text + suffix, ids + list(encode(suffix)), len(ids)


def _deepseek_prompt(
    profile: Profile,
    engine: object,
    transcript: Transcript,
    kind: SideQueryKind,
    tools: Sequence[ToolSpec],
    replay: ReplayPolicy | None,
    url: str | None,
) -> SideQueryPrompt:
    token = _DS_TOKENS[kind]
    max_tokens = _MAX_TOKENS[kind]
    if kind == "title":
        messages = transcript.messages
        if not messages or messages[-1].role != "assistant":
            raise SideQueryError(
                "DeepSeek-V4's title task follows an assistant answer; the transcript ends "
                f"with {messages[-1].role if messages else 'nothing'!r}",
                kind=kind,
            )
        text, ids = _main_prompt(profile, engine, transcript, tools, replay)
        if not text.endswith(EOS):  # the model stopped without its EOS text in the history
            text, ids, _ = _extend(text, ids, EOS, engine)
        full, full_ids, shared = _extend(text, ids, token, engine)
        return SideQueryPrompt(kind, full, full_ids, shared, token, max_tokens)
    last = _last_user(transcript)
    if last is None:
        raise SideQueryError(f"the {kind!r} task needs a user message", kind=kind)
    upto = Transcript(messages=transcript.messages[: last + 1])
    text, ids = _main_prompt(profile, engine, upto, tools, replay)
    if kind == "action":
        # The main prompt ends with <｜Assistant｜> and <think> (</think> in chat mode).
        full, full_ids, shared = _extend(text, ids, token, engine)
        return SideQueryPrompt(kind, full, full_ids, shared, token, max_tokens)
    template = profile.template
    base = template.render(Transcript(messages=upto.messages), tools, add_generation_prompt=False)
    if not text.startswith(base):
        raise ConfigurationError(
            f"profile {profile.name!r}: the prompt does not start with the rendered history"
        )
    generation_prompt = text[len(base) :]
    if ids is not None and generation_prompt:
        encode = getattr(engine, "encode")  # noqa: B009
        tail = list(encode(generation_prompt))
        ids = ids[: -len(tail)] if ids[-len(tail) :] == tail else list(encode(base))
    suffix = token if url is None else f"{DS_EXTRACTED_URL}{url}{token}"
    full, full_ids, shared = _extend(base, ids, suffix, engine)
    if url is not None and full_ids is not None and shared is not None:
        # The URL comes from the user's text: it stays text, whatever it contains.
        guard = guard_for(engine, getattr(engine, "encode", None))
        if guard is not None:
            full_ids = [
                *full_ids[:shared],
                *guard.encode(DS_EXTRACTED_URL),
                *guard.text_ids(url),
                *guard.encode(token),
            ]
    return SideQueryPrompt(kind, full, full_ids, shared, suffix, max_tokens, url=url)


def _instruction_prompt(
    profile: Profile,
    engine: object,
    transcript: Transcript,
    kind: SideQueryKind,
    tools: Sequence[ToolSpec],
    replay: ReplayPolicy | None,
    url: str | None,
) -> SideQueryPrompt:
    instruction = _INSTRUCTIONS[kind].replace("{url}", url or "")
    before_text, before_ids = _main_prompt(profile, engine, transcript, tools, replay)
    # The history as the cache holds it: reasoning the policy drops *now* stays dropped, and
    # the instruction (a new user message) does not make the policy drop more, which would
    # move the prompt away from the cached prefix.
    policy = replay or profile.replay
    if policy not in ("keep_all", "template_native"):
        view = replay_view(transcript, dropped_reasoning(transcript, policy, tools=bool(tools)))
        transcript, policy = Transcript(messages=list(view.messages)), "keep_all"
    asked = transcript.model_copy(deep=True)
    asked.messages.append(Message(role="user", content=[TextBlock(text=instruction)]))
    text, ids = _main_prompt(profile, engine, asked, tools, policy)
    shared: int | None = None
    if ids is not None and before_ids is not None:
        shared = common_prefix_len(ids, before_ids)
    suffix = text[common_prefix_len(text, before_text) :]
    extra = {"structured_outputs": {"json": _schema(kind)}}
    return SideQueryPrompt(kind, text, ids, shared, suffix, _MAX_TOKENS[kind], extra, url)


# -- parsing ----------------------------------------------------------------------------------

_YES = frozenset({"yes", "true", "search", "web_search", "websearch", "need", "needed", "1"})
_NO = frozenset(
    {"no", "false", "none", "direct", "answer", "no_search", "nosearch", "not", "0", "skip"}
)


def _clean(raw: str) -> str:
    text = raw.replace(EOS, "")
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def _json_field(text: str, key: str) -> object:
    """``key`` of the JSON object in ``text``; ``...`` (Ellipsis) when there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return ...
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return ...
    return value.get(key, ...) if isinstance(value, dict) else ...


def _boolean(kind: str, text: str, key: str, raw: str) -> bool:
    value = _json_field(text, key)
    if isinstance(value, bool):
        return value
    words = re.findall(r"[a-z_0-9]+", text.lower())
    if words and words[0] in _NO:
        return False
    if words and words[0] in _YES:
        return True
    raise SideQueryError(f"the {kind!r} answer is not a yes/no decision", kind=kind, raw=raw)


def _string(kind: str, text: str, key: str, raw: str) -> str:
    value = _json_field(text, key)
    if value is not ...:
        if not isinstance(value, str) or not value.strip():
            raise SideQueryError(f"the {kind!r} answer's {key!r} is empty", kind=kind, raw=raw)
        return value.strip()
    if text.lstrip().startswith("{"):
        raise SideQueryError(f"the {kind!r} answer is malformed JSON", kind=kind, raw=raw)
    line = text.strip().splitlines()[0].strip().strip("\"'") if text.strip() else ""
    if not line:
        raise SideQueryError(f"the {kind!r} answer is empty", kind=kind, raw=raw)
    return line


def parse_side_answer(kind: SideQueryKind, raw: str, *, url: str | None = None) -> SideQueryResult:
    """The typed result of one answer (``read_url``: one URL's decision). A malformed answer
    raises :class:`SideQueryError` with ``raw`` kept."""
    text = _clean(raw)
    if kind == "action":
        return ActionResult(raw=raw, needs_search=_boolean(kind, text, "needs_search", raw))
    if kind == "query":
        value = _json_field(text, "query")
        if value is ...:
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            if text.lstrip().startswith("{") or not lines:
                raise SideQueryError("the 'query' answer is empty or malformed", kind=kind, raw=raw)
            return QueryResult(raw=raw, query=lines[0], queries=lines)
        query = _string(kind, text, "query", raw)
        return QueryResult(raw=raw, query=query, queries=[query])
    if kind == "authority":
        return AuthorityResult(raw=raw, level=_string(kind, text, "level", raw).lower())
    if kind == "domain":
        return DomainResult(raw=raw, domain=_string(kind, text, "domain", raw))
    if kind == "title":
        return TitleResult(raw=raw, title=_string(kind, text, "title", raw))
    if kind == "read_url":
        read = _boolean(kind, text, "read", raw)
        key = url or ""
        return UrlsResult(raw=raw, urls_to_read=[key] if read else [], decisions={key: read})
    raise ConfigurationError(f"unknown side query {kind!r}")


# -- running ----------------------------------------------------------------------------------


async def _ask(
    engine: Engine,
    prompt: SideQueryPrompt,
    stop: Sequence[str],
    hints: AgentHints | None,
    session_id: str,
) -> tuple[str, Usage]:
    request = GenerationRequest(
        prompt=prompt.text,
        prompt_token_ids=prompt.token_ids,
        max_tokens=prompt.max_tokens,
        temperature=0.0,
        stop=tuple(stop),
        request_id=f"side-{prompt.kind}-{uuid.uuid4().hex[:12]}",
        extra=dict(prompt.extra),
        hints=hints,
        session_id=session_id,
    )
    pieces: list[str] = []
    usage = Usage()
    async with aclosing(engine.generate(request)) as chunks:
        async for chunk in chunks:
            pieces.append(chunk.text)
            if chunk.finish_reason is not None and chunk.usage is not None:
                usage = chunk.usage
    return "".join(pieces), usage


async def run_side_query(
    engine: Engine,
    profile: Profile,
    transcript: Transcript,
    kind: SideQueryKind,
    *,
    tools: Sequence[ToolSpec] = (),
    replay: ReplayPolicy | None = None,
    urls: Sequence[str] | None = None,
    hints: AgentHints | None = None,
    max_tokens: int | None = None,
    session_id: str | None = None,
) -> SideQueryResult:
    """Ask one side query about ``transcript`` (unchanged) and return its typed result.

    ``session_id``: the conversation's, so an engine that routes by it sends the query to
    the worker holding the conversation's cache; default: the one the agent's runs on this
    transcript use (:func:`agentkit._model_turn.conversation_id` of its start and tools).

    Raises :class:`SideQueryError` for an answer that cannot be read; engine failures
    propagate as :class:`~agentkit.errors.EngineError`.
    """
    prompts = side_query_prompts(
        profile, engine, transcript, kind, tools=tools, replay=replay, urls=urls
    )
    if kind == "read_url" and not prompts:
        return UrlsResult(urls_to_read=[])
    session = session_id or conversation_id(transcript, tools)
    answers: list[tuple[str, Usage] | None] = [None] * len(prompts)

    async def one(i: int, prompt: SideQueryPrompt) -> None:
        if max_tokens is not None:
            prompt = SideQueryPrompt(
                prompt.kind, prompt.text, prompt.token_ids, prompt.shared_prefix_tokens,
                prompt.suffix, max_tokens, prompt.extra, prompt.url,
            )  # fmt: skip
        answers[i] = await _ask(engine, prompt, profile.stop, hints, session)

    async with anyio.create_task_group() as group:
        for i, prompt in enumerate(prompts):
            group.start_soon(one, i, prompt)
    results = []
    for prompt, answer in zip(prompts, answers, strict=True):
        assert answer is not None
        raw, usage = answer
        result = parse_side_answer(kind, raw, url=prompt.url)
        results.append(
            result.model_copy(
                update={
                    "prompt_tokens": usage.prompt_tokens,
                    "cached_prompt_tokens": usage.cached_prompt_tokens,
                    "output_tokens": usage.output_tokens,
                    "shared_prefix_tokens": prompt.shared_prefix_tokens,
                }
            )
        )
    if kind != "read_url":
        return results[0]
    return _merge_urls(results)


def _merge_urls(results: Sequence[SideQueryResult]) -> UrlsResult:
    decisions: dict[str, bool] = {}
    for result in results:
        assert isinstance(result, UrlsResult)
        decisions.update(result.decisions)
    shared = [r.shared_prefix_tokens for r in results if r.shared_prefix_tokens is not None]
    return UrlsResult(
        raw="\n".join(r.raw for r in results),
        urls_to_read=[u for u, read in decisions.items() if read],
        decisions=decisions,
        prompt_tokens=sum(r.prompt_tokens for r in results),
        cached_prompt_tokens=sum(r.cached_prompt_tokens for r in results),
        output_tokens=sum(r.output_tokens for r in results),
        shared_prefix_tokens=min(shared) if shared else None,
    )


async def run_side_queries(
    engine: Engine,
    profile: Profile,
    transcript: Transcript,
    kinds: Sequence[SideQueryKind],
    *,
    tools: Sequence[ToolSpec] = (),
    replay: ReplayPolicy | None = None,
    urls: Sequence[str] | None = None,
    hints: AgentHints | None = None,
    session_id: str | None = None,
) -> dict[SideQueryKind, SideQueryResult | SideQueryError]:
    """Ask several side queries about ``transcript`` concurrently.

    Each kind maps to its result, or to the :class:`SideQueryError` its answer gave (one
    malformed answer does not cancel the others). Engine failures propagate.
    """
    out: dict[SideQueryKind, SideQueryResult | SideQueryError] = {}

    async def one(kind: SideQueryKind) -> None:
        try:
            out[kind] = await run_side_query(
                engine, profile, transcript, kind,
                tools=tools, replay=replay, urls=urls, hints=hints, session_id=session_id,
            )  # fmt: skip
        except SideQueryError as error:
            out[kind] = error

    async with anyio.create_task_group() as group:
        for kind in dict.fromkeys(kinds):
            group.start_soon(one, kind)
    return {kind: out[kind] for kind in dict.fromkeys(kinds)}
