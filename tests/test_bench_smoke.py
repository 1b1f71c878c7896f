"""The benchmarks (``python -m bench``) run at tiny sizes and produce sane numbers.

No timing is asserted: these only keep the benchmark code working as the library changes.
"""

from __future__ import annotations

import math

import pytest

from bench import claim, http, instructions, memory, stream, workload
from bench.__main__ import main


def sane(x: float) -> bool:
    return math.isfinite(x) and x > 0


def test_the_workload_is_well_formed_and_exactly_sized() -> None:
    for n in (1, 37, 2_000, 5_003):
        assert len(workload.content_mix(n)) == n
    assert len(workload.long_text(10)) == 12
    for kind in workload.KINDS:
        assert 40 <= len(workload.kind_stream(kind, 40)) <= 42  # deltas come with their start/end
    with pytest.raises(ValueError, match="unknown kind"):
        workload.kind_stream("pings", 10)


def test_stream_benchmark_runs_in_both_modes() -> None:
    snapshot = workload.state_snapshot_line(workload.state_document())
    lines = workload.content_mix(2_000)
    runs = stream.measure(snapshot, lines, reps=1)
    assert [r.mode for r in runs] == list(stream.MODES)
    for r in runs:
        assert r.events == 2_000
        assert sane(r.events_per_second) and sane(r.floor_per_second) and sane(r.vs_floor)
    assert sane(stream.long_message_reads(500))
    assert sane(stream.wide_object_cost(1500))  # past SHARE_MEMBERS_FROM


def test_claim_benchmark_claims_and_releases() -> None:
    r = claim.measure(messages=200, claims=20)
    assert r.history == 202 and len(r.samples) == 20
    assert all(sane(x) for x in r.samples) and sane(r.line_loads)


def test_http_benchmark_streams_over_loopback() -> None:
    r = http.measure(2_000, reps=1)
    # START, the deltas, END and RUN_FINISHED; the agent also sends a small STATE_SNAPSHOT.
    assert r.deltas == 2_000 and r.frames >= 2_003
    rates = (r.parser_rate, r.parser_floor_rate, r.fake_rate, r.http_rate, r.http_total_rate)
    for x in (*rates, r.http_share):
        assert sane(x)


def test_memory_benchmark_pauses_many_resources() -> None:
    r = memory.measure(20)
    assert r.resources == 20 and r.messages_each == 2
    assert sane(r.per_resource) and r.peak_bytes >= r.total_bytes


def test_the_command_prints_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--quick", "--reps", "1", "--only", "claim,memory"])
    out = capsys.readouterr().out
    assert code in (0, 1)  # a FAIL is a measurement, not a broken benchmark
    assert "2. resume() claim latency" in out and "4. Memory" in out
    assert "targets met" in out


def test_instruction_counts_run_their_parts_and_say_when_valgrind_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for part in ("built", "prepared", "floor", "decode", "bare", "observed"):
        instructions.main_child(part, 200)  # the child processes' bodies, without valgrind
    for kind in workload.KINDS:  # each streams cleanly to its end (the child checks)
        instructions.main_child("observed", 40, kind)
    for kind in instructions.WIDTH:  # --growth's children (the cost functions check)
        instructions.main_child("built", 40, kind)
        instructions.main_child("run", 40, kind)
    monkeypatch.setattr(instructions.shutil, "which", lambda _: None)
    assert "valgrind is not installed" in instructions.instruction_report(200)
    assert "valgrind is not installed" in instructions.growth_report(40, 80)
