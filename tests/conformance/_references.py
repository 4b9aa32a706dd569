"""The models' own templates and encoders, as reference renderers for the conformance tests.

The Jinja templates are read from ``../shared/reference-templates/`` beside the repository
(they are the vendors' files: never copied into the project). A reference is a function from a
:class:`~agentkit.template_check.Conversation` to the prompt text the model's own template
renders for it, with the template's own defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.profiles import HFChatTemplate
from agentkit.template_check import Conversation, Render

REFERENCE_TEMPLATES = Path(__file__).resolve().parents[2].parent / "shared" / "reference-templates"


def template_path(name: str) -> Path:
    """A reference template by file name; a missing one fails the test (never a skip)."""
    path = REFERENCE_TEMPLATES / name
    assert path.is_file(), f"reference template {name} not found in {REFERENCE_TEMPLATES}"
    return path


def jinja_reference(
    name: str, *, reasoning_key: str = "reasoning_content", **variables: Any
) -> Render:
    """The reference template ``name`` rendered as transformers' ``apply_chat_template``
    would (``add_generation_prompt=True``, ``enable_thinking`` from the conversation,
    ``variables`` such as ``bos_token``)."""
    template = HFChatTemplate(
        template_path(name),
        profile=f"reference {name}",
        variables=variables,
        reasoning_key=reasoning_key,
    )

    def render(conversation: Conversation) -> str:
        return template.render(
            conversation.transcript, conversation.tools, thinking=conversation.thinking
        )

    return render
