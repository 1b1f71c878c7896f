"""Reducer behaviour a mutation-testing round found unguarded: each test here failed
against a one-line change to core/reducer.py or core/stream.py that the rest of the
suite let through."""

from __future__ import annotations

from typing import Any

from rule_support import RecordingDriver, ask, at, paused_chat, succeed

from interlude.adapters.fake import (
    FakeDriver,
    ScriptedAgent,
    finished,
    held,
    interrupted,
    reply,
    started,
    text,
    tool_call,
)
from interlude.core import (
    AbortAttempt,
    AttemptFailed,
    Options,
    RetryPolicy,
    SendStarting,
    StartAttempt,
    TimerFired,
    ToolError,
    ToolFinished,
    ToolMessage,
)
from interlude.core.errors import BatchExpiredError, TransportError
from interlude.core.wire import AssistantMessage, FunctionCall, ToolCall, UserMessage


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


def test_max_tool_rounds_allows_that_many_rounds_then_stops() -> None:
    """R-D5 with Options.max_tool_rounds: the loop goes on for that many rounds, and the
    next round is refused with a ToolError, no follow-up."""

    def answer(req: Any) -> Any:
        return reply(started(req), *tool_call(f"c{len(driver.requests)}", "t", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(Options(max_tool_rounds=1), local_tools={"t": lambda args: "ok"})
    chat.send("go")
    driver.run_until_idle()
    assert len(driver.requests) == 2  # one round ran, with its follow-up
    assert isinstance(chat.error, ToolError) and "max_tool_rounds" in str(chat.error)
    assert not chat.is_loading


def test_a_call_whose_parent_is_not_an_assistant_message_gets_its_own() -> None:
    """R-F7: a TOOL_CALL_START naming a reasoning message as its parent must not crash the
    reducer; as AG-UI clients do, the call gets an assistant message of its own."""

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
    assert chat.error is None and len(driver.requests) == 2


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
