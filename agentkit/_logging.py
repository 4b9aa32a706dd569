"""Structured logging that stays silent until the application asks for it.

agentkit logs through structlog onto the standard library logger ``agentkit`` (which has a
``NullHandler``), so an application that configures ``logging`` (or structlog's stdlib
integration) sees one structured record per turn and per tool call, and one that does not
sees nothing. Each record's message is the event name; its fields are in ``extra``-style
key/values rendered by the processors below.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]

logging.getLogger("agentkit").addHandler(logging.NullHandler())

_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso"),
    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
]


def get_logger(name: str) -> Any:
    """A structlog logger writing to the stdlib logger ``name`` (under ``agentkit``)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )
