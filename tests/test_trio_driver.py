"""The async driver (``interlude.adapters.trio``) against an in-process scripted transport.

Most tests run under trio with ``MockClock(autojump_threshold=0)``, so retry
back-off and expiry take no real time. Tests with sync local tools use the real
clock: while a worker thread works the loop is idle, and an autojumping mock
clock would leap to the next deadline (the test's own ``fail_after``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import re
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import attrs
import hypercorn.asyncio
import pytest
import trio
import trio.testing
from asgi_support import request_body
from hypercorn.config import Config

from interlude.adapters.fake import (
    FAKE_EPOCH,
    FakeDriver,
    Request,
    ScriptedAgent,
    finished,
    interrupted,
    reply,
    started,
    text,
    tool_call,
)
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.resource import Resource
from interlude.adapters.trio import AsyncDriver, AsyncResource, ToolSignal, TrioDriver
from interlude.core.errors import BatchExpiredError, ObserverError, TransportError
from interlude.core.json import MAX_INT_DIGITS, freeze, frozen_unchecked
from interlude.core.options import Options, RetryPolicy
from interlude.core.wire.codec import decode_run_input
from interlude.core.wire.messages import UserMessage

# -- a scripted, in-process transport ---------------------------------------------------


@attrs.frozen
class Sleep:
    """Wait this long (on the loop's clock) before the next step."""

    seconds: float


@attrs.frozen
class Fail:
    """Raise this from the stream."""

    error: Exception


@attrs.frozen
class Hang:
    """Wait forever: only cancellation ends the stream."""


@attrs.frozen
class Stubborn:
    """Ignore cancellation for ``seconds`` (shielded), then yield ``frames`` anyway."""

    seconds: float
    frames: tuple[Any, ...]


Script = Callable[[Request], Sequence[Any]]


class ScriptedTransport:
    """Answers each request with the next script; keeps what it received and how it ended."""

    def __init__(self, *scripts: Script) -> None:
        self._scripts = deque(scripts)
        self.requests: list[Request] = []
        self.sent_at: list[float] = []
        self.endings: list[tuple[str, float]] = []
        """How each stream ended (``"end"`` or the exception's type name) and when."""

    async def stream(self, body: bytes) -> AsyncIterator[str]:
        raw = body.decode("utf-8")
        run_input = decode_run_input(json.loads(raw))
        request = Request(attempt=len(self.requests) + 1, run_input=run_input, body=raw)
        self.requests.append(request)
        self.sent_at.append(anyio.current_time())
        if not self._scripts:
            raise AssertionError(f"no script for request {len(self.requests)}")
        steps = _flatten(self._scripts.popleft()(request))
        try:
            for step in steps:
                if isinstance(step, Sleep):
                    await anyio.sleep(step.seconds)
                elif isinstance(step, Fail):
                    raise step.error
                elif isinstance(step, Hang):
                    await anyio.sleep_forever()
                elif isinstance(step, Stubborn):
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(step.seconds)
                    for frame in step.frames:
                        yield _data(frame)
                else:
                    yield _data(step)
        except BaseException as exc:
            self.endings.append((type(exc).__name__, anyio.current_time()))
            raise
        self.endings.append(("end", anyio.current_time()))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests]


