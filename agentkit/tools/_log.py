"""The tools' structured logger, whose records keep a crash's exception and traceback.

It renders records as :mod:`agentkit._logging` does (``key=value`` text, the event name
first), and in addition hands an ``exc_info=`` argument to the standard library record
instead of printing it as a value, so handlers see ``record.exc_info`` and format the
traceback the usual way. Like the other records, it carries the run's ``run_id`` (merged from
structlog's context variables, see :func:`agentkit._logging.bind_run`).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["tool_logger"]

_render = structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)


def _render_keeping_exc_info(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> tuple[tuple[str], dict[str, Any]]:
    exc_info = event_dict.pop("exc_info", None)
    message = _render(logger, method_name, event_dict)
    return (message,), ({"exc_info": exc_info} if exc_info is not None else {})


def tool_logger() -> Any:
    """A structlog logger writing to the stdlib logger ``agentkit.tools``."""
    return structlog.wrap_logger(
        logging.getLogger("agentkit.tools"),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            _render_keeping_exc_info,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
