"""The ``agentkit`` commands that inspect rather than run: ``parse`` (raw model output through
a format's parsers, under a chosen chunking), ``profiles``, ``check-template`` (a profile
against a model's own chat template) and ``check-replay`` (how much of each prompt a prefix
cache reuses). ``agentkit.cli`` builds the parser and dispatches to them."""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.parsing import create_parser
from agentkit.profiles import get_profile, list_profiles
from agentkit.transcript import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = [
    "check_replay_command",
    "check_template_command",
    "chunking",
    "parse_command",
    "profiles_command",
]


def chunking(spec: str) -> tuple[str, int]:
    if spec == "whole":
        return "whole", 0
    kind, _, value = spec.partition(":")
    if kind in {"bytes", "random"} and value.isdigit() and (kind == "random" or int(value) > 0):
        return kind, int(value)
    raise argparse.ArgumentTypeError(
        f"invalid chunking {spec!r}: use whole, bytes:N (N > 0) or random:SEED"
    )


def _deltas(data: bytes, kind: str, value: int) -> Iterator[str]:
    """Split the UTF-8 input as a stream would arrive: partial characters are held by an
    incremental decoder, exactly as a client decoding network bytes would."""
    if kind == "whole":
        yield data.decode("utf-8", errors="replace")
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rng = random.Random(value)
    pos = 0
    while pos < len(data):
        size = value if kind == "bytes" else rng.randint(1, 16)
        text = decoder.decode(data[pos : pos + size])
        pos += size
        if text:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def _block_json(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, ReasoningBlock):
        return {"type": "reasoning", "text": block.text}
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolCallBlock):
        if block.error is not None:
            return {"type": "error", "name": block.name, "error": block.error, "raw": block.raw}
        return {"type": "tool_call", "name": block.name, "arguments": block.arguments}
    raise TypeError(f"unexpected block in model output: {block.type}")


