"""Reducer behaviour a mutation-testing round found unguarded: each test here failed
against a one-line change to core/reducer.py or core/stream.py that the rest of the
suite let through."""

from __future__ import annotations

from typing import Any

import pytest
from rule_support import T0, RecordingDriver, ask, at, paused_chat, rejected, step_until, succeed

from interlude.adapters.fake import (
    FakeDriver,
    Reply,
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
from interlude.core import (
    AbortAttempt,
    AttemptFailed,
    Batch,
    CancelTimer,
    CancelTool,
    EventReceived,
    FrameReceived,
    Options,
    RetryPolicy,
    Send,
    SendStarting,
    StartAttempt,
    StartTimer,
    Stop,
    TimerFired,
    ToolError,
    ToolFinished,
    ToolMessage,
    initial_state,
    step,
)
from interlude.core.errors import (
    BatchExpiredError,
    InterruptPendingError,
    ObserverError,
    ProtocolError,
    StateLockedError,
    TransportError,
    UsageError,
)
from interlude.core.wire import (
    AssistantMessage,
    FunctionCall,
    TextMessageContent,
    Tool,
    ToolCall,
    UserMessage,
)


def test_set_messages_ending_with_a_tool_result_runs() -> None:
    """SPEC, Resources: set_messages runs if the history ends with a user or tool message."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    call = ToolCall(id="c1", function=FunctionCall(name="t", arguments="{}"))
    history = [
        UserMessage(id="u1", content="look it up"),
        AssistantMessage(id="a1", tool_calls=(call,)),
        ToolMessage(id="r1", tool_call_id="c1", content="found"),
    ]
    chat.set_messages(history)
    driver.run_until_idle()
    (request,) = driver.requests
    assert [m["id"] for m in request.json["messages"]] == ["u1", "a1", "r1"]
    assert chat.error is None


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_max_tool_rounds_allows_that_many_rounds_then_runs_no_more_tools(limit: int) -> None:
    """R-D5 with Options.max_tool_rounds: the loop goes on for that many rounds; the
    next round's tools never run (a runaway loop repeats side effects), each of its
    calls gets a result saying so, and a ToolError ends the interaction, no follow-up."""
    ran: list[str] = []

    def tool(args: Any) -> str:
        ran.append("t")
        return "ok"

    def answer(req: Any) -> Any:
        return reply(started(req), *tool_call(f"c{len(driver.requests)}", "t", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(Options(max_tool_rounds=limit), local_tools={"t": tool})
    chat.send("go")
    driver.run_until_idle()
    assert len(driver.requests) == limit + 1  # each round that ran had its follow-up
    assert len(ran) == limit
    asked = (
        f"the endpoint asked for round {limit + 1} of local tools in one interaction "
        f"(max_tool_rounds={limit})"
    )
    assert chat.error == ToolError(
        f"{asked}; stopped before running them. If the agent needs more rounds, raise "
        "Options.max_tool_rounds; if it repeats a call, look at that tool's results"
    )
    last = chat.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.error) == (f"c{limit + 1}", f"not run: {asked}")
    assert last.content == f"Error: not run: {asked}"
    assert not chat.is_loading


def test_every_call_of_a_refused_round_gets_its_not_run_result() -> None:
    """R-D5, max_tool_rounds=0: a round of two calls runs neither, and each gets its own
    tool message, so the history the next request carries has no call left open."""
    ran: list[str] = []

    def answer(req: Any) -> Any:
        calls = (*tool_call("c1", "t", {}), *tool_call("c2", "t", {}))
        return reply(started(req), *calls, finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(Options(max_tool_rounds=0), local_tools={"t": ran.append})
    chat.send("go")
    driver.run_until_idle()
    results = [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, str(m.content)[:16]) for m in results] == [
        ("c1", "Error: not run: "),
        ("c2", "Error: not run: "),
    ]
    assert ran == [] and isinstance(chat.error, ToolError) and len(driver.requests) == 1


def test_a_call_whose_parent_is_not_an_assistant_message_gets_its_own() -> None:
    """R-F7: a TOOL_CALL_START naming a reasoning message as its parent must not crash the
    reducer; as AG-UI clients do, the call gets an assistant message of its own, under
    the call's id: the parent's would make two messages with one id."""

    def answer(req: Any) -> Any:
        return reply(
            started(req),
            {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
            *tool_call("c1", "remote", {"q": 1}, parent_message_id="r1"),
            finished(req),
        )

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None and not chat.is_loading
    holders = [m for m in chat.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert [c.id for m in holders for c in m.tool_calls or ()] == ["c1"]
    assert [m.id for m in holders] == ["c1"]
    ids = [m.id for m in chat.messages]
    assert len(ids) == len(set(ids))


def test_a_retried_attempt_is_closed_before_the_retry() -> None:
    """R-F1: a retryable failure with the stream still open (a RUN_STARTED for another
    run) aborts that attempt, so its connection does not linger."""

    def wrong(req: Any) -> Any:
        return held({**started(req), "runId": "someone-else"}, finished(req))

    driver = RecordingDriver(ScriptedAgent(succeed()).then(wrong))
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0)))
    chat.send("go")
    driver.step()  # the request goes out
    driver.release(1)
    driver.run_until_idle(follow_retries=False)  # the wrong RUN_STARTED: a retry wait
    assert chat.is_retrying
    first = driver.requests[0].attempt
    assert AbortAttempt(first) in driver.commands
    driver.run_until_idle()
    assert chat.error is None and chat.messages[-1].role == "assistant"


def test_the_resumes_acknowledgement_closes_the_paused_runs_stream() -> None:
    """R-C3: the paused run's stream, held open after its RUN_FINISHED, is closed (and
    forgotten) when the resume is acknowledged."""

    def pause_held(req: Any) -> Any:
        return held(started(req), *text("m1", "ask"), interrupted(req, ask()), text("late", "x")[0])

    driver = RecordingDriver(ScriptedAgent(succeed()).then(pause_held))
    chat = driver.chat()
    chat.send("buy")
    driver.run_until_idle()
    driver.release(5)  # the paused run, its late event still held
    driver.run_until_idle(follow_retries=False)
    batch = chat.pending_interrupts
    assert batch is not None
    paused = driver.requests[0].attempt
    assert chat.core_state.lingering == {paused}
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": True}])
    driver.run_until_idle(follow_retries=False)
    assert AbortAttempt(paused) in driver.commands
    assert chat.core_state.lingering == frozenset()
    assert chat.error is None and not chat.needs_new_thread


def test_a_named_call_for_a_tool_this_client_does_not_run_is_answered_not_run() -> None:
    """R-D5: pendingToolCallIds naming a call of a tool this resource did not register is
    answered at once with an error tool message; no RunTool goes to the driver."""

    def answer(req: Any) -> Any:
        if len(driver.requests) == 1:
            outcome = {"type": "success", "pendingToolCallIds": ["c1"]}
            return reply(started(req), *tool_call("c1", "remote", {}), finished(req, outcome))
        return reply(started(req), finished(req))

    driver = RecordingDriver(ScriptedAgent(answer))
    chat = driver.chat(local_tools={"mine": lambda args: "ok"})
    chat.send("go")
    driver.run_until_idle()
    assert not [c for c in driver.commands if type(c).__name__ == "RunTool"]
    (result,) = [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert "not available in this client" in str(result.content)


def test_a_retry_timer_that_finds_the_batch_expired_starts_no_attempt() -> None:
    """R-F3: when the retry back-off ends after the batch expired (the expiry timer not
    delivered, say), the claim is released without a new StartAttempt."""
    driver, chat, batch = paused_chat(
        ask("approve", expires=at(5)),
        replies=[lambda req: reply(started(req))],  # drops: no RUN_FINISHED
        options=Options(retry=RetryPolicy(jitter=0, base_delay=10)),
    )
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    claim = chat.core_state
    assert claim.claim is not None
    # Fail the resume attempt before its acknowledgement, by hand.
    (start,) = [c for c in driver.commands if isinstance(c, StartAttempt)][-1:]
    chat.apply(SendStarting(start.attempt))
    chat.apply(AttemptFailed(start.attempt, TransportError("drop", retryable=True)))
    retry = chat.core_state.run
    assert retry is not None and retry.retry_timer is not None
    before = len(driver.commands)
    chat.apply(TimerFired(retry.retry_timer), now=driver.clock.now() + 20)
    assert not [c for c in driver.commands[before:] if isinstance(c, StartAttempt)]
    assert isinstance(chat.error, BatchExpiredError) and chat.pending_interrupts is batch
    # One attempt went out: the message must not say that nothing was sent.
    assert str(chat.error).startswith(
        "interrupt 'approve' expired before the resume could be retried; it was not retried."
    )


def test_a_second_result_for_a_finished_tool_task_is_ignored() -> None:
    """R-H1: a tool task's result counts once; a repeated ToolFinished changes nothing."""

    def answer(req: Any) -> Any:
        if len(driver.requests) == 1:
            return reply(
                started(req), *tool_call("c1", "t", {}), *tool_call("c2", "t", {}), finished(req)
            )
        return reply(started(req), finished(req))

    driver = RecordingDriver(ScriptedAgent(answer), manual_tools=True)
    chat = driver.chat(local_tools={"t": lambda args: "unused"})
    chat.send("go")
    driver.run_until_idle()
    first, _ = driver.tool_runs
    chat.apply(ToolFinished(first.task, value="one"))
    before = chat.core_state
    chat.apply(ToolFinished(first.task, value="two"))
    assert chat.core_state == before


