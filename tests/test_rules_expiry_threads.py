"""Expiry (R-G1..R-G4, with R-F3's check before a send) and threads (R-H1..R-H3).

The fake clock moves only when a test advances it; every scenario runs on the
step-by-step fake driver against a scripted agent. A rejected intent must
raise its typed error and leave ``core_state`` exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from rule_support import (
    T0,
    RecordingDriver,
    ask,
    assert_paused,
    at,
    pause,
    paused_chat,
    rejected,
    step_until,
    succeed,
    user_texts,
)

from interlude.adapters.fake import (
    FakeClock,
    ScriptedAgent,
    drop,
    finished,
    interrupted,
    refuse,
    reply,
    run_error,
    started,
    state_snapshot,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core import inputs as i
from interlude.core import selectors
from interlude.core.commands import (
    AbortAttempt,
    CancelTimer,
    CancelTool,
    RunTool,
    StartAttempt,
    StartTimer,
)
from interlude.core.errors import (
    BatchExpiredError,
    InvalidResumeError,
    RecoveryRequiredError,
    StaleBatchError,
    TransportError,
)
from interlude.core.json import thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.reducer import step
from interlude.core.state import Batch
from interlude.core.wire.messages import ToolMessage

# -- helpers --------------------------------------------------------------------------


def entries(batch: Batch, cancel: Sequence[str] = ()) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it in batch.interrupts:
        if it.id in cancel:
            out.append({"interrupt_id": it.id, "status": "cancelled"})
        else:
            out.append({"interrupt_id": it.id, "status": "resolved", "payload": {"ok": True}})
    return out


def count_notifications(r: Resource) -> list[tuple[bool, Batch | None]]:
    seen: list[tuple[bool, Batch | None]] = []
    r.subscribe(lambda res: seen.append((res.is_expired, res.pending_interrupts)))
    return seen


# -- R-G1 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expires", [at(30), "2027-01-01T01:00:30+01:00", "2027-01-01T00:00:30.000Z"]
)
def test_R_G1_expired_exactly_at_expires_at(expires: str):
    """R-G1, R-B2: not expired a moment before; expired at the instant itself (whatever
    the zone or fraction spelling), and resume then raises BatchExpiredError naming it."""
    driver, chat, batch = paused_chat(ask("a", expires), ask("b"))
    driver.advance_to(T0 + 29.999)
    assert chat.is_expired is False
    driver.advance_to(T0 + 30)
    assert driver.now() == T0 + 30
    assert chat.is_expired is True
    assert_paused(chat, batch)
    err = rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))
    assert err.interrupt_ids == ("a",)
    driver.run_until_idle()
    assert len(driver.requests) == 1


def test_R_G1_resume_a_moment_before_expiry_is_accepted():
    """R-G1: ``now < expires_at`` is not expired: the claim and the send go through."""
    driver, chat, batch = paused_chat(ask("a", at(30)), replies=[succeed()])
    driver.advance_to(T0 + 29.999)
    chat.resume(batch.id, entries(batch))
    assert chat.is_resuming
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert driver.requests[1].resume == [
        {"interruptId": "a", "status": "resolved", "payload": {"ok": True}}
    ]
    assert (chat.pending_interrupts, chat.error, chat.is_resuming) == (None, None, False)


def test_R_G1_one_expired_interrupt_blocks_the_whole_batch():
    """R-G1: one expired interrupt among live ones blocks every answer of the batch."""
    driver, chat, batch = paused_chat(ask("a", at(100)), ask("b", at(10)), ask("c"))
    driver.advance(10)
    assert chat.is_expired
    err = rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))
    assert err.interrupt_ids == ("b",)
    assert "Start a new thread (set_thread_id)" in str(err) and "cancelled" not in str(err)
    assert str(err).startswith("interrupt 'b' has expired, so these answers cannot be sent.")
    assert_paused(chat, batch)
    driver.advance(90)
    err = rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))
    assert str(err).startswith("interrupts 'a', 'b' have expired, so these answers cannot")
    assert len(driver.requests) == 1


# -- R-G2 -------------------------------------------------------------------------------


def test_R_G2_expired_batch_stays_visible_and_the_way_on_is_a_new_thread():
    """R-G2, R-H1, R-H3: the expired batch stays pending (same object) and cannot be
    resumed, not even by cancelling (default policy); set_thread_id retires it and the
    next run is an ordinary one on the new thread."""
    driver, chat, batch = paused_chat(ask("a", at(30)), ask("b"), replies=[succeed()])
    old_thread = chat.thread_id
    driver.advance(31)
    assert chat.pending_interrupts is batch and chat.is_expired
    rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))
    rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch, cancel=["a"])))
    rejected(
        chat,
        BatchExpiredError,
        lambda: chat.resume(batch.id, entries(batch, cancel=["a", "b"])),
    )
    assert_paused(chat, batch)
    messages = list(chat.messages)

    chat.set_thread_id("thread-new")
    assert chat.pending_interrupts is None and chat.is_expired is False
    assert list(chat.messages) == messages
    rejected(chat, StaleBatchError, lambda: chat.resume(batch.id, entries(batch)))
    chat.send("start over")
    driver.run_until_idle()
    assert len(driver.requests) == 2
    new = driver.requests[1]
    assert new.thread_id == "thread-new" != old_thread
    assert new.resume is None
    assert (chat.is_loading, chat.error) == (False, None)


def cancel_expired_abc(a: float, b: float) -> tuple[Any, Resource, Batch]:
    """A chat paused on a (expiring at ``a`` s), b (at ``b`` s) and c (never), under the
    ``cancel_expired`` policy; the resume succeeds."""
    return paused_chat(
        ask("a", at(a)),
        ask("b", at(b)),
        ask("c"),
        replies=[succeed()],
        options=Options(expiry="cancel_expired"),
    )


def test_R_G2_cancel_expired_policy_accepts_only_cancelling_every_expired_interrupt():
    """R-G2, R-B1: with ``expiry="cancel_expired"`` a submission that cancels every expired
    interrupt is accepted and sent; one that resolves an expired interrupt is rejected."""
    driver, chat, batch = cancel_expired_abc(30, 60)
    driver.advance(45)  # a expired, b not yet
    err = rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))
    assert err.interrupt_ids == ("a",)
    assert "with status 'cancelled' for each expired interrupt" in str(err)  # the way on
    err = rejected(
        chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch, cancel=["b"]))
    )
    assert err.interrupt_ids == ("a",)
    assert_paused(chat, batch)

    chat.resume(batch.id, entries(batch, cancel=["a"]))
    assert chat.is_resuming and chat.is_loading
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert driver.requests[1].resume == [
        {"interruptId": "a", "status": "cancelled"},
        {"interruptId": "b", "status": "resolved", "payload": {"ok": True}},
        {"interruptId": "c", "status": "resolved", "payload": {"ok": True}},
    ]
    assert (chat.pending_interrupts, chat.error, chat.is_resuming) == (None, None, False)


@pytest.mark.parametrize(
    "mistake",
    [{"payload": None}, {"payload": {"ok": False}}, {"metadata": ["not", "an", "object"]}],
)
def test_R_B2_R_G2_a_malformed_entry_cancelling_an_expired_interrupt_is_an_entry_problem(
    mistake: dict[str, Any],
) -> None:
    """R-B2, R-G2: under ``cancel_expired`` an entry that cancels the expired interrupt
    but is malformed (a payload on a cancellation, metadata that is no object) is an
    entry problem, listed by InvalidResumeError. It is not BatchExpiredError, whose
    advice (cancel the expired interrupt) the submission already follows."""
    driver, chat, batch = paused_chat(
        ask("a", at(30)), ask("b"), replies=[succeed()], options=Options(expiry="cancel_expired")
    )
    driver.advance(45)  # a has expired
    answers = entries(batch, cancel=["a"])
    answers[0] = {**answers[0], **mistake}
    err = rejected(chat, InvalidResumeError, lambda: chat.resume(batch.id, answers))
    assert [p.interrupt_id for p in err.details] == ["a"]
    assert_paused(chat, batch)

    answers[0] = {"interrupt_id": "a", "status": "cancelled"}  # the problem fixed
    chat.resume(batch.id, answers)
    driver.run_until_idle()
    assert driver.requests[-1].resume == [
        {"interruptId": "a", "status": "cancelled"},
        {"interruptId": "b", "status": "resolved", "payload": {"ok": True}},
    ]


@pytest.mark.parametrize(
    ("claimed_under", "then"), [("cancel_expired", "block"), ("block", "cancel_expired")]
)
def test_R_F2_R_G2_a_claim_keeps_the_expiry_policy_it_was_accepted_under(claimed_under, then):
    """R-F2, R-F3: configure() changes later requests, not a claim already made. The
    check before the send applies the policy the claim was accepted under: a resume
    accepted with an expired interrupt cancelled is not withdrawn by switching to
    "block", and one accepted under "block" is not let through by the other way."""
    driver, chat, batch = paused_chat(
        ask("a", at(30)), ask("b"), replies=[succeed()], options=Options(expiry=claimed_under)
    )
    if claimed_under == "cancel_expired":
        driver.advance(45)  # a has expired: cancelling it is what the policy accepts
    chat.resume(batch.id, entries(batch, cancel=["a"]))
    chat.configure(attrs.evolve(chat.options, expiry=then))
    driver.advance(45 if claimed_under == "block" else 0)  # a expires before the send
    driver.run_until_idle()
    if claimed_under == "cancel_expired":
        assert len(driver.requests) == 2 and chat.error is None
        assert chat.pending_interrupts is None
    else:
        assert len(driver.requests) == 1 and isinstance(chat.error, BatchExpiredError)
        assert chat.pending_interrupts is batch


def test_R_G2_cancel_expired_policy_still_rejects_a_later_expired_resolution():
    """R-G2: under the opt-in policy, once b expires too, cancelling only a is rejected."""
    driver, chat, batch = paused_chat(
        ask("a", at(30)), ask("b", at(60)), options=Options(expiry="cancel_expired")
    )
    driver.advance(60)
    err = rejected(
        chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch, cancel=["a"]))
    )
    assert err.interrupt_ids == ("b",)
    assert len(driver.requests) == 1


# -- R-G3 -------------------------------------------------------------------------------


def test_R_G3_a_timer_for_the_earliest_expiry_tells_observers_the_moment_it_expires():
    """R-G3, R-A1: publishing the batch schedules one timer, for the earliest expires_at;
    when the clock reaches it observers are notified and see is_expired, with no other
    input."""
    agent = ScriptedAgent(succeed()).then(
        pause(ask("late", at(90)), ask("soon", at(30)), ask("mid", at(60)), ask("none"))
    )
    driver = RecordingDriver(agent)
    chat = driver.chat()
    chat.send("hello")
    step_until(driver, lambda: chat.core_state.run is not None and len(driver.requests) == 1)
    assert driver.pending_timers() == []
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    assert driver.pending_timers() == [(T0 + 30, "expiry")]
    assert [c.due for c in driver.of(StartTimer)] == [T0 + 30]

    seen = count_notifications(chat)
    driver.advance(29)
    assert seen == [] and chat.is_expired is False
    driver.advance(1)
    assert seen == [(True, batch)]
    assert driver.pending_timers() == []
    assert_paused(chat, batch)
    assert len(driver.requests) == 1


def test_R_G3_under_cancel_expired_observers_are_told_of_each_expiry():
    """R-G3, R-G2: under ``cancel_expired`` what may be submitted changes at every expiry
    (each expired interrupt must be cancelled), so each one notifies observers, not only
    the first; the default policy keeps the one timer (the batch is expired for good)."""
    driver, chat, batch = cancel_expired_abc(10, 20)
    seen = count_notifications(chat)
    driver.advance(10)
    assert len(seen) == 1 and batch.expired_ids(T0 + 10) == ("a",)
    assert driver.pending_timers() == [(T0 + 20, "expiry")]
    driver.advance(10)
    assert len(seen) == 2 and driver.pending_timers() == []
    assert_paused(chat, batch)
    # What the second notification tells: "b" must now be cancelled too.
    err = rejected(
        chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch, cancel=["a"]))
    )
    assert err.interrupt_ids == ("b",)
    chat.resume(batch.id, entries(batch, cancel=["a", "b"]))
    driver.run_until_idle()
    assert chat.error is None and chat.pending_interrupts is None


class _Walked(tuple):  # type: ignore[type-arg]
    """A batch's interrupts that count the walks through them."""

    walks = 0

    def __iter__(self) -> Any:
        _Walked.walks += 1
        return super().__iter__()


