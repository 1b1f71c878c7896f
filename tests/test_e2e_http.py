"""End to end over real HTTP: HttpxTransport + TrioDriver against the embedded reference agent.

Every test serves ``ReferenceAgent`` on an ephemeral 127.0.0.1 port inside ``trio.run``, drives a
chat resource through ``TrioDriver`` and ``HttpxTransport``, and checks both sides: what the
resource shows and what the server received (``agent.requests`` keeps the raw bytes) and did
(``agent.orders``, ``agent.replays``). Faults are injected at the HTTP layer by the agent.
Every wait is bounded by ``trio.fail_after``.

Expiry tests run trio on ``MockClock(rate=1)``: time flows as usual, so sockets and hypercorn
behave as in production, and ``jump`` moves the one clock that both the agent and the driver
read (R-G4) without waiting for it.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import attrs
import hypercorn.trio
import pytest
import trio
import trio.testing
from hypercorn.config import Config

from interlude.adapters.agent import AgentApp, Fault, ReferenceAgent, serve_agent
from interlude.adapters.agent_scenarios import ADDRESS_SCHEMA, PURCHASE_SCHEMA
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.resource import Resource
from interlude.adapters.trio import AsyncResource, TrioDriver
from interlude.core import (
    BatchClaimedError,
    BatchExpiredError,
    InterruptPendingError,
    Options,
    ProtocolError,
    RecoveryRequiredError,
    RetryPolicy,
    RunError,
    StaleBatchError,
    TransportError,
    thaw,
)
from interlude.core.state import Batch
from interlude.core.wire import Context, dumps, encode_message

WAIT = 5.0
"""Seconds: the bound on any wait that should end almost at once."""

QUIET = 0.15
"""Seconds to watch for something that must not happen (longer than any retry back-off here)."""

FAST = Options(retry=RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0))

ENTRIES: list[dict[str, Any]] = [
    {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": True}},
    {
        "interrupt_id": "shipping-address",
        "status": "resolved",
        "payload": {"addressId": "address-123"},
    },
]
WIRE_ENTRIES = [
    {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
    {
        "interruptId": "shipping-address",
        "status": "resolved",
        "payload": {"addressId": "address-123"},
    },
]
CANCEL_BOTH = [
    {"interrupt_id": "purchase", "status": "cancelled"},
    {"interrupt_id": "shipping-address", "status": "cancelled"},
]
BUY = "buy an espresso machine"
ASKED = "I can order the espresso machine for you."
ORDERED = "Ordered 1 espresso machine, shipping to address-123."
EXPIRES_IN = 3.0
"""Seconds an interrupt of the expiry tests lives (kept under hypercorn's 5 s keep-alive)."""


# -- the server, watched -----------------------------------------------------------------


class Watched:
    """The agent's own ASGI app, observed from outside.

    ``ended`` holds the arrival numbers of the requests whose handler has returned: a
    stalled stream only ends when the client disconnects, so its number appearing there
    while the server runs means the server saw the disconnect. ``cut_mid_frame[n] = k``
    makes request ``n`` deliver ``k`` whole frames and half of the next, then close the
    connection without finishing the body.
    """

    def __init__(self, agent: ReferenceAgent) -> None:
        self.app = AgentApp(agent)
        self.arrived = 0
        self.ended: set[int] = set()
        self.cut_mid_frame: dict[int, int] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        number = self.arrived
        self.arrived += 1
        frames = self.cut_mid_frame.pop(number, None)
        try:
            await self.app(scope, receive, send if frames is None else _cutting(send, frames))
        finally:
            self.ended.add(number)


def _cutting(send: Any, frames: int) -> Any:
    done = False

    async def cut(message: dict[str, Any]) -> None:
        nonlocal done
        if message["type"] != "http.response.body":
            await send(message)
            return
        if done or not message["body"]:
            return  # swallowed: the body never ends properly
        parts = message["body"].split(b"\n\n")
        assert len(parts) > frames + 1, "the stream is too short to cut"
        head = b"".join(p + b"\n\n" for p in parts[:frames])
        body = head + parts[frames][: len(parts[frames]) // 2]
        await send({"type": "http.response.body", "body": body, "more_body": True})
        done = True

    return cut


async def serve_watched(
    app: Watched, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    """``serve_agent``'s twin for a watched app: the same hypercorn config."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 0.5
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(hypercorn.trio.serve, app, config, shutdown_trigger=trio.sleep_forever)
        )
        task_status.started(binds[0] + "/")


# -- the rig -------------------------------------------------------------------------------


@dataclass
class Rig:
    agent: ReferenceAgent
    driver: TrioDriver
    watched: Watched | None
    mock: trio.testing.MockClock | None
    clock: Callable[[], float] | None


def e2e(
    body: Callable[[Rig], Awaitable[None]],
    *,
    agent: ReferenceAgent | None = None,
    watch: bool = False,
    mock_time: bool = False,
    expires_in: float | None = None,
    max_frame_bytes: int | None = None,
    limit: float = 15.0,
) -> ReferenceAgent:
    """Serve the agent, open a transport and a driver, and run ``body`` against them."""
    mock = trio.testing.MockClock(rate=1.0) if mock_time else None
    offset = [0.0]

    def clock() -> float:
        """Epoch seconds on trio's clock: the mock's jumps move it, for both sides."""
        return offset[0] + trio.current_time()

    shared_clock = clock if mock_time else None
    if agent is None:
        agent = (
            ReferenceAgent(clock=clock, expires_in=expires_in)
            if mock_time
            else ReferenceAgent(expires_in=expires_in)
        )
    watched = Watched(agent) if watch else None
    extra = {} if max_frame_bytes is None else {"max_frame_bytes": max_frame_bytes}

    async def main() -> None:
        offset[0] = time.time() - trio.current_time()
        with trio.fail_after(limit):
            async with trio.open_nursery() as nursery:
                if watched is not None:
                    url = await nursery.start(serve_watched, watched)
                else:
                    url = await nursery.start(serve_agent, agent)
                assert url.startswith("http://127.0.0.1:")
                async with (
                    HttpxTransport(url, **extra) as transport,
                    TrioDriver(transport, clock=shared_clock) as driver,
                ):
                    await body(Rig(agent, driver, watched, mock, shared_clock))
                nursery.cancel_scope.cancel()

    trio.run(main, clock=mock)
    return agent


async def until(ready: Callable[[], bool], timeout: float = WAIT) -> None:
    with trio.fail_after(timeout):
        while not ready():
            await trio.sleep(0.005)


async def idle(chat: AsyncResource) -> None:
    with trio.fail_after(WAIT):
        await chat.wait_idle(WAIT)


async def batch_of(chat: AsyncResource) -> Batch:
    with trio.fail_after(WAIT):
        return await chat.wait_for_batch(WAIT)


async def paused_on_purchase(rig: Rig, thread_id: str, options: Options = FAST) -> AsyncResource:
    chat = rig.driver.chat(options, thread_id=thread_id)
    chat.send(BUY)
    await batch_of(chat)
    await until(lambda: not chat.core_state.lingering)  # the interrupted run's stream ended
    return chat


def last_text(r: Resource) -> Any:
    return r.messages[-1].content if len(r.messages) else None  # type: ignore[union-attr]


def resumes(agent: ReferenceAgent) -> list[Any]:
    return [r for r in agent.requests if isinstance(r.body, dict) and r.body.get("resume")]


def wire_messages(chat: Resource) -> list[Any]:
    return json.loads(dumps([encode_message(m) for m in chat.messages]))  # type: ignore[no-any-return]


@dataclass
class Snapshot:
    """The committed checkpoint as the application reads it."""

    messages: list[Any]
    state: Any

    @classmethod
    def of(cls, chat: Resource) -> Snapshot:
        return cls(list(chat.messages), thaw(chat.state))

    def intact_in(self, chat: Resource) -> bool:
        return list(chat.messages) == self.messages and thaw(chat.state) == self.state


def without_run_id(raw: bytes, run_id: str) -> bytes:
    token = json.dumps(run_id).encode()
    assert raw.count(token) == 1, "the run id appears once, as runId"
    return raw.replace(token, b'"<run id>"')


# -- the happy path ------------------------------------------------------------------------


def test_purchase_approval_and_shipping_address_end_to_end() -> None:
    """R-A1, R-A3, R-B5, R-B6, R-C2, R-C3, R-J4: the seed's two-question batch over HTTP."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, "t-buy")
        batch = chat.pending_interrupts
        assert batch is not None
        # R-A1, R-C1: the checkpoint is committed with the batch, flags idle.
        assert [i.id for i in batch.interrupts] == ["purchase", "shipping-address"]
        purchase, address = batch.interrupts
        assert purchase.reason == "tool_approval" and purchase.message == "Approve this purchase?"
        assert address.reason == "input_required" and address.message == "Which address?"
        assert thaw(purchase.response_schema) == PURCHASE_SCHEMA
        assert thaw(address.response_schema) == ADDRESS_SCHEMA
        assert thaw(purchase.metadata) == {
            "item": "espresso machine",
            "price": 249,
            "currency": "USD",
        }
        call = chat.messages[-1].tool_calls[0]  # type: ignore[union-attr]
        assert purchase.tool_call_id == call.id and call.function.name == "place_order"
        assert address.tool_call_id is None and address.metadata is None
        assert address.expires_at is None and address.subagent_run_id is None
        assert last_text(chat) == ASKED
        assert not chat.is_loading and not chat.is_resuming and chat.error is None
        committed = Snapshot.of(chat)
        committed_wire = wire_messages(chat)
        assert committed.state["cart"] == {"item": "espresso machine", "quantity": 1, "price": 249}

        seen: list[tuple[bool, bool, Any]] = []
        chat.subscribe(
            lambda r: seen.append((r.pending_interrupts is batch, r.is_resuming, last_text(r)))
        )
        chat.resume(batch.id, ENTRIES)
        # R-C2: claimed synchronously; the same batch stays visible until RUN_STARTED.
        assert chat.is_loading and chat.is_resuming and chat.pending_interrupts is batch
        with pytest.raises(BatchClaimedError):
            chat.resume(batch.id, ENTRIES)
        await idle(chat)

        # R-C3: the first change without the batch comes from the server's RUN_STARTED,
        # before any of the resumed run's content, with the interaction still resuming.
        retired = next(n for n, (pending, _, _) in enumerate(seen) if not pending)
        assert seen[retired] == (False, True, ASKED)
        assert all(pending for pending, _, _ in seen[:retired])
        assert chat.pending_interrupts is None and not chat.is_resuming and chat.error is None

        # The order is placed once and the text confirms it.
        assert rig.agent.side_effects == 1 and rig.agent.replays == 0
        assert rig.agent.orders["t-buy"][0]["addressId"] == "address-123"
        assert last_text(chat) == ORDERED
        state = thaw(chat.state)
        assert state["orders"] == rig.agent.orders["t-buy"] and state["cart"] == {}
        assert state["turns"] == 2

        # The requests: same thread, fresh run id, the checkpoint and the answers (R-B6).
        assert len(rig.agent.requests) == 2
        first, resume = rig.agent.requests
        for r in (first, resume):
            assert r.method == "POST"
            assert r.headers["accept"] == "text/event-stream"
            assert r.headers["content-type"] == "application/json"
            assert r.body["protocolVersion"] == "1.0"
            assert batch.id.encode() not in r.raw  # R-B5: the batch id is local
        assert first.body.get("resume") is None
        assert resume.body["threadId"] == first.body["threadId"] == "t-buy"
        assert resume.body["runId"] != first.body["runId"]
        assert resume.body["resume"] == WIRE_ENTRIES
        assert resume.body["state"] == committed.state
        assert resume.body["messages"] == committed_wire

    e2e(body)


# -- retries (R-F1, R-F2) ------------------------------------------------------------------


def test_a_resume_dropped_before_ack_is_retried_byte_identical_and_ordered_once() -> None:
    """R-F1, R-F2, R-B4: only the run id changes between attempts; the server is idempotent."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, "t-drop")
        batch = chat.pending_interrupts
        assert batch is not None
        entries = copy.deepcopy(ENTRIES)
        rig.agent.faults.append(Fault.drop(after_events=0))
        chat.resume(batch.id, entries)
        # After the claim, neither the application's objects nor the options reach the retry.
        entries[0]["payload"]["approved"] = False
        entries[1]["payload"]["addressId"] = "address-456"
        options = chat.core_state.options
        chat.configure(
            attrs.evolve(
                options,
                context=(Context(description="tz", value="Europe/Paris"),),
                forwarded_props={"changed": True},
            )
        )
        await idle(chat)

        assert chat.error is None and last_text(chat) == ORDERED
        attempts = resumes(rig.agent)
        assert len(attempts) == 2
        first, retry = attempts
        assert first.body["runId"] != retry.body["runId"]
        assert without_run_id(first.raw, first.body["runId"]) == without_run_id(
            retry.raw, retry.body["runId"]
        )
        assert first.body["resume"] == WIRE_ENTRIES
        # The agent ran the first attempt (its delivery broke) and answered the identical
        # retry from its idempotency record: one order.
        assert rig.agent.side_effects == 1 and rig.agent.replays == 1

    e2e(body)


@pytest.mark.parametrize("status", [503, 429])
def test_a_503_or_429_is_retried_then_succeeds(status: int) -> None:
    """R-F1, R-J4: 5xx and 429 are retryable; the refused attempt never reached the agent."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, f"t-{status}")
        batch = chat.pending_interrupts
        assert batch is not None
        rig.agent.faults.append(Fault.refuse(status, "try again later"))
        chat.resume(batch.id, ENTRIES)
        await idle(chat)
        assert chat.error is None and last_text(chat) == ORDERED
        attempts = resumes(rig.agent)
        assert len(attempts) == 2
        assert without_run_id(attempts[0].raw, attempts[0].body["runId"]) == without_run_id(
            attempts[1].raw, attempts[1].body["runId"]
        )
        assert rig.agent.side_effects == 1 and rig.agent.replays == 0

    e2e(body)


def test_a_retry_after_longer_than_the_policy_allows_ends_the_resume_with_the_error() -> None:
    """R-F1, R-J4: the endpoint's Retry-After reaches the reducer through the transport;
    asked for longer than max_retry_after, the resume is not retried and its claim is
    released, the batch still pending, the error saying how long the endpoint asked for."""

    async def body(rig: Rig) -> None:
        options = Options(retry=RetryPolicy(base_delay=0.01, jitter=0.0, max_retry_after=30))
        fault = Fault.refuse(503, "busy", headers={"Retry-After": "120"})
        chat, batch, error, committed = await refused_once(rig, "t-retry-after", fault, options)
        assert (error.status, error.retry_after, error.retryable) == (503, 120.0, True)
        assert chat.pending_interrupts is batch and not chat.is_resuming
        assert committed.intact_in(chat)

    e2e(body)


async def refused_once(
    rig: Rig, thread_id: str, fault: Fault, options: Options = FAST
) -> tuple[AsyncResource, Batch, TransportError, Snapshot]:
    """Pause on the purchase batch, resume it into ``fault``, and wait until the resume
    has failed without a retry; returns the chat, the batch, the error and what was
    committed before the resume."""
    chat = await paused_on_purchase(rig, thread_id, options)
    batch = chat.pending_interrupts
    assert batch is not None
    committed = Snapshot.of(chat)
    rig.agent.faults.append(fault)
    chat.resume(batch.id, ENTRIES)
    await until(lambda: not chat.is_loading)
    await trio.sleep(QUIET)
    assert len(resumes(rig.agent)) == 1  # not retried
    assert isinstance(chat.error, TransportError)
    return chat, batch, chat.error, committed


def test_a_400_is_not_retried_releases_the_claim_and_the_batch_can_be_resumed_again() -> None:
    """R-F4, R-J4, R-F7: a 4xx is a TransportError with status and body; the batch stays."""

    async def body(rig: Rig) -> None:
        fault = Fault.refuse(400, "your request is wrong")
        chat, batch, error, committed = await refused_once(rig, "t-400", fault)
        assert error.status == 400 and error.body == "your request is wrong"
        assert error.retryable is False
        assert not chat.is_resuming and chat.pending_interrupts is batch
        assert not chat.needs_new_thread and committed.intact_in(chat)

        chat.resume(batch.id, ENTRIES)  # the same batch object, at once
        assert chat.error is None  # a new resume clears error
        await idle(chat)
        assert chat.error is None and last_text(chat) == ORDERED
        assert len(resumes(rig.agent)) == 2 and rig.agent.side_effects == 1

    e2e(body)


def test_run_error_before_ack_is_not_retried_and_is_resubmitted_from_the_notification() -> None:
    """R-F1, R-F4, R-I2: RUN_ERROR before RUN_STARTED releases the claim; never retried."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, "t-runerror")
        batch = chat.pending_interrupts
        assert batch is not None
        committed = Snapshot.of(chat)
        errors: list[Any] = []

        def resubmit(r: Resource) -> None:
            if isinstance(r.error, RunError) and not errors:
                errors.append((r.error, r.is_loading, r.is_resuming, r.pending_interrupts))
                assert committed.intact_in(r)
                r.resume(batch.id, ENTRIES)  # from inside the error notification

        chat.subscribe(resubmit)
        rig.agent.faults.append(Fault.run_error("agent overloaded", "BUSY", after_events=0))
        chat.resume(batch.id, ENTRIES)
        await until(lambda: bool(errors) and not chat.is_loading)
        await trio.sleep(QUIET)

        [(error, loading, resuming, pending)] = errors
        assert error == RunError("agent overloaded", "BUSY")
        assert (loading, resuming, pending) == (False, False, batch)
        # One attempt for the first claim, one for the resubmission: no retry in between.
        assert len(resumes(rig.agent)) == 2
        assert chat.error is None and last_text(chat) == ORDERED
        assert not chat.needs_new_thread
        assert rig.agent.side_effects == 1 and rig.agent.replays == 1

    e2e(body)


def test_a_failure_after_ack_is_never_replayed_and_requires_a_new_thread() -> None:
    """R-F5, R-F6, R-F7, R-H1, R-H2: a broken stream after RUN_STARTED means recovery."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, "t-after-ack")
        batch = chat.pending_interrupts
        assert batch is not None
        committed = Snapshot.of(chat)
        rig.agent.faults.append(Fault.drop(after_events=2))  # RUN_STARTED, a state delta, gone
        chat.resume(batch.id, ENTRIES)
        await until(lambda: not chat.is_loading)
        await trio.sleep(QUIET)

        assert len(resumes(rig.agent)) == 1  # never replayed
        assert isinstance(chat.error, TransportError | ProtocolError)
        assert chat.needs_new_thread and not chat.is_resuming
        assert chat.pending_interrupts is None  # retired by the acknowledgement
        assert committed.intact_in(chat)  # the streamed state delta (turns) is dropped
        for intent in (
            lambda: chat.resume(batch.id, ENTRIES),
            lambda: chat.send("hello?"),
            lambda: chat.set_messages([]),
            chat.reload,
        ):
            with pytest.raises(RecoveryRequiredError):
                intent()
        chat.set_thread_id("t-after-ack")  # the same id does not clear it
        assert chat.needs_new_thread
        assert len(resumes(rig.agent)) == 1

        chat.set_thread_id("t-after-ack-2")
        assert not chat.needs_new_thread and chat.error is None
        assert committed.intact_in(chat)
        sent = len(rig.agent.requests)
        chat.send("hello again")
        await idle(chat)
        assert chat.error is None and last_text(chat) == "You said: hello again"
        [next_run] = rig.agent.requests[sent:]
        assert next_run.body["threadId"] == "t-after-ack-2"
        assert next_run.body.get("resume") is None
        assert len(resumes(rig.agent)) == 1

    e2e(body)


# -- expiry (R-F3, R-G1..R-G4) ----------------------------------------------------------


def test_expiry_found_just_before_the_send_sends_nothing() -> None:
    """R-F3, R-G1, R-G2, R-G4: claimed in time, expired by the send: nothing goes out."""

    async def body(rig: Rig) -> None:
        assert rig.mock is not None and rig.clock is not None
        chat = await paused_on_purchase(rig, "t-expire-send")
        batch = chat.pending_interrupts
        assert batch is not None
        deadline = batch.earliest_expiry
        assert deadline is not None
        assert [i.expires_at_epoch for i in batch.interrupts] == [deadline, deadline]
        assert deadline - rig.clock() == pytest.approx(EXPIRES_IN, abs=0.5)
        assert not chat.is_expired
        sent = len(rig.agent.requests)

        chat.resume(batch.id, ENTRIES)  # not expired yet: claimed
        assert chat.is_resuming
        rig.mock.jump(EXPIRES_IN + 0.5)  # before the attempt task gets to send
        await until(lambda: not chat.is_loading)

        assert len(rig.agent.requests) == sent  # nothing was sent
        error = chat.error
        assert isinstance(error, BatchExpiredError)
        assert set(error.interrupt_ids) == {"purchase", "shipping-address"}
        assert chat.pending_interrupts is batch and not chat.is_resuming  # claim released
        assert chat.is_expired
        with pytest.raises(BatchExpiredError):  # R-G2: visible, not resumable
            chat.resume(batch.id, ENTRIES)
        assert len(rig.agent.requests) == sent

    e2e(body, mock_time=True, expires_in=EXPIRES_IN)


def test_expiry_found_before_a_retry_sends_nothing_more() -> None:
    """R-F3: expiry is checked before every send, retries included."""

    slow = Options(retry=RetryPolicy(max_attempts=3, base_delay=2.0, jitter=0.0))

    async def body(rig: Rig) -> None:
        assert rig.mock is not None
        chat = await paused_on_purchase(rig, "t-expire-retry", slow)
        batch = chat.pending_interrupts
        assert batch is not None
        rig.agent.faults.append(Fault.refuse(503))
        chat.resume(batch.id, ENTRIES)

        def waiting_to_retry() -> bool:
            run = chat.core_state.run
            return run is not None and run.attempt is None and run.retry_timer is not None

        await until(waiting_to_retry)
        assert len(resumes(rig.agent)) == 1
        rig.mock.jump(EXPIRES_IN + 0.5)  # the back-off ends after the batch expired
        await until(lambda: not chat.is_loading)
        await trio.sleep(QUIET)

        assert len(resumes(rig.agent)) == 1  # the retry sent nothing
        assert isinstance(chat.error, BatchExpiredError)
        assert chat.pending_interrupts is batch and not chat.is_resuming
        assert rig.agent.side_effects == 0

    e2e(body, mock_time=True, expires_in=EXPIRES_IN)


def test_the_expiry_timer_tells_observers_when_the_batch_expires() -> None:
    """R-G3, R-G2, R-H1: no polling; the expired batch stays visible; a new thread goes on."""

    async def body(rig: Rig) -> None:
        assert rig.mock is not None and rig.clock is not None
        clock = rig.clock
        chat = await paused_on_purchase(rig, "t-expire-timer")
        batch = chat.pending_interrupts
        assert batch is not None and batch.earliest_expiry is not None
        committed = Snapshot.of(chat)
        sent = len(rig.agent.requests)
        changes: list[tuple[float, bool, bool]] = []
        chat.subscribe(
            lambda r: changes.append((clock(), r.is_expired, r.pending_interrupts is batch))
        )

        rig.mock.jump(batch.earliest_expiry - clock() - 0.6)  # nearly there
        await trio.sleep(0.05)
        assert changes == [] and not chat.is_expired  # nothing fires early
        rig.mock.jump(0.5)
        with trio.fail_after(WAIT):
            await chat.next_change(WAIT)  # the timer, about 0.05 s later
        [(at, expired, visible)] = changes
        assert expired and visible
        assert batch.earliest_expiry <= at < batch.earliest_expiry + 1.0
        assert len(rig.agent.requests) == sent  # no request told us

        # R-G2: the expired batch stays visible and cannot be resumed or bypassed.
        assert chat.pending_interrupts is batch and not chat.is_loading
        with pytest.raises(BatchExpiredError):
            chat.resume(batch.id, ENTRIES)
        with pytest.raises(InterruptPendingError):
            chat.send("never mind")
        assert committed.intact_in(chat)

        # The way on is a new thread: a new workflow, not a repair of the old one.
        chat.set_thread_id("t-expire-timer-2")
        assert chat.pending_interrupts is None and committed.intact_in(chat)
        chat.send("hello")
        await idle(chat)
        assert last_text(chat) == "You said: hello"
        assert rig.agent.requests[-1].body["threadId"] == "t-expire-timer-2"
        assert rig.agent.requests[-1].body.get("resume") is None

    e2e(body, mock_time=True, expires_in=EXPIRES_IN)


def test_cancel_expired_policy_accepts_a_submission_that_cancels_the_expired_interrupts() -> None:
    """R-G2: the opt-in AG-UI 1.0 policy; the server accepts the cancellation too."""

    policy = attrs.evolve(FAST, expiry="cancel_expired")

    async def body(rig: Rig) -> None:
        assert rig.mock is not None
        chat = await paused_on_purchase(rig, "t-cancel-expired", policy)
        batch = chat.pending_interrupts
        assert batch is not None
        rig.mock.jump(EXPIRES_IN + 0.5)
        assert chat.is_expired
        sent = len(rig.agent.requests)
        with pytest.raises(BatchExpiredError):  # answering an expired interrupt is still refused
            chat.resume(batch.id, ENTRIES)
        assert len(rig.agent.requests) == sent and not chat.is_resuming

        chat.resume(batch.id, CANCEL_BOTH)
        assert chat.is_resuming
        await idle(chat)
        assert chat.error is None and not chat.needs_new_thread
        assert chat.pending_interrupts is None
        assert last_text(chat) == "Purchase abandoned."
        [request] = resumes(rig.agent)
        assert request.body["resume"] == [
            {"interruptId": "purchase", "status": "cancelled"},
            {"interruptId": "shipping-address", "status": "cancelled"},
        ]
        assert rig.agent.side_effects == 0

    e2e(body, mock_time=True, expires_in=EXPIRES_IN)


# -- stop (R-F4, R-F5) ---------------------------------------------------------------------


def test_stop_before_ack_releases_the_claim_and_the_batch_can_be_resumed_again() -> None:
    """R-F4: the resume is in flight (the server delays its answer); stop hands the batch back."""

    async def body(rig: Rig) -> None:
        assert rig.watched is not None
        chat = await paused_on_purchase(rig, "t-stop-early")
        batch = chat.pending_interrupts
        assert batch is not None
        committed = Snapshot.of(chat)
        rig.agent.faults.append(Fault.delay(before=30.0))
        chat.resume(batch.id, ENTRIES)
        await until(lambda: len(rig.agent.requests) == 2)  # the server has it
        assert chat.is_resuming and chat.pending_interrupts is batch

        chat.stop()
        assert not chat.is_loading and not chat.is_resuming
        assert chat.pending_interrupts is batch and chat.error is None
        assert not chat.needs_new_thread and committed.intact_in(chat)
        await until(lambda: 1 in rig.watched.ended)  # the server saw the disconnect

        chat.resume(batch.id, ENTRIES)
        await idle(chat)
        assert chat.error is None and last_text(chat) == ORDERED
        # The delayed run had been performed server-side; the identical resubmission was
        # answered from the idempotency record.
        assert rig.agent.side_effects == 1 and rig.agent.replays == 1

    e2e(body, watch=True)


def test_stop_after_ack_requires_a_new_thread() -> None:
    """R-F5, R-F6: once RUN_STARTED arrived, stop rolls back and asks for a new thread."""

    async def body(rig: Rig) -> None:
        assert rig.watched is not None
        chat = await paused_on_purchase(rig, "t-stop-late")
        batch = chat.pending_interrupts
        assert batch is not None
        committed = Snapshot.of(chat)
        rig.agent.faults.append(Fault.stall(after_events=2))
        chat.resume(batch.id, ENTRIES)
        await until(lambda: chat.pending_interrupts is None)  # acknowledged
        await until(lambda: thaw(chat.state)["turns"] == 2)  # the streamed delta arrived
        assert chat.is_resuming

        chat.stop()
        assert not chat.is_loading and not chat.is_resuming
        assert chat.needs_new_thread and chat.pending_interrupts is None
        assert committed.intact_in(chat)  # the draft is dropped, the checkpoint kept
        await until(lambda: 1 in rig.watched.ended)
        with pytest.raises(RecoveryRequiredError):
            chat.resume(batch.id, ENTRIES)
        with pytest.raises(RecoveryRequiredError):
            chat.send("and now?")
        assert len(resumes(rig.agent)) == 1

    e2e(body, watch=True)


# -- threads (R-H1..R-H3) ------------------------------------------------------------------


def test_a_thread_change_closes_an_unacknowledged_resume_and_retires_the_batch() -> None:
    """R-H1, R-H2, R-H3: the stream closes, nothing is sent, the next run is on the new thread."""

    async def body(rig: Rig) -> None:
        assert rig.watched is not None
        chat = await paused_on_purchase(rig, "t-old")
        batch = chat.pending_interrupts
        assert batch is not None
        committed = Snapshot.of(chat)

        chat.set_thread_id("t-old")  # R-H2: the same id changes nothing while paused
        assert chat.pending_interrupts is batch and not chat.is_resuming

        rig.agent.faults.append(Fault.stall(after_events=0))  # headers only, then silence
        chat.resume(batch.id, ENTRIES)
        await until(lambda: len(rig.agent.requests) == 2)
        chat.set_thread_id("t-old")  # R-H2: nor while a resume is in flight
        await trio.sleep(QUIET)
        assert chat.is_resuming and chat.pending_interrupts is batch
        assert 1 not in rig.watched.ended  # the stream is still open

        changes: list[None] = []
        chat.subscribe(lambda r: changes.append(None))
        chat.set_thread_id("t-new")
        assert changes == [None]
        assert chat.thread_id == "t-new" and chat.pending_interrupts is None
        assert not chat.is_loading and not chat.is_resuming and not chat.needs_new_thread
        assert chat.error is None and committed.intact_in(chat)
        with pytest.raises(StaleBatchError):
            chat.resume(batch.id, ENTRIES)
        await until(lambda: 1 in rig.watched.ended)  # the server saw the disconnect
        await trio.sleep(QUIET)
        assert changes == [None]  # nothing late reached the resource
        assert len(rig.agent.requests) == 2  # R-H3: no cancel request

        chat.send("hello")
        await idle(chat)
        assert last_text(chat) == "You said: hello" and chat.error is None
        [request] = rig.agent.requests[2:]
        assert request.body["threadId"] == "t-new" and request.body.get("resume") is None

    e2e(body, watch=True)


def test_a_thread_change_during_the_resumed_run_ignores_its_late_events() -> None:
    """R-H1, R-H3: after ack a thread change ends the interaction without recovery."""

    async def body(rig: Rig) -> None:
        assert rig.watched is not None
        chat = await paused_on_purchase(rig, "t-busy")
        committed = Snapshot.of(chat)
        batch = chat.pending_interrupts
        assert batch is not None
        rig.agent.faults.append(Fault.stall(after_events=3))
        chat.resume(batch.id, ENTRIES)
        await until(lambda: chat.pending_interrupts is None and len(chat.messages) > 2)

        changes: list[None] = []
        chat.subscribe(lambda r: changes.append(None))
        chat.set_thread_id("t-calm")
        assert not chat.is_loading and not chat.is_resuming and not chat.needs_new_thread
        assert chat.error is None and committed.intact_in(chat)
        await until(lambda: 1 in rig.watched.ended)
        await trio.sleep(QUIET)
        assert changes == [None] and len(rig.agent.requests) == 2

        chat.send("hello")
        await idle(chat)
        assert last_text(chat) == "You said: hello"
        assert rig.agent.requests[-1].body["threadId"] == "t-calm"
        assert rig.agent.requests[-1].body.get("resume") is None

    e2e(body, watch=True)


# -- a double click ------------------------------------------------------------------------


def test_a_double_clicked_resume_sends_one_request() -> None:
    """R-C2: the second resume raises BatchClaimedError; the server sees one resume."""

    async def body(rig: Rig) -> None:
        chat = await paused_on_purchase(rig, "t-double")
        batch = chat.pending_interrupts
        assert batch is not None
        chat.resume(batch.id, ENTRIES)
        with pytest.raises(BatchClaimedError):
            chat.resume(batch.id, ENTRIES)
        await idle(chat)
        await trio.sleep(QUIET)
        assert len(resumes(rig.agent)) == 1 and rig.agent.side_effects == 1
        assert last_text(chat) == ORDERED

    e2e(body)


# -- bad input from the server -------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        lambda: Fault.wrong_content_type("application/json"),
        lambda: Fault.oversize(size=200_000, after_events=0),
    ],
    ids=["wrong_content_type", "oversize_before_run_started"],
)
def test_R_F1_a_protocol_error_before_the_acknowledgement_is_retried(
    fault: Callable[[], Fault],
) -> None:
    """R-F1: a 2xx that is no event stream, or a first frame over max_frame_bytes, is a
    protocol error before the acknowledgement: retried, and the retry's answer counts."""

    async def body(rig: Rig) -> None:
        chat = rig.driver.chat(FAST, thread_id="t-retried")
        rig.agent.faults.append(fault())
        chat.send("hello")
        await idle(chat)
        assert chat.error is None and last_text(chat) == "You said: hello"
        assert len(rig.agent.requests) == 2

    e2e(body, max_frame_bytes=64 * 1024)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("malformed_json", ProtocolError),
        ("wrong_content_type", ProtocolError),
        ("oversize", ProtocolError),
        ("cut_mid_frame", TransportError),
    ],
)
def test_bad_input_from_the_server_is_a_clear_error_and_keeps_the_checkpoint(
    case: str, expected: type[Exception]
) -> None:
    """R-J3, R-J4, R-F6, R-F7: a broken answer fails the run cleanly; no hang, no partial commit."""

    async def body(rig: Rig) -> None:
        assert rig.watched is not None
        chat = rig.driver.chat(FAST, thread_id=f"t-{case}")
        chat.send("hello")
        await idle(chat)
        committed = Snapshot.of(chat)
        assert last_text(chat) == "You said: hello"

        if case == "malformed_json":
            rig.agent.faults.append(Fault.malformed_json(after_events=3))
        elif case == "wrong_content_type":
            # Before the acknowledgement: retried (R-F1), so every attempt gets it.
            for _ in range(3):
                rig.agent.faults.append(Fault.wrong_content_type("text/html; charset=utf-8"))
        elif case == "oversize":
            rig.agent.faults.append(Fault.oversize(size=200_000, after_events=3))
        else:
            rig.watched.cut_mid_frame[1] = 3
        chat.send("tell me more")
        await idle(chat)
        await trio.sleep(QUIET)

        error = chat.error
        assert isinstance(error, expected), error
        assert error.message
        # Not retried after the acknowledgement; before it, until the budget is spent.
        assert len(rig.agent.requests) == (4 if case == "wrong_content_type" else 2)
        # The committed history and state are intact; nothing of the broken run is kept.
        assert list(chat.messages)[: len(committed.messages)] == committed.messages
        # Only the user's own message of the failed turn follows the checkpoint.
        after = [(m.role, m.content) for m in chat.messages[len(committed.messages) :]]
        assert after == [("user", "tell me more")]
        assert thaw(chat.state) == committed.state
        assert not chat.needs_new_thread and not chat.is_resuming

        chat.send("still there?")  # the resource goes on
        await idle(chat)
        assert chat.error is None and last_text(chat) == "You said: still there?"

    e2e(body, watch=True, max_frame_bytes=64 * 1024)


