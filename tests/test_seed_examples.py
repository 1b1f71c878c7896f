"""The seed document's own examples (shared/seed/interrupt-and-resume.txt), as tests.

Each test quotes the sentence or example it proves and names the SPEC rules that
restate it. The seed's TypeScript ``resume({batchId, entries})`` is interlude's
``resume(batch_id, entries)`` with snake_case keys; the wire form is the same.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from interlude.adapters.fake import (
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    interrupted,
    reply,
    started,
    text,
)
from interlude.adapters.resource import Resource
from interlude.core.errors import (
    BatchClaimedError,
    BatchExpiredError,
    InterludeError,
    InvalidResumeError,
    StaleBatchError,
)
from interlude.core.json import thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.state import Batch
from interlude.core.wire import AssistantMessage, UserMessage

OPTS = Options(retry=RetryPolicy(jitter=0))

# "For example, a server can ask for a boolean approval object:" (verbatim)
PURCHASE: dict[str, Any] = {
    "id": "purchase",
    "reason": "input_required",
    "message": "Approve this purchase?",
    "responseSchema": {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
        "additionalProperties": False,
    },
}
# "a workflow with purchase approval and an address question": the seed does not
# show the address interrupt, only its id and its answer ({addressId: 'address-123'}).
SHIPPING: dict[str, Any] = {
    "id": "shipping-address",
    "reason": "input_required",
    "message": "Where should we ship it?",
    "responseSchema": {
        "type": "object",
        "properties": {"addressId": {"type": "string"}},
        "required": ["addressId"],
    },
}

# The seed's resume example, entry for entry.
SEED_ENTRIES: list[dict[str, Any]] = [
    {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": True}},
    {
        "interrupt_id": "shipping-address",
        "status": "resolved",
        "payload": {"addressId": "address-123"},
    },
]
SEED_WIRE: list[dict[str, Any]] = [
    {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
    {
        "interruptId": "shipping-address",
        "status": "resolved",
        "payload": {"addressId": "address-123"},
    },
]


def ask(*interrupts: Mapping[str, Any]) -> Callable[[Request], Reply]:
    def answer(req: Request) -> Reply:
        return reply(
            started(req), *text("a1", "I need two answers."), interrupted(req, *interrupts)
        )

    return answer


def done(req: Request) -> Reply:
    return reply(started(req), *text("a2", "Ordered."), finished(req))


def checkout(
    *replies: Callable[[Request], Reply], interrupts: tuple[Mapping[str, Any], ...] = ()
) -> tuple[FakeDriver, Resource, Batch]:
    """A chat paused on the seed's purchase + shipping-address batch (or ``interrupts``)."""
    driver = FakeDriver(ScriptedAgent().then(ask(*(interrupts or (PURCHASE, SHIPPING))), *replies))
    chat = driver.chat(OPTS, thread_id="checkout-1")
    chat.send("Buy the lamp", message_id="u1")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None, chat.error
    return driver, chat, batch


def test_seed_purchase_and_shipping_batch_is_read_and_resumed_with_the_seed_entries() -> None:
    """Seed "Read a Batch" and "Submit Every Response Together"; R-A2, R-A3, R-A4,
    R-B1, R-B5, R-B6, R-C1: the batch holds both questions as the server sent them;
    the resume request carries exactly the seed's entries in wire form, no batch id."""
    driver, chat, batch = checkout(done)

    assert (chat.is_loading, chat.is_resuming) == (False, False)
    purchase, shipping = batch.interrupts
    assert (purchase.id, purchase.reason, purchase.message) == (
        "purchase",
        "input_required",
        "Approve this purchase?",
    )
    assert thaw(purchase.response_schema) == PURCHASE["responseSchema"]
    assert (purchase.tool_call_id, purchase.expires_at, purchase.metadata) == (None, None, None)
    assert purchase.subagent_run_id is None
    assert shipping.id == "shipping-address"
    assert thaw(shipping.response_schema) == SHIPPING["responseSchema"]
    with pytest.raises(TypeError):
        purchase.response_schema["required"] = []  # type: ignore[index]

    chat.resume(batch.id, copy.deepcopy(SEED_ENTRIES))
    driver.run_until_idle()

    assert len(driver.requests) == 2
    request = driver.requests[1]
    assert request.resume == SEED_WIRE
    assert request.json["resume"] == SEED_WIRE  # nothing else under "resume"
    assert request.thread_id == "checkout-1"
    assert batch.id not in request.body
    assert "batchId" not in request.body and "batch_id" not in request.body
    assert chat.pending_interrupts is None
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    assert list(chat.messages) == [
        UserMessage(id="u1", content="Buy the lamp"),
        AssistantMessage(id="a1", content="I need two answers."),
        AssistantMessage(id="a2", content="Ordered."),
    ]


