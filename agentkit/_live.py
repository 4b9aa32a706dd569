"""The live view of ``agentkit run``: the model's text as it streams, reasoning dimmed, a line
when each tool is dispatched and when its result arrives, and a closing line with the run's
turns, tokens and time to first token. vLLM's own log lines go to a file meanwhile
(:func:`engine_logs_to_file`), so the terminal shows the run and nothing else.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio

from agentkit.events import AgentEvent, TurnUsage

__all__ = ["LiveView", "Terminal", "engine_logs_to_file", "log_tail"]

_DIM = "\x1b[2m"
_BOLD = "\x1b[1m"
_CYAN = "\x1b[36m"
_GREEN = "\x1b[32m"
_RED = "\x1b[31m"
_RESET = "\x1b[0m"
_CLEAR_LINE = "\r\x1b[2K"

_RESULT_PREVIEW = 160


@dataclass
class Terminal:
    """Where the view writes: ``out`` for the run, ``err`` for failures."""

    out: TextIO
    err: TextIO
    log_file: Path | None = None
    """Where vLLM's output went instead, or ``None`` when it was left alone."""


def _real_fd(stream: TextIO, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def engine_logs_to_file(log_file: Path | None) -> Iterator[Terminal]:
    """Send everything written to file descriptors 1 and 2 (vLLM's loggers, its engine
    process, torch's and C++ warnings, progress bars) to ``log_file``, and yield streams on
    the real standard output and error for the view. ``None``, or streams that are not the
    process's own descriptors (a test's capture): nothing is redirected."""
    if log_file is None or not (_real_fd(sys.stdout, 1) and _real_fd(sys.stderr, 2)):
        yield Terminal(sys.stdout, sys.stderr)
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    out = os.fdopen(os.dup(saved[0]), "w", encoding=sys.stdout.encoding, errors="replace")
    err = os.fdopen(os.dup(saved[1]), "w", encoding=sys.stderr.encoding, errors="replace")
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield Terminal(out, err, log_file)
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)
        out.close()
        err.close()


def log_tail(log_file: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file ('' when it cannot be read)."""
    try:
        text = log_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


class LiveView:
    """Renders a run's events for a person. ``color``: ANSI styles (a terminal that wants
    them); without it the same lines come out as plain text."""

    def __init__(self, out: TextIO, *, color: bool) -> None:
        self.out = out
        self.color = color
        self._block: str | None = None  # "reasoning" or "text" while one is streaming
        self._at_line_start = True

    def _style(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + _RESET if self.color and styles else text

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self._at_line_start = text.endswith("\n")
            self.out.flush()

    def line(self, text: str, *styles: str) -> None:
        """A line of its own (after whatever was streaming)."""
        self._end_line()
        self._write(self._style(text, *styles) + "\n")

    def note(self, text: str) -> None:
        """A dimmed line about the run itself (not the model's output)."""
        self.line(text, _DIM)

    def _end_line(self) -> None:
        if not self._at_line_start:
            self._write("\n")
        self._block = None

    async def while_starting(self, label: str, start: Callable[[], Awaitable[None]]) -> None:
        """Await ``start()`` (the engine's start) with a short status: on a terminal a line
        that counts the seconds, otherwise one line before and one after."""
        started = time.perf_counter()
        self._end_line()
        if not self.color:
            self.note(f"{label} ...")
            await start()
            self.note(f"engine ready in {time.perf_counter() - started:.1f} s")
            return
        done = anyio.Event()

        async def tick() -> None:
            while not done.is_set():
                elapsed = time.perf_counter() - started
                self.out.write(_CLEAR_LINE + self._style(f"{label} ... {elapsed:.0f} s", _DIM))
                self.out.flush()
                with anyio.move_on_after(1.0):
                    await done.wait()

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            try:
                await start()
            finally:
                done.set()
        self.out.write(_CLEAR_LINE)
        self.note(f"engine ready in {time.perf_counter() - started:.1f} s")

    def event(self, event: AgentEvent) -> None:
        if event.type in {"reasoning_delta", "text_delta"}:
            kind = "reasoning" if event.type == "reasoning_delta" else "text"
            if self._block != kind:
                self._end_line()
                self._block = kind
            self._write(self._style(event.text, _DIM) if kind == "reasoning" else event.text)
        elif event.type == "tool_call_complete":
            self._end_line()
            if event.error is not None:
                self.line(f"-> {event.name}: malformed call ({event.error})", _RED)
                return
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            self.line(f"-> {event.name}({arguments})", _CYAN)
        elif event.type == "tool_result":
            content = event.content.strip().replace("\n", " ")
            if len(content) > _RESULT_PREVIEW:
                content = content[: _RESULT_PREVIEW - 3] + "..."
            label = "error" if event.is_error else ""
            self.line(
                f"<- {event.name}:{' ' + label if label else ''} {content}  "
                f"({_duration(event.duration_s)})",
                _RED if event.is_error else _GREEN,
            )
        elif event.type == "context_compacted":
            self.note(f"[context compacted: {event.tokens_before} -> {event.tokens_after} tokens]")

    def summary(self, turns: Sequence[TurnUsage], elapsed_s: float) -> None:
        """The closing line: turns, tokens, time to first token, the run's wall time."""
        prompt = sum(t.prompt_tokens for t in turns)
        cached = sum(t.cached_prompt_tokens for t in turns)
        output = sum(t.output_tokens for t in turns)
        firsts = [t.time_to_first_token_s for t in turns if t.time_to_first_token_s is not None]
        parts = [
            f"{len(turns)} turn{'s' if len(turns) != 1 else ''}",
            f"prompt {prompt} tokens ({cached} cached)",
            f"output {output} tokens",
        ]
        if firsts:
            parts.append("time to first token " + ", ".join(f"{s:.2f} s" for s in firsts))
        parts.append(f"{elapsed_s:.1f} s")
        self.note("[" + " | ".join(parts) + "]")


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"