def _flatten(steps: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for s in steps:
        out.extend(s) if isinstance(s, list) else out.append(s)
    return out


def acknowledging(body: bytes) -> str:
    """The RUN_STARTED frame's data that acknowledges the request ``body``."""
    req = json.loads(body)
    return json.dumps({"type": "RUN_STARTED", "threadId": req["threadId"], "runId": req["runId"]})


def _data(frame: Any) -> str:
    return frame if isinstance(frame, str) else json.dumps(frame)


# -- helpers ---------------------------------------------------------------------------------


def run_mock(main: Callable[[], Awaitable[None]]) -> None:
    """Run under trio on a mock clock that jumps whenever every task sleeps."""
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def until(ready: Callable[[], bool], timeout: float = 5) -> None:
    with anyio.fail_after(timeout):
        while not ready():
            await anyio.sleep(0.001)


def contents(r: Resource) -> list[Any]:
    return [getattr(m, "content", None) for m in r.messages]


def last_text(r: Resource) -> Any:
    return contents(r)[-1] if len(r.messages) else None


PURCHASE = {
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
SHIPPING = {
    "id": "shipping-address",
    "reason": "input_required",
    "message": "Where should it go?",
    "responseSchema": {
        "type": "object",
        "properties": {"addressId": {"type": "string"}},
        "required": ["addressId"],
    },
}
ENTRIES = [
    {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": True}},
    {"interrupt_id": "shipping-address", "status": "resolved", "payload": {"addressId": "a-123"}},
]
WIRE_ENTRIES = [
    {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
    {"interruptId": "shipping-address", "status": "resolved", "payload": {"addressId": "a-123"}},
]


def ask_both(req: Request) -> list[Any]:
    return [started(req), text("m1", "Two questions first."), interrupted(req, PURCHASE, SHIPPING)]


def place_order(req: Request) -> list[Any]:
    return [started(req), Sleep(0.01), text("m2", "Order placed."), finished(req)]


# -- a plain run ---------------------------------------------------------------------------


def test_a_plain_run_streams_text_as_it_arrives() -> None:
    """R-J2, R-C4: deltas show up as they arrive; RUN_FINISHED commits and settles."""

    def script(req: Request) -> list[Any]:
        return [
            started(req),
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
            Sleep(1),
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            finished(req),
        ]

    async def main() -> None:
        transport = ScriptedTransport(script)
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                seen: list[Any] = []
                chat.subscribe(lambda r: seen.append(last_text(r)))
                chat.send("hello")
                assert chat.is_loading
                await chat.wait_idle()
                assert last_text(chat) == "Hello"
                assert "Hel" in seen and seen.index("Hel") < seen.index("Hello")
                assert chat.error is None and not chat.is_resuming
                assert transport.bodies[0]["messages"][0]["content"] == "hello"
                assert [how for how, _ in transport.endings] == ["end"]
                assert transport.endings[0][1] == pytest.approx(1.0)

    run_mock(main)


# -- interrupt and resume --------------------------------------------------------------


async def interrupt_and_resume() -> None:
    """The seed's purchase-approval and shipping-address batch, start to finish."""
    transport = ScriptedTransport(ask_both, place_order)
    with anyio.fail_after(10):
        async with TrioDriver(transport) as driver:
            chat = driver.chat()
            chat.send("buy the lamp")
            batch = await chat.wait_for_batch()
            # R-A1, R-C1: the checkpoint is committed with the batch, flags idle.
            assert [i.id for i in batch.interrupts] == ["purchase", "shipping-address"]
            assert last_text(chat) == "Two questions first."
            assert not chat.is_loading and not chat.is_resuming

            seen: list[tuple[bool, bool]] = []
            chat.subscribe(lambda r: seen.append((r.pending_interrupts is batch, r.is_resuming)))
            chat.resume(batch.id, ENTRIES)
            # R-C2: claimed synchronously, the same batch still visible.
            assert chat.is_loading and chat.is_resuming
            assert chat.pending_interrupts is batch
            await chat.wait_idle()

            # R-C3, R-C4: the batch goes at the resume's RUN_STARTED; resuming until settled.
            assert (False, True) in seen
            assert seen[-1] == (False, False)
            assert last_text(chat) == "Order placed."
            assert chat.error is None and chat.pending_interrupts is None

    first, second = transport.bodies
    # R-B1, R-B6: same thread, new run, both entries in wire form; R-B5: no batch id.
    assert "resume" not in first or first["resume"] is None
    assert second["resume"] == WIRE_ENTRIES
    assert second["threadId"] == first["threadId"] and second["runId"] != first["runId"]
    assert all(batch.id not in r.body for r in transport.requests)
    assert [m["content"] for m in second["messages"]] == ["buy the lamp", "Two questions first."]


def test_purchase_and_shipping_batch_is_resumed_with_both_entries() -> None:
    """R-A1, R-B1, R-B5, R-B6, R-C1, R-C2, R-C3, R-C4 under trio (mock clock)."""
    run_mock(interrupt_and_resume)


def test_purchase_and_shipping_batch_under_asyncio() -> None:
    """R-A1, R-B1, R-B5, R-B6, R-C1..R-C4: the same driver runs under asyncio."""
    anyio.run(interrupt_and_resume, backend="asyncio")


def test_async_driver_is_the_trio_driver_under_a_name_for_asyncio_code() -> None:
    """reference.md: ``AsyncDriver`` is the same class, for code that does not use trio."""
    assert AsyncDriver is TrioDriver


def test_an_observer_resumes_the_moment_a_batch_appears() -> None:
    """R-I2: an observer may call resume from inside the notification that shows the batch."""
    transport = ScriptedTransport(ask_both, place_order)
    resumed: list[str] = []

    def answer(r: Resource) -> None:
        batch = r.pending_interrupts
        if batch is not None and not r.is_resuming and not resumed:
            resumed.append(batch.id)
            r.resume(batch.id, ENTRIES)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                chat.subscribe(answer)
                chat.send("buy the lamp")
                await chat.wait_idle()
                assert last_text(chat) == "Order placed."
                assert chat.error is None and not chat.is_resuming

    run_mock(main)
    assert len(resumed) == 1
    assert [b.get("resume") for b in transport.bodies] == [None, WIRE_ENTRIES]


# -- retries and expiry -----------------------------------------------------------------------


def test_a_dropped_connection_before_run_started_is_retried_after_the_back_off() -> None:
    """R-F1, R-F2, R-B4: the same body byte for byte but the run id, after the delay.

    The transport raises a plain ``ConnectionResetError``: the driver reports it
    as a retryable ``TransportError``.
    """
    policy = RetryPolicy(base_delay=2.0, jitter=0.2)

    def drop(req: Request) -> list[Any]:
        return [Fail(ConnectionResetError("peer reset"))]

    transport = ScriptedTransport(ask_both, drop, place_order)

    async def main() -> None:
        with trio.fail_after(30):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(Options(retry=policy))
                chat.send("buy the lamp")
                batch = await chat.wait_for_batch()
                entries = [dict(e) for e in ENTRIES]
                chat.resume(batch.id, entries)
                # Changes after the claim reach nothing that is retried (R-F2, R-B4).
                entries[0]["payload"] = {"approved": False}
                chat.configure(Options(retry=policy, forwarded_props=freeze({"changed": True})))
                await chat.wait_idle()
                assert last_text(chat) == "Order placed."
                assert chat.error is None

    run_mock(main)
    _, dropped, retried = transport.requests
    assert transport.endings[1][0] == "ConnectionResetError"
    wait = transport.sent_at[2] - transport.sent_at[1]
    assert 2.0 * 0.8 <= wait <= 2.0 * 1.2
    assert retried.run_id != dropped.run_id
    assert retried.body == dropped.body.replace(dropped.run_id, retried.run_id)
    assert retried.json["resume"] == WIRE_ENTRIES


def test_expiry_reached_while_waiting_for_a_retry_sends_nothing() -> None:
    """R-F3, R-G1, R-G3, R-G4: expiry found before the retry's send: nothing goes out,
    and the claim is released the moment the batch expires, not at the retry timer.

    The clock is injected (the fake epoch plus the mock clock), so ``expiresAt``
    is a fixed date.
    """
    policy = RetryPolicy(base_delay=10.0, jitter=0.0)
    expiring = {**PURCHASE, "expiresAt": "2027-01-01T00:00:05Z"}  # FAKE_EPOCH + 5 s

    def ask(req: Request) -> list[Any]:
        return [started(req), interrupted(req, expiring, SHIPPING)]

    def drop(req: Request) -> list[Any]:
        return [Fail(TransportError("the connection dropped", retryable=True))]

    transport = ScriptedTransport(ask, drop)
    expired_seen_at: list[float] = []

    async def main() -> None:
        with trio.fail_after(60):
            async with TrioDriver(transport, clock=lambda: FAKE_EPOCH + trio.current_time()) as d:
                chat = d.chat(Options(retry=policy))
                chat.subscribe(
                    lambda r: expired_seen_at.append(trio.current_time()) if r.is_expired else None
                )
                chat.send("buy the lamp")
                batch = await chat.wait_for_batch()
                chat.resume(batch.id, ENTRIES)
                await chat.wait_idle(timeout=60)
                assert isinstance(chat.error, BatchExpiredError)
                assert chat.pending_interrupts is batch  # the same batch stays visible
                assert not chat.is_resuming and chat.is_expired
                assert trio.current_time() == pytest.approx(5.0)  # the retry was due at 10 s

    run_mock(main)
    assert len(transport.requests) == 2  # the retry was never sent
    assert expired_seen_at[0] == pytest.approx(5.0)  # the expiry timer told observers (R-G3)


def test_expiry_found_just_before_the_send_sends_nothing() -> None:
    """R-F3: the clock passes the expiry between the claim and the send: nothing goes out.

    ``SendStarting`` answers ``AbortAttempt`` for the attempt; the driver obeys.
    """
    now = [FAKE_EPOCH]
    expiring = {**PURCHASE, "expiresAt": "2027-01-01T00:00:05Z"}  # FAKE_EPOCH + 5 s

    def ask(req: Request) -> list[Any]:
        return [started(req), interrupted(req, expiring, SHIPPING)]

    transport = ScriptedTransport(ask)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport, clock=lambda: now[0]) as driver:
                chat = driver.chat()
                chat.send("buy the lamp")
                batch = await chat.wait_for_batch()
                chat.resume(batch.id, ENTRIES)  # not expired yet: claimed
                assert chat.is_resuming
                now[0] += 10  # ... but it is by the time the request would go out
                await chat.wait_idle()
                assert isinstance(chat.error, BatchExpiredError)
                assert chat.pending_interrupts is batch and not chat.is_resuming

    run_mock(main)
    assert len(transport.requests) == 1


def test_wait_for_batch_raises_as_soon_as_the_run_fails_without_one() -> None:
    """It does not wait out its timeout for a batch that cannot come, and the error it
    raises has the resource's error as its cause."""

    def refuse(req: Request) -> list[Any]:
        return [Fail(TransportError.from_status(400, "bad request"))]

    async def main() -> None:
        async with TrioDriver(ScriptedTransport(refuse)) as driver:
            chat = driver.chat()
            chat.send("hello")
            with (
                trio.fail_after(1),
                pytest.raises(RuntimeError, match="ended with an error") as caught,
            ):
                await chat.wait_for_batch(timeout=60)
            assert isinstance(chat.error, TransportError)
            assert caught.value.__cause__ is chat.error

    trio.run(main)


def test_wait_for_batch_raises_as_soon_as_the_run_succeeds_without_one() -> None:
    """A run that finishes without an interrupt leaves no batch to wait for."""

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m1", "No questions."), finished(req), Hang()]

    async def main() -> None:
        async with TrioDriver(ScriptedTransport(answer)) as driver:
            chat = driver.chat()
            chat.send("hello")
            with trio.fail_after(1), pytest.raises(RuntimeError, match="idle with no batch"):
                await chat.wait_for_batch(timeout=60)
            assert chat.error is None and chat.messages[-1].content == "No questions."

    trio.run(main)


def test_wait_for_batch_raises_at_once_on_a_resource_with_nothing_in_progress() -> None:
    async def main() -> None:
        async with TrioDriver(ScriptedTransport()) as driver:
            chat = driver.chat()  # never ran: no run will publish a batch
            with trio.fail_after(1), pytest.raises(RuntimeError, match="idle with no batch"):
                await chat.wait_for_batch(timeout=60)

    trio.run(main)


def test_a_non_retryable_transport_error_surfaces_in_error() -> None:
    """R-F1, R-F7: an HTTP 400 is not retried; it is the resource's error, not an exception."""

    def refuse(req: Request) -> list[Any]:
        return [Fail(TransportError.from_status(400, "bad request"))]

    transport = ScriptedTransport(refuse)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                chat.send("hello")
                await chat.wait_idle()
                assert isinstance(chat.error, TransportError) and chat.error.status == 400

    run_mock(main)
    assert len(transport.requests) == 1


def test_a_split_emoji_goes_back_whole_and_an_unwritable_request_fails_the_run() -> None:
    """Half a UTF-16 pair per delta is sent back as its escape; a value with no JSON
    text (an oversized integer that got past the checks) fails the run, and the driver
    lives."""

    def split(req: Request) -> list[Any]:
        return [
            started(req),
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "smile \ud83d"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "\ude00"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            finished(req),
        ]

    def done(req: Request) -> list[Any]:
        return [started(req), finished(req)]

    transport = ScriptedTransport(split, done)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                chat.send("smile")
                await chat.wait_idle()
                assert chat.messages[-1].content == "smile \ud83d\ude00"
                chat.send("again")
                await chat.wait_idle()
                assert transport.bodies[1]["messages"][1]["content"] == "smile \U0001f600"
                assert chat.error is None
                chat.set_state(frozen_unchecked({"n": 10**MAX_INT_DIGITS}))  # past the checks
                chat.send("once more")
                await chat.wait_idle()
                error = chat.error
                assert isinstance(error, TransportError) and not error.retryable
                assert "cannot be written as JSON" in str(error)
                assert len(transport.requests) == 2  # nothing went out

    run_mock(main)


class RaisingTransport:
    """``stream()`` raises as it is called, before returning any iterator."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def stream(self, body: bytes) -> AsyncIterator[str]:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    ("error", "attempts"),
    [(OSError("socket exhausted"), 3), (TransportError("HTTP 401", retryable=False), 1)],
    ids=["os-error-retried", "transport-error-as-is"],
)
def test_a_transport_that_raises_as_it_is_called_fails_the_attempt_not_the_driver(
    error: Exception, attempts: int
) -> None:
    """reference.md, Transport: its errors end the attempt (other exceptions are retryable
    TransportErrors); the driver and its other resources go on."""
    transport = RaisingTransport(error)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat, other = driver.chat(), driver.chat()
                chat.send("hello")
                await chat.wait_idle()
                assert isinstance(chat.error, TransportError)
                assert str(error) in str(chat.error)
                assert transport.calls == attempts
                other.send("still here")
                await other.wait_idle()
                assert other.error is not None and transport.calls == 2 * attempts

    run_mock(main)


# -- stop, thread changes, shutdown ----------------------------------------------------------


async def stop_during_a_stream() -> None:
    def script(req: Request) -> list[Any]:
        return [
            started(req),
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "partial"},
            Hang(),
        ]

    transport = ScriptedTransport(script)
    with anyio.fail_after(10):
        async with TrioDriver(transport) as driver:
            chat = driver.chat()
            chat.send("hello")
            while last_text(chat) != "partial":
                await chat.next_change()
            stopped_at = anyio.current_time()
            chat.stop()
            assert not chat.is_loading
            await until(lambda: bool(transport.endings))
            (how, when) = transport.endings[0]
            assert how in {"Cancelled", "CancelledError", "GeneratorExit"}
            assert when - stopped_at < 0.05  # exactly 0 on the mock clock
            assert contents(chat) == ["hello"]


def test_stop_during_a_stream_closes_the_transport_at_once() -> None:
    """Stop, R-F6: the transport's stream is cancelled at once; the draft is dropped."""
    run_mock(stop_during_a_stream)


def test_stop_during_a_stream_under_asyncio() -> None:
    """Stop, R-F6: the same under asyncio."""
    anyio.run(stop_during_a_stream, backend="asyncio")


def test_stop_before_the_request_goes_out_sends_nothing() -> None:
    """Stop: an attempt aborted before its task starts never reaches the transport."""
    transport = ScriptedTransport()  # no script: any request would be a failure

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                chat.send("hello")
                chat.stop()
                await trio.sleep(1)
                assert not chat.is_loading and chat.error is None

    run_mock(main)
    assert transport.requests == []


def test_a_thread_change_closes_the_stream_and_late_frames_are_ignored() -> None:
    """R-H1, R-H3: the old stream is closed; frames it sends late never land; nothing is sent."""

    def script(req: Request) -> list[Any]:
        late = [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " late"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            finished(req),
        ]
        return [
            started(req),
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "old"},
            Stubborn(1.0, tuple(late)),
        ]

    transport = ScriptedTransport(script)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(thread_id="thread-1")
                chat.send("hello")
                while last_text(chat) != "old":
                    await chat.next_change()
                chat.set_thread_id("thread-2")
                changes: list[object] = []
                chat.subscribe(changes.append)
                await until(lambda: bool(transport.endings))
                assert transport.endings[0][0] == "GeneratorExit"  # closed at its late yield
                assert changes == []
                assert chat.thread_id == "thread-2" and chat.error is None
                assert not chat.is_loading
                assert contents(chat) == ["hello"]

    run_mock(main)
    assert len(transport.requests) == 1


def test_leaving_the_driver_cancels_a_hanging_stream_and_hanging_tools() -> None:
    """Structured concurrency: leaving ``async with`` ends every task, threads are told."""

    def by_prompt(req: Request) -> list[Any]:  # the two requests may go out in either order
        if req.json["messages"][0]["content"] == "hang":
            return [started(req), Hang()]
        calls = [tool_call("c1", "block", {}), tool_call("c2", "sleep", {})]
        return [started(req), *calls, finished(req)]

    transport = ScriptedTransport(by_prompt, by_prompt)
    thread_done = threading.Event()
    block_started = threading.Event()
    seen: dict[str, bool] = {}

    def block(args: Any, signal: ToolSignal) -> str:
        block_started.set()
        seen["block"] = signal.wait_blocking(5)
        thread_done.set()
        return "unblocked"

    sleep_started = threading.Event()

    async def sleep(args: Any, signal: ToolSignal) -> str:
        sleep_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen["sleep"] = signal.cancelled
        return "never"

    async def main() -> None:
        with trio.fail_after(5):
            async with TrioDriver(transport) as driver:
                streaming = driver.chat()
                working = driver.chat(local_tools={"block": block, "sleep": sleep})
                streaming.send("hang")
                working.send("use tools")
                # Both tools running (a tool cancelled before it starts never runs at all).
                await until(
                    lambda: (
                        block_started.is_set()
                        and sleep_started.is_set()
                        and len(transport.requests) == 2
                    )
                )
                assert streaming.is_loading and working.is_loading
            assert trio.lowlevel.current_task().child_nurseries == []
            assert not driver.running
            assert await trio.to_thread.run_sync(thread_done.wait, 5)
            assert seen == {"block": True, "sleep": True}
            assert sorted(e[0] for e in transport.endings) == ["Cancelled", "end"]
            # Both were stopped on the way out: their state says so, not "loading" forever.
            assert not streaming.is_loading and not working.is_loading
            assert streaming.error is None and working.error is None
            # Each cancelled call's result says the driver closed: the application
            # called no stop().
            results = [str(m.content) for m in working.messages if m.role == "tool"]
            assert (
                results
                == [
                    "Error: cancelled: the driver was closed before the tool returned "
                    "(it may have run in part, or not at all)"
                ]
                * 2
            )
            # The resources are frozen with the driver: input is refused, nothing changes.
            before = working.core_state
            with pytest.raises(RuntimeError, match="not running"):
                working.stop()
            assert working.core_state is before
            with pytest.raises(RuntimeError, match="its TrioDriver has stopped"):
                await working.wait_for_batch(timeout=60)  # at once, not after the timeout

    trio.run(main)


def test_a_long_lived_driver_does_not_keep_the_resources_an_application_dropped() -> None:
    """An SDK that makes one resource per request on one driver must not grow forever."""

    def done(req: Request) -> list[Any]:
        return [started(req), text("m1", "hi"), finished(req)]

    async def main() -> None:
        async with TrioDriver(ScriptedTransport(*[done] * 20)) as driver:
            gone: list[weakref.ref[AsyncResource]] = []
            for n in range(20):
                chat = driver.chat()
                chat.send(f"request {n}")
                await chat.wait_idle()
                assert chat.error is None
                gone.append(weakref.ref(chat))
                del chat
            gc.collect()
            assert [r for r in gone if r() is not None] == []
            last = driver.chat()  # and the driver goes on
            assert not last.is_loading

    run_mock(main)


# -- local tools ------------------------------------------------------------------------------


def test_sync_and_async_tools_run_concurrently_results_in_call_order() -> None:
    """R-D5: local tools run concurrently; the follow-up carries results in call order.

    Each tool waits for the other to have started, so run one after the other
    they would both time out. The first call finishes last.
    """
    sync_started = threading.Event()
    async_started = threading.Event()
    async_finished = threading.Event()

    def weigh(args: Any) -> Any:  # sync: runs in a worker thread
        sync_started.set()
        if not (async_started.wait(2) and async_finished.wait(2)):
            raise TimeoutError("price never ran alongside weigh")
        return {"item": args["item"], "kg": 3}

    async def price(args: Any) -> str:
        async_started.set()
        with anyio.fail_after(2):
            while not sync_started.is_set():
                await anyio.sleep(0.001)
        async_finished.set()
        return f"12 EUR for the {args['item']}"

    def call_tools(req: Request) -> list[Any]:
        return [
            started(req),
            tool_call("c1", "weigh", {"item": "lamp"}),
            tool_call("c2", "price", {"item": "lamp"}),
            finished(req),
        ]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m2", "3 kg, 12 EUR."), finished(req)]

    transport = ScriptedTransport(call_tools, answer)

    async def main() -> None:
        with trio.fail_after(5):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(local_tools={"weigh": weigh, "price": price})
                chat.send("what does the lamp cost to ship?")
                await chat.wait_idle(timeout=5)
                assert last_text(chat) == "3 kg, 12 EUR."
                assert chat.error is None

    trio.run(main)
    follow_up = transport.bodies[1]
    assert follow_up.get("resume") is None
    results = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in results] == ["c1", "c2"]
    assert json.loads(results[0]["content"]) == {"item": "lamp", "kg": 3}
    assert results[1]["content"] == "12 EUR for the lamp"


def test_a_failing_tool_becomes_a_tool_message() -> None:
    """R-D5: a tool that raises produces a tool message naming the error; the loop goes on."""

    async def broken(args: Any) -> str:
        raise ValueError("no such item")

    def call_tool(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "broken", {}), finished(req)]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m2", "Sorry."), finished(req)]

    transport = ScriptedTransport(call_tool, answer)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(local_tools={"broken": broken})
                chat.send("go")
                await chat.wait_idle()
                assert last_text(chat) == "Sorry."

    run_mock(main)
    (result,) = [m for m in transport.bodies[1]["messages"] if m["role"] == "tool"]
    assert "ValueError: no such item" in result["content"]