# -- a frontend tool (R-D5) ------------------------------------------------------------------


def test_a_frontend_tool_runs_locally_and_the_follow_up_carries_its_result() -> None:
    """R-D5, R-J6: the agent asks for get_local_time; the result goes back in the next request."""

    calls: list[Any] = []

    def get_local_time(arguments: Any) -> str:
        """The user's local time."""
        calls.append(arguments)
        return "12:34"

    async def body(rig: Rig) -> None:
        chat = rig.driver.chat(
            FAST, thread_id="t-time", local_tools={"get_local_time": get_local_time}
        )
        chat.send("what time is it")
        await idle(chat)
        assert calls == [{}]
        assert chat.error is None and not chat.is_resuming
        assert last_text(chat) == "Your local time is 12:34."

        assert len(rig.agent.requests) == 2
        first, follow_up = (r.body for r in rig.agent.requests)
        assert [t["name"] for t in first["tools"]] == ["get_local_time"]
        assert first["tools"][0]["description"] == "The user's local time."
        call = follow_up["messages"][-2]["toolCalls"][0]
        assert call["function"]["name"] == "get_local_time"
        assert follow_up["messages"][-1] == {
            "role": "tool",
            "id": follow_up["messages"][-1]["id"],
            "content": "12:34",
            "toolCallId": call["id"],
        }
        assert follow_up["threadId"] == first["threadId"] == "t-time"
        assert follow_up["runId"] != first["runId"]
        assert follow_up.get("resume") is None

    e2e(body)