def test_R_G3_each_expiry_finds_the_next_without_a_walk_of_the_batch():
    """R-G3, R-G1: under ``cancel_expired`` every expiry schedules the next, and
    observers read ``is_expired`` at each: both come from the expiry times sorted when
    the batch was published, not from a walk of every interrupt per expiry (a batch of
    N interrupts expiring one by one would cost O(N^2))."""
    interrupts = [ask(f"q{n}", at(10 + n)) for n in range(20)]
    _, chat, batch = paused_chat(*interrupts, options=Options(expiry="cancel_expired"))
    s = attrs.evolve(chat.core_state, batch=Batch(batch.id, _Walked(batch.interrupts)))
    _Walked.walks = 0
    due, told = T0 + 10, 0
    while s.expiry_timer is not None:
        t = step(s, i.TimerFired(s.expiry_timer), due)
        s, told = t.state, told + 1
        assert selectors.is_expired(s, due)
        due = next((c.due for c in t.commands if isinstance(c, StartTimer)), due)
    assert told == 20 and _Walked.walks == 0
    assert s.batch is not None and len(s.batch.expired_ids(due)) == 20

    driver, chat, batch = paused_chat(ask("a", at(10)), ask("b", at(20)), replies=[succeed()])
    driver.advance(10)
    assert driver.pending_timers() == []


