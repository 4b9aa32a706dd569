"""``agentkit serve --otel`` turns instrumentation on for the process (the global providers),
so each model turn the server answers gets its ``chat`` span (``test_server_spans.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkit import cli
from agentkit.server import _serve
from agentkit.telemetry import Instrumentation, instrument_all
from agentkit.telemetry._settings import resolve


class _Stop(Exception):
    pass


@pytest.fixture
def dark() -> Iterator[None]:
    instrument_all(False)
    try:
        yield
    finally:
        instrument_all(False)


@pytest.mark.parametrize(("flag", "on"), [((), False), (("--otel",), True)])
def test_serve_otel_instruments_the_process(
    flag: tuple[str, ...], on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dark: None
) -> None:
    def build_app(options: _serve.ServeOptions) -> None:
        raise _Stop  # the settings are made by now; nothing is served

    monkeypatch.setattr(_serve, "build_app", build_app)
    script = tmp_path / "script.jsonl"
    script.write_text('{"output": "hi"}\n', encoding="utf-8")
    args = ["serve", "--engine", "scripted", "--script", str(script), "--turn-store", "memory"]
    with pytest.raises(_Stop):
        cli.main([*args, *flag])
    settings = resolve(None)
    if on:
        assert isinstance(settings, Instrumentation)
        assert settings.tracer_provider is None  # the global providers
    else:
        assert settings is None