def test_R_D5_a_declared_tool_without_a_function_reads_as_under_the_fake_driver() -> None:
    """R-D5: a tool declared in ``Options.local_tools`` but given no function becomes a
    tool message; the agent reads the same text whichever driver ran it (the twins
    used to word it differently, so a test against the fake did not hold for real)."""

    def call_ghost(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "ghost", {}), finished(req)]

    def answer(req: Request) -> list[Any]:
        return [started(req), finished(req)]

    options = Options(id_prefix="same", local_tools=frozenset({"ghost"}))
    agent = ScriptedAgent().then(lambda q: reply(*call_ghost(q)), lambda q: reply(*answer(q)))
    fake = FakeDriver(agent)
    chat = fake.chat(options)
    chat.send("go")
    fake.run_until_idle()
    transport = ScriptedTransport(call_ghost, answer)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(options)
                chat.send("go")
                await chat.wait_idle()
                assert chat.error is None

    run_mock(main)
    assert transport.bodies[1] == fake.requests[1].json
    (result,) = [m for m in transport.bodies[1]["messages"] if m["role"] == "tool"]
    assert "no function was registered for local tool 'ghost'" in result["content"]


async def awaits_a_cancelled_task(args: Any) -> str:
    """Ordinary asyncio code: a task someone else cancelled raises CancelledError here."""
    import asyncio

    task = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    return await task


