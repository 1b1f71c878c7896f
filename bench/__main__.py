"""``python -m bench``: run every benchmark and print the tables (exit 1 on a FAIL)."""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Sequence

from . import claim, http, memory, stream
from .report import Section, render

PARTS = ("stream", "claim", "http", "memory")


def _progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def _load(avg: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in avg)


def run(parts: Sequence[str], *, quick: bool, reps: int) -> list[Section]:
    sections: list[Section] = []
    if "stream" in parts:
        sizes = (1_000, 2_000) if quick else (10_000, 100_000)
        sections.extend(
            stream.section(
                sizes,
                reps,
                context_sizes=() if quick else (1_000,),
                long_sizes=sizes,
                progress=_progress,
            )
        )
    # Each section starts from a clean heap: what one leaves behind must not
    # slow the garbage collector during the next one's timing.
    gc.collect()
    if "claim" in parts:
        _progress("claim")
        sections.append(claim.section(200 if quick else 10_000, 50 if quick else 1_000))
    gc.collect()
    if "http" in parts:
        sections.append(http.section(2_000 if quick else 100_000, reps, progress=_progress))
    gc.collect()
    if "memory" in parts:
        _progress("memory")
        sections.append(memory.section(20 if quick else 1_000))
    return sections


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--reps", type=int, default=3, help="best of N repetitions (3)")
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}"
    )
    parser.add_argument(
        "--profile", action="store_true", help="print a cProfile of the core stream and exit"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the core stream's instructions with valgrind (noise-free) and exit",
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="with --instructions: count the width workloads at 10k and 100k events instead",
    )
    args = parser.parse_args(argv)
    if args.growth and not args.instructions:
        parser.error("--growth goes with --instructions")
    if args.profile:
        from .profile import profile_stream

        print(profile_stream())
        return 0
    if args.instructions:
        from .instructions import growth_report, instruction_report

        if args.growth:
            print(growth_report(*((1_000, 4_000) if args.quick else (10_000, 100_000))))
        else:
            print(instruction_report(2_000 if args.quick else 10_000))
        return 0
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    start = time.perf_counter()
    load = os.getloadavg()
    sections = run(parts, quick=args.quick, reps=max(1, args.reps))
    print(
        f"interlude benchmarks: Python {platform.python_version()} on {platform.machine()} "
        f"{platform.system()}, {os.cpu_count()} CPUs, load average {_load(load)} at the "
        f"start and {_load(os.getloadavg())} at the end (other processes add noise).\n"
        "Every target is a ratio to a baseline measured in this run, except the claim "
        "latency, which the issue states in absolute terms.\n"
    )
    print(render(sections))
    failed = [(s.title, r) for s in sections for r in s.failed]
    verdicts = sum(1 for s in sections for r in s.rows if r.ok is not None)
    print(
        f"{verdicts - len(failed)} of {verdicts} targets met in {time.perf_counter() - start:.0f} s"
    )
    for title, r in failed:
        print(f"FAIL: {title.split(':')[0]}: {r.metric}: {r.measured} (target {r.target})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
