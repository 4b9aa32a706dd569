"""The live view of ``agentkit run``, and the redirection that keeps vLLM's log lines off the
terminal."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from agentkit._live import LiveView, engine_logs_to_file, log_tail
from agentkit.events import (
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
    ToolResultEvent,
    TurnUsage,
)
from agentkit.transcript import ToolResultBlock


def _result(content: str, *, is_error: bool = False) -> ToolResultEvent:
    block = ToolResultBlock(call_id="c1", name="calculator", content=content, is_error=is_error)
    return ToolResultEvent(
        call_id="c1",
        name="calculator",
        content=content,
        is_error=is_error,
        duration_s=0.0021,
        result=block,
    )


def _play(view: LiveView) -> None:
    view.event(ReasoningDelta(index=0, text="I should "))
    view.event(ReasoningDelta(index=0, text="compute."))
    view.event(
        ToolCallComplete(
            index=1, id="c1", name="calculator", arguments={"expression": "12 * 7"}, raw="..."
        )
    )
    view.event(_result("84"))
    view.event(TextDelta(index=0, text="12 * 7 "))
    view.event(TextDelta(index=0, text="is 84."))
    view.summary(
        [
            TurnUsage(
                prompt_tokens=300,
                cached_prompt_tokens=0,
                output_tokens=20,
                time_to_first_token_s=0.5,
            ),
            TurnUsage(
                prompt_tokens=340,
                cached_prompt_tokens=256,
                output_tokens=8,
                time_to_first_token_s=0.12,
            ),
        ],
        3.25,
    )


def test_plain_view() -> None:
    out = io.StringIO()
    _play(LiveView(out, color=False))
    assert out.getvalue().splitlines() == [
        "I should compute.",
        '-> calculator({"expression": "12 * 7"})',
        "<- calculator: 84  (2.1 ms)",
        "12 * 7 is 84.",
        "[2 turns | prompt 640 tokens (256 cached) | output 28 tokens | "
        "time to first token 0.50 s, 0.12 s | 3.2 s]",
    ]


def test_colour_view_dims_reasoning_and_the_notes() -> None:
    out = io.StringIO()
    _play(LiveView(out, color=True))
    text = out.getvalue()
    assert "\x1b[2mI should \x1b[0m\x1b[2mcompute.\x1b[0m\n" in text
    assert "\n12 * 7 is 84.\n" in text  # the answer is not styled
    assert "\x1b[2m[2 turns |" in text


def test_long_and_failed_results_are_one_line() -> None:
    out = io.StringIO()
    view = LiveView(out, color=False)
    view.event(_result("line\n" * 100))
    view.event(_result("ValueError: bad", is_error=True))
    first, second = out.getvalue().splitlines()
    assert first.startswith("<- calculator: line line")
    assert first.endswith("...  (2.1 ms)")
    assert len(first) < 200
    assert second == "<- calculator: error ValueError: bad  (2.1 ms)"


def test_a_malformed_call_is_named() -> None:
    out = io.StringIO()
    LiveView(out, color=False).event(
        ToolCallComplete(
            index=0, id="c1", name="calculator", arguments={}, raw="{", error="invalid JSON"
        )
    )
    assert out.getvalue() == "-> calculator: malformed call (invalid JSON)\n"


def test_engine_start_status() -> None:
    out = io.StringIO()
    view = LiveView(out, color=False)

    async def start() -> None:
        await anyio.lowlevel.checkpoint()

    anyio.run(view.while_starting, "starting the engine", start)
    lines = out.getvalue().splitlines()
    assert lines[0] == "starting the engine ..."
    assert lines[1].startswith("engine ready in ")


def test_engine_start_status_on_a_terminal_is_one_line() -> None:
    out = io.StringIO()
    view = LiveView(out, color=True)

    async def start() -> None:
        await anyio.sleep(0.05)

    anyio.run(view.while_starting, "starting the engine", start)
    text = out.getvalue()
    assert "starting the engine ... 0 s" in text
    assert text.count("\n") == 1  # the status line is overwritten by "engine ready"
    assert "engine ready in 0." in text


def test_output_on_the_process_descriptors_goes_to_the_log(tmp_path: Path) -> None:
    """What vLLM writes (loggers, its engine process, C++) reaches descriptors 1 and 2: those go
    to the log file, the view's streams to the real output."""
    log = tmp_path / "logs" / "engine.log"
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys
        from pathlib import Path
        from agentkit._live import engine_logs_to_file
        print("before", flush=True)
        with engine_logs_to_file(Path({str(log)!r})) as terminal:
            os.write(2, b"INFO 12-02 05:40:01 [core.py:1] engine log line\\n")
            print("WARNING a python print", flush=True)
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child\\\\n')"])
            terminal.out.write("the view\\n")
            terminal.out.flush()
            terminal.err.write("the view's error\\n")
            terminal.err.flush()
        print("after", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "before\nthe view\nafter\n"
    assert done.stderr == "the view's error\n"
    logged = log.read_text()
    assert "engine log line" in logged
    assert "a python print" in logged
    assert "child" in logged
    assert log_tail(log, 1) == "child"


def test_captured_streams_are_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with engine_logs_to_file(tmp_path / "engine.log") as terminal:
        terminal.out.write("seen\n")
    assert terminal.log_file is None
    assert capsys.readouterr().out == "seen\n"
    assert not (tmp_path / "engine.log").exists()


def test_log_tail_of_a_missing_file(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "nope.log") == ""
