"""The reducer: ``step(state, input, now) -> Transition(state, commands)``.

Every decision interlude makes lives here. ``now`` is the caller's clock
reading (seconds since the epoch); nothing else from the world gets in. An
intent the state forbids raises before anything is built, so a rejected call
leaves the state exactly as it was and emits nothing.

The transitions are grouped by where their input comes from: intents,
wire events of the current attempt, and world events. The table in
docs/design.md names each one.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import attrs

from . import errors as err
from . import intake
from .commands import (
    AbortAttempt,
    CancelTimer,
    CancelTool,
    Command,
    RunTool,
    StartAttempt,
    StartTimer,
)
from .entries import check_entries
from .inputs import (
    STOP_CALLED,
    AttemptFailed,
    Configure,
    EventReceived,
    FrameReceived,
    Input,
    ObserverFailed,
    Reload,
    Resume,
    Send,
    SendStarting,
    SetInput,
    SetMessages,
    SetState,
    SetThreadId,
    Stop,
    StreamEnded,
    TimerFired,
    ToolFinished,
)
from .json import JSON, FrozenDict, NotJSONError, freeze
from .options import MAX_WAIT, ExpiryPolicy, Options
from .patch import json_equal
from .pvec import PVec
from .state import (
    Attempt,
    Batch,
    Checkpoint,
    Claim,
    CompletionInput,
    IdHints,
    Run,
    RunKind,
    State,
    Stream,
    ToolRound,
    ToolTask,
    evolve,
    with_draft,
)
from .stream import (
    CONTENT_HANDLERS,
    StreamViolation,
    StreamWarning,
    close_all,
    end_chunks,
    unclosed,
)
from .wire import events as ev
from .wire.codec import WireError, dumps, encode_event, left_out_note, read_frame
from .wire.messages import AssistantMessage, Message, ToolMessage, UserMessage
from .wire.run_input import ResumeEntry, RunAgentInput

__all__ = ["MAX_WARNINGS", "Transition", "initial_state", "step"]

MAX_WARNINGS = 20
"""Only the newest warnings are kept: a misbehaving endpoint cannot grow the state."""


class Transition(NamedTuple):
    """What a step returns: the new state and the commands to carry out, in order.

    A named tuple rather than an attrs class: one is built per event, and this
    is the cheapest immutable record Python has.
    """

    state: State
    commands: tuple[Command, ...] = ()


# The hot path builds its Transition without the named tuple's Python-level __new__.
_no_commands: Callable[[tuple[State, tuple[Command, ...]]], Transition] = functools.partial(
    tuple.__new__, Transition
)


def initial_state(
    options: Options | None = None,
    *,
    thread_id: str | None = None,
    messages: Sequence[Message] = (),
    state: Any = None,
) -> State:
    """A fresh resource. No pending batch can be restored into it (R-I1).

    ``state`` None (not given) starts from the empty object: AG-UI reads an absent
    state as ``{}``, and an agent's first ``STATE_DELTA`` is computed against it.
    """
    if options is not None and not isinstance(options, Options):
        raise err.UsageError(f"options must be an Options, not {err.a_type(options)}")
    history = intake.messages(messages, "messages=")
    options = options or Options()
    thread_id = intake.thread_id(thread_id, "thread_id=")
    serial = intake.serial_past(history, _prefix(options), 0)
    return State(
        options=options,
        # A thread id under the prefix (saved from an earlier runtime) is not generated
        # again either: set_thread_id(None) must move to another thread (R-H1).
        serial=intake.serial_past_id(thread_id, _prefix(options), serial),
        thread_id=thread_id,
        checkpoint=Checkpoint(
            messages=PVec.from_iterable(history),
            state=FrozenDict() if state is None else intake.json_value(state, "state="),
        ),
    )


def step(state: State, input: Input, now: float) -> Transition:
    """The state after ``input`` at time ``now``, and the commands to carry out."""
    handler = _HANDLERS.get(type(input))
    if handler is None:
        raise _not_an_input(input)
    if type(now) is not float or now - now:  # NaN and infinities leave NaN, not 0.0
        now = _seconds(now)
    if type(state) is not State and not isinstance(state, State):
        raise _not_a_state(state)
    return handler(state, input, now)


def _not_a_state(state: object) -> err.UsageError:
    # Handing back the Transition, not its state, is the likely slip.
    if isinstance(state, Transition):
        fix = "pass transition.state"
    else:
        fix = "start from initial_state() and pass each step's transition.state"
    given = "None" if state is None else err.a_type(state)
    return err.UsageError(f"step() takes a State, not {given}: {fix}")


def _not_an_input(input: object) -> err.UsageError:
    if isinstance(input, type) and input in _HANDLERS:
        return err.UsageError(f"step() takes an input, not the class {input.__name__}: call it")
    hint = ""
    if isinstance(input, _EVENT_CLASSES):
        hint = "; a typed event goes in as EventReceived(attempt, event)"
    return err.UsageError(f"{type(input).__name__} is not an interlude input{hint}")


def _seconds(now: object) -> float:
    """``now`` as float seconds: an int or a float subclass (numpy's) is read as one."""
    if isinstance(now, int | float) and not isinstance(now, bool):
        try:
            seconds = float(now)
        except OverflowError:
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
    hint = " (call .timestamp() on it)" if hasattr(now, "timestamp") else ""
    raise err.UsageError(
        f"now must be finite epoch seconds (a float of seconds since 1970), "
        f"not {err.a_type(now)} {err.quote(now)}{hint}"
    )


def _lingers(s: State, attempt: object) -> bool:
    """Whether ``attempt`` is a finished run's open stream; a number of the wrong type
    (unhashable, even) is not, and is refused by ``_check_issued`` next."""
    return type(attempt) is int and attempt in s.lingering


def _check_issued(s: State, number: object, what: str) -> None:
    """Refuse an attempt, timer or task number this state never handed out: a driver
    stepping an old state, or carrying out commands before storing the new one."""
    if type(number) is not int:
        raise err.UsageError(
            f"{what} is the int its command carried, not {err.a_type(number)} {err.quote(number)}: "
            "pass the command's number back as it is"
        )
    if not 0 < number <= s.serial:
        raise err.UsageError(
            f"{what} {number!r} was never issued by this state: step the newest state, "
            "and store each transition's state before carrying out its commands"
        )


# -- the transition builder ------------------------------------------------------


class _Tx:
    """Collects one transition's changes and commands. Local to a step, never shared."""

    __slots__ = ("commands", "s")

    def __init__(self, s: State) -> None:
        self.s = s
        self.commands: list[Command] = []

    def set(self, **changes: Any) -> None:
        if "run" in changes and "draft" not in changes:
            changes["draft"] = None  # a draft belongs to the acknowledged attempt of a run
        self.s = evolve(self.s, **changes)

    def emit(self, command: Command) -> None:
        self.commands.append(command)

    def serial(self) -> int:
        n = self.s.serial + 1
        self.set(serial=n)
        return n

    def serials(self, count: int) -> range:
        """``count`` consecutive serials, drawn at once."""
        first = self.s.serial + 1
        self.set(serial=first + count - 1)
        return range(first, first + count)

    def new_id(self, kind: str) -> str:
        return f"{_prefix(self.s.options)}-{kind}-{self.serial()}"

    def done(self) -> Transition:
        return Transition(self.s, tuple(self.commands))


def _prefix(options: Options) -> str:
    return options.id_prefix or "interlude"


# -- shared moves ------------------------------------------------------------------


def _start_run(tx: _Tx, kind: RunKind, resume: tuple[ResumeEntry, ...] | None = None) -> None:
    """Capture the request from the checkpoint and start its first attempt."""
    s = tx.s
    if s.thread_id is None:
        tx.set(thread_id=tx.new_id("thread"))
    run_id = tx.new_id("run")
    o = tx.s.options
    thread_id = tx.s.thread_id
    assert thread_id is not None
    template = RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        state=tx.s.checkpoint.state,
        messages=tx.s.checkpoint.messages,
        tools=o.tools,
        context=o.context,
        forwarded_props=o.forwarded_props,
        resume=resume,
    )
    attempt = Attempt(id=tx.serial(), run_id=run_id, number=1)
    tx.set(run=Run(kind=kind, template=template, attempt=attempt))
    tx.emit(StartAttempt(attempt.id, template))


