"""The reference agent over a real socket: scenarios, resume validation, idempotency, faults.

Each test starts the server on an ephemeral 127.0.0.1 port inside ``trio.run`` and talks to
it with ``httpx``; every wait is under ``trio.fail_after``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
import pydantic
import pytest
import trio
import trio.testing
from ag_ui.core import (
    Event as AgUiEvent,
)
from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
)
from ag_ui.encoder import EventEncoder

from interlude.adapters import agent_scenarios
from interlude.adapters.agent import (
    MAX_BODY_BYTES,
    AgentApp,
    Fault,
    ReferenceAgent,
    encode_frame,
    serve_agent,
)

NOW = 1_800_000_000.0
EVENTS = pydantic.TypeAdapter(AgUiEvent)

Body = Callable[[ReferenceAgent, httpx.AsyncClient], Awaitable[object]]


def with_agent(
    body: Body, agent: ReferenceAgent | None = None, limit: float = 5.0
) -> ReferenceAgent:
    """Serve ``agent`` on an ephemeral port and run ``body`` against it."""
    agent = agent if agent is not None else ReferenceAgent(clock=lambda: NOW)

    async def main() -> None:
        with trio.fail_after(limit):
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_agent, agent)
                assert url.startswith("http://127.0.0.1:") and url.endswith("/")
                async with httpx.AsyncClient(base_url=url, timeout=limit) as client:
                    await body(agent, client)
                nursery.cancel_scope.cancel()

    trio.run(main)
    return agent


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


def run_input(
    thread: str,
    run: str,
    messages: Sequence[dict[str, Any]] = (),
    *,
    state: Any = None,
    resume: list[dict[str, Any]] | None = None,
    tools: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": run,
        "state": state,
        "messages": list(messages),
        "tools": list(tools),
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """Split on blank lines, join ``data:`` lines, parse JSON: enough for these streams."""
    events = []
    for block in raw.decode().split("\n\n"):
        lines = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if lines:
            events.append(json.loads("\n".join(lines)))
    return events


async def post(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await client.post("/", json=body, headers={"accept": "text/event-stream"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = parse_sse(response.content)
    for event in events:
        EVENTS.validate_python(event)  # every frame is a valid AG-UI 1.0 event
    return events


async def post_raw(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> tuple[httpx.Response, bytes, Exception | None]:
    """The bytes received before the body ended or broke, and how it broke."""
    chunks: list[bytes] = []
    async with client.stream("POST", "/", json=body) as response:
        try:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
        except httpx.RemoteProtocolError as error:
            return response, b"".join(chunks), error
    return response, b"".join(chunks), None


def types(events: Sequence[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text_of(events: Sequence[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def outcome(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["type"] == "RUN_FINISHED"
    result: dict[str, Any] = events[-1]["outcome"]
    return result


APPROVE = [
    {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
    {
        "interruptId": "shipping-address",
        "status": "resolved",
        "payload": {"addressId": "address-123"},
    },
]


async def buy(client: httpx.AsyncClient, thread: str, text: str = "buy it") -> list[dict[str, Any]]:
    return await post(client, run_input(thread, "r1", [user(text)]))


# -- scenarios ------------------------------------------------------------------------------


def test_plain_text_streams_several_deltas_snapshot_first_then_delta() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        first = await post(client, run_input("t", "r1", [user("Hello there")]))
        assert first[0] == {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r1",
            "protocolVersion": "1.0",
        }
        assert first[1] == {
            "type": "STATE_SNAPSHOT",
            "snapshot": {"turns": 1, "orders": [], "cart": {}, "address": None},
        }
        assert types(first)[2] == "TEXT_MESSAGE_START" and first[2]["role"] == "assistant"
        assert types(first).count("TEXT_MESSAGE_CONTENT") >= 3
        assert text_of(first) == "You said: Hello there"
        assert outcome(first) == {"type": "success"}
        assert first[-1]["runId"] == "r1"

        state = agent.state_of("t")
        second = await post(client, run_input("t", "r2", [user("again", "u2")], state=state))
        assert second[1] == {
            "type": "STATE_DELTA",
            "delta": [{"op": "replace", "path": "/turns", "value": 2}],
        }
        assert second[2]["messageId"] != first[2]["messageId"]

        # A client whose state diverged (set_state) gets a snapshot that adopts its keys.
        third = await post(
            client, run_input("t", "r3", [user("x")], state={**state, "turns": 7, "note": "hi"})
        )
        assert third[1]["type"] == "STATE_SNAPSHOT"
        assert third[1]["snapshot"]["note"] == "hi" and third[1]["snapshot"]["turns"] == 8

    with_agent(body)


def test_text_goes_out_as_utf8_not_ascii_escapes() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        response = await client.post("/", json=run_input("t", "r1", [user("café ☕ 😀")]))
        assert all(word.encode() in response.content for word in ("café", "☕", "😀"))
        assert text_of(parse_sse(response.content)) == "You said: café ☕ 😀"

    with_agent(body)


def test_purchase_streams_text_tool_call_and_a_two_interrupt_batch() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        events = await buy(client, "t", "Please PURCHASE an espresso machine")
        start = next(e for e in events if e["type"] == "TOOL_CALL_START")
        assert start["toolCallName"] == "place_order"
        assert start["parentMessageId"] == events[2]["messageId"]
        args = "".join(
            e["delta"]
            for e in events
            if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == start["toolCallId"]
        )
        assert json.loads(args) == {"item": "espresso machine", "quantity": 1, "price": 249}
        assert "TOOL_CALL_END" in types(events) and "TOOL_CALL_RESULT" not in types(events)
        purchase, address = outcome(events)["interrupts"]
        assert purchase == {
            "id": "purchase",
            "reason": "tool_approval",
            "message": "Approve this purchase?",
            "toolCallId": start["toolCallId"],
            "metadata": {"item": "espresso machine", "price": 249, "currency": "USD"},
            "responseSchema": {
                "type": "object",
                "properties": {
                    "approved": {"type": "boolean"},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["approved"],
                "additionalProperties": False,
            },
        }
        assert address == {
            "id": "shipping-address",
            "reason": "input_required",
            "message": "Which address?",
            "responseSchema": {
                "type": "object",
                "properties": {
                    "addressId": {"type": "string", "enum": ["address-123", "address-456"]}
                },
                "required": ["addressId"],
                "additionalProperties": False,
            },
        }
        assert agent.state_of("t") == {
            "turns": 1,
            "orders": [],
            "cart": {"item": "espresso machine", "quantity": 1, "price": 249},
            "address": None,
        }
        assert agent.pending_interrupt_ids("t") == ("purchase", "shipping-address")
        batch = await post(client, run_input("t2", "r1", [user("a batch of several things")]))
        assert len(outcome(batch)["interrupts"]) == 2

    with_agent(body)


def test_expires_at_from_hurry_or_configured_expiry_uses_the_injected_clock() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        hurried = await buy(client, "t1", "buy it, hurry!")
        assert {i["expiresAt"] for i in outcome(hurried)["interrupts"]} == {
            "2027-01-15T08:01:00.000Z"  # NOW + 60 s
        }
        plain = await buy(client, "t2")
        assert {i["expiresAt"] for i in outcome(plain)["interrupts"]} == {
            "2027-01-15T08:00:05.250Z"
        }

    with_agent(body, ReferenceAgent(clock=lambda: NOW, expires_in=5.25))
    unhurried = with_agent(lambda agent, client: buy(client, "t"))
    assert unhurried.pending_interrupt_ids("t") == ("purchase", "shipping-address")


def test_address_alone_asks_one_question_and_resume_sets_it() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        events = await post(client, run_input("t", "r1", [user("change my address")]))
        (only,) = outcome(events)["interrupts"]
        assert only["id"] == "shipping-address" and only["responseSchema"]["required"] == [
            "addressId"
        ]
        answer = [
            {
                "interruptId": "shipping-address",
                "status": "resolved",
                "payload": {"addressId": "address-456"},
            }
        ]
        resumed = await post(client, run_input("t", "r2", state=agent.state_of("t"), resume=answer))
        assert text_of(resumed) == "Shipping address set to address-456."
        assert {"op": "replace", "path": "/address", "value": "address-456"} in [
            op for e in resumed if e["type"] == "STATE_DELTA" for op in e["delta"]
        ]
        assert agent.side_effects == 0

    with_agent(body)


def test_frontend_tool_call_is_left_pending_then_answered_by_a_follow_up() -> None:
    tool = {"name": "get_local_time", "description": "The user's local time", "parameters": {}}

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        no_tool = await post(client, run_input("t0", "r1", [user("what time is it?")]))
        assert text_of(no_tool) == "You said: what time is it?"

        events = await post(client, run_input("t", "r1", [user("what time is it?")], tools=[tool]))
        start = next(e for e in events if e["type"] == "TOOL_CALL_START")
        assert start["toolCallName"] == "get_local_time"
        assert "TOOL_CALL_RESULT" not in types(events)
        assert outcome(events) == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}

        history = [
            user("what time is it?"),
            {
                "id": start["parentMessageId"],
                "role": "assistant",
                "content": text_of(events),
                "toolCalls": [
                    {
                        "id": start["toolCallId"],
                        "type": "function",
                        "function": {"name": "get_local_time", "arguments": "{}"},
                    }
                ],
            },
            {"id": "tm1", "role": "tool", "toolCallId": start["toolCallId"], "content": "09:30"},
        ]
        follow = await post(
            client, run_input("t", "r2", history, state=agent.state_of("t"), tools=[tool])
        )
        assert text_of(follow) == "Your local time is 09:30."
        assert outcome(follow) == {"type": "success"}

    with_agent(body)


def test_a_long_stream_of_many_deltas_arrives_whole() -> None:
    """``long N`` streams N deltas, in order, as one message. (How fast: `make bench`,
    section 3, against the parser floor of the same run; a wall-clock bound here would
    fail on a loaded machine, not on slow code.)"""

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        events = await post(client, run_input("t", "r1", [user("long 20000")]))
        assert types(events).count("TEXT_MESSAGE_CONTENT") == 20000
        assert text_of(events) == "".join(f"token{i} " for i in range(20000))

    with_agent(body)


def test_bad_requests_are_refused_before_any_stream() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        missing = await client.post("/", json={"threadId": "t", "messages": []})
        assert missing.status_code == 400 and "runId" in missing.json()["error"]
        not_json = await client.post(
            "/", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 400
        nan = await client.post("/", content=b'{"threadId":"t","runId":"r","messages":[],"x":NaN}')
        assert nan.status_code == 400
        deep = b'{"threadId":"t","runId":"r","messages":[],"state":' + b"[" * 100_000
        nested = await client.post("/", content=deep + b"]" * 100_000 + b"}")
        assert nested.status_code == 400 and "nested too deeply" in nested.json()["error"]
        for version in ("2.0", 1, "", "v1"):
            other = {"threadId": "t", "runId": "r", "messages": [], "protocolVersion": version}
            refused = await client.post("/", json=other)
            assert refused.status_code == 400 and "AG-UI 1.x" in refused.json()["error"]
        for version in ("1.0", "1.1"):
            ok = {"threadId": "t", "runId": "r", "messages": [], "protocolVersion": version}
            assert (await client.post("/", json=ok)).status_code == 200
        get = await client.get("/")
        assert get.status_code == 405
        assert get.headers.get_list("content-type") == ["text/plain; charset=utf-8"]
        assert missing.headers.get_list("content-type") == ["application/json"]
        assert agent.requests[0].body == {"threadId": "t", "messages": []}
        assert agent.requests[1].body is None and agent.requests[1].raw == b"{nope"

    with_agent(body)


def test_a_request_body_over_max_body_bytes_is_refused_with_413() -> None:
    head = b'{"threadId":"t","runId":"r","messages":[]}'

    assert MAX_BODY_BYTES == 8 * 1024 * 1024  # reference.md says 8 MiB

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        padded = head + b" " * (MAX_BODY_BYTES - len(head))  # exactly the limit: taken
        assert (await client.post("/", content=padded)).status_code == 200
        over = await client.post("/", content=padded + b" ")
        assert (over.status_code, over.text) == (413, "request body too large")

    with_agent(body)


class InProcess:
    """Calls the agent's ASGI app directly, as a server would: ``incoming`` is what
    ``receive`` returns in turn (then it waits, a client that stays); every message
    the app sends is kept with trio's clock at the time."""

    def __init__(self, agent: ReferenceAgent, *incoming: dict[str, Any]) -> None:
        self.app = AgentApp(agent)
        self.incoming = list(incoming)
        self.received = 0
        self.sent: list[tuple[float, dict[str, Any]]] = []

    async def receive(self) -> dict[str, Any]:
        self.received += 1
        if self.incoming:
            return self.incoming.pop(0)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append((trio.current_time(), message))

    def call(self, scope: dict[str, Any]) -> InProcess:
        async def main() -> None:
            with trio.fail_after(60):  # on the mock clock: a hang fails at once
                await self.app(scope, self.receive, self.send)  # type: ignore[arg-type]

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        return self


