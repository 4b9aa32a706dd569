"""An engine whose output a function computes from the request.

A script is a fixed list: it cannot react to what the tools returned, and one list shared by
concurrent runs hands each run whichever output comes next. A :class:`FunctionEngine` asks a
function instead, per request, with everything the request's caller knew (the conversation,
the tools, the tool choice, the turn, the run; see :class:`~agentkit.engine.ScriptedCall`), so
a test decides from the transcript and each run gets the answer meant for it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from agentkit.engine._calls import ScriptedCall
from agentkit.engine._scripted import BaseScriptedEngine, ScriptedOutput, scripted_output

__all__ = ["FunctionEngine", "FunctionOutput"]

FunctionOutput = str | Sequence[str | BaseException] | ScriptedOutput
"""What the function returns: raw model text (split into token-sized deltas), a list of
explicit deltas, or a :class:`~agentkit.engine.ScriptedOutput`."""


class FunctionEngine(BaseScriptedEngine):
    """Streams, for each request, what ``fn(call)`` returns.

    Args:
        fn: called once per request with its :class:`~agentkit.engine.ScriptedCall`; plain
            or ``async``. An exception it raises propagates as itself, so an ``assert``
            inside it fails the test directly; to simulate an engine failure, return a
            :class:`~agentkit.engine.ScriptedOutput` with an exception among its chunks.
        token_delay: seconds to wait before each delta.
        check_constraints: check each output against its request's constraints, as
            :class:`~agentkit.engine.ScriptedEngine` does (``False``: record them only).

    Output streams exactly as from a ``ScriptedEngine`` (token-sized pieces, simulated usage
    and prefix cache), and every request is kept in :attr:`requests` and :attr:`calls`.
    """

    def __init__(
        self,
        fn: Callable[[ScriptedCall], FunctionOutput | Awaitable[FunctionOutput]],
        *,
        token_delay: float = 0.0,
        check_constraints: bool = True,
    ) -> None:
        super().__init__(token_delay=token_delay, check_constraints=check_constraints)
        self.fn = fn

    async def _output_for(self, call: ScriptedCall) -> ScriptedOutput:
        result = self.fn(call)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, str | ScriptedOutput | Sequence):
            raise TypeError(
                f"FunctionEngine's function returned {type(result).__name__} for request "
                f"{call.index + 1}; expected the model's text, a list of deltas or a "
                "ScriptedOutput"
            )
        return scripted_output(result)
