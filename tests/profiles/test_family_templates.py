# ruff: noqa: E501  (golden prompts are long lines)
"""The family chat templates: golden prompts, exact replay, parser round trips.

The golden strings were derived from each family's published template or encoder (see the
docstring of each template module for its source) and checked by hand against them for this
conversation; ``test_deepseek_*_policy_form`` spell out, independently, the encoders' own
output for the conversation with reasoning removed (the form their history takes).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from _family_conversation import FIRST_TURN, LOOKUP, RESULTS, SECOND_TURN, TOOLS, conversation

from agentkit.parsing import create_parser
from agentkit.profiles import ChatMLTemplate, IncrementalTemplate
from agentkit.profiles._families import FAMILY_FORMATS, FAMILY_STOPS, FAMILY_TEMPLATES
from agentkit.transcript import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    Transcript,
)

FAMILIES = sorted(FAMILY_TEMPLATES)
SPECIFIC = [f for f in FAMILIES if f != "generic"]

GOLDEN: dict[str, str] = {
    "deepseek-r1": (
        "<｜begin▁of▁sentence｜>Be terse.\n"
        "\n"
        "You are a helpful assistant with tool calling capabilities. When a tool call is needed, you MUST use the following format to issue the call:\n"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME\n"
        "```json\n"
        '{"param1": "value1", "param2": "value2"}\n'
        "```<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n"
        "\n"
        "Make sure the JSON is valid.## Tools\n"
        "\n"
        "### Function\n"
        "\n"
        "You have the following functions available:\n"
        "\n"
        "\n"
        "```json\n"
        '{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}\n'
        "```\n"
        "<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>\n"
        "Check Paris.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lookup\n"
        "```json\n"
        '{"key": "Paris"}\n'
        "```<｜tool▁call▁end｜><｜tool▁calls▁end｜><think>Now Oslo.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lookup\n"
        "```json\n"
        '{"key": "Oslo", "limit": 2}\n'
        "```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>20C<｜tool▁output▁end｜>\n"
        "<｜tool▁output▁begin｜>5C<｜tool▁output▁end｜><｜tool▁outputs▁end｜><think>Both known.</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜><｜User｜>Thanks.<｜Assistant｜><think>\n"
    ),
    "deepseek-v3.1": (
        "<｜begin▁of▁sentence｜>Be terse.\n"
        "\n"
        "## Tools\n"
        "You have access to the following tools:\n"
        "\n"
        "### lookup\n"
        "Description: Look a key up.\n"
        "\n"
        'Parameters: {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}\n'
        "\n"
        "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n"
        "\n"
        "Where:\n"
        "\n"
        "- `tool_call_name` must be an exact match to one of the available tools\n"
        "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
        '- For multiple tool calls, chain them directly without separators or spaces<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>Check Paris.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>lookup<｜tool▁sep｜>{"key": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><think>Now Oslo.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>lookup<｜tool▁sep｜>{"key": "Oslo", "limit": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>20C<｜tool▁output▁end｜><｜tool▁output▁begin｜>5C<｜tool▁output▁end｜><think>Both known.</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜><｜User｜>Thanks.<｜Assistant｜><think>'
    ),
    "deepseek-v3.2": (
        "<｜begin▁of▁sentence｜>Be terse.\n"
        "\n"
        "## Tools\n"
        "You have access to a set of tools you can use to answer the user's question.\n"
        'You can invoke functions by writing a "<｜DSML｜function_calls>" block like the following as part of your reply to the user:\n'
        "<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="$FUNCTION_NAME">\n'
        '<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜parameter>\n'
        "...\n"
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="$FUNCTION_NAME2">\n'
        "...\n"
        "</｜DSML｜invoke>\n"
        "</｜DSML｜function_calls>\n"
        'String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).\n'
        "If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n"
        "<｜DSML｜function_calls>\n"
        "...\n"
        "</｜DSML｜function_calls>\n"
        "<function_results>\n"
        "...\n"
        "</function_results>\n"
        "<think>...thinking about results</think>\n"
        "Here are the functions available in JSONSchema format:\n"
        "<functions>\n"
        '{"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}\n'
        "</functions>\n"
        "<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>Check Paris.</think>\n"
        "\n"
        "<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜function_calls><think>Now Oslo.</think>\n"
        "\n"
        "<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Oslo</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="limit" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜function_calls><｜end▁of▁sentence｜>\n"
        "\n"
        "<function_results>\n"
        "<result>20C</result>\n"
        "<result>5C</result>\n"
        "</function_results>\n"
        "\n"
        "<think>Both known.</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜><｜User｜>Thanks.<｜Assistant｜><think>"
    ),
    "deepseek-v4": (
        "<｜begin▁of▁sentence｜>Be terse.\n"
        "\n"
        "## Tools\n"
        "\n"
        'You have access to a set of tools to help answer the user\'s question. You can invoke tools by writing a "<｜DSML｜tool_calls>" block like the following:\n'
        "\n"
        "<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="$TOOL_NAME">\n'
        '<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜parameter>\n'
        "...\n"
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="$TOOL_NAME2">\n'
        "...\n"
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls>\n"
        "\n"
        'String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\n'
        "\n"
        "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n"
        "\n"
        "Otherwise, output directly after </think> with tool calls or final response.\n"
        "\n"
        "### Available Tool Schemas\n"
        "\n"
        '{"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}\n'
        "\n"
        "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"
        "<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>Check Paris.</think>\n"
        "\n"
        "<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls><think>Now Oslo.</think>\n"
        "\n"
        "<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Oslo</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="limit" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>20C</tool_result>\n"
        "\n"
        "<tool_result>5C</tool_result><｜Assistant｜><think>Both known.</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜><｜User｜>Thanks.<｜Assistant｜><think>"
    ),
    "deepseek-v4.1": (
        "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n"
        "\n"
        "Be terse.\n"
        "\n"
        "## Tools\n"
        "\n"
        'You have access to a set of tools to help answer the user\'s question. You can invoke tools by writing a "<｜DSML｜ calls>" block like the following:\n'
        "\n"
        "<｜DSML｜ calls>\n"
        '<｜DSML｜ invoke name="$TOOL_NAME">\n'
        '<｜DSML｜ parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜ parameter>\n'
        "...\n"
        "</｜DSML｜ invoke>\n"
        '<｜DSML｜ invoke name="$TOOL_NAME2">\n'
        "...\n"
        "</｜DSML｜ invoke>\n"
        "</｜DSML｜ calls>\n"
        "\n"
        'String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\n'
        "\n"
        "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n"
        "\n"
        "Otherwise, output directly after </think> with tool calls or final response.\n"
        "\n"
        "### Available Tool Schemas\n"
        "\n"
        '{"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}\n'
        "\n"
        "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"
        "<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>Check Paris.</think>\n"
        "\n"
        "<｜DSML｜ calls>\n"
        '<｜DSML｜ invoke name="lookup">\n'
        '<｜DSML｜ parameter name="key" string="true">Paris</｜DSML｜ parameter>\n'
        "</｜DSML｜ invoke>\n"
        "</｜DSML｜ calls><think>Now Oslo.</think>\n"
        "\n"
        "<｜DSML｜ calls>\n"
        '<｜DSML｜ invoke name="lookup">\n'
        '<｜DSML｜ parameter name="key" string="true">Oslo</｜DSML｜ parameter>\n'
        '<｜DSML｜ parameter name="limit" string="false">2</｜DSML｜ parameter>\n'
        "</｜DSML｜ invoke>\n"
        "</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>20C</tool_result>\n"
        "\n"
        "<tool_result>5C</tool_result><｜Assistant｜><think>Both known.</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜><｜User｜>Thanks.<｜Assistant｜><think>"
    ),
    "kimi-k2": (
        '<|im_system|>tool_declare<|im_middle|>[{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}]<|im_end|><|im_system|>system<|im_middle|>Be terse.<|im_end|><|im_user|>user<|im_middle|>Weather in Paris and Oslo?<|im_end|><|im_assistant|>assistant<|im_middle|><think>Check Paris.</think><|tool_calls_section_begin|><|tool_call_begin|>functions.lookup:0<|tool_call_argument_begin|>{"key": "Paris"}<|tool_call_end|><|tool_calls_section_end|><think>Now Oslo.</think><|tool_calls_section_begin|><|tool_call_begin|>functions.lookup:1<|tool_call_argument_begin|>{"key": "Oslo", "limit": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|><|im_system|>lookup<|im_middle|>## Return of functions.lookup:0\n'
        "20C<|im_end|><|im_system|>lookup<|im_middle|>## Return of functions.lookup:1\n"
        "5C<|im_end|><|im_assistant|>assistant<|im_middle|><think>Both known.</think>Paris 20C, Oslo 5C.<|im_end|><|im_user|>user<|im_middle|>Thanks.<|im_end|><|im_assistant|>assistant<|im_middle|>"
    ),
    "glm-4.5": (
        "[gMASK]<sop><|system|>\n"
        "# Tools\n"
        "\n"
        "You may call one or more functions to assist with the user query.\n"
        "\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n"
        '{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}\n'
        "</tools>\n"
        "\n"
        "For each function call, output the function name and arguments within the following XML format:\n"
        "<tool_call>{function-name}\n"
        "<arg_key>{arg-key-1}</arg_key>\n"
        "<arg_value>{arg-value-1}</arg_value>\n"
        "<arg_key>{arg-key-2}</arg_key>\n"
        "<arg_value>{arg-value-2}</arg_value>\n"
        "...\n"
        "</tool_call><|system|>\n"
        "Be terse.<|user|>\n"
        "Weather in Paris and Oslo?<|assistant|>\n"
        "<think>Check Paris.</think>\n"
        "<tool_call>lookup\n"
        "<arg_key>key</arg_key>\n"
        "<arg_value>Paris</arg_value>\n"
        "</tool_call>\n"
        "<think>Now Oslo.</think>\n"
        "<tool_call>lookup\n"
        "<arg_key>key</arg_key>\n"
        "<arg_value>Oslo</arg_value>\n"
        "<arg_key>limit</arg_key>\n"
        "<arg_value>2</arg_value>\n"
        "</tool_call><|observation|>\n"
        "<tool_response>\n"
        "20C\n"
        "</tool_response>\n"
        "<tool_response>\n"
        "5C\n"
        "</tool_response><|assistant|>\n"
        "<think>Both known.</think>\n"
        "Paris 20C, Oslo 5C.<|user|>\n"
        "Thanks.<|assistant|>"
    ),
    "glm-4.7": (
        "[gMASK]<sop><|system|>\n"
        "# Tools\n"
        "\n"
        "You may call one or more functions to assist with the user query.\n"
        "\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n"
        '{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}\n'
        "</tools>\n"
        "\n"
        "For each function call, output the function name and arguments within the following XML format:\n"
        "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|system|>Be terse.<|user|>Weather in Paris and Oslo?<|assistant|><think>Check Paris.</think><tool_call>lookup<arg_key>key</arg_key><arg_value>Paris</arg_value></tool_call><think>Now Oslo.</think><tool_call>lookup<arg_key>key</arg_key><arg_value>Oslo</arg_value><arg_key>limit</arg_key><arg_value>2</arg_value></tool_call><|observation|><tool_response>20C</tool_response><tool_response>5C</tool_response><|assistant|><think>Both known.</think>Paris 20C, Oslo 5C.<|user|>Thanks.<|assistant|><think>"
    ),
    "minimax-m2": (
        "]~!b[]~b]system\n"
        "Be terse.\n"
        "\n"
        "# Tools\n"
        "You may call one or more tools to assist with the user query.\n"
        "Here are the tools available in JSONSchema format:\n"
        "\n"
        "<tools>\n"
        '<tool>{"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}</tool>\n'
        "</tools>\n"
        "\n"
        "When making tool calls, use XML format to invoke tools and pass parameters:\n"
        "\n"
        "<minimax:tool_call>\n"
        '<invoke name="tool-name-1">\n'
        '<parameter name="param-key-1">param-value-1</parameter>\n'
        '<parameter name="param-key-2">param-value-2</parameter>\n'
        "...\n"
        "</invoke>\n"
        "</minimax:tool_call>[e~[\n"
        "]~b]user\n"
        "Weather in Paris and Oslo?[e~[\n"
        "]~b]ai\n"
        "<think>\n"
        "Check Paris.\n"
        "</think>\n"
        "\n"
        "\n"
        "<minimax:tool_call>\n"
        '<invoke name="lookup">\n'
        '<parameter name="key">Paris</parameter>\n'
        "</invoke>\n"
        "</minimax:tool_call><think>\n"
        "Now Oslo.\n"
        "</think>\n"
        "\n"
        "\n"
        "<minimax:tool_call>\n"
        '<invoke name="lookup">\n'
        '<parameter name="key">Oslo</parameter>\n'
        '<parameter name="limit">2</parameter>\n'
        "</invoke>\n"
        "</minimax:tool_call>[e~[\n"
        "]~b]tool\n"
        "<response>20C</response>\n"
        "<response>5C</response>[e~[\n"
        "]~b]ai\n"
        "<think>\n"
        "Both known.\n"
        "</think>\n"
        "\n"
        "Paris 20C, Oslo 5C.[e~[\n"
        "]~b]user\n"
        "Thanks.[e~[\n"
        "]~b]ai\n"
        "<think>\n"
    ),
    "gpt-oss": (
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\n"
        "Current date: 2025-08-05\n"
        "\n"
        "Reasoning: medium\n"
        "\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
        "Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions\n"
        "\n"
        "Be terse.\n"
        "\n"
        "# Tools\n"
        "\n"
        "## functions\n"
        "\n"
        "namespace functions {\n"
        "\n"
        "// Look a key up.\n"
        "type lookup = (_: {\n"
        "// The key.\n"
        "key: string,\n"
        "limit?: number, // default: 3\n"
        "}) => any;\n"
        "\n"
        '} // namespace functions<|end|><|start|>user<|message|>Weather in Paris and Oslo?<|end|><|start|>assistant<|channel|>analysis<|message|>Check Paris.<|end|><|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"key": "Paris"}<|call|><|start|>assistant<|channel|>analysis<|message|>Now Oslo.<|end|><|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"key": "Oslo", "limit": 2}<|call|><|start|>functions.lookup to=assistant<|channel|>commentary<|message|>20C<|end|><|start|>functions.lookup to=assistant<|channel|>commentary<|message|>5C<|end|><|start|>assistant<|channel|>analysis<|message|>Both known.<|end|><|start|>assistant<|channel|>final<|message|>Paris 20C, Oslo 5C.<|end|><|start|>user<|message|>Thanks.<|end|><|start|>assistant'
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
        "\n"
        "Environment: ipython\n"
        "Cutting Knowledge Date: December 2023\n"
        "Today Date: 26 Jul 2024\n"
        "\n"
        "Be terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n"
        "\n"
        'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n'
        "\n"
        "{\n"
        '    "type": "function",\n'
        '    "function": {\n'
        '        "name": "lookup",\n'
        '        "description": "Look a key up.",\n'
        '        "parameters": {\n'
        '            "type": "object",\n'
        '            "properties": {\n'
        '                "key": {\n'
        '                    "type": "string",\n'
        '                    "description": "The key."\n'
        "                },\n"
        '                "limit": {\n'
        '                    "default": 3,\n'
        '                    "type": "integer"\n'
        "                }\n"
        "            },\n"
        '            "required": [\n'
        '                "key"\n'
        "            ]\n"
        "        }\n"
        "    }\n"
        "}\n"
        "\n"
        "Weather in Paris and Oslo?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
        '<think>Check Paris.</think>{"name": "lookup", "parameters": {"key": "Paris"}}<think>Now Oslo.</think>{"name": "lookup", "parameters": {"key": "Oslo", "limit": 2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n'
        "\n"
        '"20C"<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n'
        "\n"
        '"5C"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n'
        "\n"
        "<think>Both known.</think>Paris 20C, Oslo 5C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Thanks.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
    ),
    "mistral-v11": (
        '<s>[SYSTEM_PROMPT]Be terse.[/SYSTEM_PROMPT][INST]Weather in Paris and Oslo?[/INST][TOOL_CALLS]lookup[CALL_ID]c1[ARGS]{"key": "Paris"}[TOOL_CALLS]lookup[CALL_ID]c2[ARGS]{"key": "Oslo", "limit": 2}</s>[TOOL_RESULTS]c1[TOOL_CONTENT]20C[/TOOL_RESULTS][TOOL_RESULTS]c2[TOOL_CONTENT]5C[/TOOL_RESULTS]Paris 20C, Oslo 5C.</s>[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}][/AVAILABLE_TOOLS][INST]Thanks.[/INST]'
    ),
    "mistral-v13": (
        '<s>[SYSTEM_PROMPT]Be terse.[/SYSTEM_PROMPT][AVAILABLE_TOOLS][{"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "The key."}, "limit": {"default": 3, "type": "integer"}}, "required": ["key"]}}}][/AVAILABLE_TOOLS][INST]Weather in Paris and Oslo?[/INST][THINK]Check Paris.[/THINK][TOOL_CALLS]lookup[ARGS]{"key": "Paris"}[THINK]Now Oslo.[/THINK][TOOL_CALLS]lookup[ARGS]{"key": "Oslo", "limit": 2}</s>[TOOL_RESULTS]20C[/TOOL_RESULTS][TOOL_RESULTS]5C[/TOOL_RESULTS][THINK]Both known.[/THINK]Paris 20C, Oslo 5C.</s>[INST]Thanks.[/INST]'
    ),
}


def test_the_tables_cover_the_same_families() -> None:
    assert set(FAMILY_TEMPLATES) == set(FAMILY_STOPS) == set(FAMILY_FORMATS)
    assert set(FAMILY_TEMPLATES) == {
        "deepseek-r1",
        "deepseek-v3.1",
        "deepseek-v3.2",
        "deepseek-v4",
        "deepseek-v4.1",
        "kimi-k2",
        "glm-4.5",
        "glm-4.7",
        "minimax-m2",
        "gpt-oss",
        "llama3",
        "mistral-v11",
        "mistral-v13",
        "generic",
    }
    assert isinstance(FAMILY_TEMPLATES["generic"], ChatMLTemplate)


@pytest.mark.parametrize("family", FAMILIES)
def test_formats_name_registered_parsers(family: str) -> None:
    reasoning, tools = FAMILY_FORMATS[family]
    create_parser(reasoning, tools)
    template = FAMILY_TEMPLATES[family]
    assert isinstance(template, IncrementalTemplate)
    end = template.assistant_end
    assert end == "" or any(end.startswith(stop) for stop in FAMILY_STOPS[family])


@pytest.mark.parametrize("family", SPECIFIC)
def test_golden_prompt(family: str) -> None:
    assert FAMILY_TEMPLATES[family].render(conversation(), TOOLS) == GOLDEN[family]


def _without_reasoning() -> Transcript:
    t = conversation()
    for m in t.messages:
        m.content = [b for b in m.content if not isinstance(b, ReasoningBlock)]
    return t


def test_deepseek_v32_policy_form() -> None:
    """encoding_dsv32.encode_messages(thinking_mode="thinking") history form: reasoning dropped
    before the last user message, ``</think>`` after every earlier turn, one DSML section."""
    prompt = FAMILY_TEMPLATES["deepseek-v3.2"].render(_without_reasoning(), [])
    assert prompt == (
        "<｜begin▁of▁sentence｜>Be terse.<｜User｜>Weather in Paris and Oslo?<｜Assistant｜></think>"
        "\n\n<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Oslo</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="limit" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜function_calls><｜end▁of▁sentence｜>"
        "\n\n<function_results>\n<result>20C</result>\n<result>5C</result>\n</function_results>"
        "\n\n</think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜>"
        "<｜User｜>Thanks.<｜Assistant｜><think>"
    )


def test_deepseek_v4_policy_form() -> None:
    """DeepSeek-V4's encoder (tools merged into a user turn of ``<tool_result>`` parts)."""
    prompt = FAMILY_TEMPLATES["deepseek-v4"].render(_without_reasoning(), [])
    assert prompt == (
        "<｜begin▁of▁sentence｜>Be terse.<｜User｜>Weather in Paris and Oslo?<｜Assistant｜></think>"
        "\n\n<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="lookup">\n'
        '<｜DSML｜parameter name="key" string="true">Oslo</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="limit" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
        "<｜User｜><tool_result>20C</tool_result>\n\n<tool_result>5C</tool_result>"
        "<｜Assistant｜></think>Paris 20C, Oslo 5C.<｜end▁of▁sentence｜>"
        "<｜User｜>Thanks.<｜Assistant｜><think>"
    )


