"""Any valid Options, extremes included, keeps a chat running, bounded and well-behaved.

``Options`` and its ``RetryPolicy`` are drawn across the whole range their
validators accept: ``max_attempts`` up to 10**9, delays, multipliers and caps up
to 1e308, any jitter in [0, 1], any integer seed (huge and negative included),
``max_retry_after`` up to infinity, both expiry policies, ``max_tool_rounds``
from 0, odd id prefixes, and varied tools, context and forwarded props. A chat
built on them is driven through a drawn script of endpoint behaviours
(refusals with and without ``Retry-After``, from zero to 1e308 seconds; drops
before and after the acknowledgement; streams that end early; ``RUN_ERROR``;
interrupts expiring in the past, now, soon or in 9999; local tool rounds;
successes), drawn clock moves (up to 1e15 s at once) and drawn intents (send,
resume with right and wrong answers, stop, set_thread_id, configure with other
drawn Options mid-run). After every call it checks:

- an intent returns or raises one of the intent errors documented for it (with
  a message), and a refused intent leaves the very same state object; the
  driver's ``step``, ``run_until_idle`` and ``advance`` raise nothing at all;
- every timer the driver holds is due at a finite time, and the clock is finite;
- ``run_until_idle`` settles within its ``max_steps``;
- when idle, ``is_loading`` is False and ``error`` is None or an
  ``InterludeError`` with a message;
- no logical run sends more requests than ``max_attempts`` (R-F1): requests are
  matched by run id to the logical run whose attempt issued them, a retry being
  an attempt started by a retry timer, and the budget is the largest
  ``max_attempts`` in force while that run lasted (``configure`` may change it);
- at the end the chat is still usable: a pending batch answered (or a new
  thread), one more ``send`` goes out and succeeds.

A second property checks the back-off itself: ``RetryPolicy.delay`` is finite and
follows the documented formula for any legal policy and attempt number.

The example count is ``INTERLUDE_OPTIONS_EXAMPLES`` (default 300; twice that for the
cheap back-off property).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from interlude.adapters.fake import (
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    drop,
    finished,
    interrupted,
    refuse,
    reply,
    run_error,
    started,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core import inputs as i
from interlude.core.commands import StartAttempt
from interlude.core.errors import (
    BatchClaimedError,
    BatchExpiredError,
    InterludeError,
    InterruptPendingError,
    InvalidResumeError,
    RecoveryRequiredError,
    StaleBatchError,
)
from interlude.core.options import MAX_WAIT, Options, RetryPolicy
from interlude.core.wire.run_input import Context, Tool

BIG = 1e308
MAX_STEPS = 5_000

# -- options ---------------------------------------------------------------------------


def _floats(least: float, most: float, *edges: float) -> st.SearchStrategy[float]:
    """Finite floats in [least, most], with the edges and the extremes drawn often."""
    return st.one_of(
        st.sampled_from([least, most, *edges]),
        st.floats(least, most, allow_nan=False, allow_infinity=False),
    )


retry_policies = st.builds(
    RetryPolicy,
    max_attempts=st.one_of(st.integers(1, 5), st.sampled_from([3000, 10**9]), st.integers(1)),
    base_delay=_floats(0.0, BIG, 5e-324, 0.5, 1e-9, 1e9),
    multiplier=_floats(1.0, BIG, 1.0000001, 2.0, 1e10),
    max_delay=_floats(0.0, BIG, 5e-324, 10.0, 1e9),
    jitter=_floats(0.0, 1.0, 0.2, 0.9999999),
    jitter_seed=st.none() | st.integers() | st.sampled_from([-(2**200), 2**200, -1, 0]),
    max_retry_after=st.one_of(_floats(0.0, BIG, 60.0, 2.0**31), st.just(math.inf)),
)

prefixes = st.none() | st.one_of(
    st.sampled_from(["-", "--", "0", "123", "-1", "run", "batch", "a-b-c", "é", "🦜", " ", "\x00"]),
    st.text(min_size=1, max_size=12),
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)

tool_lists = st.lists(
    st.builds(
        Tool,
        name=st.text(min_size=1, max_size=8),
        description=st.text(max_size=8),
        parameters=st.none() | st.just({"type": "object"}) | json_values,
        metadata=st.none() | st.dictionaries(st.text(max_size=3), json_values, max_size=2),
    ),
    max_size=3,
    unique_by=lambda t: t.name,
)

options = st.builds(
    Options,
    tools=tool_lists,
    context=st.lists(
        st.builds(Context, description=st.text(max_size=6), value=st.text(max_size=6)),
        max_size=2,
    ),
    forwarded_props=json_values,
    retry=retry_policies,
    expiry=st.sampled_from(["block", "cancel_expired"]),
    id_prefix=prefixes,
    max_tool_rounds=st.one_of(st.integers(0, 3), st.sampled_from([25, 10**9])),
)

# -- the endpoint ----------------------------------------------------------------------

LAST_RFC3339 = 253_402_300_799.0  # 9999-12-31T23:59:59Z
FIRST_RFC3339 = -62_135_596_800.0  # 0001-01-01T00:00:00Z


def rfc3339(epoch: float) -> str:
    """A UTC RFC 3339 timestamp, clamped to the years the format can write."""
    epoch = min(max(epoch, FIRST_RFC3339), LAST_RFC3339)
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


retry_afters = st.none() | st.sampled_from([0.0, 5e-324, 0.5, 60.0, 2.0**31, 1e15, BIG])
interrupts = st.tuples(
    st.just("interrupt"),
    st.lists(
        st.sampled_from([None, None, None, "past", "now", "near", "soon", "far", "offset"]),
        min_size=1,
        max_size=3,
    ),
)
refusals = st.tuples(
    st.just("refuse"), st.tuples(st.sampled_from([503, 429, 500, 400]), retry_afters)
)
# Interrupts and refusals are drawn twice as often: they lead to resumes and retries.
behaviours = st.one_of(
    st.tuples(st.just("success"), st.none()),
    interrupts,
    interrupts,
    st.tuples(st.just("tool"), st.integers(1, 2)),
    refusals,
    refusals,
    st.tuples(
        st.sampled_from(
            [
                "drop_before",
                "drop_after",
                "truncated",
                "empty",
                "garbage_before",
                "run_error",
                "run_error_first",
            ]
        ),
        st.none(),
    ),
)

EXPIRY_OFFSETS = {"past": -3600.0, "now": 0.0, "near": 0.001, "soon": 30.0, "far": math.inf}


class Endpoint:
    """Answers each request with the next drawn behaviour; success when none is left."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, Any]] = []
        self.driver: FakeDriver | None = None

    def __call__(self, req: Request) -> Reply:
        plan: tuple[str, Any] = self.plans.pop(0) if self.plans else ("success", None)
        kind, arg = plan
        n = len(self.driver.requests) if self.driver is not None else 0
        if kind == "success":
            return reply(started(req), *text(f"m{n}", "done", chunks=2), finished(req))
        if kind == "interrupt":
            now = self.driver.now() if self.driver is not None else 0.0
            items: list[dict[str, Any]] = []
            for k, when in enumerate(arg):
                item: dict[str, Any] = {"id": f"q{k}", "reason": "input_required"}
                if when == "offset":
                    item["expiresAt"] = "2027-01-01T01:00:00+23:59"
                elif when is not None:
                    item["expiresAt"] = rfc3339(now + EXPIRY_OFFSETS[when])
                items.append(item)
            return reply(started(req), *text(f"m{n}", "?"), interrupted(req, *items))
        if kind == "tool":
            calls = [tool_call(f"c{n}-{k}", "lookup", {"k": k}) for k in range(arg)]
            return reply(started(req), *calls, finished(req))
        if kind == "refuse":
            status, after = arg
            return refuse(status, "busy", retry_after=after)
        if kind == "drop_before":
            return drop()
        if kind == "drop_after":
            return drop(started(req), *text(f"m{n}", "half a sen"))
        if kind == "truncated":
            return reply(started(req), *text(f"m{n}", "no end"))
        if kind == "empty":
            return reply()
        if kind == "garbage_before":
            return reply("{not json")
        if kind == "run_error":
            return reply(started(req), run_error("boom", "E1"))
        if kind == "run_error_first":
            return reply(run_error("refused", "E2"))
        raise AssertionError(kind)


