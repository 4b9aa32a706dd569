"""The ``agentkit`` command line.

``agentkit parse``  parse raw model output with a format's parsers, under a chosen chunking
``agentkit profiles``  list the model profiles in the catalog
"""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.parsing import create_parser
from agentkit.profiles import get_profile, list_profiles
from agentkit.transcript import ContentBlock, ReasoningBlock, TextBlock, ToolCallBlock

__all__ = ["main"]

USAGE_ERROR = 2


def _chunking(spec: str) -> tuple[str, int]:
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


def _parse_command(args: argparse.Namespace) -> int:
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


def _profiles_command(args: argparse.Namespace) -> int:
    profiles = list_profiles()
    if args.json:
        rows = [
            {
                "name": p.name,
                "aliases": list(p.aliases),
                "reasoning_parser": p.reasoning,
                "tool_parser": p.tool_format,
                "description": p.description,
            }
            for p in profiles
        ]
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for p in profiles:
        print(
            f"{p.name:<14} reasoning={p.reasoning or '-':<12} tools={p.tool_format or '-':<12}"
            f" {p.description}"
        )
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentkit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    parse = commands.add_parser("parse", help="parse raw model output into blocks (JSON)")
    parse.add_argument("--tool-parser", help="tool-call format, e.g. hermes, qwen3_coder")
    parse.add_argument("--reasoning-parser", help="reasoning format, e.g. think, deepseek_r1")
    parse.add_argument("--profile", help="take both parsers from a model profile")
    parse.add_argument(
        "--chunking",
        type=_chunking,
        default=("whole", 0),
        help="whole (default), bytes:N or random:SEED",
    )
    parse.add_argument("--tools", help="JSON file of tool specs, for schema-typed formats")
    parse.add_argument("file", nargs="?", default="-", help="raw output file, or - for stdin")
    parse.set_defaults(handler=_parse_command)

    profiles = commands.add_parser("profiles", help="list the model profiles")
    profiles.add_argument("--json", action="store_true", help="print JSON")
    profiles.set_defaults(handler=_profiles_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except ConfigurationError as error:
        print(f"agentkit: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as error:
        print(f"agentkit: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