def test_dsml_call_without_arguments_as_the_encoders_write_it() -> None:
    t = Transcript()
    t.add("user", "go")
    t.add("assistant", [ToolCallBlock(id="c", name="ping")])
    prompt = FAMILY_TEMPLATES["deepseek-v4"].render(t, [], add_generation_prompt=False)
    assert prompt.endswith(
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="ping">\n\n</｜DSML｜invoke>\n'
        "</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
    )


def _shape(blocks: list[ContentBlock]) -> list[tuple[Any, ...]]:
    shape: list[tuple[Any, ...]] = []
    for b in blocks:
        if isinstance(b, ToolCallBlock):
            shape.append(("call", b.name, b.arguments, b.error))
        elif isinstance(b, ReasoningBlock | TextBlock):
            shape.append((b.type, b.text.strip()))
    return shape


# The prompt opens no reasoning block after tool output in these templates, so a parser that
# starts inside one does not apply to the turn after the results (see the template modules).
_NO_OPENER_AFTER_TOOLS = {"deepseek-r1", "deepseek-v3.1"}


def _turn(family: str, blocks: list[ContentBlock]) -> list[ContentBlock]:
    """The turn as the family's model writes it: without reasoning where it has none."""
    if FAMILY_FORMATS[family][0] is None:
        return [b for b in blocks if not isinstance(b, ReasoningBlock)]
    return list(blocks)