def test_seed_a_denial_is_a_resolved_entry_not_a_cancellation() -> None:
    """Seed: "A denial is a resolved response with the answer expected by the server,
    such as { approved: false }." R-B1."""
    driver, chat, batch = checkout(done)
    chat.resume(
        batch.id,
        [
            {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": False}},
            SEED_ENTRIES[1],
        ],
    )
    driver.run_until_idle()
    sent = driver.requests[1].resume
    assert sent is not None
    assert sent[0] == {
        "interruptId": "purchase",
        "status": "resolved",
        "payload": {"approved": False},
    }
    assert sent[0]["payload"]["approved"] is False
    assert chat.error is None and chat.pending_interrupts is None


def test_seed_cancellation_is_sent_without_payload_with_the_whole_batch() -> None:
    """Seed: "Use cancelled without a payload when abandoning an interrupt without an
    answer. Cancellation entries are still submitted with the entire batch; they do
    not mean calling stop()." R-B1, R-C2: a normal resume, flags set, one request."""
    driver, chat, batch = checkout(done)
    chat.resume(
        batch.id,
        [{"interrupt_id": "purchase", "status": "cancelled"}, SEED_ENTRIES[1]],
    )
    assert (chat.is_loading, chat.is_resuming) == (True, True)
    assert chat.pending_interrupts is batch
    driver.run_until_idle()
    assert driver.requests[1].resume == [
        {"interruptId": "purchase", "status": "cancelled"},
        SEED_WIRE[1],
    ]
    assert "payload" not in driver.requests[1].json["resume"][0]
    assert chat.error is None and chat.needs_new_thread is False
    assert chat.messages[-1] == AssistantMessage(id="a2", content="Ordered.")


REJECTED: dict[str, tuple[type[InterludeError], Callable[[Batch], tuple[str, Any]]]] = {
    "invalid (status)": (
        InvalidResumeError,
        lambda b: (b.id, [{**SEED_ENTRIES[0], "status": "approved"}, SEED_ENTRIES[1]]),
    ),
    "invalid (cancelled with payload)": (
        InvalidResumeError,
        lambda b: (b.id, [{**SEED_ENTRIES[0], "status": "cancelled"}, SEED_ENTRIES[1]]),
    ),
    "incomplete": (InvalidResumeError, lambda b: (b.id, SEED_ENTRIES[:1])),
    "empty": (InvalidResumeError, lambda b: (b.id, [])),
    "duplicate": (InvalidResumeError, lambda b: (b.id, [*SEED_ENTRIES, SEED_ENTRIES[0]])),
    "unknown interrupt": (
        InvalidResumeError,
        lambda b: (b.id, [*SEED_ENTRIES, {"interrupt_id": "gift", "status": "cancelled"}]),
    ),
    "stale (made-up id)": (StaleBatchError, lambda b: ("batch-from-another-tab", SEED_ENTRIES)),
}


@pytest.mark.parametrize("case", REJECTED, ids=REJECTED.keys())
def test_seed_invalid_incomplete_duplicate_and_stale_submissions_throw_without_sending(
    case: str,
) -> None:
    """Seed: "Invalid, incomplete, duplicate, stale, or expired submissions throw
    synchronously without sending a request." R-B2; then the batch is still open."""
    exc_type, build = REJECTED[case]
    driver, chat, batch = checkout(done)
    before = chat.core_state
    batch_id, entries = build(batch)
    with pytest.raises(InterludeError) as info:
        chat.resume(batch_id, entries)
    assert type(info.value) is exc_type, repr(info.value)
    assert chat.core_state == before
    assert (chat.is_loading, chat.is_resuming) == (False, False)
    driver.run_until_idle()
    assert len(driver.requests) == 1
    assert chat.pending_interrupts is batch
    chat.resume(batch.id, SEED_ENTRIES)  # the form can be fixed and submitted
    driver.run_until_idle()
    assert driver.requests[1].resume == SEED_WIRE


def test_seed_expired_submission_throws_without_sending() -> None:
    """Seed: "... or expired submissions throw synchronously without sending a
    request." and "If any interrupt expires, the entire batch remains visible but
    cannot resume." R-B2, R-G1."""
    soon = {**SHIPPING, "expiresAt": "2027-01-01T00:05:00Z"}
    driver, chat, batch = checkout(done, interrupts=(PURCHASE, soon))
    driver.advance(300)
    assert chat.is_expired
    before = chat.core_state
    with pytest.raises(BatchExpiredError) as info:
        chat.resume(batch.id, SEED_ENTRIES)
    assert info.value.interrupt_ids == ("shipping-address",)
    assert chat.core_state == before
    driver.run_until_idle()
    assert len(driver.requests) == 1
    assert chat.pending_interrupts is batch
    assert (chat.is_loading, chat.is_resuming) == (False, False)


def test_seed_a_duplicate_submission_while_claimed_throws() -> None:
    """Seed: "Calling resume claims the batch synchronously, sets both flags, and
    prevents duplicate submissions." R-C2."""
    driver, chat, batch = checkout(done)
    chat.resume(batch.id, SEED_ENTRIES)
    claimed = chat.core_state
    with pytest.raises(BatchClaimedError):
        chat.resume(batch.id, SEED_ENTRIES)
    assert chat.core_state == claimed
    driver.run_until_idle()
    assert [r.resume for r in driver.requests] == [None, SEED_WIRE]


def test_seed_form_drafts_stay_with_the_batch_id_originally_displayed() -> None:
    """Seed: "Keep form drafts associated with the batch ID originally displayed. Do
    not substitute the newest batch ID when submitting an old form." R-A2, R-B2: a
    draft kept for the first batch cannot answer the second, though its interrupt
    ids match; the second batch is answered with its own id."""
    driver, chat, first = checkout(ask(PURCHASE, SHIPPING), done)
    draft = {"batch_id": first.id, "entries": copy.deepcopy(SEED_ENTRIES)}  # kept by the form
    chat.resume(first.id, SEED_ENTRIES)
    driver.run_until_idle()
    second = chat.pending_interrupts
    assert second is not None and second.id != first.id
    assert [i.id for i in second.interrupts] == [i.id for i in first.interrupts]

    before = chat.core_state
    with pytest.raises(StaleBatchError):
        chat.resume(draft["batch_id"], draft["entries"])
    assert chat.core_state == before
    assert chat.pending_interrupts is second
    driver.run_until_idle()
    assert len(driver.requests) == 2

    denial = [{**SEED_ENTRIES[0], "payload": {"approved": False}}, SEED_ENTRIES[1]]
    chat.resume(second.id, denial)
    driver.run_until_idle()
    assert driver.requests[2].resume is not None
    assert driver.requests[2].resume[0]["payload"] == {"approved": False}
    assert chat.pending_interrupts is None and chat.error is None


def test_seed_a_fresh_interruption_publishes_a_new_batch_id_with_reused_interrupt_ids() -> None:
    """Seed: "A fresh interruption publishes a new batch ID, even if the server reuses
    its interrupt IDs." R-A2, R-C5: same questions, new id, both flags False."""
    driver, chat, first = checkout(ask(PURCHASE, SHIPPING), done)
    chat.resume(first.id, SEED_ENTRIES)
    assert chat.pending_interrupts is first  # visible until the matching RUN_STARTED
    driver.run_until_idle()

    second = chat.pending_interrupts
    assert second is not None
    assert second.id != first.id
    assert second is not first
    assert second.interrupts == first.interrupts
    assert (chat.is_loading, chat.is_resuming) == (False, False)
    for request in driver.requests:
        assert first.id not in request.body and second.id not in request.body
    chat.resume(second.id, SEED_ENTRIES)
    driver.run_until_idle()
    assert [r.resume for r in driver.requests] == [None, SEED_WIRE, SEED_WIRE]
    assert chat.pending_interrupts is None and chat.error is None


def test_seed_the_server_remains_authoritative_about_the_schema() -> None:
    """Seed: "Hashbrown checks JSON compatibility and batch ownership but does not
    compile a JSON Schema validator ... the server remains authoritative about
    accepting it." R-B3: an answer outside the schema is sent as given."""
    driver, chat, batch = checkout(done)
    entries = [
        {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": "yes"}},
        {"interrupt_id": "shipping-address", "status": "resolved", "payload": 123},
    ]
    chat.resume(batch.id, entries)
    driver.run_until_idle()
    assert driver.requests[1].resume == [
        {"interruptId": "purchase", "status": "resolved", "payload": {"approved": "yes"}},
        {"interruptId": "shipping-address", "status": "resolved", "payload": 123},
    ]
