"""State, tools and new input while paused (R-D1..R-D5); deferred completion input (R-E1..R-E5).

Every scenario runs on the step-by-step fake driver against a scripted agent:
no threads, no sockets, no sleeping. A rejected intent must raise its typed
error and leave ``core_state`` exactly as it was.
"""

from __future__ import annotations

import json
import math
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest
from rule_support import (
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
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    drop,
    finished,
    held,
    reply,
    run_error,
    started,
    state_snapshot,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core import inputs as i
from interlude.core.commands import AbortAttempt
from interlude.core.errors import (
    BatchExpiredError,
    InterruptPendingError,
    RunError,
    StateLockedError,
    TransportError,
    UsageError,
)
from interlude.core.json import FrozenDict, NotJSONError, thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.pvec import PVec
from interlude.core.state import Batch
from interlude.core.wire.messages import AssistantMessage, ToolMessage, UserMessage

# -- helpers --------------------------------------------------------------------------

ASK = ask()
EXACT_RETRY = Options(retry=RetryPolicy(jitter=0, base_delay=1.0, max_attempts=3))


def answer_completion(req: Request) -> Reply:
    """The default completion agent: answers its input."""
    content = req.json["messages"][0]["content"]
    return reply(started(req), *text(f"out-{req.run_id}", f"answer to {content}"), finished(req))


def approve(batch: Batch, payload: Any = None) -> list[dict[str, Any]]:
    return [
        {"interrupt_id": it.id, "status": "resolved", "payload": payload or {"approved": True}}
        for it in batch.interrupts
    ]


# -- R-D1 -------------------------------------------------------------------------------


def test_R_D1_set_state_while_paused_is_sent_by_resume_and_alone_sends_nothing():
    """R-D1, R-B6: state writes while paused are allowed, send nothing, and resume carries
    the latest one."""
    first = pause(before=[state_snapshot({"step": 1})])
    driver, chat, batch = paused_chat(first=first)
    assert thaw(chat.state) == {"step": 1}

    chat.set_state({"step": 2})
    chat.set_state({"step": 3, "note": "edited while paused"})
    assert thaw(chat.state) == {"step": 3, "note": "edited while paused"}
    assert_paused(chat, batch)
    assert chat.error is None
    driver.run_until_idle()
    assert len(driver.requests) == 1  # state changes alone never resume
    assert not driver.step()
    assert_paused(chat, batch)

    chat.resume(batch.id, approve(batch))
    driver.run_until_idle()
    resume_req = driver.requests[1]
    assert resume_req.json["state"] == {"step": 3, "note": "edited while paused"}
    assert resume_req.resume == [
        {"interruptId": "approve", "status": "resolved", "payload": {"approved": True}}
    ]


def test_R_D1_a_state_derived_with_frozendict_set_is_deeply_immutable():
    """R-D1: ``chat.set_state(chat.state.set("cart", cart))`` stores a frozen copy of
    ``cart``: changing the list afterwards changes neither the state nor what resume
    sends (the state is deeply immutable JSON, reference.md)."""
    driver, chat, batch = paused_chat()
    cart = ["lamp"]
    chat.set_state(chat.state.set("cart", cart))
    cart.append("sofa")
    assert thaw(chat.state) == {"cart": ["lamp"]}
    assert isinstance(chat.state["cart"], tuple)
    chat.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert driver.requests[1].json["state"] == {"cart": ["lamp"]}


def test_R_D1_a_state_built_as_a_frozendict_is_deeply_immutable():
    """R-D1: ``FrozenDict`` is exported for applications to build objects with; built
    like a ``dict``, it freezes what it is given, so ``set_state(FrozenDict(cart=cart))``
    stores a copy of ``cart``: changing the list afterwards changes neither the state
    nor what resume sends. Before, the constructor kept the list itself, and freeze()
    trusts a FrozenDict as frozen."""
    driver, chat, batch = paused_chat()
    cart = ["lamp"]
    options = {"gift": False}
    chat.set_state(FrozenDict({"cart": cart}, options=options))
    cart.append("sofa")
    options["gift"] = True
    assert thaw(chat.state) == {"cart": ["lamp"], "options": {"gift": False}}
    assert isinstance(chat.state["cart"], tuple)
    assert isinstance(chat.state["options"], FrozenDict)
    chat.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert driver.requests[1].json["state"] == {"cart": ["lamp"], "options": {"gift": False}}


def test_R_D1_a_frozendict_refuses_what_is_not_json_where_it_is_built():
    """R-D1, R-B2: a NaN (or any value with no JSON form) is refused by the
    ``FrozenDict`` constructor, as by ``freeze``, rather than accepted by set_state()
    and failing the next send. A built FrozenDict cannot be re-initialised either."""
    for members in ({"total": math.nan}, {"tags": {1, 2}}, {"deep": [math.inf]}, {1: "a"}):
        with pytest.raises(NotJSONError):
            FrozenDict(members)
    assert FrozenDict() == {} and FrozenDict(a=1) == {"a": 1}
    made = FrozenDict(a=1)
    with pytest.raises(TypeError, match="read-only"):
        made.__init__({"b": 2})  # type: ignore[misc]
    assert made == {"a": 1}
    assert pickle.loads(pickle.dumps(made)) == made


# -- R-D2 -------------------------------------------------------------------------------


def test_R_D2_set_state_locked_from_claim_through_the_resumed_run():
    """R-D2, R-C2: locked from the synchronous claim, through the send, at the matching
    RUN_STARTED (a run then owns the state, as the errors table says), until the
    resumed run ends."""
    driver, chat, batch = paused_chat(
        replies=[succeed(state_snapshot({"server": "after"}), hold=True)]
    )
    chat.set_state({"client": "before"})
    chat.resume(batch.id, approve(batch))
    # claimed, not sent yet
    locked = rejected(chat, StateLockedError, lambda: chat.set_state({"x": 1}))
    assert "set it once the resumed run has finished (is_loading becomes False)" in str(locked)
    assert driver.step()  # the resume request goes out; its stream is held
    assert len(driver.requests) == 2
    rejected(chat, StateLockedError, lambda: chat.set_state({"x": 2}))
    assert chat.pending_interrupts is batch

    driver.release(1)
    assert driver.step()  # the matching RUN_STARTED
    assert chat.pending_interrupts is None
    assert chat.is_resuming and chat.is_loading
    locked = rejected(chat, StateLockedError, lambda: chat.set_state({"x": 3}))
    # Not "stop() first": inside a resumed interaction that costs the thread (R-F5).
    assert str(locked) == (
        "cannot set_state: the resumed run owns the state until it finishes; set it once "
        "is_loading becomes False"
    )

    driver.release(100)
    driver.run_until_idle()
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    assert thaw(chat.state) == {"server": "after"}
    assert driver.requests[1].json["state"] == {"client": "before"}
    chat.set_state({"x": 4})  # the interaction settled: allowed again
    assert thaw(chat.state) == {"x": 4}
    driver.run_until_idle()
    assert len(driver.requests) == 2


def test_R_D2_set_state_locked_during_a_retry_wait_before_ack():
    """R-D2, R-F2: the claim is still held while waiting to retry; the retry sends the
    captured state, not a later one."""
    driver, chat, batch = paused_chat(
        replies=[
            lambda req: Reply(fail_before_send=TransportError("refused", retryable=True)),
            succeed(),
        ],
        options=EXACT_RETRY,
    )
    chat.set_state({"v": "captured"})
    chat.resume(batch.id, approve(batch))
    assert driver.step()  # first attempt fails: a retry wait
    assert len(driver.requests) == 2
    assert chat.pending_interrupts is batch and chat.is_resuming
    rejected(chat, StateLockedError, lambda: chat.set_state({"v": "late"}))
    driver.run_until_idle()
    assert len(driver.requests) == 3
    assert driver.requests[2].json["state"] == {"v": "captured"}
    assert driver.requests[2].body.replace(driver.requests[2].run_id, "RUN") == driver.requests[
        1
    ].body.replace(driver.requests[1].run_id, "RUN")


@pytest.mark.parametrize("release", ["stop", "run_error_before_ack", "retries_exhausted"])
def test_R_D2_set_state_allowed_again_once_the_claim_is_released(release: str):
    """R-D2, R-F4: stop or failure before the acknowledgement releases the claim; state
    writes are allowed again and the next resume carries them."""
    refused = [lambda req: Reply(fail_before_send=TransportError("refused", retryable=True))] * 3
    replies: list[Any] = {
        "stop": [],
        "run_error_before_ack": [lambda req: reply(run_error("nope", "E1"))],
        "retries_exhausted": refused,
    }[release]
    driver, chat, batch = paused_chat(replies=[*replies, succeed()], options=EXACT_RETRY)
    chat.resume(batch.id, approve(batch))
    if release == "stop":
        chat.stop()
    else:
        driver.run_until_idle()
    assert_paused(chat, batch)
    if release == "run_error_before_ack":
        assert chat.error == RunError("nope", "E1")
    elif release == "retries_exhausted":
        assert isinstance(chat.error, TransportError)
    else:
        assert chat.error is None
    sent = len(driver.requests)

    chat.set_state({"after": release})
    assert thaw(chat.state) == {"after": release}
    driver.run_until_idle()
    assert len(driver.requests) == sent

    chat.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert driver.requests[-1].json["state"] == {"after": release}
    assert driver.requests[-1].resume is not None
    assert (chat.pending_interrupts, chat.is_resuming, chat.error) == (None, False, None)


# -- R-D3 -------------------------------------------------------------------------------

NEW_INPUT: dict[str, Callable[[Resource], Any]] = {
    "send": lambda r: r.send("something else"),
    "set_messages": lambda r: r.set_messages([UserMessage(id="u-new", content="fresh start")]),
    "reload": lambda r: r.reload(),
}


@pytest.mark.parametrize("phase", ["pending", "claimed_unsent", "claimed_sent"])
@pytest.mark.parametrize("intent", sorted(NEW_INPUT))
def test_R_D3_new_chat_input_rejected_while_pending_or_claimed(intent: str, phase: str):
    """R-D3: send, set_messages and reload raise InterruptPendingError, change nothing and
    send nothing while the batch awaits answers or is claimed."""
    driver, chat, batch = paused_chat(replies=[succeed(hold=True)])
    if phase != "pending":
        chat.resume(batch.id, approve(batch))
    if phase == "claimed_sent":
        assert driver.step()
    err = rejected(chat, InterruptPendingError, lambda: NEW_INPUT[intent](chat))
    assert batch.id in str(err)
    assert chat.pending_interrupts is batch
    driver.run_until_idle()
    assert len(driver.requests) == (1 if phase == "pending" else 2)
    assert all(r.resume is not None for r in driver.requests[1:])


@pytest.mark.parametrize("policy", ["block", "cancel_expired"])
@pytest.mark.parametrize("intent", sorted(NEW_INPUT))
def test_R_D3_new_input_rejected_on_an_expired_batch_says_the_way_on(intent: str, policy: str):
    """R-D3, R-G2: an expired batch is still pending, so new input raises
    InterruptPendingError; its message gives the way on the policy allows, not a plain
    resume() that would raise BatchExpiredError."""
    driver, chat, _batch = paused_chat(
        ask(expires=at(30)), replies=[succeed()], options=Options(expiry=policy)
    )
    driver.advance(30)
    assert chat.is_expired
    err = rejected(chat, InterruptPendingError, lambda: NEW_INPUT[intent](chat))
    assert "expired" in str(err) and "set_thread_id" in str(err)
    if policy == "block":
        assert "resume" not in str(err)
    else:
        assert "cancelled" in str(err)


@pytest.mark.parametrize("intent", sorted(NEW_INPUT))
def test_R_D3_new_input_after_ack_supersedes_the_resumed_run(intent: str):
    """R-D3, R-C4: after the matching RUN_STARTED new input is allowed and supersedes the
    resumed run at once: no recovery requirement, no resume flag, an ordinary request
    without ``resume``, and the old stream's late events are ignored."""
    driver, chat, batch = paused_chat(replies=[succeed(hold=True), succeed()])
    chat.resume(batch.id, approve(batch))
    assert driver.step()
    driver.release(1)
    assert driver.step()  # matching RUN_STARTED
    assert chat.pending_interrupts is None and chat.is_resuming
    old = driver.requests[1]

    ran = NEW_INPUT[intent](chat)
    if intent == "reload":
        assert ran is True
    assert (chat.is_resuming, chat.needs_new_thread, chat.error) == (False, False, None)
    assert chat.is_loading
    assert chat.pending_interrupts is None
    assert AbortAttempt(old.attempt) in driver.commands

    before = chat.core_state
    late = finished(old)
    chat.apply(i.FrameReceived(old.attempt, json.dumps(late)))
    chat.apply(i.StreamEnded(old.attempt))
    assert chat.core_state == before

    driver.release(100)
    driver.run_until_idle()
    assert len(driver.requests) == 3
    new = driver.requests[2]
    assert new.resume is None and "resume" not in new.json
    assert new.thread_id == old.thread_id and new.run_id != old.run_id
    expected_users = {
        "send": ["hello", "something else"],
        "set_messages": ["fresh start"],
        "reload": ["hello"],
    }[intent]
    assert user_texts(new) == expected_users
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    assert chat.error is None
    assert chat.messages[-1].content == f"done {new.run_id}"


# -- R-D4 -------------------------------------------------------------------------------


@pytest.mark.parametrize("named", [False, True], ids=["derived", "named-pending"])
@pytest.mark.parametrize("server_result", [True, False])
def test_R_D4_resume_never_runs_saved_tool_calls_and_a_later_result_attaches(
    server_result: bool, named: bool
):
    """R-D4, R-A5, R-J6: a tool call saved at the interrupt is never executed locally, even
    for a registered local tool, and even when the resumed run names it in
    pendingToolCallIds (no fabricated result, no follow-up; a warning says why); a later
    TOOL_CALL_RESULT with its original id joins the history as a tool message for it."""
    ran: list[Any] = []
    result = {
        "type": "TOOL_CALL_RESULT",
        "messageId": "res-1",
        "toolCallId": "call-1",
        "content": "transferred 5",
    }
    first = pause(
        {**ASK, "toolCallId": "call-1"},
        before=tool_call("call-1", "transfer", {"amount": 5}),
    )
    named_outcome = {"type": "success", "pendingToolCallIds": ["call-1"]} if named else None
    driver, chat, batch = paused_chat(
        replies=[succeed(*([result] if server_result else []), outcome=named_outcome)],
        first=first,
        local_tools={"transfer": lambda args: ran.append(args) or "local!"},
    )
    assert ran == []
    assert batch.interrupts[0].tool_call_id == "call-1"
    assert len(driver.requests) == 1

    chat.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert ran == []
    assert len(driver.requests) == 2  # no follow-up run for the saved call
    sent = driver.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "assistant"]
    assert [c["id"] for m in sent for c in m.get("toolCalls", [])] == ["call-1"]
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    warned = [w for w in chat.warnings if "'call-1'" in w and "not run here" in w]
    assert len(warned) == (1 if named else 0)

    tool_msgs = [m for m in chat.messages if isinstance(m, ToolMessage)]
    if server_result:
        assert tool_msgs == [
            ToolMessage(id="res-1", content="transferred 5", tool_call_id="call-1")
        ]
        roles = [m.role for m in chat.messages]
        holder = next(
            n
            for n, m in enumerate(chat.messages)
            if isinstance(m, AssistantMessage) and m.tool_calls
        )
        assert roles.index("tool") > holder
    else:
        assert tool_msgs == []