@pytest.mark.parametrize("clock", [None, time.time], ids=["loop-clock", "injected-clock"])
def test_an_intent_from_a_sync_tools_thread_is_refused_and_the_tool_loop_goes_on(
    clock: Callable[[], float] | None,
) -> None:
    """R-D5, R-I2: a sync tool runs in a worker thread. An intent it calls from there was
    stepped (the user message and a new run committed), then its commands could not start
    off the loop: the resource stayed loading forever, with no error. Refused instead, it
    is the tool's own failure, and the tool message says what to do."""
    agent = ReferenceAgent()
    holder: list[AsyncResource] = []
    raised: list[BaseException] = []

    def get_local_time(arguments: Any) -> str:
        try:
            holder[0].send("and the date?")
        except BaseException as exc:
            raised.append(exc)
            raise
        return "12:34"

    async def main() -> None:
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_agent, agent)
                async with HttpxTransport(url) as transport, TrioDriver(transport, clock) as driver:
                    chat = driver.chat(
                        FAST, thread_id="t-time", local_tools={"get_local_time": get_local_time}
                    )
                    holder.append(chat)
                    chat.send("what time is it")
                    await chat.wait_idle(WAIT)
                    assert [type(e) for e in raised] == [RuntimeError]
                    assert chat.error is None and not chat.is_loading
                    said = chat.messages[-2].content  # type: ignore[union-attr]
                    assert "make the tool async to call them" in said
                    assert [m.role for m in chat.messages].count("user") == 1
                    assert len(agent.requests) == 2  # the follow-up carried the tool's failure
                nursery.cancel_scope.cancel()

    trio.run(main)
