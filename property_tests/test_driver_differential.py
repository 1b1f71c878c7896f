"""The fake driver and the TrioDriver, given the same script and the same app, agree.

Both carry out the same reducer's commands (docs/testing.md, adapters/trio.py: "the
fake driver's twin"), so an application must see the same thing under either.
Hypothesis draws an endpoint script (text, tool calls, state events, interrupt
outcomes with batches and expiries, RUN_ERROR, malformed frames, a foreign
RUN_STARTED, refusals with or without Retry-After, drops after n events, streams
that end without a terminal event or pause until released) and an app: a chat or a
completion, actions between settles (send or set_input, resume with right and wrong
answers, stop, set_state (one with no JSON text), set_thread_id, reload, release a
paused stream, let time pass), and observers that act from inside a notification
(resume each batch at once; any intent at the n-th notification, so mid-stream).
The same sequence runs through:

- a ``FakeDriver`` over a ``ScriptedAgent``, settled with ``run_until_idle``;
- a ``TrioDriver`` over an in-memory transport answering from the same script (frame
  by frame, or in reads of a few frames as ``HttpxTransport`` hands them over), on
  trio's ``MockClock`` without autojump: its epoch clock is a number the test moves,
  and the loop clock is jumped just past it, so timers fire one at a time at exactly
  the fake's times (retry back-off and expiry included).

After every action they must agree on what the app sees: the action's exception,
every request body sent, messages, shared state, the pending batch, the flags,
the error, and each observer notification. Local tools (async, a sync one in a
worker thread, one that raises, one whose value has no JSON form, one declared with
no function) run at most one per run: two concurrent tools finish in the event
loop's order, which the reducer makes irrelevant only once both have finished.
Not covered: a tool still running when the app acts (the fake runs a tool to its
end within one step, docs/testing.md).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interlude.adapters.fake import (
    FAKE_EPOCH,
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    interrupted,
    run_error,
    started,
    state_delta,
    state_snapshot,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.adapters.trio import ToolSignal, TrioDriver
from interlude.core.commands import CancelTimer, Command, StartAttempt, StartTimer
from interlude.core.errors import InterludeError, ProtocolError, TransportError
from interlude.core.json import MAX_INT_DIGITS, frozen_unchecked, thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.wire.codec import decode_run_input

OPTIONS = Options(
    id_prefix="diff",
    retry=RetryPolicy(max_attempts=3, base_delay=0.5, jitter=0),
    local_tools=frozenset({"ghost"}),
)
"""One id prefix for both (the TrioDriver draws a random one otherwise); back-off
delays in halves of a second, so they never meet the expiries below. ``ghost`` is a
local tool no function was given for."""


async def lookup(arguments: Any) -> Any:
    """Looks a thing up."""
    return {"found": arguments}


async def broken(arguments: Any) -> Any:
    """Always fails."""
    raise ValueError("no such thing")


async def weird(arguments: Any) -> Any:
    """Returns a value with no JSON form."""
    return {1, 2}


def tally(arguments: Any, signal: ToolSignal) -> Any:
    """A sync tool (a worker thread under the TrioDriver)."""
    return ["tally", arguments, signal.cancelled]


UNWRITABLE = frozen_unchecked({"n": 10**MAX_INT_DIGITS})
"""A state past the checks that has no JSON text: a request that cannot be written."""

TOOLS = {"lookup": lookup, "broken": broken, "weird": weird, "tally": tally}
LOCAL = ["lookup", "broken", "weird", "tally", "ghost"]


# -- the script ---------------------------------------------------------------------------


@attrs.frozen
class Script:
    """One answer: events by token, how the stream ends, and where it pauses."""

    tokens: tuple[Any, ...]
    ending: tuple[Any, ...] = ("end",)
    """("end",), ("refuse", status, retry_after), or ("drop", after, what): what fails is
    a retryable "transport", a "protocol" error, or a "fatal" (not retryable) transport."""
    pause: int | None = None
    """Deliver this many items (events, then the ending), then wait for a release."""


DEFAULT = Script(("started", "text", "finished"))
"""The answer once the drawn scripts are used up."""


def _expires(offset: float) -> str:
    moment = datetime.fromtimestamp(FAKE_EPOCH + offset, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _interrupt(spec: tuple[str, bool, float | None]) -> dict[str, Any]:
    id, schema, expiry = spec
    it: dict[str, Any] = {"id": id, "reason": "input_required", "message": f"{id}?"}
    if schema:
        it["responseSchema"] = {"type": "boolean"}
    if expiry is not None:
        it["expiresAt"] = _expires(expiry)
    return it


def events(script: Script, req: Request) -> list[Any]:
    out: list[Any] = []
    for n, token in enumerate(script.tokens):
        key = f"{req.run_id}-{n}"
        if token == "started":
            out.append(started(req))
        elif token == "started-other":
            out.append({"type": "RUN_STARTED", "threadId": req.thread_id, "runId": "other"})
        elif token == "finished":
            out.append(finished(req))
        elif token == "text":
            out.extend(text(key, "Hello there.", chunks=2))
        elif token in (*LOCAL, "remote"):
            out.extend(tool_call(key, token, {"q": n}))
        elif token == "snapshot":
            out.append(state_snapshot({"n": 0}))
        elif token == "delta":
            out.append(state_delta({"op": "add", "path": f"/d{n}", "value": n}))
        elif token == "bad-delta":
            out.append(state_delta({"op": "replace", "path": "/missing/x", "value": 1}))
        elif token == "run-error":
            out.append(run_error("model overloaded", "OVERLOADED"))
        elif token == "malformed":
            out.append('{"type": "TEXT_MESSAGE_START", oops')
        else:
            kind, specs = token
            assert kind == "interrupt"
            out.append(interrupted(req, *(_interrupt(s) for s in specs)))
    return out


def failure(ending: tuple[Any, ...]) -> TransportError | ProtocolError:
    """A fresh error for each run (an exception raised once carries a traceback)."""
    if ending[0] == "refuse":
        return TransportError.from_status(ending[1], "busy", retry_after=ending[2])
    if ending[2] == "protocol":
        return ProtocolError("the stream broke off mid-frame")
    return TransportError("the connection dropped", retryable=ending[2] == "transport")


def reply_for(script: Script, req: Request) -> Reply:
    evs = tuple(events(script, req))
    hold = script.pause is not None
    if script.ending[0] == "refuse":
        return Reply(fail_before_send=failure(script.ending), hold=hold)
    if script.ending[0] == "drop":
        after = min(script.ending[1], len(evs))
        return Reply(events=evs, fail_after=after, failure=failure(script.ending), hold=hold)
    return Reply(events=evs, hold=hold)


def request_of(body: bytes) -> Request:
    raw = body.decode("utf-8")
    return Request(attempt=0, run_input=decode_run_input(json.loads(raw)), body=raw)


# -- what the app sees --------------------------------------------------------------------


def _error(error: BaseException | None) -> Any:
    return None if error is None else (type(error).__name__, str(error))


def view(r: Resource, sent: Sequence[str]) -> dict[str, Any]:
    batch = r.pending_interrupts
    return {
        "requests": list(sent),
        "messages": repr(list(r.messages)),
        "state": thaw(r.state),
        "batch": None if batch is None else repr(batch),
        "loading": r.is_loading,
        "resuming": r.is_resuming,
        "retrying": r.is_retrying,
        "attempts": r.attempts,
        "retry_due": r.retry_due,
        "needs_new_thread": r.needs_new_thread,
        "expired": r.is_expired,
        "thread": r.thread_id,
        "warnings": r.warnings,
        "error": _error(r.error),
    }


def glimpse(r: Resource) -> tuple[Any, ...]:
    """What one observer notification shows."""
    batch = r.pending_interrupts
    return (
        len(r.messages),
        r.is_loading,
        r.is_resuming,
        None if batch is None else batch.id,
        r.needs_new_thread,
        _error(r.error),
    )


def entries_for(r: Resource, mode: str) -> tuple[str, list[dict[str, Any]]]:
    """The batch id and the entries the app submits, drawn as ``mode``."""
    batch = r.pending_interrupts
    if batch is None or mode == "stale":
        return "no-such-batch", []
    ids = [it.id for it in batch.interrupts]
    if mode == "cancel":
        return batch.id, [{"interrupt_id": id, "status": "cancelled"} for id in ids]
    payload: Any = "nope" if mode == "bad-payload" else True
    entries = [{"interrupt_id": id, "status": "resolved", "payload": payload} for id in ids]
    if mode == "missing":
        entries = entries[1:]
    elif mode == "unknown":
        entries.append({"interrupt_id": "zzz", "status": "resolved", "payload": True})
    return batch.id, entries


@attrs.frozen
class App:
    """The resource the app makes, whether an observer answers each batch at once, and
    what an observer does at its n-th notification (mid-stream, mid-retry...)."""

    kind: str = "chat"
    auto_resume: bool = False
    triggers: tuple[tuple[int, tuple[Any, ...]], ...] = ()
    group: int | None = None
    """The TrioDriver's transport hands over this many frames per read."""


