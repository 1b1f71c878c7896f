"""Scripted answers for the fake agent: events, faults, and builders for both.

A handler receives each :class:`Request` and returns a :class:`Reply`. Events
in a reply are wire JSON objects (``{"type": "RUN_STARTED", ...}``), typed
events from ``interlude.core.wire``, or raw strings sent as the frame's data
as they are (to script malformed frames).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from interlude.core.errors import ProtocolError, TransportError, UsageError
from interlude.core.wire.codec import wire_key
from interlude.core.wire.events import SuccessOutcome
from interlude.core.wire.run_input import Interrupt, RunAgentInput

__all__ = [
    "Reply",
    "Request",
    "drop",
    "finished",
    "held",
    "interrupted",
    "refuse",
    "reply",
    "run_error",
    "started",
    "state_delta",
    "state_snapshot",
    "text",
    "tool_call",
]


@attrs.frozen
class Request:
    """One request as it went out: the exact body text and its parsed form."""

    attempt: int
    run_input: RunAgentInput
    body: str

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def thread_id(self) -> str:
        return self.run_input.thread_id

    @property
    def run_id(self) -> str:
        return self.run_input.run_id

    @property
    def resume(self) -> list[dict[str, Any]] | None:
        """The ``resume`` entries in wire form, or None for an ordinary run."""
        value = self.json.get("resume")
        return value if value is None else list(value)

    @property
    def tool_results(self) -> dict[str, str]:
        """Each tool message the request carries, by its call id: what local tools
        returned (a failed tool's reads ``"Error: TypeName: message"``)."""
        return {
            m["toolCallId"]: m["content"]
            for m in self.json["messages"]
            if m.get("role") == "tool" and "toolCallId" in m
        }


@attrs.frozen(kw_only=True)
class Reply:
    """What the fake agent answers one request with.

    ``fail_before_send``: the request fails before any event (like a refused
    connection or an HTTP error). ``fail_after``: after that many events the
    transport fails with ``failure``. Without a terminal event among
    ``events`` the stream simply ends (a truncated run). ``hold``: events are
    delivered only as the test releases them (``FakeDriver.release``).
    """

    events: tuple[Any, ...] = ()
    fail_before_send: TransportError | ProtocolError | None = None
    fail_after: int | None = None
    failure: TransportError | ProtocolError = attrs.field(
        factory=lambda: TransportError("the connection dropped", retryable=True)
    )
    hold: bool = False


def reply(*events: Any, hold: bool = False) -> Reply:
    """Answer with these events, then end the stream."""
    return Reply(events=_flatten(events), hold=hold)


def held(*events: Any) -> Reply:
    """Answer with these events, one per ``release``."""
    return Reply(events=_flatten(events), hold=True)


def refuse(status: int = 503, body: str = "", *, retry_after: float | None = None) -> Reply:
    """Fail before the stream, as an HTTP error: 5xx and 429 retryable, other 4xx not;
    ``retry_after`` as the seconds of a ``Retry-After`` header."""
    error = TransportError.from_status(status, body, retry_after=retry_after)
    return Reply(fail_before_send=error)


def drop(*events: Any, error: TransportError | ProtocolError | None = None) -> Reply:
    """Send these events, then fail the transport (a dropped connection by default)."""
    flat = _flatten(events)
    if error is None:
        return Reply(events=flat, fail_after=len(flat))
    return Reply(events=flat, fail_after=len(flat), failure=error)


def _flatten(events: Iterable[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for e in events:
        if isinstance(e, list | tuple):
            out.extend(e)
        else:
            out.append(e)
    return tuple(out)


# -- event builders (wire JSON) -------------------------------------------------------


def started(req: Request) -> dict[str, Any]:
    """The RUN_STARTED that acknowledges ``req``."""
    return {"type": "RUN_STARTED", "threadId": req.thread_id, "runId": req.run_id}


def finished(req: Request, outcome: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """RUN_FINISHED closing ``req``; ``outcome`` in wire form (camelCase keys).

    A snake_case key that AG-UI spells in camelCase (``pending_tool_call_ids``, or an
    interrupt's ``expires_at``) raises ``UsageError``: a reader would strip it.
    """
    event: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": req.thread_id, "runId": req.run_id}
    if outcome is not None:
        event["outcome"] = _wire_object(outcome, _OUTCOME_KEYS, "finished(): the outcome")
        interrupts = event["outcome"].get("interrupts")
        if isinstance(interrupts, list | tuple):
            event["outcome"]["interrupts"] = [_interrupt(it, "finished()") for it in interrupts]
    return event


def interrupted(req: Request, *interrupts: Mapping[str, Any]) -> dict[str, Any]:
    """RUN_FINISHED with an interrupt outcome holding ``interrupts`` (wire form).

    Keys are AG-UI's camelCase (``expiresAt``, ``responseSchema``, ``toolCallId``); the
    snake_case form of one raises ``UsageError`` naming the key to write instead.
    """
    wire = [_interrupt(it, "interrupted()") for it in interrupts]
    return finished(req, {"type": "interrupt", "interrupts": wire})


def _snake_keys(cls: type) -> dict[str, str]:
    """The snake_case names of ``cls``'s wire fields that the wire spells otherwise."""
    return {a.name: wire_key(a.name) for a in attrs.fields(cls) if a.init and "_" in a.name}


_INTERRUPT_KEYS = _snake_keys(Interrupt)
_OUTCOME_KEYS = _snake_keys(SuccessOutcome)


def _interrupt(value: Any, where: str) -> Any:
    if not isinstance(value, Mapping):
        return value  # not an object: left to the reader, which says so
    name = f"interrupt {value['id']!r}" if isinstance(value.get("id"), str) else "an interrupt"
    return _wire_object(value, _INTERRUPT_KEYS, f"{where}: {name}")


def _wire_object(value: Mapping[str, Any], snake: Mapping[str, str], what: str) -> dict[str, Any]:
    """``value`` as a dict, once no key is the snake_case form of a wire key."""
    for key in value:
        if key in snake:
            raise UsageError(
                f"{what} has the key {key!r}: write {snake[key]!r}. The builders write "
                "AG-UI wire JSON as given, in camelCase, and a reader strips a key "
                "AG-UI does not define"
            )
    return dict(value)


def run_error(message: str, code: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "RUN_ERROR", "message": message}
    if code is not None:
        event["code"] = code
    return event


def text(message_id: str, content: str, *, chunks: int = 1) -> list[dict[str, Any]]:
    """An assistant text message streamed in ``chunks`` deltas."""
    size = max(1, -(-len(content) // chunks))
    deltas = [content[n : n + size] for n in range(0, len(content), size)] or [""]
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": d}
            for d in deltas
            if d
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def tool_call(
    tool_call_id: str, name: str, arguments: Any, *, parent_message_id: str | None = None
) -> list[dict[str, Any]]:
    """A tool call with its arguments (JSON-encoded unless already a string)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    start: dict[str, Any] = {
        "type": "TOOL_CALL_START",
        "toolCallId": tool_call_id,
        "toolCallName": name,
    }
    if parent_message_id is not None:
        start["parentMessageId"] = parent_message_id
    return [
        start,
        {"type": "TOOL_CALL_ARGS", "toolCallId": tool_call_id, "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": tool_call_id},
    ]


def state_snapshot(snapshot: Any) -> dict[str, Any]:
    return {"type": "STATE_SNAPSHOT", "snapshot": snapshot}


def state_delta(*ops: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "STATE_DELTA", "delta": [dict(op) for op in ops]}
