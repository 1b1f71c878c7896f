"""The core stream benchmark: wire JSON text through the reducer and the selectors.

The fake agent answers with raw strings of wire JSON, so every event takes the
whole path an HTTP stream's frames take after the SSE parser: ``FrameReceived``
→ ``read_frame`` (inside the reducer) → the reducer's hot path → a committed
state → the observers, where an application reads its selectors.

Two ways of feeding the frames are measured:

``fake driver``
    ``FakeDriver.run_until_idle()`` delivers every frame of the scripted reply,
    one step each (the driver's own queue bookkeeping is included).
``direct apply``
    the run is started and acknowledged through the fake driver (held reply),
    then the frames go in through ``resource.apply(FrameReceived(attempt, line))``
    in a tight loop: the library's cost alone.

In both, RUN_STARTED and the 1 MB STATE_SNAPSHOT are delivered before the
clock starts (the snapshot is timed on its own); the timed part is the N
content events plus the closing RUN_FINISHED. The floor is ``json.loads`` of
the same N + 1 lines, timed in the same run.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interlude.adapters.fake import FakeDriver, ScriptedAgent, held, reply
from interlude.adapters.fake.script import Request
from interlude.adapters.resource import Resource
from interlude.core import FrameReceived, step
from interlude.core.wire.codec import read_frame

from . import workload
from .report import Section, fmt_rate, fmt_seconds
from .timing import loads_floor, timed

__all__ = [
    "MODES",
    "StreamRun",
    "check_run",
    "long_message_reads",
    "many_messages_cost",
    "measure",
    "observe",
    "section",
    "snapshot_cost",
    "tool_round_cost",
    "wide_object_cost",
]

MODES = ("fake driver", "direct apply")


@dataclass(frozen=True)
class StreamRun:
    """One measured stream: ``events`` content events in ``seconds`` (best of N)."""

    mode: str
    events: int
    seconds: float
    floor_seconds: float

    @property
    def per_event(self) -> float:
        return self.seconds / self.events

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds

    @property
    def floor_per_second(self) -> float:
        return self.events / self.floor_seconds

    @property
    def vs_floor(self) -> float:
        """The pipeline's cost per event in units of ``json.loads`` of the same line."""
        return self.seconds / self.floor_seconds