# -- a review of this round's own changes -------------------------------------------------


def test_an_activity_wider_than_share_members_from_can_still_be_patched() -> None:
    """R-J1: a patch that makes an activity's content a PMap is still an object."""
    from interlude.core.patch import SHARE_MEMBERS_FROM

    content = {f"k{n}": n for n in range(SHARE_MEMBERS_FROM)}

    def answer(req: Any) -> Any:
        snapshot = {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "a1",
            "activityType": "plan",
            "content": content,
        }
        patch = [{"op": "add", "path": "/extra", "value": 1}]
        delta = {
            "type": "ACTIVITY_DELTA",
            "messageId": "a1",
            "activityType": "plan",
            "patch": patch,
        }
        return reply(started(req), snapshot, delta, finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None
    activity = chat.messages[-1]
    assert type(activity).__name__ == "ActivityMessage"
    assert activity.content == {**content, "extra": 1}  # type: ignore[union-attr]


def test_a_new_id_prefix_starts_past_the_historys_ids_under_it() -> None:
    history = [UserMessage(id="app-msg-1", content="a"), UserMessage(id="app-msg-2", content="b")]
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat(messages=history)
    chat.configure(Options(id_prefix="app"))
    chat.send("c")
    assert chat.messages[-1].id not in {"app-msg-1", "app-msg-2"}


def test_ids_a_messages_snapshot_brought_are_not_generated_again() -> None:
    """Another client on the thread (same default prefix) may have made the ids a
    MESSAGES_SNAPSHOT brings; later generated ids must not repeat them."""
    others = [
        {"id": f"interlude-msg-{n}", "role": "user", "content": f"other {n}"} for n in range(1, 40)
    ]
    ids = ids_after_a_snapshot_of(others, sends=3)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def ids_after_a_snapshot_of(messages: list[dict[str, Any]], sends: int) -> list[str]:
    """The history's ids after a run whose MESSAGES_SNAPSHOT brought ``messages``, then
    ``sends`` more sends, each run to its end."""
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": messages}
    driver = FakeDriver(ScriptedAgent(succeed()).then(succeed(snapshot)))
    chat = driver.chat()
    chat.send("first")
    driver.run_until_idle()
    for k in range(sends):
        chat.send(f"again {k}")
        driver.run_until_idle()
    return [m.id for m in chat.messages]


@pytest.mark.parametrize("n", range(3, 12))
def test_ids_the_first_message_of_a_messages_snapshot_brought_are_not_generated_again(
    n: int,
) -> None:
    """The snapshot's first message counts as much as its others: one that is the whole
    history, whatever number it carries, is never handed out again."""
    brought = {"id": f"interlude-msg-{n}", "role": "user", "content": "other"}
    ids = ids_after_a_snapshot_of([brought], sends=4)
    assert ids.count(brought["id"]) == 1, ids


@pytest.mark.parametrize("tail", ["abc", "", "\u00b2", "\u0661\u0662", "9" * 5000])
def test_R_H1_an_id_under_the_prefix_without_a_plain_number_is_taken_as_it_is(tail: str) -> None:
    """Ids restored, given or brought by a MESSAGES_SNAPSHOT may be spelt under the id
    prefix without a plain number of at most 18 ASCII digits (a superscript two is a
    digit Python cannot read as a number; 5000 digits are past what it reads): they
    are taken as they are, and ids are generated as before."""
    driver = FakeDriver(
        ScriptedAgent(succeed()).then(
            succeed(
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [{"id": f"interlude-msg-{tail}x", "role": "user", "content": "o"}],
                }
            )
        )
    )
    mine = UserMessage(id=f"interlude-msg-{tail}", content="a")
    chat = driver.chat(messages=[mine], thread_id=f"interlude-thread-{tail}")
    chat.send("b")
    driver.run_until_idle()
    chat.send("c")
    driver.run_until_idle()
    assert chat.error is None
    ids = [m.id for m in chat.messages]
    assert f"interlude-msg-{tail}x" in ids and len(ids) == len(set(ids))
    chat.set_thread_id(None)
    prefix, _, n = chat.thread_id.rpartition("-")
    assert prefix == "interlude-thread" and int(n) < 10


def test_R_H1_an_id_of_18_digits_under_the_prefix_is_never_generated_again() -> None:
    """The largest number a history's ids or the thread id carry under the prefix is
    counted past, up to 18 digits."""
    big = 10**17 + 5  # 18 digits
    driver = FakeDriver(ScriptedAgent(succeed()))
    mine = UserMessage(id=f"interlude-msg-{big}", content="a")
    chat = driver.chat(messages=[mine])
    chat.send("b")
    assert chat.messages[-1].id == f"interlude-msg-{big + 1}"
    chat = driver.chat(thread_id=f"interlude-thread-{big}")
    chat.set_thread_id(None)
    assert chat.thread_id == f"interlude-thread-{big + 1}"


def test_an_expired_claim_is_released_when_its_attempt_fails_not_after_the_back_off() -> None:
    """R-F3: the batch expired while the resume was in flight; the attempt then fails
    retryably (503, Retry-After 300). The retry would be refused, so the claim is
    released at once, as it is when the expiry fires during the back-off."""
    fail = TransportError.from_status(503, "", retry_after=300)
    resumed = Reply(events=(), hold=True, fail_after=0, failure=fail)
    options = Options(retry=RetryPolicy(jitter=0, base_delay=1, max_retry_after=600))
    driver, chat, batch = paused_chat(
        ask(expires=at(30)), replies=[lambda req: resumed], options=options
    )
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle(follow_retries=False)  # the resume goes out, held
    driver.advance(31)  # the expiry fires while it is in flight
    driver.release(1)
    driver.run_until_idle(follow_retries=False)  # then the 503
    assert (chat.is_resuming, chat.is_loading, chat.core_state.claim) == (False, False, None)
    assert isinstance(chat.error, BatchExpiredError) and "not retried" in str(chat.error)
    assert driver.pending_timers() == []