def open_resource(factory: Any, app: App, seen: list[Any]) -> Resource:
    """The app's resource; ``seen`` gets what each notification shows (R-I2)."""
    make = factory.chat if app.kind == "chat" else factory.completion
    r: Resource = make(OPTIONS, local_tools=TOOLS, thread_id="t0")
    answered: set[str] = set()
    count = [0]

    def observe(r: Resource) -> None:
        seen.append(glimpse(r))
        count[0] += 1
        for n, action in app.triggers:
            if n == count[0] and action == ("raise",):
                raise RuntimeError("an observer's bug")  # an ObserverError (R-F1)
            if n == count[0]:
                seen.append(("trigger", act(r, action)))
        batch = r.pending_interrupts
        if app.auto_resume and batch is not None and batch.id not in answered:
            answered.add(batch.id)
            try:
                r.resume(*entries_for(r, "valid"))
            except InterludeError as exc:
                seen.append(("observer", _error(exc)))

    r.subscribe(observe)
    return r


def act(r: Resource, action: tuple[Any, ...]) -> Any:
    """Do one app action on ``r``; the exception it raised, if any, as the app sees it."""
    kind = action[0]
    try:
        if kind == "send" and r.kind == "completion":
            r.set_input(action[1])
        elif kind == "send":
            r.send(action[1])
        elif kind == "resume":
            r.resume(*entries_for(r, action[1]))
        elif kind == "stop":
            r.stop()
        elif kind == "set_state" and action[1] == "unwritable":
            r.set_state(UNWRITABLE)  # the next request fails to encode: nothing is sent
        elif kind == "set_state":
            r.set_state(action[1])
        elif kind == "set_thread":
            r.set_thread_id(action[1])
        elif kind == "reload":
            return ("reload", r.reload())
    except Exception as exc:
        return _error(exc)
    return None


