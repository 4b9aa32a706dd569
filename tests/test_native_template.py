"""Any model with a chat template: a model directory with only a ``tokenizer_config.json``
runs through ``Agent`` with no Python profile, rendered by its own template, token-exact
across turns, each prompt extending the last where the template keeps the history."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentkit
from agentkit import cli
from agentkit._prompt import PromptBuilder
from agentkit.engine import TokenizedScriptedEngine
from agentkit.errors import ConfigurationError
from agentkit.profiles import (
    HFChatTemplate,
    get_profile,
    native_profile,
    resolve_profile,
)
from agentkit.server._serve import ServeOptions, build_app
from agentkit.transcript import Message, TextBlock, ToolResultBlock, Transcript

pytestmark = pytest.mark.anyio

REFERENCES = Path(__file__).resolve().parents[1].parent / "shared" / "reference-templates"


def model_dir(tmp_path: Path, name: str = "my-org--mystery-7b") -> Path:
    """A model directory whose only file is a tokenizer config carrying the template."""
    source = REFERENCES / "qwen3.jinja"
    assert source.is_file(), f"reference template {source} not found"
    config = {
        "chat_template": source.read_text(encoding="utf-8"),
        "eos_token": "<|im_end|>",
        "bos_token": None,
    }
    path = tmp_path / name
    path.mkdir()
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


@agentkit.tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def call(key: str) -> str:
    arguments = json.dumps({"name": "lookup", "arguments": {"key": key}})
    return f"<think>\nI need {key}.\n</think>\n\n<tool_call>\n{arguments}\n</tool_call>"


def test_an_unknown_model_directory_gets_its_own_template(tmp_path: Path) -> None:
    path = model_dir(tmp_path)
    profile = resolve_profile(str(path), None)
    assert isinstance(profile.template, HFChatTemplate)
    assert profile.replay == "template_native"
    assert profile.stop == ("<|im_end|>",)
    assert (profile.reasoning, profile.tool_format) == ("think", "hermes")
    named = resolve_profile(str(path), "native", tool_format="qwen3_coder", reasoning="think")
    assert named.tool_format == "qwen3_coder"
    # A model whose name matches a profile keeps that profile unless native is asked for.
    qwen = model_dir(tmp_path, "Qwen3-8B")
    assert resolve_profile(str(qwen), None) is get_profile("qwen3")
    assert isinstance(resolve_profile(str(qwen), "native").template, HFChatTemplate)


async def test_runs_through_the_agent_token_exact_across_turns(tmp_path: Path) -> None:
    profile = native_profile(model_dir(tmp_path))
    engine = TokenizedScriptedEngine(
        [call("a"), call("b"), "<think>\nDone.\n</think>\n\nBoth found."],
        specials=[*get_profile("qwen3").special_tokens],
        stop="<|im_end|>",
    )
    agent = agentkit.Agent(engine=engine, tools=[lookup], profile=profile, system="Be brief.")
    result = await agent.run("Find a and b.")
    assert result.output_text == "Both found."
    prompts = engine.requests
    assert len(prompts) == 3
    template = HFChatTemplate(model_dir(tmp_path, "reference"))
    for i, request in enumerate(prompts):
        view = Transcript(messages=result.transcript.messages[: 2 + 2 * i])
        assert request.prompt == template.render(view, [lookup.spec()]), f"prompt {i}"
        assert request.prompt_token_ids is not None
        assert engine.decode(request.prompt_token_ids) == request.prompt
    # Inside the tool loop each prompt is the last prompt, the model's own ids, then new text.
    for before, after, message in zip(
        prompts, prompts[1:], result.transcript.messages[2::2], strict=False
    ):
        assert before.prompt_token_ids is not None
        assert after.prompt_token_ids is not None
        assert message.token_ids is not None
        head = [*before.prompt_token_ids, *message.token_ids]
        assert after.prompt_token_ids[: len(head)] == head


def test_a_template_that_rewrites_history_is_rebuilt_and_says_where(tmp_path: Path) -> None:
    """Qwen3's template drops earlier reasoning once a new user message arrives: the next
    prompt keeps the last prompt's ids but not the model's output, and says where the
    template departed from it."""
    profile = native_profile(model_dir(tmp_path))
    engine = TokenizedScriptedEngine([], specials=get_profile("qwen3").special_tokens)
    builder = PromptBuilder(profile, engine, [])
    transcript = Transcript.from_prompt("2 + 2?")
    first = builder.next_prompt(transcript)
    output = "<think>\nHm.\n</think>\n\nFour."
    parser = profile.new_parser()
    parser.feed(output)
    parser.finish()
    message = Message(
        role="assistant",
        content=list(parser.blocks),
        token_ids=[*engine.encode(output), *engine.encode("<|im_end|>")],
    )
    transcript.append(message)
    builder.record(transcript, message)
    transcript.add("user", "3 + 3?")
    second = builder.next_prompt(transcript)
    assert second.rebuilt is not None
    assert "writes the model's turn differently from its output" in second.rebuilt
    assert "Hm." not in second.text
    assert first.token_ids is not None
    assert second.token_ids is not None
    assert second.token_ids[: len(first.token_ids)] == first.token_ids
    assert engine.decode(second.token_ids) == second.text


def test_a_history_rewrite_before_the_output_is_named(tmp_path: Path) -> None:
    """A template whose head depends on the whole conversation (here: the message count)
    rewrites the history every turn: the prompt is rebuilt, and the reason says where."""
    template = tmp_path / "counting.jinja"
    template.write_text(
        "{{ messages | length }} messages\n"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        encoding="utf-8",
    )
    profile = native_profile(template, base=get_profile("smollm2"))
    engine = TokenizedScriptedEngine([], specials=profile.special_tokens)
    builder = PromptBuilder(profile, engine, [])
    transcript = Transcript.from_prompt("Hi.")
    builder.next_prompt(transcript)
    message = Message(
        role="assistant",
        content=[TextBlock(text="Hello.", raw="Hello.")],
        token_ids=[*engine.encode("Hello."), *engine.encode("<|im_end|>")],
    )
    transcript.append(message)
    builder.record(transcript, message)
    transcript.add("user", "Bye.")
    second = builder.next_prompt(transcript)
    assert second.rebuilt is not None
    assert second.rebuilt.startswith("the chat template rewrote the history at character 0")
    assert second.text.startswith("3 messages\n")


def test_check_template_names_the_first_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = model_dir(tmp_path, "Qwen3-8B")
    assert cli.main(["check-template", str(path)]) == 0
    assert "all " in capsys.readouterr().out
    assert cli.main(["check-template", str(path), "--profile", "smollm2"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS" in out
    assert "first difference at character" in out
    assert cli.main(["check-template", str(path), "--profile", "qwen3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all(row["equal"] for row in report["conversations"])


async def test_serve_renders_with_the_model_directory_template(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": "Hello there."}) + "\n", encoding="utf-8")
    path = model_dir(tmp_path)
    app, engine, profile = build_app(ServeOptions(script=script, chat_template=path))
    assert isinstance(profile.template, HFChatTemplate)
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 20}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as c:
        response = await c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Hello there."
    (request,) = engine.requests  # type: ignore[attr-defined]
    expected = HFChatTemplate(path).render(Transcript.from_prompt("Hi."), [])
    assert request.prompt == expected


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.__class__.__mro__ }}",
        "{{ ''.__class__.__base__.__subclasses__() }}",
        "{{ raise_exception.__globals__['os'] }}",
        "{% set _ = messages.append(1) %}",
        "{% set _ = messages[0].update({'role': 'x'}) %}",
    ],
)
def test_the_template_sandbox_still_refuses_unsafe_access(tmp_path: Path, source: str) -> None:
    """The sandbox remembers its verdicts per type and reads dict items directly; it still
    refuses internal attributes and changes to the conversation."""
    path = tmp_path / "evil.jinja"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(ConfigurationError, match="failed"):
        HFChatTemplate(path).render(Transcript.from_prompt("hi"), [])


def test_the_template_reads_message_fields_and_dict_methods(tmp_path: Path) -> None:
    path = tmp_path / "fields.jinja"
    path.write_text(
        "{% for m in messages %}{{ m.role }}:{{ m['content'] }}:{{ m.items() | list | length }}"
        "{{ m.missing is defined }};{% endfor %}",
        encoding="utf-8",
    )
    assert HFChatTemplate(path).render(Transcript.from_prompt("hi"), []) == "user:hi:2False;"


WORDS = st.text(alphabet='ab <|>_/\n"{}', max_size=12)
MARKERS = st.sampled_from(["<|im_end|>", "<|im_start|>system\n", "<tool_call>", "</think>"])
CONTENT = st.lists(st.one_of(WORDS, MARKERS), max_size=5).map("".join)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(CONTENT, CONTENT, st.booleans()), min_size=1, max_size=4))
def test_any_tool_loop_through_the_native_path_equals_the_template(
    tmp_path_factory: pytest.TempPathFactory, turns: list[tuple[str, str, bool]]
) -> None:
    """A tool loop of any length and content: each prompt equals the template's rendering,
    its ids spell it with no control token but the template's, and it extends the last."""
    path = model_dir(tmp_path_factory.mktemp("m"))
    profile = native_profile(path)
    engine = TokenizedScriptedEngine([], specials=get_profile("qwen3").special_tokens)
    builder = PromptBuilder(profile, engine, [lookup.spec()])
    template = HFChatTemplate(path)
    transcript = Transcript.from_prompt("Go.", system="Be brief.")
    previous: list[int] = []
    for argument, result, think in turns:
        prompt = builder.next_prompt(transcript)
        assert prompt.text == template.render(transcript, [lookup.spec()])
        assert prompt.token_ids is not None
        assert engine.decode(prompt.token_ids) == prompt.text
        assert prompt.token_ids[: len(previous)] == previous
        call = json.dumps({"name": "lookup", "arguments": {"key": argument}})
        output = (
            "<think>\nHm.\n</think>\n\n" if think else ""
        ) + f"<tool_call>\n{call}\n</tool_call>"
        parser = profile.new_parser({"lookup": {}})
        parser.feed(output)
        parser.finish()
        ids = [*engine.encode(output), *engine.encode("<|im_end|>")]
        message = Message(role="assistant", content=list(parser.blocks), token_ids=ids)
        transcript.append(message)
        builder.record(transcript, message)
        previous = [*prompt.token_ids, *ids]
        call_id = message.tool_calls[0].id
        transcript.add("tool", [ToolResultBlock(call_id=call_id, name="lookup", content=result)])


