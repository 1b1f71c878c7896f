"""What the reducer asks of a driver, and the UsageError it raises when a driver gets
it wrong (reference.md, Inputs and Commands): state unchanged, a message that says
what to do, and never a retry against the endpoint for the driver's own bug."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pytest

from interlude.core import (
    AbortAttempt,
    AttemptFailed,
    EventReceived,
    FrameReceived,
    Options,
    Resume,
    RetryPolicy,
    RunTool,
    SendStarting,
    StartAttempt,
    StartTimer,
    State,
    Stop,
    StreamEnded,
    TimerFired,
    ToolFinished,
    ToolMessage,
    Transition,
    TransportError,
    UsageError,
    initial_state,
    selectors,
    step,
)
from interlude.core import Send as SendIntent
from interlude.core.errors import MAX_MESSAGE, clip
from interlude.core.wire import RunStarted

NOW = 1_800_000_000.0


SLOW_RETRY = Options(retry=RetryPolicy(base_delay=10.0, jitter=0.0))


def started(options: Options = SLOW_RETRY) -> tuple[State, StartAttempt]:
    """A chat whose first attempt was just started (not yet announced)."""
    t = step(initial_state(options), SendIntent("hi"), NOW)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    return t.state, start


def announced(options: Options = SLOW_RETRY) -> tuple[State, StartAttempt]:
    s, start = started(options)
    t = step(s, SendStarting(start.attempt), NOW)
    assert t.commands == ()
    return t.state, start


def run_started(start: StartAttempt) -> str:
    ri = start.run_input
    return json.dumps({"type": "RUN_STARTED", "threadId": ri.thread_id, "runId": ri.run_id})


def _nested(depth: int) -> list[Any]:
    """A list ``depth`` lists deep."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def refused(s: State, input: Any, match: str, now: Any = NOW) -> None:
    with pytest.raises(UsageError, match=match):
        step(s, input, now)


# -- the data a driver hands over -----------------------------------------------------


@pytest.mark.parametrize(
    "data", [b'{"type":"RUN_STARTED"}', {"type": "RUN_STARTED"}, None, 7], ids=repr
)
def test_frame_data_that_is_not_text_is_the_drivers_bug_not_the_endpoints(data: Any) -> None:
    """No network sends bytes or a dict as a frame's data: that is a driver building the
    input wrongly. It used to count as a retryable ProtocolError and send the request
    again."""
    s, start = announced()
    refused(s, FrameReceived(start.attempt, data), "one SSE frame's data as text")


@pytest.mark.parametrize("event", [None, {"type": "RUN_STARTED"}, '{"type":"RUN_STARTED"}'])
def test_event_received_takes_a_typed_event(event: Any) -> None:
    s, start = announced()
    refused(s, EventReceived(start.attempt, event), "a typed AG-UI event")


# -- attempts: announced before they are sent, and only those this state issued -------


def test_an_event_before_send_starting_is_refused() -> None:
    """R-F3: the expiry check happens at SendStarting; a driver that skips it would send
    expired answers. The first event of an unannounced attempt says so."""
    s, start = started()
    refused(s, FrameReceived(start.attempt, run_started(start)), r"apply SendStarting\(")
    ri = start.run_input
    event = RunStarted(thread_id=ri.thread_id, run_id=ri.run_id)
    refused(s, EventReceived(start.attempt, event), "never announced")
    refused(s, StreamEnded(start.attempt), "never announced")
    # A malformed frame too: it is the driver's bug before it is the endpoint's, and
    # must not pass for a retryable ProtocolError that sends the request again.
    for data in ("{}", "not json", '{"type":"RUN_STARTED"}'):
        refused(s, FrameReceived(start.attempt, data), "never announced")


def test_a_failure_before_send_starting_is_taken() -> None:
    """A driver that cannot even build the body reports it without announcing a send."""
    s, start = started()
    t = step(s, AttemptFailed(start.attempt, TransportError("no JSON", retryable=False)), NOW)
    assert isinstance(selectors.error(t.state), TransportError)
    assert not selectors.is_loading(t.state)


