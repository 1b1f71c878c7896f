"""The fake driver and its scripts as a test author uses them: what docs/testing.md,
reference.md and the docstrings of ``interlude.adapters.fake`` promise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rule_support import ask, at

from interlude.adapters.fake import (
    FAKE_EPOCH,
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    held,
    interrupted,
    refuse,
    reply,
    run_error,
    started,
    text,
    tool_call,
)
from interlude.core import BatchExpiredError, Options, ProtocolError, RetryPolicy, RunError
from interlude.core.json import MAX_INT_DIGITS, frozen_unchecked


def _hello(req: Request) -> Any:
    return reply(started(req), *text("a1", "Hello."), finished(req))


# -- the scripted agent ----------------------------------------------------------------------


def test_a_scripted_agent_answers_from_its_queue_first_then_says_it_has_no_answer() -> None:
    """reference.md: ``then(*replies)`` queues answers used before ``handler``; without an
    answer for a request it raises ``AssertionError`` naming the request (a test failure,
    not a crash of the driver's own code). Every request is kept, the unanswered one too."""
    agent = ScriptedAgent()
    assert agent.then(_hello) is agent  # chains
    driver = FakeDriver(agent)
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert chat.messages[-1].content == "Hello."
    chat.send("again")
    with pytest.raises(AssertionError, match=r"no answer for request 2 \(run .*then\(\)"):
        driver.run_until_idle()
    assert [r.json["messages"][-1]["content"] for r in driver.requests] == ["hi", "again"]


# -- run_until_idle(max_steps=...) ------------------------------------------------------


def test_run_until_idle_takes_max_steps_steps_then_says_the_script_loops() -> None:
    """reference.md: ``run_until_idle`` raises ``AssertionError`` after ``max_steps``:
    it has taken that many steps and not one more, as many ``step()`` calls would."""
    stepped, run = FakeDriver(ScriptedAgent(_hello)), FakeDriver(ScriptedAgent(_hello))
    by_step, by_run = stepped.chat(), run.chat()
    by_step.send("hi")
    by_run.send("hi")
    for _ in range(4):  # the request, RUN_STARTED, TEXT_MESSAGE_START, the delta
        assert stepped.step()
    with pytest.raises(AssertionError, match=r"not idle after 4 steps: is the script looping"):
        run.run_until_idle(max_steps=4)
    assert by_run.core_state == by_step.core_state
    assert by_run.messages[-1].content == "Hello." and by_run.is_loading


def test_run_until_idle_returns_when_idle_after_exactly_max_steps() -> None:
    """run_until_idle steps "until nothing is ready" and "returns the steps taken";
    its AssertionError says the driver is "not idle after N steps". A script that is
    idle after exactly ``max_steps`` steps returns that count (it used to raise)."""
    probe = FakeDriver(ScriptedAgent(_hello))
    probe.chat().send("hi")
    needed = probe.run_until_idle()
    driver = FakeDriver(ScriptedAgent(_hello))
    chat = driver.chat()
    chat.send("hi")
    assert driver.run_until_idle(max_steps=needed) == needed
    assert not chat.is_loading and chat.messages[-1].content == "Hello."


def _looking(req: Request) -> Any:
    return reply(started(req), *tool_call(req.run_id, "look", {}), finished(req))


def _at(case: str) -> FakeDriver:
    """A driver stopped at the point ``case`` names, its next step ready or not."""
    scripts: dict[str, Any] = {
        "held": lambda req: held(started(req)),
        "tool": _looking,
        "refused": lambda req: refuse(503),
    }
    driver = FakeDriver(ScriptedAgent(scripts.get(case.split(":")[0], _hello)))
    chat = driver.chat(
        Options(retry=RetryPolicy(max_attempts=3, jitter=0, base_delay=5.0)),
        local_tools={"look": lambda arguments: "seen"},
    )
    chat.send("go")
    steps = {"send": 0, "stream": 1, "held": 1, "tool": 0, "refused": 1}[case.split(":")[0]]
    for _ in range(steps):
        assert driver.step()
    if case.startswith("tool"):
        while chat.core_state.tools is None and driver.step():
            pass
        assert driver.step()  # the stream's end: the tool is all that is queued
    for then in case.split(":")[1:]:
        if then == "stopped":
            chat.stop()
        elif then == "released":
            driver.release(1)
        elif then == "moved":
            driver.clock.set(driver.clock.now() + 60.0)  # past the retry, without firing it
        elif then == "due":
            driver.clock.set(driver.pending_timers()[0][0])  # at the retry's very time
        else:
            assert then == "thread"
            chat.set_thread_id(None)
    return driver


@pytest.mark.parametrize(
    ("case", "follow_retries", "ready"),
    [
        ("send", True, True),
        ("send:stopped", True, False),  # aborted before its turn
        ("stream", True, True),
        ("stream:stopped", True, False),  # its next event is never delivered
        ("held", True, False),  # parked until release()
        ("held:released", True, True),
        ("tool", True, True),
        ("tool:thread", True, False),  # cancelled before it runs
        ("refused", True, True),  # the clock would move to the retry
        ("refused", False, False),  # ...but not without follow_retries
        ("refused:moved", False, True),  # a timer due now fires either way
        ("refused:due", False, True),
        ("refused:stopped", True, False),
        ("refused:stopped:moved", True, False),  # a cancelled timer, due or not
    ],
)
def test_run_until_idle_out_of_steps_raises_only_when_a_step_more_is_ready(
    case: str, follow_retries: bool, ready: bool
) -> None:
    """reference.md: ``run_until_idle`` raises when ``max_steps`` steps are taken and a
    step more is ready, and returns the count when none is: queued work that was stopped,
    cancelled or parked is not a step, nor is a retry the caller does not follow."""
    driver = _at(case)
    pending = driver.pending_timers()
    if ready:
        with pytest.raises(AssertionError, match="not idle after 0 steps"):
            driver.run_until_idle(max_steps=0, follow_retries=follow_retries)
    else:
        assert driver.run_until_idle(max_steps=0, follow_retries=follow_retries) == 0
    assert driver.pending_timers() == pending  # that step is not taken either way


def test_run_until_idle_counts_each_retry_it_waits_for_as_one_step() -> None:
    """reference.md: it returns the steps taken, moving the clock to a pending retry when
    nothing else is ready: that move (the retry timer firing) is one step, as it is for a
    test that steps and advances the clock to the retry itself."""

    def script() -> ScriptedAgent:
        return ScriptedAgent(_hello).then(refuse(503), refuse(503))

    options = Options(retry=RetryPolicy(max_attempts=3, jitter=0))
    stepped, run = FakeDriver(script()), FakeDriver(script())
    stepped.chat(options).send("hi")
    chat = run.chat(options)
    chat.send("hi")
    steps = 0
    while True:
        while stepped.step():
            steps += 1
        if not stepped.pending_timers():
            break
        ((due, purpose),) = stepped.pending_timers()
        assert purpose == "retry"
        stepped.advance_to(due)  # fires the retry: one step
        steps += 1
    assert steps == 11  # three sends, two retries, five events and the stream's end
    assert run.run_until_idle() == steps
    assert chat.messages[-1].content == "Hello." and len(run.requests) == 3


# -- the clock: advance, advance_to ------------------------------------------------------


def _asks(expires: str) -> Any:
    return lambda req: reply(started(req), interrupted(req, ask("q", expires)))


def test_advance_moves_the_clock_with_no_timer_to_fire() -> None:
    """``advance(seconds)`` moves the clock that far even when no timer falls due, and
    ``advance_to(when)`` to that time; the fake clock never goes backwards."""
    driver = FakeDriver()
    driver.advance(12.5)
    assert driver.clock.now() == FAKE_EPOCH + 12.5 == driver.now()
    driver.advance_to(FAKE_EPOCH + 20)
    assert driver.clock.now() == FAKE_EPOCH + 20
    driver.advance(0)
    driver.clock.set(FAKE_EPOCH + 20)  # set() to now is no move back
    assert driver.clock.now() == FAKE_EPOCH + 20
    with pytest.raises(ValueError, match="does not go backwards"):
        driver.clock.set(FAKE_EPOCH + 19.5)


def test_advance_fires_the_timers_that_fall_due_in_order_each_at_its_own_time() -> None:
    """``advance`` fires every timer that falls due, in order; each fires with the clock
    at its due time, and timers due at the same moment fire in the order they were set."""
    driver = FakeDriver(
        ScriptedAgent().then(
            _asks(at(40)),
            _asks(at(20)),
            _asks(at(20)),
        )
    )
    fired: list[tuple[str, float]] = []
    for name in ("late", "early", "also early"):
        chat = driver.chat()

        def expired(r: Any, name: str = name) -> None:
            if r.is_expired and name not in [n for n, _ in fired]:
                fired.append((name, driver.clock.now()))

        chat.subscribe(expired)
        chat.send("hi")
        driver.run_until_idle()
    assert [purpose for _, purpose in driver.pending_timers()] == ["expiry"] * 3
    driver.advance(60)
    assert fired == [
        ("early", FAKE_EPOCH + 20),
        ("also early", FAKE_EPOCH + 20),
        ("late", FAKE_EPOCH + 40),
    ]
    assert driver.clock.now() == FAKE_EPOCH + 60 and driver.pending_timers() == []


def test_advance_fires_a_live_timer_due_behind_a_cancelled_one() -> None:
    """A timer that stop() cancelled stays out of the way: advancing past it and past a
    live timer fires the live one, at its own time."""
    driver = FakeDriver(ScriptedAgent().then(refuse(503), _asks(at(30))))
    retrying = driver.chat(Options(retry=RetryPolicy(max_attempts=3, jitter=0)))
    retrying.send("hi")
    driver.run_until_idle(follow_retries=False)
    asking = driver.chat()
    asking.send("hi")
    driver.run_until_idle(follow_retries=False)
    assert driver.pending_timers() == [(FAKE_EPOCH + 0.5, "retry"), (FAKE_EPOCH + 30, "expiry")]
    retrying.stop()  # the retry's timer is cancelled, due first
    driver.advance(60)
    assert asking.is_expired and driver.pending_timers() == []
    assert len(driver.requests) == 2  # and the cancelled retry never went out


# -- held streams: release(count) ----------------------------------------------------------


def _held_hello(req: Request) -> Any:
    return held(started(req), *text("a1", "abc", chunks=3), finished(req))


def test_release_lets_each_held_stream_deliver_count_more_events() -> None:
    """reference.md: ``release(count=1)`` lets held streams deliver ``count`` more events
    each: one by default, then exactly as many as asked, in every held stream."""
    driver = FakeDriver(ScriptedAgent(_held_hello))
    first, second = driver.chat(), driver.chat()
    first.send("hi")
    second.send("hi")
    assert driver.run_until_idle() == 2  # the two requests; both streams are parked
    driver.release()
    assert driver.run_until_idle() == 2  # RUN_STARTED in each
    assert first.messages[-1].content == "hi" and first.is_loading
    driver.release(3)
    assert driver.run_until_idle() == 6  # the message's start and two of its deltas, each
    assert [c.messages[-1].content for c in (first, second)] == ["ab", "ab"]
    driver.release(2)
    assert driver.run_until_idle() == 4
    assert first.messages[-1].content == "abc" and first.is_loading  # RUN_FINISHED waits
    driver.release(5)
    assert driver.run_until_idle() == 4  # RUN_FINISHED and the stream's end, each
    assert not first.is_loading and not second.is_loading and first.error is None


def test_release_leaves_a_stream_that_is_not_held_to_its_turn_in_the_queue() -> None:
    """The queue is FIFO: two streams take turns, one event each per step. ``release()``
    is for held streams: a stream not held keeps its turn and is not given a second, nor
    is a held stream released twice before it steps."""
    frames: list[str] = []

    def script(req: Request) -> Any:
        events = (started(req), *text("m", "abcd", chunks=4), finished(req))
        return held(*events) if req.json["messages"][-1]["content"] == "held" else reply(*events)

    driver = FakeDriver(ScriptedAgent(script))
    free, parked = driver.chat(), driver.chat()
    free.subscribe(lambda r: frames.append("free"))
    parked.subscribe(lambda r: frames.append("held"))
    free.send("free")
    parked.send("held")
    assert driver.step() and driver.step()  # both requests; the held stream waits
    frames.clear()
    driver.release(5)
    driver.release(5)  # more for the same stream: still one turn
    for _ in range(6):
        assert driver.step()
    assert frames == ["free", "held"] * 3


# -- step(): what counts as one -------------------------------------------------------------


def test_a_send_withheld_at_the_last_check_is_one_step() -> None:
    """R-F3 and testing.md: expiry is checked once more just before the send. With the
    clock set past the expiry and its timer not yet fired, the step that would send
    withholds the request and records the error: that is a step (``True``), and the
    expiry timer, now due, is the next one."""
    driver = FakeDriver(ScriptedAgent().then(_asks(at(30))))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": 1}])
    driver.clock.set(FAKE_EPOCH + 31)  # no timer fires: the clock just moved
    assert driver.step() is True
    assert isinstance(chat.error, BatchExpiredError) and not chat.is_resuming
    assert len(driver.requests) == 1
    assert driver.pending_timers() == [(FAKE_EPOCH + 30, "expiry")]
    assert driver.step() is True and driver.pending_timers() == []
    assert driver.step() is False


def test_a_request_that_cannot_be_written_is_one_step() -> None:
    """A request whose body cannot be written fails its run without going out: the step
    that tried is a step, and nothing more is ready."""
    driver = FakeDriver(ScriptedAgent(_hello))
    chat = driver.chat()
    chat.set_state(frozen_unchecked({"n": 10**MAX_INT_DIGITS}))
    chat.send("hi")
    assert driver.step() is True
    assert chat.error is not None and "nothing was sent" in str(chat.error)
    assert driver.requests == [] and driver.step() is False


# -- the script builders ------------------------------------------------------------------


def test_text_streams_one_delta_by_default_and_an_empty_message_as_no_delta() -> None:
    """``text(message_id, content, chunks=1)``: one delta unless asked; empty content is a
    message with no delta at all (AG-UI's deltas are never empty), which reads as ""."""
    assert text("a1", "Hello.") == [
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Hello."},
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
    ]
    empty = text("a1", "", chunks=3)
    assert [e["type"] for e in empty] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_END"]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), *empty, finished(req))))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert chat.error is None and chat.messages[-1].content == ""


def test_run_error_writes_its_code_only_when_given() -> None:
    """``run_error(message, code=None)``: AG-UI's ``code`` is optional, so without one the
    event has no ``code`` key (not a null), and the run's RunError has no code."""
    assert run_error("model overloaded") == {"type": "RUN_ERROR", "message": "model overloaded"}
    assert run_error("busy", "OVERLOADED")["code"] == "OVERLOADED"
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), run_error("no"))))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert isinstance(chat.error, RunError) and chat.error.code is None


