"""The routes of ``agentkit serve --agent``: the hosted agent over Responses and Chat
Completions (:mod:`._hosted`), and a clear refusal on the Messages API, which serves bare
model turns and does not host agents."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkit.agent import Agent
from agentkit.errors import ConfigurationError
from agentkit.server._context import ServerContext
from agentkit.server._hosted import HostedAgent, load_agent
from agentkit.server._hosted_chat import hosted_chat_routes
from agentkit.server._hosted_responses import hosted_responses_routes

__all__ = ["hosted_agent", "hosted_routes"]


def hosted_agent(target: str, given: Mapping[str, object]) -> Agent[Any]:
    """The agent ``target`` names (see :func:`~agentkit.server._hosted.load_agent`); a
    :class:`ConfigurationError` when any of a bare model's settings in ``given`` (by option
    name) is set: the agent's own engine and profile serve."""
    conflicts = [name for name, value in given.items() if value is not None]
    if conflicts:
        raise ConfigurationError(
            f"--agent serves the agent's own engine and profile; {', '.join(conflicts)} do "
            "not apply"
        )
    return load_agent(target)


def hosted_routes(agent: Agent[Any]) -> Callable[[ServerContext], list[Route]]:
    """A route factory for ``create_app(adapters=[...])`` serving ``agent``; its routes come
    before the app's own, so they answer ``/v1/responses``, ``/v1/chat/completions`` and
    ``/v1/messages``."""

    def factory(context: ServerContext) -> list[Route]:
        hosted = HostedAgent(agent, context)

        async def messages(request: Request) -> Response:
            error = {
                "type": "not_found_error",
                "message": "this server hosts an agent: use POST /v1/responses or "
                "POST /v1/chat/completions (the Messages API serves bare models only)",
            }
            return JSONResponse({"type": "error", "error": error}, status_code=404)

        return [
            *hosted_responses_routes(hosted, context),
            *hosted_chat_routes(hosted, context),
            Route("/v1/messages", messages, methods=["POST"]),
        ]

    return factory