HTTP_POST = {"type": "http", "method": "POST", "path": "/", "headers": []}


def test_the_delay_fault_waits_before_the_first_event_then_between_events() -> None:
    """Fault.delay(before, between): ``before`` once, then ``between`` before each later
    frame, none before the first (the clock is trio's mock clock: exact times)."""
    agent = ReferenceAgent(clock=lambda: NOW)
    agent.faults.append(Fault.delay(before=0.5, between=0.25))
    raw = json.dumps(run_input("t", "r1", [user("a b c")])).encode()
    done = InProcess(agent, {"type": "http.request", "body": raw, "more_body": False}).call(
        HTTP_POST
    )
    frames = [(t, m) for t, m in done.sent if m["type"] == "http.response.body" and m["body"]]
    began, start = done.sent[0]
    assert began == 0.0 and start["type"] == "http.response.start" and start["status"] == 200
    assert len(frames) > 3
    assert [t for t, _ in frames] == [0.5 + 0.25 * k for k in range(len(frames))]
    assert done.sent[-1][1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_client_that_leaves_mid_body_is_neither_recorded_nor_answered() -> None:
    """The read ends at the disconnect (no second receive after it), and the half body
    is not taken for a malformed request."""
    agent = ReferenceAgent(clock=lambda: NOW)
    left = InProcess(
        agent,
        {"type": "http.request", "body": b'{"threadId": "t", "ru', "more_body": True},
        {"type": "http.disconnect"},
    ).call(HTTP_POST)
    assert left.received == 2 and left.sent == [] and agent.requests == []


def test_the_app_answers_the_lifespan_protocol_and_returns_at_shutdown() -> None:
    agent = ReferenceAgent(clock=lambda: NOW)
    life = InProcess(agent, {"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}).call(
        {"type": "lifespan"}
    )
    assert [m for _, m in life.sent] == [
        {"type": "lifespan.startup.complete"},
        {"type": "lifespan.shutdown.complete"},
    ]
    assert life.received == 2


def test_a_long_count_of_thousands_of_digits_is_capped_not_a_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """int() refuses a string of more than 4300 digits: the count is capped before it."""
    monkeypatch.setattr(agent_scenarios, "MAX_LONG", 3)

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        events = await post(client, run_input("t", "r1", [user("long " + "9" * 5000)]))
        assert types(events).count("TEXT_MESSAGE_CONTENT") == 3
        events = await post(client, run_input("t", "r2", [user("long 0002")]))
        assert text_of(events) == "token0 token1 "

    with_agent(body)


# -- resume ---------------------------------------------------------------------------------


def test_approved_resume_places_one_order_and_an_identical_retry_replays_it() -> None:
    """Server side of R-F2: identical resume decisions are idempotent."""

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        paused = await buy(client, "t")
        call = outcome(paused)["interrupts"][0]["toolCallId"]
        state = agent.state_of("t")
        resumed = await post(client, run_input("t", "r2", state=state, resume=APPROVE))
        assert resumed[0]["runId"] == "r2" and resumed[-1]["runId"] == "r2"
        result = next(e for e in resumed if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == call and result["content"] == "order placed"
        assert result["role"] == "tool"
        ops = [op for e in resumed if e["type"] == "STATE_DELTA" for op in e["delta"]]
        assert ops[0] == {"op": "replace", "path": "/turns", "value": 2}
        assert {"op": "add", "path": "/orders/-", "value": agent.orders["t"][0]} in ops
        assert text_of(resumed) == "Ordered 1 espresso machine, shipping to address-123."
        assert outcome(resumed) == {"type": "success"}
        assert agent.side_effects == 1 and agent.pending_interrupt_ids("t") == ()

        # The same decision again, entries reordered, with a fresh run id: same events.
        retry = await post(client, run_input("t", "r3", state=state, resume=APPROVE[::-1]))
        assert retry[0]["runId"] == "r3" and retry[-1]["runId"] == "r3"
        assert retry[1:-1] == resumed[1:-1] and outcome(retry) == outcome(resumed)
        assert agent.side_effects == 1 and agent.replays == 1

        # A different decision for the settled interrupts is stale.
        deny = [{**APPROVE[0], "payload": {"approved": False}}, APPROVE[1]]
        stale = await post(client, run_input("t", "r4", state=state, resume=deny))
        assert types(stale) == ["RUN_ERROR"]
        assert stale[0]["code"] == "NO_PENDING_INTERRUPT"

        # A new ordinary run forgets the record: the same ids now mean a new purchase.
        await post(client, run_input("t", "r5", [user("order another")], state=agent.state_of("t")))
        again = await post(client, run_input("t", "r6", state=agent.state_of("t"), resume=APPROVE))
        assert outcome(again) == {"type": "success"}
        assert agent.side_effects == 2 and agent.replays == 1

    with_agent(body)


def test_resume_retry_after_a_dropped_connection_places_one_order() -> None:
    """The server got and acted on the first attempt; the client only saw the line drop."""

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        await buy(client, "t")
        state = agent.state_of("t")
        agent.faults.append(Fault.drop(after_events=0))
        response, raw, error = await post_raw(
            client, run_input("t", "r2", state=state, resume=APPROVE)
        )
        assert response.status_code == 200 and raw == b"" and error is not None
        assert agent.side_effects == 1
        retry = await post(client, run_input("t", "r3", state=state, resume=APPROVE))
        assert text_of(retry) == "Ordered 1 espresso machine, shipping to address-123."
        assert agent.side_effects == 1 and agent.replays == 1

    with_agent(body)


@pytest.mark.parametrize(
    ("purchase", "address", "text", "result", "orders"),
    [
        (
            {"status": "resolved", "payload": {"approved": True, "quantity": 2}},
            {"status": "resolved", "payload": {"addressId": "address-456"}},
            "Ordered 2 espresso machines, shipping to address-456.",
            "order placed",
            1,
        ),
        (
            {"status": "resolved", "payload": {"approved": False}},
            {"status": "resolved", "payload": {"addressId": "address-123"}},
            "Okay, I cancelled the order for the espresso machine.",
            "order declined",
            0,
        ),
        (
            {"status": "cancelled"},
            {"status": "cancelled"},
            "Purchase abandoned.",
            "order abandoned",
            0,
        ),
        (
            {"status": "resolved", "payload": {"approved": True}},
            {"status": "cancelled"},
            "Purchase abandoned: no shipping address was given.",
            "order abandoned: no shipping address",
            0,
        ),
    ],
)
def test_resume_decisions(
    purchase: dict[str, Any], address: dict[str, Any], text: str, result: str, orders: int
) -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        await buy(client, "t")
        entries = [
            {"interruptId": "purchase", **purchase},
            {"interruptId": "shipping-address", **address},
        ]
        events = await post(client, run_input("t", "r2", state=agent.state_of("t"), resume=entries))
        assert text_of(events) == text
        assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"] == result
        assert agent.side_effects == orders
        assert agent.state_of("t")["cart"] == {}  # type: ignore[index]

    with_agent(body)


def _entry(iid: str, status: str = "resolved", **payload: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"interruptId": iid, "status": status}
    entry.update(payload)
    return entry


_OK_PURCHASE = _entry("purchase", payload={"approved": True})
_OK_ADDRESS = _entry("shipping-address", payload={"addressId": "address-123"})

RESUME_FAILURES: list[tuple[str, list[Any], str]] = [
    ("missing", [_OK_PURCHASE], "RESUME_MISSING"),
    ("unknown", [_OK_PURCHASE, _OK_ADDRESS, _entry("refund", payload={})], "RESUME_UNKNOWN"),
    ("duplicate", [_OK_PURCHASE, _OK_ADDRESS, _OK_ADDRESS], "RESUME_DUPLICATE"),
    (
        "duplicate, one without payload",
        [_OK_PURCHASE, _OK_ADDRESS, _entry("shipping-address")],
        "RESUME_DUPLICATE",
    ),
    ("no payload", [_entry("purchase"), _OK_ADDRESS], "RESUME_INVALID"),
    (
        "wrong type",
        [_entry("purchase", payload={"approved": "yes"}), _OK_ADDRESS],
        "RESUME_INVALID",
    ),
    (
        "quantity out of range",
        [_entry("purchase", payload={"approved": True, "quantity": 11}), _OK_ADDRESS],
        "RESUME_INVALID",
    ),
    (
        "boolean is no integer",
        [_entry("purchase", payload={"approved": True, "quantity": True}), _OK_ADDRESS],
        "RESUME_INVALID",
    ),
    (
        "extra property",
        [_entry("purchase", payload={"approved": True, "note": 1}), _OK_ADDRESS],
        "RESUME_INVALID",
    ),
    (
        "address not in enum",
        [_OK_PURCHASE, _entry("shipping-address", payload={"addressId": "address-999"})],
        "RESUME_INVALID",
    ),
    (
        "payload on cancelled",
        [_OK_PURCHASE, _entry("shipping-address", "cancelled", payload=None)],
        "RESUME_INVALID",
    ),
    ("bad status", [_entry("purchase", "approved"), _OK_ADDRESS], "RESUME_INVALID"),
    ("entry not an object", ["purchase", _OK_ADDRESS], "RESUME_INVALID"),
]


def test_resume_validation_codes_leave_the_checkpoint_pending() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        fresh = await post(client, run_input("nothing", "r1", resume=[_OK_PURCHASE]))
        assert types(fresh) == ["RUN_ERROR"]
        assert fresh[0]["code"] == "NO_PENDING_INTERRUPT"
        for index, (name, entries, code) in enumerate(RESUME_FAILURES):
            thread = f"t{index}"
            await buy(client, thread)
            state = agent.state_of(thread)
            events = await post(client, run_input(thread, "r2", state=state, resume=entries))
            assert types(events) == ["RUN_ERROR"], name
            assert events[0]["code"] == code, name
            assert "address-999" not in events[0]["message"]  # ids, never payloads
            assert agent.pending_interrupt_ids(thread) == ("purchase", "shipping-address"), name
            assert agent.state_of(thread) == state, name
            ok = await post(client, run_input(thread, "r3", state=state, resume=APPROVE))
            assert outcome(ok) == {"type": "success"}, name
        assert agent.side_effects == len(RESUME_FAILURES)

    with_agent(body)


def test_expired_interrupts_refuse_answers_but_accept_cancellation() -> None:
    clock = [NOW]

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        for thread in ("a", "b", "c"):
            await buy(client, thread, "buy, hurry")
        clock[0] = NOW + 59.999
        early = await post(client, run_input("a", "r2", state=agent.state_of("a"), resume=APPROVE))
        assert outcome(early) == {"type": "success"}
        clock[0] = NOW + 60  # now >= expiresAt
        late = await post(client, run_input("b", "r2", state=agent.state_of("b"), resume=APPROVE))
        assert late[0]["code"] == "INTERRUPT_EXPIRED"
        assert agent.pending_interrupt_ids("b") == ("purchase", "shipping-address")
        abandon = [_entry("purchase", "cancelled"), _entry("shipping-address", "cancelled")]
        moved_on = await post(
            client, run_input("c", "r2", state=agent.state_of("c"), resume=abandon)
        )
        assert text_of(moved_on) == "Purchase abandoned."
        assert agent.side_effects == 1

    with_agent(body, ReferenceAgent(clock=lambda: clock[0]))


def test_strict_expiry_policy_refuses_cancelling_an_expired_interrupt() -> None:
    clock = [NOW]

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        await buy(client, "t", "buy, hurry")
        clock[0] = NOW + 61
        abandon = [_entry("purchase", "cancelled"), _entry("shipping-address", "cancelled")]
        events = await post(client, run_input("t", "r2", state=agent.state_of("t"), resume=abandon))
        assert events[0]["code"] == "INTERRUPT_EXPIRED"

    with_agent(body, ReferenceAgent(clock=lambda: clock[0], accept_cancelled_expired=False))


# -- faults ---------------------------------------------------------------------------------


def test_refuse_answers_status_and_body_without_running_the_agent() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.refuse(503, body="busy", headers={"Retry-After": "1"}))
        response = await client.post("/", json=run_input("t", "r1", [user("buy")]))
        assert response.status_code == 503 and response.text == "busy"
        assert response.headers["retry-after"] == "1"
        assert agent.state_of("t") is None and agent.faults == []
        assert agent.requests[0].body["runId"] == "r1"
        ok = await post(client, run_input("t", "r2", [user("buy")]))
        assert outcome(ok)["type"] == "interrupt"

    with_agent(body)


def test_faults_keyed_by_thread_wait_for_their_thread() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.refuse(429, thread_id="b"))
        assert outcome(await post(client, run_input("a", "r1", [user("hi")])))["type"] == "success"
        assert len(agent.faults) == 1
        refused = await client.post("/", json=run_input("b", "r1", [user("hi")]))
        assert refused.status_code == 429 and agent.faults == []

    with_agent(body)


def test_drop_before_and_after_run_started() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.drop(after_events=0))
        response, raw, error = await post_raw(client, run_input("t", "r1", [user("hi")]))
        assert response.status_code == 200 and raw == b""
        assert isinstance(error, httpx.RemoteProtocolError)

        agent.faults.append(Fault.drop(after_events=3))
        _, raw, error = await post_raw(client, run_input("u", "r1", [user("hi")]))
        assert error is not None
        assert types(parse_sse(raw)) == ["RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START"]

    with_agent(body)