def _play(family: str) -> list[tuple[Transcript, int, str, str]]:
    """Run the conversation as generated turns: each assistant turn is the canonical text
    the template writes, parsed by the family's parser into blocks with raw. Returns, per
    turn, the transcript after the follow-up messages, the turn's index + 1, the prompt
    before the turn and the model's output."""
    template = FAMILY_TEMPLATES[family]
    assert isinstance(template, IncrementalTemplate)
    reasoning, tool_format = FAMILY_FORMATS[family]
    end = template.assistant_end
    t = Transcript()
    t.add("system", "Be terse.")
    t.add("user", "Weather in Paris and Oslo?")
    played = []
    for turn, follow in (
        (_turn(family, FIRST_TURN), "results"),
        (_turn(family, SECOND_TURN), "user"),
    ):
        prompt = template.render(t, TOOLS)
        canonical = t.model_copy(deep=True)
        canonical.add("assistant", [b.model_copy() for b in turn])
        full = template.render(canonical, TOOLS, add_generation_prompt=False)
        assert full.startswith(prompt)
        output = full[len(prompt) :]
        assert output.endswith(end)
        output = output[: len(output) - len(end)]
        schemas = {"lookup": LOOKUP["function"]["parameters"]}
        parser = create_parser(reasoning, tool_format, tool_schemas=schemas)
        parser.feed(output)
        parser.finish()
        message = Message(role="assistant", content=parser.blocks)
        assert message.raw == output
        t.append(message)
        n = len(t.messages)
        if follow == "results":
            ids = [b.id for b in message.content if isinstance(b, ToolCallBlock)]
            for call_id, result in zip(ids, RESULTS, strict=True):
                t.add("tool", [result.model_copy(update={"call_id": call_id})])
        else:
            t.add("user", "Thanks.")
        played.append((t.model_copy(deep=True), n, prompt, output))
    return played