def test_R_G3_the_expiry_timer_is_cancelled_by_the_matching_run_started():
    """R-G3, R-C3: the timer lives while the claim waits, and goes at the resume's
    matching RUN_STARTED; passing the old expiry later changes nothing."""
    driver, chat, batch = paused_chat(ask("a", at(30)), replies=[succeed(hold=True)])
    chat.resume(batch.id, entries(batch))
    assert driver.step()  # sent, held
    assert driver.pending_timers() == [(T0 + 30, "expiry")]
    driver.release(1)
    assert driver.step()  # matching RUN_STARTED
    assert chat.pending_interrupts is None
    assert driver.pending_timers() == []
    timer = driver.of(StartTimer)[0].timer
    assert CancelTimer(timer) in driver.commands

    seen = count_notifications(chat)
    before = chat.core_state
    driver.advance(60)
    assert seen == [] and chat.core_state == before
    chat.apply(i.TimerFired(timer))  # even if a driver delivered it late
    assert chat.core_state == before
    driver.release(100)
    driver.run_until_idle()
    assert (chat.is_resuming, chat.error, chat.is_expired) == (False, None, False)


def test_R_G3_the_expiry_timer_is_cancelled_by_a_thread_change():
    """R-G3, R-H1: a thread change cancels the expiry timer; a late firing is ignored."""
    driver, chat, _ = paused_chat(ask("a", at(30)))
    timer = driver.of(StartTimer)[0].timer
    chat.set_thread_id("elsewhere")
    assert driver.pending_timers() == []
    assert CancelTimer(timer) in driver.commands
    seen = count_notifications(chat)
    before = chat.core_state
    driver.advance(60)
    chat.apply(i.TimerFired(timer))
    assert seen == [] and chat.core_state == before
    assert chat.is_expired is False


