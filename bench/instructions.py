"""``python -m bench --instructions``: the core stream by instruction count (valgrind).

Wall-clock ratios on a shared machine move with its neighbours. Instructions do
not: cachegrind counts what the CPU executed, the same on every run. Each
figure is the difference of two processes that build the same workload and
state (``PYTHONHASHSEED=0``, same seeds), one of which then runs the part
measured, so the setup cancels out. Report only: the targets stay the wall-clock ones
of ``make bench``.

A second table streams each kind of event of the mix alone (``workload.KINDS``),
to show where the mix's cost comes from. ``--growth`` instead counts the two
width workloads (a message per event, a member per event) at 10,000 and 100,000
events, instructions and first-level cache misses, to tell cost that grows with
the stream from wall-clock noise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from . import stream, workload

__all__ = ["growth_report", "instruction_report", "main_child"]

_PARTS = ("built", "prepared", "floor", "decode", "bare", "observed")
"""``built``: the lines and the snapshot only (the baseline of ``floor`` and ``decode``);
``prepared``: and a chat holding the 1 MB state, its run acknowledged (the baseline of
``bare`` and ``observed``, which then apply the lines without and with the selectors)."""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
_D1_MISSES = re.compile(r"D1\s+misses:\s+([\d,]+)")


MIX = "mix"
WIDTH = {
    "messages": (workload.many_messages, stream.many_messages_cost),
    "members": (workload.wide_object, stream.wide_object_cost),
}
"""The width workloads of ``--growth``, each event adding a message (named by id) or a
member to one state object: how ``built`` makes its lines, and how ``run`` makes and
streams them through the fake driver."""


def main_child(part: str, events: int, kind: str = MIX) -> None:
    """Build the workload, then run ``part`` of it (the child process's body)."""
    if kind in WIDTH:
        lines, run = WIDTH[kind]
        (run if part == "run" else lines)(events)
        return
    lines = workload.content_mix(events) if kind == MIX else workload.kind_stream(kind, events)
    snapshot = workload.state_snapshot_line(workload.state_document())
    if part == "floor":
        import json

        for line in lines:
            json.loads(line)
    elif part == "decode":
        from interlude.core.wire.codec import read_frame

        for line in lines:
            read_frame(line)
    elif part != "built":
        setup = stream._prepared(snapshot, lines, hold=True, observed=part != "bare")
        if part != "prepared":
            stream._direct(setup)
            if setup.chat.error is not None or setup.chat.is_loading:
                raise RuntimeError(f"the stream did not finish cleanly: {setup.chat.error!r}")


def _cachegrind(part: str, events: int, kind: str, valgrind: str, *, cache: bool) -> str:
    """What cachegrind printed of the child's run (``cache``: simulate the caches too)."""
    command = [
        valgrind,
        "--tool=cachegrind",
        f"--cache-sim={'yes' if cache else 'no'}",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        part,
        str(events),
        kind,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(command, capture_output=True, text=True, env=env, check=True).stderr


def _read(pattern: re.Pattern[str], printed: str) -> int:
    found = pattern.search(printed)
    if found is None:
        raise RuntimeError(f"valgrind printed no {pattern.pattern!r}:\n{printed[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _count(part: str, events: int, kind: str, valgrind: str) -> int:
    """Instructions the child executed."""
    return _read(_REFS, _cachegrind(part, events, kind, valgrind, cache=False))


def instruction_report(events: int = 10_000) -> str:
    """The tables, as text; a sentence instead when valgrind is not installed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return "valgrind is not installed: the instruction counts need it (apt install valgrind)"
    kind_events = max(events // 5, 400)
    jobs = [(part, events, MIX) for part in _PARTS] + [
        (part, kind_events, kind) for kind in workload.KINDS for part in _PARTS if part != "decode"
    ]
    # Counts do not depend on what else runs: use every core.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done = dict(zip(jobs, pool.map(lambda job: _count(*job, valgrind), jobs), strict=True))
    counts = {part: done[part, events, MIX] for part in _PARTS}

    def per_event(part: str, baseline: str) -> float:
        return (counts[part] - counts[baseline]) / events

    floor = per_event("floor", "built")
    rows = [
        ("json.loads floor", floor),
        ("read_frame (decoding)", per_event("decode", "built")),
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
    out += ["", *_by_kind(kind_events, done)]
    return "\n".join(out)


def _by_kind(events: int, done: dict[tuple[str, int, str], int]) -> list[str]:
    """Each kind of event of the mix streamed alone: instructions per event, and per
    event in units of ``json.loads`` of its own lines."""
    out = [
        f"Each kind alone ({events:,} events, instructions per event; x = vs json.loads "
        "of the same lines)",
        f"{'kind':<18} {'json.loads':>11} {'apply()':>16} {'+ selectors':>16}",
    ]
    for kind in workload.KINDS:
        c = {part: done[part, events, kind] for part in _PARTS if part != "decode"}
        floor = (c["floor"] - c["built"]) / events
        bare = (c["bare"] - c["prepared"]) / events
        observed = (c["observed"] - c["prepared"]) / events
        out.append(
            f"{kind:<18} {floor:>11,.0f} {bare:>9,.0f} {bare / floor:>5.1f}x "
            f"{observed:>9,.0f} {observed / floor:>5.1f}x"
        )
    return out


def growth_report(small: int = 10_000, large: int = 100_000) -> str:
    """Per event at ``small`` and ``large`` events of each width workload: instructions
    and first-level data cache misses (cachegrind's simulation), ``run`` minus
    ``built`` (the driver's setup, a few million instructions, stays in)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return "valgrind is not installed: the instruction counts need it (apt install valgrind)"
    jobs = [(part, n, kind) for kind in WIDTH for n in (small, large) for part in ("built", "run")]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        printed = pool.map(lambda job: _cachegrind(*job, valgrind, cache=True), jobs)
        done = dict(zip(jobs, printed, strict=True))

    def per_event(kind: str, n: int, pattern: re.Pattern[str]) -> float:
        return (_read(pattern, done["run", n, kind]) - _read(pattern, done["built", n, kind])) / n

    out = [
        f"Width workloads by instruction count, {small:,} and {large:,} events "
        "(valgrind cachegrind, PYTHONHASHSEED=0), report only",
        f"{'workload':<10} {'instructions/event':>26} {'growth':>7} "
        f"{'D1 misses/event':>18} {'growth':>7}",
    ]
    for kind in WIDTH:
        i_small, i_large = per_event(kind, small, _REFS), per_event(kind, large, _REFS)
        m_small, m_large = per_event(kind, small, _D1_MISSES), per_event(kind, large, _D1_MISSES)
        out.append(
            f"{kind:<10} {i_small:>12,.0f} {i_large:>13,.0f} {i_large / i_small:>7.2f} "
            f"{m_small:>8,.0f} {m_large:>9,.0f} {m_large / m_small:>7.2f}"
        )
    return "\n".join(out)


if __name__ == "__main__":
    part, events = sys.argv[1], int(sys.argv[2])
    kind = sys.argv[3] if len(sys.argv) > 3 else MIX
    known = ("built", "run") if kind in WIDTH else _PARTS
    if part not in known:
        raise SystemExit(f"unknown part {part!r} of {kind}: one of {', '.join(known)}")
    main_child(part, events, kind)