# -- a second mutation round: guards of core/reducer.py ------------------------------------


@pytest.mark.parametrize(
    ("history", "sent"),
    [
        (["u1"], ["u1"]),
        (["u1", "a1"], ["u1"]),
        (["u1", "a1", "u2"], ["u1", "a1", "u2"]),
        (["u1", "a1", "u2", "a2"], ["u1", "a1", "u2"]),
    ],
)
def test_reload_runs_again_from_the_last_user_message(history: list[str], sent: list[str]) -> None:
    """SPEC, Resources: reload drops what followed the last user message and runs from it;
    a history that already ends with it (a run that failed, say) is sent whole, and a
    user message first in the history counts too."""

    def message(mid: str) -> UserMessage | AssistantMessage:
        if mid.startswith("u"):
            return UserMessage(id=mid, content=f"ask {mid}")
        return AssistantMessage(id=mid, content=f"answer {mid}")

    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat(messages=[message(m) for m in history])
    assert chat.reload() is True
    driver.run_until_idle()
    (request,) = driver.requests
    assert [m["id"] for m in request.json["messages"]] == sent


def test_reload_with_no_history_runs_nothing() -> None:
    """SPEC, Resources: reload returns whether it ran; with no user message (here no
    message at all) it returns False and changes nothing."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    before = chat.core_state
    assert chat.reload() is False
    assert chat.core_state is before and driver.commands == []


def test_set_state_refusals_say_what_the_user_can_do() -> None:
    """SPEC, Resources (set_state) and R-F5: during an ordinary run the refusal points to
    stop(); during a resumed run it says to wait, since a stop there would require a
    new thread."""

    def open_run(req: Any) -> Any:
        return held(started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(open_run))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    driver.release(1)
    driver.run_until_idle()
    assert chat.is_loading and not chat.is_resuming
    error = rejected(chat, StateLockedError, lambda: chat.set_state({"a": 1}))
    assert "call stop() first" in str(error) and "resumed" not in str(error)

    driver, chat, batch = paused_chat(replies=[open_run])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    driver.release(1)  # RUN_STARTED: the claim is released, the resumed run goes on
    driver.run_until_idle()
    assert chat.core_state.claim is None and chat.is_resuming and chat.is_loading
    error = rejected(chat, StateLockedError, lambda: chat.set_state({"a": 1}))
    assert str(error).startswith("cannot set_state: the resumed run owns the state")
    assert "stop()" not in str(error)


def test_configure_keeps_declaring_a_local_tool_and_nothing_else() -> None:
    """SPEC, Resources (configure): options that leave out a local tool keep declaring it,
    so the agent can still call it; a remote tool the old options declared is gone."""
    remote = Tool(name="remote", description="runs on the server")
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat(Options(tools=(remote,)), local_tools={"mine": lambda args: "ok"})
    chat.configure(Options())
    chat.send("go")
    driver.run_until_idle()
    (request,) = driver.requests
    assert [t["name"] for t in request.json["tools"]] == ["mine"]


def test_R_H1_a_bad_frame_of_a_retired_attempt_changes_nothing() -> None:
    """R-H1: a late frame of a superseded attempt is ignored even when it is not valid
    AG-UI: it does not fail the run that replaced it."""
    driver = RecordingDriver(ScriptedAgent(lambda req: held(started(req), finished(req))))
    chat = driver.chat()
    chat.send("first")
    driver.run_until_idle()
    chat.send("second")  # supersedes the first attempt
    driver.run_until_idle()
    first, second = (c.attempt for c in driver.of(StartAttempt))
    assert AbortAttempt(first) in driver.commands
    before = chat.core_state
    chat.apply(FrameReceived(first, "{not json"))
    assert chat.core_state == before and chat.error is None
    assert chat.core_state.run is not None and chat.core_state.run.attempt is not None
    assert chat.core_state.run.attempt.id == second


def paused_with_its_stream_open(*late: Any) -> tuple[RecordingDriver, Any, Batch, int]:
    """A chat paused on an interrupt whose stream stays open after RUN_FINISHED (it
    lingers, R-J3), holding ``late`` events back: the driver, chat, batch and attempt."""

    def pause_held(req: Any) -> Any:
        return held(started(req), interrupted(req, ask()), *late)

    driver = RecordingDriver(ScriptedAgent(succeed()).then(pause_held))
    chat = driver.chat()
    chat.send("buy")
    driver.run_until_idle()
    driver.release(2)
    driver.run_until_idle()
    batch = chat.pending_interrupts
    paused = driver.requests[0].attempt
    assert batch is not None and chat.core_state.lingering == {paused}
    return driver, chat, batch, paused


def test_R_J3_an_event_after_run_finished_fails_and_closes_that_stream() -> None:
    """R-J3: after RUN_FINISHED only a late RUN_ERROR is tolerated; anything else is a
    protocol error that leaves the batch as it is, and its stream is closed at once,
    so nothing more of it is read."""

    driver, chat, batch, paused = paused_with_its_stream_open(*text("late", "x"))
    driver.release(1)  # TEXT_MESSAGE_START after RUN_FINISHED
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError)
    assert "the endpoint sent more after RUN_FINISHED" in str(chat.error)
    assert AbortAttempt(paused) in driver.commands
    assert chat.core_state.lingering == frozenset() and chat.pending_interrupts is batch


def test_a_repeated_warning_moves_to_the_end_instead_of_repeating() -> None:
    """R-J1: each dropped unknown event type is noted once; the same note again moves to
    the end, so the newest warning is always last."""

    def answer(req: Any) -> Any:
        return reply(started(req), {"type": "FOO"}, {"type": "BAR"}, {"type": "FOO"}, finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    assert [w.split("'")[1] for w in chat.warnings] == ["BAR", "FOO"]


def test_R_F1_a_zero_max_retry_after_still_retries_a_failure_without_retry_after() -> None:
    """R-F1: max_retry_after bounds the wait a server asks for; a 503 that asks for none
    is retried as usual even with max_retry_after=0."""
    options = Options(retry=RetryPolicy(jitter=0, max_retry_after=0))
    driver = FakeDriver(ScriptedAgent(succeed()).then(refuse(503)))
    chat = driver.chat(options)
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None and chat.messages[-1].role == "assistant"


def test_R_F3_a_claim_in_back_off_is_released_when_an_interrupt_it_answers_expires() -> None:
    """R-F3, R-G3 under cancel_expired: the resume cancels 'p' and answers 'q'. The batch's
    timer fires for 'p' while the resume is in flight; the attempt then fails and
    waits a long back-off. When 'q' expires, during that back-off, the claim is
    released at once (the retry would be refused), not when the back-off ends."""
    fail = TransportError.from_status(503, "")
    resumed = Reply(events=(), hold=True, fail_after=0, failure=fail)
    options = Options(
        expiry="cancel_expired", retry=RetryPolicy(jitter=0, base_delay=100, max_delay=100)
    )
    driver, chat, batch = paused_chat(
        ask("p", expires=at(5)),
        ask("q", expires=at(30)),
        replies=[lambda req: resumed],
        options=options,
    )
    chat.resume(
        batch.id,
        [
            {"interrupt_id": "p", "status": "cancelled"},
            {"interrupt_id": "q", "status": "resolved", "payload": 1},
        ],
    )
    driver.run_until_idle(follow_retries=False)  # the resume goes out, held
    driver.advance(6)  # 'p' expires while it is in flight
    driver.release(1)
    driver.run_until_idle(follow_retries=False)  # the 503: a back-off of 100 s
    assert chat.is_retrying and chat.is_resuming
    driver.advance(25)  # past 'q''s expiry, long before the retry
    assert (chat.is_resuming, chat.is_loading, chat.core_state.claim) == (False, False, None)
    assert isinstance(chat.error, BatchExpiredError) and chat.error.interrupt_ids == ("q",)
    assert chat.pending_interrupts is batch


def test_R_H1_a_typed_event_with_no_wire_form_for_a_retired_attempt_changes_nothing() -> None:
    """R-H1: an adapter's typed event for a superseded attempt is ignored, even one that
    cannot be written as wire JSON: it does not fail the run that replaced it."""
    driver = RecordingDriver(ScriptedAgent(lambda req: held(started(req), finished(req))))
    chat = driver.chat()
    chat.send("first")
    driver.run_until_idle()
    chat.send("second")
    driver.run_until_idle()
    first, _ = (c.attempt for c in driver.of(StartAttempt))
    before = chat.core_state
    broken = TextMessageContent(message_id="m1", delta=object())  # type: ignore[arg-type]
    chat.apply(EventReceived(first, broken))
    assert chat.core_state == before and chat.error is None


def resumed_into_a_back_off(
    p_expires: float, q_expires: float, *, wait_first: float = 0
) -> tuple[Any, Any]:
    """Under cancel_expired, a chat paused on 'p' and 'q' (expiring at these offsets),
    after ``wait_first`` seconds resumed cancelling 'p' and answering 'q'; the resume's
    attempt fails with a 503 and waits a back-off of 100 s. The driver and chat."""
    fail = TransportError.from_status(503, "")
    options = Options(
        expiry="cancel_expired", retry=RetryPolicy(jitter=0, base_delay=100, max_delay=100)
    )
    driver, chat, batch = paused_chat(
        ask("p", expires=at(p_expires)),
        ask("q", expires=at(q_expires)),
        replies=[Reply(fail_before_send=fail)],
        options=options,
    )
    if wait_first:
        driver.advance(wait_first)
        assert [p for _, p in driver.pending_timers()] == ["expiry"]
    chat.resume(
        batch.id,
        [
            {"interrupt_id": "p", "status": "cancelled"},
            {"interrupt_id": "q", "status": "resolved", "payload": 1},
        ],
    )
    driver.run_until_idle(follow_retries=False)  # the 503: a back-off of 100 s
    return driver, chat


def test_R_G3_a_claim_in_back_off_leaves_one_expiry_timer() -> None:
    """R-G3 under cancel_expired: the batch's timer was re-armed for 'q' after 'p' expired;
    a resume cancelling 'p' fails and waits a back-off. The timer for the claim
    replaces the batch's: one expiry timer is pending, not two."""
    driver, chat = resumed_into_a_back_off(5, 30, wait_first=6)  # 'p' expires first
    assert chat.is_retrying and chat.is_resuming
    assert [p for _, p in driver.pending_timers()] == ["expiry", "retry"]
    driver.advance(25)  # 'q' expires: the claim is released at once
    assert isinstance(chat.error, BatchExpiredError) and chat.error.interrupt_ids == ("q",)
    assert driver.pending_timers() == []


