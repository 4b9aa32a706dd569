"""``--remote-flavor``: ``agentkit run`` and ``agentkit serve`` drive a Dynamo frontend.

A Dynamo frontend refuses vLLM's own body fields with HTTP 400, so ``--remote URL`` alone
cannot drive one; ``--remote-flavor dynamo`` makes the RemoteEngine speak Dynamo's dialect.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from _fake_dynamo import URL, FakeDynamo

import agentkit.cli as cli
import agentkit.server._serve as serve_module
from agentkit.engine import Engine
from agentkit.engine._remote import RemoteEngine


def _behind(fake: FakeDynamo, monkeypatch: pytest.MonkeyPatch) -> list[RemoteEngine]:
    """The CLI's own RemoteEngine, its HTTP client replaced by one that reaches ``fake``."""
    real = cli._remote_engine
    made: list[RemoteEngine] = []

    def wired(*args: Any, **kwargs: Any) -> Engine:
        engine = real(*args, **kwargs)
        assert isinstance(engine, RemoteEngine)
        engine._client = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
        made.append(engine)
        return engine

    monkeypatch.setattr(cli, "_remote_engine", wired)
    return made


def _run(*flags: str) -> list[str]:
    return ["run", "--json", "--remote", URL, "--model", "tiny", "--profile", "qwen3", *flags]


def test_run_against_dynamo_needs_the_flavor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeDynamo(outputs=["Hello from Dynamo."])
    made = _behind(fake, monkeypatch)
    assert cli.main([*_run("--remote-flavor", "dynamo"), "hi"]) == 0
    assert json.loads(capsys.readouterr().out)["output_text"] == "Hello from Dynamo."
    assert made[0].flavor == "dynamo"
    (body,) = fake.bodies
    assert body["return_tokens_as_token_ids"] is True
    # Without the flavor the frontend refuses vLLM's fields: nothing reaches the model.
    assert cli.main([*_run(), "hi"]) != 0
    failed = json.loads(capsys.readouterr().out)
    assert failed["ok"] is False
    assert "Unsupported parameter" in failed["error"]
    assert len(fake.bodies) == 1


def test_the_flavor_defaults_to_vllm_and_needs_remote(
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = cli._remote_engine("http://a:8000", "m", None, None)
    assert isinstance(engine, RemoteEngine)
    assert engine.flavor == "vllm"
    assert cli.main(["run", "--model", "m", "--remote-flavor", "dynamo", "hi"]) == 2
    assert "--remote-flavor needs --remote" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: not one of the choices
        cli.main(["run", "--remote", URL, "--remote-flavor", "sglang", "hi"])
    assert "invalid choice" in capsys.readouterr().err


def test_serve_hands_the_dynamo_engine_to_the_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    seen: list[serve_module.ServeOptions] = []

    class Stop(Exception):
        pass

    def build_app(options: serve_module.ServeOptions) -> Any:
        seen.append(options)
        raise Stop

    monkeypatch.setattr(serve_module, "build_app", build_app)
    argv = ["serve", "--remote", URL, "--remote-flavor", "dynamo", "--model", "tiny"]
    with pytest.raises(Stop):
        cli.main([*argv, "--turn-store", "memory"])
    (options,) = seen
    assert isinstance(options.engine, RemoteEngine)
    assert options.engine.flavor == "dynamo"
    assert options.engine.model == "tiny"
