"""``python -m bench --instructions``: the core stream by instruction count (valgrind).

Wall-clock ratios on a shared machine move with its neighbours. Instructions do
not: cachegrind counts what the CPU executed, the same on every run. Each
figure is the difference of two processes that build the same workload and
state (``PYTHONHASHSEED=0``, same seeds), one of which then runs the part
measured, so the setup cancels out. Report only: it counts no cache misses, and the
targets stay the wall-clock ones of ``make bench``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from . import stream, workload

__all__ = ["instruction_report", "main_child"]

_PARTS = ("built", "prepared", "floor", "decode", "bare", "observed")
"""``built``: the lines and the snapshot only (the baseline of ``floor`` and ``decode``);
``prepared``: and a chat holding the 1 MB state, its run acknowledged (the baseline of
``bare`` and ``observed``, which then apply the lines without and with the selectors)."""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def main_child(part: str, events: int) -> None:
    """Build the workload, then run ``part`` of it (the child process's body)."""
    lines = workload.content_mix(events)
    snapshot = workload.state_snapshot_line(workload.state_document())
    if part == "floor":
        import json

        for line in lines:
            json.loads(line)
    elif part == "decode":
        from interlude.core.wire.codec import decode_frame

        for line in lines:
            decode_frame(line)
    elif part != "built":
        setup = stream._prepared(snapshot, lines, hold=True, observed=part != "bare")
        if part != "prepared":
            stream._direct(setup)
            if setup.chat.error is not None or setup.chat.is_loading:
                raise RuntimeError(f"the stream did not finish cleanly: {setup.chat.error!r}")


def _count(part: str, events: int, valgrind: str) -> int:
    command = [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        part,
        str(events),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = _REFS.search(done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instruction_report(events: int = 10_000) -> str:
    """The table, as text; a sentence instead when valgrind is not installed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return "valgrind is not installed: the instruction counts need it (apt install valgrind)"
    counts = {part: _count(part, events, valgrind) for part in _PARTS}

    def per_event(part: str, baseline: str) -> float:
        return (counts[part] - counts[baseline]) / events

    floor = per_event("floor", "built")
    rows = [
        ("json.loads floor", floor),
        ("decode_frame", per_event("decode", "built")),
        ("resource.apply(), no observer", per_event("bare", "prepared")),
        ("resource.apply() + selectors", per_event("observed", "prepared")),
    ]
    out = [
        f"Core stream by instruction count: {events:,} mixed events (valgrind cachegrind, "
        "PYTHONHASHSEED=0, setup subtracted), report only",
        f"{'part':<32} {'instructions/event':>20} {'vs floor':>9}",
    ]
    for name, per in rows:
        out.append(f"{name:<32} {per:>20,.0f} {per / floor:>8.2f}x")
    return "\n".join(out)


if __name__ == "__main__":
    part, events = sys.argv[1], int(sys.argv[2])
    if part not in _PARTS:
        raise SystemExit(f"unknown part {part!r}: one of {', '.join(_PARTS)}")
    main_child(part, events)
