"""Incremental parsers for each model family's reasoning and tool-call formats.

A format is a :class:`ReasoningSyntax` and/or a :class:`ToolSyntax`, composed by
:class:`MarkerStreamParser`; :func:`get_reasoning_syntax` and :func:`get_tool_syntax` look them
up by name, and :func:`render_blocks` turns parsed blocks back into the model's text.
"""

from agentkit.parsing._base import CallArguments as CallArguments
from agentkit.parsing._base import CallEnd as CallEnd
from agentkit.parsing._base import CallsInReasoning as CallsInReasoning
from agentkit.parsing._base import CallStart as CallStart
from agentkit.parsing._base import ReasoningSyntax as ReasoningSyntax
from agentkit.parsing._base import SectionStep as SectionStep
from agentkit.parsing._base import StreamParser as StreamParser
from agentkit.parsing._base import ToolSection as ToolSection
from agentkit.parsing._base import ToolSyntax as ToolSyntax
from agentkit.parsing._constraints import CallShape as CallShape
from agentkit.parsing._constraints import call_shape as call_shape
from agentkit.parsing._constraints import tool_call_constraint as tool_call_constraint
from agentkit.parsing._factory import create_parser as create_parser
from agentkit.parsing._factory import stream_format_names as stream_format_names
from agentkit.parsing._render import render_blocks as render_blocks
from agentkit.parsing._stream import MarkerStreamParser as MarkerStreamParser
from agentkit.parsing.reasoning import get_reasoning_syntax as get_reasoning_syntax
from agentkit.parsing.tools import get_tool_syntax as get_tool_syntax

__all__ = [
    "CallArguments",
    "CallEnd",
    "CallShape",
    "CallStart",
    "CallsInReasoning",
    "MarkerStreamParser",
    "ReasoningSyntax",
    "SectionStep",
    "StreamParser",
    "ToolSection",
    "ToolSyntax",
    "call_shape",
    "create_parser",
    "get_reasoning_syntax",
    "get_tool_syntax",
    "render_blocks",
    "stream_format_names",
    "tool_call_constraint",
]