# -- R-G4 -------------------------------------------------------------------------------


def test_R_G4_time_moves_only_when_the_test_advances_it():
    """R-G4: stepping and running until idle never move the clock past an expiry; only
    advance does."""
    driver, chat, _ = paused_chat(ask("a", at(30)))
    for _ in range(3):
        driver.run_until_idle()
        driver.step()
    assert driver.now() == T0
    assert chat.is_expired is False
    driver.advance(30)
    assert driver.now() == T0 + 30 and chat.is_expired is True


def test_R_G4_the_clock_is_an_input_not_the_wall_clock():
    """R-G4: the reducer takes ``now`` as an argument: the same state and resume are
    accepted before expires_at and rejected at it; and a resource on a fake clock set in
    2000 is not expired by an interrupt of 2000 that the wall clock has long passed."""
    _, chat, batch = paused_chat(ask("a", at(30)))
    s = chat.core_state
    intent = i.Resume(batch.id, entries(batch))
    first = step(s, intent, T0 + 29)
    assert first == step(s, intent, T0 + 29)  # same inputs, same outputs
    assert first.state.claim is not None
    assert [type(c) for c in first.commands] == [StartAttempt]
    with pytest.raises(BatchExpiredError):
        step(s, intent, T0 + 30)
    assert chat.core_state is s

    y2000 = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
    old_driver, old_chat, old_batch = paused_chat(
        ask("a", "2000-01-01T00:01:00Z"), replies=[succeed()], clock=FakeClock(y2000)
    )
    assert old_chat.is_expired is False
    old_chat.resume(old_batch.id, entries(old_batch))
    old_driver.run_until_idle()
    assert len(old_driver.requests) == 2 and old_chat.error is None


# -- R-F3 with R-G: expiry found just before a send --------------------------------------


def test_R_F3_R_G1_expiry_found_just_before_the_send_sends_nothing():
    """R-F3, R-G1, R-G3, R-F4: the claim was made in time, but the clock passes
    expires_at before the driver sends: nothing is sent, the claim is released, the same
    batch stays visible and ``error`` is BatchExpiredError."""
    driver, chat, batch = paused_chat(ask("a", at(30)), ask("b"), replies=[succeed()])
    driver.advance(10)
    chat.resume(batch.id, entries(batch))
    assert (chat.is_loading, chat.is_resuming) == (True, True)
    driver.advance(20)  # the expiry timer fires while the claim waits
    assert chat.pending_interrupts is batch and chat.is_expired
    driver.run_until_idle()
    assert len(driver.requests) == 1  # the resume never went out
    assert chat.pending_interrupts is batch
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    assert isinstance(chat.error, BatchExpiredError)
    assert chat.error.interrupt_ids == ("a",)
    assert not driver.step()
    rejected(chat, BatchExpiredError, lambda: chat.resume(batch.id, entries(batch)))


def test_R_F3_R_G1_expiry_found_before_a_retry_sends_nothing():
    """R-F3, R-F1: expiry is checked before every send, retries included."""
    driver, chat, batch = paused_chat(
        ask("a", at(30)),
        replies=[refuse(503), succeed()],
        options=Options(retry=RetryPolicy(jitter=0, base_delay=1.0, max_attempts=3)),
    )
    driver.advance(29.5)
    chat.resume(batch.id, entries(batch))
    assert driver.step()  # the first attempt is refused: retry due at +30.5
    assert len(driver.requests) == 2
    assert chat.pending_interrupts is batch and chat.is_resuming
    driver.run_until_idle()  # jumps to the retry, past the expiry
    assert len(driver.requests) == 2
    assert chat.pending_interrupts is batch
    assert (chat.is_loading, chat.is_resuming) == (False, False)
    assert isinstance(chat.error, BatchExpiredError)
    assert chat.error.interrupt_ids == ("a",)
    # The expiry timer released the claim in the back-off, after one attempt went out.
    assert str(chat.error).startswith(
        "interrupt 'a' expired before the resume could be retried; it was not retried."
    )


