"""The ``agentkit`` command line.

``agentkit parse``  parse raw model output with a format's parsers, under a chosen chunking
``agentkit profiles``  list the model profiles in the catalog
``agentkit run``  run an agent with example tools on a prompt (default model: the embedded
SmolLM2-135M-Instruct, converted once into ``~/.cache/agentkit``; ``--model`` for any other)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit._cli_inspect import (
    check_replay_command,
    check_template_command,
    chunking,
    parse_command,
    profiles_command,
)
from agentkit._distribution import pip_install
from agentkit.errors import AgentkitError, ConfigurationError, RunError
from agentkit.profiles import get_profile

if TYPE_CHECKING:
    from agentkit._live import Terminal
    from agentkit.agent import Agent
    from agentkit.engine import Engine
    from agentkit.profiles import Profile
    from agentkit.transcript import Transcript

__all__ = ["main"]

USAGE_ERROR = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


RUN_SYSTEM_PROMPT = (
    "You are a helpful assistant. Use a tool when it helps: the calculator for arithmetic, "
    "current_utc_time for the date or time. Answer briefly, with the tool's result."
)
RUN_EXAMPLE_PROMPT = "What is 12 * 7? Use the calculator tool."
EMBEDDED_TEMPERATURE = 0.0


def _embedded_tool_choice(prompt: str) -> str:
    """The embedded 135M model's first turn: a call to the one tool the prompt names (the
    example names the calculator), else a call to any of the tools (``required``: one or more
    calls); the call's arguments are held to the tool's schema in the profile's call format
    by structured outputs. Later turns are ``auto``, so the run ends with an answer."""
    from agentkit.models._example_tools import EXAMPLE_TOOLS

    text = prompt.lower()
    named = [t.name for t in EXAMPLE_TOOLS if t.name.lower() in text]
    return named[0] if len(named) == 1 else "required"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _engine_options(max_model_len: int) -> dict[str, Any]:
    """VLLMEngine arguments for this machine: small and eager; one in-process worker on CPU."""
    options: dict[str, Any] = {"max_model_len": max_model_len, "enforce_eager": True}
    # vLLM logs INFO to stdout by default: keep stdout for the answer (or the JSON).
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if not _cuda_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        options["distributed_executor_backend"] = "uni"
    else:
        options["gpu_memory_utilization"] = 0.5
    return options


def _create_engine(model: str, options: dict[str, Any]) -> Engine:
    from agentkit.engine import VLLMEngine

    return VLLMEngine(model, **options)


def _resolve_model(args: argparse.Namespace) -> str:
    """The model path or id for ``run``: the embedded SmolLM2 (converted once) without
    ``--model``."""
    if args.model is None:
        from agentkit.models import ensure_smollm2

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedded model never needs the hub
        return str(ensure_smollm2(args.cache_dir, progress=not args.quiet))
    return str(args.model)


def _template_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chat-template",
        help="render prompts with this chat template (a model directory, tokenizer_config.json "
        "or .jinja file); '--profile native' uses the model's own",
    )
    parser.add_argument("--reasoning-parser", help="reasoning format (agentkit parse --help)")
    parser.add_argument("--tool-parser", help="tool-call format (agentkit parse --help)")


def _usage_json(result_usage: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": result_usage.prompt_tokens,
        "cached_prompt_tokens": result_usage.cached_prompt_tokens,
        "output_tokens": result_usage.output_tokens,
        "turns": [turn.model_dump(mode="json") for turn in result_usage.turns],
    }


async def _run_agent(
    args: argparse.Namespace, engine: Engine, profile: Profile, terminal: Terminal | None
) -> int:
    """The run itself: JSON (``--json``) or the live view on ``terminal``."""
    from agentkit.agent import Agent
    from agentkit.models._example_tools import EXAMPLE_TOOLS

    agent = Agent(
        engine,
        tools=EXAMPLE_TOOLS,
        profile=profile,
        system=args.system,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        tool_timeout=10.0,
        tool_choice=args.tool_choice,
    )
    start: Transcript | str = args.prompt
    if args.transcript is not None and args.transcript.exists():
        start = _load_transcript(args.transcript)
        start.add("user", args.prompt)
    if terminal is None:
        return await _run_json(args, agent, start)
    return await _run_live(args, agent, start, engine, terminal)


def _load_transcript(path: Path) -> Transcript:
    from agentkit.transcript import Transcript

    try:
        return Transcript.model_validate_json(path.read_bytes())
    except ValueError as error:
        raise ConfigurationError(f"--transcript {path}: not a transcript: {error}") from None


def _save_transcript(args: argparse.Namespace, transcript: Transcript | None) -> None:
    """Write the conversation to ``--transcript FILE`` (whole, or not at all)."""
    if args.transcript is None or transcript is None:
        return
    path: Path = args.transcript
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(transcript.model_dump_json(), encoding="utf-8")
    partial.replace(path)


async def _run_json(args: argparse.Namespace, agent: Agent, start: Transcript | str) -> int:
    out = sys.stdout
    try:
        result = await agent.run(start)
    except RunError as error:
        _save_transcript(args, error.transcript)
        payload: dict[str, Any] = {"ok": False, "error": str(error), "type": type(error).__name__}
        if error.transcript is not None:
            payload["transcript"] = error.transcript.model_dump(mode="json")
        json.dump(payload, out, ensure_ascii=False)
        out.write("\n")
        return 1
    _save_transcript(args, result.transcript)
    json.dump(
        {
            "ok": True,
            "run_id": result.run_id,
            "output_text": result.output_text,
            "transcript": result.transcript.model_dump(mode="json"),
            "usage": _usage_json(result.usage),
        },
        out,
        ensure_ascii=False,
    )
    out.write("\n")
    return 0


def _what_was_used(args: argparse.Namespace, model: str, profile: Profile) -> list[str]:
    """The header of the live view: the model, and every aid the run gives it."""
    where = (
        f"remote {args.remote}"
        if args.remote
        else "vLLM in this process, " + ("GPU" if _cuda_available() else "CPU")
    )
    name = "SmolLM2-135M-Instruct (embedded)" if args.model is None else model
    lines = [f"agentkit run: {name}, profile {profile.name}, {where}"]
    aids: list[str] = []
    if args.tool_choice != "auto":
        what = (
            "one or more calls to the tools"
            if args.tool_choice == "required"
            else f"one call to {args.tool_choice}"
            + (" (the tool the prompt names)" if args.tool_choice in args.prompt.lower() else "")
        )
        if args.tool_choice == "none":
            aids.append("tool_choice=none on the first turn (no calls)")
        else:
            aids.append(
                f"tool_choice={args.tool_choice} on the first turn: {what}, its arguments held "
                f"to the tool's JSON schema in the profile's {profile.tool_format} call format "
                "by structured outputs; later turns auto"
            )
    if args.temperature == 0:
        aids.append("greedy decoding (temperature 0)")
    if args.system == RUN_SYSTEM_PROMPT:
        aids.append("a system prompt that names the tools (--system)")
    if aids:
        lines.append("aids: " + "; ".join(aids))
    return lines


async def _run_live(
    args: argparse.Namespace,
    agent: Agent,
    start_with: Transcript | str,
    engine: Engine,
    terminal: Terminal,
) -> int:
    import time

    from agentkit._live import LiveView

    view = LiveView(terminal.out, color=terminal.out.isatty() and "NO_COLOR" not in os.environ)
    for line in _what_was_used(args, str(args.model or ""), agent.profile):
        view.note(line)
    start = getattr(engine, "start", None)
    if start is not None and not getattr(engine, "started", True):
        if args.quiet:
            await start()
        else:
            label = "connecting" if args.remote else "starting the engine (vLLM)"
            await view.while_starting(label, start)
    if not isinstance(start_with, str):
        earlier = sum(m.role == "user" for m in start_with.messages) - 1
        view.note(f"continuing {args.transcript} ({earlier} earlier user messages)")
    view.line(f"> {args.prompt}", "\x1b[1m")
    started = time.perf_counter()
    try:
        async with agent.stream(start_with) as events:
            async for event in events:
                view.event(event)
        result = events.result
    except RunError as error:
        _save_transcript(args, error.transcript)
        view.line(f"agentkit: run failed: {error}")
        if error.transcript is not None:
            turns = [m for m in error.transcript.messages if m.role == "assistant"]
            view.note(f"[{len(turns)} model turns before the failure]")
        return 1
    _save_transcript(args, result.transcript)
    view.summary(result.usage.turns, time.perf_counter() - started)
    if args.transcript is not None:
        view.note(f"conversation saved to {args.transcript}")
    return 0


def _run_command(args: argparse.Namespace) -> int:
    import anyio

    from agentkit._live import engine_logs_to_file
    from agentkit.profiles import NATIVE, resolve_profile

    if args.profile is not None and args.profile.lower() != NATIVE:
        get_profile(args.profile)  # fail on an unknown profile before any work
    _check_remote_flavor(args)
    embedded = args.model is None and not args.remote
    if args.tool_choice is None:
        args.tool_choice = _embedded_tool_choice(args.prompt) if embedded else "auto"
    if args.temperature is None and embedded:
        args.temperature = EMBEDDED_TEMPERATURE
    if args.log_level:
        os.environ["VLLM_LOGGING_LEVEL"] = args.log_level.upper()
    elif args.verbose:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    engine: Engine
    if args.remote:
        if args.model is None:
            raise ConfigurationError("--remote needs --model: the model's name on the server")
        model = args.model
    else:
        model = _resolve_model(args)  # the one-time conversion shows its progress bar here
    # From here on, vLLM's output (its loggers, its engine process, torch's warnings) goes to
    # a log file, unless asked for; --json leaves it on standard error, as always.
    show_logs = args.json or args.verbose or args.log_level
    log_file = None if show_logs else _log_dir() / "engine.log"
    with engine_logs_to_file(log_file) as terminal:
        try:
            if args.remote:
                engine = _remote_engine(
                    args.remote,
                    args.model,
                    args.remote_api_key,
                    args.tokenizer,
                    flavor=args.remote_flavor or "vllm",
                )
            else:
                engine = _create_engine(model, _engine_options(args.max_model_len))
            profile = resolve_profile(
                model,
                args.profile or (None if args.model else "smollm2"),
                chat_template=args.chat_template,
                reasoning=args.reasoning_parser,
                tool_format=args.tool_parser,
            )

            async def go() -> int:
                try:
                    return await _run_agent(args, engine, profile, None if args.json else terminal)
                finally:
                    aclose = getattr(engine, "aclose", None)
                    if aclose is not None:
                        await aclose()

            return anyio.run(go)
        except AgentkitError as error:
            if terminal.log_file is None or isinstance(error, ConfigurationError):
                raise
            from agentkit._live import log_tail

            tail = log_tail(terminal.log_file)
            print(f"agentkit: error: {error}", file=terminal.err)
            if tail:
                print(f"--- the last lines of {terminal.log_file}:\n{tail}", file=terminal.err)
            terminal.err.flush()
            return 1


def _log_dir() -> Path:
    """``$AGENTKIT_CACHE_DIR/logs`` (default ``~/.cache/agentkit/logs``)."""
    from agentkit.models import models_cache_dir

    return models_cache_dir().parent / "logs"


def _remote_engine(
    urls: str,
    model: str,
    api_key: str | None,
    tokenizer: str | None,
    *,
    flavor: Literal["vllm", "dynamo"] = "vllm",
) -> Engine:
    """A RemoteEngine over comma-separated replica URLs; with a local tokenizer directory, the
    prompts it sends are agentkit's exact token ids. ``flavor`` (``--remote-flavor``) names
    the server's kind: a Dynamo frontend refuses vLLM's own body fields."""
    from agentkit._hf_tokenizer import load_hf_tokenizer
    from agentkit.engine import RemoteEngine

    local = load_hf_tokenizer(tokenizer, owner="--tokenizer") if tokenizer else None
    return RemoteEngine(
        base_urls=[u.strip() for u in urls.split(",") if u.strip()],
        model=model,
        api_key=api_key or os.environ.get("AGENTKIT_REMOTE_API_KEY") or None,
        tokenizer=local,
        flavor=flavor,
    )


def _check_remote_flavor(args: argparse.Namespace) -> None:
    """``--remote-flavor`` says what ``--remote`` is; alone it would be silently ignored."""
    if args.remote_flavor is not None and not args.remote:
        raise ConfigurationError("--remote-flavor needs --remote URL")


def _serve_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    try:
        import uvicorn

        from agentkit.server._serve import (
            ServeOptions,
            build_app,
            check_bind,
            default_turn_store_path,
            uvicorn_config,
        )
    except ImportError as error:
        raise ConfigurationError(
            f"agentkit serve needs the 'serve' extra ({error.name} is not installed): "
            f"{pip_install('serve')}"
        ) from None

    if args.agent is not None:
        given = [
            flag
            for flag, value in (
                ("--model", args.model),
                ("--engine", args.engine),
                ("--script", args.script),
                ("--remote", args.remote),
                ("--profile", args.profile),
            )
            if value is not None
        ]
        if given:
            raise ConfigurationError(
                f"--agent serves the agent's own engine and profile: drop {', '.join(given)}"
            )
    args.engine = args.engine or "vllm"
    if args.agent is None and args.engine == "scripted" and args.script is None:
        raise ConfigurationError("--engine scripted needs --script FILE (JSON Lines)")
    if args.agent is None and args.engine == "vllm" and args.model is None:
        raise ConfigurationError(
            "give --model M (or --engine scripted --script FILE, or --agent module:agent)"
        )
    _check_remote_flavor(args)
    remote = None
    if args.remote:
        if args.engine == "scripted":
            raise ConfigurationError("give --remote or --engine scripted, not both")
        remote = _remote_engine(
            args.remote,
            args.model,
            args.remote_api_key,
            args.tokenizer,
            flavor=args.remote_flavor or "vllm",
        )
    api_key = args.api_key or os.environ.get("AGENTKIT_API_KEY") or None
    check_bind(args.host, api_key)
    if args.otel:
        from agentkit.telemetry import instrument_all

        instrument_all()  # fails now, not at the first request, without OpenTelemetry
    signing = os.environ.get("AGENTKIT_SIGNING_KEY")
    if args.turn_store is None:
        turn_store: Path | None = default_turn_store_path()
    else:
        turn_store = None if args.turn_store == "memory" else Path(args.turn_store).expanduser()
    options = ServeOptions(
        agent=args.agent,
        model=args.model if args.engine == "vllm" else None,
        script=Path(args.script) if args.engine == "scripted" else None,
        profile=args.profile,
        chat_template=Path(args.chat_template) if args.chat_template else None,
        reasoning_parser=args.reasoning_parser,
        tool_parser=args.tool_parser,
        served_model_name=args.served_model_name,
        api_key=api_key,
        log_prompts=Path(args.log_prompts) if args.log_prompts else None,
        keep_billing_header=args.keep_billing_header,
        max_concurrency=args.max_concurrency,
        context_window=args.context_window,
        reasoning_field=args.reasoning_field,
        streaming_tool_dispatch=args.streaming_tool_dispatch,
        ignore_unverifiable_reasoning=args.ignore_unverifiable_reasoning,
        signing_key=signing.encode() if signing else None,
        turn_store=turn_store,
        engine_options=(
            _engine_options(args.max_model_len)
            if args.engine == "vllm" and remote is None and args.agent is None
            else None
        ),
        engine=remote,
        allowed_origins=tuple(args.allow_origin),
        allowed_hosts=tuple(args.allow_host),
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        keep_alive_timeout=args.keep_alive_timeout,
        shutdown_timeout=args.shutdown_timeout,
    )
    app, _, profile = build_app(options)
    print(
        f"agentkit: serving {args.served_model_name or args.agent or args.model or 'the script'} "
        f"(profile {profile.name}) on http://{args.host}:{args.port}",
        file=sys.stderr,
        flush=True,
    )
    _log_to_stderr(args.log_level)
    config = uvicorn_config(app, options, host=args.host, port=args.port, log_level=args.log_level)
    uvicorn.Server(config).run()
    return 0


def _log_to_stderr(level_name: str) -> None:
    """Show agentkit's own log records (cache breaks, dropped tools, key creation) on stderr:
    the library stays silent by default, a server should not."""
    import logging

    level = logging.getLevelName(level_name.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("agentkit")
    logger.addHandler(handler)
    logger.setLevel(level if isinstance(level, int) else logging.DEBUG)


def _remote_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remote",
        help="drive an existing server instead of an in-process engine: its base URL, or "
        "several replicas' URLs separated by commas (--model is then the served name)",
    )
    parser.add_argument(
        "--remote-api-key", help="the remote server's API key (default $AGENTKIT_REMOTE_API_KEY)"
    )
    parser.add_argument(
        "--remote-flavor",
        choices=("vllm", "dynamo"),
        help="with --remote: the server's kind, 'vllm' (vLLM's or SGLang's server; the "
        "default) or 'dynamo' (an NVIDIA Dynamo frontend: its body fields, agent hints and "
        "session header; see docs/deployment.md)",
    )
    parser.add_argument(
        "--tokenizer",
        help="with --remote: a local tokenizer directory, so prompts are sent as exact token "
        "ids (prefix-cache hits across turns)",
    )


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
        type=chunking,
        default=("whole", 0),
        help="whole (default), bytes:N or random:SEED",
    )
    parse.add_argument("--tools", help="JSON file of tool specs, for schema-typed formats")
    parse.add_argument("file", nargs="?", default="-", help="raw output file, or - for stdin")
    parse.set_defaults(handler=parse_command)

    profiles = commands.add_parser("profiles", help="list the model profiles")
    profiles.add_argument("--json", action="store_true", help="print JSON")
    profiles.set_defaults(handler=profiles_command)

    check = commands.add_parser(
        "check-replay",
        help="report prompt reuse turn by turn on a scripted tool-using session",
        description="Run a scripted multi-turn session (interleaved reasoning and tool calls, "
        "tasks ending in answers) with a profile and print, per turn, the prompt tokens, the "
        "tokens reused from the previous prompt + output, and where the prompt first diverges. "
        "Exits 1 when a break is not explained by the replay policy.",
    )
    check.add_argument("--profile", required=True, help="profile name or alias")
    check.add_argument("--turns", type=_positive_int, default=12, help="model turns; 12")
    check.add_argument(
        "--policy",
        help="reasoning-replay policy to check instead of the profile's "
        "(keep_all, drop_on_plain_turns, keep_with_tools, drop_all, template_native)",
    )
    check.add_argument(
        "--tokenizer",
        help="a local Hugging Face tokenizer directory to count with (default: exact "
        "character-level tokens, the profile's special tokens one id each)",
    )
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(handler=check_replay_command)

    template = commands.add_parser(
        "check-template",
        help="does a profile write what the model's own chat template writes?",
        description="Render the standard conversations (plain, tools with hostile arguments, "
        "results and a new user turn, several exchanges, one call, thinking off) through a "
        "profile and through the model's own chat template, and print for each whether the "
        "prompts are equal or where they first differ. Exit 1 when any differs.",
    )
    template.add_argument(
        "model_dir", help="the model's directory (chat_template.jinja or tokenizer_config.json)"
    )
    template.add_argument(
        "--profile", help="the profile to check (default: the one the directory's name matches)"
    )
    template.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="a template variable, e.g. bos_token=<s> for a .jinja file without its "
        "tokenizer_config.json (repeatable)",
    )
    template.add_argument("--json", action="store_true", help="print JSON")
    template.set_defaults(handler=check_template_command)

    serve = commands.add_parser(
        "serve",
        help="serve a model over HTTP (Anthropic Messages, OpenAI Chat Completions, Responses)",
        description="Serve a model over HTTP (Anthropic Messages, OpenAI Chat Completions and "
        "Responses) on 127.0.0.1 by default: Claude Code, Codex and other harnesses use it as "
        "a native backend.",
    )
    serve.add_argument("--model", help="any vLLM-loadable model directory or repo id")
    serve.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="serve your agent instead of a bare model: an agentkit.Agent (or a function of no "
        "arguments returning one) importable from the current directory, e.g. myapp.agents:agent; "
        "its tools run on the server, the client's come back to it (Responses and Chat "
        "Completions; see docs/hosting.md). --model, --engine, --script, --remote and "
        "--profile do not apply: the agent's own engine and profile serve",
    )
    _remote_arguments(serve)
    serve.add_argument("--engine", choices=["vllm", "scripted"], help="default vllm")
    serve.add_argument(
        "--script", help='with --engine scripted: JSON Lines, one {"output": "..."} per request'
    )
    serve.add_argument("--profile", help="the model's profile (default: from the model's name)")
    _template_arguments(serve)
    serve.add_argument("--served-model-name", help="the model id /v1/models lists")
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    serve.add_argument("--port", type=_positive_int, default=8000, help="default 8000")
    serve.add_argument("--api-key", help="require this x-api-key (default $AGENTKIT_API_KEY)")
    serve.add_argument("--log-prompts", help="write each request's exact prompt to this directory")
    serve.add_argument(
        "--keep-billing-header",
        action="store_true",
        help="keep a first system line 'x-anthropic-billing-header: ...' (stripped by default)",
    )
    serve.add_argument("--max-concurrency", type=_positive_int, help="429 beyond this many")
    serve.add_argument(
        "--reasoning-field",
        choices=["reasoning_content", "reasoning"],
        default="reasoning_content",
        help="Chat Completions: the field reasoning goes in (clients disagree)",
    )
    serve.add_argument(
        "--streaming-tool-dispatch",
        action="store_true",
        help="Chat Completions: send tool_call_dispatch events to every streaming client",
    )
    serve.add_argument(
        "--ignore-unverifiable-reasoning",
        action="store_true",
        help="Responses: skip encrypted_content this server cannot open (default: a 400); "
        "the key comes from $AGENTKIT_SEALING_KEY or $AGENTKIT_CACHE_DIR/sealing.key",
    )
    serve.add_argument(
        "--turn-store",
        metavar="FILE|memory",
        help="where the turns behind exact replay, and the stored Responses "
        "(previous_response_id, GET /v1/responses/ID), are kept, so a conversation resumed "
        "after a restart still replays token-exact: a SQLite file (default "
        "$AGENTKIT_CACHE_DIR/turns.sqlite), or 'memory' (forgotten on restart)",
    )
    serve.add_argument(
        "--otel",
        action="store_true",
        help="trace each model turn (and a hosted agent's runs) with OpenTelemetry, through "
        "the global providers (set them up with opentelemetry-instrument or your own "
        "code); a turn's span is the child of the request's traceparent. Needs the 'otel' "
        "extra",
    )
    serve.add_argument("--max-model-len", type=_positive_int, default=8192, help="default 8192")
    serve.add_argument(
        "--context-window",
        type=_positive_int,
        help="the context, in tokens, a prompt must fit (default: the profile's; with "
        "--engine scripted, none: its tokens are characters)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages from ORIGIN (https://app.example) call the server with CORS "
        "(repeatable; default: no browser origin may)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="without --api-key, also answer requests whose Host is NAME (a proxy's name; "
        "default: loopback names only, against DNS rebinding)",
    )
    serve.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=15.0,
        help="seconds a request's line and headers may take (default 15)",
    )
    serve.add_argument(
        "--body-timeout",
        type=_positive_float,
        default=60.0,
        help="seconds a request's body may take (default 60)",
    )
    serve.add_argument(
        "--keep-alive-timeout",
        type=_positive_int,
        default=5,
        help="seconds an idle connection stays open (default 5)",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=_positive_int,
        default=10,
        help="seconds shutting down waits for requests in flight (default 10)",
    )
    serve.add_argument("--log-level", default="warning", help="uvicorn's log level")
    serve.set_defaults(handler=_serve_command)

    run = commands.add_parser(
        "run",
        help="run an agent with example tools (calculator, current UTC time) on a prompt",
        description="Run an agent on PROMPT. Without --model: the embedded "
        "SmolLM2-135M-Instruct, converted on first use into $AGENTKIT_CACHE_DIR/models "
        "(default ~/.cache/agentkit/models), with aids a 135M model needs (a first turn that "
        "must call a tool, greedy decoding), which the output names. On a terminal the run "
        "streams as a live view; --json prints the result as JSON.",
    )
    run.add_argument("--model", help="any vLLM-loadable model directory or repo id")
    _remote_arguments(run)
    run.add_argument(
        "--profile",
        help="the model's profile (default: smollm2 without --model, else found from the "
        "model's name, or generic)",
    )
    _template_arguments(run)
    run.add_argument("--max-turns", type=_positive_int, default=3, help="default 3")
    run.add_argument("--max-tokens", type=_positive_int, default=256, help="per turn; 256")
    run.add_argument("--max-model-len", type=_positive_int, default=2048, help="default 2048")
    run.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="default: 0 (greedy) on the embedded model, else the model's own default",
    )
    run.add_argument(
        "--tool-choice",
        help="the first turn's tool_choice: auto, required, none or a tool's name (required "
        "and a name hold the call to the tool's schema with structured outputs); default: "
        "on the embedded model the tool the prompt names, else required; auto with --model",
    )
    run.add_argument("--system", default=RUN_SYSTEM_PROMPT, help="system prompt")
    run.add_argument("--cache-dir", help="directory for the converted embedded model")
    run.add_argument(
        "--transcript",
        type=Path,
        metavar="FILE",
        help="continue the conversation in FILE (a transcript's JSON) when it exists, and save "
        "the conversation there after the run",
    )
    run.add_argument("--json", action="store_true", help="print the run result as JSON")
    run.add_argument(
        "--quiet", action="store_true", help="no conversion progress bar, no engine status"
    )
    run.add_argument(
        "--verbose",
        action="store_true",
        help="show vLLM's log lines (INFO); by default they go to "
        "$AGENTKIT_CACHE_DIR/logs/engine.log, shown only when the engine fails",
    )
    run.add_argument(
        "--log-level", help="show vLLM's log lines from this level (DEBUG, INFO, WARNING...)"
    )
    run.add_argument(
        "prompt",
        nargs="?",
        default=RUN_EXAMPLE_PROMPT,
        help=f"the user's message (default: {RUN_EXAMPLE_PROMPT!r})",
    )
    run.set_defaults(handler=_run_command)
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
