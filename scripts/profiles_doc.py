"""Write docs/profiles.md from the catalog: every profile, its policies and a rendered example.

Usage: ``python scripts/profiles_doc.py [OUT]`` (default ``docs/profiles.md``). The examples are
produced by the profiles themselves (the prompt agentkit sends for the next turn), so the
document cannot drift from the code; ``tests/test_profiles_doc.py`` checks it is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentkit.profiles import Profile, dropped_reasoning, list_profiles, replay_view
from agentkit.transcript import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
)

HEAD = """\
# Model profiles

A profile is everything agentkit must know about one model family: its reasoning and tool-call
parsers, its chat template (written in Python, so that generated turns are replayed exactly),
its stop and special tokens, its **reasoning-replay** and **tool-output truncation** policies,
its context window and compaction threshold. `agentkit profiles` lists them
(`--json` for every field); this page is generated from the catalog by
`python scripts/profiles_doc.py`.

## Choosing a profile

`Agent(profile="qwen3")` takes a profile name or alias. For a served model name or a local path,
`agentkit.profiles.profile_for_model(name)` finds the profile: exact names and aliases first,
then glob patterns, the longest matching pattern first (`*qwen3-coder*` before `*qwen3*`),
tried on the whole name and on its last path component. An unknown model gets the `generic`
profile (ChatML, `<think>`, Hermes calls) with a logged warning that names it. `agentkit run
--model M` does this when `--profile` is not given.

Aliases are yours to extend: `register_alias("org/served-name", "qwen3")` or a pattern
(`register_alias("acme/*-coder", "qwen3-coder")`) in code, or a TOML/JSON file loaded with
`load_aliases(path)` or named by `$AGENTKIT_PROFILE_ALIASES` (read on first lookup):

```toml
[aliases]
"my-org/coder-prod" = "qwen3-coder"
"*-r1-distill-*" = "deepseek-r1"
```

## Reasoning-replay policies

Whether last turn's reasoning goes back into the next prompt is decided per model: the next
prompt must be what the model was trained on, and every rewrite of history costs the prefix
cache everything after it. The policy is the profile's (`replay`), and `Agent(replay=...)`
overrides it. It is applied to a view of the transcript; the transcript keeps everything.

- `keep_all`: every reasoning block, in place, across user turns. Each prompt extends the
  previous prompt + output.
- `keep_with_tools`: `keep_all` when the prompt offers tools; without tools, only the reasoning
  after the last user message or tool result stays (DeepSeek-V4: its encoder keeps old
  reasoning exactly when tools are given, and its tool results are user turns).
- `drop_on_plain_turns`: the reasoning of tasks that ended in an answer (every assistant
  message before the last user message) is dropped; inside the current task it stays in place
  (Qwen3, DeepSeek-V3.2, Kimi K2, GLM-4.5, gpt-oss). The prompt breaks once per new user
  message, where the dropped reasoning was.
- `drop_all`: no reasoning (DeepSeek-R1 and V3.1, whose templates never write reasoning back,
  not even inside the current tool loop). The prompt breaks after every turn with reasoning,
  at that turn; `Agent(replay="drop_on_plain_turns")` keeps the current task's reasoning
  instead, which those templates cannot express (an explicit choice).
- `template_native`: whatever the model's own Jinja chat template does with
  `reasoning_content`, with its own defaults; needs `template=HFChatTemplate(path)`. Each prompt
  is rendered whole; where the last render is a prefix of it, only the rest is tokenized.

Interleaved reasoning (`<think>r0</think> call0 <think>r1</think> call1`) stays interleaved in
every policy that keeps it: the view removes whole reasoning blocks and never moves the others.
Each turn's `TurnComplete` event says why its prompt did not extend the previous one
(`prompt_rebuilt`), and `agentkit check-replay --profile P [--turns N] [--policy X] [--json]`
runs a scripted tool-using session and prints, per turn, the prompt tokens, the tokens reused
from the previous prompt + output, and the first divergence as a short diff; it exits 1 when a
break is not explained by the policy.

## Checked against the models' own templates

Each profile below names the template or encoder its prompts were checked against and every
deliberate difference. `tests/conformance/` renders the standard conversations
(`agentkit.template_check`: plain, with and without a system message; several exchanges with
reasoning; one call; tools with hostile arguments, their results and a new user turn; thinking
off where the profile has a switch) through the profile and through the reference, and diffs
the text. `agentkit check-template MODEL_DIR [--profile P]` does the same against a model
directory's own chat template, prints where the prompts first differ and exits 1.

