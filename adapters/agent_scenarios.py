"""The reference agent's scripted behaviour: what it answers, what it remembers, how it fails.

Everything here is synchronous and deterministic, so one request is handled atomically under
trio and the same requests always produce the same events. Ids come from per-thread counters
prefixed with the thread id; time comes only from the injected clock. The HTTP side
(`interlude.adapters.agent`) turns the event lists into SSE and applies the faults.

The agent speaks AG-UI 1.0 by hand, as plain dicts, so it tests the client against the wire
rather than against a library that shares the client's assumptions.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

__all__ = [
    "ADDRESS_SCHEMA",
    "PURCHASE_SCHEMA",
    "BadRequest",
    "Event",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "ReferenceAgent",
    "check_request",
    "expiry_argument",
    "expiry_seconds",
    "matches_schema",
    "rfc3339",
]

Event = dict[str, Any]
"""One AG-UI event as it goes on the wire (camelCase keys)."""

MAX_EXPIRY_SECONDS = 366 * 24 * 3600.0
"""The longest lifetime the reference agent gives an interrupt: a year and a day."""


def expiry_seconds(value: object) -> float:
    """An interrupt lifetime in seconds: a finite number in (0, MAX_EXPIRY_SECONDS].

    Raises ValueError saying so (argparse shows it for ``--expires-in``).
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds <= MAX_EXPIRY_SECONDS:
        raise ValueError(
            f"an interrupt lifetime is a number of seconds above 0 and at most "
            f"{MAX_EXPIRY_SECONDS:.0f} (a year and a day), not {value!r}"
        )
    return seconds


def expiry_argument(text: str) -> float:
    """:func:`expiry_seconds` as an argparse ``type=``, so the reason shows in the error."""
    try:
        return expiry_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


PURCHASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""Approve with edits: ``approved`` is required, ``quantity`` may change the order."""

ADDRESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"addressId": {"type": "string", "enum": ["address-123", "address-456"]}},
    "required": ["addressId"],
    "additionalProperties": False,
}

ITEM = "espresso machine"
PRICE = 249
LOCAL_TIME_TOOL = "get_local_time"
MAX_LONG = 1_000_000
"""Bound on ``long N`` so a typo cannot make the server build an endless stream."""

_BUY_WORDS = re.compile(r"\b(buy|order|purchase|several|batch)\b", re.IGNORECASE)
_ADDRESS_WORD = re.compile(r"\baddress\b", re.IGNORECASE)
_TIME_WORD = re.compile(r"\btime\b", re.IGNORECASE)
_HURRY_WORD = re.compile(r"\bhurry\b", re.IGNORECASE)
_LONG = re.compile(r"\blong\s+(\d+)\b", re.IGNORECASE)
_WORDS = re.compile(r"\S+\s*|\s+")


class BadRequest(ValueError):
    """The body is not a RunAgentInput the agent can run: answered with HTTP 400."""


class RecordedRequest(NamedTuple):
    """One request as received: parsed JSON body (None if unparseable) and lower-cased headers."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