def test_run_error_fault_replaces_the_rest_of_the_stream() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.run_error("model overloaded", "OVERLOADED"))
        events = await post(client, run_input("t", "r1", [user("hi")]))
        assert events[1:] == [
            {"type": "RUN_ERROR", "message": "model overloaded", "code": "OVERLOADED"}
        ]
        agent.faults.append(Fault.run_error(after_events=0))
        first = await post(client, run_input("t", "r2", [user("hi")]))
        assert types(first) == ["RUN_ERROR"] and first[0]["code"] == "INJECTED"

    with_agent(body)


def test_delay_before_first_and_between_events() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.delay(before=0.3))
        started = trio.current_time()
        events = await post(client, run_input("t", "r1", [user("hi")]))
        assert trio.current_time() - started >= 0.3 and outcome(events)["type"] == "success"

        agent.faults.append(Fault.delay(between=0.02))
        started = trio.current_time()
        events = await post(client, run_input("u", "r1", [user("a b c")]))
        assert trio.current_time() - started >= 0.02 * (len(events) - 1)

    with_agent(body)


def test_stall_holds_the_stream_until_the_client_leaves() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.stall(after_events=1))
        async with client.stream("POST", "/", json=run_input("t", "r1", [user("hi")])) as response:
            chunks = response.aiter_bytes()
            first = await chunks.__anext__()
            assert types(parse_sse(first)) == ["RUN_STARTED"]
            with trio.move_on_after(0.2) as waited:
                await chunks.__anext__()
            assert waited.cancelled_caught
        # The server is still healthy after the client walked away.
        assert outcome(await post(client, run_input("t", "r2", [user("hi")])))["type"] == "success"

    with_agent(body)