def test_stop_with_nothing_in_progress_changes_nothing() -> None:
    """SPEC, Resources (stop): with nothing in progress (here paused on a batch), stop()
    does nothing: the state is the same object, and observers are not notified."""
    _, chat, batch = paused_chat()
    seen: list[object] = []
    chat.subscribe(seen.append)
    before = chat.core_state
    chat.stop()
    assert chat.core_state is before and seen == []
    assert chat.pending_interrupts is batch


@pytest.mark.parametrize("given", [{"type": "RUN_STARTED"}, ["send", "hi"]])
def test_step_refuses_an_unhashable_non_input_with_a_usage_error(given: object) -> None:
    """A driver that hands step() a wire event's dict (or a list) gets the UsageError that
    names what it passed, not a TypeError from looking it up."""
    state = initial_state()
    with pytest.raises(UsageError, match=rf"^{type(given).__name__} is not an interlude input$"):
        step(state, given, 0.0)  # type: ignore[arg-type]


def test_set_messages_ending_with_an_assistant_message_does_not_run() -> None:
    """SPEC, Resources: set_messages runs only if the history ends with a user or tool
    message; one ending with the assistant's answer is just replaced."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    chat.set_messages([UserMessage(id="u1", content="hi"), AssistantMessage(id="a1", content="yo")])
    driver.run_until_idle()
    assert [m.id for m in chat.messages] == ["u1", "a1"]
    assert not chat.is_loading and driver.requests == [] and not driver.of(StartAttempt)


def test_R_D5_a_resumed_interaction_gets_max_tool_rounds_and_no_more() -> None:
    """R-D5 with max_tool_rounds=1: the resume starts a new interaction whose tool rounds
    count from zero; its second round of local tools is refused, not run."""
    ran: list[Any] = []

    def calls(req: Any) -> Any:
        n = len(driver.requests)
        return reply(started(req), *tool_call(f"c{n}", "t", {}), finished(req))

    driver, chat, batch = paused_chat(
        replies=[calls, calls],
        options=Options(max_tool_rounds=1),
        local_tools={"t": ran.append},
    )
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    assert len(ran) == 1 and isinstance(chat.error, ToolError)
    assert "round 2 of local tools" in str(chat.error)


def test_configure_that_declares_a_local_tool_anew_sends_its_new_declaration_once() -> None:
    """SPEC, Resources (configure): options that declare a local tool themselves (a new
    description, say) replace its old declaration; the request names it once."""
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat(local_tools={"mine": lambda args: "ok"})
    chat.configure(Options(tools=(Tool(name="mine", description="new words"),)))
    chat.send("go")
    driver.run_until_idle()
    (request,) = driver.requests
    assert [(t["name"], t["description"]) for t in request.json["tools"]] == [("mine", "new words")]


def test_R_J3_a_stream_that_does_not_begin_with_run_started_is_a_retryable_error() -> None:
    """R-J3: a stream whose first event is not RUN_STARTED is a retryable protocol error
    before acknowledgement: the retry is sent, and with no retries left the error says
    what the stream began with."""

    def text_first(req: Any) -> Any:
        return reply(*text("m1", "early"), started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(succeed()).then(text_first))
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0)))
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None and len(driver.requests) == 2
    assert [m.id for m in chat.messages if m.role == "assistant"] == ["done-interlude-run-6"]

    driver = FakeDriver(ScriptedAgent(text_first))
    chat = driver.chat(Options(retry=RetryPolicy(max_attempts=1)))
    chat.send("go")
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError)
    assert str(chat.error).startswith("the stream began with TEXT_MESSAGE_START, not RUN_STARTED")


def test_R_J3_a_broken_typed_event_after_run_finished_is_a_late_violation() -> None:
    """R-J3: after RUN_FINISHED an adapter's typed event that has no wire form is still
    something more than a late RUN_ERROR: a protocol error that leaves the batch."""

    _, chat, batch, paused = paused_with_its_stream_open()
    broken = TextMessageContent(message_id="m1", delta=object())  # type: ignore[arg-type]
    chat.apply(EventReceived(paused, broken))
    assert isinstance(chat.error, ProtocolError)
    assert "the endpoint sent more after RUN_FINISHED" in str(chat.error)
    assert chat.pending_interrupts is batch and chat.core_state.lingering == frozenset()


def test_R_H1_ids_a_run_streamed_under_the_prefix_are_not_generated_again() -> None:
    """A run may stream a message whose id is spelt under this client's id prefix (another
    client's on the thread, with the same default prefix, or an agent echoing ids). As for
    ids a MESSAGES_SNAPSHOT, set_messages or a restored history brings, later generated
    ids must not repeat it: two messages with one id break reconciliation by id."""
    streamed = "interlude-msg-5"  # the id the next send() would generate (the fake's prefix)
    driver = FakeDriver(ScriptedAgent(succeed()).then(succeed(*text(streamed, "from the agent"))))
    chat = driver.chat()
    chat.send("first")
    driver.run_until_idle()
    assert streamed in [m.id for m in chat.messages]
    chat.send("second")
    driver.run_until_idle()
    ids = [m.id for m in chat.messages]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


# -- a third mutation round: the rest of core/reducer.py -----------------------------------


def test_step_names_a_class_that_is_not_an_input_as_what_it_is() -> None:
    """A driver passing an input class uncalled (Stop, not Stop()) is told to call it; any
    other class is simply not an input, and the message does not suggest calling it."""
    state = initial_state()
    with pytest.raises(UsageError, match=r"^step\(\) takes an input, not the class Stop: call it$"):
        step(state, Stop, 0.0)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^type is not an interlude input$"):
        step(state, dict, 0.0)  # type: ignore[arg-type]


def test_completion_reload_with_no_input_runs_nothing() -> None:
    """SPEC, Resources (reload): a completion that has no input yet has nothing to run
    again: reload() returns False and changes nothing."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    comp = driver.completion()
    before = comp.core_state
    assert comp.reload() is False
    assert comp.core_state is before and driver.commands == []


