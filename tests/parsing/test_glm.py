"""GLM-4.5/4.6 and GLM-4.7 tool calls: names, typed values, streaming, recovery, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from _parsing_helpers import (
    TAG_PIECES,
    calls,
    check,
    factory,
    json_values,
    run,
    soups,
    splits,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.events import ToolCallArgumentsDelta, ToolCallStarted
from agentkit.parsing.reasoning import THINK
from agentkit.parsing.tools.glm import GLM45, GLM47, GlmToolSyntax
from agentkit.transcript import ToolCallBlock

SCHEMAS: dict[str, Any] = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"enum": ["c", "f"]},
        },
    },
    "run": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "env": {"type": "object"},
            "timeout": {"type": ["number", "null"]},
        },
    },
}


def call45(name: str, **args: str) -> str:
    pairs = "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in args.items()
    )
    return f"<tool_call>{name}\n{pairs}</tool_call>"


def call47(name: str, **args: str) -> str:
    pairs = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args.items())
    return f"<tool_call>{name}{pairs}</tool_call>"


SCRIPT = 'for f in *.py; do grep -n "<arg_value" "$f" | sed \'s/\\\\/\\//g\'; done\n# ✓ ü\n'
CORPUS = [
    "<think>Weather for two cities.</think>\n\nChecking.\n"
    + call45("get_weather", city="Paris", days="3", units="c")
    + "\n"
    + call45("get_weather", city="São Paulo", days="1")
    + "\n\nDone.",
    call45("run", cmd=SCRIPT, env='{"PATH": "/bin", "N": [1, {"x": null}]}', timeout="null")
    + "\n"
    + call45("now"),
    "Hi " + call47("get_weather", city=' "quoted" \\ ', days="2") + call47("now") + " bye",
    call47("run", cmd="echo </arg_value", timeout="1.5") + call47("unknown", x="[1]"),
]


@pytest.mark.parametrize("syntax", [GLM45, GLM47])
@pytest.mark.parametrize("output", CORPUS)
def test_corpus_is_chunk_invariant(output: str, syntax: GlmToolSyntax) -> None:
    check(factory(THINK, syntax, schemas=SCHEMAS), output)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_splits(data: st.DataObject) -> None:
    output = data.draw(st.sampled_from(CORPUS))
    check(factory(THINK, GLM45, schemas=SCHEMAS), output, data.draw(splits(output)))


def test_arguments() -> None:
    make = factory(THINK, GLM45, schemas=SCHEMAS)
    found = [[(c.name, c.arguments, c.error) for c in calls(check(make, o))] for o in CORPUS]
    assert found[0] == [
        ("get_weather", {"city": "Paris", "days": 3, "units": "c"}, None),
        ("get_weather", {"city": "São Paulo", "days": 1}, None),
    ]
    assert found[1] == [
        (
            "run",
            {"cmd": SCRIPT, "env": {"PATH": "/bin", "N": [1, {"x": None}]}, "timeout": None},
            None,
        ),
        ("now", {}, None),
    ]
    assert found[2] == [
        ("get_weather", {"city": ' "quoted" \\ ', "days": 2}, None),
        ("now", {}, None),
    ]
    assert found[3] == [
        ("run", {"cmd": "echo </arg_value", "timeout": 1.5}, None),
        ("unknown", {"x": "[1]"}, None),
    ]


def test_call_starts_at_the_end_of_the_name() -> None:
    parser = factory(None, GLM47, schemas=SCHEMAS)()
    assert not [e for e in parser.feed("<tool_call>get_wea") if isinstance(e, ToolCallStarted)]
    events = parser.feed("ther<")
    assert [e.name for e in events if isinstance(e, ToolCallStarted)] == ["get_weather"]
    parser.feed("arg_key>city</arg_key><arg_value>Lo")
    deltas = parser.feed("ndon")
    assert [e.delta for e in deltas if isinstance(e, ToolCallArgumentsDelta)] == ["ndon"]


def test_raw_is_every_byte() -> None:
    output = "a\n" + call45("now") + "\n" + call45("now") + "\n"
    blocks = check(factory(None, GLM45), output)
    assert [b.model_dump()["raw"] for b in blocks] == [
        "a\n",
        call45("now"),
        "\n" + call45("now") + "\n",
    ]


# --- malformed and truncated output ---------------------------------------------------------


def only_call(output: str) -> ToolCallBlock:
    (call,) = calls(check(factory(None, GLM45, schemas=SCHEMAS), output))
    return call


def test_missing_end_after_whole_arguments_is_recovered() -> None:
    call = only_call(
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n"
    )
    assert (call.name, call.arguments, call.error) == ("get_weather", {"city": "Rome"}, None)


@pytest.mark.parametrize(
    ("output", "fragment"),
    [
        (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Ro",
            "value of argument 'city'",
        ),
        ("<tool_call>get_weather\n<arg_key>ci", "argument name"),
        ("<tool_call>get_weather\n<arg_key>city</arg_key>\n", "argument 'city'"),
        ("<tool_call>get_wea", "the tool's name"),
    ],
)
def test_truncated(output: str, fragment: str) -> None:
    call = only_call(output)
    assert call.error is not None
    assert "cut off" in call.error
    assert fragment in call.error
    assert call.raw == output


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('{"name": "get_weather", "arguments": {}}\n', "tool's name"),
        ("get_weather\nplease</tool_call>", "found 'p'"),
        ("get_weather\n<arg_key>city</arg_key>\nParis</tool_call>", "expected <arg_value>"),
        ("get_weather\n<arg_key></arg_key>\n<arg_value>1</arg_value>\n", "argument's name"),
        ("x" * 300 + "\n", "longer than"),
    ],
)
def test_malformed(body: str, fragment: str) -> None:
    output = (
        f"<tool_call>{body}</tool_call>"
        if not body.endswith("</tool_call>")
        else f"<tool_call>{body}"
    )
    blocks = check(factory(None, GLM45, schemas=SCHEMAS), output + " after")
    call = calls(blocks)[0]
    assert call.error is not None
    assert fragment in call.error
    assert "Write each call as" in call.error
    assert call.raw == output
    assert blocks[-1].model_dump()["raw"] == " after"


def test_malformed_without_end_swallows_to_the_end_of_output() -> None:
    call = only_call("<tool_call>get weather now")
    assert call.error is not None
    assert call.raw == "<tool_call>get weather now"


def test_section_alone_hands_back_what_follows() -> None:
    part = GLM47.new_section("<tool_call>", SCHEMAS)
    step = part.feed("now</tool_call><tool_call>")
    assert step.done
    assert step.consumed == len("now</tool_call>")
    assert [type(e).__name__ for e in step.events] == [
        "CallStart",
        "CallArguments",
        "CallArguments",
        "CallEnd",
    ]


# --- render ----------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,20}", fullmatch=True)
VALUES = json_values(st.text(), keys=st.text(max_size=5))
ARGUMENTS = st.dictionaries(
    st.text(min_size=1, max_size=10).filter(lambda k: k.strip() == k and "</arg_key>" not in k),
    VALUES.filter(lambda v: not isinstance(v, str) or "</arg_value>" not in v),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(name=NAMES, arguments=ARGUMENTS, syntax=st.sampled_from([GLM45, GLM47]), n=st.integers(1, 2))
def test_render_parse_identity(
    name: str, arguments: dict[str, Any], syntax: GlmToolSyntax, n: int
) -> None:
    properties = {k: {"type": "string"} if isinstance(v, str) else {} for k, v in arguments.items()}
    schemas = {name: {"type": "object", "properties": properties}}
    blocks = [ToolCallBlock(id="x", name=name, arguments=arguments)] * n
    parsed = calls(run(factory(None, syntax, schemas=schemas), [syntax.render(blocks)])[0])
    assert [(c.name, c.arguments, c.error) for c in parsed] == [(name, arguments, None)] * n


def test_render_layouts() -> None:
    call = ToolCallBlock(id="1", name="get_weather", arguments={"city": "Paris", "days": 3})
    assert GLM45.render([call]) == call45("get_weather", city="Paris", days="3")
    assert GLM47.render([call, call]) == call47("get_weather", city="Paris", days="3") * 2
    assert GLM45.render([ToolCallBlock(id="2", name="now")]) == "<tool_call>now\n</tool_call>"


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "get_weather",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "city",
    "days",
    "3",
    *TAG_PIECES,
]


@settings(max_examples=80, deadline=None)
@given(output=soups(FRAGMENTS), data=st.data(), syntax=st.sampled_from([GLM45, GLM47]))
def test_fuzz_any_mix_of_fragments_keeps_every_invariant(
    output: str, data: st.DataObject, syntax: GlmToolSyntax
) -> None:
    check(factory(THINK, syntax, schemas=SCHEMAS), output, data.draw(splits(output)))