def _flush_tools(tx: _Tx, why: str = "") -> None:
    """Commit the round's results in call order; cancel each unfinished tool, whose
    call gets a tool message saying ``why`` it has no result (an assistant tool call
    left without a result is a history many model APIs refuse)."""
    r = tx.s.tools
    if r is None:
        return
    results = []
    for t in r.tasks:
        if t.result is None:
            tx.emit(CancelTool(t.task))
            problem = (
                f"cancelled: {why} before the tool returned "
                "(it may have run in part, or not at all)"
            )
            results.append(_tool_failure(tx, t.tool_call_id, problem))
        else:
            results.append(t.result)
    cp = tx.s.checkpoint
    tx.set(tools=None, checkpoint=evolve(cp, messages=cp.messages.extend(results)))


def _end_activity(tx: _Tx, why: str) -> None:
    """Abort the attempt, the retry wait and local tools; drop what was not committed.
    ``why``: the cause, as a cancelled tool's message gives it."""
    run = tx.s.run
    if run is not None:
        if run.attempt is not None:
            tx.emit(AbortAttempt(run.attempt.id))
        if run.retry_timer is not None:
            tx.emit(CancelTimer(run.retry_timer))
        tx.set(run=None)
    _flush_tools(tx, why)


def _close_streams(tx: _Tx) -> None:
    """Close the streams of finished runs, kept open for a late RUN_ERROR (R-J3).

    New input, a new thread or a resume's acknowledgement makes their late events
    no longer this resource's concern; an endpoint that holds its connections open
    would otherwise pile them up.
    """
    for attempt in sorted(tx.s.lingering):
        tx.emit(AbortAttempt(attempt))
    tx.set(lingering=frozenset())


def _cancel_expiry_timer(tx: _Tx) -> None:
    if tx.s.expiry_timer is not None:
        tx.emit(CancelTimer(tx.s.expiry_timer))
        tx.set(expiry_timer=None)


def _interrupt(tx: _Tx, error: err.InterludeError | None, why: str = STOP_CALLED) -> None:
    """A failure or a stop: where the interaction stands decides what follows.

    Before the resume's acknowledgement the claim is released and the same
    batch can be submitted again (R-F4). After it, the resume is never
    replayed: the resource needs a new thread (R-F5). Either way what was
    committed stays and what was only streamed is dropped (R-F6).
    """
    _end_activity(tx, why if error is None else "the interaction failed")
    if tx.s.claim is not None:
        tx.set(claim=None, resuming=False)
    elif tx.s.resuming:
        tx.set(needs_new_thread=True, resuming=False)
    tx.set(tool_rounds=0)
    if error is not None:
        tx.set(error=error)


def _expire_claim(tx: _Tx, expired: tuple[str, ...], *, tried: bool = False) -> None:
    """Expiry found before a send: nothing (more) is sent, the batch stays (R-F3).

    ``tried``: an attempt went out and failed before its acknowledgement, so the
    expiry stops its retry rather than its first send.
    """
    _end_activity(tx, "the batch expired")
    ids = _interrupts_named(expired)
    what = (
        f"{ids} expired before the resume could be retried; it was not retried"
        if tried
        else f"{ids} expired before the answers were sent; nothing was sent"
    )
    tx.set(
        claim=None,
        resuming=False,
        error=err.BatchExpiredError(f"{what}. {_after_expiry(tx.s)}", expired),
    )


def _after_expiry(s: State) -> str:
    """What to do about an expired interrupt, under the resource's policy (R-G1, R-G2)."""
    if s.options.expiry == "cancel_expired":
        return (
            "Resume again with status 'cancelled' for each expired interrupt (the "
            "cancel_expired policy accepts that), or start a new thread (set_thread_id)"
        )
    return "Start a new thread (set_thread_id) to go on"


def _interrupts_named(ids: tuple[str, ...]) -> str:
    """``interrupt 'p'``, or ``interrupts 'p', 'q'`` (a few of many)."""
    return f"interrupt{'' if len(ids) == 1 else 's'} {err.listed(ids, show=err.quote)}"


def _held_claim_expired(s: State, now: float) -> tuple[str, ...]:
    """The expired interrupts that would refuse sending the held resume claim (R-F3);
    empty when no claim is held or none blocks it."""
    run = s.run
    if s.claim is None or run is None or run.kind != "resume":
        return ()
    return _blocked_by_expiry(s, _cancelled(s.claim.entries), now, s.claim.expiry)


def _blocked_by_expiry(
    s: State, cancelled: frozenset[str], now: float, policy: ExpiryPolicy
) -> tuple[str, ...]:
    """The expired interrupts that block answers cancelling ``cancelled`` (R-G1, R-G2)."""
    assert s.batch is not None
    excused = _excused(cancelled, policy)
    return tuple(i for i in s.batch.expired_ids(now) if i not in excused)


def _cancelled(entries: tuple[ResumeEntry, ...]) -> frozenset[str]:
    return frozenset(e.interrupt_id for e in entries if e.status == "cancelled")


def _excused(cancelled: frozenset[str], policy: ExpiryPolicy) -> frozenset[str]:
    """The interrupts whose expiry does not block sending answers that cancel
    ``cancelled`` (R-G2): under ``cancel_expired``, those; under the default, none."""
    return cancelled if policy == "cancel_expired" else frozenset()


def _supersede(tx: _Tx) -> None:
    """New input replaces whatever runs; a resumed interaction ends cleanly (R-D3, R-E5)."""
    _end_activity(tx, "new input superseded it")
    _close_streams(tx)
    tx.set(resuming=False, tool_rounds=0, error=None)