CANCELLING_SLOW_RETRY = Options(
    expiry="cancel_expired", retry=RetryPolicy(jitter=0, base_delay=100, max_delay=100)
)
"""The cancel_expired policy, and a retry 100 s after a refused attempt."""


def test_R_F3_R_G2_a_claim_in_back_off_is_released_when_an_interrupt_it_resolves_expires():
    """R-G2's cancel_expired policy, R-G3: the claim cancels 'a' (expired) and resolves
    'b' (expires at 50 s); its first attempt is refused, the retry is due at 106 s. The
    batch's timer covered only the earliest expiry ('a'), so the claim stayed held,
    loading and resuming, until the retry's timer; it is released when 'b' expires."""
    driver, chat, batch = paused_chat(
        ask("a", at(5)),
        ask("b", at(50)),
        replies=[refuse(503), succeed()],
        options=CANCELLING_SLOW_RETRY,
    )
    driver.advance(6)
    chat.resume(batch.id, entries(batch, cancel=["a"]))
    assert driver.step()  # the first attempt is refused: retry due at 106 s
    assert chat.is_resuming and len(driver.requests) == 2
    released_when_b_expires(driver, chat, batch, sent=2)


def released_when_b_expires(driver: Any, chat: Resource, batch: Batch, *, sent: int) -> None:
    """At 50 s 'b' expires: the claim waiting out its back-off is released at once with
    BatchExpiredError naming 'b', the batch stays, and the retry never goes out (R-F3)."""
    driver.advance(44)
    assert (chat.is_loading, chat.is_resuming) == (False, False)
    assert chat.pending_interrupts is batch
    assert isinstance(chat.error, BatchExpiredError) and chat.error.interrupt_ids == ("b",)
    driver.run_until_idle()
    assert len(driver.requests) == sent


def test_R_F3_R_G2_a_claim_in_back_off_is_watched_past_an_expiry_it_cancels():
    """R-G2's cancel_expired policy, R-G3: the claim cancels 'a' (expires at 5 s) and
    'x' (30 s), and resolves 'b' (50 s) and 'c' (80 s); its first attempt is refused,
    the retry is due at 101 s. The batch's timer fires for 'a', which does not block the
    claim: the next expiry that would, 'b''s (not the cancelled 'x''s, not the latest),
    gets a timer of its own, and the claim is released the moment 'b' expires."""
    driver, chat, batch = paused_chat(
        ask("a", at(5)),
        ask("x", at(30)),
        ask("b", at(50)),
        ask("c", at(80)),
        replies=[refuse(503), succeed()],
        options=CANCELLING_SLOW_RETRY,
    )
    driver.advance(1)
    chat.resume(batch.id, entries(batch, cancel=["a", "x"]))
    assert driver.step()  # the first attempt is refused: retry due at 101 s
    assert chat.is_resuming and len(driver.requests) == 2
    driver.advance(4)  # 5 s: 'a' expires, cancelled by the claim
    assert chat.is_resuming
    assert driver.pending_timers() == [(T0 + 50, "expiry"), (T0 + 101, "retry")]
    driver.advance(45)  # 50 s: 'b' expires
    assert (chat.is_loading, chat.is_resuming) == (False, False)
    assert chat.pending_interrupts is batch
    assert isinstance(chat.error, BatchExpiredError) and chat.error.interrupt_ids == ("b",)
    driver.run_until_idle()
    assert len(driver.requests) == 2  # the retry never went out


def test_R_F3_R_G2_a_claim_in_back_off_is_not_watched_by_an_earlier_claims_timer():
    """R-G2's cancel_expired policy, R-G3, R-F4: a first claim cancels 'a' and 'b' and
    resolves 'c' (80 s); refused, it waits with a timer for 'c'. It is stopped, and the
    same batch is submitted again resolving 'b' (50 s). Refused too, this claim must be
    released when 'b' expires, not at the first claim's timer for 'c' (it stayed
    loading and resuming until 80 s, its answers unsendable)."""
    driver, chat, batch = paused_chat(
        ask("a", at(5)),
        ask("b", at(50)),
        ask("c", at(80)),
        replies=[refuse(503), refuse(503), succeed()],
        options=CANCELLING_SLOW_RETRY,
    )
    driver.advance(6)  # 'a' has expired
    chat.resume(batch.id, entries(batch, cancel=["a", "b"]))
    assert driver.step()  # refused: the claim waits, watched until 'c' expires
    chat.stop()  # R-F4: the claim is released and the batch can be submitted again
    chat.resume(batch.id, entries(batch, cancel=["a"]))
    assert driver.step()  # refused: the retry is due at 106 s
    assert chat.is_resuming and len(driver.requests) == 3
    assert (T0 + 50, "expiry") in driver.pending_timers()
    released_when_b_expires(driver, chat, batch, sent=3)


