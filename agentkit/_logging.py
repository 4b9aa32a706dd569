"""Structured logging that stays silent until the application asks for it.

agentkit logs through structlog onto the standard library logger ``agentkit`` (which has a
``NullHandler``), so an application that configures ``logging`` (or structlog's stdlib
integration) sees one structured record per turn and per tool call, and one that does not
sees nothing. Each record's message is the event name; its fields are in ``extra``-style
key/values rendered by the processors below.

Every record logged while a run is going on carries its ``run_id``, those of its tools
included (their tasks and threads copy the run's context): :func:`bind_run` binds it in
structlog's context variables, which the processors merge into each record. An application
whose own structlog configuration merges context variables sees it in its tools' records too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

__all__ = ["bind_run", "get_logger"]

logging.getLogger("agentkit").addHandler(logging.NullHandler())

_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,
    structlog.contextvars.merge_contextvars,
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


@contextmanager
def bind_run(run_id: str) -> Iterator[None]:
    """Within the block, every agentkit record (and every task or thread started in it)
    carries ``run_id``; the previous binding, if any, comes back on exit."""
    with structlog.contextvars.bound_contextvars(run_id=run_id):
        yield
