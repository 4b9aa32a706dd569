"""Shared pieces of the benchmarks: a deterministic code workload, delta splitting, timing and
a description of the machine.

The workload is what an agent writes most: a long code argument to a ``write_file`` call.
The code is generated (not read from the installed standard library) so that every machine
measures the same bytes: realistic Python with both quote styles, backslashes, escapes,
comparisons, braces and non-ASCII text (accents, CJK, an astral-plane emoji).
"""

from __future__ import annotations

import gc
import os
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = [
    "TOOL_NAME",
    "TOOL_SCHEMA",
    "Stopwatch",
    "Timing",
    "machine_info",
    "make_code",
    "repeat",
    "split_deltas",
]

TOOL_NAME = "write_file"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Where to write, relative to the repo."},
        "content": {"type": "string", "description": "The whole new content of the file."},
    },
    "required": ["path", "content"],
}

_NOUNS = ["config", "header", "record", "payload", "table", "token", "session", "buffer"]
_VERBS = ["parse", "load", "render", "merge", "split", "check", "encode", "collect"]
_DOCS = [
    "Résumé of the café's naïve über-parser → returns a dict.",
    "日本語のテキストも扱う (UTF-8); “smart quotes” and ‘single’ ones survive.",
    "Ω ≈ 2π·r — the tolerance is ±0.5 %; see § 4.2.",
    "Emoji are data too: 🚀 marks a release line.",
    "Plain ASCII docstring: returns None when the input is empty.",
]

_BLOCKS = [
    '''def {verb}_{noun}(path: str, limit: int = {n}) -> dict[str, object]:
    """{doc}"""
    pattern = re.compile(r"^(?P<key>[\\w.-]+)\\s*=\\s*\\"(?P<value>(?:[^\\"\\\\]|\\\\.)*)\\"$")
    result: dict[str, object] = {{}}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if number > limit or line.startswith("#"):
                continue
            match = pattern.match(line.rstrip("\\n"))
            if match is None:
                raise ValueError(f"line {{number}}: can't {verb} {{line!r}}")
            result[match["key"]] = match["value"].replace("\\\\t", "\\t")
    return result

''',
    '''class {Noun}Error(Exception):
    """{doc}"""

    def __init__(self, name: str, code: int = {n}) -> None:
        super().__init__(f"{{name!r}} failed with code {{code}}")
        self.name = name
        self.code = code

    def __repr__(self) -> str:
        return f'{Noun}Error(name="{{self.name}}", code={{self.code}})'

''',
    '''def {verb}_{noun}_rows(rows: list[dict[str, str]], width: int = {n}) -> str:
    """{doc}"""
    lines = ["| name | value |", "|------|-------|"]
    for row in rows:
        name = row.get("name", "?").ljust(width)[:width]
        value = row.get("value", "").replace("|", "\\\\|")
        if 0 < len(value) <= width:
            lines.append(f"| {{name}} | {{value}} |")
        else:
            lines.append("| %s | <b>%s…</b> |" % (name, value[: width - 1]))
    return "\\n".join(lines) + "\\n"

''',
    """{NOUN}_DEFAULTS = {{
    "path": "C:\\\\Users\\\\dev\\\\{noun}\\\\{n}.json",
    "pattern": r"\\d+\\.\\d*(?:e[+-]?\\d+)?",
    "query": "SELECT * FROM {noun}s WHERE name = 'O''Brien' AND id > {n}",
    "nested": {{"items": [1, 2, {{"deep": True}}], "empty": {{}}, "quote": '"'}},
    "bytes": b"\\x00\\xff\\n",
    "tab": "\\t",
}}

""",
    '''async def {verb}_{noun}_stream(source, *, chunk: int = {n}) -> list[bytes]:
    """{doc}"""
    parts: list[bytes] = []
    async for piece in source:
        if not piece:
            break
        parts.append(piece[:chunk] if len(piece) > chunk else piece)
    assert all(isinstance(p, bytes) for p in parts), "expected bytes, got {{type(p)}}"
    return parts

''',
]


def make_code(size: int, seed: int = 0) -> str:
    """Deterministic Python source of at most ``size`` UTF-8 bytes, ending at a line end."""
    rng = random.Random(seed)
    out: list[str] = ['"""Generated module: realistic code for the parser benchmarks."""\n\n']
    out.append("import re\n\n\n")
    used = sum(len(part.encode()) for part in out)
    while True:
        noun = rng.choice(_NOUNS)
        block = rng.choice(_BLOCKS).format(
            verb=rng.choice(_VERBS),
            noun=noun,
            Noun=noun.capitalize(),
            NOUN=noun.upper(),
            n=rng.randrange(2, 999),
            doc=rng.choice(_DOCS),
        )
        for line in block.splitlines(keepends=True):
            cost = len(line.encode())
            if used + cost > size:
                return "".join(out)
            out.append(line)
            used += cost


def split_deltas(text: str, atomic: Sequence[str], width: int = 4) -> list[str]:
    """Split ``text`` into deltas of ``width`` characters, each ``atomic`` string whole.

    ``atomic`` holds the strings that are a single token for the format's tokenizer (its
    special tokens): an engine emits each of them as one delta, so they are never cut.
    """
    if not atomic:
        pieces = [text]
    else:
        alternatives = "|".join(re.escape(s) for s in sorted(atomic, key=len, reverse=True))
        pieces = re.split(f"({alternatives})", text)
    specials = set(atomic)
    deltas: list[str] = []
    for piece in pieces:
        if piece in specials:
            deltas.append(piece)
        else:
            deltas.extend(piece[i : i + width] for i in range(0, len(piece), width))
    return deltas


class Stopwatch:
    """Times a block: wall-clock seconds (``perf_counter``) and the CPU seconds this process
    used (``process_time``). On a shared machine the wall time includes waiting for a core;
    the CPU time does not, so the two together show how much of a number is contention."""

    wall: float = 0.0
    cpu: float = 0.0

    def __enter__(self) -> Stopwatch:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


@dataclass(frozen=True)
class Timing:
    """Several timed runs: medians, the fastest CPU time, and every run's wall time."""

    wall: float
    cpu: float
    cpu_best: float
    """The smallest CPU time: noise only ever adds, so this is the best estimate of the cost
    itself (what ``timeit`` reports, too)."""
    samples: list[float]


def repeat(run: Callable[[], Stopwatch], repeats: int, budget: float = float("inf")) -> Timing:
    """Call ``run`` (which times itself) up to ``repeats`` times, a full collection before
    each; stop early once the runs took ``budget`` seconds (one run always happens)."""
    watches: list[Stopwatch] = []
    while len(watches) < max(1, repeats) and sum(w.wall for w in watches) < budget:
        gc.collect()
        watches.append(run())
    return Timing(
        wall=statistics.median(w.wall for w in watches),
        cpu=statistics.median(w.cpu for w in watches),
        cpu_best=min(w.cpu for w in watches),
        samples=[w.wall for w in watches],
    )


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info(*dists: str) -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, Python and package versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {dist: _version(dist) for dist in dists},
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
