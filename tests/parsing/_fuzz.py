"""Marker soup for every parser: the pieces, the format pairs and the chunkings that the
"no parser ever raises" property (``test_parsers_never_raise.py``) and its sweep draw from.

Run as a script for a bigger sweep than the fast suite can afford::

    .venv/bin/python tests/parsing/_fuzz.py [SECONDS] [SEED]

It prints each failing (pair, output, chunking) it finds, shortest first.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from _parsing_helpers import check

from agentkit.parsing import ReasoningSyntax, StreamParser, create_parser
from agentkit.parsing.reasoning import get_reasoning_syntax, reasoning_syntax_names
from agentkit.parsing.tools import tool_syntax_names
from agentkit.profiles import list_profiles
from agentkit.transcript import ContentBlock, Message, Transcript

__all__ = ["PAIRS", "PIECES", "Pair", "chunkings", "parse", "soup"]

MARKERS = (
    # reasoning
    "<think>",
    "</think>",
    "◁think▷",
    "◁/think▷",
    "[THINK]",
    "[/THINK]",
    "<seed:think>",
    "</seed:think>",
    # Hermes, Qwen3-Coder, GLM
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    # MiniMax-M2, DSML
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<invoke",
    "</invoke>",
    "<parameter",
    ' name="',
    '" string="true"',
    '" string="false"',
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<｜DSML｜tool_calls>",
    "</｜DSML｜tool_calls>",
    "<｜DSML｜ calls>",
    "</｜DSML｜ calls>",
    "<｜DSML｜invoke",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter",
    "</｜DSML｜parameter>",
    "<｜DSML｜ invoke",
    "<｜DSML｜ parameter",
    "｜DSML｜",
    # DeepSeek V3, Kimi K2
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "function",
    "```json\n",
    "```",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "functions.",
    "functions.f:0",
    ":1",
    # Llama 3, Mistral, Nemotron, pythonic
    "<|python_tag|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "[f(x=1)]",
    "f(",
    "x=",
    ")",
    # Harmony
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|constrain|>",
    "<|return|>",
    "<|call|>",
    "analysis",
    "commentary",
    "final",
    " to=functions.f",
    "json",
    "assistant",
)

JSON_PIECES = (
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    "\\",
    '{"name": "f", "arguments": {"x": 1}}',
    '{"name": "f", "parameters": ',
    '{"name": ',
    '"name"',
    '"arguments"',
    '"f"',
    '"x"',
    "1",
    "true",
    "null",
    '"Pa',
    "{}",
    '"\\ud800"',
    "\\ud83d",
    "\\ude00",
)

TEXT_PIECES = (
    "\n",
    "\n\n",
    " ",
    "  ",
    "<",
    "</",
    ">",
    "=",
    "x",
    "f",
    "read_file",
    "Oslo",
    "é",
    "🌍",
)


def _fragments(marker: str) -> list[str]:
    """The marker's proper prefixes and suffixes of two characters and more."""
    return [marker[:i] for i in range(2, len(marker))] + [
        marker[i:] for i in range(1, len(marker) - 1)
    ]


FRAGMENTS = tuple(sorted({f for m in MARKERS for f in _fragments(m)} - set(MARKERS)))

FILLERS = (
    "lorem ipsum " * 9,
    "x" * 260,
    "a\n" * 140,
    "word " * 110,
    "y" * 520,
    "z" * 1030,
    "[" * 1000 + "]" * 1000,
    '{"a": ' * 70 + "1" + "}" * 70,
)
"""Long plain text, to pass the length limits on names, tags and headers; deep nesting."""

_TWO_CALLS = (
    ("read_file", {"path": "src/app.py", "limit": 20}),
    ("get_weather", {"city": "Oslo", "metric": True}),
)
_HARMONY = (
    "<|channel|>analysis<|message|>Check.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>'
    "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
)


