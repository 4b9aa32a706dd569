"""The qwen3 profile against Qwen3's own template (the reference every other family's test
follows)."""

from __future__ import annotations

import pytest
from _references import jinja_reference

from agentkit.profiles import get_profile
from agentkit.template_check import compare, conversations_for

PROFILE = get_profile("qwen3")


@pytest.mark.parametrize("conversation", conversations_for(PROFILE), ids=lambda c: c.name)
def test_qwen3_prompts_equal_the_template(conversation: object) -> None:
    ((_, difference),) = compare(PROFILE, jinja_reference("qwen3.jinja"), [conversation])  # type: ignore[list-item]
    assert difference is None, difference.describe()