def test_garbage_faults() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        agent.faults.append(Fault.malformed_json(after_events=1))
        raw = (await client.post("/", json=run_input("t", "r1", [user("hi")]))).content
        frames = [f for f in raw.split(b"\n\n") if f]
        assert json.loads(frames[0][6:])["type"] == "RUN_STARTED"
        with pytest.raises(json.JSONDecodeError):
            json.loads(frames[1][6:])

        agent.faults.append(Fault.wrong_content_type("text/html"))
        response = await client.post("/", json=run_input("u", "r1", [user("hi")]))
        assert response.headers["content-type"] == "text/html"
        assert types(parse_sse(response.content))[0] == "RUN_STARTED"

        agent.faults.append(Fault.oversize(size=2 * 1024 * 1024, after_events=1))
        raw = (await client.post("/", json=run_input("v", "r1", [user("hi")]))).content
        frames = [f for f in raw.split(b"\n\n") if f]
        assert len(frames[1]) > 2 * 1024 * 1024
        assert json.loads(frames[1][6:])["type"] == "TEXT_MESSAGE_CONTENT"
        assert json.loads(frames[-1][6:])["type"] == "RUN_FINISHED"

    with_agent(body)


def test_requests_are_recorded_with_body_and_headers() -> None:
    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        sent = run_input("t", "r1", [user("hi")])
        await client.post("/", json=sent, headers={"accept": "text/event-stream", "X-Trace": "abc"})
        (recorded,) = agent.requests
        assert recorded.method == "POST" and recorded.path == "/"
        assert recorded.body == sent
        assert recorded.headers["accept"] == "text/event-stream"
        assert recorded.headers["x-trace"] == "abc"

    with_agent(body)