def test_R_D5_a_local_tool_call_streamed_with_no_arguments_runs_with_an_empty_object() -> None:
    """R-D5: a call whose TOOL_CALL_ARGS never came (its arguments are the empty string)
    runs with ``{}``, as a call streamed with ``{}`` would; it is not a JSON error."""
    got: list[Any] = []

    def no_args(req: Any) -> Any:
        start, _, end = tool_call("c1", "t", "")
        return reply(started(req), start, end, finished(req))

    driver = FakeDriver(ScriptedAgent(succeed()).then(no_args))
    chat = driver.chat(local_tools={"t": lambda args: got.append(args) or "ok"})
    chat.send("go")
    driver.run_until_idle()
    assert got == [{}] and chat.error is None
    (result,) = (m for m in chat.messages if isinstance(m, ToolMessage))
    assert (result.content, result.error) == ("ok", None)


def test_R_F3_a_repeated_send_starting_after_the_send_changes_nothing() -> None:
    """R-F3: expiry is checked before the send. A SendStarting repeated for an attempt
    already sent (a driver announcing twice) comes too late for that check: the resume
    already went out, so an interrupt expiring since does not release its claim."""
    driver, chat, batch = paused_chat(ask(expires=at(60)), replies=[succeed(hold=True)])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    attempt = driver.of(StartAttempt)[-1].attempt
    before = chat.core_state
    assert before.claim is not None and before.run is not None
    transition = chat.apply(SendStarting(attempt), now=T0 + 120)
    assert transition.commands == () and chat.core_state is before
    assert chat.error is None and chat.is_resuming


def test_R_D3_new_input_on_a_batch_not_yet_expired_points_to_resume() -> None:
    """R-D3: new input on a pending batch that has an expiry, not reached yet, is told to
    answer it with resume(); the message does not call the batch expired."""
    _, chat, _ = paused_chat(ask(expires=at(60)))
    error = rejected(chat, InterruptPendingError, lambda: chat.send("more"))
    assert "is waiting for answers; answer it with resume()" in str(error)
    assert "expired" not in str(error)


def test_R_F3_an_interrupt_expiring_while_its_resume_is_in_flight_does_not_end_it() -> None:
    """R-F3: expiry is checked before each send of the resume. An interrupt that expires
    once the resume went out, while its answer is awaited, does not abort it: the
    acknowledgement still retires the batch and the resumed run finishes."""
    driver, chat, batch = paused_chat(ask(expires=at(60)), replies=[succeed(hold=True)])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    resumed = driver.of(StartAttempt)[-1].attempt
    driver.advance_to(T0 + 61)  # the batch's expiry timer fires
    assert chat.is_resuming and chat.error is None
    assert AbortAttempt(resumed) not in driver.commands
    driver.release(10)
    driver.run_until_idle()
    assert chat.error is None and chat.pending_interrupts is None and not chat.is_loading


def test_R_F1_an_observer_failing_while_local_tools_run_cancels_them() -> None:
    """R-F1: an observer's exception is an application error that ends the interaction,
    also between runs while local tools are running: each is cancelled, its call gets a
    result saying so, and no follow-up request goes out."""
    driver = RecordingDriver(
        ScriptedAgent(succeed()).then(
            lambda req: reply(started(req), *tool_call("c1", "t", {}), finished(req))
        ),
        manual_tools=True,
    )
    chat = driver.chat(local_tools={"t": lambda args: "ok"})

    def fail_once_tools_run(resource: Any) -> None:
        if resource.core_state.tools is not None and not driver.of(CancelTool):
            raise RuntimeError("observer bug")

    chat.subscribe(fail_once_tools_run)
    chat.send("go")
    driver.run_until_idle()
    (run,) = driver.tool_runs
    assert isinstance(chat.error, ObserverError)
    assert driver.of(CancelTool) == [CancelTool(run.task)]
    assert chat.core_state.tools is None and not chat.is_loading
    assert [m.content for m in chat.messages if isinstance(m, ToolMessage)] == [
        "Error: cancelled: the interaction failed before the tool returned "
        "(it may have run in part, or not at all)"
    ]
    assert len(driver.requests) == 1


def test_R_G3_observers_learn_of_the_earliest_expiry_while_a_claim_waits_out_a_back_off() -> None:
    """R-G3 under cancel_expired: the resume cancels 'p' (expiring at 30 s) and answers 'q'
    (at 60 s); its attempt fails and waits a 100 s back-off. 'p' expiring does not block
    that retry, but the batch shows as expired from then on, so observers are told at
    30 s, not only when 'q' expires."""
    driver, chat = resumed_into_a_back_off(30, 60)
    assert chat.is_retrying and chat.is_resuming and not chat.is_expired
    seen: list[tuple[float, bool]] = []
    chat.subscribe(lambda r: seen.append((driver.clock.now(), r.is_expired)))
    driver.advance(45)
    assert seen == [(T0 + 30, True)]
    assert chat.is_retrying and chat.is_resuming and chat.error is None


def test_send_accepts_a_message_id_equal_to_its_user_messages_own() -> None:
    """SPEC, Resources (send): the id may be given as message_id or on the UserMessage;
    given both ways and equal, it is given once in effect and the message is sent."""
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    chat.send(UserMessage(id="u1", content="hi"), message_id="u1")
    driver.run_until_idle()
    assert chat.messages[0].id == "u1" and chat.error is None


def test_R_H1_a_new_id_prefix_starts_past_the_thread_id_under_it() -> None:
    """R-H1: a thread id saved under a prefix the options only now declare is not
    generated again: the next generated thread id counts past it."""
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat(thread_id="app-thread-7")
    chat.configure(Options(id_prefix="app"))
    chat.set_thread_id(None)
    assert chat.thread_id is not None and chat.thread_id.startswith("app-thread-")
    assert int(chat.thread_id.rsplit("-", 1)[1]) > 7