def resumed_after_a_saved_call(reply: Callable[[Request], Reply]) -> Resource:
    """A chat paused on an interrupt about saved call c1 of the local tool "charge",
    resumed, the resumed run answering with ``reply``; checks the tool never ran."""
    ran: list[Any] = []
    first = pause({**ask(), "toolCallId": "c1"}, before=tool_call("c1", "charge", {"amount": 5}))
    driver, chat, batch = paused_chat(
        replies=[reply],
        first=first,
        local_tools={"charge": lambda args: ran.append(args) or "charged"},
    )
    chat.resume(batch.id, approve(batch, {"approved": False}))
    driver.run_until_idle()
    assert ran == [] and len(driver.requests) == 2
    assert not [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    return chat


def test_R_D4_a_saved_call_the_resumed_run_reopens_is_not_run() -> None:
    """R-D4, R-A5: the resumed run reopens the saved call (a TOOL_CALL_START with its id,
    which AG-UI 1.0 reads as a reopening: the arguments append, the call stays where it
    is, one call with that id). It is still a saved call, never executed here."""
    chat = resumed_after_a_saved_call(
        succeed(
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "charge"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": " "},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        )
    )
    calls = [
        c for m in chat.messages if isinstance(m, AssistantMessage) for c in m.tool_calls or ()
    ]
    assert [(c.id, c.function.arguments) for c in calls] == [("c1", '{"amount": 5} ')]


def test_R_D4_a_saved_call_named_pending_by_the_resumed_run_is_not_run() -> None:
    """R-D4, R-A5: the resumed run's success outcome names the saved call as pending; it
    is still a saved call, never executed here; a warning says why."""
    finished = {"type": "success", "pendingToolCallIds": ["c1"]}
    chat = resumed_after_a_saved_call(succeed(outcome=finished))
    assert [w for w in chat.warnings if "'c1'" in w and "an earlier run started" in w]


def test_R_D5_a_call_that_has_a_result_is_not_run_when_a_later_run_streams_it_again() -> None:
    """R-D5: only calls with no result yet run here, whichever run gave the result."""
    ran: list[Any] = []
    result = {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "done"}
    agent = ScriptedAgent(succeed()).then(
        succeed(*tool_call("c1", "t", {}), result),
        succeed(*tool_call("c1", "t", {})),
    )
    driver = RecordingDriver(agent)
    chat = driver.chat(local_tools={"t": lambda args: ran.append(args) or "local"})
    chat.send("one")
    driver.run_until_idle()
    chat.send("two")
    driver.run_until_idle()
    assert ran == [] and len(driver.requests) == 2
    assert [m.content for m in chat.messages if isinstance(m, ToolMessage)] == ["done"]


# -- R-D5 -------------------------------------------------------------------------------


def test_R_D5_only_genuinely_new_eligible_calls_run_then_a_follow_up():
    """R-D5: after a success only calls started in that run, for registered tools, with
    no result yet, run locally; the follow-up carries their results in call order and
    no ``resume``."""
    ran: list[tuple[str, Any]] = []
    tools = {
        "calc": lambda a: ran.append(("calc", a)) or {"sum": a["x"] + 1},
        "lookup": lambda a: ran.append(("lookup", a)) or f"found {a['q']}",
    }
    old_call = AssistantMessage(
        id="a-old",
        tool_calls=(_call("old-call", "lookup", '{"q": 0}'),),
    )
    answered = {
        "type": "TOOL_CALL_RESULT",
        "messageId": "r-answered",
        "toolCallId": "c-answered",
        "content": "server did it",
    }
    agent = ScriptedAgent(succeed()).then(
        succeed(
            *tool_call("c-remote", "remote_only", {"z": 1}),
            *tool_call("c-answered", "lookup", {"q": 9}),
            answered,
            *tool_call("c-1", "calc", {"x": 1}),
            *tool_call("c-2", "lookup", {"q": 2}),
        )
    )
    driver = RecordingDriver(agent)
    chat = driver.chat(
        local_tools=tools, messages=[UserMessage(id="u0", content="earlier"), old_call]
    )
    chat.send("go")
    driver.run_until_idle()
    assert ran == [("calc", {"x": 1}), ("lookup", {"q": 2})]
    assert len(driver.requests) == 2
    follow = driver.requests[1]
    assert follow.resume is None and "resume" not in follow.json
    assert follow.thread_id == driver.requests[0].thread_id
    tool_sent = [m for m in follow.json["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_sent] == ["c-answered", "c-1", "c-2"]
    assert json.loads(tool_sent[1]["content"]) == {"sum": 2}
    assert tool_sent[2]["content"] == "found 2"
    assert [m.tool_call_id for m in chat.messages if isinstance(m, ToolMessage)] == [
        "c-answered",
        "c-1",
        "c-2",
    ]
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)


def _call(call_id: str, name: str, arguments: str):
    from interlude.core.wire.messages import FunctionCall, ToolCall

    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def test_R_D5_tools_run_concurrently_and_results_keep_call_order():
    """R-D5: all eligible calls start together; results finishing in reverse order are
    still committed and sent in call order, and only once every tool is done."""
    agent = ScriptedAgent(succeed()).then(
        succeed(
            *tool_call("c-1", "slow", {"n": 1}),
            *tool_call("c-2", "fast", {"n": 2}),
            *tool_call("c-3", "slow", {"n": 3}),
        )
    )
    driver = RecordingDriver(agent, manual_tools=True)
    chat = driver.chat(local_tools={"slow": lambda a: a, "fast": lambda a: a})
    chat.send("go")
    driver.run_until_idle()
    runs = driver.tool_runs
    assert [(c.tool_call_id, c.name, thaw(c.arguments)) for c in runs] == [
        ("c-1", "slow", {"n": 1}),
        ("c-2", "fast", {"n": 2}),
        ("c-3", "slow", {"n": 3}),
    ]
    assert chat.is_loading and not chat.is_resuming
    assert len(driver.requests) == 1

    for c, value in ((runs[2], "third"), (runs[1], "second")):
        chat.apply(i.ToolFinished(c.task, value=value))
        driver.run_until_idle()
        assert len(driver.requests) == 1  # waits for every tool
        assert chat.is_loading
    chat.apply(i.ToolFinished(runs[0].task, value="first"))
    driver.run_until_idle()
    assert len(driver.requests) == 2
    follow = driver.requests[1]
    assert follow.resume is None
    tool_sent = [m for m in follow.json["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in tool_sent] == [
        ("c-1", "first"),
        ("c-2", "second"),
        ("c-3", "third"),
    ]
    assert (chat.is_loading, chat.error) == (False, None)


def test_R_D5_a_wide_round_finishing_in_any_order_commits_in_call_order():
    """R-D5 at scale: 300 calls, every fourth with arguments that are not JSON (failed
    at once), the rest finishing in a shuffled order, one result repeated (a late result,
    ignored). The follow-up carries one result per call, in call order. The round finds
    a result's task by bisection and stores it in a PVec: a result used to copy the
    round's whole tuple, so a round of 10,000 calls cost 10,000 copies of 10,000."""
    calls = [(f"c-{n:03d}", "{not json" if n % 4 == 0 else {"n": n}) for n in range(300)]
    agent = ScriptedAgent(succeed()).then(
        succeed(*[e for cid, args in calls for e in tool_call(cid, "t", args)])
    )
    driver = RecordingDriver(agent, manual_tools=True)
    chat = driver.chat(local_tools={"t": lambda a: a})
    chat.send("go")
    driver.run_until_idle()
    runs = list(driver.tool_runs)
    assert [c.tool_call_id for c in runs] == [cid for cid, args in calls if args != "{not json"]
    tools = chat.core_state.tools
    assert tools is not None and type(tools.tasks) is PVec and tools.waiting == len(runs)

    random.Random(5).shuffle(runs)
    for k, c in enumerate(runs):
        chat.apply(i.ToolFinished(c.task, value=f"r {c.tool_call_id}"))
        if k == 7:
            before = chat.core_state
            chat.apply(i.ToolFinished(runs[3].task, value="late"))
            assert chat.core_state == before
        if k < len(runs) - 1:
            assert len(driver.requests) == 1 and chat.is_loading
    driver.run_until_idle()
    assert len(driver.requests) == 2
    sent = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in sent] == [cid for cid, _ in calls]
    for m, (cid, args) in zip(sent, calls, strict=True):
        if args == "{not json":
            assert m["content"].startswith(f"Error: the arguments of tool call {cid!r} are not")
        else:
            assert m["content"] == f"r {cid}"
    assert (chat.is_loading, chat.error) == (False, None)


def test_R_D5_follow_up_waits_for_the_last_tool_step_by_step():
    """R-D5: on the step driver each tool is one step; the follow-up is sent only after
    the last one, and carries every result."""
    agent = ScriptedAgent(succeed()).then(
        succeed(*tool_call("c-1", "t", {"n": 1}), *tool_call("c-2", "t", {"n": 2}))
    )
    ran: list[int] = []
    driver = RecordingDriver(agent)
    chat = driver.chat(local_tools={"t": lambda a: ran.append(a["n"]) or f"r{a['n']}"})
    chat.send("go")
    step_until(driver, lambda: ran == [1])
    assert chat.is_loading and len(driver.requests) == 1
    assert driver.step()  # the second tool: results committed, the follow-up queued
    assert ran == [1, 2]
    assert len(driver.requests) == 1 and chat.is_loading
    assert driver.step()  # the follow-up goes out
    assert len(driver.requests) == 2
    sent = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in sent] == [("c-1", "r1"), ("c-2", "r2")]


def test_R_D5_failing_missing_and_malformed_tools_become_tool_messages():
    """R-D5, R-J6: a tool that raises, a call to a tool this client lacks (named by
    pendingToolCallIds) and malformed JSON arguments (also nested past the recursion
    limit, which crashed step() with RecursionError, or a number past a float's range)
    each yield a tool message that says so; the good call still runs and the loop goes
    on with a follow-up."""
    ran: list[Any] = []

    def boom(args: Any) -> Any:
        raise RuntimeError("kaput")

    agent = ScriptedAgent(succeed()).then(
        succeed(
            *tool_call("c-boom", "boom", {}),
            *tool_call("c-missing", "not_here", {"a": 1}),
            *tool_call("c-bad", "calc", "{not json"),
            *tool_call("c-deep", "calc", "[" * 5000),  # json.loads: RecursionError
            *tool_call("c-huge", "calc", '{"x": 1e400}'),  # json.loads: inf
            *tool_call("c-ok", "calc", {"x": 2}),
            outcome={
                "type": "success",
                "pendingToolCallIds": ["c-boom", "c-missing", "c-bad", "c-deep", "c-huge", "c-ok"],
            },
        )
    )
    driver = RecordingDriver(agent)
    chat = driver.chat(local_tools={"boom": boom, "calc": lambda a: ran.append(a) or "ok"})
    chat.send("go")
    driver.run_until_idle()
    assert ran == [{"x": 2}]
    assert len(driver.requests) == 2
    follow = driver.requests[1]
    assert follow.resume is None
    results = {m.tool_call_id: m for m in chat.messages if isinstance(m, ToolMessage)}
    ids = ["c-boom", "c-missing", "c-bad", "c-deep", "c-huge", "c-ok"]
    assert list(results) == ids
    assert results["c-boom"].error and "kaput" in results["c-boom"].content
    assert results["c-missing"].error and "not_here" in results["c-missing"].content
    assert results["c-bad"].error and "json" in results["c-bad"].content.lower()
    assert results["c-deep"].content.endswith("are nested too deeply")
    assert results["c-huge"].error and "inf has no JSON form" in results["c-huge"].content
    assert results["c-ok"].error is None and results["c-ok"].content == "ok"
    sent = [m["toolCallId"] for m in follow.json["messages"] if m["role"] == "tool"]
    assert sent == ids
    assert (chat.is_loading, chat.error, chat.needs_new_thread) == (False, None, False)


def test_R_D5_tool_loop_continues_inside_a_resumed_interaction():
    """R-D5, R-C4: a resumed run that calls a new local tool runs it and follows up,
    with is_resuming True throughout, until the follow-up settles."""
    ran: list[Any] = []
    driver, chat, batch = paused_chat(
        replies=[succeed(*tool_call("c-new", "calc", {"x": 3})), succeed()],
        local_tools={"calc": lambda a: ran.append(a) or {"y": a["x"] * 2}},
    )
    chat.resume(batch.id, approve(batch))
    step_until(driver, lambda: chat.core_state.tools is not None)
    assert ran == []
    assert (chat.is_loading, chat.is_resuming, chat.pending_interrupts) == (True, True, None)
    step_until(driver, lambda: len(driver.requests) == 3)
    assert ran == [{"x": 3}]
    assert (chat.is_loading, chat.is_resuming) == (True, True)
    follow = driver.requests[2]
    assert follow.resume is None
    assert [m["toolCallId"] for m in follow.json["messages"] if m["role"] == "tool"] == ["c-new"]
    driver.run_until_idle()
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    assert len(driver.requests) == 3


# -- R-E: completions ----------------------------------------------------------------------


def paused_completion(
    *replies: Any, options: Options | None = None, ask: dict[str, Any] | None = None
) -> tuple[RecordingDriver, Resource, Batch]:
    """A completion whose input "input-A" was interrupted; ``replies`` answer the rest."""
    agent = ScriptedAgent(answer_completion).then(pause(ask or ASK), *replies)
    driver = RecordingDriver(agent)
    comp = driver.completion(options)
    comp.set_input("input-A")
    driver.run_until_idle()
    batch = comp.pending_interrupts
    assert batch is not None
    assert_paused(comp, batch)
    assert user_texts(driver.requests[0]) == ["input-A"]
    return driver, comp, batch


def inputs_sent(driver: FakeDriver) -> list[str]:
    return [user_texts(r)[0] for r in driver.requests]


@pytest.mark.parametrize("phase", ["paused", "claimed", "resumed"])
def test_R_E1_R_E2_A_B_C_resume_answers_A_then_only_C_runs(phase: str):
    """R-E1, R-E2: input changes B then C while paused, claimed or in the resumed run send
    nothing; the resume answers A; when the interaction succeeds only C runs, never B."""
    driver, comp, batch = paused_completion(succeed(hold=True))
    if phase != "paused":
        comp.resume(batch.id, approve(batch))
        assert driver.step()  # the resume request goes out, held
    if phase == "resumed":
        driver.release(1)
        assert driver.step()
        assert comp.pending_interrupts is None and comp.is_resuming
    state_flags = (comp.is_loading, comp.is_resuming)

    comp.set_input("input-B")
    comp.set_input("input-C")
    assert comp.input == "input-C"
    assert (comp.is_loading, comp.is_resuming) == state_flags
    if phase == "paused":
        assert_paused(comp, batch)
        driver.run_until_idle()
        assert len(driver.requests) == 1
        comp.resume(batch.id, approve(batch))
        assert driver.step()
    assert len(driver.requests) == 2
    resume_req = driver.requests[1]
    assert user_texts(resume_req) == ["input-A"]
    assert resume_req.resume is not None
    assert "input-B" not in resume_req.body and "input-C" not in resume_req.body

    driver.release(100)
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-C"]
    last = driver.requests[2]
    assert last.resume is None and last.thread_id == resume_req.thread_id
    assert comp.input == "input-C"
    assert comp.output == "answer to input-C"
    assert (comp.is_loading, comp.is_resuming, comp.error) == (False, False, None)


def test_R_E1_an_equal_input_built_anew_is_no_change():
    """R-E1: inputs compare as JSON values: an equal string or object built anew (not
    the very Python object given before) is the same input, and nothing runs."""
    driver = RecordingDriver(ScriptedAgent(answer_completion))
    comp = driver.completion()
    for make in (lambda: "-".join(["input", "A"]), lambda: {"q": "-".join(["input", "A"])}):
        comp.set_input(make())
        driver.run_until_idle()
        sent = len(driver.requests)
        again = make()
        assert again is not comp.input
        comp.set_input(again)
        assert not comp.is_loading
        driver.run_until_idle()
        assert len(driver.requests) == sent
    assert len(driver.requests) == 2


def test_R_E2_input_back_to_the_answered_one_starts_nothing():
    """R-E2: A to B (while paused) to A (while claimed): the interaction answers A and,
    once it succeeds, nothing new starts."""
    driver, comp, batch = paused_completion(succeed())
    comp.set_input("input-B")
    comp.resume(batch.id, approve(batch))
    comp.set_input("input-A")
    assert comp.input == "input-A"
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A"]
    assert comp.output == f"done {driver.requests[1].run_id}"
    assert (comp.is_loading, comp.is_resuming, comp.error) == (False, False, None)


NUMBER_TO_BOOLEAN = [(1, True), ({"n": 0}, {"n": False}), ([0, 1], [False, True])]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize(("before", "after"), NUMBER_TO_BOOLEAN)
def test_R_E1_a_number_changed_to_a_boolean_is_a_changed_input(before: Any, after: Any):
    """R-E1: JSON tells ``true`` from ``1`` where Python's ``==`` does not; the endpoint
    would read other content (``true``, not ``1``), so the input changed and runs."""
    driver = RecordingDriver(ScriptedAgent(answer_completion))
    comp = driver.completion()
    comp.set_input(before)
    driver.run_until_idle()
    comp.set_input(after)
    assert _compact(thaw(comp.input)) == _compact(after)
    driver.run_until_idle()
    assert inputs_sent(driver) == [_compact(before), _compact(after)]
    assert comp.output == f"answer to {_compact(after)}"


@pytest.mark.parametrize(("before", "after"), NUMBER_TO_BOOLEAN)
def test_R_E2_a_deferred_boolean_is_not_the_answered_number(before: Any, after: Any):
    """R-E2: the deferred input differs from the answered one when a number became a
    boolean, so it runs once the resumed interaction succeeds (it is not "back to A")."""
    driver = RecordingDriver(ScriptedAgent(answer_completion).then(pause(ASK), succeed()))
    comp = driver.completion()
    comp.set_input(before)
    driver.run_until_idle()
    batch = comp.pending_interrupts
    assert batch is not None
    comp.set_input(after)
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert inputs_sent(driver) == [_compact(before), _compact(before), _compact(after)]
    assert comp.output == f"answer to {_compact(after)}"


def test_R_E3_another_interrupt_keeps_C_deferred():
    """R-E3, R-C5: a new interrupt in the resumed interaction keeps C deferred; C runs
    only after that batch, too, is answered and the interaction succeeds."""
    driver, comp, batch = paused_completion(pause({**ASK, "id": "again"}), succeed())
    comp.set_input("input-C")
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    second = comp.pending_interrupts
    assert second is not None and second.id != batch.id
    assert_paused(comp, second)
    assert inputs_sent(driver) == ["input-A", "input-A"]
    assert comp.input == "input-C"

    comp.resume(second.id, approve(second))
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-A", "input-C"]
    assert driver.requests[2].resume == [
        {"interruptId": "again", "status": "resolved", "payload": {"approved": True}}
    ]
    assert driver.requests[3].resume is None
    assert comp.output == "answer to input-C"


def test_R_E2_R_J5_a_cancelled_outcome_keeps_the_deferred_input_until_reload():
    """R-E2, R-J5: the resumed run finishes ``cancelled``: the interaction ends cleanly,
    with no recovery, but it did not succeed, and only success starts the deferred input
    (C), as the seed says ("failure or stop does not automatically send C"; a cancelled
    run was stopped). C stays the current input, unsent, until reload() sends it once."""
    cancelled = lambda req: reply(started(req), finished(req, {"type": "cancelled"}))  # noqa: E731
    driver, comp, batch = paused_completion(cancelled)
    comp.set_input("input-C")
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A"]
    assert (comp.is_loading, comp.is_resuming, comp.needs_new_thread) == (False, False, False)
    assert comp.input == "input-C" and comp.error is None
    comp.set_input("input-C")  # the same input: nothing
    driver.run_until_idle()
    assert len(driver.requests) == 2
    comp.reload()
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-C"]
    assert driver.requests[2].resume is None
    assert comp.output == "answer to input-C"


def test_R_E4_R_J5_after_a_cancelled_outcome_a_new_thread_sends_the_deferred_input():
    """R-E4's way out after a cancelled resumed run as well: the next thread gets C once."""
    cancelled = lambda req: reply(started(req), finished(req, {"type": "cancelled"}))  # noqa: E731
    driver, comp, batch = paused_completion(cancelled)
    comp.set_input("input-C")
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    comp.set_thread_id("thread-2")
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-C"]
    assert driver.requests[2].thread_id == "thread-2" and driver.requests[2].resume is None


def test_R_E2_the_deferred_input_closes_the_finished_runs_stream():
    """R-E2, R-J3: the resumed run's stream stays open after RUN_FINISHED for a late
    RUN_ERROR; the deferred input is new input, so it closes that stream
    (AbortAttempt) in the very transition that starts it."""
    driver, comp, batch = paused_completion(lambda req: held(started(req), finished(req)))
    comp.set_input("input-C")
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()  # the resume goes out; its reply is held
    resumed = driver.requests[-1].attempt
    driver.release(2)  # RUN_STARTED and RUN_FINISHED, and the body stays open
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-C"]
    (abort,) = [c for c in driver.commands if c == AbortAttempt(resumed)]
    starts = [n for n, c in enumerate(driver.commands) if type(c).__name__ == "StartAttempt"]
    assert driver.commands.index(abort) < starts[-1]


def test_R_J5_a_cancelled_outcome_with_the_input_unchanged_starts_nothing():
    """R-J5: with no deferred change, a cancelled resumed run starts nothing."""
    cancelled = lambda req: reply(started(req), finished(req, {"type": "cancelled"}))  # noqa: E731
    driver, comp, batch = paused_completion(cancelled)
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A"]
    assert (comp.is_loading, comp.error) == (False, None)


E4_ENDINGS = [
    "run_error_before_ack",
    "drop_after_ack",
    "stop_claimed",
    "stop_after_ack",
    "expired_while_paused",
    "expired_before_send",
]


@pytest.mark.parametrize("ending", E4_ENDINGS)
def test_R_E4_failure_stop_or_expiry_keeps_C_until_the_next_thread(ending: str):
    """R-E4, R-F4, R-F5, R-F3: failure, stop or expiry never sends C; C stays the current
    input, and set_thread_id sends it once, unchanged, on the new thread, without resume."""
    resumed = {  # the answer to the resume request, for the endings that send one
        "run_error_before_ack": [lambda req: reply(run_error("down"))],
        "drop_after_ack": [lambda req: drop(started(req))],
        "stop_after_ack": [succeed(hold=True)],
    }.get(ending, [])
    ask = {**ASK, "expiresAt": at(30)}
    driver, comp, batch = paused_completion(*resumed, ask=ask)
    comp.set_input("input-B")
    comp.set_input("input-C")
    if ending == "expired_while_paused":
        driver.advance(30)
        rejected(comp, BatchExpiredError, lambda: comp.resume(batch.id, approve(batch)))
    else:
        comp.resume(batch.id, approve(batch))
    if ending == "stop_claimed":
        comp.stop()
    elif ending == "stop_after_ack":
        assert driver.step()
        driver.release(1)
        assert driver.step()
        assert comp.pending_interrupts is None
        comp.stop()
    elif ending == "expired_before_send":
        driver.advance(30)
    driver.run_until_idle()
    assert (comp.is_loading, comp.is_resuming) == (False, False)
    assert comp.input == "input-C"
    assert "input-C" not in inputs_sent(driver)
    assert comp.needs_new_thread == (ending in ("drop_after_ack", "stop_after_ack"))
    if ending in ("expired_while_paused", "expired_before_send"):
        assert comp.pending_interrupts is batch and comp.is_expired
    if ending == "expired_before_send":
        assert isinstance(comp.error, BatchExpiredError)
    sent = len(driver.requests)

    comp.set_thread_id("thread-2")
    assert comp.pending_interrupts is None and not comp.needs_new_thread
    assert comp.is_loading  # C starts at once on the new thread
    driver.run_until_idle()
    assert len(driver.requests) == sent + 1
    c_req = driver.requests[-1]
    assert c_req.thread_id == "thread-2"
    assert c_req.resume is None
    assert user_texts(c_req) == ["input-C"]
    assert comp.output == "answer to input-C"
    assert (comp.is_loading, comp.error, comp.input) == (False, None, "input-C")

    comp.set_thread_id("thread-2")
    driver.run_until_idle()
    assert inputs_sent(driver).count("input-C") == 1
    assert "input-B" not in inputs_sent(driver)


def test_R_E4_R_H3_an_input_whose_completion_succeeded_is_not_sent_on_a_new_thread():
    """R-H3: changing threads sends nothing; only an input whose completion did not
    succeed goes again on the next thread (R-E4). One answered stays answered."""
    driver = RecordingDriver(ScriptedAgent(answer_completion))
    comp = driver.completion()
    comp.set_input("input-A")
    driver.run_until_idle()
    assert comp.output == "answer to input-A"
    comp.set_thread_id("thread-2")
    assert not comp.is_loading
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A"]


def test_R_E4_an_input_whose_completion_failed_is_sent_once_unchanged_on_the_next_thread():
    """R-E4: after a failure the current input (here the one that failed, unchanged
    since) is sent once on the next thread, without resume; then it is answered."""
    agent = ScriptedAgent(answer_completion).then(lambda req: reply(run_error("down")))
    driver = RecordingDriver(agent)
    comp = driver.completion()
    comp.set_input("input-A")
    driver.run_until_idle()
    assert isinstance(comp.error, RunError)
    comp.set_thread_id("thread-2")
    assert comp.is_loading
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A"]
    assert (driver.requests[1].thread_id, driver.requests[1].resume) == ("thread-2", None)
    assert (comp.output, comp.error) == ("answer to input-A", None)
    comp.set_thread_id("thread-3")
    driver.run_until_idle()
    assert len(driver.requests) == 2


ONE_ROUND = Options(max_tool_rounds=1)


def one_tool_round(req: Request) -> Reply:
    return reply(started(req), *tool_call(f"c-{req.run_id}", "calc", {}), finished(req))


def test_R_E2_the_deferred_input_gets_its_own_tool_rounds():
    """R-E2, R-D5: C starts a new interaction, with the whole max_tool_rounds budget,
    whatever the resumed interaction used."""
    ran: list[Any] = []
    agent = ScriptedAgent(answer_completion).then(pause(ASK), succeed(), one_tool_round)
    driver = RecordingDriver(agent)
    comp = driver.completion(ONE_ROUND, local_tools={"calc": lambda a: ran.append(a) or 1})
    comp.set_input("input-A")
    driver.run_until_idle()
    batch = comp.pending_interrupts
    assert batch is not None
    comp.set_input("input-C")
    comp.resume(batch.id, approve(batch))
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-A", "input-C", "input-C"]
    assert (len(ran), comp.error, comp.output) == (1, None, "answer to input-C")


def test_R_E4_the_input_sent_on_the_next_thread_gets_its_own_tool_rounds():
    """R-E4, R-D5: the input sent again on the next thread starts a new interaction,
    with the whole max_tool_rounds budget."""
    ran: list[Any] = []
    agent = ScriptedAgent(answer_completion).then(
        lambda req: reply(run_error("down")), one_tool_round
    )
    driver = RecordingDriver(agent)
    comp = driver.completion(ONE_ROUND, local_tools={"calc": lambda a: ran.append(a) or 1})
    comp.set_input("input-A")
    driver.run_until_idle()
    assert isinstance(comp.error, RunError)
    comp.set_thread_id("thread-2")
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A"] * 3
    assert (len(ran), comp.error, comp.output) == (1, None, "answer to input-A")


def test_set_input_is_refused_on_a_chat():
    """A chat takes new input with send(); set_input is a completion's (UsageError)."""
    driver = RecordingDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    error = rejected(chat, UsageError, lambda: chat.set_input("hello"))
    assert "a chat uses send()" in str(error)
    assert driver.requests == []


def test_R_E5_new_input_supersedes_a_run_in_progress_at_once():
    """R-E5, R-E1: outside a pause a new input aborts the run in progress synchronously
    and starts a new completion; the old stream's late events are ignored."""
    agent = ScriptedAgent(answer_completion).then(succeed(hold=True))
    driver = RecordingDriver(agent)
    comp = driver.completion()
    comp.set_input("input-A")
    assert driver.step()
    driver.release(3)
    for _ in range(3):  # RUN_STARTED, TEXT_MESSAGE_START, TEXT_MESSAGE_CONTENT
        assert driver.step()
    old = driver.requests[0]
    assert comp.output == f"done {old.run_id}"
    assert comp.core_state.run is not None and comp.core_state.draft is not None

    comp.set_input("input-B")
    assert AbortAttempt(old.attempt) in driver.commands
    assert (comp.input, comp.is_loading, comp.is_resuming) == ("input-B", True, False)
    assert comp.output is None  # A's draft was dropped with its run
    before = comp.core_state
    for event in (*text("late", "late text"), finished(old)):
        comp.apply(i.FrameReceived(old.attempt, json.dumps(event)))
    comp.apply(i.StreamEnded(old.attempt))
    assert comp.core_state == before

    driver.release(100)
    driver.run_until_idle()
    assert inputs_sent(driver) == ["input-A", "input-B"]
    assert driver.requests[1].resume is None
    assert comp.output == "answer to input-B"
    assert (comp.is_loading, comp.error) == (False, None)

    comp.set_input("input-B")  # unchanged input: nothing runs
    driver.run_until_idle()
    assert len(driver.requests) == 2


@pytest.mark.parametrize("claimed", [False, True])
def test_R_D3_completion_reload_rejected_while_pending_or_claimed(claimed: bool):
    """R-D3, R-E1: a completion's reload is new input too: rejected while the batch is
    pending or claimed, with nothing changed and nothing sent."""
    driver, comp, batch = paused_completion(succeed())
    if claimed:
        comp.resume(batch.id, approve(batch))
    rejected(comp, InterruptPendingError, comp.reload)
    assert comp.pending_interrupts is batch
    driver.run_until_idle()
    assert inputs_sent(driver) == (["input-A", "input-A"] if claimed else ["input-A"])