@pytest.mark.parametrize("family", SPECIFIC)
def test_canonical_turns_parse_back_to_the_same_blocks(family: str) -> None:
    for (t, n, _, _), turn in zip(_play(family), (FIRST_TURN, SECOND_TURN), strict=True):
        if turn is SECOND_TURN and family in _NO_OPENER_AFTER_TOOLS:
            continue
        assert _shape(t.messages[n - 1].content) == _shape(_turn(family, turn))


@pytest.mark.parametrize("family", FAMILIES)
def test_incremental_prompt_equals_full_render(family: str) -> None:
    template = FAMILY_TEMPLATES[family]
    assert isinstance(template, IncrementalTemplate)
    for t, n, prompt, output in _play(family):
        if _rewrites_history(template, t, n):
            continue  # the prompt builder renders this one whole (tested below)
        assert template.render(t, TOOLS) == (
            prompt + output + template.assistant_end + template.render_continuation(t, n)
        )


def _rewrites_history(template: object, t: Transcript, n: int) -> str | None:
    """Why a template with tools cannot extend the last prompt at message ``n`` (Mistral v11:
    a new user message moves its tools block), or ``None``."""
    rewrites = getattr(template, "rewrites_history", None)
    return rewrites(t, n) if callable(rewrites) else None


def test_only_mistral_v11_rewrites_history_and_says_so() -> None:
    for family in FAMILIES:
        reasons = {
            _rewrites_history(FAMILY_TEMPLATES[family], t, n) for t, n, _, _ in _play(family)
        }
        if family == "mistral-v11":
            assert reasons == {
                None,
                "the chat template moves [AVAILABLE_TOOLS] before the last user message (Mistral v11)",
            }
        else:
            assert reasons == {None}, family