def test_R_J3_a_run_finished_for_another_run_says_so() -> None:
    """R-J3: a RUN_FINISHED whose run id is not the request's ends the interaction with a
    ProtocolError naming both; nothing the run streamed is committed."""

    def wrong_run(req: Any) -> Any:
        other = {"type": "RUN_FINISHED", "threadId": req.thread_id, "runId": "someone-else"}
        return reply(started(req), *text("m1", "hi"), other)

    driver = FakeDriver(ScriptedAgent(succeed()).then(wrong_run))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError)
    assert "RUN_FINISHED for thread" in str(chat.error)
    assert "run 'someone-else' does not match the run" in str(chat.error)
    assert [m.role for m in chat.messages] == ["user"]


def test_R_H1_a_broken_typed_event_for_an_attempt_never_issued_is_a_usage_error() -> None:
    """A typed event with no wire form for an attempt this state never issued is a
    driver bug, refused as one, not silently dropped as a retired attempt's would be."""
    chat = FakeDriver(ScriptedAgent(succeed())).chat()
    broken = TextMessageContent(message_id="m1", delta=object())  # type: ignore[arg-type]
    error = rejected(chat, UsageError, lambda: chat.apply(EventReceived(999, broken)))
    assert "EventReceived: attempt 999 was never issued by this state" in str(error)