def test_check_template_reports_what_the_template_refuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Llama 3.1's template raises on two calls in one message: that conversation is
    reported as refused, the others compared (with the BOS its tokenizer config would give)."""
    llama = str(REFERENCES / "llama-3.1-instruct.jinja")
    argv = ["check-template", llama, "--profile", "llama3", "--var", "bos_token=<|begin_of_text|>"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "refused  tools, results and a new user turn" in out
    assert "only supports single tool-calls" in out
    assert cli.main([*argv[:4], "--json"]) == 1  # without the BOS every prompt differs
    rows = json.loads(capsys.readouterr().out)["conversations"]
    assert [r["equal"] for r in rows] == [False, False, False, False, None]
    assert cli.main([*argv[:4], "--var", "no-equals-sign"]) == 2


def test_a_template_that_concatenates_arguments_gets_json_text() -> None:
    """DeepSeek-V3.1's template concatenates call arguments as text: it gets the JSON an
    OpenAI client sends, and renders a call the way it would for that client."""
    from agentkit.template_check import standard_conversations

    template = HFChatTemplate(REFERENCES / "deepseek-v3.1.jinja", profile="v3.1-arguments")
    (conversation,) = [c for c in standard_conversations() if c.name == "one tool call"]
    prompt = template.render(conversation.transcript, conversation.tools)
    assert '<｜tool▁sep｜>{"key": "Oslo"}<｜tool▁call▁end｜>' in prompt