def _start_completion(tx: _Tx, value: CompletionInput) -> None:
    text = value.value if isinstance(value.value, str) else dumps(value.value)
    first = UserMessage(id=tx.new_id("msg"), content=text)
    tx.set(
        answered=value,
        settled=False,
        checkpoint=evolve(tx.s.checkpoint, messages=PVec.from_iterable((first,))),
    )
    _start_run(tx, "first")


def _settle(tx: _Tx) -> None:
    """The interaction succeeded with nothing left to do (R-C4). A completion whose input
    changed during it runs the latest input (R-E2); only success does that: after the
    ``cancelled`` outcome, a failure or a stop it waits for reload() or a new thread."""
    tx.set(resuming=False, tool_rounds=0, settled=True)
    s = tx.s
    if s.options.kind == "completion" and s.input is not None and not _same(s.input, s.answered):
        _close_streams(tx)  # the deferred input is new input
        _start_completion(tx, s.input)


def _publish(tx: _Tx, interrupts: tuple[Any, ...]) -> None:
    """Pause: the batch appears with the checkpoint already committed (R-A1, R-A2)."""
    batch = Batch(id=tx.new_id("batch"), interrupts=interrupts)
    tx.set(batch=batch, resuming=False, tool_rounds=0)
    _cancel_expiry_timer(tx)
    _start_expiry_timer(tx, batch.earliest_expiry)


def _start_expiry_timer(tx: _Tx, due: float | None) -> None:
    """The one expiry timer, for ``due`` (none if there is nothing to wait for)."""
    if due is not None:
        timer = tx.serial()
        tx.set(expiry_timer=timer)
        tx.emit(StartTimer(timer, due, "expiry"))


def _retry_or_fail(tx: _Tx, error: err.InterludeError, now: float) -> None:
    """A retryable failure before acknowledgement: wait and retry within budget (R-F1)."""
    run = tx.s.run
    assert run is not None and run.attempt is not None
    policy = tx.s.options.retry
    asked = error.retry_after if isinstance(error, err.TransportError) else None
    if run.attempts >= policy.max_attempts:
        _interrupt(
            tx,
            _gave_up(error, f"gave up after {run.attempts} attempt(s), RetryPolicy.max_attempts"),
        )
        return
    if (asked or 0) > policy.max_retry_after:
        _interrupt(
            tx,
            _gave_up(
                error,
                f"not retried: that is more than "
                f"RetryPolicy.max_retry_after ({policy.max_retry_after:g} s)",
            ),
        )
        return
    expired = _held_claim_expired(tx.s, now)
    if expired:
        # The retry's send would be refused (R-F3): release the claim now, not after a
        # back-off that may be minutes long.
        _expire_claim(tx, expired, tried=True)
        return
    tx.emit(AbortAttempt(run.attempt.id))
    timer = tx.serial()
    backoff = policy.delay(run.attempts, timer, tx.s.options.id_prefix or "interlude")
    due = now + min(max(backoff, asked or 0), MAX_WAIT)  # Retry-After is a lower bound
    tx.set(run=evolve(run, attempt=None, retry_timer=timer, retry_cause=error, retry_due=due))
    tx.emit(StartTimer(timer, due, "retry"))
    _watch_claim_expiry(tx, now)


def _watch_claim_expiry(tx: _Tx, now: float) -> None:
    """A claim waiting out a back-off is released the moment an interrupt that blocks
    its send expires (R-F3, R-G3). The batch's expiry timer covers its earliest expiry;
    under ``cancel_expired`` the claim may have cancelled that interrupt, and then the
    next one its answers resolve needs a timer of its own, or no one would know until
    the retry's timer."""
    claim, batch = tx.s.claim, tx.s.batch
    if claim is None or batch is None:
        return
    if tx.s.expiry_timer is not None:
        earliest = batch.earliest_expiry
        if earliest is not None and now < earliest:
            return  # the batch's own timer: it fires first, and then watches this claim
        # A timer an earlier claim of this batch set for its own answers may be due after
        # an expiry that blocks this one: set it for this claim's.
        _cancel_expiry_timer(tx)
    excused = _excused(_cancelled(claim.entries), claim.expiry)
    later = [
        t
        for i in batch.interrupts
        if (t := i.expires_at_epoch) is not None and now < t and i.id not in excused
    ]
    _start_expiry_timer(tx, min(later, default=None))


def _gave_up(error: err.InterludeError, why: str) -> err.InterludeError:
    """``error`` as recorded when no retry follows: the message says why not.

    A copy of the same class (a custom transport's subclass included) with every
    field kept; only the message grows.
    """
    copied = type(error).__new__(type(error))
    copied.__dict__.update(error.__dict__)
    copied.message = err.clip(f"{error.message} ({why})")
    copied.args = (copied.message,)
    copied.__cause__ = error.__cause__  # the driver's exception: not in __dict__
    return copied


def _fail_attempt(tx: _Tx, error: err.InterludeError, retryable: bool, now: float) -> None:
    run = tx.s.run
    assert run is not None and run.attempt is not None
    if retryable and not run.attempt.acked:
        _retry_or_fail(tx, error, now)
    else:
        _interrupt(tx, error)


# -- intents -----------------------------------------------------------------------


def _recovery_required(verb: str) -> err.RecoveryRequiredError:
    return err.RecoveryRequiredError(
        f"cannot {verb}: the resumed interaction was stopped or failed after the server took it; "
        "call set_thread_id with a new thread id first"
    )


def _check_can_send(s: State, verb: str, now: float) -> None:
    if s.options.kind != "chat":
        raise err.UsageError(
            f"{verb} is for chat resources; a completion takes its input through set_input"
        )
    _check_not_paused(s, verb, now)


def _check_not_paused(s: State, verb: str, now: float) -> None:
    """R-F5, R-D3: no new input during recovery or while a batch is pending or claimed."""
    if s.needs_new_thread:
        raise _recovery_required(verb)
    if s.batch is None:
        return
    # Expired, the way on is what the policy allows: a plain resume() would raise (R-G2).
    expired = not s.claim and s.batch.is_expired(now)
    if s.claim:
        state = "is claimed by a resume in flight; wait for it to settle (is_resuming), or"
    elif expired and s.options.expiry != "cancel_expired":
        state = "has expired and cannot be answered;"
    elif expired:
        state = "has expired; resume() with its expired interrupts cancelled, or"
    else:
        state = "is waiting for answers; answer it with resume(), or"
    raise err.InterruptPendingError(
        f"cannot {verb}: batch {s.batch.id!r} {state} move to a new thread (set_thread_id)"
    )


