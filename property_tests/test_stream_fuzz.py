"""Any sequence of content events, however wrong, is either taken or refused cleanly.

Hypothesis draws runs of AG-UI content events from a small pool of message and
call ids, so events collide: content for a message that is closed, a call whose
parent is an activity, a snapshot replacing a message still streaming, an
encrypted value for a call that never was. An app reads every selector after
every event. Whatever the sequence:

- nothing escapes the driver (no crash, and no observer sees one: R-I2);
- the run ends either committed with no error, or with a non-retryable
  ``ProtocolError`` and the checkpoint exactly as before (R-J2, R-F6);
- a committed history goes out again as valid wire JSON in the next request,
  message for message.

A second test varies how the run ends (a plain finish, an interrupt, a
``RUN_ERROR``, a stream cut before its end, events after ``RUN_FINISHED``) and
lets calls name a tool that runs locally, on a chat and on a completion.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from stream_events import content_events

from interlude.adapters.fake import FakeDriver, ScriptedAgent, reply
from interlude.adapters.fake.script import Request, finished, interrupted, started
from interlude.adapters.resource import Resource
from interlude.core.errors import ProtocolError, RunError
from interlude.core.json import thaw
from interlude.core.wire.codec import decode_run_input
from interlude.core.wire.messages import ActivityMessage


def read_everything(r: Resource) -> None:
    """What an app might read after any event: every selector, every message."""
    for message in r.messages:
        assert message.id
    _ = (r.is_loading, r.is_resuming, r.pending_interrupts, r.error, thaw(r.state), r.warnings)
    _ = (r.output, r.input, r.attempts, r.is_retrying, r.needs_new_thread)


def watched(resource: Resource) -> list[BaseException]:
    """Subscribe an observer that reads everything; returns what it raised (the observer
    re-raises too, so the resource records an ObserverError)."""
    seen: list[BaseException] = []

    def observer(r: Resource) -> None:
        try:
            read_everything(r)
        except BaseException as exc:
            seen.append(exc)
            raise

    resource.subscribe(observer)
    return seen


@settings(max_examples=400)
@given(events=st.lists(content_events, max_size=14))
def test_R_J2_R_F6_any_content_sequence_commits_or_fails_cleanly(
    events: list[dict[str, Any]],
) -> None:
    def run(req: Request) -> Any:
        return reply(started(req), *events, finished(req))

    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))).then(run))
    chat = driver.chat(state={"a": [1]})
    seen = watched(chat)
    chat.send("Go", message_id="u0")
    before = chat.core_state.checkpoint
    driver.run_until_idle(follow_retries=False)

    assert seen == []
    assert not chat.is_loading
    if chat.error is not None:
        assert isinstance(chat.error, ProtocolError), chat.error
        assert chat.error.retryable is False
        assert chat.core_state.checkpoint == before
        return
    committed = list(chat.messages)
    chat.send("Next", message_id="u9")
    driver.run_until_idle(follow_retries=False)
    sent = decode_run_input(driver.requests[-1].json)
    # Everything committed goes back but activity messages (AG-UI 1.0: the consumer's).
    kept = [m for m in committed if not isinstance(m, ActivityMessage)]
    assert list(sent.messages) == [*kept, sent.messages[-1]]
    assert chat.error is None, chat.error


ENDINGS = ("finish", "interrupt", "run_error", "cut", "late_events")


@settings(max_examples=300)
@given(
    events=st.lists(content_events, max_size=10),
    ending=st.sampled_from(ENDINGS),
    late=st.lists(content_events, min_size=1, max_size=2),
    kind=st.sampled_from(["chat", "completion"]),
)
def test_R_J2_R_J3_any_content_then_any_ending_settles_without_a_crash(
    events: list[dict[str, Any]], ending: str, late: list[dict[str, Any]], kind: str
) -> None:
    def run(req: Request) -> Any:
        if ending == "interrupt":
            ask = {"id": "approve", "reason": "input_required", "message": "ok?"}
            return reply(started(req), *events, interrupted(req, ask))
        if ending == "run_error":
            return reply(started(req), *events, {"type": "RUN_ERROR", "message": "boom"})
        if ending == "cut":
            return reply(started(req), *events)  # no terminal event: retried
        if ending == "late_events":
            return reply(started(req), *events, finished(req), *late)
        return reply(started(req), *events, finished(req))

    calls: list[Any] = []
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))).then(run))
    make = driver.completion if kind == "completion" else driver.chat
    chat = make(state={"a": [1]}, local_tools={"local": calls.append})
    seen = watched(chat)
    if kind == "completion":
        chat.set_input("Go")
    else:
        chat.send("Go", message_id="u0")
    before = chat.core_state.checkpoint
    driver.run_until_idle()

    assert seen == []
    assert not chat.is_loading
    error = chat.error
    if isinstance(error, RunError):
        assert ending == "run_error"
    elif isinstance(error, ProtocolError):
        # A violation in the content, or a late event after RUN_FINISHED (R-J3).
        assert error.retryable is False
    else:
        assert error is None, error
    if error is not None and ending != "late_events":
        assert chat.core_state.checkpoint == before  # nothing of a failed run is kept
    if chat.pending_interrupts is not None:
        assert ending == "interrupt" and error is None
    for request in driver.requests:  # every request, tool follow-ups included, is valid
        decode_run_input(request.json)


def _two_runs(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> tuple[Any, ...]:
    """A chat whose two runs stream ``first`` and ``second``; what it holds after each."""
    runs = iter((first, second))

    def run(req: Request) -> Any:
        return reply(started(req), *next(runs, []), finished(req))

    driver = FakeDriver(ScriptedAgent(run))
    chat = driver.chat(state={"a": [1]})
    seen = watched(chat)
    chat.send("Go", message_id="u0")
    driver.run_until_idle(follow_retries=False)
    after_first = (chat.core_state.checkpoint, chat.error)
    chat.send("Again", message_id="u1")
    before_second = chat.core_state.checkpoint
    driver.run_until_idle(follow_retries=False)
    assert seen == []
    return after_first, before_second, chat


@settings(max_examples=300)
@given(
    first=st.lists(content_events, max_size=10),
    second=st.lists(content_events, max_size=10),
)
def test_R_J2_R_F6_a_later_run_naming_an_earlier_runs_ids_keeps_what_was_committed(
    first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    """Both runs draw ids from one small pool, so the second reopens, extends or attaches
    to the first's messages and calls (AG-UI 1.0). Whatever it does: a failure leaves the
    checkpoint exactly as it was (R-F6); a success keeps every committed message in its
    place (but after a MESSAGES_SNAPSHOT, which restates the history); and the same
    script gives the same history again (the core is deterministic)."""
    (_, first_error), before_second, chat = _two_runs(first, second)
    assert not chat.is_loading
    if first_error is not None:
        return  # the first run failed cleanly: the tests above cover that
    if chat.error is not None:
        assert isinstance(chat.error, ProtocolError) and not chat.error.retryable
        assert chat.core_state.checkpoint == before_second
    elif not any(e.get("type") == "MESSAGES_SNAPSHOT" for e in second):
        ids = [m.id for m in chat.messages]
        assert ids[: len(before_second.messages)] == [m.id for m in before_second.messages]
    _, _, again = _two_runs(first, second)
    assert list(again.messages) == list(chat.messages)
    assert str(again.error) == str(chat.error) and again.warnings == chat.warnings


def _one_run(events: list[dict[str, Any]]) -> Resource:
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), *events, finished(req))))
    chat = driver.chat(state={"a": [1]})
    assert watched(chat) == []
    chat.send("Go", message_id="u0")
    driver.run_until_idle(follow_retries=False)
    return chat


LEFT_OUT = "left out what AG-UI 1.0 does not define"


@settings(max_examples=200)
@given(
    events=st.lists(content_events, max_size=10),
    later=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_R_J1_a_member_nothing_defines_changes_nothing_but_the_warnings(
    events: list[dict[str, Any]], later: list[bool]
) -> None:
    """AG-UI 1.0 (Processing Model): a member an event does not define is stripped, not
    an error. The same events, some carrying one, give the same history, state and
    error, and a warning names each such member; nothing else in the warnings moves
    (but out of the newest 20)."""
    plain = _one_run(events)
    marks = later[: len(events)]
    marked = [
        {**e, "laterField": {"x": [1]}} if m else e for e, m in zip(events, marks, strict=True)
    ]
    chat = _one_run(marked)
    assert list(chat.messages) == list(plain.messages)
    assert thaw(chat.state) == thaw(plain.state)
    assert str(chat.error) == str(plain.error)
    if any(LEFT_OUT in w for w in plain.warnings):
        return  # the drawn events strip material of their own: notes would merge
    notes = [w for w in chat.warnings if LEFT_OUT in w]
    assert all(w.endswith(f"{LEFT_OUT}: member 'laterField'") for w in notes)
    others = [w for w in chat.warnings if LEFT_OUT not in w]
    assert others == list(plain.warnings)[len(plain.warnings) - len(others) :]
    if any(marks) and plain.error is None:
        assert notes, "a stripped member with no warning"