# -- R-H1 -------------------------------------------------------------------------------


def test_R_H1_a_generated_thread_id_is_reused_across_retries_and_runs():
    """R-H1, R-F2: a thread id generated once, then used by every attempt and run."""
    agent = ScriptedAgent(succeed()).then(refuse(503), pause(), succeed(), succeed())
    driver = RecordingDriver(agent)
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0)))
    assert chat.thread_id is None
    chat.send("hello")
    tid = chat.thread_id
    assert tid
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, entries(batch))
    driver.run_until_idle()
    chat.send("again")
    driver.run_until_idle()
    assert len(driver.requests) == 4
    assert [r.thread_id for r in driver.requests] == [tid] * 4
    assert len({r.run_id for r in driver.requests}) == 4
    assert chat.thread_id == tid


def test_R_H1_a_configured_thread_id_is_used_as_is():
    """R-H1: a configured thread id is the one every request carries."""
    driver, chat, batch = paused_chat(thread_id="t-config", replies=[succeed()])
    chat.resume(batch.id, entries(batch))
    driver.run_until_idle()
    assert [r.thread_id for r in driver.requests] == ["t-config", "t-config"]


def test_R_H1_a_different_thread_retires_the_batch_and_keeps_the_checkpoint():
    """R-H1, R-B2: the old batch id becomes stale; committed messages and state stay."""
    driver, chat, batch = paused_chat(ask("a"), before=[state_snapshot({"cart": [1, 2]})])
    messages = list(chat.messages)
    chat.set_thread_id("t-2")
    assert chat.thread_id == "t-2"
    assert chat.pending_interrupts is None
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    assert list(chat.messages) == messages
    assert thaw(chat.state) == {"cart": [1, 2]}
    err = rejected(chat, StaleBatchError, lambda: chat.resume(batch.id, entries(batch)))
    assert batch.id in str(err)
    driver.run_until_idle()
    assert len(driver.requests) == 1


@pytest.mark.parametrize("sent", [False, True])
def test_R_H1_a_thread_change_releases_a_claim(sent: bool):
    """R-H1, R-H3: a claim (sent or not) is released with its batch; the resume is
    never (re)sent, and its late events are ignored."""
    driver, chat, batch = paused_chat(replies=[succeed(hold=True)])
    chat.resume(batch.id, entries(batch))
    if sent:
        assert driver.step()
    chat.set_thread_id("t-2")
    assert chat.pending_interrupts is None
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    rejected(chat, StaleBatchError, lambda: chat.resume(batch.id, entries(batch)))
    driver.release(100)
    driver.run_until_idle()
    assert len(driver.requests) == (2 if sent else 1)
    if sent:
        old = driver.requests[1]
        assert AbortAttempt(old.attempt) in driver.commands
        before = chat.core_state
        for event in (started(old), *text("late", "late"), finished(old)):
            chat.apply(i.FrameReceived(old.attempt, json.dumps(event)))
        assert chat.core_state == before
        assert chat.pending_interrupts is None and chat.messages[-1].content == "need approval"


def test_R_H1_a_thread_change_cancels_running_local_tools_and_ignores_their_results():
    """R-H1, R-F6: unfinished local tools are cancelled (never run), finished results are
    kept, no follow-up starts and a late result of the old thread changes nothing. The
    cancelled call gets a tool message saying so, so the history the new thread starts
    from has a result for every call (model APIs refuse a call left without one)."""
    ran: list[Any] = []
    agent = ScriptedAgent(succeed()).then(
        succeed(*tool_call("c-1", "calc", {"n": 1}), *tool_call("c-2", "calc", {"n": 2}))
    )
    driver = RecordingDriver(agent)
    chat = driver.chat(local_tools={"calc": lambda a: ran.append(a["n"]) or f"r{a['n']}"})
    chat.send("go")
    step_until(driver, lambda: ran == [1])
    assert chat.is_loading
    tasks = [c.task for c in driver.of(RunTool)]
    assert len(tasks) == 2

    chat.set_thread_id("t-2")
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    assert CancelTool(tasks[1]) in driver.commands
    driver.run_until_idle()
    assert ran == [1]  # the second tool never ran
    assert len(driver.requests) == 1  # and no follow-up
    results = [(m.tool_call_id, m.content) for m in chat.messages if isinstance(m, ToolMessage)]
    assert results == [
        ("c-1", "r1"),
        (
            "c-2",
            "Error: cancelled: the thread changed before the tool returned "
            "(it may have run in part, or not at all)",
        ),
    ]
    before = chat.core_state
    chat.apply(i.ToolFinished(tasks[1], value="late"))
    assert chat.core_state == before
    chat.send("again")
    driver.run_until_idle()
    sent = driver.requests[-1]
    assert sent.thread_id == "t-2"
    assert [m["toolCallId"] for m in sent.json["messages"] if m["role"] == "tool"] == [
        "c-1",
        "c-2",
    ]


