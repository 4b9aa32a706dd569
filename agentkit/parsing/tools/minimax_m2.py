"""MiniMax-M2 tool calls: XML ``invoke`` elements in a ``<minimax:tool_call>`` section::

    <minimax:tool_call>
    <invoke name="read_file">
    <parameter name="path">src/a.py</parameter>
    <parameter name="limit">20</parameter>
    </invoke>
    </minimax:tool_call>

The shape of DSML with plain tags and without the ``string`` attribute: a value is typed by
the tool's JSON schema (a string parameter verbatim; anything else JSON, or the text itself
when it is not JSON). Parsing, streaming and recovery are :class:`.dsml.InvokeSection`'s.
"""

from __future__ import annotations

from agentkit.parsing.tools.dsml import InvokeTags, InvokeToolSyntax

__all__ = ["MINIMAX_M2"]

MINIMAX_M2 = InvokeToolSyntax(
    "minimax_m2",
    InvokeTags(
        start="<minimax:tool_call>",
        end="</minimax:tool_call>",
        invoke="<invoke",
        invoke_end="</invoke>",
        parameter="<parameter",
        parameter_end="</parameter>",
    ),
)
