"""What part (a) of the engine benchmark needs beyond a stopwatch: the engine's own clock,
CPU pinning, and confidence intervals.

* **The engine's clock.** With stats on, vLLM's engine core stamps each request when it is
  scheduled and when each token comes out (``time.monotonic`` in the engine-core process, the
  same clock as this process's). :func:`engine_request_stats` keeps each new request's stats
  object as the request is added (once a request, nothing a token), so a run can be split into
  the engine's own time (scheduled to last token) and the time around it (before the engine
  schedules the request: the front end's set-up; after its last token: delivering it).
* **Pinning.** :func:`pinned` puts the engine core on one CPU and this process on the
  others, so the scheduler never runs the front end on the engine's core.
* **Bootstrap.** :func:`bootstrap_interval`: a percentile interval for a statistic of paired
  samples, with a fixed seed (the same data give the same interval).
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["bootstrap_interval", "engine_request_stats", "pinned"]


@contextlib.contextmanager
def engine_request_stats(llm: Any) -> Iterator[list[Any]]:
    """The stats object (``RequestStateStats``) of every request added to ``llm`` (an
    ``AsyncLLM`` with stats on) while the block runs, in order. Wraps the output processor's
    ``add_request``: called once a request, so the tokens' path is untouched."""
    processor = llm.output_processor
    original = processor.add_request
    added: list[Any] = []

    def add_request(request: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(request, *args, **kwargs)
        state = processor.request_states.get(request.request_id)
        if state is not None and state.stats is not None:
            added.append(state.stats)
        return result

    processor.add_request = add_request
    try:
        yield added
    finally:
        del processor.add_request  # the class's method again


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _set_affinity(pid: int, cpus: set[int]) -> None:
    for tid in _threads(pid):
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def pinned(engine_pids: Sequence[int]) -> Iterator[str | None]:
    """The engine core (``engine_pids``, every thread) on the last CPU this process may use,
    this process (every thread) on the others. Afterwards every thread of both, including
    those started in between (which inherit the pinning), gets its process's CPUs back.
    Yields a description, or ``None`` (nothing pinned) with fewer than two CPUs or no engine
    process."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or not engine_pids:
        yield None
        return
    engine_cpu, front_cpus = {cpus[-1]}, set(cpus[:-1])
    original: dict[int, set[int]] = {os.getpid(): set(cpus)}
    for pid in engine_pids:
        with contextlib.suppress(OSError):
            original[pid] = os.sched_getaffinity(pid)
    try:
        for pid in original:
            _set_affinity(pid, front_cpus if pid == os.getpid() else engine_cpu)
        yield f"engine core on CPU {cpus[-1]}, this process on CPU {_span(sorted(front_cpus))}"
    finally:
        for pid, cpu_set in original.items():
            _set_affinity(pid, cpu_set)


def _span(cpus: list[int]) -> str:
    return str(cpus[0]) if len(cpus) == 1 else f"{cpus[0]}-{cpus[-1]}"


def bootstrap_interval(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = statistics.median,
    *,
    level: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap interval for ``statistic`` of ``values`` (resampled with
    replacement, ``resamples`` times)."""
    if not values:
        raise ValueError("no values")
    rng = random.Random(seed)
    n = len(values)
    estimates = sorted(statistic(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - level) / 2
    low = estimates[int(tail * (resamples - 1))]
    high = estimates[int((1 - tail) * (resamples - 1))]
    return low, high
