"""The server's counters: what clients that leave, stall or fail cost, in one object.

Every adapter counts into the one :class:`ServerStats` on the server context, so a reader
(``GET /v1/stats`` as JSON, ``GET /metrics`` as Prometheus counters named in
:mod:`._metrics`, tests) has a single place to look. Counters only go up; ``in_flight`` is the
one gauge, read from the context when a snapshot is taken.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["AbortReason", "ServerStats"]

AbortReason = Literal["disconnect", "stalled", "cancelled"]
"""Why a response ended before it was complete: the client left, the client stopped reading
past the stall deadline, or the server cancelled the request (shutting down)."""


@dataclass(slots=True)
class ServerStats:
    """Counters since the server started."""

    disconnects: int = 0
    """Clients that left before their response was complete (streaming or not)."""
    stalled: int = 0
    """Streaming clients dropped for reading nothing for longer than the stall deadline."""
    cancelled: int = 0
    """Requests the server cancelled before their response was complete (shutdown)."""
    aborted: int = 0
    """Generations stopped before their end for any of the reasons above."""
    aborted_output_tokens: int = 0
    """Tokens those aborted generations had produced: work thrown away."""
    stream_failures: int = 0
    """Streams that failed after their headers were sent (ended with an error event)."""

    def count_early_end(self, reason: AbortReason) -> None:
        """A response ended early for ``reason``."""
        if reason == "disconnect":
            self.disconnects += 1
        elif reason == "stalled":
            self.stalled += 1
        else:
            self.cancelled += 1

    def count_abort(self, output_tokens: int) -> None:
        """A generation was aborted after producing ``output_tokens``."""
        self.aborted += 1
        self.aborted_output_tokens += output_tokens

    def snapshot(self, *, in_flight: int) -> dict[str, int]:
        """Every counter, and the requests in flight now, as JSON-ready numbers."""
        return {"in_flight": in_flight, **asdict(self)}