def _send(s: State, i: Send, now: float) -> Transition:
    _check_can_send(s, "send", now)
    mid = intake.message_id(i.message_id, "send()")
    if isinstance(i.content, UserMessage):
        given: UserMessage | None = intake.user_message(i.content, "send()")
        if mid is not None and mid != i.content.id:
            raise err.UsageError(
                f"send() got message_id {mid!r} and a UserMessage with id {i.content.id!r}; "
                "give the id once"
            )
    else:
        given = None
        content = intake.user_content(i.content, "send()")
    chosen = given.id if given is not None else mid
    if chosen is not None:
        intake.new_message_id(chosen, s.checkpoint.messages, "send()")
    tx = _Tx(s)
    _supersede(tx)
    cp = tx.s.checkpoint
    message = given or UserMessage(id=mid or tx.new_id("msg"), content=content)
    tx.set(checkpoint=evolve(cp, messages=cp.messages.append(message)))
    _start_run(tx, "first")
    return tx.done()


def _set_messages(s: State, i: SetMessages, now: float) -> Transition:
    _check_can_send(s, "set_messages", now)
    messages = intake.messages(i.messages, "set_messages()")
    tx = _Tx(s)
    _supersede(tx)
    tx.set(
        checkpoint=evolve(tx.s.checkpoint, messages=PVec.from_iterable(messages)),
        serial=intake.serial_past(messages, _prefix(s.options), s.serial),
    )
    if messages and messages[-1].role in ("user", "tool"):
        _start_run(tx, "first")
    return tx.done()


def _reload(s: State, i: Reload, now: float) -> Transition:
    if s.options.kind == "completion":
        _check_not_paused(s, "reload", now)
        if s.input is None:
            return Transition(s)
        tx = _Tx(s)
        _supersede(tx)
        _start_completion(tx, s.input)
        return tx.done()
    _check_can_send(s, "reload", now)
    messages = s.checkpoint.messages
    last_user = next(
        (n for n in range(len(messages) - 1, -1, -1) if messages[n].role == "user"), None
    )
    if last_user is None:
        return Transition(s)
    tx = _Tx(s)
    _supersede(tx)
    kept = PVec.from_iterable(messages[: last_user + 1])
    tx.set(checkpoint=evolve(tx.s.checkpoint, messages=kept))
    _start_run(tx, "first")
    return tx.done()


def _stop(s: State, i: Stop, now: float) -> Transition:
    intake.stop_why(i.why)
    if s.run is None and s.tools is None:
        return Transition(s)
    tx = _Tx(s)
    _interrupt(tx, None, i.why)
    return tx.done()


def _set_state(s: State, i: SetState, now: float) -> Transition:
    if s.claim is not None:
        raise err.StateLockedError(
            "cannot set_state: a resume is in flight and captured the state; set it once "
            "the resumed run has finished (is_loading becomes False)"
        )
    if s.run is not None and s.resuming:
        # Not stop(): inside a resumed interaction that requires a new thread (R-F5).
        raise err.StateLockedError(
            "cannot set_state: the resumed run owns the state until it finishes; set it "
            "once is_loading becomes False"
        )
    if s.run is not None:
        raise err.StateLockedError(
            "cannot set_state: a run owns the state until it finishes; call stop() first "
            "or set it when the resource is idle"
        )
    value = intake.json_value(i.state, "set_state()")
    return Transition(evolve(s, checkpoint=evolve(s.checkpoint, state=value)))


def _resume(s: State, i: Resume, now: float) -> Transition:
    # R-B2: the checks run in this order and the first failure raises.
    if s.needs_new_thread:
        raise _recovery_required("resume")
    if s.claim is not None:
        raise err.BatchClaimedError(
            f"batch {s.claim.batch_id!r} is already claimed by a resume in flight; "
            "wait for it (is_resuming) instead of submitting again"
        )
    batch_id = i.batch_id
    if type(batch_id) is not str:
        if not isinstance(batch_id, str):
            given = "the Batch itself" if isinstance(batch_id, Batch) else err.quote(batch_id)
            raise err.UsageError(
                "resume() takes the pending batch's id (pending_interrupts.id, a string), "
                f"not {given}"
            )
        batch_id = str.__str__(batch_id)  # a str subclass as its text, as entries' ids are
    if s.batch is None or s.batch.id != batch_id:
        now_pending = f"batch {s.batch.id!r} is pending" if s.batch else "no batch is pending"
        what_now = (
            "rebuild the form from pending_interrupts" if s.batch else "nothing awaits answers"
        )
        raise err.StaleBatchError(
            f"batch {batch_id!r} is not the pending batch ({now_pending}); {what_now}"
        )
    entries, problems, cancelled = check_entries(s.batch, i.entries)
    policy = s.options.expiry
    # What the entries cancel, malformed ones included: their problems are listed next.
    expired = _blocked_by_expiry(s, cancelled, now, policy)
    if expired:
        raise err.BatchExpiredError(
            f"{_interrupts_named(expired)} {'has' if len(expired) == 1 else 'have'} expired, "
            f"so these answers cannot be sent. {_after_expiry(s)}",
            expired,
        )
    if problems:
        raise err.InvalidResumeError(problems)
    tx = _Tx(s)
    claim = Claim(batch_id=s.batch.id, entries=entries, expiry=policy)
    tx.set(claim=claim, resuming=True, error=None)
    tx.set(tool_rounds=0)
    _start_run(tx, "resume", entries)
    return tx.done()


def _set_thread_id(s: State, i: SetThreadId, now: float) -> Transition:
    intake.thread_id(i.thread_id, "set_thread_id()")
    if i.thread_id == s.thread_id or (i.thread_id is None and s.thread_id is None):
        return Transition(s)  # R-H2: the same id changes nothing
    tx = _Tx(s)
    _end_activity(tx, "the thread changed")
    _close_streams(tx)
    _cancel_expiry_timer(tx)
    # R-H1: a generated id is a new one; an id given under the prefix is never generated.
    tx.set(serial=intake.serial_past_id(i.thread_id, _prefix(s.options), tx.s.serial))
    tx.set(
        thread_id=i.thread_id if i.thread_id is not None else tx.new_id("thread"),
        batch=None,
        claim=None,
        resuming=False,
        needs_new_thread=False,
        tool_rounds=0,
        error=None,
    )
    # R-E4: a completion's current input is sent once, unchanged, on the next thread.
    cur = tx.s
    unanswered = cur.input is not None and (not _same(cur.input, cur.answered) or not cur.settled)
    if cur.options.kind == "completion" and cur.input is not None and unanswered:
        _start_completion(tx, cur.input)
    return tx.done()


def _set_input(s: State, i: SetInput, now: float) -> Transition:
    if s.options.kind != "completion":
        raise err.UsageError("set_input is for completion resources; a chat uses send()")
    value = CompletionInput(intake.json_value(i.value, "set_input()"))
    if _same(value, s.input):
        return Transition(s)
    tx = _Tx(s)
    tx.set(input=value)
    # R-E1: during a pause or a resumed interaction the change is deferred.
    if s.batch is not None or s.resuming or s.needs_new_thread:
        return tx.done()
    _supersede(tx)  # R-E5
    _start_completion(tx, value)
    return tx.done()


