"""The interrupt batch, submitting answers, progress flags, lifetime and observers.

Rules proved here: R-A1..R-A7 (the interrupt outcome and the batch), R-B1..R-B6
(submitting answers), R-C1..R-C5 (progress flags), R-I1, R-I2 (lifetime and
observers). Everything runs on the step-by-step fake driver: no threads, no
sockets, no sleeping. Observers only record; assertions run afterwards, because
an exception raised inside an observer is turned into the resource's ``error``.
"""

from __future__ import annotations

import copy
import datetime
import math
import operator
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import attrs
import pytest

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
    state_delta,
    state_snapshot,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core.errors import (
    BatchClaimedError,
    BatchExpiredError,
    InterludeError,
    InvalidResumeError,
    ProtocolError,
    RecoveryRequiredError,
    RunError,
    StaleBatchError,
    TransportError,
    UsageError,
)
from interlude.core.inputs import Resume
from interlude.core.json import NotJSONError, freeze, thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.reducer import step
from interlude.core.state import Batch
from interlude.core.wire import (
    AssistantMessage,
    Context,
    FunctionCall,
    Interrupt,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    decode_event,
    dumps,
    encode_message,
)

OPTS = Options(retry=RetryPolicy(jitter=0))
"""Exact retry delays: base 0.5 s, three attempts."""

SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}
META = {"priority": "high", "tags": ["finance", "approval"], "limits": {"max": 500}}
EXPIRES = "2027-01-01T00:00:30Z"
"""Thirty seconds after the fake clock's start."""


# -- scripts -------------------------------------------------------------------------


def q(iid: str, reason: str = "input_required", **optional: Any) -> dict[str, Any]:
    """One interrupt in wire form."""
    return {"id": iid, "reason": reason, **optional}


def pause(*interrupts: Mapping[str, Any], events: tuple[Any, ...] = ()) -> Callable[..., Reply]:
    """A reply that streams ``events`` and ends the run on an interrupt outcome."""

    def answer(req: Request) -> Reply:
        return reply(started(req), *events, interrupted(req, *interrupts))

    return answer


def succeed(*events: Any) -> Callable[..., Reply]:
    """A reply that streams ``events`` and finishes with success."""

    def answer(req: Request) -> Reply:
        return reply(started(req), *events, finished(req))

    return answer


def resolved(iid: str, payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"interrupt_id": iid, "status": "resolved", "payload": payload, **extra}


def cancelled(iid: str) -> dict[str, Any]:
    return {"interrupt_id": iid, "status": "cancelled"}


def answer_all(batch: Batch) -> list[dict[str, Any]]:
    return [resolved(it.id, {"ok": True}) for it in batch.interrupts]


def paused_chat(
    *replies: Callable[..., Reply] | Reply,
    options: Options = OPTS,
    local_tools: Mapping[str, Callable[[Any], Any]] | None = None,
    thread_id: str | None = None,
    state: Any = None,
) -> tuple[FakeDriver, Resource, Batch]:
    """A chat whose first run (``replies[0]``) ended on an interrupt outcome."""
    driver = FakeDriver(ScriptedAgent().then(*replies))
    chat = driver.chat(options, local_tools=local_tools, thread_id=thread_id, state=state)
    chat.send("Buy the lamp", message_id="u1")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None, chat.error
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    return driver, chat, batch


def assert_rejected(
    driver: FakeDriver, chat: Resource, exc_type: type[InterludeError], call: Callable[[], Any]
) -> InterludeError:
    """The intent raises ``exc_type`` (exactly), changes nothing and sends nothing.

    A raising intent cannot hand commands to the driver (the resource steps the
    reducer before executing); when the resource is idle the driver is also run to
    show that nothing goes out."""
    before = chat.core_state
    sent = len(driver.requests)
    with pytest.raises(InterludeError) as info:
        call()
    assert type(info.value) is exc_type, repr(info.value)
    assert chat.core_state == before
    if not chat.is_loading:  # idle: stepping the driver must find nothing to send
        driver.run_until_idle(follow_retries=False)
        assert len(driver.requests) == sent
        assert chat.core_state == before
    return info.value


def resume_requests(driver: FakeDriver) -> list[Request]:
    return [r for r in driver.requests if r.resume is not None]


def flags(chat: Resource) -> tuple[bool, bool]:
    return (chat.is_loading, chat.is_resuming)


# -- R-A: the interrupt outcome and the batch --------------------------------------------


def test_R_A1_checkpoint_and_batch_arrive_in_one_transition() -> None:
    """R-A1, R-C1: the partial text and state of the interrupted run are committed, and
    no observer ever sees the batch before the checkpoint or with a loading flag set."""
    events = (
        state_snapshot({"cart": ["lamp"]}),
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Checking your "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "ca"},
        state_delta({"op": "add", "path": "/total", "value": 42}),
    )  # the text message is never ended: partial text counts
    driver = FakeDriver(ScriptedAgent().then(pause(q("purchase"), events=events)))
    chat = driver.chat(OPTS, state={"cart": []})
    records: list[dict[str, Any]] = []

    def record(r: Resource) -> None:
        records.append(
            {
                "batch": r.pending_interrupts,
                "flags": (r.is_loading, r.is_resuming),
                "messages": tuple(r.messages),
                "state": thaw(r.state),
                "committed_messages": tuple(r.core_state.checkpoint.messages),
                "committed_state": thaw(r.core_state.checkpoint.state),
            }
        )

    chat.subscribe(record)
    chat.send("Buy the lamp", message_id="u1")
    driver.run_until_idle()

    user = UserMessage(id="u1", content="Buy the lamp")
    partial = AssistantMessage(id="a1", content="Checking your ca")
    committed = {"cart": ["lamp"], "total": 42}
    first = next(n for n, rec in enumerate(records) if rec["batch"] is not None)
    assert first > 0
    assert all(rec["batch"] is None for rec in records[:first])
    # While it streamed, the partial text was shown but nothing of the run was committed.
    assert any(rec["messages"] == (user, partial) for rec in records[:first])
    assert all(rec["committed_messages"] == (user,) for rec in records[:first])
    assert all(rec["committed_state"] == {"cart": []} for rec in records[:first])
    assert records[first - 1]["flags"] == (True, False)
    # From the first notification that shows the batch: committed, idle.
    for rec in records[first:]:
        assert rec["batch"] is chat.pending_interrupts
        assert rec["flags"] == (False, False)
        assert rec["messages"] == rec["committed_messages"] == (user, partial)
        assert rec["state"] == rec["committed_state"] == committed
    assert chat.core_state.run is None
    assert chat.error is None
    assert len(driver.requests) == 1


def test_R_A2_batch_ids_are_unique_and_never_reused() -> None:
    """R-A2, R-C5: every interruption publishes a new batch id, even with the same
    interrupt ids, across resumes and a thread change; an old id is stale."""
    same = (q("purchase"), q("shipping-address"))
    flipped = (q("shipping-address"), q("purchase"))
    driver, chat, first = paused_chat(pause(*same), pause(*same), pause(*flipped), pause(*same))
    batches = [first]
    chat.resume(first.id, answer_all(first))
    driver.run_until_idle()
    batches.append(chat.pending_interrupts)
    chat.resume(batches[-1].id, answer_all(batches[-1]))
    driver.run_until_idle()
    batches.append(chat.pending_interrupts)
    chat.set_thread_id("another-thread")
    assert chat.pending_interrupts is None
    chat.send("Try again")
    driver.run_until_idle()
    batches.append(chat.pending_interrupts)

    assert all(isinstance(b, Batch) for b in batches)
    ids = [b.id for b in batches]
    assert len(set(ids)) == 4, ids
    assert all(isinstance(i, str) and i for i in ids)
    # The interrupts are a read-only tuple in the server's order.
    for b in batches:
        assert type(b.interrupts) is tuple
    assert [it.id for it in batches[1].interrupts] == ["purchase", "shipping-address"]
    assert [it.id for it in batches[2].interrupts] == ["shipping-address", "purchase"]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        batches[3].id = ids[0]  # type: ignore[misc]
    # Every earlier id is stale for the batch now pending.
    for old in ids[:3]:
        assert_rejected(
            driver, chat, StaleBatchError, lambda old=old: chat.resume(old, answer_all(batches[3]))
        )
    assert chat.pending_interrupts is batches[3]
    stale = assert_rejected(
        driver, chat, StaleBatchError, lambda: chat.resume(ids[0], answer_all(batches[3]))
    )
    assert str(stale) == (
        f"batch {ids[0]!r} is not the pending batch (batch {batches[3].id!r} is pending); "
        "rebuild the form from pending_interrupts"
    )