def _rendered() -> dict[str, str]:
    """Two well-formed calls in every tool format (by name), and a Harmony turn."""
    from agentkit.parsing.tools import get_tool_syntax
    from agentkit.transcript import ToolCallBlock

    two = [ToolCallBlock(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(_TWO_CALLS)]
    rendered = {name: get_tool_syntax(name).render(two) for name in tool_syntax_names()}
    rendered["harmony"] = _HARMONY
    return rendered


RENDERED = _rendered()
_OUTPUTS = tuple(sorted(set(RENDERED.values())))
_TOKEN = re.compile(r"<[^<>]*>|\[[A-Z_/]+\]|\n|[^<\[\n]+|.", re.DOTALL)


def tokens(output: str) -> list[str]:
    """``output`` cut into tag-sized pieces (tags, bracketed markers, newlines, the rest)."""
    return _TOKEN.findall(output)


PIECES = MARKERS + JSON_PIECES + TEXT_PIECES + FRAGMENTS
"""Everything a soup is made of: every format's markers, their fragments, JSON, text."""


def soup(
    rng: random.Random, size: int, reasoning: str | None = None, tools: str | None = None
) -> str:
    """Marker soup: pieces of every kind in any order, or well-formed output (reasoning and
    calls, mostly of the pair's own formats) cut into tag-sized pieces and mutated: pieces
    dropped, doubled, inserted from the soup, or the output cut short."""
    if rng.random() < 0.4:
        kinds = (MARKERS, JSON_PIECES, TEXT_PIECES, FRAGMENTS, FILLERS, _OUTPUTS)
        weights = (40, 20, 20, 15, 2, 3)
        return "".join(rng.choice(rng.choices(kinds, weights)[0]) for _ in range(size))
    parts: list[str] = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.5 and tools in RENDERED:
            parts.append(RENDERED[tools])
        elif roll < 0.75 and reasoning is not None:
            syntax = _reasoning_syntax(reasoning)
            parts.append(
                syntax.render(rng.choice(("Let me think.", "", "\n\nhm\n"))) if syntax else ""
            )
        elif roll < 0.85:
            parts.append(rng.choice(("Sure.", "\n\n", "The answer is 4.", rng.choice(FILLERS))))
        else:
            parts.append(rng.choice(_OUTPUTS))
    pieces = [t for part in parts for t in tokens(part)]
    for _ in range(rng.randint(0, 6)):
        at = rng.randrange(len(pieces) + 1)
        action = rng.randrange(5)
        if action == 0 and at < len(pieces):
            del pieces[at]
        elif action == 1 and at < len(pieces):
            pieces.insert(at, pieces[at])
        elif action in (2, 3):
            kind = rng.choice((MARKERS, FRAGMENTS, JSON_PIECES, TEXT_PIECES, FILLERS))
            pieces.insert(at, rng.choice(kind))
        else:
            pieces = pieces[: max(at, 1)]
    return "".join(pieces)


def _reasoning_syntax(name: str) -> ReasoningSyntax | None:
    return None if name == "harmony" else get_reasoning_syntax(name)


SCHEMAS = {
    "f": {"type": "object", "properties": {"x": {"type": "integer"}}},
    "read_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    },
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "metric": {"type": "boolean"}},
    },
}


@dataclass(frozen=True, slots=True)
class Pair:
    """One way to build a parser: format names and the options a profile or caller passes."""

    reasoning: str | None
    tools: str | None
    schemas: bool = False
    thinking: bool = True
    calls_in_reasoning: str = "end_reasoning"

    def make(self) -> StreamParser:
        ids = itertools.count()
        return create_parser(
            self.reasoning,
            self.tools,
            tool_schemas=SCHEMAS if self.schemas else {},
            calls_in_reasoning="error" if self.calls_in_reasoning == "error" else "end_reasoning",
            id_factory=lambda: f"call_{next(ids)}",
            thinking=self.thinking,
        )


def _pairs() -> tuple[Pair, ...]:
    """Every profile's parser (tools offered or not, thinking on and off where it switches),
    and every reasoning x tool combination the factory builds (one name per syntax)."""
    pairs: dict[Pair, None] = {}
    for profile in list_profiles():
        for tools in (profile.tool_format, None):
            for schemas in (False, True):
                for thinking in (True, False) if profile.thinking_switch else (True,):
                    pairs[
                        Pair(
                            profile.reasoning,
                            tools,
                            schemas,
                            thinking,
                            profile.calls_in_reasoning,
                        )
                    ] = None
    reasoning = _distinct(reasoning_syntax_names(), _reasoning_key)
    tools = _distinct(tool_syntax_names(), _tool_key)
    for r in [None, *reasoning]:
        for t in [None, *tools]:
            for calls_in_reasoning in ("end_reasoning", "error"):
                pairs[Pair(r, t, schemas=t is not None, calls_in_reasoning=calls_in_reasoning)] = (
                    None
                )
                if r is not None:
                    pairs[Pair(r, t, thinking=False, calls_in_reasoning=calls_in_reasoning)] = None
    pairs[Pair("harmony", "harmony")] = None
    pairs[Pair("harmony", "harmony", schemas=True)] = None
    return tuple(pairs)