def _same(a: CompletionInput | None, b: CompletionInput | None) -> bool:
    """Whether two completion inputs are the same JSON value (R-E1, R-E2). JSON's
    equality, not Python's: ``true`` is not ``1``, and the endpoint would read other
    content (objects compare unordered, and ``1`` is ``1.0``, as JSON Patch's test has it)."""
    if a is None or b is None:
        return a is b
    return json_equal(a.value, b.value)


def _configure(s: State, i: Configure, now: float) -> Transition:
    if not isinstance(i.options, Options):
        raise err.UsageError(
            f"configure() takes an Options, not {err.a_type(i.options)}; "
            "build one with interlude.core.Options(...)"
        )
    old, new = s.options, i.options
    if new.kind != old.kind:
        raise err.UsageError(
            f"Options.kind is {new.kind!r} but this resource is a {old.kind}, and a resource's "
            f"kind cannot change: pass Options(kind={old.kind!r}, ...), or create another resource"
        )
    # Local tools stay registered for the resource's life (their functions live in the
    # driver): options that leave one out keep declaring it, so its calls still run here.
    kept = old.local_tools - new.local_tools
    if kept:
        declared = {t.name for t in new.tools}
        carried = tuple(t for t in old.tools if t.name in kept and t.name not in declared)
        new = attrs.evolve(new, tools=new.tools + carried, local_tools=new.local_tools | kept)
    serial = s.serial
    if _prefix(new) != _prefix(old):
        # Ids under the new prefix must not repeat ones the history already has.
        serial = intake.serial_past(s.checkpoint.messages, _prefix(new), serial)
        serial = intake.serial_past_id(s.thread_id, _prefix(new), serial)
    return Transition(evolve(s, options=new, serial=serial))


# -- wire events of the current attempt --------------------------------------------


def _frame(s: State, i: FrameReceived, now: float) -> Transition:
    run = s.run
    attempt = None if run is None else run.attempt
    current = attempt is not None and attempt.id == i.attempt
    if not current and not _lingers(s, i.attempt):
        _check_issued(s, i.attempt, "FrameReceived: attempt")
        return Transition(s)  # a late frame of a retired attempt (R-H1)
    try:
        event, left_out = read_frame(i.data)
    except WireError as exc:
        if type(i.data) is not str:  # no network sends this: the driver built it wrongly
            raise err.UsageError(
                f"FrameReceived.data is one SSE frame's data as text, not "
                f"{type(i.data).__name__}; decode the bytes (UTF-8) and pass the data field"
            ) from None
        return _bad_frame(s, i.attempt, exc, now)
    if left_out:  # R-J1, AG-UI 1.0 (Processing Model): stripped, with a warning
        s = _with_note(s, left_out_note(event.TYPE, left_out))
    if current and s.draft is not None and type(event) not in _NOT_CONTENT:
        return _content(s, s.draft, event)
    return _on_event(s, i.attempt, event, now)


def _event(s: State, i: EventReceived, now: float) -> Transition:
    """A typed event from an adapter's own parser, checked and frozen as a frame is.

    It goes through its wire text once: plain dicts inside become frozen copies,
    and a field of the wrong kind fails the run as a bad frame would. (Not the
    hot path: the drivers hand the reducer frames.)
    """
    if not isinstance(i.event, _EVENT_CLASSES):
        raise err.UsageError(
            f"EventReceived.event is a typed AG-UI event (interlude.core.wire), not "
            f"{type(i.event).__name__}; pass frame text as FrameReceived(attempt, data)"
        )
    try:
        data = dumps(encode_event(i.event))
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        run = s.run
        live = run is not None and run.attempt is not None and run.attempt.id == i.attempt
        if not live and not _lingers(s, i.attempt):
            _check_issued(s, i.attempt, "EventReceived: attempt")
            return Transition(s)
        problem = f"the typed event {type(i.event).__name__} has no wire form: {exc}"
        return _bad_frame(s, i.attempt, WireError(problem), now)
    return _frame(s, FrameReceived(i.attempt, data), now)


def _bad_frame(s: State, attempt_id: int, exc: WireError, now: float) -> Transition:
    """A frame of a live attempt that is not a valid event."""
    tx = _Tx(s)
    if attempt_id in s.lingering:
        _late_violation(tx, attempt_id, str(exc))
    else:
        # Before the acknowledgement a malformed frame is retryable (R-J3).
        run = s.run
        assert run is not None and run.attempt is not None
        _check_sent(run.attempt, "a frame")  # a driver bug first, not the endpoint's
        retryable = not run.attempt.acked
        _fail_attempt(tx, err.ProtocolError(str(exc), retryable=retryable), retryable, now)
    return tx.done()


def _late_violation(tx: _Tx, attempt: int, what: str) -> None:
    _close_lingering(tx, attempt)
    _late_failure(tx, err.ProtocolError(f"the endpoint sent more after RUN_FINISHED: {what}"))


def _close_lingering(tx: _Tx, attempt: int) -> None:
    """A finished run's stream has said its last: nothing after it is read."""
    tx.emit(AbortAttempt(attempt))
    tx.set(lingering=tx.s.lingering - {attempt})


def _late_failure(tx: _Tx, error: err.InterludeError) -> None:
    """What a finished run's stream said afterwards: a failure of the resumed interaction
    if that has not settled (R-F5: recovery, as for any failure there; only runs of this
    interaction linger then, the acknowledgement having retired the others), else a
    recorded error that leaves a published batch as it is (R-J3)."""
    if tx.s.resuming and tx.s.claim is None:
        _interrupt(tx, error)
    else:
        tx.set(error=error)


def _on_event(s: State, attempt_id: int, event: Any, now: float) -> Transition:
    run = s.run
    attempt = None if run is None else run.attempt
    if attempt is None or attempt.id != attempt_id:
        attempt = None  # not the current attempt's: a finished run's, or a retired one's
        if attempt_id not in s.lingering:
            return Transition(s)
    elif not attempt.acked:
        _check_sent(attempt, "an event")
    if type(event) is ev.UnknownEvent:
        # R-J1, AG-UI 1.0 (Processing Model): an event of a type this consumer does not
        # know MUST NOT abort the run, before its RUN_STARTED, within it or after it.
        note = f"an event of type {err.quote(event.type)}, which AG-UI 1.0 does not define"
        return Transition(_with_note(s, f"{note}, was dropped"))
    if attempt is None:
        tx = _Tx(s)
        if isinstance(event, ev.RunError):
            # R-J3: a late RUN_ERROR is surfaced; it does not withdraw a batch. It ends
            # the stream too (AG-UI 1.0: only a new run may follow it, which R-J3 refuses),
            # so nothing after it can replace the RunError it recorded.
            _close_lingering(tx, attempt_id)
            _late_failure(tx, err.RunError(event.message, event.code))
        else:
            _late_violation(tx, attempt_id, f"a {event.TYPE} event")
        return tx.done()
    assert run is not None
    if s.draft is not None and type(event) not in _NOT_CONTENT:
        return _content(s, s.draft, event)
    tx = _Tx(s)
    if isinstance(event, ev.RunError):
        _interrupt(tx, err.RunError(event.message, event.code))  # never retried (R-F1)
    elif not attempt.acked:
        _before_ack(tx, run, attempt, event, now)
    elif isinstance(event, ev.RunStarted):
        _interrupt(tx, err.ProtocolError("the endpoint sent a second RUN_STARTED in one run"))
    else:
        assert isinstance(event, ev.RunFinished)
        _finished(tx, run, attempt, event)
    return tx.done()


