"""A model's own Jinja chat template, for the ``template_native`` replay policy.

The template gets the transcript as the OpenAI-style messages a client sends (``content``,
``reasoning_content``, ``tool_calls`` with argument objects, ``tool`` messages) and decides
itself what to keep, with its own defaults (as a server that renders it would):
``enable_thinking`` is passed, and any other variable the caller sets. It is rendered as
``transformers``' ``apply_chat_template`` renders it (a sandboxed Jinja environment with
``trim_blocks``/``lstrip_blocks``, ``tojson`` without HTML escaping, ``raise_exception``,
``strftime_now``), from a local file, so no hub access is needed.

An assistant message with reasoning between its calls becomes several consecutive assistant
messages, one per reasoning block, so interleaved reasoning stays interleaved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from agentkit.errors import ConfigurationError
from agentkit.profiles._profile import ToolSpec
from agentkit.profiles._template_loops import LOOP_RUNNER, LoopPlan, memoized_template
from agentkit.profiles._template_memo import RenderMemo
from agentkit.transcript import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["HFChatTemplate", "chat_messages"]


def chat_messages(
    transcript: Transcript,
    *,
    reasoning_key: str = "reasoning_content",
    json_arguments: bool = False,
    memo: RenderMemo | None = None,
) -> list[dict[str, Any]]:
    """The transcript as OpenAI-style chat messages (reasoning under ``reasoning_key``:
    ``reasoning_content`` as vLLM and most templates read it; gpt-oss's reads ``thinking``).
    Call arguments are objects, as transformers' templates expect, or with ``json_arguments``
    the JSON text an OpenAI client sends (what DeepSeek-V3.1's template concatenates).
    With ``memo``, each message's chat messages are built once and are the same objects in
    every later call (what lets a memoized render reuse their output)."""
    out: list[dict[str, Any]] = []
    for message in transcript.messages:
        if memo is None:
            out.extend(_message_dicts(message, reasoning_key, json_arguments))
        else:
            out.extend(memo.chat_messages(message, reasoning_key, json_arguments, _message_dicts))
    return out


def _message_dicts(
    message: Message, reasoning_key: str, json_arguments: bool
) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": block.call_id,
                "name": block.name,
                "content": block.content,
            }
            for block in message.content
            if isinstance(block, ToolResultBlock)
        ]
    if message.role == "assistant":
        return _assistant_messages(message, reasoning_key, json_arguments)
    return [{"role": message.role, "content": message.text}]


def _assistant_messages(
    message: Message, reasoning_key: str, json_arguments: bool
) -> list[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for block in message.content:
        if isinstance(block, ReasoningBlock) or current is None:
            if current is not None:
                pieces.append(current)
            current = {"role": "assistant", "content": ""}
        if isinstance(block, ReasoningBlock):
            current[reasoning_key] = block.text
        elif isinstance(block, TextBlock):
            current["content"] += block.text
        elif isinstance(block, ToolCallBlock):
            arguments: Any = block.arguments
            if json_arguments:
                arguments = json.dumps(arguments, ensure_ascii=False)
            call = {"name": block.name, "arguments": arguments}
            current.setdefault("tool_calls", []).append(
                {"id": block.id, "type": "function", "function": call}
            )
    if current is not None:
        pieces.append(current)
    for piece in pieces:
        piece["content"] = piece["content"].strip("\n")
    return pieces or [{"role": "assistant", "content": ""}]


@dataclass(frozen=True)
class HFChatTemplate:
    """The chat template at ``source``: a ``.jinja`` file, or a model directory with
    ``chat_template.jinja`` or ``tokenizer_config.json``. ``profile`` names the profile in
    error messages; ``thinking`` sets ``enable_thinking``; ``variables`` are passed to every
    rendering (e.g. ``{"reasoning_effort": "high"}``), after the special tokens a
    ``tokenizer_config.json`` beside the template names (``bos_token``, ``eos_token``, ...), as
    transformers passes them; ``reasoning_key`` is the message field the template reads
    reasoning from."""

    source: str | Path
    profile: str = "?"
    thinking: bool = True
    variables: Mapping[str, Any] = field(default_factory=dict)
    reasoning_key: str = "reasoning_content"

    def render(
        self,
        transcript: Transcript,
        tools: Sequence[ToolSpec],
        *,
        add_generation_prompt: bool = True,
        thinking: bool = True,
        memo: RenderMemo | None = None,
    ) -> str:
        """The prompt for ``transcript``. ``memo`` (one per conversation, e.g. a prompt
        builder's) makes a render after appended messages reuse the output of the template's
        message loops for the earlier ones, wherever the template's syntax proves it the same
        (:mod:`agentkit.profiles._template_memo`); the text is the same either way."""
        template, origin, specials = self._template()
        options: dict[str, Any] = {**specials, "enable_thinking": thinking and self.thinking}
        key = (str(self.source), self.profile)
        as_json = key in _JSON_ARGUMENTS
        variables: dict[str, Any] = {}
        if memo is not None:
            memoized, plans = self._memoized(template)
            if memoized is not None:
                template = memoized
                variables[LOOP_RUNNER] = memo.runner(memoized.environment, plans)
        while True:
            messages = chat_messages(
                transcript, reasoning_key=self.reasoning_key, json_arguments=as_json, memo=memo
            )
            try:
                return str(
                    template.render(
                        messages=messages,
                        tools=(
                            memo.tool_dicts(tools)
                            if memo is not None
                            else [dict(t) for t in tools] or None
                        ),
                        add_generation_prompt=add_generation_prompt,
                        **{**options, **self.variables},
                        **variables,
                    )
                )
            except TypeError as error:
                # A template that writes call arguments as text (DeepSeek-V3.1's concatenates
                # them) gets the JSON an OpenAI client sends, from then on.
                if as_json or not _has_calls(transcript):
                    raise self._failed(origin, error) from error
                as_json = True
                _JSON_ARGUMENTS.add(key)
            except Exception as error:  # a template's raise_exception, or a bug in it
                raise self._failed(origin, error) from error

    def _failed(self, origin: Path, error: Exception) -> ConfigurationError:
        return ConfigurationError(
            f"profile {self.profile!r}: the chat template from {origin} failed: {error}"
        )

    def _template(self) -> tuple[Any, Path, dict[str, str]]:
        cached = _COMPILED.get((str(self.source), self.profile))
        if cached is not None:
            return cached
        path, text = self._read()
        try:
            compiled = _environment().from_string(text)
        except Exception as error:
            raise ConfigurationError(
                f"profile {self.profile!r}: the chat template in {path} does not compile: {error}"
            ) from error
        entry = (compiled, path, special_tokens(path.parent / "tokenizer_config.json"))
        _COMPILED[(str(self.source), self.profile)] = entry
        return entry

    def _memoized(self, template: Any) -> tuple[Any, list[LoopPlan]]:
        """The template with its message loops rewritten to reuse earlier iterations' output
        (``None`` where no loop can be)."""
        key = (str(self.source), self.profile)
        cached = _MEMOIZED.get(key)
        if cached is None or cached[0] is not template:
            try:
                memoized, plans = memoized_template(template.environment, self._read()[1])
            except Exception:  # a rewrite the compiler refuses: render as it is
                memoized, plans = None, []
            cached = (template, memoized, plans)
            _MEMOIZED[key] = cached
        return cached[1], cached[2]

    def _read(self) -> tuple[Path, str]:
        source = Path(self.source)
        candidates = (
            [source]
            if source.suffix in (".jinja", ".j2", ".json")
            else [source / "chat_template.jinja", source / "tokenizer_config.json"]
        )
        for path in candidates:
            if not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
                if path.suffix != ".json":
                    return path, text
                value = json.loads(text).get("chat_template")
            except (OSError, ValueError, AttributeError) as error:
                raise ConfigurationError(
                    f"profile {self.profile!r}: cannot read the chat template in {path}: {error}"
                ) from error
            if isinstance(value, list):  # named templates: the default one
                value = next((t.get("template") for t in value if t.get("name") == "default"), None)
            if isinstance(value, str):
                return path, value
            raise ConfigurationError(f"profile {self.profile!r}: {path} has no chat_template")
        tried = ", ".join(str(p) for p in candidates)
        raise ConfigurationError(
            f"profile {self.profile!r}: no chat template found (looked for {tried}); give the "
            "path of the model's chat_template.jinja or tokenizer_config.json"
        )


_COMPILED: dict[tuple[str, str], tuple[Any, Path, dict[str, str]]] = {}
_MEMOIZED: dict[tuple[str, str], tuple[Any, Any, list[LoopPlan]]] = {}
"""Each compiled template and its memoized form (``None``: none of its loops qualifies)."""
_JSON_ARGUMENTS: set[tuple[str, str]] = set()
"""Templates that take call arguments as JSON text."""


def _has_calls(transcript: Transcript) -> bool:
    return any(m.tool_calls for m in transcript.messages if m.role == "assistant")


_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")


def special_tokens(config: Path) -> dict[str, str]:
    """The named special tokens of a ``tokenizer_config.json`` (``{}`` without one), as
    transformers hands them to chat templates: ``{"bos_token": "<s>", ...}``."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for key in _SPECIAL_KEYS:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, dict):  # {"content": "<s>", "lstrip": false, ...}
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def _environment() -> Any:
    try:
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as error:  # pragma: no cover - jinja2 is a dependency
        raise ConfigurationError("chat templates need jinja2: pip install jinja2") from error

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    class Sandbox(ImmutableSandboxedEnvironment):
        """transformers' sandbox, with each attribute's verdict remembered per type: the
        checks (a leading underscore, an internal attribute, a method that mutates a known
        container) read only the object's type and the attribute's name, and they were over
        half the time of rendering a long conversation."""

        _verdicts: ClassVar[dict[tuple[type, str], bool]] = {}
        _dict_attributes = frozenset(dir(dict))

        def getattr(self, obj: Any, attribute: str) -> Any:
            # ``message.content`` on a dict: the sandbox tries the attribute first and gets
            # there through an AttributeError; the item is what it returns in the end.
            if type(obj) is dict and attribute not in self._dict_attributes:
                try:
                    return obj[attribute]
                except KeyError:
                    pass
            return super().getattr(obj, attribute)

        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            key = (type(obj), attr)
            verdict = self._verdicts.get(key)
            if verdict is None:
                verdict = bool(super().is_safe_attribute(obj, attr, value))
                self._verdicts[key] = verdict
            return verdict

    env = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