def test_R_A3_every_field_kept_empty_strings_kept_absent_stays_none() -> None:
    """R-A3: id, reason and every optional field survive; "" is kept; absent is None."""
    full = q(
        "purchase",
        message="Approve this purchase?",
        toolCallId="call-7",
        responseSchema=SCHEMA,
        expiresAt="2027-01-01T02:30:00.250+01:00",
        metadata=META,
        subagentRunId="sub-9",
    )
    empty = {"id": "note", "reason": "", "message": ""}
    bare = {"id": "bare", "reason": "confirm"}
    _, _, batch = paused_chat(pause(full, empty, bare))

    got_full, got_empty, got_bare = batch.interrupts
    assert got_full == Interrupt(
        id="purchase",
        reason="input_required",
        message="Approve this purchase?",
        tool_call_id="call-7",
        response_schema=freeze(SCHEMA),
        expires_at="2027-01-01T02:30:00.250+01:00",
        metadata=freeze(META),
        subagent_run_id="sub-9",
    )
    assert got_full.expires_at == "2027-01-01T02:30:00.250+01:00"  # the text, as sent
    assert thaw(got_full.response_schema) == SCHEMA
    assert thaw(got_full.metadata) == META
    assert (got_empty.id, got_empty.reason, got_empty.message) == ("note", "", "")
    assert got_empty.reason is not None and got_empty.message is not None
    for it in (got_empty, got_bare):
        assert it.tool_call_id is None
        assert it.response_schema is None
        assert it.expires_at is None
        assert it.metadata is None
        assert it.subagent_run_id is None
    assert (got_bare.id, got_bare.reason, got_bare.message) == ("bare", "confirm", None)