def test_send_starting_twice_changes_nothing() -> None:
    s, start = announced()
    assert step(s, SendStarting(start.attempt), NOW) == Transition(s)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: FrameReceived(a, "{}"),
        lambda a: StreamEnded(a),
        lambda a: AttemptFailed(a, TransportError("x", retryable=True)),
        lambda a: SendStarting(a),
        lambda a: EventReceived(a, RunStarted(thread_id="t", run_id="r")),
        lambda a: TimerFired(a),
        lambda a: ToolFinished(a, value="done"),
    ],
    ids=["frame", "ended", "failed", "send-starting", "event", "timer", "tool"],
)
@pytest.mark.parametrize(
    ("attempt", "says"),
    [
        (999, "999 was never issued by this state"),
        (0, "0 was never issued by this state"),
        (-1, "-1 was never issued by this state"),
        ("1", "is the int its command carried, not a str '1': pass the command's number back"),
        (None, "is the int its command carried, not a NoneType None"),
        (True, "is the int its command carried, not a bool True"),
        ([1], re.escape("is the int its command carried, not a list [1]")),
        (_nested(10_000), re.escape("is the int its command carried, not a list [[[[...]]]]")),
    ],
    ids=["unissued", "zero", "negative", "str", "none", "bool", "unhashable", "deep"],
)
def test_an_attempt_this_state_never_issued_is_refused(make: Any, attempt: Any, says: str) -> None:
    """A retired attempt's, timer's or task's late input is ignored (R-H1); a number this
    state never issued means the driver steps an old state; a number of another type,
    that the driver passed the wrong value (not an old state: the message says which).
    An unhashable or deeply nested value is refused the same way, never a TypeError or
    a RecursionError."""
    s, _ = announced()
    refused(s, make(attempt), says)


def tool_running(name: str) -> tuple[State, RunTool]:
    """A state whose run finished with one call of local tool ``name``, now running."""
    s, start = announced(Options(local_tools=frozenset({name})))
    ri = start.run_input
    frames = [
        run_started(start),
        json.dumps({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": name}),
        '{"type":"TOOL_CALL_END","toolCallId":"c1"}',
        json.dumps({"type": "RUN_FINISHED", "threadId": ri.thread_id, "runId": ri.run_id}),
    ]
    commands: tuple[Any, ...] = ()
    for data in frames:
        t = step(s, FrameReceived(start.attempt, data), NOW)
        s, commands = t.state, t.commands
    (run,) = [c for c in commands if isinstance(c, RunTool)]
    return s, run


def test_a_tool_result_with_both_a_value_and_an_error_is_refused() -> None:
    """ToolFinished is one outcome: a driver passing both would have the error win
    silently, and the tool's value lost without a word."""
    s, run = tool_running("t")
    for value in ("done", "", 0, False):
        refused(
            s, ToolFinished(run.task, value=value, error="boom"), "a value or an error, not both"
        )
    after = step(s, ToolFinished(run.task, value="done"), NOW).state
    assert selectors.messages(after)[-1].content == "done"


def test_carrying_out_commands_before_storing_the_state_is_caught() -> None:
    """The easy mistake: run StartAttempt against the state from before the step. That
    old state answered AbortAttempt ('retired'), so nothing was sent and the run hung
    with no error."""
    before = initial_state(Options())
    t = step(before, SendIntent("hi"), NOW)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    refused(before, SendStarting(start.attempt), "store each transition's state")
    # The newest state takes it.
    assert step(t.state, SendStarting(start.attempt), NOW).commands == ()


def test_a_retired_attempt_is_still_ignored_or_withdrawn() -> None:
    """R-H1 is unchanged: a stopped attempt's input is ignored, its send withdrawn."""
    s, start = started()
    stopped = step(s, Stop(), NOW).state
    assert step(stopped, SendStarting(start.attempt), NOW).commands == (
        AbortAttempt(start.attempt),
    )
    assert step(stopped, FrameReceived(start.attempt, "{}"), NOW).state is stopped


# -- the clock ---------------------------------------------------------------------------


class Seconds(float):
    """A float subclass, as numpy.float64 is."""


@pytest.mark.parametrize("now", [Seconds(NOW), int(NOW), NOW])
def test_now_is_any_finite_real_seconds(now: Any) -> None:
    s, start = started()
    t = step(s, SendStarting(start.attempt), now)
    assert t.commands == ()


@pytest.mark.parametrize(
    ("now", "match"),
    [
        (True, "not a bool True"),
        (float("nan"), "not a float nan"),
        (float("inf"), "not a float inf"),
        (10**400, r"not an int 1000.*0000$"),  # quoted, not 401 digits
        ("1800000000", "not a str '1800000000'"),
        (datetime.datetime(2027, 1, 1), r"call \.timestamp\(\) on it"),
    ],
    ids=["bool", "nan", "inf", "huge-int", "str", "datetime"],
)
def test_now_that_is_not_finite_seconds_is_refused_naming_its_type(now: Any, match: str) -> None:
    s, start = started()
    refused(s, SendStarting(start.attempt), match, now=now)


# -- timers ------------------------------------------------------------------------------


def paused_with_expiry(expires_in: float) -> tuple[State, StartTimer]:
    s, start = announced()
    ri = start.run_input
    finish = {
        "type": "RUN_FINISHED",
        "threadId": ri.thread_id,
        "runId": ri.run_id,
        "outcome": {
            "type": "interrupt",
            "interrupts": [
                {
                    "id": "approve",
                    "reason": "confirm",
                    "expiresAt": datetime.datetime.fromtimestamp(NOW + expires_in, datetime.UTC)
                    .isoformat()
                    .replace("+00:00", "Z"),
                }
            ],
        },
    }
    s = step(s, FrameReceived(start.attempt, run_started(start)), NOW).state
    t = step(s, FrameReceived(start.attempt, json.dumps(finish)), NOW)
    (timer,) = [c for c in t.commands if isinstance(c, StartTimer)]
    assert timer.purpose == "expiry" and timer.due == NOW + expires_in
    return t.state, timer


def test_an_expiry_timer_that_fires_early_is_started_again() -> None:
    """R-G3: observers learn of the expiry the moment it happens. A timer fired before
    its due time (a clock step, a coarse timer) would otherwise be used up, and no one
    would ever be told."""
    s, timer = paused_with_expiry(30)
    early = step(s, TimerFired(timer.timer), timer.due - 0.0005)
    assert early.commands == (timer,)
    assert early.state == s
    assert not selectors.is_expired(early.state, timer.due - 0.0005)
    due = step(early.state, TimerFired(timer.timer), timer.due)
    assert due.commands == ()
    assert due.state.expiry_timer is None
    assert selectors.is_expired(due.state, timer.due)


def test_the_expiry_releases_a_claim_that_waits_out_a_retry() -> None:
    """R-F3: the retry's send would be refused; the claim is released at the expiry
    rather than when the back-off ends."""
    s, timer = paused_with_expiry(5)
    batch = selectors.pending_interrupts(s)
    assert batch is not None
    entries = [{"interrupt_id": "approve", "status": "resolved", "payload": True}]
    t = step(s, Resume(batch.id, entries), NOW + 1)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), NOW + 1).state
    t = step(s, AttemptFailed(start.attempt, TransportError("drop", retryable=True)), NOW + 1)
    (retry,) = [c for c in t.commands if isinstance(c, StartTimer)]
    assert retry.due > timer.due  # the back-off outlasts the batch
    t = step(t.state, TimerFired(timer.timer), timer.due)
    assert t.state.claim is None and not selectors.is_resuming(t.state)
    assert not selectors.is_loading(t.state)
    assert type(selectors.error(t.state)).__name__ == "BatchExpiredError"
    assert selectors.pending_interrupts(t.state) is batch