def test_R_H1_late_events_of_the_old_thread_are_ignored():
    """R-H1, R-J3: after a thread change, a late RUN_ERROR on the old (still open) stream,
    its end and its failure all leave the state as it is (on the same thread a late
    RUN_ERROR would be surfaced)."""
    agent = ScriptedAgent(succeed()).then(
        lambda req: reply(started(req), interrupted(req, ask()), run_error("late"), hold=True),
    )
    driver = RecordingDriver(agent)
    chat = driver.chat()
    chat.send("hello")
    assert driver.step()
    driver.release(2)
    step_until(driver, lambda: chat.pending_interrupts is not None)
    old = driver.requests[0]
    assert old.attempt in chat.core_state.lingering  # the stream is still open
    chat.set_thread_id("t-2")
    assert AbortAttempt(old.attempt) in driver.commands
    before = chat.core_state
    chat.apply(i.FrameReceived(old.attempt, json.dumps(run_error("late", "X"))))
    chat.apply(i.StreamEnded(old.attempt))
    chat.apply(i.AttemptFailed(old.attempt, TransportError("gone", retryable=True)))
    assert chat.core_state == before
    assert chat.error is None
    driver.release(100)
    driver.run_until_idle()
    assert chat.core_state == before


def test_R_H1_a_retry_wait_of_the_old_thread_is_forgotten():
    """R-H1: a retry timer of the old thread is cancelled and a late firing does nothing."""
    agent = ScriptedAgent(succeed()).then(refuse(503))
    driver = RecordingDriver(agent)
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0)))
    chat.send("hello")
    assert driver.step()
    (retry,) = driver.of(StartTimer)
    assert retry.purpose == "retry"
    chat.set_thread_id("t-2")
    assert CancelTimer(retry.timer) in driver.commands
    assert driver.pending_timers() == []
    before = chat.core_state
    chat.apply(i.TimerFired(retry.timer))
    driver.advance(60)
    driver.run_until_idle()
    assert chat.core_state == before
    assert len(driver.requests) == 1 and not chat.is_loading


@pytest.mark.parametrize("how", ["drop_after_ack", "stop_after_ack"])
def test_R_H1_a_thread_change_clears_recovery_and_keeps_committed_work(how: str):
    """R-H1, R-F5, R-F6: recovery ends with a different thread id; committed messages and
    state are kept and sent by the next run, which carries no resume."""
    resumed = {
        "drop_after_ack": lambda req: drop(started(req), *text("x", "partial")),
        "stop_after_ack": succeed(hold=True),
    }[how]
    driver, chat, batch = paused_chat(
        replies=[resumed, succeed()], before=[state_snapshot({"k": "v"})]
    )
    chat.resume(batch.id, entries(batch))
    if how == "stop_after_ack":
        assert driver.step()
        driver.release(1)
        assert driver.step()
        chat.stop()
    driver.run_until_idle()
    assert chat.needs_new_thread
    committed = list(chat.messages)
    rejected(chat, RecoveryRequiredError, lambda: chat.send("x"))

    chat.set_thread_id("t-fresh")
    assert (chat.needs_new_thread, chat.error, chat.pending_interrupts) == (False, None, None)
    assert list(chat.messages) == committed
    assert thaw(chat.state) == {"k": "v"}
    chat.send("next")
    driver.run_until_idle()
    new = driver.requests[-1]
    assert new.thread_id == "t-fresh" and new.resume is None
    assert user_texts(new) == ["hello", "next"]
    assert new.json["state"] == {"k": "v"}


def test_R_H1_clearing_a_concrete_thread_id_generates_a_new_one():
    """R-H1: set_thread_id(None) after a concrete id moves to a new generated id."""
    driver, chat, batch = paused_chat(thread_id="t-1", replies=[succeed()])
    chat.set_thread_id(None)
    new_id = chat.thread_id
    assert new_id and new_id != "t-1"
    assert chat.pending_interrupts is None
    rejected(chat, StaleBatchError, lambda: chat.resume(batch.id, entries(batch)))
    chat.send("again")
    driver.run_until_idle()
    assert driver.requests[-1].thread_id == new_id
    assert driver.requests[-1].resume is None


def test_R_H1_a_generated_thread_id_is_never_the_one_given():
    """R-H1: clearing a concrete thread id generates a *new* id, even when the given
    one (saved from an earlier runtime, or set by hand) is spelt under the id prefix:
    a "new" thread that is the old one would resume the old workflow on the server."""
    for given in ("interlude-thread-1", "interlude-thread-7"):
        driver = RecordingDriver(ScriptedAgent(succeed()))
        chat = driver.chat(thread_id=given)
        for n in range(8):  # the counter passes the given id's number on the way
            chat.set_thread_id(None)
            assert chat.thread_id != given, n
            chat.set_thread_id(given)
        chat.set_thread_id(None)
        generated = chat.thread_id
        chat.configure(Options(id_prefix="p"))
        chat.set_thread_id("p-thread-9")
        chat.set_thread_id(None)
        assert chat.thread_id not in (given, generated, "p-thread-9")