def test_R_A4_schema_and_metadata_read_like_mappings_and_refuse_mutation() -> None:
    """R-A4: deeply immutable JSON; thaw gives an equal, independent plain copy."""
    _, _, batch = paused_chat(pause(q("purchase", responseSchema=SCHEMA, metadata=META)))
    it = batch.interrupts[0]
    schema, meta = it.response_schema, it.metadata
    assert schema is not None and meta is not None

    assert isinstance(schema, Mapping) and isinstance(meta, Mapping)
    assert schema == freeze(SCHEMA) and meta == freeze(META)
    assert thaw(schema) == SCHEMA and thaw(meta) == META
    assert list(schema) == list(SCHEMA)
    assert schema["properties"]["approved"]["type"] == "boolean"
    assert schema.get("missing", "default") == "default"
    assert "required" in schema and len(schema) == 4
    assert schema["required"][0] == "approved" and len(schema["required"]) == 1
    assert list(meta["tags"]) == ["finance", "approval"]
    assert meta["limits"]["max"] == 500

    mutations: list[Callable[[], Any]] = [
        lambda: schema.__setitem__("type", "array"),
        lambda: schema.__delitem__("type"),
        lambda: schema.update({"type": "array"}),
        lambda: schema.pop("type"),
        lambda: schema.popitem(),
        lambda: schema.setdefault("x", 1),
        lambda: schema.clear(),
        lambda: operator.ior(schema, {"x": 1}),
        lambda: schema["properties"]["approved"].__setitem__("type", "string"),
        lambda: operator.setitem(schema["required"], 0, "other"),
        lambda: meta.__setitem__("priority", "low"),
        lambda: operator.setitem(meta["tags"], 0, "other"),
        lambda: meta["limits"].update(max=1),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()
    assert thaw(schema) == SCHEMA and thaw(meta) == META

    plain = thaw(schema)
    assert plain == SCHEMA
    assert type(plain) is dict
    assert type(plain["properties"]) is dict and type(plain["required"]) is list
    plain["properties"]["approved"]["type"] = "string"
    plain["required"].append("other")
    plain_meta = thaw(meta)
    assert plain_meta == META and type(plain_meta["tags"]) is list
    plain_meta["tags"].append("x")
    assert thaw(it.response_schema) == SCHEMA and thaw(it.metadata) == META


def test_R_A4_later_mutation_of_the_parsed_wire_data_cannot_reach_the_interrupt() -> None:
    """R-A4: the decoded interrupt shares nothing mutable with the parsed JSON."""
    wire = q("purchase", responseSchema=copy.deepcopy(SCHEMA), metadata=copy.deepcopy(META))
    parsed = {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r",
        "outcome": {"type": "interrupt", "interrupts": [wire]},
    }
    event = decode_event(parsed)
    it = event.outcome.interrupts[0]  # type: ignore[union-attr]
    wire["responseSchema"]["properties"]["approved"]["type"] = "string"
    wire["responseSchema"]["required"].append("other")
    wire["metadata"]["tags"].append("x")
    wire["metadata"]["limits"]["max"] = 1
    wire["id"] = "changed"
    assert it.id == "purchase"
    assert thaw(it.response_schema) == SCHEMA
    assert thaw(it.metadata) == META


def test_R_A5_tool_calls_of_the_interrupted_run_are_not_executed() -> None:
    """R-A5: a streamed call to a registered local tool stays in history, never runs,
    and no follow-up run starts, however long the pause lasts."""
    ran: list[Any] = []

    def lookup(args: Any) -> str:
        ran.append(args)
        return "found"

    events = (
        *text("a1", "Let me look that up"),
        *tool_call("call-1", "lookup", {"sku": "lamp"}, parent_message_id="a1"),
    )
    driver, chat, batch = paused_chat(
        pause(q("purchase", toolCallId="call-1"), events=events), local_tools={"lookup": lookup}
    )
    driver.advance(3600)
    driver.run_until_idle()

    assert ran == []
    assert len(driver.requests) == 1
    assert chat.core_state.tools is None and chat.core_state.run is None
    assert flags(chat) == (False, False)
    assert chat.pending_interrupts is batch
    assert list(chat.messages) == [
        UserMessage(id="u1", content="Buy the lamp"),
        AssistantMessage(
            id="a1",
            content="Let me look that up",
            tool_calls=(
                ToolCall(
                    id="call-1", function=FunctionCall(name="lookup", arguments='{"sku": "lamp"}')
                ),
            ),
        ),
    ]
    assert not any(isinstance(m, ToolMessage) for m in chat.messages)


MALFORMED_OUTCOMES: dict[str, dict[str, Any]] = {
    "empty list": {"type": "interrupt", "interrupts": []},
    "missing list": {"type": "interrupt"},
    "null list": {"type": "interrupt", "interrupts": None},
    "list is an object": {"type": "interrupt", "interrupts": q("a")},
    "item not an object": {"type": "interrupt", "interrupts": ["a"]},
    "duplicate ids": {"type": "interrupt", "interrupts": [q("a"), q("b"), q("a")]},
    "id not a string": {"type": "interrupt", "interrupts": [{"id": 7, "reason": "r"}]},
    "id missing": {"type": "interrupt", "interrupts": [{"reason": "r"}]},
    "reason not a string": {"type": "interrupt", "interrupts": [{"id": "a", "reason": ["r"]}]},
    "reason null": {"type": "interrupt", "interrupts": [{"id": "a", "reason": None}]},
    "reason missing": {"type": "interrupt", "interrupts": [{"id": "a"}]},
    "message not a string": {"type": "interrupt", "interrupts": [q("a", message=5)]},
    "toolCallId not a string": {"type": "interrupt", "interrupts": [q("a", toolCallId=12)]},
    "subagentRunId not a string": {
        "type": "interrupt",
        "interrupts": [q("a", subagentRunId={"id": "x"})],
    },
    "responseSchema a string": {
        "type": "interrupt",
        "interrupts": [q("a", responseSchema="object")],
    },
    "responseSchema a list": {"type": "interrupt", "interrupts": [q("a", responseSchema=[{}])]},
    "responseSchema true": {"type": "interrupt", "interrupts": [q("a", responseSchema=True)]},
    "metadata a list": {"type": "interrupt", "interrupts": [q("a", metadata=["x"])]},
    "metadata a number": {"type": "interrupt", "interrupts": [q("a", metadata=3)]},
    "expiresAt February 30": {
        "type": "interrupt",
        "interrupts": [q("a", expiresAt="2026-02-30T00:00:00Z")],
    },
    "expiresAt hour 25": {
        "type": "interrupt",
        "interrupts": [q("a", expiresAt="2026-01-01T25:00:00Z")],
    },
    "expiresAt date only": {"type": "interrupt", "interrupts": [q("a", expiresAt="2026-01-01")]},
    "expiresAt without zone": {
        "type": "interrupt",
        "interrupts": [q("a", expiresAt="2027-01-01T00:00:30")],
    },
    "expiresAt a number": {"type": "interrupt", "interrupts": [q("a", expiresAt=1798761630)]},
    "second of two malformed": {
        "type": "interrupt",
        "interrupts": [q("a"), {"id": "b", "reason": False}],
    },
}


@pytest.mark.parametrize("outcome", MALFORMED_OUTCOMES.values(), ids=MALFORMED_OUTCOMES.keys())
def test_R_A6_malformed_interrupt_outcome_is_a_non_retryable_protocol_error(
    outcome: dict[str, Any],
) -> None:
    """R-A6, R-A7, R-F7: nothing is published, the checkpoint stays, nothing is retried."""

    def bad(req: Request) -> Reply:
        return reply(
            started(req),
            *text("a1", "Almost there"),
            state_snapshot({"cart": ["lamp"]}),
            finished(req, outcome),
        )

    driver = FakeDriver(ScriptedAgent().then(bad))
    chat = driver.chat(OPTS, state={"cart": []})
    chat.send("Buy the lamp", message_id="u1")
    checkpoint = chat.core_state.checkpoint
    driver.run_until_idle()

    assert type(chat.error) is ProtocolError, repr(chat.error)
    assert chat.error.retryable is False
    assert chat.pending_interrupts is None
    assert chat.core_state.batch is None
    assert flags(chat) == (False, False)
    assert chat.needs_new_thread is False
    assert chat.core_state.checkpoint == checkpoint
    assert list(chat.messages) == [UserMessage(id="u1", content="Buy the lamp")]
    assert thaw(chat.state) == {"cart": []}
    assert len(driver.requests) == 1
    assert driver.pending_timers() == []


def test_R_A7_pending_interrupts_is_none_unless_a_batch_is_pending_or_claimed() -> None:
    """R-A7, R-C3: checked after every single step of a long scenario."""
    driver = FakeDriver(
        ScriptedAgent().then(
            succeed(*text("a1", "Hello")),
            pause(q("purchase")),
            succeed(*text("a2", "Ordered")),
            pause(q("purchase")),
            lambda req: reply(started(req), run_error("boom")),
        )
    )
    chat = driver.chat(OPTS)

    def step_all(expect_none: bool) -> None:
        while driver.step():
            if expect_none:
                assert chat.pending_interrupts is None

    assert chat.pending_interrupts is None
    chat.send("hi")
    assert chat.pending_interrupts is None
    step_all(expect_none=True)
    assert chat.pending_interrupts is None and chat.error is None

    chat.send("buy")
    while chat.core_state.batch is None:
        assert chat.pending_interrupts is None
        assert driver.step()
    batch = chat.pending_interrupts
    assert batch is not None
    step_all(expect_none=False)  # the first stream's end
    assert chat.pending_interrupts is batch
    chat.resume(batch.id, answer_all(batch))
    assert chat.pending_interrupts is batch
    assert driver.step()  # the resume request goes out
    assert chat.pending_interrupts is batch
    assert driver.step()  # its matching RUN_STARTED
    assert chat.pending_interrupts is None
    step_all(expect_none=True)
    assert chat.pending_interrupts is None and flags(chat) == (False, False)

    chat.send("buy again")
    driver.run_until_idle()
    assert chat.pending_interrupts is not None
    chat.set_thread_id("elsewhere")
    assert chat.pending_interrupts is None

    chat.send("and now?")
    step_all(expect_none=True)
    assert chat.error == RunError("boom")
    assert chat.pending_interrupts is None


# -- R-B: submitting answers ------------------------------------------------------------


def test_R_B1_entries_in_any_order_are_sent_in_the_submitted_order() -> None:
    """R-B1, R-B6: one entry per interrupt, in any order; the wire keeps that order."""
    driver, chat, batch = paused_chat(
        pause(q("purchase"), q("shipping-address"), q("gift-note")), succeed()
    )
    chat.resume(
        batch.id,
        [
            resolved("gift-note", "Happy birthday"),
            resolved("purchase", {"approved": True}),
            resolved("shipping-address", {"addressId": "address-123"}),
        ],
    )
    driver.run_until_idle()
    assert resume_requests(driver)[0].resume == [
        {"interruptId": "gift-note", "status": "resolved", "payload": "Happy birthday"},
        {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
        {
            "interruptId": "shipping-address",
            "status": "resolved",
            "payload": {"addressId": "address-123"},
        },
    ]
    assert chat.error is None and chat.pending_interrupts is None


def test_R_B1_none_false_zero_and_empty_payloads_are_preserved_and_sent() -> None:
    """R-B1: a given payload is sent even when falsy; an absent one is left out."""
    ids = ("none", "false", "zero", "empty-text", "empty-list", "no-payload")
    driver, chat, batch = paused_chat(pause(*(q(i) for i in ids)), succeed())
    chat.resume(
        batch.id,
        [
            resolved("none", None),
            resolved("false", False),
            resolved("zero", 0),
            resolved("empty-text", ""),
            resolved("empty-list", []),
            {"interrupt_id": "no-payload", "status": "resolved"},
        ],
    )
    driver.run_until_idle()
    request = resume_requests(driver)[0]
    sent = request.resume
    assert sent == [
        {"interruptId": "none", "status": "resolved", "payload": None},
        {"interruptId": "false", "status": "resolved", "payload": False},
        {"interruptId": "zero", "status": "resolved", "payload": 0},
        {"interruptId": "empty-text", "status": "resolved", "payload": ""},
        {"interruptId": "empty-list", "status": "resolved", "payload": []},
        {"interruptId": "no-payload", "status": "resolved"},
    ]
    assert sent is not None
    assert sent[1]["payload"] is False
    assert type(sent[2]["payload"]) is int
    assert '{"interruptId":"none","status":"resolved","payload":null}' in request.body
    assert '"payload":false' in request.body and '"payload":0' in request.body


@pytest.mark.parametrize("payload", [None, False, 0, "", {"approved": False}])
def test_R_B1_payload_on_a_cancelled_entry_is_forbidden_whatever_its_value(
    payload: Any,
) -> None:
    """R-B1, R-B2: a cancelled entry carrying any payload, even None, is rejected."""
    driver, chat, batch = paused_chat(pause(q("purchase"), q("note")), succeed())
    entries = [
        {"interrupt_id": "purchase", "status": "cancelled", "payload": payload},
        resolved("note", "ok"),
    ]
    exc = assert_rejected(driver, chat, InvalidResumeError, lambda: chat.resume(batch.id, entries))
    assert any("purchase" in p for p in exc.problems)  # type: ignore[attr-defined]
    assert chat.pending_interrupts is batch
    # Without the payload the same cancellation goes through.
    chat.resume(batch.id, [cancelled("purchase"), resolved("note", "ok")])
    driver.run_until_idle()
    assert resume_requests(driver)[0].resume == [
        {"interruptId": "purchase", "status": "cancelled"},
        {"interruptId": "note", "status": "resolved", "payload": "ok"},
    ]


def test_R_B1_metadata_object_is_sent_and_non_object_metadata_is_rejected() -> None:
    """R-B1: optional metadata, a JSON object, goes on the wire as given."""
    driver, chat, batch = paused_chat(pause(q("purchase"), q("note")), succeed())
    for bad in (["form"], "form", 3, True):
        entries = [
            resolved("purchase", {"approved": True}, metadata=bad),
            resolved("note", "ok"),
        ]
        assert_rejected(
            driver, chat, InvalidResumeError, lambda e=entries: chat.resume(batch.id, e)
        )
    chat.resume(
        batch.id,
        [
            resolved("purchase", {"approved": True}, metadata={"source": "mobile", "n": [1]}),
            {"interrupt_id": "note", "status": "cancelled", "metadata": {"why": "skipped"}},
        ],
    )
    driver.run_until_idle()
    assert resume_requests(driver)[0].resume == [
        {
            "interruptId": "purchase",
            "status": "resolved",
            "payload": {"approved": True},
            "metadata": {"source": "mobile", "n": [1]},
        },
        {"interruptId": "note", "status": "cancelled", "metadata": {"why": "skipped"}},
    ]


def _check_order_states() -> tuple[Any, Any, Batch]:
    """A paused state and the claimed state after it, on a batch expiring at EXPIRES."""
    _, chat, batch = paused_chat(pause(q("purchase", expiresAt=EXPIRES), q("note")))
    paused = chat.core_state
    chat.resume(batch.id, answer_all(batch))
    return paused, chat.core_state, batch


@pytest.mark.parametrize(
    "case",
    [
        "recovery beats claimed, stale, expired and entries",
        "recovery beats a resume that is otherwise fine",
        "claimed beats stale, expired and entries",
        "claimed beats even a correct resubmission",
        "stale beats expired and entries",
        "expired beats entries",
        "entries last",
    ],
)
def test_R_B2_checks_run_in_order_and_the_first_failure_raises(case: str) -> None:
    """R-B2: recovery, claimed, stale, expired, entries; the reducer raises and changes
    nothing (probed with states combining several failures at once)."""
    paused, claimed, batch = _check_order_states()
    good = answer_all(batch)
    bad = [resolved("purchase", {"x": math.nan}), resolved("purchase", 1), resolved("nope")]
    later = FAKE_EPOCH + 60  # past EXPIRES
    table: dict[str, tuple[Any, str, Any, float, type[InterludeError]]] = {
        "recovery beats claimed, stale, expired and entries": (
            attrs.evolve(claimed, needs_new_thread=True),
            "not-the-batch",
            bad,
            later,
            RecoveryRequiredError,
        ),
        "recovery beats a resume that is otherwise fine": (
            attrs.evolve(paused, needs_new_thread=True),
            batch.id,
            good,
            FAKE_EPOCH,
            RecoveryRequiredError,
        ),
        "claimed beats stale, expired and entries": (
            claimed,
            "not-the-batch",
            bad,
            later,
            BatchClaimedError,
        ),
        "claimed beats even a correct resubmission": (
            claimed,
            batch.id,
            good,
            FAKE_EPOCH,
            BatchClaimedError,
        ),
        "stale beats expired and entries": (
            paused,
            "not-the-batch",
            bad,
            later,
            StaleBatchError,
        ),
        "expired beats entries": (paused, batch.id, bad, later, BatchExpiredError),
        "entries last": (paused, batch.id, bad, FAKE_EPOCH, InvalidResumeError),
    }
    state, batch_id, entries, now, expected = table[case]
    with pytest.raises(InterludeError) as info:
        step(state, Resume(batch_id, entries), now)
    assert type(info.value) is expected, repr(info.value)
    if expected is BatchExpiredError:
        assert info.value.interrupt_ids == ("purchase",)  # type: ignore[attr-defined]


def test_R_B2_each_check_through_the_resource() -> None:
    """R-B2, R-C2: the reachable combinations, through the public surface; each raises
    its own type, changes nothing, sends nothing, and leaves the batch submittable."""
    # Nothing pending at all.
    driver = FakeDriver(ScriptedAgent())
    fresh = driver.chat(OPTS)
    assert_rejected(driver, fresh, StaleBatchError, lambda: fresh.resume("b", []))

    driver, chat, batch = paused_chat(
        pause(q("purchase", expiresAt=EXPIRES), q("note")),
        lambda _req: reply(run_error("boom")),  # refused before any acknowledgement
    )
    good = answer_all(batch)
    bad_entries = [resolved("purchase", float("inf"))]
    # Entries: every kind of problem is an InvalidResumeError; the batch stays unclaimed.
    assert_rejected(driver, chat, InvalidResumeError, lambda: chat.resume(batch.id, bad_entries))
    assert_rejected(driver, chat, InvalidResumeError, lambda: chat.resume(batch.id, []))
    assert_rejected(driver, chat, StaleBatchError, lambda: chat.resume("other", bad_entries))
    # The Batch itself for its id: a mistake in the calling code, named as such.
    with pytest.raises(UsageError, match=r"pending_interrupts.id, a string\), not the Batch"):
        chat.resume(batch, good)  # type: ignore[arg-type]
    assert chat.pending_interrupts is batch and flags(chat) == (False, False)
    # Claimed: a second resume, right or wrong, with a wrong id or with bad entries.
    chat.resume(batch.id, good)
    assert flags(chat) == (True, True)
    assert_rejected(driver, chat, BatchClaimedError, lambda: chat.resume(batch.id, good))
    assert_rejected(driver, chat, BatchClaimedError, lambda: chat.resume("other", bad_entries))
    # A RUN_ERROR before the acknowledgement releases the claim (R-F4).
    driver.run_until_idle()
    assert chat.pending_interrupts is batch and flags(chat) == (False, False)
    assert chat.error == RunError("boom")
    # Expired: beats bad entries, but not a wrong id.
    driver.advance(30)
    assert chat.is_expired
    exc = assert_rejected(
        driver, chat, BatchExpiredError, lambda: chat.resume(batch.id, bad_entries)
    )
    assert exc.interrupt_ids == ("purchase",)  # type: ignore[attr-defined]
    assert_rejected(driver, chat, StaleBatchError, lambda: chat.resume("other", bad_entries))


def test_R_B2_recovery_is_checked_before_staleness() -> None:
    """R-B2, R-F5: after a failure past the acknowledgement, resume of the old batch
    raises RecoveryRequiredError, not StaleBatchError."""
    driver, chat, batch = paused_chat(
        pause(q("purchase")),
        lambda req: reply(started(req), *text("a9", "half"), run_error("late failure")),
    )
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()
    assert chat.needs_new_thread and chat.pending_interrupts is None
    assert_rejected(
        driver, chat, RecoveryRequiredError, lambda: chat.resume(batch.id, answer_all(batch))
    )
    assert_rejected(driver, chat, RecoveryRequiredError, lambda: chat.resume("other", []))


SECRET = "s3cr3t-4111-1111-1111-1111"


def test_R_B2_invalid_resume_lists_every_problem_and_never_payload_contents() -> None:
    """R-B2, R-B1: every problem at once, naming interrupt ids; no payload content."""
    ids = ("approve-purchase", "ship-to", "gift-note", "delivery-slot", "coupon-code", "insurance")
    driver, chat, batch = paused_chat(pause(*(q(i) for i in ids)))
    secret_payload = {SECRET: SECRET, "nested": [SECRET]}
    entries: list[Any] = [
        {"interrupt_id": "approve-purchase", "status": "approved", "payload": secret_payload},
        {"interrupt_id": "ship-to", "status": "cancelled", "payload": secret_payload},
        resolved("gift-note", {SECRET: {"when": datetime.datetime(2027, 1, 1)}}),
        resolved("gift-note", secret_payload),
        resolved("no-such-question", secret_payload),
        resolved("coupon-code", secret_payload, metadata=[SECRET]),
        f"an entry that is text {SECRET}",
        {"status": "resolved", "payload": secret_payload},
    ]
    exc = assert_rejected(driver, chat, InvalidResumeError, lambda: chat.resume(batch.id, entries))
    problems = exc.problems  # type: ignore[attr-defined]
    assert isinstance(problems, tuple) and all(isinstance(p, str) for p in problems)

    def about(iid: str) -> list[str]:
        return [p for p in problems if iid in p]

    assert about("approve-purchase")  # bad status
    assert about("ship-to")  # payload on cancelled
    assert len(about("gift-note")) >= 2  # not JSON, and a duplicate
    assert about("no-such-question")  # unknown
    assert about("coupon-code")  # metadata not an object
    assert about("delivery-slot") and about("insurance")  # missing
    # bad status, cancelled payload, not JSON, duplicate, unknown, metadata, not a
    # mapping, no interrupt id, missing: nine problems (missing may be one or two).
    assert len(problems) >= 9
    for text_ in (str(exc), repr(exc), exc.message, *problems):
        assert SECRET not in text_
    assert chat.pending_interrupts is batch and flags(chat) == (False, False)


def _cycle_list() -> list[Any]:
    x: list[Any] = []
    x.append(x)
    return x


def _cycle_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = {"again": d}
    return d


class _Custom:
    pass


NOT_JSON: dict[str, Any] = {
    "nan": math.nan,
    "infinity": math.inf,
    "minus infinity": -math.inf,
    "nan deep": {"prices": [1.0, math.nan]},
    "int key": {1: "one"},
    "none key": {None: "none"},
    "tuple key": {("a", "b"): 1},
    "list cycle": _cycle_list(),
    "dict cycle": _cycle_dict(),
    "bytes": b"raw",
    "bytearray": bytearray(b"raw"),
    "set": {1, 2},
    "frozenset": frozenset({"a"}),
    "datetime": datetime.datetime(2027, 1, 1, tzinfo=datetime.UTC),
    "date": datetime.date(2027, 1, 1),
    "lambda": lambda: None,
    "builtin callable": len,
    "custom object": _Custom(),
    "plain object": object(),
    "decimal": Decimal("1.5"),
    "complex": 1j,
}


@pytest.mark.parametrize("where", ["payload", "nested payload", "metadata"])
@pytest.mark.parametrize("value", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_R_B2_values_that_are_not_json_are_problems(value: Any, where: str) -> None:
    """R-B2: the value is a problem naming the interrupt; the batch stays unclaimed."""
    driver, chat, batch = paused_chat(pause(q("purchase"), q("note")), succeed())
    if where == "payload":
        entry = resolved("purchase", value)
    elif where == "nested payload":
        entry = resolved("purchase", {"answer": {"items": [1, value]}})
    else:
        entry = resolved("purchase", True, metadata={"extra": value})
    entries = [entry, resolved("note", "ok")]
    exc = assert_rejected(driver, chat, InvalidResumeError, lambda: chat.resume(batch.id, entries))
    problems = exc.problems  # type: ignore[attr-defined]
    assert len(problems) == 1 and "purchase" in problems[0], problems
    assert chat.pending_interrupts is batch and flags(chat) == (False, False)
    chat.resume(batch.id, [resolved("purchase", True), resolved("note", "ok")])
    assert flags(chat) == (True, True)


def test_R_B3_payload_violating_the_response_schema_is_sent_as_is() -> None:
    """R-B3: the runtime never validates against response_schema, and never fills in
    its defaults: the server is authoritative."""
    schema_with_default = {
        "type": "object",
        "properties": {"gift": {"type": "boolean", "default": False}},
        "required": ["gift"],
    }
    driver, chat, batch = paused_chat(
        pause(
            q("purchase", responseSchema=SCHEMA),
            q("wrap", responseSchema=schema_with_default),
            q("count", responseSchema={"type": "integer", "minimum": 1}),
        ),
        succeed(),
    )
    chat.resume(
        batch.id,
        [
            resolved("purchase", {"approved": "yes please", "extra": 1}),
            resolved("wrap", {}),
            resolved("count", "zero"),
        ],
    )
    assert flags(chat) == (True, True)
    driver.run_until_idle()
    assert resume_requests(driver)[0].resume == [
        {
            "interruptId": "purchase",
            "status": "resolved",
            "payload": {"approved": "yes please", "extra": 1},
        },
        {"interruptId": "wrap", "status": "resolved", "payload": {}},
        {"interruptId": "count", "status": "resolved", "payload": "zero"},
    ]
    assert chat.error is None


def test_R_B2_a_batch_id_given_as_a_str_subclass_is_read_as_its_text() -> None:
    """R-B2, R-C2: the batch id kept in a ``str`` subclass (an application's own id type,
    a StrEnum) claims the batch as its text does, as entries' interrupt ids already
    did; before, it was refused with a message quoting the very id that was pending."""

    class BatchId(str):
        pass

    driver, chat, batch = paused_chat(pause(q("purchase")), succeed())
    chat.resume(BatchId(batch.id), answer_all(batch))
    assert flags(chat) == (True, True)
    driver.run_until_idle()
    assert chat.error is None and chat.pending_interrupts is None
    (sent,) = resume_requests(driver)
    assert [e["interruptId"] for e in sent.resume] == ["purchase"]


def test_R_B4_answers_are_copied_at_claim_time_including_for_retries() -> None:
    """R-B4, R-F2: mutating the application's objects after resume changes nothing
    that is sent, on the first attempt or on a retry."""
    driver, chat, batch = paused_chat(
        pause(q("purchase"), q("shipping-address")), refuse(503), refuse(503), succeed()
    )
    payload = {"approved": True, "items": ["lamp"]}
    meta = {"source": "form"}
    entry = {"interrupt_id": "purchase", "status": "resolved", "payload": payload, "metadata": meta}
    address = {"addressId": "address-123"}
    entries = [entry, resolved("shipping-address", address)]
    chat.resume(batch.id, entries)
    expected = [
        {
            "interruptId": "purchase",
            "status": "resolved",
            "payload": {"approved": True, "items": ["lamp"]},
            "metadata": {"source": "form"},
        },
        {
            "interruptId": "shipping-address",
            "status": "resolved",
            "payload": {"addressId": "address-123"},
        },
    ]
    # Before the first send.
    payload["approved"] = False
    payload["items"].append("sofa")
    meta["source"] = "tampered"
    entry["status"] = "cancelled"
    address["addressId"] = "address-999"
    entries.append(resolved("extra"))
    entries.reverse()
    assert driver.step()  # the first attempt goes out and is refused
    # Between attempts.
    del entry["payload"]
    entry["interrupt_id"] = "shipping-address"
    payload.clear()
    entries.clear()
    driver.run_until_idle()

    sent = resume_requests(driver)
    assert len(sent) == 3
    assert all(r.resume == expected for r in sent)
    bodies = [r.json for r in sent]
    for body in bodies:
        body.pop("runId")
    assert bodies[0] == bodies[1] == bodies[2]
    assert len({r.run_id for r in sent}) == 3
    assert chat.error is None and flags(chat) == (False, False)


def test_R_B4_an_answer_built_with_frozendict_set_is_copied_at_claim_time() -> None:
    """R-B4, R-F2: ``FrozenDict.set`` (reference.md: how to derive an object from a
    frozen one) freezes the value it is given, so an answer built with it is copied
    like any other: the application's list, changed after resume, does not reach the
    retry, which re-sends the same answers byte for byte."""
    driver, chat, batch = paused_chat(pause(q("purchase")), refuse(503), succeed())
    items = ["lamp"]
    payload = freeze({"approved": True}).set("items", items)
    chat.resume(batch.id, [resolved("purchase", payload)])
    assert driver.step()  # the first attempt goes out and is refused
    items.append("sofa")
    driver.run_until_idle()
    answer = {"approved": True, "items": ["lamp"]}
    expected = {"interruptId": "purchase", "status": "resolved", "payload": answer}
    assert [r.resume for r in resume_requests(driver)] == [[expected], [expected]]
    assert thaw(payload) == answer


def test_R_B2_frozendict_set_refuses_what_is_not_json() -> None:
    """R-B2: a NaN (or any value with no JSON form) put into an answer through
    ``FrozenDict.set`` is refused where it is put, as ``freeze`` refuses it, rather
    than accepted by resume() and claimed with a request that cannot be written."""
    for value in (math.nan, math.inf, {1, 2}, {"deep": [math.nan]}):
        with pytest.raises(NotJSONError):
            freeze({}).set("total", value)
    with pytest.raises(NotJSONError):
        freeze({}).set(1, "a key that is not a string")  # type: ignore[arg-type]


def test_R_B5_the_batch_id_never_leaves_the_runtime() -> None:
    """R-B5: across a whole scenario (two pauses, set_state while paused, a retry,
    a local tool, a follow-up), no batch id is in any request, state or history."""

    def echo(args: Any) -> Any:
        return {"echo": args}

    driver = FakeDriver(
        ScriptedAgent().then(
            pause(q("purchase"), q("shipping-address"), events=(state_snapshot({"step": 1}),)),
            refuse(503),
            succeed(
                state_delta({"op": "add", "path": "/step", "value": 2}),
                *tool_call("call-1", "echo", {"x": 1}),
            ),
            pause(q("purchase"), q("shipping-address"), events=tuple(text("a2", "Again?"))),
            succeed(*text("a3", "Ordered")),
            succeed(*text("a4", "Anything else?")),
        )
    )
    chat = driver.chat(OPTS, local_tools={"echo": echo})
    seen_ids: set[str] = set()
    texts: list[str] = []

    def record(r: Resource) -> None:
        if r.pending_interrupts is not None:
            seen_ids.add(r.pending_interrupts.id)
        texts.append(dumps(thaw(r.state)))
        texts.append(dumps([encode_message(m) for m in r.messages]))
        texts.append(dumps(thaw(r.core_state.checkpoint.state)))

    chat.subscribe(record)
    chat.send("Buy the lamp")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    chat.set_state({"step": 1, "draft": "keep"})
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()
    second = chat.pending_interrupts
    assert second is not None and second.id != batch.id
    chat.resume(second.id, answer_all(second))
    driver.run_until_idle()
    chat.send("Thanks")
    driver.run_until_idle()

    assert chat.error is None
    assert seen_ids == {batch.id, second.id}
    assert len(driver.requests) == 6
    for batch_id in seen_ids:
        for request in driver.requests:
            assert batch_id not in request.body
        for t in texts:
            assert batch_id not in t


def test_R_B6_resume_request_carries_the_checkpoint_and_the_latest_set_state() -> None:
    """R-B6, R-D1: same thread, new run id, the latest set_state made while paused,
    the committed history, tools, context, forwarded props and the wire entries."""
    options = Options(
        retry=RetryPolicy(jitter=0),
        tools=(Tool(name="search", description="Search the catalogue", parameters=SCHEMA),),
        context=(Context(description="locale", value="fr-FR"),),
        forwarded_props={"tenant": "acme", "flags": [1, 2]},
    )
    driver, chat, batch = paused_chat(
        pause(
            q("purchase"),
            q("shipping-address"),
            events=(*text("a1", "I need your approval."), state_snapshot({"cart": ["lamp"]})),
        ),
        succeed(),
        options=options,
        thread_id="order-42",
        state={"cart": []},
    )
    first = driver.requests[0]
    chat.set_state({"cart": ["lamp"], "note": "first"})
    latest = {"cart": ["lamp", "bulb"], "note": "latest"}
    chat.set_state(latest)
    latest["cart"].append("tampered")  # set_state copies, too
    chat.resume(
        batch.id,
        [
            resolved("purchase", {"approved": True}, metadata={"by": "alice"}),
            {"interrupt_id": "shipping-address", "status": "cancelled"},
        ],
    )
    driver.run_until_idle()

    request = driver.requests[1]
    body = request.json
    run_id = body.pop("runId")
    assert run_id == request.run_id and run_id != first.run_id
    assert request.thread_id == first.thread_id == "order-42"
    assert body == {
        "threadId": "order-42",
        "state": {"cart": ["lamp", "bulb"], "note": "latest"},
        "messages": [
            {"role": "user", "id": "u1", "content": "Buy the lamp"},
            {"role": "assistant", "id": "a1", "content": "I need your approval."},
        ],
        "tools": [{"name": "search", "description": "Search the catalogue", "parameters": SCHEMA}],
        "context": [{"description": "locale", "value": "fr-FR"}],
        "forwardedProps": {"tenant": "acme", "flags": [1, 2]},
        "protocolVersion": "1.0",
        "resume": [
            {
                "interruptId": "purchase",
                "status": "resolved",
                "payload": {"approved": True},
                "metadata": {"by": "alice"},
            },
            {"interruptId": "shipping-address", "status": "cancelled"},
        ],
    }


def test_R_B6_without_set_state_the_resume_carries_the_committed_state() -> None:
    """R-B6, R-A1: the state streamed by the interrupted run is what the resume sends."""
    driver, chat, batch = paused_chat(
        pause(
            q("purchase"),
            events=(
                state_snapshot({"cart": ["lamp"], "total": 10}),
                state_delta({"op": "replace", "path": "/total", "value": 12}),
            ),
        ),
        succeed(),
        state={"cart": []},
    )
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()
    first, resumed = driver.requests
    assert first.json["state"] == {"cart": []}
    assert resumed.json["state"] == {"cart": ["lamp"], "total": 12}
    assert resumed.json["messages"] == [{"role": "user", "id": "u1", "content": "Buy the lamp"}]
    assert resumed.thread_id == first.thread_id and resumed.run_id != first.run_id
    assert resumed.resume == [
        {"interruptId": "purchase", "status": "resolved", "payload": {"ok": True}}
    ]


# -- R-C: progress flags -------------------------------------------------------------


def test_R_C1_R_C2_flags_idle_while_paused_and_set_synchronously_by_resume() -> None:
    """R-C1, R-C2: False/False while answers are awaited; True/True when resume
    returns, before anything is sent; a second resume raises BatchClaimedError."""
    driver, chat, batch = paused_chat(pause(q("purchase")), succeed())
    assert flags(chat) == (False, False)
    chat.set_state({"draft": 1})  # still paused
    assert flags(chat) == (False, False)
    chat.resume(batch.id, answer_all(batch))
    assert flags(chat) == (True, True)
    assert len(driver.requests) == 1  # nothing sent yet: the claim is synchronous
    assert chat.pending_interrupts is batch
    assert_rejected(
        driver, chat, BatchClaimedError, lambda: chat.resume(batch.id, answer_all(batch))
    )
    assert len(driver.requests) == 1
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert flags(chat) == (False, False)


def test_R_C3_the_claimed_batch_stays_visible_until_the_matching_run_started() -> None:
    """R-C3, R-C4: the same object until the acknowledgement, then None."""
    seen: list[Batch | None] = []

    def slow(req: Request) -> Reply:
        return held(started(req), *text("a2", "Ordering"), finished(req))

    driver, chat, batch = paused_chat(pause(q("purchase")), slow)
    chat.subscribe(lambda r: seen.append(r.pending_interrupts))
    chat.resume(batch.id, answer_all(batch))
    assert chat.pending_interrupts is batch
    assert driver.step()  # sent; the stream is held
    assert not driver.step()
    assert chat.pending_interrupts is batch and flags(chat) == (True, True)
    driver.release(1)
    assert driver.step()  # the matching RUN_STARTED
    assert chat.pending_interrupts is None
    assert flags(chat) == (True, True)
    assert chat.core_state.claim is None
    driver.release(10)
    driver.run_until_idle()
    assert chat.pending_interrupts is None and flags(chat) == (False, False)
    assert chat.messages[-1] == AssistantMessage(id="a2", content="Ordering")
    n = seen.index(None)
    assert n >= 1
    assert all(b is batch for b in seen[:n]) and all(b is None for b in seen[n:])


@pytest.mark.parametrize("mismatch", ["run id", "thread id", "both"])
def test_R_C3_run_started_with_other_ids_is_a_retryable_protocol_error(mismatch: str) -> None:
    """R-C3, R-F2: not an acknowledgement; the claim is kept and a retry goes out with
    the same answers and a fresh run id."""

    def wrong(req: Request) -> Reply:
        ack = started(req)
        if mismatch in ("run id", "both"):
            ack["runId"] = "someone-elses-run"
        if mismatch in ("thread id", "both"):
            ack["threadId"] = "someone-elses-thread"
        return reply(ack, *text("a-wrong", "not mine"), finished(req))

    driver, chat, batch = paused_chat(pause(q("purchase")), wrong, succeed(*text("a-right", "ok")))
    chat.resume(batch.id, answer_all(batch))
    assert driver.step()  # sent
    assert driver.step()  # the mismatched RUN_STARTED
    assert chat.pending_interrupts is batch
    assert flags(chat) == (True, True)
    assert chat.core_state.claim is not None
    assert driver.pending_timers() == [(FAKE_EPOCH + 0.5, "retry")]
    assert_rejected(
        driver, chat, BatchClaimedError, lambda: chat.resume(batch.id, answer_all(batch))
    )
    driver.run_until_idle()

    first, second = resume_requests(driver)
    assert (
        first.resume
        == second.resume
        == [{"interruptId": "purchase", "status": "resolved", "payload": {"ok": True}}]
    )
    assert second.run_id != first.run_id and second.thread_id == first.thread_id
    assert chat.pending_interrupts is None and flags(chat) == (False, False)
    assert chat.error is None
    ids = [m.id for m in chat.messages]
    assert "a-right" in ids and "a-wrong" not in ids


def test_R_C3_mismatched_run_started_with_no_retry_left_releases_the_claim() -> None:
    """R-C3, R-F4: the retryable ProtocolError is surfaced once the budget is spent;
    the same batch can be submitted again."""

    def wrong(req: Request) -> Reply:
        return reply({**started(req), "runId": "other"}, finished(req))

    options = Options(retry=RetryPolicy(jitter=0, max_attempts=1))
    driver, chat, batch = paused_chat(pause(q("purchase")), wrong, succeed(), options=options)
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()
    assert type(chat.error) is ProtocolError and chat.error.retryable is True
    assert len(driver.requests) == 2
    assert chat.pending_interrupts is batch and flags(chat) == (False, False)
    chat.resume(batch.id, answer_all(batch))
    assert chat.error is None
    driver.run_until_idle()
    assert chat.pending_interrupts is None and chat.error is None


def test_R_C4_is_resuming_holds_through_local_tools_and_follow_ups_until_settled() -> None:
    """R-C4: every notification from the claim until the end shows is_resuming and
    is_loading True, except the last, which shows both False."""
    inside_tool: list[tuple[bool, bool]] = []
    records: list[tuple[bool, bool]] = []

    def place_order(args: Any) -> Any:
        inside_tool.append(flags(chat))
        return {"order": "o-1", "sku": args["sku"]}

    driver, chat, batch = paused_chat(
        pause(q("purchase")),
        succeed(*text("a2", "Ordering"), *tool_call("call-9", "place_order", {"sku": "lamp"})),
        succeed(*text("a3", "Done")),
        local_tools={"place_order": place_order},
    )
    chat.subscribe(lambda r: records.append((*flags(r), r.messages[-1].id)))
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()

    assert inside_tool == [(True, True)]
    settled = next(n for n, rec in enumerate(records) if rec[:2] != (True, True))
    assert settled > 5
    # Until the follow-up run finished: both True, through the tool and the follow-up.
    assert all(rec[:2] == (True, True) for rec in records[:settled])
    assert any(rec[2] == "a2" for rec in records[:settled])
    assert any(rec[2] == "a3" for rec in records[:settled])  # the follow-up streaming
    # From its success on: both False.
    assert records[settled] == (False, False, "a3")
    assert all(rec[:2] == (False, False) for rec in records[settled:])
    follow_up = driver.requests[2]
    assert follow_up.resume is None and "resume" not in follow_up.json
    assert follow_up.json["messages"][-1] == {
        "role": "tool",
        "id": follow_up.json["messages"][-1]["id"],
        "toolCallId": "call-9",
        "content": '{"order":"o-1","sku":"lamp"}',
    }
    assert chat.pending_interrupts is None and chat.error is None


ENDINGS = ["success", "interrupt", "cancelled outcome", "run error", "stop", "send", "thread"]


@pytest.mark.parametrize("ending", ENDINGS)
def test_R_C4_the_interaction_settles_on_each_ending(ending: str) -> None:
    """R-C4, R-C5, R-D3, R-F5, R-H1, R-J5: is_resuming stays True after the
    acknowledgement until the interaction settles, then goes False."""
    terminal: dict[str, Callable[[Request], Any]] = {
        "success": finished,
        "interrupt": lambda req: interrupted(req, q("purchase")),
        "cancelled outcome": lambda req: finished(req, {"type": "cancelled"}),
        "run error": lambda _req: run_error("boom"),
    }

    def slow(req: Request) -> Reply:
        end = terminal.get(ending, finished)(req)
        return held(started(req), *text("a2", "Working"), end)

    driver, chat, batch = paused_chat(pause(q("purchase")), slow, succeed())
    chat.resume(batch.id, answer_all(batch))
    driver.step()
    driver.release(4)  # RUN_STARTED and the text, not the terminal event
    for _ in range(4):
        assert driver.step()
    assert chat.pending_interrupts is None
    assert flags(chat) == (True, True)
    assert chat.messages[-1] == AssistantMessage(id="a2", content="Working")

    if ending in terminal:
        driver.release(1)
        driver.run_until_idle()
    elif ending == "stop":
        chat.stop()
    elif ending == "send":
        chat.send("Something else")
    else:
        chat.set_thread_id("another-thread")

    assert chat.is_resuming is False
    assert chat.is_loading is (ending == "send")
    assert chat.needs_new_thread is (ending in ("run error", "stop"))
    new_batch = chat.pending_interrupts
    if ending == "interrupt":
        assert new_batch is not None and new_batch.id != batch.id
    else:
        assert new_batch is None


@pytest.mark.parametrize("where", ["resumed run", "follow-up run"])
def test_R_C5_a_new_interrupt_publishes_a_new_batch_and_drops_both_flags(where: str) -> None:
    """R-C5, R-A2: even with the same interrupt id, the batch id is new."""

    def noop(args: Any) -> str:
        return "done"

    if where == "resumed run":
        script: tuple[Any, ...] = (pause(q("purchase"), events=tuple(text("a2", "Once more"))),)
    else:
        script = (
            succeed(*tool_call("call-1", "noop", {})),
            pause(q("purchase"), events=tuple(text("a2", "Once more"))),
        )
    driver, chat, batch = paused_chat(pause(q("purchase")), *script, local_tools={"noop": noop})
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()

    fresh = chat.pending_interrupts
    assert fresh is not None and fresh is not batch
    assert fresh.id != batch.id
    assert fresh.interrupts == batch.interrupts
    assert flags(chat) == (False, False)
    assert chat.error is None and chat.needs_new_thread is False
    assert chat.messages[-1] == AssistantMessage(id="a2", content="Once more")
    assert_rejected(driver, chat, StaleBatchError, lambda: chat.resume(batch.id, answer_all(batch)))


# -- R-I: lifetime and observers -------------------------------------------------------


@pytest.mark.parametrize("runtime", ["new driver", "new resource on the same driver"])
def test_R_I1_a_new_runtime_has_no_pending_batch_and_cannot_restore_one(runtime: str) -> None:
    """R-I1: same thread id, same history and state: still nothing to resume."""
    old_driver, old_chat, batch = paused_chat(pause(q("purchase")), thread_id="order-42")
    saved_id = batch.id
    saved_answers = answer_all(batch)

    driver = FakeDriver(ScriptedAgent().then(succeed())) if runtime == "new driver" else old_driver
    if runtime != "new driver":
        driver.agent.then(succeed())
    chat = driver.chat(
        OPTS, thread_id="order-42", messages=list(old_chat.messages), state=thaw(old_chat.state)
    )
    assert chat.pending_interrupts is None
    assert flags(chat) == (False, False)
    sent = len(driver.requests)
    assert_rejected(driver, chat, StaleBatchError, lambda: chat.resume(saved_id, saved_answers))
    assert_rejected(
        driver, chat, StaleBatchError, lambda: chat.resume(saved_id, [cancelled("purchase")])
    )
    chat.send("Continue")
    driver.run_until_idle()
    assert len(driver.requests) == sent + 1
    request = driver.requests[-1]
    assert request.thread_id == "order-42" and request.resume is None
    assert "resume" not in request.json
    assert old_chat.pending_interrupts is batch  # the live one is untouched


def test_R_I2_an_observer_can_resume_the_moment_the_batch_appears() -> None:
    """R-I2, R-C2: the call from inside the notification claims at once; the
    observer's own notification comes after, never nested."""
    driver = FakeDriver(ScriptedAgent().then(pause(q("purchase")), succeed(*text("a2", "Ok"))))
    chat = driver.chat(OPTS)
    log: list[tuple[str, Any]] = []
    depth = [0]

    def observer(r: Resource) -> None:
        depth[0] += 1
        b = r.pending_interrupts
        log.append(("enter", (depth[0], b, r.is_loading, r.is_resuming)))
        if b is not None and not r.is_resuming and not any(k == "resumed" for k, _ in log):
            r.resume(b.id, answer_all(b))
            log.append(("resumed", (depth[0], b, r.is_loading, r.is_resuming)))
        depth[0] -= 1
        log.append(("exit", None))

    chat.subscribe(observer)
    chat.send("Buy the lamp")
    driver.run_until_idle()

    assert chat.error is None
    kinds = [k for k, _ in log if k != "resumed"]
    assert kinds == ["enter", "exit"] * (len(kinds) // 2)
    assert all(v[0] == 1 for k, v in log if k != "exit")
    n = next(i for i, (k, _) in enumerate(log) if k == "resumed")
    _, (_, batch, loading, resuming) = log[n]
    assert batch is not None and (loading, resuming) == (True, True)
    # The notification that showed the paused batch, then the one for the claim.
    assert log[n - 1] == ("enter", (1, batch, False, False))
    assert log[n + 1] == ("exit", None)
    assert log[n + 2] == ("enter", (1, batch, True, True))
    assert [r.resume is not None for r in driver.requests] == [False, True]
    assert chat.pending_interrupts is None and flags(chat) == (False, False)
    assert chat.messages[-1] == AssistantMessage(id="a2", content="Ok")


def test_R_I2_an_observer_can_resubmit_from_the_error_notification() -> None:
    """R-I2, R-F4: a failure before the acknowledgement releases the claim; the same
    batch is submitted again from inside the error notification; error clears."""
    driver, chat, batch = paused_chat(pause(q("purchase")), refuse(400, "bad"), succeed())
    errors: list[Any] = []

    def observer(r: Resource) -> None:
        if r.error is not None and r.pending_interrupts is batch and not r.is_resuming:
            errors.append(r.error)
            r.resume(batch.id, answer_all(batch))

    chat.subscribe(observer)
    chat.resume(batch.id, answer_all(batch))
    driver.run_until_idle()

    assert errors == [TransportError.from_status(400, "bad")]
    assert errors[0].retryable is False and errors[0].status == 400
    first, second = resume_requests(driver)
    assert first.resume == second.resume
    assert chat.error is None
    assert chat.pending_interrupts is None and flags(chat) == (False, False)


def test_R_I2_an_observer_can_change_thread_and_replace_messages() -> None:
    """R-I2, R-H1, R-H3: from inside the notification that shows the batch."""
    driver = FakeDriver(ScriptedAgent().then(pause(q("purchase")), succeed(*text("a9", "Hi"))))
    chat = driver.chat(OPTS, thread_id="old-thread")
    done: list[str] = []
    replacement = [UserMessage(id="fresh", content="Start over")]

    def observer(r: Resource) -> None:
        if r.pending_interrupts is not None and not done:
            done.append("yes")
            r.set_thread_id("new-thread")
            r.set_messages(replacement)

    chat.subscribe(observer)
    chat.send("Buy the lamp")
    driver.run_until_idle()

    assert done == ["yes"] and chat.error is None
    assert chat.thread_id == "new-thread"
    assert chat.pending_interrupts is None and flags(chat) == (False, False)
    _, request = driver.requests
    assert request.thread_id == "new-thread" and request.resume is None
    assert request.json["messages"] == [{"role": "user", "id": "fresh", "content": "Start over"}]
    assert list(chat.messages) == [*replacement, AssistantMessage(id="a9", content="Hi")]


def _phase(r: Resource) -> str:
    if r.pending_interrupts is not None:
        return "claimed" if r.is_resuming else "paused"
    if r.is_resuming:
        return "tools" if r.core_state.tools is not None else "resumed run"
    return "running" if r.is_loading else "idle"


def test_R_I2_notifications_are_delivered_in_order_and_never_nested() -> None:
    """R-I2, R-C4: three observers; the middle one calls intents from inside a
    notification. Each notification reaches the observers in subscription order,
    one at a time (never nested), and the phases arrive in the order they happened."""
    driver = FakeDriver(
        ScriptedAgent().then(pause(q("purchase")), succeed(*tool_call("c1", "t", {})), succeed())
    )
    chat = driver.chat(OPTS, local_tools={"t": lambda _a: "ok"})
    log: list[tuple[str, str, int]] = []
    depth = [0]
    acted: list[str] = []
    phases: list[str] = []

    def make(name: str) -> Callable[[Resource], None]:
        def observer(r: Resource) -> None:
            depth[0] += 1
            log.append(("enter", name, depth[0]))
            if name == "C":
                phases.append(_phase(r))
            b = r.pending_interrupts
            if name == "A" and b is not None and not r.is_resuming and not acted:
                acted.append("acted")
                r.set_state({"draft": True})  # a notification of its own
                r.resume(b.id, answer_all(b))  # and another
            log.append(("exit", name, depth[0]))
            depth[0] -= 1

        return observer

    for name in "CAB":
        chat.subscribe(make(name))
    chat.send("Buy the lamp")
    driver.run_until_idle()

    assert acted == ["acted"] and chat.error is None
    assert all(d == 1 for _, _, d in log)
    one = [("enter", "C"), ("exit", "C"), ("enter", "A"), ("exit", "A")]
    one += [("enter", "B"), ("exit", "B")]
    assert [(k, n) for k, n, _ in log] == one * (len(log) // 6)
    assert len(log) % 6 == 0
    distinct = [p for n, p in enumerate(phases) if n == 0 or phases[n - 1] != p]
    assert distinct == [
        "running",
        "paused",
        "claimed",
        "resumed run",
        "tools",
        "resumed run",
        "idle",
    ]
    assert resume_requests(driver)[0].json["state"] == {"draft": True}
    assert flags(chat) == (False, False) and chat.pending_interrupts is None