def exits(args: Any) -> str:
    raise SystemExit(3)


async def raises_a_cancelled_error(args: Any) -> str:
    """Under trio no asyncio.CancelledError is a cancellation: only the tool's own."""
    import asyncio

    raise asyncio.CancelledError("gave up")


@pytest.mark.parametrize(
    ("backend", "tool", "says"),
    [
        ("asyncio", awaits_a_cancelled_task, "CancelledError"),
        ("asyncio", exits, "SystemExit: 3"),
        ("trio", exits, "SystemExit: 3"),
        ("trio", raises_a_cancelled_error, "CancelledError: gave up"),
    ],
    ids=["asyncio-own-cancel", "asyncio-sync-exit", "trio-sync-exit", "trio-asyncio-cancel"],
)
def test_a_tool_raising_a_base_exception_of_its_own_is_a_tool_failure(
    backend: str, tool: Callable[..., Any], says: str
) -> None:
    """R-D5: a CancelledError an async tool raised itself (it awaited a task someone else
    cancelled), or a SystemExit from a sync tool's thread, is that tool's failure. It
    used to get past the driver and cancel its task group: every resource stopped
    without an error, and the code after the caller's await was skipped."""

    def call_tool(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "t", {}), finished(req)]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m2", "Done."), finished(req)]

    transport = ScriptedTransport(call_tool, answer, answer)
    after: list[str] = []

    async def main() -> None:
        with anyio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(local_tools={"t": tool})
                chat.send("go")
                await chat.wait_idle()
                after.append("the caller goes on")
                assert chat.error is None and last_text(chat) == "Done."
                other = driver.chat()
                other.send("still running?")
                await other.wait_idle()
                assert other.error is None and last_text(other) == "Done."

    anyio.run(main, backend=backend)
    assert after == ["the caller goes on"]
    (result,) = [m for m in transport.bodies[1]["messages"] if m["role"] == "tool"]
    assert result["content"].startswith(f"Error: {says}")


class AwaitsACancelledFuture:
    """A custom transport over ``HttpxTransport``: after the stream it awaits a future
    that someone else cancelled (a reader task of its own, say), so a CancelledError of
    its own comes out of it, not a cancellation of the driver's task."""

    def __init__(self, inner: HttpxTransport) -> None:
        self.inner = inner

    async def stream(self, body: bytes) -> AsyncIterator[str]:
        import asyncio

        async with contextlib.aclosing(self.inner.stream(body)) as frames:
            async for data in frames:
                yield data
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future


def test_a_transport_raising_a_cancelled_error_of_its_own_fails_the_attempt() -> None:
    """R-F5, R-F7: as for a tool (above), a CancelledError a custom transport raised itself
    is its failure. It got past the driver and cancelled its task group: every resource
    stopped without an error, and the application's block was left without an exception,
    the code after its await skipped."""
    import asyncio

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raw = await request_body(scope, receive, send)
        if raw is None:
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        frame = b"data: " + acknowledging(raw).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": frame, "more_body": False})

    after: list[str] = []

    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.graceful_timeout = 0.5
        config.accesslog = config.errorlog = None
        stop = asyncio.Event()
        server = asyncio.create_task(
            hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait)
        )
        try:
            async with asyncio.timeout(5):
                async with (
                    HttpxTransport(f"http://127.0.0.1:{port}/agent") as inner,
                    TrioDriver(AwaitsACancelledFuture(inner)) as driver,
                ):
                    chat = driver.chat()
                    chat.send("go")
                    await chat.wait_idle()
                    after.append("the caller goes on")
                    assert isinstance(chat.error, TransportError)
                    assert "CancelledError" in chat.error.message
                    assert chat.messages[-1].content == "go"  # type: ignore[union-attr]
        finally:
            stop.set()
            await server

    asyncio.run(main())
    assert after == ["the caller goes on"]