## Any model with a chat template

A model without a profile runs through its own Jinja template: `agentkit run --model DIR`
(and `serve`) uses it when the directory's name matches no profile, `--profile native` asks
for it, `--chat-template PATH` names another, and `--reasoning-parser` / `--tool-parser` name
the parsers (default: those of the profile the name matches, else `generic`'s). In code:
`Agent(profile=native_profile("path/to/model"))`. The template's own defaults decide what the
history keeps (`template_native`).

## Tool-output truncation

`{"mode": "tokens" | "bytes" | "lines", "limit": N}` (a `TruncationPolicy`; the profile's, or
`Agent(truncation=...)`, `False` for none). Long outputs keep their head and tail with a line
`[... 1234 bytes truncated ...]` between; the marker does not count against the limit. Bytes
never split a UTF-8 character, lines keep whole lines, tokens use the engine's (the model's)
tokenizer. The model's context gets the cut text; the `tool_result` event and
`ToolResultBlock.original_content` keep the full output.

## Context compaction

When the engine tokenizes, agentkit knows each prompt's exact token count. When the prompt plus
the turn's output budget (`max_tokens`) would pass `compaction_threshold` of the profile's
`context_window`, compaction removes old reasoning first (every assistant message but the
newest), then old tool outputs, oldest first (each replaced by a short note), and emits a
`context_compacted` event with what it removed and the token counts before and after. What it
removed stays out for the rest of the run, so later prompts extend the compacted one. A prompt
that cannot fit even then raises `ContextWindowExceeded`, carrying the transcript.

## The profiles

Each example is the prompt for the next turn after: a system message, a question, a turn with
interleaved reasoning and two calls, their results, a turn that answers, and a new question,
rendered under the profile's own replay policy (canonical rendering; turns the model generated
are replayed byte for byte instead).
"""


def example() -> Transcript:
    t = Transcript.from_prompt("What are a and b?", system="You are terse.")
    t.add(
        "assistant",
        [
            ReasoningBlock(text="I need a."),
            ToolCallBlock(id="call_0", name="lookup", arguments={"key": "a"}),
            ReasoningBlock(text="And b."),
            ToolCallBlock(id="call_1", name="lookup", arguments={"key": "b"}),
        ],
    )
    t.add(
        "tool",
        [
            ToolResultBlock(call_id="call_0", name="lookup", content="1"),
            ToolResultBlock(call_id="call_1", name="lookup", content="2"),
        ],
    )
    t.add("assistant", [ReasoningBlock(text="Both known."), TextBlock(text="a = 1, b = 2.")])
    t.add("user", "And their sum?")
    return t


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        },
    }
]


def section(profile: Profile) -> str:
    transcript = example()
    view = replay_view(transcript, dropped_reasoning(transcript, profile.replay, tools=True))
    rendered = profile.template.render(view, TOOLS)
    # Conformance: the tests in tests/conformance/ render the standard conversations
    # (agentkit.template_check) through the profile and the reference, and diff the text.
    truncation = (
        f"`{profile.truncation.mode}`, {profile.truncation.limit:,}"
        if profile.truncation
        else "none"
    )
    rows = [
        ("description", profile.description),
        ("reasoning parser", f"`{profile.reasoning}`" if profile.reasoning else "none"),
        ("tool parser", f"`{profile.tool_format}`" if profile.tool_format else "none"),
        ("replay policy", f"`{profile.replay}`"),
        ("truncation", truncation),
        ("context window", f"{profile.context_window:,} tokens" if profile.context_window else "-"),
        ("compaction threshold", f"{profile.compaction_threshold:.0%}"),
        ("stop", ", ".join(f"`{s}`" for s in profile.stop)),
        ("special tokens", ", ".join(f"`{s}`" for s in profile.special_tokens)),
        ("tokenizer", f"`{profile.tokenizer}`" if profile.tokenizer else "-"),
        ("aliases", ", ".join(f"`{a}`" for a in profile.aliases) or "-"),
        ("checked against", profile.reference or "-"),
        ("deliberate differences", "; ".join(profile.deviations) or "none"),
    ]
    table = "\n".join(f"| {k} | {v.replace('|', chr(92) + '|')} |" for k, v in rows)
    fence = "````"
    return (
        f"### `{profile.name}`\n\n| | |\n|---|---|\n{table}\n\n{fence}text\n{rendered}\n{fence}\n"
    )


def document() -> str:
    return HEAD + "\n" + "\n".join(section(p) for p in list_profiles())


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/profiles.md")
    out.write_text(document(), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
