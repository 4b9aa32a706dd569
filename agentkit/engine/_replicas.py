"""Which replica serves a request: session affinity, failover and down-marking.

An agent's turn N+1 begins with turn N's prompt and output, so it is cheap only on the replica
whose prefix cache still holds them. Replicas are therefore ranked per session by rendezvous
(highest-random-weight) hashing: every session has a stable first choice, and when a replica
leaves or returns only the sessions whose first choice it is move. A replica that cannot be
reached is marked down for a cooldown and ranked last meanwhile, so its sessions fail over to
their second choice at once instead of paying a connect timeout per request.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentkit.errors import ConfigurationError

__all__ = ["Replica", "ReplicaSet", "normalise_url", "session_key"]


def normalise_url(url: str) -> str:
    """``http://host:8000``, ``http://host:8000/`` and ``http://host:8000/v1`` all name the
    same server root (the routes are ``/v1/completions``, ``/health``, ``/tokenize``)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"invalid server URL {url!r}: expected http(s)://host:port, e.g. "
            "'http://localhost:8000' (a trailing '/v1' is accepted)"
        )
    root = url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


def session_key(request_id: str | None) -> str | None:
    """The session part of an agent's request id: ``run_<id>-<turn>`` -> ``run_<id>``.

    Only a numeric turn is cut off: another id (``chatcmpl-<random>``) is its own session, not
    one shared by every request whose id has the same prefix.
    """
    if not request_id:
        return None
    head, sep, tail = request_id.rpartition("-")
    return head if sep and head and tail.isdigit() else request_id


def _weight(url: str, key: str) -> int:
    digest = hashlib.blake2b(f"{url}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(slots=True)
class Replica:
    """One server root URL and when it may be tried again after failing to connect."""

    url: str
    down_until: float = 0.0

    def is_up(self, now: float) -> bool:
        return now >= self.down_until


class ReplicaSet:
    """The replicas of one deployment, ranked per session.

    Args:
        urls: server roots; duplicates are dropped.
        cooldown: seconds a replica that refused a connection is ranked last.
        clock: monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        cooldown: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        roots = list(dict.fromkeys(normalise_url(u) for u in urls))
        if not roots:
            raise ConfigurationError("RemoteEngine needs at least one server URL")
        self.replicas = [Replica(u) for u in roots]
        self.cooldown = cooldown
        self._clock = clock
        self._turn = itertools.count()

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.replicas]

    def ranked(self, key: str | None) -> list[Replica]:
        """Replicas in the order to try them: those up first, each group by the session's
        rendezvous ranking (round robin when there is no session)."""
        if key is None:
            start = next(self._turn) % len(self.replicas)
            order = self.replicas[start:] + self.replicas[:start]
        else:
            order = sorted(self.replicas, key=lambda r: _weight(r.url, key), reverse=True)
        now = self._clock()
        return [r for r in order if r.is_up(now)] + [r for r in order if not r.is_up(now)]

    def mark_down(self, replica: Replica) -> None:
        replica.down_until = self._clock() + self.cooldown

    def mark_up(self, replica: Replica) -> None:
        replica.down_until = 0.0