def _content(s: State, stream: Stream, event: object) -> Transition:
    """The hot path: a content event of the acknowledged current attempt goes to the draft."""
    handler = CONTENT_HANDLERS.get(type(event))
    if stream.chunks:  # a chunk stream is open: this event may end it (AG-UI 1.0)
        ended = end_chunks(stream, event)
        if handler is None:
            return Transition(s if ended is stream else with_draft(s, ended))
        stream = ended
    elif handler is None:
        return Transition(s)  # raw, custom, subagent lifecycle, unknown types: no content
    try:
        new_stream = handler(stream, event)
    except StreamViolation as exc:
        tx = _Tx(s)
        _interrupt(tx, err.ProtocolError(str(exc)))
        return tx.done()
    except StreamWarning as exc:
        if exc.applied is not None:
            s = with_draft(s, exc.applied)
        return Transition(_with_note(s, str(exc)))
    return _no_commands((with_draft(s, new_stream), ()))


def _with_note(s: State, note: str) -> State:
    """``s`` with ``note`` among its warnings (``s`` itself if it was the newest)."""
    warnings = _noted(s.warnings, note)
    return s if warnings is s.warnings else evolve(s, warnings=warnings)


def _noted(warnings: tuple[str, ...], note: str) -> tuple[str, ...]:
    """``warnings`` with ``note`` last, the oldest dropped past MAX_WARNINGS. A note
    already there moves to the end rather than repeating: a producer may send the same
    thing thousands of times, and it must not flush the other notes out."""
    note = err.clip(note)
    if warnings and warnings[-1] == note:
        return warnings
    return (*(w for w in warnings if w != note), note)[-MAX_WARNINGS:]


def _before_ack(tx: _Tx, run: Run, attempt: Attempt, event: object, now: float) -> None:
    """R-J3, R-C3: the stream must open with the matching RUN_STARTED."""
    t = run.template
    if not isinstance(event, ev.RunStarted):
        kind = getattr(event, "TYPE", type(event).__name__)
        problem = f"the stream began with {kind}, not RUN_STARTED"
        _fail_attempt(tx, err.ProtocolError(problem, retryable=True), True, now)
        return
    if event.thread_id != t.thread_id or event.run_id != attempt.run_id:
        problem = (
            f"RUN_STARTED for thread {event.thread_id!r} run {event.run_id!r} does not "
            f"match the request (thread {t.thread_id!r} run {attempt.run_id!r})"
        )
        _fail_attempt(tx, err.ProtocolError(problem, retryable=True), True, now)
        return
    cp = tx.s.checkpoint
    acked = evolve(attempt, acked=True)
    # The hints index the history too: AG-UI 1.0 lets a run reopen, extend or attach to
    # an earlier run's message or call by id. O(history) once a run (about 0.1 µs a
    # message), as writing the request that started it was.
    ids = IdHints(cp.messages)
    stream = Stream(
        messages=cp.messages, state=cp.state, base=len(cp.messages), fresh=len(cp.messages), ids=ids
    )
    tx.set(run=evolve(run, attempt=acked), draft=stream)
    if run.kind == "resume":
        # R-C3: the acknowledgement retires the claimed batch and releases the claim
        # (R-D2); the state stays locked while this run owns it. The streams of earlier
        # runs close with it: their late events no longer concern this thread's state.
        tx.set(batch=None, claim=None)
        _cancel_expiry_timer(tx)
        _close_streams(tx)


_NOT_CONTENT = frozenset({ev.RunStarted, ev.RunFinished, ev.RunError, ev.UnknownEvent})
"""Events the reducer decides on itself (:func:`_on_event`); the others go to the draft."""
_EVENT_CLASSES = (*ev.EVENT_TYPES, ev.UnknownEvent)


def _finished(tx: _Tx, run: Run, attempt: Attempt, event: ev.RunFinished) -> None:
    """RUN_FINISHED: commit what the run streamed, then pause, settle or run tools."""
    t = run.template
    if event.thread_id != t.thread_id or event.run_id != attempt.run_id:
        _interrupt(
            tx,
            err.ProtocolError(
                f"RUN_FINISHED for thread {event.thread_id!r} run {event.run_id!r} does not "
                f"match the run (thread {t.thread_id!r} run {attempt.run_id!r})"
            ),
        )
        return
    assert tx.s.draft is not None
    outcome = event.outcome
    left_open = unclosed(tx.s.draft) if not isinstance(outcome, ev.InterruptOutcome) else []
    if left_open:
        # AG-UI 1.0 (Runs): RUN_FINISHED requires what the run opened to be closed. An
        # interrupt commits its partial text as it stands (R-A1).
        problem = (
            f"RUN_FINISHED with {err.listed(left_open)} still open: a run must end what it starts"
        )
        _interrupt(tx, err.ProtocolError(problem))
        return
    history = tx.s.checkpoint.messages  # as committed before this run
    stream = close_all(tx.s.draft)
    tx.set(
        checkpoint=Checkpoint(messages=stream.messages, state=stream.state),
        run=None,
        lingering=tx.s.lingering | {attempt.id},
    )
    # Ids the run brought (another client's on this thread, in a MESSAGES_SNAPSHOT or
    # streamed, say) must not be generated again. Only the messages it added are read
    # (from ``base``: all of them once a snapshot replaced the history).
    serial = intake.serial_past(stream.messages[stream.base :], _prefix(tx.s.options), tx.s.serial)
    if serial != tx.s.serial:
        tx.set(serial=serial)
    if isinstance(outcome, ev.InterruptOutcome):
        _publish(tx, outcome.interrupts)  # R-A1, R-A5: no tools, no follow-up
        return
    if isinstance(outcome, ev.CancelledOutcome):
        # R-J5: closed cleanly, nothing waited for. Not a success: a deferred input is
        # not sent (the seed: only success starts C), but waits as after a stop.
        tx.set(resuming=False, tool_rounds=0)
        return
    if isinstance(outcome, ev.UnknownOutcome):
        note = (
            f"run {attempt.run_id!r} finished with unknown outcome type "
            f"{outcome.type!r}; read as success (AG-UI 1.0)"
        )
        tx.set(warnings=_noted(tx.s.warnings, note))
    named = outcome.pending_tool_call_ids if isinstance(outcome, ev.SuccessOutcome) else None
    pending = _calls_to_run(tx, history, stream, attempt, named or ())
    if pending:
        _start_tools(tx, stream, pending)
    else:
        _settle(tx)