# -- the fake driver ------------------------------------------------------------------------


class Paused(FakeDriver):
    """A FakeDriver whose held streams deliver their first ``pause`` items as they start,
    as the TrioDriver's transport does (``release`` would release every held stream)."""

    def __init__(self, agent: ScriptedAgent) -> None:
        super().__init__(agent)
        self.pauses: dict[int, int] = {}

    def _start(self, resource: Resource, c: StartAttempt) -> bool:
        took = super()._start(resource, c)
        stream = self._streams.get((self._key(resource), c.attempt))
        pause = self.pauses.pop(c.attempt, 0)
        if stream is not None and pause:
            stream.released = pause
            self._actions.append(("deliver", stream))
        return took

    def release_each(self) -> None:
        """Let each parked stream go on, oldest first, each until it ends or parks again
        (as ``Transport.paused`` is released): ``release`` would interleave them."""
        for stream in list(self._streams.values()):
            if stream.reply.hold and not stream.closed and stream.released == 0:
                stream.released = 1_000_000
                self._actions.append(("deliver", stream))
                self.run_until_idle()


def run_fake(app: App, scripts: Sequence[Script], actions: Sequence[tuple[Any, ...]]) -> list[Any]:
    queue = deque(scripts)

    def answer(req: Request) -> Reply:
        script = queue.popleft() if queue else DEFAULT
        if script.pause is not None:
            driver.pauses[req.attempt] = script.pause
        return reply_for(script, req)

    driver = Paused(ScriptedAgent(answer))
    seen: list[Any] = []
    r = open_resource(driver, app, seen)

    def advance(seconds: float) -> None:
        """Let time pass, settling after each timer, as a real loop does."""
        target = driver.clock.now() + seconds
        while True:
            driver.run_until_idle(follow_retries=False)
            dues = [due for due, _ in driver.pending_timers() if due <= target]
            if not dues:
                break
            driver.advance_to(min(dues))
        driver.advance_to(target)

    log: list[Any] = []
    for action in actions:
        outcome = None
        if action[0] == "release":
            driver.release_each()
        elif action[0] == "advance":
            advance(action[1])
        else:
            outcome = act(r, action)
        driver.run_until_idle()
        log.append((action, outcome, view(r, [q.body for q in driver.requests]), seen[:]))
        seen.clear()
    return log


# -- the TrioDriver -------------------------------------------------------------------------