@pytest.mark.parametrize("family", FAMILIES)
def test_each_prompt_extends_the_last(family: str) -> None:
    """Under exact replay the tools section and everything else before the new turn stay."""
    template = FAMILY_TEMPLATES[family]
    prompts = [prompt for _, _, prompt, _ in _play(family)]
    last, n, _, _ = _play(family)[-1]
    if _rewrites_history(template, last, n):
        return  # the new user message moves the tools block (Mistral v11)
    prompts.append(template.render(last, TOOLS))
    for before, after in itertools.pairwise(prompts):
        assert after.startswith(before)


@pytest.mark.parametrize("family", SPECIFIC)
def test_interleaved_turn_stays_interleaved(family: str) -> None:
    prompt = FAMILY_TEMPLATES[family].render(conversation(), TOOLS)
    if family == "mistral-v11":  # no reasoning form: the calls stay in order, nothing between
        assert prompt.index('"Paris"') < prompt.index('"Oslo"')
        assert "Check Paris." not in prompt
        return
    xml = family in (
        "glm-4.5",
        "glm-4.7",
        "minimax-m2",
        "deepseek-v3.2",
        "deepseek-v4",
        "deepseek-v4.1",
    )
    paris, oslo = (">Paris<", ">Oslo<") if xml else ('"Paris"', '"Oslo"')
    positions = [prompt.index(s) for s in ("Check Paris.", paris, "Now Oslo.", oslo)]
    assert positions == sorted(positions)