def _reasoning_key(name: str) -> object:
    from agentkit.parsing.reasoning import get_reasoning_syntax

    return get_reasoning_syntax(name)


def _tool_key(name: str) -> object:
    from agentkit.parsing.tools import get_tool_syntax

    return id(get_tool_syntax(name))


def _distinct(names: Sequence[str], key: Callable[[str], object]) -> list[str]:
    seen: dict[object, str] = {}
    for name in names:
        seen.setdefault(key(name), name)
    return list(seen.values())


PAIRS = _pairs()


def chunkings(text: str, rng: random.Random, *, every_split: bool) -> Iterator[list[str]]:
    """One feed, a character at a time, a split before the last character, a split at each
    position (``every_split``) and a few random token-like splits."""
    yield [text]
    yield list(text)
    if len(text) > 1:
        yield [text[:-1], text[-1:]]
    if every_split:
        for i in range(1, len(text)):
            yield [text[:i], text[i:]]
    for _ in range(3):
        cuts = [0]
        while cuts[-1] < len(text):
            cuts.append(cuts[-1] + rng.randint(1, 12))
        yield [text[a:b] for a, b in itertools.pairwise(cuts)]


def parse(pair: Pair, chunks: Sequence[str]) -> list[ContentBlock]:
    parser = pair.make()
    for chunk in chunks:
        parser.feed(chunk)
    parser.finish()
    return parser.blocks


def _describe(text: str, chunks: Sequence[str]) -> str:
    if len(chunks) == 1:
        return "one feed"
    if len(chunks) == len(text) and len(text) > 2:
        return "a character at a time"
    if len(chunks) == 2:
        return f"split at {len(chunks[0])}"
    return f"random split {[len(c) for c in chunks]}"


def _failure(pair: Pair, text: str, chunks: Sequence[str]) -> str | None:
    """What is wrong with parsing ``text`` as ``chunks`` (``None``: nothing)."""
    try:
        parse(pair, chunks)
    except Exception as error:
        where = traceback.extract_tb(error.__traceback__)[-1]
        name = where.filename.rsplit("/", 1)[-1]
        return f"{type(error).__name__}: {error} @ {name}:{where.lineno}"
    try:
        blocks = check(pair.make, text, chunks)
    except AssertionError as error:
        where = traceback.extract_tb(error.__traceback__)[-1]
        return f"invariant @ line {where.lineno}: {str(error)[:80]!r}"
    transcript = Transcript(messages=[Message(role="assistant", content=blocks)])
    try:
        Transcript.model_validate_json(transcript.model_dump_json())
    except Exception as error:
        return f"the blocks cannot be saved: {type(error).__name__}"
    return None


def _sweep(seconds: float, seed: int) -> int:
    warnings.simplefilter("error")  # as the test suite runs
    rng = random.Random(seed)
    failures: dict[str, tuple[str, Pair, list[str], set[Pair]]] = {}
    deadline = time.monotonic() + seconds
    parses = 0
    while time.monotonic() < deadline:
        pair = rng.choice(PAIRS)
        text = soup(rng, rng.randint(1, 40), pair.reasoning, pair.tools)
        for chunks in chunkings(text, rng, every_split=len(text) < 80):
            parses += 1
            kind = _failure(pair, text, chunks)
            if kind is None:
                continue
            key = f"{pair.tools}: {kind}"
            old = failures.get(key)
            if old is None or len(text) < len(old[0]):
                failures[key] = (text, pair, list(chunks), old[3] if old else set())
            failures[key][3].add(pair)
            break
    print(f"{parses} parses, {len(failures)} distinct failures")
    for key, (text, pair, chunks, pairs) in sorted(failures.items(), key=lambda i: len(i[1][0])):
        print(f"\n{key}\n  {len(pairs)} pairs, e.g. {pair}\n  text={text!r}")
        print(f"  {_describe(text, chunks)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(
        _sweep(
            float(sys.argv[1]) if len(sys.argv) > 1 else 60,
            int(sys.argv[2]) if len(sys.argv) > 2 else 0,
        )
    )