def test_a_local_tool_returning_a_value_that_is_not_json_gets_an_error_result() -> None:
    """R-D5: a local tool's value that JSON cannot carry is not sent as is: the call gets
    an error result naming the tool, and the follow-up request goes out with it."""

    def calls(req: Any) -> Any:
        return reply(started(req), *tool_call("c1", "t", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(succeed()).then(calls))
    chat = driver.chat(local_tools={"t": lambda args: {1, 2}})
    chat.send("go")
    driver.run_until_idle()
    (result,) = (m for m in chat.messages if isinstance(m, ToolMessage))
    assert result.error is not None
    assert result.error.startswith("tool 't' returned a value that is not JSON")
    assert len(driver.requests) == 2 and chat.error is None


def test_R_F1_an_observer_failing_with_nothing_in_progress_is_recorded() -> None:
    """R-F1: an observer's exception is reported as the resource's error also when no run
    or tool is in progress (here on a set_state while idle)."""
    chat = FakeDriver(ScriptedAgent(succeed())).chat()

    def broken(resource: Any) -> None:
        if resource.error is None:
            raise RuntimeError("observer bug")

    chat.subscribe(broken)
    chat.set_state({"a": 1})
    assert isinstance(chat.error, ObserverError) and "observer bug" in str(chat.error)
    assert not chat.is_loading


def test_R_G1_now_given_as_an_int_is_read_as_epoch_seconds() -> None:
    """R-G1, R-G4: step() takes ``now`` as an int too (whole epoch seconds): an expiry is
    judged against it as against the same float."""
    _, chat, _ = paused_chat(ask(expires=at(60)))
    later = int(T0) + 61
    error = rejected(chat, InterruptPendingError, lambda: chat.apply(Send("more"), now=later))
    assert "has expired and cannot be answered" in str(error)


def test_R_D4_a_call_a_messages_snapshot_brought_and_the_run_names_is_not_run() -> None:
    """R-D4, R-J6: a call that only a MESSAGES_SNAPSHOT brought (an earlier run's, saved
    on the thread) is not started by this run; named in pendingToolCallIds it is not
    run again and gets no second result, and a warning says why."""
    call = {"id": "c9", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    history = [
        {"id": "u0", "role": "user", "content": "earlier"},
        {"id": "a9", "role": "assistant", "toolCalls": [call]},
    ]
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": history}
    named = {"type": "success", "pendingToolCallIds": ["c9"]}
    ran: list[Any] = []
    driver = FakeDriver(ScriptedAgent(succeed()).then(succeed(snapshot, outcome=named)))
    chat = driver.chat(local_tools={"t": ran.append})
    chat.send("go")
    driver.run_until_idle()
    assert ran == [] and len(driver.requests) == 1 and chat.error is None
    assert not any(isinstance(m, ToolMessage) for m in chat.messages)
    assert any("'c9'" in w and "R-D4" in w for w in chat.warnings)


def test_R_H1_a_stale_timer_with_the_first_number_issued_is_ignored() -> None:
    """R-H1: a timer number the state handed out, the very first (1) included, that is
    no longer live is ignored; only a number never issued is a driver bug."""
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    before = chat.core_state
    assert chat.apply(TimerFired(1)).commands == ()
    assert chat.core_state is before
    rejected(chat, UsageError, lambda: chat.apply(TimerFired(0)))


def test_R_F1_resources_with_different_id_prefixes_back_off_for_different_times() -> None:
    """R-F1, RetryPolicy.jitter_seed None: the jitter is drawn from the resource's id
    prefix, so two clients failing together (here identical but for the prefix) do not
    retry together."""

    def retry_wait(prefix: str) -> float:
        driver = FakeDriver(ScriptedAgent(succeed()).then(refuse(503)))
        chat = driver.chat(Options(id_prefix=prefix))
        chat.send("go")
        driver.run_until_idle(follow_retries=False)
        assert chat.is_retrying
        ((due, _),) = driver.pending_timers()
        return due

    assert retry_wait("client-a") != retry_wait("client-b")


def test_R_J6_a_lone_named_call_the_history_does_not_hold_gets_an_error_result() -> None:
    """R-J6: a run naming in pendingToolCallIds only a call the history does not hold is
    answered with an error tool message saying so, and the follow-up carries it."""
    named = {"type": "success", "pendingToolCallIds": ["nope"]}
    driver = FakeDriver(ScriptedAgent(succeed()).then(succeed(outcome=named)))
    chat = driver.chat(local_tools={"t": lambda args: "ok"})
    chat.send("go")
    driver.run_until_idle()
    (result,) = (m for m in chat.messages if isinstance(m, ToolMessage))
    assert result.tool_call_id == "nope" and result.error is not None
    assert "the history holds no call with that id" in result.error
    assert len(driver.requests) == 2 and chat.error is None


def test_R_H1_a_thread_id_set_under_the_prefix_is_never_generated() -> None:
    """R-H1: after set_thread_id with an id under this client's prefix, moving to a
    generated thread never produces that id again: it counts past it."""
    chat = FakeDriver(ScriptedAgent(succeed())).chat()
    chat.set_thread_id("interlude-thread-50")
    chat.set_thread_id(None)
    assert chat.thread_id is not None and chat.thread_id.startswith("interlude-thread-")
    assert int(chat.thread_id.rsplit("-", 1)[1]) > 50


def test_R_E5_a_completions_reload_during_its_run_supersedes_that_run() -> None:
    """R-E5, SPEC Resources (reload): reload() during a completion's run replaces it: the
    running attempt is aborted before its input is sent again."""
    driver = RecordingDriver(ScriptedAgent(succeed(hold=True)))
    comp = driver.completion()
    comp.set_input("question")
    driver.run_until_idle()
    first = driver.of(StartAttempt)[-1].attempt
    assert comp.reload() is True
    assert AbortAttempt(first) in driver.commands
    assert driver.commands.index(AbortAttempt(first)) < len(driver.commands) - 1
    assert driver.of(StartAttempt)[-1].attempt != first


def test_R_F3_a_resume_whose_interrupt_expired_before_its_send_says_nothing_was_sent() -> None:
    """R-F3: expiry found immediately before the resume's first send stops it; the
    error says the answers were not sent (no attempt went out to retry)."""
    driver, chat, batch = paused_chat(ask(expires=at(60)), replies=[succeed()])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.advance_to(T0 + 61)  # before the driver gets to send it
    driver.run_until_idle()
    assert isinstance(chat.error, BatchExpiredError)
    assert "expired before the answers were sent; nothing was sent" in str(chat.error)
    assert len(driver.requests) == 1 and chat.pending_interrupts is batch


def tool_rounds_completion(
    answers: dict[int, Any], limit: int
) -> tuple[FakeDriver, Any, list[int]]:
    """A completion with local tool "t" and max_tool_rounds=``limit``: request n is
    answered by ``answers[n]`` if given, else by a call of "t" carrying n (which the
    tool records in the returned list when it runs)."""
    ran: list[int] = []

    def answer(req: Any) -> Any:
        n = len(driver.requests)
        if n in answers:
            return answers[n](req)
        return reply(started(req), *tool_call(f"c{n}", "t", {"n": n}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    comp = driver.completion(
        Options(max_tool_rounds=limit), local_tools={"t": lambda args: ran.append(args["n"])}
    )
    return driver, comp, ran


def test_R_D5_R_E2_the_deferred_input_run_after_a_settle_gets_max_tool_rounds_anew() -> None:
    """R-D5, R-E2: an input changed during a resumed interaction runs once that interaction
    settles; the settle ends the interaction, so the new one's tool rounds count from
    zero: with max_tool_rounds=1 its first round runs and its second is refused."""

    def pause_it(req: Any) -> Any:
        return reply(started(req), interrupted(req, ask()))

    driver, comp, ran = tool_rounds_completion({1: pause_it, 3: succeed()}, limit=1)
    comp.set_input("first")
    driver.run_until_idle()
    batch = comp.pending_interrupts
    assert batch is not None
    comp.set_input("second")  # deferred until the resumed interaction settles
    comp.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    # 2: the resume's round; 3: its follow-up settles; 4: "second", whose round runs;
    # 5: its second round, refused.
    assert [r.json["messages"][0]["content"] for r in driver.requests[3:]] == ["second"] * 2
    assert ran == [2, 4]
    assert isinstance(comp.error, ToolError)
    assert "asked for round 2 of local tools" in str(comp.error)
    assert len(driver.requests) == 5


def test_R_D5_R_E4_the_input_sent_again_on_a_new_thread_gets_max_tool_rounds_anew() -> None:
    """R-D5, R-E4: set_thread_id during an interaction that already ran its one allowed
    tool round (max_tool_rounds=1) sends the input again on the new thread as a new
    interaction: its first round of local tools runs, its second is refused."""

    def open_follow_up(req: Any) -> Any:
        return held(started(req))

    driver, comp, ran = tool_rounds_completion({2: open_follow_up}, limit=1)
    comp.set_input("question")
    driver.run_until_idle()
    assert ran == [1] and comp.is_loading  # round 1 ran; its follow-up is open
    comp.set_thread_id("thread-2")
    driver.run_until_idle()
    assert [r.thread_id for r in driver.requests[2:]] == ["thread-2"] * 2
    assert ran == [1, 3]
    assert isinstance(comp.error, ToolError)
    assert "asked for round 2 of local tools" in str(comp.error)
    assert len(driver.requests) == 4


@pytest.mark.parametrize(
    ("opening", "said"),
    [
        (lambda req: reply(), "the stream ended before RUN_STARTED"),
        (
            lambda req: reply(*text("m1", "early"), started(req), finished(req)),
            "the stream began with TEXT_MESSAGE_START, not RUN_STARTED",
        ),
        (
            lambda req: reply({**started(req), "runId": "other"}, finished(req)),
            "RUN_STARTED for thread 'interlude-thread-2' run 'other' does not match the request",
        ),
    ],
    ids=["empty", "text-first", "other-run"],
)
def test_R_J3_R_F1_a_stream_failing_before_run_started_is_retried_and_says_retryable(
    opening: Any, said: str
) -> None:
    """R-J3, R-F1: before the acknowledgement a stream that ends, begins with another
    event or acknowledges another run is a retryable ProtocolError: a retry is scheduled,
    and once the budget is spent the error the user reads says retryable=True."""
    driver = RecordingDriver(ScriptedAgent(opening))
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0, max_attempts=2)))
    chat.send("go")
    step_until(driver, lambda: bool(driver.pending_timers()))
    assert [p for _, p in driver.pending_timers()] == ["retry"] and chat.error is None
    driver.run_until_idle()
    assert len(driver.requests) == 2
    error = chat.error
    assert type(error) is ProtocolError and error.retryable is True
    assert error.message.startswith(said)
    assert error.message.endswith("(gave up after 2 attempt(s), RetryPolicy.max_attempts)")


@pytest.mark.parametrize("outcome", [None, {"type": "success", "pendingToolCallIds": ["c1"]}])
def test_R_D5_a_call_held_by_the_first_message_of_the_history_runs(
    outcome: dict[str, Any] | None,
) -> None:
    """R-D5, R-J6: a run whose MESSAGES_SNAPSHOT empties the history, then calls a local
    tool and says something, leaves the call's message first in the history, a text
    after it; the call is still found and run (whether the run names it in
    pendingToolCallIds or not), and the follow-up carries the call and its result."""
    ran: list[Any] = []

    def call_first(req: Any) -> Any:
        snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": []}
        call = tool_call("c1", "t", {"q": 1})
        return reply(started(req), snapshot, *call, *text("m1", "asking"), finished(req, outcome))

    driver = FakeDriver(ScriptedAgent(succeed()).then(call_first))
    chat = driver.chat(local_tools={"t": lambda args: ran.append(args) or "found"})
    chat.send("go")
    driver.run_until_idle()
    assert ran == [{"q": 1}] and chat.error is None
    follow_up = driver.requests[1]
    assert [m["id"] for m in follow_up.json["messages"]][:2] == ["c1", "m1"]
    assert follow_up.tool_results == {"c1": "found"}


def test_stop_names_the_cause_it_is_given_in_each_cancelled_tool_result() -> None:
    """SPEC, Resources (stop): ``Stop(why)`` cancels the tools in progress, and each
    cancelled call's result gives that cause; ``stop()`` gives "stop() was called". A
    driver closing its resources says so rather than naming a stop() nobody called."""
    for stop, cause in [
        (lambda chat: chat.stop(), "stop() was called"),
        (lambda chat: chat.apply(Stop("the host shut down")), "the host shut down"),
    ]:
        driver = RecordingDriver(
            ScriptedAgent(
                lambda req: reply(started(req), *tool_call("c1", "t", {}), finished(req))
            ),
            manual_tools=True,
        )
        chat = driver.chat(local_tools={"t": lambda args: "ok"})
        chat.send("go")
        driver.run_until_idle()
        (run,) = driver.tool_runs
        stop(chat)
        assert driver.of(CancelTool) == [CancelTool(run.task)]
        assert not chat.is_loading and chat.error is None
        assert [m.content for m in chat.messages if isinstance(m, ToolMessage)] == [
            f"Error: cancelled: {cause} before the tool returned "
            "(it may have run in part, or not at all)"
        ]


@pytest.mark.parametrize("why", ["", 5, None])
def test_stop_refuses_a_cause_that_is_not_a_non_empty_string(why: object) -> None:
    """A Stop whose ``why`` is not text is refused before anything stops, even with
    nothing in progress, and the state stays as it was."""
    driver = RecordingDriver(
        ScriptedAgent(lambda req: reply(started(req), *tool_call("c1", "t", {}), finished(req))),
        manual_tools=True,
    )
    chat = driver.chat(local_tools={"t": lambda args: "ok"})
    rejected(chat, UsageError, lambda: chat.apply(Stop(why)))  # type: ignore[arg-type]
    chat.send("go")
    driver.run_until_idle()
    error = rejected(chat, UsageError, lambda: chat.apply(Stop(why)))  # type: ignore[arg-type]
    assert str(error).startswith("Stop.why must be a non-empty string (got ")
    assert chat.is_loading and driver.of(CancelTool) == []


def test_R_D5_a_rounds_task_numbers_are_new_and_the_last_can_finish_first() -> None:
    """R-D5 and the driver contract (every number goes back as it is): a round's task
    numbers are drawn past every number issued before it, and reserved, so no attempt,
    timer or task shares a number a driver keys its work by, and the round's last task
    may report first."""
    agent = ScriptedAgent(succeed()).then(
        succeed(*tool_call("c1", "t", {"n": 1}), *tool_call("c2", "t", {"n": 2}))
    )
    driver = RecordingDriver(agent, manual_tools=True)
    chat = driver.chat(local_tools={"t": lambda args: "ok"})
    chat.send("go")
    driver.run_until_idle()
    first, second = driver.tool_runs
    assert second.task == first.task + 1  # consecutive: a result finds its task by subtraction
    chat.apply(ToolFinished(second.task, value="r2"))
    chat.apply(ToolFinished(first.task, value="r1"))
    driver.run_until_idle()
    sent = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in sent] == [("c1", "r1"), ("c2", "r2")]
    numbers = [c.attempt for c in driver.of(StartAttempt)] + [first.task, second.task]
    assert len(numbers) == 4 and len(set(numbers)) == 4  # two attempts, two tasks
    assert (chat.is_loading, chat.error) == (False, None)