FaultKind = Literal[
    "refuse",
    "drop",
    "stall",
    "run_error",
    "delay",
    "malformed_json",
    "wrong_content_type",
    "oversize",
]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour for one request, consumed by the first request it matches.

    ``refuse`` answers before the agent sees the request (nothing happens server-side). Every
    other kind shapes the delivery of a run the agent really performed, as when a real server
    commits and then fails: side effects happen, and an identical resume retry is answered
    from the idempotency record. ``after_events`` counts SSE frames sent before the fault
    strikes. ``thread_id`` restricts the fault to requests on that thread.
    """

    kind: FaultKind
    thread_id: str | None = None
    status: int = 200
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    after_events: int = 0
    message: str = ""
    code: str = ""
    before: float = 0.0
    between: float = 0.0
    content_type: str = ""
    size: int = 0

    @classmethod
    def refuse(
        cls,
        status: int = 503,
        body: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        thread_id: str | None = None,
    ) -> Fault:
        """Answer with this status and body instead of a stream; the agent never runs."""
        extra = tuple((headers or {}).items())
        return cls("refuse", thread_id, status=status, body=body, headers=extra)

    @classmethod
    def drop(cls, after_events: int = 0, *, thread_id: str | None = None) -> Fault:
        """Close the connection mid-body after N frames (0: right after the 200 headers)."""
        return cls("drop", thread_id, after_events=after_events)

    @classmethod
    def stall(cls, after_events: int = 1, *, thread_id: str | None = None) -> Fault:
        """Keep the stream open, silent, after N frames until the client leaves."""
        return cls("stall", thread_id, after_events=after_events)

    @classmethod
    def run_error(
        cls,
        message: str = "injected failure",
        code: str = "INJECTED",
        *,
        after_events: int = 1,
        thread_id: str | None = None,
    ) -> Fault:
        """Send N frames of the run, then ``RUN_ERROR`` instead of the rest."""
        return cls("run_error", thread_id, after_events=after_events, message=message, code=code)

    @classmethod
    def delay(
        cls, before: float = 0.0, between: float = 0.0, *, thread_id: str | None = None
    ) -> Fault:
        """Sleep ``before`` seconds before the first frame and ``between`` between frames."""
        return cls("delay", thread_id, before=before, between=between)

    @classmethod
    def malformed_json(cls, after_events: int = 1, *, thread_id: str | None = None) -> Fault:
        """Insert a ``data:`` frame that is not JSON after N frames."""
        return cls("malformed_json", thread_id, after_events=after_events)

    @classmethod
    def wrong_content_type(
        cls, content_type: str = "text/html; charset=utf-8", *, thread_id: str | None = None
    ) -> Fault:
        """Serve the ordinary stream under another content type."""
        return cls("wrong_content_type", thread_id, content_type=content_type)

    @classmethod
    def oversize(
        cls, size: int = 17 * 1024 * 1024, after_events: int = 1, *, thread_id: str | None = None
    ) -> Fault:
        """Insert one well-formed frame whose data is about ``size`` bytes, after N frames:
        over the client's ``max_frame_bytes`` it is refused as too big; under it, it is
        content for a message never started, so the run fails all the same."""
        return cls("oversize", thread_id, after_events=after_events, size=size)


@dataclass
class _Question:
    reason: str
    message: str
    schema: dict[str, Any]
    expires_at: float | None


@dataclass
class _Checkpoint:
    """What a paused run waits for: the server's own record, never the client's word."""

    kind: Literal["purchase", "address"]
    questions: dict[str, _Question]
    tool_call_id: str | None = None


DecisionKey = tuple[tuple[str, str, str], ...]
"""Sorted (interrupt id, status, payload as canonical JSON or "" when absent) triples."""


@dataclass
class _Thread:
    state: dict[str, Any] | None = None
    """What the client holds after our last run; None until the first run."""
    seq: int = 0
    checkpoint: _Checkpoint | None = None
    replays: dict[DecisionKey, list[Event]] = field(default_factory=dict)
    """Accepted resume decisions and their events, kept until the next ordinary run."""
    awaiting_tools: dict[str, str] = field(default_factory=dict)


def _initial_state() -> dict[str, Any]:
    return {"turns": 0, "orders": [], "cart": {}, "address": None}


_MANAGED_TYPES: dict[str, tuple[type, ...]] = {
    "turns": (int,),
    "orders": (list,),
    "cart": (dict,),
    "address": (str, type(None)),
}


def _adopt(incoming: Any, known: dict[str, Any]) -> dict[str, Any]:
    """Take the client's state, keeping our own keys where the client dropped or broke them."""
    if not isinstance(incoming, dict):
        return json.loads(json.dumps(known))  # type: ignore[no-any-return]
    base: dict[str, Any] = json.loads(json.dumps(incoming))
    for key, types in _MANAGED_TYPES.items():
        value = base.get(key)
        if key not in base or not isinstance(value, types) or isinstance(value, bool):
            base[key] = json.loads(json.dumps(known[key]))
    return base


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rfc3339(epoch: float) -> str:
    """A UTC RFC 3339 timestamp with milliseconds and a ``Z`` zone."""
    text = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def matches_schema(value: Any, schema: Mapping[str, Any]) -> bool:
    """The subset of JSON Schema the agent's own schemas use, checked strictly."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return False
        props: Mapping[str, Any] = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", ())):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in value):
            return False
        if not all(matches_schema(value[k], props[k]) for k in value if k in props):
            return False
    elif kind == "boolean":
        if not isinstance(value, bool):
            return False
    elif kind == "integer":
        is_int = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not is_int:
            return False
    elif kind == "string" and not isinstance(value, str):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "minimum" in schema and value < schema["minimum"]:
        return False
    return not ("maximum" in schema and value > schema["maximum"])


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _last_user_text(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return None


def _ids(request: Mapping[str, Any]) -> tuple[str, str]:
    thread_id, run_id = request.get("threadId"), request.get("runId")
    if not isinstance(thread_id, str) or not thread_id:
        raise BadRequest("threadId must be a non-empty string")
    if not isinstance(run_id, str) or not run_id:
        raise BadRequest("runId must be a non-empty string")
    return thread_id, run_id


def check_request(request: Any) -> None:
    """Reject what is not a RunAgentInput before any stream starts."""
    if not isinstance(request, dict):
        raise BadRequest("the body must be a JSON object")
    _ids(request)
    version = request.get("protocolVersion")
    if version is not None and (not isinstance(version, str) or version.split(".")[0] != "1"):
        shown = json.dumps(version)[:40]
        raise BadRequest(f"protocolVersion {shown} is not supported: this agent speaks AG-UI 1.x")
    if not isinstance(request.get("messages"), list):
        raise BadRequest("messages must be an array")
    for name in ("tools", "context", "resume"):
        if request.get(name) is not None and not isinstance(request[name], list):
            raise BadRequest(f"{name} must be an array when present")


class _Run:
    """Accumulates one run's events and keeps the thread's state in step with them."""

    def __init__(self, thread_id: str, run_id: str, thread: _Thread) -> None:
        self.thread_id, self.run_id, self.thread = thread_id, run_id, thread
        self.events: list[Event] = [
            {
                "type": "RUN_STARTED",
                "threadId": thread_id,
                "runId": run_id,
                "protocolVersion": "1.0",
            }
        ]

    def new_id(self, kind: str) -> str:
        self.thread.seq += 1
        return f"{self.thread_id}-{kind}{self.thread.seq}"

    def begin_turn(self, incoming: Any) -> None:
        """Count the turn: a snapshot when the client's state is not what we last sent."""
        known = self.thread.state
        if known is not None and incoming == known:
            state = known
            state["turns"] += 1
            self.events.append(
                {
                    "type": "STATE_DELTA",
                    "delta": [{"op": "replace", "path": "/turns", "value": state["turns"]}],
                }
            )
        else:
            state = _adopt(incoming, known if known is not None else _initial_state())
            state["turns"] += 1
            self.thread.state = state
            self.events.append(
                {"type": "STATE_SNAPSHOT", "snapshot": json.loads(_canonical(state))}
            )

    def replace(self, key: str, value: Any) -> None:
        assert self.thread.state is not None
        self.thread.state[key] = value
        op = {"op": "replace", "path": f"/{key}", "value": json.loads(_canonical(value))}
        self.events.append({"type": "STATE_DELTA", "delta": [op]})

    def text(self, chunks: Sequence[str]) -> str:
        mid = self.new_id("msg")
        self.events.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        self.events.extend(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": c} for c in chunks if c
        )
        self.events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        return mid

    def say(self, sentence: str) -> str:
        return self.text(_WORDS.findall(sentence))

    def tool_call(self, name: str, args_chunks: Sequence[str], parent: str) -> str:
        call = self.new_id("call")
        self.events.append(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": name,
                "parentMessageId": parent,
            }
        )
        self.events.extend(
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": c} for c in args_chunks
        )
        self.events.append({"type": "TOOL_CALL_END", "toolCallId": call})
        return call

    def tool_result(self, call: str, content: str) -> None:
        self.events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": self.new_id("result"),
                "toolCallId": call,
                "content": content,
                "role": "tool",
            }
        )

    def finish(self, outcome: dict[str, Any]) -> list[Event]:
        self.events.append(
            {
                "type": "RUN_FINISHED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "outcome": outcome,
            }
        )
        return self.events