class Transport:
    """Answers each request from the next script; a pause waits for ``release``."""

    def __init__(self, scripts: Sequence[Script]) -> None:
        self._scripts = deque(scripts)
        self.bodies: list[str] = []
        self.paused: list[trio.Event] = []
        """What each paused stream waits for, oldest first; the test sets them one at a
        time, settling in between, so two released streams cannot interleave in an order
        trio picks at random (a lingering stream's end before or after the next run's
        events: both happen on a network, but the fake has one order)."""

    async def stream(self, body: bytes) -> AsyncIterator[str]:
        async with aclosing(self._frames(body)) as frames:
            async for data in frames:
                if data is not None:
                    yield data

    async def _frames(self, body: bytes) -> AsyncIterator[str | None]:
        """Each frame's data, and None where the stream pauses for a release."""
        req = request_of(body)
        self.bodies.append(req.body)
        script = self._scripts.popleft() if self._scripts else DEFAULT
        reply = reply_for(script, req)
        if reply.fail_before_send is not None:
            raise reply.fail_before_send
        items = list(reply.events[: reply.fail_after])
        for n in range(len(items) + 1):
            if n == script.pause:
                go = trio.Event()
                self.paused.append(go)
                yield None
                await go.wait()
            if n == len(items):
                break
            item = items[n]
            yield item if isinstance(item, str) else json.dumps(item)
        if reply.fail_after is not None:
            raise reply.failure


class Batched(Transport):
    """Hands over ``group`` frames at a time, as one network read does (HttpxTransport)."""

    def __init__(self, scripts: Sequence[Script], group: int) -> None:
        super().__init__(scripts)
        self._group = group

    async def stream_batches(self, body: bytes) -> AsyncIterator[list[str]]:
        batch: list[str] = []
        try:
            async with aclosing(self._frames(body)) as frames:
                async for data in frames:
                    if data is not None:
                        batch.append(data)
                    if batch and (data is None or len(batch) == self._group):
                        yield batch
                        batch = []
        except (TransportError, ProtocolError):
            if batch:  # what was read before the failure
                yield batch
            raise
        if batch:
            yield batch


class Timed(TrioDriver):
    """A TrioDriver that notes each timer's due time, so the test can move to it."""

    def __init__(self, transport: Any, clock: Callable[[], float]) -> None:
        super().__init__(transport, clock=clock)
        self.dues: dict[int, tuple[float, str]] = {}

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        for c in commands:
            if isinstance(c, StartTimer):
                self.dues[c.timer] = (c.due, c.purpose)
            elif isinstance(c, CancelTimer):
                self.dues.pop(c.timer, None)
        super().execute(resource, commands)


def run_trio(app: App, scripts: Sequence[Script], actions: Sequence[tuple[Any, ...]]) -> list[Any]:
    clock = trio.testing.MockClock()  # moves only when jumped
    epoch = [FAKE_EPOCH]
    log: list[Any] = []

    async def main() -> None:
        transport = Transport(scripts) if app.group is None else Batched(scripts, app.group)
        async with Timed(transport, clock=lambda: epoch[0]) as driver:
            seen: list[Any] = []
            r = open_resource(driver, app, seen)

            def live() -> list[tuple[float, str]]:
                """(due, purpose) of each timer that neither fired nor was cancelled."""
                running = r._books.timers
                return [d for t, d in driver.dues.items() if t in running]

            async def move_to(when: float) -> None:
                # The loop clock goes a little further than ours: a timer woken early
                # re-reads our clock and sleeps again; one due fires.
                clock.jump(max(0.0, when - epoch[0]) + 0.001)
                epoch[0] = max(when, epoch[0])
                await trio.testing.wait_all_tasks_blocked()

            async def settle(follow_retries: bool = True) -> None:
                while True:
                    await trio.testing.wait_all_tasks_blocked()
                    if r._books.running_tools:  # a sync tool, in a thread of its own
                        time.sleep(0.0005)
                        continue
                    timers = live()
                    if any(due <= epoch[0] for due, _ in timers):
                        await move_to(epoch[0])  # due now: let it fire
                        continue
                    retries = [due for due, purpose in timers if purpose == "retry"]
                    if not follow_retries or not retries:
                        return
                    await move_to(min(due for due, _ in timers))

            async def advance(seconds: float) -> None:
                target = epoch[0] + seconds
                while True:
                    await settle(follow_retries=False)
                    dues = [due for due, _ in live() if due <= target]
                    if not dues:
                        break
                    await move_to(min(dues))
                await move_to(target)

            for action in actions:
                outcome = None
                if action[0] == "release":
                    paused, transport.paused = transport.paused, []
                    for go in paused:
                        go.set()
                        await settle()
                elif action[0] == "advance":
                    await advance(action[1])
                else:
                    outcome = act(r, action)
                await settle()
                log.append((action, outcome, view(r, transport.bodies), seen[:]))
                seen.clear()

    trio.run(main, clock=clock)
    return log