def test_R_H1_a_thread_id_set_before_the_first_run_is_the_one_used():
    """R-H1: a resource created without a thread id has none until its first run; one
    set before that run is configured, and the run uses it (none is generated)."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    assert chat.thread_id is None
    chat.set_thread_id("mine")
    assert chat.thread_id == "mine"
    chat.send("hello")
    driver.run_until_idle()
    assert driver.requests[-1].thread_id == "mine"


# -- R-H2 -------------------------------------------------------------------------------


def _scenario(kind: str) -> tuple[RecordingDriver, Resource, Batch | None, list[Any]]:
    ran: list[Any] = []
    tools = {"calc": lambda a: ran.append(a) or "ok"}
    if kind == "tools":
        agent = ScriptedAgent(succeed()).then(succeed(*tool_call("c-1", "calc", {"n": 1})))
        driver = RecordingDriver(agent)
        chat = driver.chat(local_tools=tools)
        chat.send("go")
        step_until(driver, lambda: chat.core_state.tools is not None)
        return driver, chat, None, ran
    resumed = (lambda req: drop(started(req))) if kind == "recovery" else succeed(hold=True)
    driver, chat, batch = paused_chat(ask("a", at(30)), replies=[resumed, succeed()])
    if kind in ("claimed", "recovery"):
        chat.resume(batch.id, entries(batch))
    if kind == "recovery":
        driver.run_until_idle()
        assert chat.needs_new_thread
    return driver, chat, batch, ran


@pytest.mark.parametrize("kind", ["paused", "claimed", "recovery", "tools"])
def test_R_H2_setting_the_same_thread_id_changes_nothing(kind: str):
    """R-H2: the same id keeps a pause, a claim, a recovery requirement and running
    tools exactly as they were, and emits no command."""
    driver, chat, batch, ran = _scenario(kind)
    before = chat.core_state
    n = len(driver.commands)
    chat.set_thread_id(chat.thread_id)
    assert chat.core_state == before
    assert len(driver.commands) == n
    expiry_live = kind in ("paused", "claimed")  # the resume's RUN_STARTED cancelled it
    assert driver.pending_timers() == ([(T0 + 30, "expiry")] if expiry_live else [])

    if kind == "paused":
        assert batch is not None
        assert_paused(chat, batch)
        chat.resume(batch.id, entries(batch))
        driver.run_until_idle()
        assert driver.requests[-1].resume is not None
    elif kind == "claimed":
        assert chat.pending_interrupts is batch and chat.is_resuming
        driver.run_until_idle()
        assert len(driver.requests) == 2 and driver.requests[1].resume is not None
    elif kind == "recovery":
        assert chat.needs_new_thread
        rejected(chat, RecoveryRequiredError, lambda: chat.send("x"))
    else:
        driver.run_until_idle()
        assert ran == [{"n": 1}]
        assert len(driver.requests) == 2
        assert driver.requests[1].thread_id == driver.requests[0].thread_id


# -- R-H3 -------------------------------------------------------------------------------


def test_R_H3_a_thread_change_sends_nothing_and_closes_the_old_stream():
    """R-H3, R-H1: no request goes out (no cancel), the old stream is closed and what it
    streamed is dropped; the next run uses the new id and carries no resume."""
    agent = ScriptedAgent(succeed()).then(succeed(hold=True))
    driver = RecordingDriver(agent)
    chat = driver.chat(thread_id="t-1")
    chat.send("hello")
    assert driver.step()
    driver.release(3)
    for _ in range(3):
        assert driver.step()
    assert chat.messages[-1].content.startswith("done")
    old = driver.requests[0]

    chat.set_thread_id("t-2")
    assert driver.of(AbortAttempt) == [AbortAttempt(old.attempt)]
    assert not chat.is_loading
    assert [m.role for m in chat.messages] == ["user"]
    driver.release(100)
    driver.run_until_idle()
    assert len(driver.requests) == 1
    assert [m.role for m in chat.messages] == ["user"]

    chat.send("again")
    driver.run_until_idle()
    new = driver.requests[1]
    assert new.thread_id == "t-2" and new.resume is None and "resume" not in new.json
    assert user_texts(new) == ["hello", "again"]


def test_R_H3_after_a_claimed_batch_the_next_thread_run_carries_no_resume():
    """R-H3: a claim retired by a thread change is never sent; the next run is ordinary."""
    driver, chat, batch = paused_chat(thread_id="t-1")
    chat.resume(batch.id, entries(batch))
    chat.set_thread_id("t-2")
    driver.run_until_idle()
    assert len(driver.requests) == 1
    chat.send("new topic")
    driver.run_until_idle()
    assert len(driver.requests) == 2
    new = driver.requests[1]
    assert new.thread_id == "t-2"
    assert new.resume is None and "resume" not in new.json
    assert all(r.resume is None for r in driver.requests)