class ReferenceAgent:
    """A scripted AG-UI 1.0 agent that pauses for a human, with the server-side checkpoint.

    It keeps, per thread: the shared state document, the pending checkpoint (interrupt ids,
    schemas, expiry, the original tool call), accepted resume decisions for idempotent
    retries, and the frontend tool calls it waits on. ``faults``, ``requests``, ``orders``
    and ``replays`` are for tests to steer and inspect.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        expires_in: float | None = None,
        hurry_expires_in: float = 60.0,
        accept_cancelled_expired: bool = True,
    ) -> None:
        self.clock = clock
        self.expires_in = expires_in if expires_in is None else expiry_seconds(expires_in)
        self.hurry_expires_in = expiry_seconds(hurry_expires_in)
        self.accept_cancelled_expired = accept_cancelled_expired
        """AG-UI 1.0 lets a consumer move past an expired interrupt by cancelling it."""
        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.orders: dict[str, list[dict[str, Any]]] = {}
        """Orders placed, per thread: the side effect idempotency protects."""
        self.replays = 0
        """Resume requests answered from the idempotency record."""
        self._threads: dict[str, _Thread] = {}

    @property
    def side_effects(self) -> int:
        return sum(len(placed) for placed in self.orders.values())

    def state_of(self, thread_id: str) -> dict[str, Any] | None:
        """The state document the agent believes the client holds (a copy)."""
        thread = self._threads.get(thread_id)
        return (
            None if thread is None or thread.state is None else json.loads(_canonical(thread.state))
        )

    def pending_interrupt_ids(self, thread_id: str) -> tuple[str, ...]:
        thread = self._threads.get(thread_id)
        if thread is None or thread.checkpoint is None:
            return ()
        return tuple(thread.checkpoint.questions)

    def take_fault(self, thread_id: str | None) -> Fault | None:
        """Remove and return the first fault for this request (unkeyed or keyed to its thread)."""
        for index, fault in enumerate(self.faults):
            if fault.thread_id is None or fault.thread_id == thread_id:
                return self.faults.pop(index)
        return None

    def run(self, request: Mapping[str, Any]) -> list[Event]:
        """Handle one RunAgentInput (camelCase dict) and return every event of its stream."""
        check_request(request)
        thread_id, run_id = _ids(request)
        thread = self._threads.setdefault(thread_id, _Thread())
        out = _Run(thread_id, run_id, thread)
        resume = request.get("resume")
        if resume:
            return self._resume(out, request, resume)
        thread.checkpoint = None  # an ordinary run abandons whatever was pending
        thread.replays.clear()
        out.begin_turn(request.get("state"))
        messages: list[Any] = request["messages"]
        last = messages[-1] if messages else None
        if isinstance(last, dict) and last.get("role") == "tool":
            return self._tool_follow_up(out, last)
        text = _last_user_text(messages)
        if text is None:
            out.say("Hello! Tell me what you need.")
            return out.finish({"type": "success"})
        if long := _LONG.search(text):
            digits = long.group(1).lstrip("0") or "0"  # int() refuses over 4300 digits
            count = MAX_LONG if len(digits) > len(str(MAX_LONG)) else min(int(digits), MAX_LONG)
            out.text([f"token{i} " for i in range(count)])
            return out.finish({"type": "success"})
        if _BUY_WORDS.search(text):
            return self._purchase(out, text)
        if _ADDRESS_WORD.search(text):
            return self._address(out, text)
        if _TIME_WORD.search(text) and _offers_tool(request.get("tools"), LOCAL_TIME_TOOL):
            return self._local_time(out)
        out.say(f"You said: {text}")
        return out.finish({"type": "success"})

    # scenarios

    def _expiry(self, text: str) -> float | None:
        ttl = self.hurry_expires_in if _HURRY_WORD.search(text) else self.expires_in
        if ttl is None:
            return None
        return math.floor((self.clock() + ttl) * 1000) / 1000  # exactly what the client reads

    def _interrupt(self, iid: str, q: _Question, **extra: Any) -> dict[str, Any]:
        wire: dict[str, Any] = {"id": iid, "reason": q.reason, "message": q.message, **extra}
        wire["responseSchema"] = json.loads(_canonical(q.schema))
        if q.expires_at is not None:
            wire["expiresAt"] = rfc3339(q.expires_at)
        return wire

    def _purchase(self, out: _Run, text: str) -> list[Event]:
        said = out.say(f"I can order the {ITEM} for you.")
        args = _canonical({"item": ITEM, "quantity": 1, "price": PRICE})
        half = len(args) // 2
        call = out.tool_call("place_order", [args[:half], args[half:]], parent=said)
        out.replace("cart", {"item": ITEM, "quantity": 1, "price": PRICE})
        expires = self._expiry(text)
        purchase = _Question("tool_approval", "Approve this purchase?", PURCHASE_SCHEMA, expires)
        address = _Question("input_required", "Which address?", ADDRESS_SCHEMA, expires)
        out.thread.checkpoint = _Checkpoint(
            "purchase", {"purchase": purchase, "shipping-address": address}, call
        )
        meta = {"item": ITEM, "price": PRICE, "currency": "USD"}
        interrupts = [
            self._interrupt("purchase", purchase, toolCallId=call, metadata=meta),
            self._interrupt("shipping-address", address),
        ]
        return out.finish({"type": "interrupt", "interrupts": interrupts})

    def _address(self, out: _Run, text: str) -> list[Event]:
        out.say("I need a shipping address.")
        address = _Question("input_required", "Which address?", ADDRESS_SCHEMA, self._expiry(text))
        out.thread.checkpoint = _Checkpoint("address", {"shipping-address": address})
        interrupts = [self._interrupt("shipping-address", address)]
        return out.finish({"type": "interrupt", "interrupts": interrupts})

    def _local_time(self, out: _Run) -> list[Event]:
        said = out.say("Let me check your local time.")
        call = out.tool_call(LOCAL_TIME_TOOL, ["{}"], parent=said)
        out.thread.awaiting_tools[call] = LOCAL_TIME_TOOL
        return out.finish({"type": "success", "pendingToolCallIds": [call]})

    def _tool_follow_up(self, out: _Run, message: dict[str, Any]) -> list[Event]:
        call = message.get("toolCallId")
        result = _text_of(message.get("content"))
        if isinstance(call, str) and out.thread.awaiting_tools.pop(call, None) is not None:
            out.say(f"Your local time is {result}.")
        else:
            out.say("Thanks, I have the tool result.")
        return out.finish({"type": "success"})

    # resume

    def _resume(self, out: _Run, request: Mapping[str, Any], resume: list[Any]) -> list[Event]:
        thread = out.thread
        shape = _entry_problem(resume)
        if shape is not None:
            return _failed(out, "RESUME_INVALID", shape)
        key: DecisionKey = tuple(
            sorted(
                (
                    e["interruptId"],
                    e["status"],
                    # "" for no payload (JSON text is never empty): None would not sort
                    # against a string when an id repeats, with and without a payload.
                    _canonical(e["payload"]) if "payload" in e else "",
                )
                for e in resume
            )
        )
        recorded = thread.replays.get(key)
        if recorded is not None:
            self.replays += 1
            return [out.events[0], *recorded[1:-1], {**recorded[-1], "runId": out.run_id}]
        checkpoint = thread.checkpoint
        if checkpoint is None:
            return _failed(out, "NO_PENDING_INTERRUPT", "there is no pending interrupt to resume")
        failure = self._validate(checkpoint, resume)
        if failure is not None:
            return _failed(out, *failure)
        thread.checkpoint = None
        answers = {e["interruptId"]: e for e in resume}
        out.begin_turn(request.get("state"))
        if checkpoint.kind == "purchase":
            self._settle_purchase(out, checkpoint, answers)
        else:
            self._settle_address(out, answers["shipping-address"])
        events = out.finish({"type": "success"})
        thread.replays[key] = copy.deepcopy(events)  # a copy callers cannot reach
        return events

    def _validate(
        self, checkpoint: _Checkpoint, resume: list[dict[str, Any]]
    ) -> tuple[str, str] | None:
        ids = [e["interruptId"] for e in resume]
        pending = checkpoint.questions
        if dupes := sorted({i for i in ids if ids.count(i) > 1}):
            return "RESUME_DUPLICATE", f"duplicate resume entries for: {', '.join(dupes)}"
        if unknown := [i for i in ids if i not in pending]:
            return "RESUME_UNKNOWN", f"no pending interrupt with id: {', '.join(unknown)}"
        if missing := [i for i in pending if i not in ids]:
            return "RESUME_MISSING", f"resume is missing answers for: {', '.join(missing)}"
        now = self.clock()
        expired = [
            e["interruptId"]
            for e in resume
            if (deadline := pending[e["interruptId"]].expires_at) is not None
            and now >= deadline
            and not (self.accept_cancelled_expired and e["status"] == "cancelled")
        ]
        if expired:
            return "INTERRUPT_EXPIRED", f"interrupt expired: {', '.join(expired)}"
        for entry in resume:
            iid = entry["interruptId"]
            if entry["status"] == "cancelled":
                if "payload" in entry:
                    return "RESUME_INVALID", f"a cancelled entry carries a payload: {iid}"
            elif "payload" not in entry:
                return "RESUME_INVALID", f"a resolved entry needs a payload: {iid}"
            elif not matches_schema(entry["payload"], pending[iid].schema):
                return "RESUME_INVALID", f"payload does not match the response schema: {iid}"
        return None

    def _settle_purchase(
        self, out: _Run, checkpoint: _Checkpoint, answers: dict[str, dict[str, Any]]
    ) -> None:
        call = checkpoint.tool_call_id
        assert call is not None
        decision, where = answers["purchase"], answers["shipping-address"]
        approved = decision["status"] == "resolved" and decision["payload"]["approved"] is True
        if not approved:
            denied = decision["status"] == "resolved"
            out.tool_result(call, "order declined" if denied else "order abandoned")
            out.replace("cart", {})
            out.say(
                f"Okay, I cancelled the order for the {ITEM}." if denied else "Purchase abandoned."
            )
            return
        if where["status"] == "cancelled":
            out.tool_result(call, "order abandoned: no shipping address")
            out.replace("cart", {})
            out.say("Purchase abandoned: no shipping address was given.")
            return
        quantity = int(decision["payload"].get("quantity", 1))
        address_id: str = where["payload"]["addressId"]
        placed = self.orders.setdefault(out.thread_id, [])
        order = {
            "id": f"{out.thread_id}-order{len(placed) + 1}",
            "item": ITEM,
            "quantity": quantity,
            "price": PRICE,
            "addressId": address_id,
        }
        placed.append(order)
        out.tool_result(call, "order placed")
        state = out.thread.state
        assert state is not None
        state["orders"].append(order)
        state["cart"], state["address"] = {}, address_id
        out.events.append(
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "add", "path": "/orders/-", "value": dict(order)},
                    {"op": "replace", "path": "/cart", "value": {}},
                    {"op": "replace", "path": "/address", "value": address_id},
                ],
            }
        )
        noun = ITEM if quantity == 1 else f"{ITEM}s"
        out.say(f"Ordered {quantity} {noun}, shipping to {address_id}.")

    def _settle_address(self, out: _Run, answer: dict[str, Any]) -> None:
        if answer["status"] == "cancelled":
            out.say("Okay, the shipping address stays as it was.")
            return
        address_id: str = answer["payload"]["addressId"]
        out.replace("address", address_id)
        out.say(f"Shipping address set to {address_id}.")


def _offers_tool(tools: Any, name: str) -> bool:
    return isinstance(tools, list) and any(
        isinstance(tool, dict) and tool.get("name") == name for tool in tools
    )


def _entry_problem(resume: list[Any]) -> str | None:
    for index, entry in enumerate(resume):
        if not isinstance(entry, dict) or not isinstance(entry.get("interruptId"), str):
            return f"resume entry {index} has no string interruptId"
        if entry.get("status") not in ("resolved", "cancelled"):
            return f"resume entry {index} has an unknown status"
        if entry.get("metadata") is not None and not isinstance(entry["metadata"], dict):
            return f"resume entry {index} has metadata that is not an object"
    return None


def _failed(out: _Run, code: str, message: str) -> list[Event]:
    """A lone ``RUN_ERROR`` instead of ``RUN_STARTED``: the resume was not taken.

    Answering before the acknowledgement lets a client keep the batch and fix
    its answers (R-F4); after a RUN_STARTED it would have to start a new thread.
    """
    return [{"type": "RUN_ERROR", "message": message, "code": code}]