class Observer:
    """What an application reads after every change, counted."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, r: Resource) -> None:
        self.calls += 1
        observe(r)


def observe(r: Resource) -> Any:
    """The selectors an app calls after each event; returns what it read."""
    loading = r.is_loading
    resuming = r.is_resuming
    pending = r.pending_interrupts
    error = r.error
    messages = r.messages
    count = len(messages)
    last = messages[-1] if count else None
    state = r.state
    return loading, resuming, pending, error, count, last, state


@dataclass
class _Setup:
    driver: FakeDriver
    chat: Resource
    observer: Observer
    frames: list[str]


def _handler(snapshot: str, lines: Sequence[str], *, hold: bool) -> Callable[[Request], Any]:
    def answer(req: Request) -> Any:
        started = workload.started_line(req.thread_id, req.run_id)
        if hold:
            return held(started, snapshot)
        finished = workload.finished_line(req.thread_id, req.run_id)
        return reply(started, snapshot, *lines, finished)

    return answer


def _prepared(snapshot: str, lines: Sequence[str], *, hold: bool, observed: bool = True) -> _Setup:
    """A chat whose run is acknowledged and holds the 1 MB state; the content is next.

    ``observed``: the selectors are read after every change (by an observer).
    """
    driver = FakeDriver(ScriptedAgent(_handler(snapshot, lines, hold=hold)))
    chat = driver.chat()
    observer = Observer()
    if observed:
        chat.subscribe(observer)
    chat.send("stream the catalogue")
    assert driver.step()  # the request goes out
    if hold:
        driver.release(2)
    assert driver.step()  # RUN_STARTED
    assert driver.step()  # STATE_SNAPSHOT
    run = chat.core_state.run
    assert run is not None and chat.core_state.draft is not None and chat.error is None, chat.error
    assert run.attempt is not None
    frames: list[str] = []
    if hold:
        req = driver.requests[-1]
        frames = [*lines, workload.finished_line(req.thread_id, req.run_id)]
    return _Setup(driver, chat, observer, frames)


def _through_driver(s: _Setup) -> None:
    s.driver.run_until_idle(max_steps=10**8)


def _direct(s: _Setup) -> None:
    run = s.chat.core_state.run
    assert run is not None and run.attempt is not None
    attempt = run.attempt.id
    apply = s.chat.apply
    frame = FrameReceived
    for line in s.frames:
        apply(frame(attempt, line))


def check_run(s: _Setup, events: int) -> None:
    """The run finished cleanly, and the observer saw every event."""
    chat = s.chat
    if chat.error is not None:
        raise AssertionError(f"the benchmark stream failed: {chat.error!r}")
    if chat.is_loading:
        raise AssertionError("the benchmark stream did not finish")
    # Setup steps notify too (send, RUN_STARTED, STATE_SNAPSHOT); StreamEnded may not.
    if s.observer.calls < events + 4:
        raise AssertionError(f"the observer ran {s.observer.calls} times for {events} events")


CHUNK = 500
"""Events per timed chunk: the best of the repetitions is taken chunk by chunk."""


def _chunked_driver(s: _Setup, events: int) -> list[float]:
    """Seconds per chunk of ``FakeDriver.step()`` calls (one frame each); the last chunk
    also runs the driver until idle (the end of the stream)."""
    step, clock = s.driver.step, time.perf_counter
    out = []
    for k in range(0, events, CHUNK):
        n = min(CHUNK, events - k)
        start = clock()
        for _ in range(n):
            step()
        if k + n >= events:
            s.driver.run_until_idle(max_steps=10**8)
        out.append(clock() - start)
    return out


def _chunked_direct(s: _Setup) -> list[float]:
    """Seconds per chunk of ``resource.apply(FrameReceived(...))`` calls."""
    run = s.chat.core_state.run
    assert run is not None and run.attempt is not None
    attempt, apply, frame, clock = run.attempt.id, s.chat.apply, FrameReceived, time.perf_counter
    out = []
    for k in range(0, len(s.frames), CHUNK):
        part = s.frames[k : k + CHUNK]
        start = clock()
        for line in part:
            apply(frame(attempt, line))
        out.append(clock() - start)
    return out


def _chunked_floor(lines: Sequence[str], tries: int) -> list[float]:
    """Seconds per chunk of ``json.loads`` over the same lines, best of ``tries`` each."""
    loads, clock = json.loads, time.perf_counter
    out = []
    for k in range(0, len(lines), CHUNK):
        part, best = lines[k : k + CHUNK], float("inf")
        for _ in range(tries):
            start = clock()
            for line in part:
                loads(line)
            best = min(best, clock() - start)
        out.append(best)
    return out


def measure(snapshot: str, lines: Sequence[str], reps: int) -> list[StreamRun]:
    """Best of ``reps`` in each mode, and the ``json.loads`` floor of the same lines.

    Every repetition replays the same stream from the same state, timed in
    chunks of ``CHUNK`` events; the best of the repetitions is taken chunk by
    chunk, so that a noisy spell on a shared machine spoils one chunk of one
    repetition rather than a whole run. The floor is timed the same way, and
    the repetitions are interleaved (floor, fake driver, direct apply; again...)
    so that drifts in the machine's speed hit all three alike.
    """
    floor_lines = [*lines, workload.finished_line("t", "r")]
    best: dict[str, list[float]] = {}

    def keep(name: str, chunks: list[float]) -> None:
        old = best.get(name, [float("inf")] * len(chunks))
        best[name] = [min(a, b) for a, b in zip(old, chunks, strict=True)]

    for _ in range(reps):
        gc.collect()
        keep("floor", _chunked_floor(floor_lines, 3))
        for mode in MODES:
            hold = mode == "direct apply"
            s = _prepared(snapshot, lines, hold=hold)
            gc.collect()
            keep(mode, _chunked_direct(s) if hold else _chunked_driver(s, len(floor_lines)))
            check_run(s, len(lines))
            del s
    floor = sum(best["floor"])
    return [StreamRun(mode, len(lines), sum(best[mode]), floor) for mode in MODES]


LAYERS = (
    "json.loads",
    "read_frame",
    "reducer step()",
    "resource.apply()",
    "apply() + selectors",
)


def layers(snapshot: str, lines: Sequence[str], reps: int) -> dict[str, float]:
    """Seconds for ``lines`` through ever more of the pipeline (best of ``reps`` each):
    ``json.loads``; ``read_frame``; the reducer alone (``step`` chained, no
    resource); ``resource.apply`` with no observer; and with the selectors observer."""
    loads = json.loads
    best = dict.fromkeys(LAYERS, float("inf"))

    def chained(s: _Setup) -> None:
        state = s.chat.core_state
        assert state.run is not None and state.run.attempt is not None
        attempt = state.run.attempt.id
        for line in s.frames:
            state = step(state, FrameReceived(attempt, line), 0.0).state

    def bare(observed: bool) -> _Setup:
        return _prepared(snapshot, lines, hold=True, observed=observed)

    for _ in range(reps):
        for name, fn in (("json.loads", loads), ("read_frame", read_frame)):
            best[name] = min(best[name], timed(lambda: None, lambda _, fn=fn: _each(fn, lines)))
        best["reducer step()"] = min(best["reducer step()"], timed(lambda: bare(False), chained))
        for name, observed in (("resource.apply()", False), ("apply() + selectors", True)):
            best[name] = min(best[name], timed(lambda o=observed: bare(o), _direct))
    return best


def _each(fn: Callable[[str], object], lines: Sequence[str]) -> None:
    """``fn`` on every line, the results dropped (as the pipeline drops them)."""
    for line in lines:
        fn(line)


def snapshot_cost(snapshot: str, reps: int) -> tuple[float, float]:
    """Seconds to take the STATE_SNAPSHOT through the reducer, and to ``json.loads`` it."""
    pipeline = []
    for _ in range(reps):
        driver = FakeDriver(ScriptedAgent(_handler(snapshot, (), hold=True)))
        chat = driver.chat()
        chat.send("go")
        driver.step()
        driver.release(2)
        driver.step()
        start = time.perf_counter()
        driver.step()
        pipeline.append(time.perf_counter() - start)
        assert chat.error is None
    return min(pipeline), loads_floor([snapshot], reps)


def _one_run(lines: Sequence[str], *, observed: bool) -> tuple[float, _Setup]:
    """Seconds to stream ``lines`` (between RUN_STARTED and RUN_FINISHED) through the fake
    driver, the request and RUN_STARTED already handled; and the setup, to check."""

    def answer(req: Request) -> Any:
        return reply(
            workload.started_line(req.thread_id, req.run_id),
            *lines,
            workload.finished_line(req.thread_id, req.run_id),
        )

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    observer = Observer()
    if observed:
        chat.subscribe(observer)
    chat.send("go on")
    driver.step()
    driver.step()
    s = _Setup(driver, chat, observer, [])
    seconds = timed(lambda: s, _through_driver)
    if chat.error is not None or chat.is_loading:
        raise AssertionError(f"the run did not stream cleanly: {chat.error!r}")
    return seconds, s


def long_message_reads(count: int) -> float:
    """Seconds per event for one assistant message of ``count`` deltas, read after every
    event (``observe``): the read joins the text streamed so far."""
    lines = workload.long_text(count)
    seconds, s = _one_run(lines, observed=True)
    if s.observer.calls < count:
        raise AssertionError(f"the observer ran {s.observer.calls} times for {count} deltas")
    return seconds / len(lines)


def many_messages_cost(count: int) -> float:
    """Seconds per event for ``count`` events that each add a message to one run and name
    one by id (``workload.many_messages``), through the fake driver, no observer."""
    lines = workload.many_messages(count)
    seconds, s = _one_run(lines, observed=False)
    if len(s.chat.messages) < count // 2:
        raise AssertionError(f"the run kept {len(s.chat.messages)} messages of {count} events")
    return seconds / len(lines)


def wide_object_cost(count: int) -> float:
    """Seconds per event for ``count`` patches that each add a member to one object
    (``workload.wide_object``), through the fake driver, no observer."""
    lines = workload.wide_object(count)
    seconds, s = _one_run(lines, observed=False)
    members = s.chat.state["members"]  # type: ignore[index]
    if len(members) != count - 1:
        raise AssertionError(f"the object has {len(members)} members after {count} events")
    return seconds / len(lines)


def tool_round_cost(count: int) -> float:
    """Seconds per local tool result for a run that ends with ``count`` calls of one local
    tool (``workload.local_calls``): from the round's start, through the fake driver (each
    tool one step), to the follow-up run's end; no observer."""
    lines = workload.local_calls(count)

    def answer(req: Request) -> Any:
        body = lines if req.json["messages"][-1]["role"] != "tool" else ()
        return reply(
            workload.started_line(req.thread_id, req.run_id),
            *body,
            workload.finished_line(req.thread_id, req.run_id),
        )

    def setup() -> _Setup:
        driver = FakeDriver(ScriptedAgent(answer))
        chat = driver.chat(local_tools={workload.LOCAL_TOOL: lambda args: "found"})
        chat.send("look everything up")
        while chat.core_state.tools is None:
            if not driver.step():
                raise AssertionError(f"the run did not start its tools: {chat.error!r}")
        return _Setup(driver, chat, Observer(), [])

    s = setup()
    seconds = timed(lambda: s, _through_driver)
    results = sum(1 for m in s.chat.messages if m.role == "tool")
    if s.chat.error is not None or s.chat.is_loading or results != count:
        raise AssertionError(f"{results} tool results of {count}, error {s.chat.error!r}")
    return seconds / count


