"""Timing helpers: best of N with ``time.perf_counter``, the garbage collector left on."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["best_of", "loads_floor", "timed"]

T = TypeVar("T")


def timed(setup: Callable[[], T], body: Callable[[T], object]) -> float:
    """Seconds ``body(setup())`` takes; the setup is not timed.

    A full collection runs before the clock starts, so each repetition begins
    with the same heap; the collector stays enabled while the body runs.
    """
    arg = setup()
    gc.collect()
    start = time.perf_counter()
    body(arg)
    return time.perf_counter() - start


def best_of(reps: int, setup: Callable[[], T], body: Callable[[T], object]) -> float:
    """The fastest of ``reps`` runs of :func:`timed` (the least disturbed by noise)."""
    return min(timed(setup, body) for _ in range(reps))


def loads_floor(lines: Sequence[str], reps: int) -> float:
    """Seconds ``json.loads`` takes on every line, best of ``reps``: the floor."""

    def body(_: None) -> None:
        loads = json.loads
        for line in lines:
            loads(line)

    return best_of(reps, lambda: None, body)