def test_R_J3_stop_during_a_tool_round_keeps_the_late_run_error_it_recorded() -> None:
    """R-J3, R-F7: a late RUN_ERROR on the stream of a run that finished with local tools
    still running is recorded as ``error``; stopping those tools afterwards cancels them
    and leaves that error as it is (a stop records no error, nor clears one)."""
    call = tool_call("c1", "t", {})

    def answer(req: Any) -> Any:
        return reply(started(req), *call, finished(req), run_error("late trouble"), hold=True)

    driver = RecordingDriver(ScriptedAgent(answer), manual_tools=True)
    chat = driver.chat(local_tools={"t": lambda args: "ok"})
    chat.send("go")
    assert driver.step()
    driver.release(len(call) + 2)  # RUN_STARTED, the call, RUN_FINISHED: the tool starts
    driver.run_until_idle()
    (run,) = driver.tool_runs
    assert chat.is_loading and chat.error is None
    driver.release(1)  # the late RUN_ERROR
    driver.run_until_idle()
    late = chat.error
    assert late is not None and "late trouble" in str(late)
    assert chat.is_loading  # the tool still runs
    chat.stop()
    assert driver.of(CancelTool) == [CancelTool(run.task)]
    assert not chat.is_loading and chat.error is late


def test_R_F3_a_second_claim_in_back_off_is_released_when_its_own_blocker_expires() -> None:
    """R-F3, R-G3 under cancel_expired, on 'p', 'q' and 'r' (expiring at 5, 30 and 60 s):
    a first resume cancels 'p' and 'q', fails, waits a back-off and is stopped, leaving
    the expiry timer it set for 'r'. A second resume cancels only 'p'; it fails too, and
    'q' expiring during its back-off releases it at 30 s, not at the 60 s timer the
    first claim left."""
    fail = TransportError.from_status(503, "")
    options = Options(
        expiry="cancel_expired", retry=RetryPolicy(jitter=0, base_delay=100, max_delay=100)
    )
    driver, chat, batch = paused_chat(
        ask("p", expires=at(5)),
        ask("q", expires=at(30)),
        ask("r", expires=at(60)),
        replies=[Reply(fail_before_send=fail), Reply(fail_before_send=fail)],
        options=options,
    )
    driver.advance(6)  # 'p' expires
    cancel = {"interrupt_id": "p", "status": "cancelled"}
    answer_r = {"interrupt_id": "r", "status": "resolved", "payload": 1}
    chat.resume(batch.id, [cancel, {"interrupt_id": "q", "status": "cancelled"}, answer_r])
    driver.run_until_idle(follow_retries=False)  # the 503: a back-off of 100 s
    assert chat.is_retrying and chat.is_resuming
    assert [due - T0 for due, p in driver.pending_timers() if p == "expiry"] == [60]
    chat.stop()  # before the acknowledgement: the claim is released (R-F4)
    assert chat.core_state.claim is None and chat.pending_interrupts is batch
    chat.resume(
        batch.id, [cancel, {"interrupt_id": "q", "status": "resolved", "payload": 2}, answer_r]
    )
    driver.run_until_idle(follow_retries=False)
    assert chat.is_retrying and chat.is_resuming
    assert [due - T0 for due, p in driver.pending_timers() if p == "expiry"] == [30]
    driver.advance(25)  # 'q' expires, long before the retry and before 'r'
    assert (chat.is_resuming, chat.is_loading, chat.core_state.claim) == (False, False, None)
    assert isinstance(chat.error, BatchExpiredError) and chat.error.interrupt_ids == ("q",)
    assert chat.pending_interrupts is batch


def test_send_and_set_messages_on_a_completion_are_usage_errors() -> None:
    """SPEC, Resources: a completion takes its input through set_input; send() and
    set_messages() on one are refused before anything runs, and say so."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    comp = driver.completion()
    for verb, call in [
        ("send", lambda: comp.send("hi")),
        ("set_messages", lambda: comp.set_messages([UserMessage(id="u1", content="hi")])),
    ]:
        error = rejected(comp, UsageError, call)
        assert str(error) == (
            f"{verb} is for chat resources; a completion takes its input through set_input"
        )
    assert driver.commands == [] and not comp.is_loading


def test_R_D3_new_input_while_a_resume_is_in_flight_says_the_batch_is_claimed() -> None:
    """R-D3, R-C2: while a resume's claim is held, new input is refused with
    InterruptPendingError saying the batch is claimed and to wait (is_resuming), not
    that it awaits answers (resume() again would be refused as claimed)."""
    driver, chat, batch = paused_chat(replies=[lambda req: held(started(req))])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()  # the resume is sent, not acknowledged
    assert chat.core_state.claim is not None
    error = rejected(chat, InterruptPendingError, lambda: chat.send("more"))
    assert f"batch {batch.id!r} is claimed by a resume in flight; wait for it" in str(error)
    assert "waiting for answers" not in str(error)


def test_R_F1_a_runs_first_attempt_is_number_1_and_its_retry_number_2() -> None:
    """R-F1: the retry budget counts a run's attempts; the state's Attempt says which one
    it is (1 for the first, as documented), and the retry that follows is number 2."""
    t = step(initial_state(Options(retry=RetryPolicy(jitter=0)), thread_id="t1"), Send("hi"), 0.0)
    (start,) = t.commands
    assert isinstance(start, StartAttempt)
    run = t.state.run
    assert run is not None and run.attempt is not None and run.attempt.number == 1
    s = step(t.state, SendStarting(start.attempt), 0.0).state
    s = step(s, AttemptFailed(start.attempt, TransportError("x", retryable=True)), 0.0).state
    assert s.run is not None and s.run.retry_timer is not None
    s = step(s, TimerFired(s.run.retry_timer), 100.0).state
    assert s.run is not None and s.run.attempt is not None
    assert (s.run.attempt.number, s.run.attempts) == (2, 2)


def test_R_C3_R_H1_no_timer_set_means_no_cancel_timer_at_the_ack_or_a_thread_change() -> None:
    """R-C3, R-H1: a batch without an expiry has no expiry timer; its resume's
    acknowledgement and a later thread change cancel none, so a driver never gets a
    CancelTimer for a timer it was not given (every command's number is one it got)."""
    driver, chat, batch = paused_chat(replies=[succeed()])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    assert chat.pending_interrupts is None and chat.error is None
    chat.set_thread_id("t-2")
    assert driver.of(StartTimer) == [] and driver.of(CancelTimer) == []