# -- strategies -----------------------------------------------------------------------------

EXPIRIES = st.sampled_from([None, None, None, -1.0, 0.3, 2.7, 40.3])
"""Seconds after FAKE_EPOCH: past, soon, during retries, or later (never n/2)."""

interrupt_tokens = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.booleans(), EXPIRIES),
    min_size=1,
    max_size=2,
    unique_by=lambda s: s[0],
).map(lambda specs: ("interrupt", tuple(specs)))

body_tokens = st.sampled_from(["text", "text", "snapshot", "delta", "remote"])
bad_tokens = st.sampled_from(["bad-delta", "malformed", "run-error"])


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    shape = draw(st.sampled_from(["ok"] * 2 + ["interrupt"] * 5 + ["odd"]))
    body = draw(st.lists(body_tokens, max_size=3))
    if draw(st.integers(0, 4)) == 0:  # a broken event somewhere
        body.insert(draw(st.integers(0, len(body))), draw(bad_tokens))
    if draw(st.booleans()):  # one local tool call: run once the run succeeds
        body.insert(draw(st.integers(0, len(body))), draw(st.sampled_from(LOCAL)))
    if shape == "ok":
        tokens = ["started", *body, "finished"]
    elif shape == "interrupt":
        tokens = ["started", *body, draw(interrupt_tokens)]
    else:  # no terminal event, a foreign acknowledgement, or a terminal event too early
        tokens = draw(
            st.sampled_from(
                [
                    ["started", *body],
                    ["started-other", *body, "finished"],
                    [*body, "started", "finished"],
                    ["started", "finished", *body],
                ]
            )
        )
    kind = draw(st.sampled_from(["end"] * 8 + ["refuse", "drop"]))
    ending: tuple[Any, ...] = ("end",)
    if kind == "refuse":
        # Retry-After: none, longer than the back-off, or past the policy's limit
        wait = draw(st.sampled_from([None, None, 1.2, 100.0]))
        ending = ("refuse", draw(st.sampled_from([503, 429, 400])), wait)
    elif kind == "drop":
        after = draw(st.integers(0, len(tokens) + 3))
        ending = ("drop", after, draw(st.sampled_from(["transport", "protocol", "fatal"])))
    pause = draw(st.integers(0, len(tokens) + 2)) if draw(st.integers(0, 4)) == 0 else None
    return Script(tuple(tokens), ending, pause)


resumes = st.tuples(
    st.just("resume"),
    st.sampled_from(["valid"] * 4 + ["cancel", "missing", "unknown", "bad-payload", "stale"]),
)
intents = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(["hi", "and then?", {"x": 1}])),
    resumes,
    resumes,
    resumes,
    st.tuples(st.just("stop")),
    st.tuples(st.just("set_state"), st.sampled_from([{"n": 5}, [], "plain", "unwritable"])),
    st.tuples(st.just("set_thread"), st.sampled_from(["t0", "t1", None])),
    st.tuples(st.just("reload")),
)
actions = (
    intents
    | st.tuples(st.just("release"))
    | st.tuples(st.just("advance"), st.sampled_from([0.3, 3.0, 100.0]))
)
apps = st.builds(
    App,
    kind=st.sampled_from(["chat", "chat", "completion"]),
    auto_resume=st.booleans(),
    triggers=st.lists(st.tuples(st.integers(1, 30), intents | st.just(("raise",))), max_size=2).map(
        tuple
    ),
    group=st.sampled_from([None, 2, 4]),
)


@settings(max_examples=150)
@example(  # two paused streams released at once: a finished run's end, the resume's events
    app=App(auto_resume=True),
    script=[
        Script(("started", "bad-delta", "finished")),
        Script(("started", "snapshot", ("interrupt", (("a", False, None),))), pause=3),
        Script(("started", "bad-delta", "finished"), pause=0),
    ],
    steps=[("send", "hello"), ("send", "hi"), ("release",)],
)
@given(
    app=apps,
    script=st.lists(scripts(), min_size=1, max_size=5),
    steps=st.lists(actions, max_size=7).map(lambda rest: [("send", "hello"), *rest]),
)
def test_the_fake_driver_and_the_trio_driver_show_the_app_the_same_thing(
    app: App, script: list[Script], steps: list[tuple[Any, ...]]
) -> None:
    fake = run_fake(app, script, steps)
    real = run_trio(app, script, steps)
    for n, (f, t) in enumerate(zip(fake, real, strict=True)):
        assert f == t, f"after action {n} {steps[n]}"