def test_cancelling_an_async_tool_still_cancels_it_on_asyncio() -> None:
    """The other side of the rule above: a real cancellation (stop) of an async tool is
    not taken for the tool's own CancelledError."""
    import asyncio

    entered = anyio.Event()
    outcome: list[str] = []

    async def slow(args: Any) -> str:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return "finished"

    def call_tool(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "slow", {}), finished(req)]

    transport = ScriptedTransport(call_tool)

    async def main() -> None:
        with anyio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(local_tools={"slow": slow})
                chat.send("go")
                await entered.wait()
                chat.stop()
                await until(lambda: outcome == ["cancelled"])
                assert not chat.is_loading and chat.error is None
                (tool,) = [m for m in chat.messages if m.role == "tool"]
                assert tool.content.startswith("Error: cancelled: stop() was called")

    anyio.run(main, backend="asyncio")
    assert len(transport.requests) == 1


def test_stop_cancels_running_tools_and_sets_their_signal() -> None:
    """Stop (CancelTool): both tools learn of it through their signal; nothing is sent after."""
    entered = threading.Event()
    watching = threading.Event()
    seen: dict[str, bool] = {}

    def block(args: Any, signal: ToolSignal) -> str:
        entered.set()
        seen["block"] = signal.wait_blocking(5)
        return "late result"

    async def watch(args: Any, signal: ToolSignal) -> str:
        watching.set()
        await signal.wait()
        seen["watch"] = signal.cancelled
        await anyio.sleep_forever()
        return "never"

    def call_tools(req: Request) -> list[Any]:
        return [
            started(req),
            tool_call("c1", "block", {}),
            tool_call("c2", "watch", {}),
            finished(req),
        ]

    transport = ScriptedTransport(call_tools)

    async def main() -> None:
        with trio.fail_after(5):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(local_tools={"block": block, "watch": watch})
                chat.send("go")
                # Both must have begun: a tool cancelled before it starts never runs.
                await until(lambda: entered.is_set() and watching.is_set())
                assert chat.is_loading
                chat.stop()
                assert not chat.is_loading
                await until(lambda: len(seen) == 2)
                assert seen == {"block": True, "watch": True}
                await anyio.sleep(0.05)  # the abandoned thread's result lands nowhere
                # Each call without a parent message has its own assistant message; each
                # cancelled call a tool message saying so (the late result is not one).
                roles = [m.role for m in chat.messages]
                assert roles == ["user", "assistant", "assistant", "tool", "tool"]
                assert all("cancelled: stop()" in str(m.content) for m in chat.messages[3:])
                assert chat.error is None

    trio.run(main)
    assert len(transport.requests) == 1


# -- waits ------------------------------------------------------------------------------------


def test_waits_time_out_with_a_clear_message() -> None:
    """Every wait has a timeout and says what did not happen."""

    def hang(req: Request) -> list[Any]:
        return [started(req), Hang()]

    async def main() -> None:
        with trio.fail_after(100):
            async with TrioDriver(ScriptedTransport(hang)) as driver:
                chat: AsyncResource = driver.chat()
                chat.send("hello")
                with pytest.raises(TimeoutError, match="did not become idle within 3 s"):
                    await chat.wait_idle(timeout=3)
                with pytest.raises(TimeoutError, match="did not publish a batch"):
                    await chat.wait_for_batch(timeout=3)
                with pytest.raises(TimeoutError, match="did not change"):
                    await chat.next_change(timeout=3)
                assert trio.current_time() == pytest.approx(9.0)

    run_mock(main)


def test_a_wait_whose_condition_comes_as_its_time_runs_out_never_times_out_when_met() -> None:
    """The run ends (stop()) in the very tick the wait's timeout runs out. Trio orders the
    tick's tasks at random: if stop() ran first, the resource is idle when the wait
    gives up, and it returns rather than raise; if the wait gave up first, its
    TimeoutError is true (still loading). Many rounds reach both orders."""

    def hang(req: Request) -> list[Any]:
        return [started(req), Hang()]

    async def main() -> None:
        async with TrioDriver(ScriptedTransport(hang)) as driver:
            chat: AsyncResource = driver.chat()
            for _ in range(40):
                chat.send("hello")

                async def stop_at_the_deadline() -> None:
                    await trio.sleep(3)
                    chat.stop()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stop_at_the_deadline)
                    try:
                        await chat.wait_idle(timeout=3)
                    except TimeoutError as exc:
                        assert "is_loading=True" in str(exc)  # it was still loading
                assert not chat.is_loading

    run_mock(main)


def test_a_change_committed_after_the_deadline_but_before_the_wait_wakes_is_returned() -> None:
    """The same, in the one order that matters, made certain on asyncio (whose loop runs a
    tick's due timers by due time, then the tasks they woke): the loop stalls past the
    wait's deadline, so the deadline cancels the wait and, in the same tick before the
    wait runs again, set_state commits a change. The wait finds its condition met as it
    gives up and returns: a TimeoutError would say nothing changed, which is false."""
    import asyncio

    async def main() -> None:
        async with TrioDriver(ScriptedTransport()) as driver:
            chat: AsyncResource = driver.chat()
            loop = asyncio.get_running_loop()
            start = loop.time()
            changed_at: list[float] = []

            def change() -> None:
                changed_at.append(loop.time())
                chat.set_state({"seen": True})

            loop.call_at(start + 0.5, time.sleep, 0.5)  # the loop is busy past the deadline
            loop.call_at(start + 0.9, change)  # due in the same tick, after the deadline
            waiting_from = loop.time()
            await chat.next_change(timeout=0.6)
            assert changed_at[0] >= waiting_from + 0.6  # the deadline had passed
            assert chat.state == {"seen": True}

    anyio.run(main, backend="asyncio")


# -- leaving the block: nothing new starts, nothing waits on --------------------------


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize(
    ("action", "refused"),
    [
        ("send", "Send would start work"),
        ("chat", "a new resource"),
        ("set_thread_id", "SetThreadId would start work"),  # a completion re-sends its input
        ("reload", "Reload would start work"),
        ("set_messages", "SetMessages would start work"),
    ],
)
def test_an_observer_cannot_start_work_while_the_driver_closes(
    backend: str, action: str, refused: str
) -> None:
    """Leaving the block stops each loading resource, and that stop notifies observers.
    One that sent again (or made a new resource and sent) left a resource loading
    forever after the driver closed, or made the block's exit raise."""

    def hang(req: Request) -> list[Any]:
        return [started(req), Hang()]

    transport = ScriptedTransport(hang, hang)
    tried: list[bool] = []

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()

                def restart(r: Resource) -> None:
                    if not r.is_loading and not tried:
                        tried.append(True)
                        if action == "chat":
                            driver.chat().send("again")
                        elif action == "set_thread_id":
                            r.set_thread_id("another")
                        elif action == "reload":
                            r.reload()
                        elif action == "set_messages":
                            r.set_messages([UserMessage(id="u9", content="again")])
                        else:
                            r.send("again")

                chat.subscribe(restart)
                chat.send("hello")
                await until(lambda: len(transport.requests) == 1)
            assert tried and not chat.is_loading and len(transport.requests) == 1
            assert isinstance(chat.error, ObserverError)
            assert f"the TrioDriver is closing (its `async with` block is ending): {refused}" in (
                chat.error.message
            )

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_wait_in_another_task_ends_when_the_driver_closes(backend: str) -> None:
    """Not at its timeout: the driver wakes every wait as it closes, so each raises."""
    outcomes: list[tuple[str, float]] = []

    async def main() -> None:
        async def wait(name: str, waiting: Callable[[], Awaitable[Any]]) -> None:
            start = anyio.current_time()
            with pytest.raises(RuntimeError, match="its TrioDriver has stopped"):
                await waiting()
            outcomes.append((name, anyio.current_time() - start))

        # The waits run in a task group outside the driver's block, and outlive it.
        hang = ScriptedTransport(lambda req: [Hang()])
        async with anyio.create_task_group() as outside, TrioDriver(hang) as driver:
            asking = driver.chat()
            asking.send("hello")  # a run that never ends (an idle resource raises at once)
            chat = driver.chat()  # idle: never ran, nothing will change it
            outside.start_soon(wait, "batch", lambda: asking.wait_for_batch(timeout=30))
            outside.start_soon(wait, "change", lambda: chat.next_change(timeout=30))
            await anyio.sleep(0.05)

    anyio.run(main, backend=backend)
    assert sorted(name for name, _ in outcomes) == ["batch", "change"]
    assert all(seconds < 5 for _, seconds in outcomes)