def _calls_to_run(
    tx: _Tx, history: PVec[Message], stream: Stream, attempt: Attempt, named: Sequence[str]
) -> tuple[str, ...]:
    """The calls a successful run leaves to this client, in call order, each once.

    R-J6: the ones ``pendingToolCallIds`` names, else (R-D5) those this run
    started for tools registered here (a call it reopened is an earlier run's, not
    started here). Either way a call that already has a result, or that an earlier
    run started (a saved call named again: R-D4), is not run and gets no second
    result; a warning says so. A named id the history does not know at all is
    answered with an error tool message (appended last), so the endpoint is not left
    waiting for it.
    """
    streamed = {c: n for n, c in enumerate(stream.new_calls)}
    if named:
        wanted = dict.fromkeys(named)
    else:
        local = tx.s.options.local_tools
        calls = _calls_by_id(stream)
        wanted = dict.fromkeys(c for c in stream.new_calls if c in calls and calls[c][0] in local)
    if not wanted:
        return ()
    ids = set(wanted)
    earlier, answered = _known_calls(history, ids)
    now_calls, now_answered = _known_calls(stream.messages, ids)
    earlier |= now_calls - streamed.keys()  # in the history a snapshot brought, not started here
    answered |= now_answered
    skipped = [c for c in wanted if c in answered or c in earlier]
    if skipped:
        note = (
            f"run {attempt.run_id!r} left tool call(s) {', '.join(map(repr, skipped))} "
            "to the client that already have a result or an earlier run started; they are "
            "not run here (R-D4, R-D5)"
        )
        tx.set(warnings=_noted(tx.s.warnings, note))
    left = [c for c in wanted if c not in skipped]
    return tuple(sorted(left, key=lambda c: streamed.get(c, len(streamed))))


def _known_calls(messages: PVec[Message], ids: set[str]) -> tuple[set[str], set[str]]:
    """Which of ``ids`` the history holds as tool calls, and which as tool results."""
    calls: set[str] = set()
    results: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage) and m.tool_call_id in ids:
            results.add(m.tool_call_id)
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            calls.update(c.id for c in m.tool_calls if c.id in ids)
    return calls, results


def _calls_by_id(stream: Stream) -> dict[str, tuple[str, str]]:
    """``tool_call_id -> (name, arguments)`` for the calls this run started: the last
    statement of each in the history (a MESSAGES_SNAPSHOT may hold one id twice)."""
    wanted = set(stream.new_calls)
    found: dict[str, tuple[str, str]] = {}
    messages = stream.messages
    for n in range(len(messages) - 1, -1, -1):
        if len(found) == len(wanted):
            break
        m = messages[n]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            for c in reversed(m.tool_calls):
                if c.id in wanted and c.id not in found:
                    found[c.id] = (c.function.name, c.function.arguments)
    return found


def _tool_message(tx: _Tx, tool_call_id: str, content: str, error: str | None) -> ToolMessage:
    return ToolMessage(
        id=tx.new_id("tool"), tool_call_id=tool_call_id, content=content, error=error
    )


def _tool_failure(tx: _Tx, tool_call_id: str, problem: str) -> ToolMessage:
    """The tool message of a call that failed or did not run: ``Error: `` and why."""
    return _tool_message(tx, tool_call_id, f"Error: {problem}", problem)


def _start_tools(tx: _Tx, stream: Stream, pending: tuple[str, ...]) -> None:
    """R-D5: run the new eligible calls concurrently; results keep call order."""
    if tx.s.tool_rounds >= tx.s.options.max_tool_rounds:
        _refuse_round(tx, pending)
        return
    calls = _calls_by_id(stream)
    local = tx.s.options.local_tools
    tasks: list[ToolTask] = []
    # Consecutive task numbers: a result finds its task by subtraction (ToolRound.find).
    for task, call_id in zip(tx.serials(len(pending)), pending, strict=True):
        found = calls.get(call_id)
        problem: str | None = None
        args: JSON = None
        if found is None:
            problem = (
                f"the run named tool call {call_id!r} in pendingToolCallIds, but the "
                "history holds no call with that id"
            )
            name = ""
        else:
            name, raw_args = found
            if name not in local:
                problem = f"tool {name!r} is not available in this client"
            else:
                try:
                    args = freeze(json.loads(raw_args or "{}"))
                except RecursionError:
                    problem = f"the arguments of tool call {call_id!r} are nested too deeply"
                except (ValueError, NotJSONError) as exc:
                    problem = f"the arguments of tool call {call_id!r} are not JSON ({exc})"
        if problem is not None:
            result = _tool_failure(tx, call_id, problem)
            tasks.append(ToolTask(task=task, tool_call_id=call_id, name=name, result=result))
        else:
            tasks.append(ToolTask(task=task, tool_call_id=call_id, name=name))
            tx.emit(RunTool(task, call_id, name, args))
    waiting = sum(t.result is None for t in tasks)
    tx.set(tools=ToolRound(PVec.from_iterable(tasks), waiting))
    _tools_progress(tx)


def _tools_progress(tx: _Tx) -> None:
    """When every tool of the round is done: commit the results and follow up."""
    r = tx.s.tools
    assert r is not None
    if not r.done:
        return
    _flush_tools(tx)
    tx.set(tool_rounds=tx.s.tool_rounds + 1)
    _start_run(tx, "follow_up")  # carries the results and no resume (R-D5)


def _refuse_round(tx: _Tx, pending: tuple[str, ...]) -> None:
    """A round past ``max_tool_rounds``: a runaway loop, so none of its tools runs (a
    repeated call may have side effects). Each call still gets a result, saying it
    did not run, so the history the next request carries has no call left open."""
    limit = tx.s.options.max_tool_rounds
    asked = (
        f"the endpoint asked for round {tx.s.tool_rounds + 1} of local tools in one "
        f"interaction (max_tool_rounds={limit})"
    )
    cp = tx.s.checkpoint
    results = [_tool_failure(tx, c, f"not run: {asked}") for c in pending]
    tx.set(checkpoint=evolve(cp, messages=cp.messages.extend(results)))
    _interrupt(
        tx,
        err.ToolError(
            f"{asked}; stopped before running them. If the agent needs more rounds, "
            "raise Options.max_tool_rounds; if it repeats a call, look at that tool's results"
        ),
    )


# -- world events -------------------------------------------------------------------


def _send_starting(s: State, i: SendStarting, now: float) -> Transition:
    run = s.run
    if run is None or run.attempt is None or run.attempt.id != i.attempt:
        _check_issued(s, i.attempt, "SendStarting: attempt")
        # Retired before it went out: make sure it never does.
        return Transition(s, (AbortAttempt(i.attempt),))
    if run.attempt.sent:
        return Transition(s)
    expired = _held_claim_expired(s, now)
    if expired:
        tx = _Tx(s)
        _expire_claim(tx, expired)  # R-F3: checked immediately before every send
        return tx.done()
    return Transition(evolve(s, run=evolve(run, attempt=evolve(run.attempt, sent=True))))