# -- the resource, counting attempts per logical run -------------------------------------


class Counted(Resource):
    """Maps each attempt's run id to its logical run, and each run to its budget."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logical = 0
        self.run_of: dict[str, int] = {}
        self.budget: dict[int, int] = {}

    def apply(self, input: i.Input, *, now: float | None = None) -> Any:
        t = super().apply(input, now=now)
        attempts = [c for c in t.commands if isinstance(c, StartAttempt)]
        assert len(attempts) <= 1, f"{type(input).__name__} started {len(attempts)} attempts"
        for c in attempts:
            if not isinstance(input, i.TimerFired):  # a new logical run; a timer's is a retry
                self.logical += 1
            self.run_of[c.run_input.run_id] = self.logical
        most = t.state.options.retry.max_attempts
        self.budget[self.logical] = max(self.budget.get(self.logical, 0), most)
        return t


# -- checks ------------------------------------------------------------------------------


def check(driver: FakeDriver, chat: Counted, idle: bool) -> None:
    assert math.isfinite(driver.clock.now()), f"the clock reads {driver.clock.now()}"
    for due, purpose in driver.pending_timers():
        assert math.isfinite(due), f"a {purpose} timer is due at {due}"
    per_run = Counter(chat.run_of[r.run_id] for r in driver.requests)
    for run, sent in per_run.items():
        assert sent <= chat.budget[run], f"run {run} sent {sent} > {chat.budget[run]} attempts"
    if idle:
        assert not chat.is_loading, "idle, yet loading"
        e = chat.error
        assert e is None or (isinstance(e, InterludeError) and str(e)), repr(e)


def run_until_idle(driver: FakeDriver, chat: Counted) -> None:
    driver.run_until_idle(max_steps=MAX_STEPS)
    check(driver, chat, idle=True)


# -- intents -------------------------------------------------------------------------------

ALLOWED: dict[str, tuple[type[InterludeError], ...]] = {
    "send": (InterruptPendingError, RecoveryRequiredError),
    "resume": (
        StaleBatchError,
        BatchClaimedError,
        BatchExpiredError,
        RecoveryRequiredError,
        InvalidResumeError,
    ),
    "stop": (),
    "set_thread_id": (),
    "configure": (),
}

resume_kinds = st.sampled_from(
    ["resolved", "resolved", "cancelled", "mixed", "missing", "unknown", "stale"]
)
plans = st.lists(behaviours, max_size=5)
# After an intent: run to the end (mostly), run but leave a retry back-off waiting (stay),
# leave its commands queued, or take a few steps.
then_steps = st.sampled_from(["idle", "idle", "idle", "stay", "none", "one", "few"])
moves = st.one_of(
    st.tuples(st.just("send"), st.text(max_size=5), plans, then_steps),
    st.tuples(st.just("resume"), resume_kinds, plans, then_steps),
    st.tuples(st.just("resume"), resume_kinds, plans, then_steps),
    st.tuples(st.just("stop"), st.none(), plans, then_steps),
    st.tuples(
        st.just("set_thread_id"), st.none() | st.text(min_size=1, max_size=6), plans, then_steps
    ),
    st.tuples(st.just("configure"), options, plans, then_steps),
    st.tuples(
        st.just("advance"),
        st.sampled_from([0.0, 5e-324, 0.001, 0.5, 30.0, 3600.0, 1e9, 1e12, 1e15]),
        st.just([]),
        then_steps,
    ),
    st.tuples(st.just("step"), st.integers(1, 5), st.just([]), st.just("none")),
)


def answers(chat: Counted, how: str) -> tuple[str, list[dict[str, Any]]]:
    batch = chat.pending_interrupts
    if batch is None:
        return "no-batch", [{"interrupt_id": "q0", "status": "cancelled"}]
    ids = [it.id for it in batch.interrupts]
    entries: list[dict[str, Any]] = []
    for k, x in enumerate(ids):
        cancel = how == "cancelled" or (how == "mixed" and k % 2 == 1)
        entry = {"interrupt_id": x, "status": "cancelled" if cancel else "resolved"}
        entries.append(entry if cancel else {**entry, "payload": {"ok": True}})
    if how == "missing":
        entries = entries[1:]
    elif how == "unknown":
        entries.append({"interrupt_id": "zz", "status": "cancelled"})
    return ("an-old-batch" if how == "stale" else batch.id), entries


def intent(chat: Counted, name: str, arg: Any) -> None:
    before = chat.core_state
    try:
        if name == "send":
            chat.send(arg)
        elif name == "resume":
            batch_id, entries = answers(chat, arg)
            chat.resume(batch_id, entries)
        elif name == "stop":
            chat.stop()
        elif name == "set_thread_id":
            chat.set_thread_id(arg)
        else:
            chat.configure(arg)
    except InterludeError as exc:
        assert isinstance(exc, ALLOWED[name]), f"{name} raised {type(exc).__name__}: {exc}"
        assert str(exc), f"{name} raised {type(exc).__name__} with no message"
        assert chat.core_state is before, f"a refused {name} changed the state"
        if name == "resume" and isinstance(exc, InvalidResumeError):
            assert arg in ("missing", "unknown"), f"valid answers refused: {exc}"


# -- the property ------------------------------------------------------------------------


def settle(driver: FakeDriver, chat: Counted, then: str) -> None:
    if then == "idle":
        run_until_idle(driver, chat)
    elif then == "stay":
        driver.run_until_idle(max_steps=MAX_STEPS, follow_retries=False)
    for _ in range({"one": 1, "few": 3}.get(then, 0)):
        driver.step()
        check(driver, chat, idle=False)


@settings(max_examples=int(os.environ.get("INTERLUDE_OPTIONS_EXAMPLES", "300")))
# Two back-offs found by this test: Retry-After 1e308 twice, and a 1e308 cap scaled by jitter.
@example(
    first=Options(retry=RetryPolicy(max_retry_after=math.inf)),
    opening=[("refuse", (503, BIG)), ("refuse", (503, BIG))],
    script=[("step", 1, [], "none")],
)
@example(
    first=Options(retry=RetryPolicy(base_delay=BIG, max_delay=BIG, jitter=1.0, jitter_seed=4)),
    opening=[("refuse", (503, None))],
    script=[("step", 1, [], "none")],
)
@given(
    first=options,
    opening=plans,
    script=st.lists(moves, min_size=1, max_size=15),
)
def test_any_valid_options_keep_the_chat_bounded_and_settled(
    first: Options, opening: list[tuple[str, Any]], script: list[tuple[str, Any, Any, str]]
) -> None:
    endpoint = Endpoint()
    driver = FakeDriver(ScriptedAgent(endpoint), resource_class=Counted)
    endpoint.driver = driver
    chat = driver.chat(first, local_tools={"lookup": lambda args: {"found": args}})
    assert isinstance(chat, Counted)
    endpoint.plans = list(opening)
    chat.send("start")
    check(driver, chat, idle=False)
    run_until_idle(driver, chat)

    for name, arg, answers_next, then in script:
        endpoint.plans[:0] = answers_next  # the next requests are answered so
        if name == "advance":
            if math.isfinite(driver.clock.now() + arg):
                driver.advance(arg)
        elif name == "step":
            for _ in range(arg):
                driver.step()
                check(driver, chat, idle=False)
        else:
            intent(chat, name, arg)
        check(driver, chat, idle=False)
        settle(driver, chat, then)

    run_until_idle(driver, chat)
    # Still usable: answer what is pending (or leave it on a fresh thread), send once more.
    endpoint.plans.clear()
    batch = chat.pending_interrupts
    if batch is not None and not chat.needs_new_thread and not batch.expired_ids(driver.now()):
        cancel_all = [{"interrupt_id": x.id, "status": "cancelled"} for x in batch.interrupts]
        chat.resume(batch.id, cancel_all)
        run_until_idle(driver, chat)
        assert chat.error is None and chat.pending_interrupts is None, chat.error
    if chat.needs_new_thread or chat.pending_interrupts is not None:
        chat.set_thread_id(f"{chat.thread_id}-next")
    sent = len(driver.requests)
    chat.send("again")
    run_until_idle(driver, chat)
    assert len(driver.requests) == sent + 1 and chat.error is None, chat.error


@settings(max_examples=int(os.environ.get("INTERLUDE_OPTIONS_EXAMPLES", "300")) * 2)
@given(
    policy=retry_policies,
    failed=st.one_of(
        st.integers(1, 5), st.sampled_from([1024, 1025, 1026, 2999]), st.integers(1, 10**9)
    ),
    draw=st.integers(0, 2**64),
    prefix=st.text(max_size=4),
)
def test_any_policy_waits_a_finite_time_by_its_formula(
    policy: RetryPolicy, failed: int, draw: int, prefix: str
) -> None:
    """``delay`` is ``min(max_delay, base_delay * multiplier**(n-1))`` times a factor in
    ``[1 - jitter, 1 + jitter]``, and never more than ``MAX_WAIT`` (docs/failures.md)."""
    waited = policy.delay(failed, draw, prefix)
    assert 0 <= waited <= MAX_WAIT, waited
    low, high = 1 - policy.jitter, 1 + policy.jitter
    if policy.base_delay == 0 or policy.max_delay == 0:
        assert waited == 0, f"{waited} s, but the formula gives 0"
        return
    # The formula's base in logarithms, which neither overflow nor underflow.
    grown = math.log(policy.base_delay) + (failed - 1) * math.log(policy.multiplier)
    cap = math.log(policy.max_delay)
    if grown > cap + 1e-6:  # capped
        base = policy.max_delay
    elif grown < cap - 1e-6:  # not capped: base_delay * multiplier**(n-1), however large n
        base = math.exp(grown)
    else:
        return  # too close to the cap for the logarithms to say which side
    least = min(base * low * (1 - 1e-3) - 1e-300, MAX_WAIT)
    most = min(base * high * (1 + 1e-3) + 1e-300, MAX_WAIT)
    assert least <= waited <= most, (
        f"{waited} s, but the formula gives {base} s times [{low}, {high}], at most {MAX_WAIT}"
    )
