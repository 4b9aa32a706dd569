"""Engines: where model output comes from.

``VLLMEngine`` imports vLLM only when it starts, so this package imports without it;
``RemoteEngine`` drives an existing serving deployment over HTTP. ``ScriptedEngine`` and
``FunctionEngine`` are for tests: they replay or compute the model's output, record every
request (``ScriptedCall``) and check outputs against the request's constraints.
"""

from agentkit.engine._base import Engine as Engine
from agentkit.engine._base import FinishReason as FinishReason
from agentkit.engine._base import GenerationChunk as GenerationChunk
from agentkit.engine._base import GenerationRequest as GenerationRequest
from agentkit.engine._base import RequestContext as RequestContext
from agentkit.engine._base import Usage as Usage
from agentkit.engine._calls import ScriptedCall as ScriptedCall
from agentkit.engine._char_tokenizer import CharTokenizer as CharTokenizer
from agentkit.engine._constraints import ConstraintViolationError as ConstraintViolationError
from agentkit.engine._constraints import OutputConstraints as OutputConstraints
from agentkit.engine._function import FunctionEngine as FunctionEngine
from agentkit.engine._function import FunctionOutput as FunctionOutput
from agentkit.engine._remote import RemoteEngine as RemoteEngine
from agentkit.engine._scripted import ScriptedEngine as ScriptedEngine
from agentkit.engine._scripted import ScriptedOutput as ScriptedOutput
from agentkit.engine._scripted import ScriptItem as ScriptItem
from agentkit.engine._scripted import TokenizedScriptedEngine as TokenizedScriptedEngine
from agentkit.engine._scripted import split_pseudo_tokens as split_pseudo_tokens
from agentkit.engine._vllm import VLLMEngine as VLLMEngine

__all__ = [
    "CharTokenizer",
    "ConstraintViolationError",
    "Engine",
    "FinishReason",
    "FunctionEngine",
    "FunctionOutput",
    "GenerationChunk",
    "GenerationRequest",
    "OutputConstraints",
    "RemoteEngine",
    "RequestContext",
    "ScriptItem",
    "ScriptedCall",
    "ScriptedEngine",
    "ScriptedOutput",
    "TokenizedScriptedEngine",
    "Usage",
    "VLLMEngine",
    "split_pseudo_tokens",
]