def _load_tool_schemas(path: str) -> dict[str, Any]:
    """Tool name -> parameters schema, from a JSON list of tool specs (OpenAI-style
    ``{"type": "function", "function": {...}}`` or bare ``{"name": ..., "parameters": ...}``)."""
    with open(path, encoding="utf-8") as f:
        try:
            specs = json.load(f)
        except ValueError as error:
            raise ConfigurationError(f"--tools {path}: not valid JSON: {error}") from None
    schemas: dict[str, Any] = {}
    for spec in specs if isinstance(specs, list) else [None]:
        function = spec.get("function", spec) if isinstance(spec, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ConfigurationError(
                f'--tools {path}: expected a JSON list of tool specs, each with a "name"'
            )
        schemas[function["name"]] = function.get("parameters", {})
    return schemas


def parse_command(args: argparse.Namespace) -> int:
    reasoning: str | None = None
    tools: str | None = None
    if args.profile:
        profile = get_profile(args.profile)
        reasoning, tools = profile.reasoning, profile.tool_format
    reasoning = args.reasoning_parser or reasoning
    tools = args.tool_parser or tools
    if tools is None and reasoning is None:
        raise ConfigurationError("give --tool-parser, --reasoning-parser or --profile")
    schemas = _load_tool_schemas(args.tools) if args.tools else {}
    parser = create_parser(reasoning, tools, tool_schemas=schemas)
    source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    with source:
        data = source.read()
    kind, value = args.chunking
    for delta in _deltas(data, kind, value):
        parser.feed(delta)
    parser.finish()
    json.dump({"blocks": [_block_json(b) for b in parser.blocks]}, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def profiles_command(args: argparse.Namespace) -> int:
    profiles = list_profiles()
    if args.json:
        rows = [
            {
                "name": p.name,
                "aliases": list(p.aliases),
                "reasoning_parser": p.reasoning,
                "tool_parser": p.tool_format,
                "replay": p.replay,
                "truncation": (
                    None
                    if p.truncation is None
                    else {"mode": p.truncation.mode, "limit": p.truncation.limit}
                ),
                "context_window": p.context_window,
                "compaction_threshold": p.compaction_threshold,
                "stop": list(p.stop),
                "special_tokens": list(p.special_tokens),
                "tokenizer": p.tokenizer,
                "description": p.description,
            }
            for p in profiles
        ]
        json.dump(rows, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for p in profiles:
        window = f"{p.context_window // 1024}K" if p.context_window else "-"
        print(
            f"{p.name:<14} reasoning={p.reasoning or '-':<13} tools={p.tool_format or '-':<12}"
            f" replay={p.replay:<20} context={window:<6} {p.description}"
        )
    return 0


def check_template_command(args: argparse.Namespace) -> int:
    from agentkit.profiles import HFChatTemplate, match_profile
    from agentkit.template_check import check

    profile = get_profile(args.profile) if args.profile else match_profile(args.model_dir)
    if profile is None:
        raise ConfigurationError(
            f"no profile matches {args.model_dir}; name one with --profile (agentkit profiles)"
        )
    variables: dict[str, str] = {}
    for item in args.var or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigurationError(f"--var takes NAME=VALUE, not {item!r}")
        variables[name] = value
    reference = HFChatTemplate(
        args.model_dir, profile=f"the template of {args.model_dir}", variables=variables
    )
    reference._read()
    checks = check(profile, lambda c: reference.render(c.transcript, c.tools, thinking=c.thinking))
    differing = [k for k in checks if k.difference is not None]
    if args.json:
        rows: list[dict[str, Any]] = []
        for k in checks:
            row: dict[str, Any] = {
                "conversation": k.conversation.name,
                "equal": k.difference is None,
            }
            if k.refused is not None:
                row.update(equal=None, refused=k.refused)
            elif k.difference is not None:
                d = k.difference
                row.update(offset=d.offset, line=d.line, template=d.expected, profile=d.actual)
            rows.append(row)
        out = {"profile": profile.name, "model_dir": args.model_dir, "conversations": rows}
        json.dump(out, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 1 if differing else 0
    print(f"profile {profile.name} against the chat template of {args.model_dir}")
    for k in checks:
        name = k.conversation.name
        if k.refused is not None:
            print(f"  refused  {name}: the template cannot render it ({k.refused})")
        elif k.difference is None:
            print(f"  equal    {name}")
        else:
            print(f"  DIFFERS  {name}: {k.difference.describe()}")
    compared = sum(k.refused is None for k in checks)
    if differing:
        documented = "; ".join(profile.deviations)
        print(
            f"{len(differing)} of {compared} conversations differ"
            + (f"; the profile's documented differences: {documented}" if documented else "")
        )
        return 1
    print(f"all {compared} conversations the template renders are equal")
    return 0


def check_replay_command(args: argparse.Namespace) -> int:
    import anyio

    from agentkit.profiles._replay import validate_replay_policy
    from agentkit.replay_check import check_replay, load_tokenizer

    policy = validate_replay_policy(args.policy) if args.policy else None
    tokenizer = load_tokenizer(args.tokenizer, args.profile) if args.tokenizer else None
    report = anyio.run(
        lambda: check_replay(args.profile, turns=args.turns, policy=policy, tokenizer=tokenizer)
    )
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0 if report.ok else 1
    print(f"profile {report.profile}, replay policy {report.policy}, tokenizer: {report.tokenizer}")
    print(f"{'turn':>4} {'prompt':>8} {'reused':>8} {'of prev':>8}  status")
    for t in report.turns:
        if t.divergence is None:
            status = "extends the previous prompt + output" if t.turn > 1 else "first prompt"
        elif t.reason is not None:
            status = f"diverges as intended: {t.reason}"
        else:
            status = "UNEXPLAINED DIVERGENCE"
        counts = f"{t.turn:>4} {t.prompt_tokens:>8} {t.reused_tokens:>8} {t.previous_tokens:>8}"
        print(f"{counts}  {status}")
        if t.divergence is not None:
            print(f"{'':>33}{t.divergence}")
    broken = sum(not t.explained for t in report.turns)
    print("ok: every break is explained" if report.ok else f"FAILED: {broken} unexplained break(s)")
    return 0 if report.ok else 1
