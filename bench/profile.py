"""``python -m bench --profile``: where the core stream's time goes, by function.

Runs the stream benchmark's mix once (direct apply, selectors after every
event) under ``cProfile`` and prints the functions with the most time of
their own. For whoever makes the hot path faster; nothing here is a target.
"""

from __future__ import annotations

import cProfile
import io
import pstats

from . import stream, workload

__all__ = ["profile_stream"]


def profile_stream(events: int = 10_000, top: int = 25) -> str:
    """The ``top`` functions by own time (and then by cumulative time), as text."""
    snapshot = workload.state_snapshot_line(workload.state_document())
    setup = stream._prepared(snapshot, workload.content_mix(events), hold=True)
    profiler = cProfile.Profile()
    profiler.enable()
    stream._direct(setup)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    out.write(f"cProfile of {events:,} mixed events, direct apply + selectors, by own time\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write("by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