# -- the table ------------------------------------------------------------------------


def _per_size(
    out: Section,
    sizes: Sequence[int],
    measure: Callable[[int], float],
    label: str,
    progress: Callable[[str], None] | None,
) -> dict[int, float]:
    """Seconds per event of ``measure`` at each size, each a row of ``out``."""
    per = {}
    for n in sizes:
        row = label.format(n)
        if progress:
            progress(f"stream: {row}")
        per[n] = measure(n)
        out.add(row, f"{fmt_rate(1 / per[n])} ({fmt_seconds(per[n])}/event)")
    return per


MAX_VS_FLOOR = 5.0
MAX_GROWTH = 1.5
TS_QUOTED = ((1_000, 24_000), (10_000, 6_000), (100_000, 540))
"""@ag-ui/client 1.0.0 events/s by stream length, as quoted in the issue (not measured)."""


def section(
    sizes: Sequence[int],
    reps: int,
    *,
    context_sizes: Sequence[int] = (),
    long_sizes: Sequence[int] = (),
    progress: Callable[[str], None] | None = None,
) -> tuple[Section, Section]:
    """The stream table, and the context table beside the quoted TypeScript figures.

    ``sizes`` are held to the targets; ``context_sizes`` are measured for the
    context table only; ``long_sizes`` measure one long message read per event.
    """
    doc = workload.state_document()
    snapshot = workload.state_snapshot_line(doc)
    runs: dict[tuple[str, int], StreamRun] = {}
    for n in sorted({*sizes, *context_sizes}):
        if progress:
            progress(f"stream: {n:,} events x {reps} repetitions")
        for r in measure(snapshot, workload.content_mix(n), reps):
            runs[r.mode, n] = r
    out = Section(
        "1. Core stream: wire JSON text -> read_frame -> reducer -> selectors, every event"
    )
    for n in sizes:
        floor = runs[MODES[0], n]
        out.add(f"{n:,} events: json.loads floor", fmt_rate(floor.floor_per_second))
        for mode in MODES:
            r = runs[mode, n]
            out.add(
                f"{n:,} events: {mode}",
                f"{fmt_rate(r.events_per_second)} ({fmt_seconds(r.per_event)}/event)",
            )
            out.add(
                f"{n:,} events: {mode}, cost vs json.loads",
                f"{r.vs_floor:.2f}x (throughput 1/{r.vs_floor:.1f} of floor)",
                f"<= {MAX_VS_FLOOR:g}x",
                r.vs_floor <= MAX_VS_FLOOR,
            )
    small, large = min(sizes), max(sizes)
    if small != large:
        for mode in MODES:
            growth = runs[mode, large].per_event / runs[mode, small].per_event
            out.add(
                f"per-event cost {large:,} / {small:,}: {mode}",
                f"{growth:.2f}",
                f"<= {MAX_GROWTH:g}",
                growth <= MAX_GROWTH,
            )
    if progress:
        progress(f"stream: layers at {small:,} events")
    costs = layers(snapshot, workload.content_mix(small), reps)
    for name in LAYERS[1:]:
        out.add(
            f"  where the time goes ({small:,}): {name}",
            f"{costs[name] / costs['json.loads']:.2f}x json.loads",
        )
    pipeline, floor_s = snapshot_cost(snapshot, reps)
    out.add(
        f"STATE_SNAPSHOT of {len(snapshot) / 1e6:.2f} MB (once, untimed above)",
        f"{fmt_seconds(pipeline)} vs json.loads {fmt_seconds(floor_s)} ({pipeline / floor_s:.1f}x)",
    )
    if long_sizes:
        lo, hi = min(long_sizes), max(long_sizes)
        per = _per_size(
            out,
            long_sizes,
            long_message_reads,
            "one message of {:,} deltas, messages[-1] read per event",
            progress,
        )
        if lo != hi:
            out.add(
                f"  its per-event cost {hi:,} / {lo:,} (report only)", f"{per[hi] / per[lo]:.2f}"
            )
        for cost, label in (
            (many_messages_cost, "{:,} messages added to one run, each named by id"),
            (wide_object_cost, "{:,} members added to one state object, one per patch"),
            (tool_round_cost, "{:,} local tool results in one round, per result"),
        ):
            grown = _per_size(out, long_sizes, cost, label, progress)
            if lo != hi:
                growth = grown[hi] / grown[lo]
                out.add(
                    f"  its per-event cost {hi:,} / {lo:,}",
                    f"{growth:.2f}",
                    f"<= {MAX_GROWTH:g}",
                    growth <= MAX_GROWTH,
                )
    out.notes += [
        "mix: text messages (START, 20 CONTENT, END), calls of a remote tool (START, 10 ARGS, "
        "END), 3 STATE_DELTA (replace/add on nested paths) per cycle on a ~1 MB state, "
        "a MESSAGES_SNAPSHOT of the last 50 messages every 5,000 events",
        "selectors after every event (an observer): is_loading, is_resuming, "
        "pending_interrupts, error, len(messages), messages[-1], state",
        "fake driver: FakeDriver.run_until_idle() delivers each raw line; direct apply: "
        "resource.apply(FrameReceived(attempt, line)) in a loop after the fake driver "
        "started and acknowledged the run",
        f"best of {reps} per {CHUNK}-event chunk (summed), time.perf_counter, gc enabled; "
        "floor and both modes interleaved",
        "RUN_STARTED and the STATE_SNAPSHOT are applied before the clock starts; the timed "
        "span is the N content events and RUN_FINISHED (the floor loads the same N+1 lines)",
        "where the time goes: the same lines through json.loads; read_frame; the reducer "
        "alone (step() chained, no resource); resource.apply() with no observer; and with "
        "the selectors (direct apply, best of each)",
    ]
    if long_sizes:
        out.notes.append(
            "one long message read per event: reading an open message's text joins the "
            "deltas so far, O(length) per read, so the total grows quadratically with the "
            "message (the reducer's own cost stays flat); report only, see reference.md, Reading"
        )
        out.notes.append(
            "messages added to one run: ACTIVITY_SNAPSHOTs, TOOL_CALL_STARTs with a new "
            "parent id (each its own holder) and TOOL_CALL_RESULTs, in turn, through the "
            "fake driver with no observer: each names a message by id, found through the "
            "draft's IdHints rather than a scan of the run"
        )
        out.notes.append(
            "members added to one state object: each STATE_DELTA adds a member and replaces "
            "one added earlier; past SHARE_MEMBERS_FROM (1,024) members the object is a "
            "PMap, so a patch copies a few small dicts rather than the object"
        )
        out.notes.append(
            "local tool results in one round: a run ends with N calls of a local tool; "
            "timed from the round's start through the fake driver (a step per tool) to the "
            "follow-up's end; each result finds its task by subtraction and is stored in "
            "the round's PVec"
        )
    context = Section("Context: @ag-ui/client 1.0.0 (TypeScript), quoted from the issue")
    context.headers = ("events", "@ag-ui/client 1.0.0 (quoted)", "interlude (measured)", "")
    for n, rate in TS_QUOTED:
        ours = runs.get((MODES[0], n))
        mine = f"{fmt_rate(ours.events_per_second)} (fake driver)" if ours else "not run"
        context.add(f"{n:,}", f"~{rate:,} ev/s", mine)
    context.notes += [
        "quoted, not measured: the issue reports @ag-ui/client 1.0.0 slowing from ~24,000 "
        "events/s at 1,000 events to 6,000 at 10,000 and 540 at 100,000, because it "
        "deep-copies state and history on every event",
        "different language, machine and workload: compare the shape (how throughput "
        "falls with length), not the absolute numbers",
    ]
    return out, context