# -- messages that say what to do -----------------------------------------------------------


def test_a_typed_event_or_an_input_class_given_to_step_says_how_to_pass_it() -> None:
    s, start = announced()
    ri = start.run_input
    event = RunStarted(thread_id=ri.thread_id, run_id=ri.run_id)
    refused(s, event, r"RunStarted is not an interlude input; a typed event goes in as EventRec")
    refused(s, SendIntent, "not the class Send: call it")


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ("transition", r"step\(\) takes a State, not a Transition: pass transition\.state"),
        (None, r"step\(\) takes a State, not None: start from initial_state\(\)"),
        ({}, r"step\(\) takes a State, not a dict: start from initial_state\(\)"),
    ],
    ids=["transition", "none", "dict"],
)
def test_step_given_something_that_is_not_a_state_says_what_it_takes(
    given: Any, match: str
) -> None:
    """reference.md, The reducer: step() refuses what it cannot step with a UsageError.
    Handing back the Transition instead of its state is the likely slip."""
    t = step(initial_state(), SendIntent("hi"), NOW)
    with pytest.raises(UsageError, match=match):
        step(t if given == "transition" else given, SendIntent("again"), NOW)


@pytest.mark.parametrize("wait", ["3", b"3", [3], float("nan"), True], ids=repr)
def test_a_retry_after_that_is_not_seconds_is_refused_where_the_error_is_built(wait: Any) -> None:
    """reference.md, Errors: retry_after is seconds. A header's text passed unparsed made
    the step that read it raise TypeError (a driver's bug surfacing far from its cause)."""
    with pytest.raises(UsageError, match=r"retry_after must be seconds \(a number\) or None"):
        TransportError("busy", retryable=True, retry_after=wait)
    with pytest.raises(UsageError, match=r"parse the Retry-After header"):
        TransportError.from_status(503, "busy", retry_after=wait)