def _ended_or_current(s: State, attempt: int) -> Run | Transition:
    """The run whose current attempt this is, or the transition for any other attempt:
    a lingering stream is simply forgotten, a retired one ignored (R-H1)."""
    if _lingers(s, attempt):
        return Transition(evolve(s, lingering=s.lingering - {attempt}))
    run = s.run
    if run is None or run.attempt is None or run.attempt.id != attempt:
        _check_issued(s, attempt, "attempt")
        return Transition(s)
    return run


def _stream_ended(s: State, i: StreamEnded, now: float) -> Transition:
    run = _ended_or_current(s, i.attempt)
    if isinstance(run, Transition):
        return run
    assert run.attempt is not None
    _check_sent(run.attempt, "StreamEnded")
    tx = _Tx(s)
    if run.attempt.acked:
        # R-J3: a truncated run is never a success.
        _interrupt(tx, err.ProtocolError("the stream ended before RUN_FINISHED"))
    else:
        problem = err.ProtocolError("the stream ended before RUN_STARTED", retryable=True)
        _fail_attempt(tx, problem, True, now)
    return tx.done()


def _check_sent(attempt: Attempt, what: str) -> None:
    if not attempt.sent:
        # The expiry check before the send (R-F3) would have been skipped.
        raise err.UsageError(
            f"{what} for attempt {attempt.id}, which was never announced: apply "
            f"SendStarting({attempt.id}) before sending, and send only if it does not "
            "answer AbortAttempt"
        )


def _attempt_failed(s: State, i: AttemptFailed, now: float) -> Transition:
    if not isinstance(i.error, err.TransportError | err.ProtocolError):
        # A driver bug, not bad data from the network: say so at once.
        raise err.UsageError(
            f"AttemptFailed.error must be a TransportError or ProtocolError, not "
            f"{type(i.error).__name__}; wrap other failures in TransportError(..., retryable=...)"
        )
    run = _ended_or_current(s, i.attempt)
    if isinstance(run, Transition):
        return run
    tx = _Tx(s)
    _fail_attempt(tx, i.error, i.error.retryable, now)
    return tx.done()


def _timer_fired(s: State, i: TimerFired, now: float) -> Transition:
    if i.timer == s.expiry_timer and i.timer is not None:
        return _expiry_due(s, i.timer, now)
    run = s.run
    if run is None or run.retry_timer is None or run.retry_timer != i.timer:
        _check_issued(s, i.timer, "TimerFired: timer")
        return Transition(s)
    tx = _Tx(s)
    expired = _held_claim_expired(s, now)
    if expired:
        _expire_claim(tx, expired, tried=True)  # a retry wait: an attempt went out
        return tx.done()
    run_id = tx.new_id("run")
    attempt = Attempt(id=tx.serial(), run_id=run_id, number=run.attempts + 1)
    tx.set(
        run=evolve(run, attempt=attempt, retry_timer=None, retry_due=None, attempts=attempt.number)
    )
    # R-F2: the captured request, byte for byte, with only a fresh run id.
    tx.emit(StartAttempt(attempt.id, evolve(run.template, run_id=run_id)))
    return tx.done()


def _expiry_due(s: State, timer: int, now: float) -> Transition:
    """The earliest expiry of the batch, or the one a held claim waits on: observers
    learn of it at once (R-G3)."""
    due = s.batch.earliest_expiry if s.batch is not None else None
    if due is not None and now < due:
        # Fired early (a clock step, a coarse timer): wait again, or no one is told.
        return Transition(s, (StartTimer(timer, due, "expiry"),))
    tx = _Tx(s)
    tx.set(expiry_timer=None)
    if s.run is not None and s.run.attempt is None:
        # A claim waiting out a retry back-off: that send would be refused (R-F3), so
        # release it now rather than at the retry timer.
        expired = _held_claim_expired(s, now)
        if expired:
            _expire_claim(tx, expired, tried=True)
        else:
            _watch_claim_expiry(tx, now)  # the next expiry that would block it
    elif s.claim is None and s.batch is not None and s.options.expiry == "cancel_expired":
        # What may be submitted changes at each expiry (every expired interrupt must be
        # cancelled): observers learn of each one, not only the first (R-G3).
        _start_expiry_timer(tx, s.batch.next_expiry(now))
    return tx.done()


def _tool_finished(s: State, i: ToolFinished, now: float) -> Transition:
    if i.error is not None and i.value is not None:
        raise err.UsageError(
            "ToolFinished takes a value or an error, not both: a tool that raised has "
            "no value (pass error= alone)"
        )
    r = s.tools
    n = r.find(i.task) if r is not None else None
    if r is None or n is None:
        _check_issued(s, i.task, "ToolFinished: task")
        return Transition(s)  # a late result of a cancelled tool (R-H1)
    t = r.tasks[n]
    tx = _Tx(s)
    if i.error is not None:
        # An exception given as is keeps its type's name, as the drivers write it.
        why = i.error
        if isinstance(why, BaseException):
            why = err.describe_exception(why)
        result = _tool_failure(tx, t.tool_call_id, err.clip(str(why)))
    elif isinstance(i.value, str):
        result = _tool_message(tx, t.tool_call_id, i.value, None)
    else:
        try:
            content = dumps(freeze(i.value))
        except NotJSONError as exc:
            problem = f"tool {t.name!r} returned a value that is not JSON ({exc.reason})"
            result = _tool_failure(tx, t.tool_call_id, problem)
        else:
            result = _tool_message(tx, t.tool_call_id, content, None)
    tx.set(tools=r.finish(n, result))
    _tools_progress(tx)
    return tx.done()


def _observer_failed(s: State, i: ObserverFailed, now: float) -> Transition:
    tx = _Tx(s)
    error = err.ObserverError(f"an observer raised: {i.message}")
    if s.run is not None or s.tools is not None:
        _interrupt(tx, error)  # R-F1: application errors are never retried
    else:
        tx.set(error=error)
    return tx.done()


_HANDLERS: dict[type[Any], Callable[[State, Any, float], Transition]] = {
    Send: _send,
    SetMessages: _set_messages,
    Reload: _reload,
    Stop: _stop,
    SetState: _set_state,
    Resume: _resume,
    SetThreadId: _set_thread_id,
    SetInput: _set_input,
    Configure: _configure,
    FrameReceived: _frame,
    EventReceived: _event,
    SendStarting: _send_starting,
    StreamEnded: _stream_ended,
    AttemptFailed: _attempt_failed,
    TimerFired: _timer_fired,
    ToolFinished: _tool_finished,
    ObserverFailed: _observer_failed,
}