def test_the_blocks_own_exception_group_passes_through_as_raised() -> None:
    """trio re-groups a group the block raises; the driver must not wrap it once more."""

    async def main() -> None:
        async with TrioDriver(ScriptedTransport()):
            raise ExceptionGroup("mine", [ValueError("v")])

    with pytest.raises(ExceptionGroup) as caught:
        trio.run(main)
    assert caught.value.message == "mine"
    assert [type(e) for e in caught.value.exceptions] == [ValueError]


async def _lookup(args: Any = None) -> int:
    await anyio.sleep(0)
    return 42


def _wrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


def _returns_its_coroutine(args: Any) -> Any:
    return _lookup()


@pytest.mark.parametrize(
    "tool",
    [_wrapped(_lookup), _returns_its_coroutine],
    ids=["behind functools.wraps", "a sync function returning a coroutine"],
)
def test_an_async_tool_hidden_behind_a_wrapper_is_awaited(tool: Callable[..., Any]) -> None:
    """Behind functools.wraps the tool ran in a thread and failed with an error about
    anyio's internals; a wrapper without wraps made a tool message saying a coroutine
    has no JSON form (and never awaited it)."""

    def answer(req: Request) -> list[Any]:
        if any(m["role"] == "tool" for m in req.json["messages"]):
            return [started(req), finished(req)]
        return [started(req), tool_call("c1", "lookup", {}), finished(req)]

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(ScriptedTransport(answer, answer)) as driver:
                chat = driver.chat(local_tools={"lookup": tool})
                chat.send("go")
                await chat.wait_idle()
                assert chat.error is None
                assert [m.content for m in chat.messages if m.role == "tool"] == ["42"]

    trio.run(main)


def test_an_async_tool_behind_functools_wraps_runs_on_the_loop() -> None:
    """reference.md: it counts as async, and async tools run on the loop, not in a thread
    (its wrapper may use the loop, as a tracing or retry decorator does)."""
    threads: list[threading.Thread] = []

    def on_the_loop(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            threads.append(threading.current_thread())
            return fn(*args)

        return wrapper

    def answer(req: Request) -> list[Any]:
        if any(m["role"] == "tool" for m in req.json["messages"]):
            return [started(req), finished(req)]
        return [started(req), tool_call("c1", "lookup", {}), finished(req)]

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(ScriptedTransport(answer, answer)) as driver:
                chat = driver.chat(local_tools={"lookup": on_the_loop(_lookup)})
                chat.send("go")
                await chat.wait_idle()
                assert chat.error is None
        assert threads == [threading.current_thread()]

    trio.run(main)


def test_sync_tools_abandoned_by_stop_do_not_use_up_the_threads_for_later_ones() -> None:
    """A sync tool that ignores its signal is abandoned by stop(). In anyio's worker pool
    each kept one of trio's 40 thread tokens, so after 40 no sync tool ever ran again."""
    release = threading.Event()
    stuck_calls: list[int] = []

    daemons: list[bool] = []

    def stuck(args: Any) -> str:
        stuck_calls.append(1)
        daemons.append(threading.current_thread().daemon)  # nor may one hold the exit
        release.wait(30)
        return "late"

    def quick(args: Any) -> str:
        return "ok"

    def answer(req: Request) -> list[Any]:
        last = req.json["messages"][-1]
        if last["role"] == "tool":
            return [started(req), finished(req)]
        return [started(req), tool_call(f"c{len(stuck_calls)}", last["content"], {}), finished(req)]

    rounds = 41

    async def main() -> None:
        with trio.fail_after(30):
            async with TrioDriver(ScriptedTransport(*[answer] * (rounds + 2))) as driver:
                chat = driver.chat(local_tools={"stuck": stuck, "quick": quick})
                for n in range(rounds):
                    chat.send("stuck")
                    await until(lambda n=n: len(stuck_calls) == n + 1)
                    chat.stop()
                chat.send("quick")
                await chat.wait_idle(timeout=10)
                assert chat.error is None
                assert [m.content for m in chat.messages if m.role == "tool"][-1] == "ok"

    try:
        trio.run(main)
    finally:
        release.set()
    assert daemons == [True] * rounds


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("how", ["stop", "set_thread_id"])
def test_a_tool_cancelled_before_it_starts_never_runs(backend: str, kind: str, how: str) -> None:
    """Stop, R-H1: an observer that stops (or changes thread) as the run's tool calls are
    handed out cancels them before their tasks start. They ran anyway, after stop()
    returned, side effects and all; the fake driver, the reference, never runs them."""
    ran: list[str] = []

    def sync_tool(args: Any) -> str:
        ran.append("sync")
        return "done"

    async def async_tool(args: Any) -> str:
        ran.append("async")
        return "done"

    def calls(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "act", {}), finished(req)]

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(ScriptedTransport(calls)) as driver:
                tool = sync_tool if kind == "sync" else async_tool
                chat = driver.chat(local_tools={"act": tool}, thread_id="thread-1")

                def cancel(r: Resource) -> None:
                    if r.core_state.tools is not None:
                        r.stop() if how == "stop" else r.set_thread_id("thread-2")

                chat.subscribe(cancel)
                chat.send("act")
                await chat.wait_idle()
                await anyio.sleep(0.05)  # a thread started anyway would have run by now
                (result,) = [m.content for m in chat.messages if m.role == "tool"]
                assert result.startswith("Error: cancelled")

    anyio.run(main, backend=backend)
    assert ran == []


class FailsToClose:
    """A stream (no async generator) whose ``aclose`` raises, as a buggy transport's may."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.closes = 0

    def __aiter__(self) -> FailsToClose:
        return self

    async def __anext__(self) -> list[str]:
        await anyio.lowlevel.checkpoint()
        if not self.batches:
            raise StopAsyncIteration
        return self.batches.pop(0)

    async def aclose(self) -> None:
        self.closes += 1
        raise OSError("close failed")


class CloseFailingTransport:
    """A BatchTransport: RUN_STARTED and a text message start in one read, then ``rest``
    (None: stop() ends the attempt before it) in another."""

    def __init__(self, finish: bool) -> None:
        self.finish = finish
        self.streams: list[FailsToClose] = []

    def stream_batches(self, body: bytes) -> AsyncIterator[list[str]]:
        req = json.loads(body)
        ids = {"threadId": req["threadId"], "runId": req["runId"]}
        first = [
            json.dumps({"type": "RUN_STARTED", **ids}),
            json.dumps({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        ]
        rest = [
            json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"}),
            json.dumps({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
            json.dumps({"type": "RUN_FINISHED", **ids}),
        ]
        self.streams.append(FailsToClose([first, rest] if self.finish else [first]))
        return self.streams[-1]

    def stream(self, body: bytes) -> AsyncIterator[str]:
        raise AssertionError("the driver prefers stream_batches")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("when", ["stopped mid-read", "after the whole run"])
def test_a_transport_whose_close_raises_never_crashes_the_driver(backend: str, when: str) -> None:
    """reference.md, Transport: a transport's exceptions end the attempt, never the driver.
    Its stream's ``aclose`` raising (when stop() ended the attempt mid-read, or when the
    driver closed the stream it had read to the end) escaped the driver's task: the task
    group cancelled every resource and the application's block raised it."""
    transport = CloseFailingTransport(finish=when != "stopped mid-read")

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(transport) as driver:
                chat, other = driver.chat(), driver.chat()

                def stop_at_run_started(r: Resource) -> None:
                    run = r.core_state.run
                    if run is not None and run.attempt is not None and run.attempt.acked:
                        r.stop()  # the second frame of the same read is still to come

                if not transport.finish:
                    chat.subscribe(stop_at_run_started)
                chat.send("hello")
                await chat.wait_idle()
                await anyio.sleep(0.05)
                assert transport.streams[0].closes == 1
                assert chat.error is None
                assert contents(chat) == (["hello", "hi"] if transport.finish else ["hello"])
                other.send("still running")  # the driver goes on
                assert other.is_loading

    anyio.run(main, backend=backend)