@pytest.mark.parametrize("wait", [3, 3.5, -1.0, Seconds(3)], ids=repr)
def test_a_retry_after_of_any_real_seconds_is_a_lower_bound_on_the_wait(wait: Any) -> None:
    s, start = announced(Options(retry=RetryPolicy(base_delay=0.0, jitter=0.0)))
    t = step(
        s, AttemptFailed(start.attempt, TransportError.from_status(503, "", retry_after=wait)), NOW
    )
    (timer,) = [c for c in t.commands if isinstance(c, StartTimer)]
    assert timer.due == NOW + max(float(wait), 0.0)


def test_a_tool_error_given_as_an_exception_keeps_its_type_name() -> None:
    """Drivers write a tool's failure as 'TypeName: message'; an exception handed to
    ToolFinished as it is reads the same."""
    s, run = tool_running("look")
    s = step(s, ToolFinished(run.task, error=ValueError("no such lamp")), NOW).state
    tool = next(m for m in selectors.messages(s) if isinstance(m, ToolMessage))
    assert tool.content == "Error: ValueError: no such lamp"


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ("1", "is the int its command carried, not a str '1'"),
        (None, "is the int its command carried, not a NoneType None"),
        (1.0, "is the int its command carried, not a float 1.0"),
    ],
    ids=["str", "none", "float"],
)
def test_a_task_number_of_another_type_is_refused_while_a_round_runs(task: Any, says: str) -> None:
    """The same refusal as with no tools running: while a round runs, the number is
    looked up in it first, and a str must not reach that lookup's arithmetic as a
    TypeError."""
    s, _ = tool_running("t")
    refused(s, ToolFinished(task, value="done"), says)


def test_the_task_number_just_past_a_running_round_is_refused_as_never_issued() -> None:
    """A result is found in its round by subtraction; the number one past the round's
    last task is outside it like any other, and, never handed out, is refused as the
    driver's bug rather than read as a position."""
    s, run = tool_running("t")
    assert s.tools is not None and s.serial == run.task  # nothing drawn past the task yet
    refused(s, ToolFinished(run.task + 1, value="done"), f"{run.task + 1} was never issued")


def test_R_H1_a_late_result_of_an_earlier_rounds_tool_is_ignored() -> None:
    """R-H1: a tool cancelled by stop() may still report; its task number is below the
    running round's, and it is ignored (the running round's tool still waits for its
    own). The lookup by subtraction must not read such a number as a position."""
    s, first = tool_running("t")
    s = step(s, Stop(), NOW).state
    t = step(s, SendIntent("again"), NOW)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), NOW).state
    ri = start.run_input
    frames = [
        run_started(start),
        '{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"t"}',
        '{"type":"TOOL_CALL_END","toolCallId":"c2"}',
        json.dumps({"type": "RUN_FINISHED", "threadId": ri.thread_id, "runId": ri.run_id}),
    ]
    for data in frames:
        t = step(s, FrameReceived(start.attempt, data), NOW)
        s = t.state
    (second,) = [c for c in t.commands if isinstance(c, RunTool)]
    assert first.task < second.task - 1  # a position past the round's start
    assert step(s, ToolFinished(first.task, value="late"), NOW) == Transition(s)
    after = step(s, ToolFinished(second.task, value="done"), NOW).state
    assert [m.content for m in selectors.messages(after) if isinstance(m, ToolMessage)][-1:] == [
        "done"
    ]


def test_a_tool_error_given_as_a_huge_string_is_clipped() -> None:
    """A driver may hand ToolFinished the failure as text; a huge one is clipped as an
    exception's message is, so the tool message sent back to the agent stays bounded."""
    s, run = tool_running("look")
    huge = "no such lamp " + "x" * 100_000
    s = step(s, ToolFinished(run.task, error=huge), NOW).state
    tool = next(m for m in selectors.messages(s) if isinstance(m, ToolMessage))
    assert tool.content == "Error: " + clip(huge)
    assert len(tool.content) < MAX_MESSAGE + 100