def test_an_interrupt_that_is_not_an_object_is_left_to_the_reader() -> None:
    """The builders check the keys of an interrupt object only: a value that is not an
    object goes into the event as given, for a test of the reader, which refuses the
    run's outcome (a ProtocolError), rather than failing in the builder."""
    probe = FakeDriver(ScriptedAgent(_hello))
    probe.chat().send("hi")
    probe.run_until_idle()
    req = probe.requests[0]
    event = interrupted(req, "not an object", 7)  # type: ignore[arg-type]
    assert event["outcome"]["interrupts"] == ["not an object", 7]
    outcome = finished(req, {"type": "interrupt", "interrupts": [None]})["outcome"]
    assert outcome == {"type": "interrupt", "interrupts": [None]}
    driver = FakeDriver(
        ScriptedAgent(lambda req: reply(started(req), interrupted(req, "not an object")))  # type: ignore[arg-type]
    )
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError) and chat.pending_interrupts is None


def test_a_reply_is_built_with_keywords_only() -> None:
    """reference.md writes ``Reply(events=..., fail_before_send=..., fail_after=...,
    failure=..., hold=...)``: keywords only, so a bare tuple of events is refused rather
    than taken for some other field."""
    with pytest.raises(TypeError):
        Reply((started,))  # type: ignore[misc]
    assert Reply(events=("x",)).events == ("x",)


def test_a_raw_frame_may_be_any_str_a_subclass_too() -> None:
    """script.py and reference.md: raw strings in a reply are sent as the frame's data
    as they are. A str subclass is sent as its text (it was handed on as the instance,
    which FrameReceived refuses: run_until_idle raised UsageError)."""

    class Frame(str):
        pass

    def script(req: Request) -> Any:
        line = json.dumps({"type": "RUN_FINISHED", "threadId": req.thread_id, "runId": req.run_id})
        return reply(Frame(json.dumps(started(req))), *text("a1", "Hi."), Frame(line))

    driver = FakeDriver(ScriptedAgent(script))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert chat.error is None and not chat.is_loading and chat.messages[-1].content == "Hi."