async def _cleanup_fails(log: list[str], exc: BaseException | None = None) -> None:
    log.append("waiting")
    try:
        await anyio.sleep_forever()
    finally:
        log.append("failing")
        raise exc if exc is not None else ValueError("cleanup failed")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("where", ["tool", "transport"])
def test_a_task_group_whose_cleanup_fails_as_it_is_cancelled_never_crashes_the_driver(
    backend: str, where: str
) -> None:
    """Stop: an async tool (or a transport) with a task group of its own, whose child fails
    as stop() cancels it. Trio's cancel scope took its ``Cancelled`` out of the group
    and raised the rest out of the driver's task group: every resource was cancelled
    and the block raised. Under asyncio it was ignored, as a cancelled tool's result is."""
    log: list[str] = []

    async def tool(args: Any) -> str:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cleanup_fails, log)
            await anyio.sleep_forever()
        return "never"

    class GroupTransport:
        async def stream(self, body: bytes) -> AsyncIterator[str]:
            yield acknowledging(body)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cleanup_fails, log)
                await anyio.sleep_forever()

    def calls(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "act", {}), finished(req)]

    transport = ScriptedTransport(calls) if where == "tool" else GroupTransport()

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(transport) as driver:
                chat, other = driver.chat(local_tools={"act": tool}), driver.chat()
                chat.send("go")
                await until(lambda: log == ["waiting"])  # the tool (or stream) and its child
                chat.stop()
                await until(lambda: log == ["waiting", "failing"])
                await anyio.sleep(0.05)
                assert not chat.is_loading and chat.error is None
                other.send("still running")  # the driver goes on
                assert other.is_loading

    anyio.run(main, backend=backend)


def test_a_cancelled_tool_whose_cleanup_exits_still_ends_the_block() -> None:
    """Only a cleanup's ordinary failure is dropped with the cancellation: a SystemExit
    (or KeyboardInterrupt) raised as stop() cancels a tool still ends the application."""

    log: list[str] = []

    async def tool(args: Any) -> str:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cleanup_fails, log, SystemExit(3))
            await anyio.sleep_forever()
        return "never"

    def calls(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "act", {}), finished(req)]

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(ScriptedTransport(calls)) as driver:
                chat = driver.chat(local_tools={"act": tool})
                chat.send("go")
                await until(lambda: log == ["waiting"])  # the tool waits in its task group
                chat.stop()
                await anyio.sleep(0.05)

    with pytest.raises(BaseExceptionGroup) as caught:
        trio.run(main)
    assert caught.group_contains(SystemExit)


# -- the driver itself: its block, clock, ids, timers, books and waits ----------------------


def test_a_driver_is_running_only_inside_its_block_and_enters_once() -> None:
    """reference.md, TrioDriver: ``running`` says whether the block is live; outside it a
    resource is refused with a message saying what to do, and a driver is entered once."""
    driver = TrioDriver(ScriptedTransport())

    async def main() -> None:
        assert driver.running is False
        with pytest.raises(RuntimeError, match="not running: use its resources inside"):
            driver.chat()
        async with driver:
            assert driver.running is True
            chat = driver.chat()
            assert not chat.is_loading
        assert driver.running is False
        with pytest.raises(RuntimeError, match="entered only once"):
            async with driver:
                pass
        assert driver.running is False
        with pytest.raises(RuntimeError, match="not running"):
            chat.send("hello")

    run_mock(main)


def test_a_driver_refuses_a_resource_it_did_not_create() -> None:
    """``execute`` (the Driver protocol) carries out commands only for its own resources."""
    fake_chat = FakeDriver(ScriptedAgent()).chat()

    async def main() -> None:
        async with TrioDriver(ScriptedTransport()) as other, TrioDriver(ScriptedTransport()) as d:
            for stranger in (fake_chat, other.chat()):
                with pytest.raises(RuntimeError, match="not created by this driver"):
                    d.execute(stranger, [])

    run_mock(main)


def test_now_is_the_wall_time_at_entry_moved_by_the_loops_clock() -> None:
    """reference.md, ``now()``: epoch seconds, the wall time read on entry plus the loop's
    elapsed time, so a mock clock moves it (expiry and back-offs are read on it); outside
    the block it is the wall time."""
    driver = TrioDriver(ScriptedTransport())
    seen: dict[str, float] = {}

    async def main() -> None:
        async with driver:
            seen["entry"] = driver.now() - time.time()
            start = driver.now()
            await trio.sleep(3600)  # an hour of the mock clock, an instant of the wall's
            seen["hour"] = driver.now() - start
        seen["left"] = driver.now() - time.time()

    run_mock(main)
    assert seen["entry"] == pytest.approx(0, abs=60)
    assert seen["hour"] == pytest.approx(3600)
    assert seen["left"] == pytest.approx(0, abs=60)
    assert driver.now() == pytest.approx(time.time(), abs=60)  # after the loop, too


def test_now_on_trios_own_clock_is_the_wall_time() -> None:
    """Trio's clock starts at a random offset, not at 0: ``now()`` counts only the time
    elapsed on it since the driver's entry."""
    seen: list[float] = []

    async def main() -> None:
        async with TrioDriver(ScriptedTransport()) as driver:
            seen.append(driver.now() - time.time())

    trio.run(main)
    assert seen == [pytest.approx(0, abs=60)]


def test_each_resource_gets_a_random_id_prefix_unless_its_options_give_one() -> None:
    """reference.md, R-I1: a resource without ``id_prefix`` gets ``interlude-<8 hex>``, its
    own, so ids (run ids here) never repeat across resources or runtimes."""

    def done(req: Request) -> list[Any]:
        return [started(req), finished(req)]

    transport = ScriptedTransport(done, done, done)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                for chat in (driver.chat(), driver.chat(), driver.chat(Options(id_prefix="mine"))):
                    chat.send("hello")
                    await chat.wait_idle()
                    assert chat.error is None

    run_mock(main)
    first, second, mine = (r.run_id for r in transport.requests)
    assert re.fullmatch(r"interlude-[0-9a-f]{8}-run-\d+", first)
    assert re.fullmatch(r"interlude-[0-9a-f]{8}-run-\d+", second)
    assert first.split("-run-")[0] != second.split("-run-")[0]
    assert mine.startswith("mine-run-")


def test_a_chat_stopped_in_its_back_off_is_freed_at_once() -> None:
    """Stop cancels the retry's timer (CancelTimer), not only the retry: a timer left
    sleeping held the resource (and its books) until its due time, so an SDK that
    stops and drops its chats kept every one of them for the whole back-off."""

    def drop(req: Request) -> list[Any]:
        return [Fail(ConnectionResetError("peer reset"))]

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(ScriptedTransport(drop)) as driver:
                chat = driver.chat(Options(retry=RetryPolicy(base_delay=600.0)))
                chat.send("hello")
                while chat.retry_due is None:
                    await chat.next_change()
                chat.stop()
                assert not chat.is_loading and chat.retry_due is None
                gone = weakref.ref(chat)
                del chat
                await trio.testing.wait_all_tasks_blocked()  # the cancelled tasks have ended
                gc.collect()
                assert gone() is None

    trio.run(main)  # the real clock: the back-off's ten minutes never pass here


def test_a_long_lived_chat_keeps_no_books_of_the_work_that_ended() -> None:
    """The driver's books of one resource hold only what runs: every ended attempt,
    fired timer and finished tool leaves them, so a chat that runs for days does not
    grow with every turn."""

    def drop(req: Request) -> list[Any]:
        return [Fail(ConnectionResetError("peer reset"))]

    def call_tool(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "lookup", {}), finished(req)]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m2", "Done."), finished(req)]

    transport = ScriptedTransport(drop, call_tool, answer)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(
                    Options(retry=RetryPolicy(base_delay=1.0)), local_tools={"lookup": _lookup}
                )
                chat.send("go")  # dropped, retried after a back-off, a tool round, an answer
                await chat.wait_idle()
                assert chat.error is None and last_text(chat) == "Done."
                books = chat._books
                assert (books.attempts, books.timers, books.running_tools) == ({}, {}, {})

    run_mock(main)
    assert len(transport.requests) == 3