# -- interop and entry point ---------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 'h\u00e9 "q" \\ \n \ud800'},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hmm"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": None, "delta": "x"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "\u00e9", "timestamp": 1},
    ],
    ids=["text", "reasoning", "number-delta", "null-id", "four-keys"],
)
def test_encode_frame_writes_an_event_as_its_json(event: dict[str, Any]) -> None:
    """The fast path for bare text deltas writes what the general one does, and leaves
    alone another event with the same keys (it keeps its own type) or other values."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    assert encode_frame(event) == b"data: " + data.encode("utf-8", "backslashreplace") + b"\n\n"


def test_encode_frame_refuses_a_value_json_has_not() -> None:
    with pytest.raises(ValueError):
        encode_frame({"type": "CUSTOM", "name": "n", "value": float("nan")})


def test_official_encoder_frames_parse_the_same_as_ours() -> None:
    encoder = EventEncoder()
    assert encoder.get_content_type() == "text/event-stream"

    async def body(agent: ReferenceAgent, client: httpx.AsyncClient) -> None:
        ours = await buy(client, "t")
        theirs = [
            RunStartedEvent(thread_id="t", run_id="r1", protocol_version="1.0"),
            TextMessageContentEvent(message_id=ours[3]["messageId"], delta=ours[3]["delta"]),
            RunFinishedEvent.model_validate(ours[-1]),
        ]
        encoded = "".join(encoder.encode(e) for e in theirs).encode()
        assert parse_sse(encoded) == [ours[0], ours[3], ours[-1]]
        # Where field order agrees, the bytes agree too.
        assert encoder.encode(theirs[0]).encode() == encode_frame(ours[0])
        assert encoder.encode(theirs[1]).encode() == encode_frame(ours[3])

    with_agent(body)


def test_main_prints_its_url_serves_and_stops_on_sigint() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "interlude.adapters.agent", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        response = httpx.post(url, json=run_input("t", "r1", [user("hi")]), timeout=5)
        assert text_of(parse_sse(response.content)) == "You said: hi"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