def test_a_stopped_transport_whose_cleanup_exits_still_ends_the_block() -> None:
    """As for a tool (above): a SystemExit raised in a transport's own task group as
    stop() cancels its stream is not dropped with the cancellation; it ends the
    application's block."""
    log: list[str] = []

    class ExitingTransport:
        async def stream(self, body: bytes) -> AsyncIterator[str]:
            yield acknowledging(body)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cleanup_fails, log, SystemExit(3))
                await anyio.sleep_forever()

    async def main() -> None:
        with anyio.fail_after(5):
            async with TrioDriver(ExitingTransport()) as driver:
                chat = driver.chat()
                chat.send("go")
                await until(lambda: log == ["waiting"])  # the stream waits in its task group
                chat.stop()  # leaving the block waits for the stream's task to end

    with pytest.raises(BaseExceptionGroup) as caught:
        trio.run(main)
    assert caught.group_contains(SystemExit)
    assert log == ["waiting", "failing"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_tool_that_finished_is_never_told_it_was_cancelled(kind: str) -> None:
    """ToolSignal tells a running tool it was cancelled: one that returned its result
    was not, so work it left watching its signal (a helper thread, say) goes on."""
    signals: list[ToolSignal] = []

    def sync_tool(args: Any, signal: ToolSignal) -> str:
        signals.append(signal)
        return "done"

    async def async_tool(args: Any, signal: ToolSignal) -> str:
        signals.append(signal)
        return "done"

    def call_tool(req: Request) -> list[Any]:
        return [started(req), tool_call("c1", "act", {}), finished(req)]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m2", "Done."), finished(req)]

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(ScriptedTransport(call_tool, answer)) as driver:
                tool = sync_tool if kind == "sync" else async_tool
                chat = driver.chat(local_tools={"act": tool})
                chat.send("go")
                await chat.wait_idle()
                assert chat.error is None and last_text(chat) == "Done."
                (signal,) = signals
                assert not signal.cancelled
            assert not signal.cancelled  # nor when the driver closes

    trio.run(main)


def test_every_wait_gives_up_after_30_seconds_by_default() -> None:
    """reference.md, AsyncResource: each wait's ``timeout`` is 30 s unless given."""

    def hang(req: Request) -> list[Any]:
        return [started(req), Hang()]

    async def main() -> None:
        with trio.fail_after(1000):
            async with TrioDriver(ScriptedTransport(hang)) as driver:
                chat = driver.chat()
                chat.send("hello")
                for wait in (chat.wait_idle, chat.wait_for_batch, chat.next_change):
                    start = trio.current_time()
                    with pytest.raises(TimeoutError, match="within 30 s"):
                        await wait()
                    assert trio.current_time() - start == pytest.approx(30)

    run_mock(main)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_an_exception_in_the_block_comes_out_as_raised(backend: str) -> None:
    """The driver's task group must not wrap the block's own exception in a group: an
    application's ``except ValueError`` around the block still catches it."""

    async def main() -> None:
        async with TrioDriver(ScriptedTransport()) as driver:
            driver.chat()
            raise ValueError("mine")

    with pytest.raises(ValueError, match="mine"):
        anyio.run(main, backend=backend)


def test_a_timer_fires_when_the_drivers_clock_says_it_is_due() -> None:
    """A back-off is timed on the injected clock, not the loop's: with a clock that runs
    at half the loop's speed, a 2 s back-off takes 4 s of the loop (the driver sleeps
    on the loop, then re-reads its clock until it says due)."""
    policy = RetryPolicy(base_delay=2.0, jitter=0.0)

    def drop(req: Request) -> list[Any]:
        return [Fail(ConnectionResetError("peer reset"))]

    def answer(req: Request) -> list[Any]:
        return [started(req), text("m1", "hi"), finished(req)]

    transport = ScriptedTransport(drop, answer)

    async def main() -> None:
        with trio.fail_after(60):
            clock = lambda: FAKE_EPOCH + trio.current_time() / 2  # noqa: E731
            async with TrioDriver(transport, clock=clock) as driver:
                chat = driver.chat(Options(retry=policy))
                chat.send("hello")
                await chat.wait_idle()
                assert chat.error is None and last_text(chat) == "hi"

    run_mock(main)
    assert transport.sent_at[1] - transport.sent_at[0] == pytest.approx(4.0)


def test_a_back_off_of_no_time_stopped_as_it_starts_never_fires() -> None:
    """Stop in the observer that sees the back-off begin: its timer, due at once, is
    cancelled before its task runs, and it neither retries nor ends the driver."""

    def drop(req: Request) -> list[Any]:
        return [Fail(ConnectionResetError("peer reset"))]

    transport = ScriptedTransport(drop)

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(Options(retry=RetryPolicy(base_delay=0.0)))
                chat.subscribe(lambda r: r.stop() if r.retry_due is not None else None)
                chat.send("hello")
                await chat.wait_idle()
                assert chat.error is None and chat.retry_due is None
                await trio.testing.wait_all_tasks_blocked()  # the timer's task has run
                other = driver.chat()
                assert not other.is_loading  # the driver goes on

    run_mock(main)
    assert len(transport.requests) == 1


def test_the_block_ends_cleanly_when_the_transport_makes_its_cancellation_an_error() -> None:
    """A transport that answers the cancellation of its stream with an error of its own
    (a client library's "connection closed", say): as the block is left, that error is
    nobody's to hear (the driver has stopped), so it must not end the block."""
    endings: list[str] = []

    class Converting:
        async def stream(self, body: bytes) -> AsyncIterator[str]:
            yield acknowledging(body)
            try:
                await anyio.sleep_forever()
            except BaseException:
                endings.append("cancelled")
                raise OSError("connection closed") from None

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(Converting()) as driver:
                chat = driver.chat()
                chat.send("go")
                while not (chat.core_state.run and chat.core_state.run.attempt.acked):
                    await chat.next_change()
            assert not chat.is_loading

    run_mock(main)
    assert endings == ["cancelled"]


def test_waits_in_two_tasks_on_one_resource_both_end_with_the_run() -> None:
    """Two tasks wait for the same run to end: its end wakes both at once (each wait
    used to be able to replace the other's wake-up, which then waited out its timeout)."""
    ended: list[tuple[str, float]] = []

    def slow(req: Request) -> list[Any]:
        return [started(req), text("m1", "hi"), Sleep(1), finished(req)]

    async def main() -> None:
        with trio.fail_after(100):
            async with TrioDriver(ScriptedTransport(slow)) as driver:
                chat = driver.chat()
                chat.send("hello")

                async def wait(name: str) -> None:
                    await chat.wait_idle(timeout=60)
                    ended.append((name, trio.current_time()))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wait, "one")
                    nursery.start_soon(wait, "other")
                assert not chat.is_loading

    run_mock(main)
    assert sorted(ended) == [("one", pytest.approx(1.0)), ("other", pytest.approx(1.0))]


class NoClose:
    """A plain async iterator of frames, with no ``aclose`` (the protocol needs none)."""

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames

    def __aiter__(self) -> NoClose:
        return self

    async def __anext__(self) -> str:
        await anyio.lowlevel.checkpoint()
        if not self.frames:
            raise StopAsyncIteration
        return self.frames.pop(0)


def test_a_stream_without_aclose_that_ends_early_reads_as_ending_early() -> None:
    """Transport.stream returns an AsyncIterator, which needs no ``aclose``: one that
    ends after RUN_STARTED is a stream that ended before RUN_FINISHED, not a retryable
    failure to close it (a TypeError calling the missing ``aclose``)."""

    class Plain:
        def __init__(self) -> None:
            self.calls = 0

        def stream(self, body: bytes) -> AsyncIterator[str]:
            self.calls += 1
            return NoClose([acknowledging(body)])

    transport = Plain()

    async def main() -> None:
        with trio.fail_after(60):
            async with TrioDriver(transport) as driver:
                chat = driver.chat()
                chat.send("hello")
                await chat.wait_idle(timeout=60)
                assert chat.error is not None
                assert "the stream ended before RUN_FINISHED" in str(chat.error)

    run_mock(main)
    assert transport.calls == 1
