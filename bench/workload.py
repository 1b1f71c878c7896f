"""Deterministic AG-UI wire streams for the benchmarks, as lines of JSON text.

Every generator returns the exact ``data`` strings of the SSE frames an agent
would send, so the same list feeds the pipeline under test and the
``json.loads`` floor it is compared with.
"""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = [
    "KINDS",
    "LOCAL_TOOL",
    "STATE_ITEMS",
    "content_mix",
    "dumps",
    "finished_line",
    "kind_stream",
    "local_calls",
    "long_text",
    "many_messages",
    "started_line",
    "state_document",
    "state_snapshot_line",
]

STATE_ITEMS = 2000
"""Objects in the shared state's ``items`` array (about 500 B each, 1 MB in all)."""

TEXT_DELTAS = 20
ARG_DELTAS = 10
SNAPSHOT_EVERY = 5000
SNAPSHOT_MESSAGES = 50
REMOTE_TOOL = "search_catalog"
"""A tool the agent runs itself: the resource never runs it locally."""

_SENTENCE = (
    "the order ships from the warehouse near you and arrives within three business days "
    "please confirm the address and the quantity before we place it with the supplier"
)
_WORDS = tuple(_SENTENCE.split(" "))


def dumps(obj: Any) -> str:
    """Compact JSON, as agents write it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def started_line(thread_id: str, run_id: str) -> str:
    return dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})


def finished_line(thread_id: str, run_id: str, outcome: dict[str, Any] | None = None) -> str:
    event: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    if outcome is not None:
        event["outcome"] = outcome
    return dumps(event)


def state_document(items: int = STATE_ITEMS) -> dict[str, Any]:
    """About 1 MB of JSON: ``{"items": [...], "meta": {...}}``, each item about 500 B."""
    rng = random.Random(7)
    out = []
    for n in range(items):
        out.append(
            {
                "id": f"item-{n:05d}",
                "name": f"Product {n} {rng.choice(_WORDS)} {rng.choice(_WORDS)}",
                "status": rng.choice(("open", "reserved", "shipped")),
                "price": round(rng.uniform(1, 500), 2),
                "quantity": rng.randint(1, 20),
                "tags": [rng.choice(_WORDS) for _ in range(3)],
                "owner": {"id": f"user-{rng.randint(1, 999)}", "name": rng.choice(_WORDS)},
                "description": " ".join(rng.choice(_WORDS) for _ in range(42)),
                "updatedAt": "2027-01-01T00:00:00Z",
            }
        )
    counters = {f"c{k}": 0 for k in range(50)}
    meta = {"version": 1, "updatedAt": "2027-01-01T00:00:00Z", "counters": counters}
    return {"items": out, "meta": meta}


def state_snapshot_line(doc: dict[str, Any]) -> str:
    return dumps({"type": "STATE_SNAPSHOT", "snapshot": doc})


def _text_deltas(rng: random.Random, count: int) -> list[str]:
    return [f"{rng.choice(_WORDS)} " for _ in range(count)]


def _split(text: str, parts: int) -> list[str]:
    size = -(-len(text) // parts)
    return [text[n : n + size] for n in range(0, len(text), size)]


def _patch(rng: random.Random, serial: int) -> list[dict[str, Any]]:
    """A small JSON Patch on nested paths: replaces and adds."""
    k = rng.randrange(STATE_ITEMS)
    kind = serial % 4
    if kind == 0:
        status = rng.choice(("open", "reserved", "shipped"))
        return [
            {"op": "replace", "path": f"/items/{k}/status", "value": status},
            {"op": "replace", "path": f"/items/{k}/updatedAt", "value": f"t{serial}"},
        ]
    if kind == 1:
        return [{"op": "replace", "path": f"/items/{k}/owner/name", "value": f"owner {serial}"}]
    if kind == 2:
        # "add" of an existing key replaces it: the counters stay 50, the cost stays flat.
        return [
            {"op": "add", "path": f"/meta/counters/c{serial % 50}", "value": serial},
            {"op": "replace", "path": "/meta/updatedAt", "value": f"t{serial}"},
        ]
    return [{"op": "add", "path": f"/items/{k}/note", "value": f"note {serial}"}]


def content_mix(
    count: int, *, seed: int = 1, snapshots: bool = True, prefix: str = "m"
) -> list[str]:
    """``count`` content events of an acknowledged run (RUN_STARTED and the state
    snapshot come before, RUN_FINISHED after; neither is counted here).

    Cycles of: an assistant text message (START, 20 CONTENT, END); a call of a
    remote tool attached to it (START, 10 ARGS, END); three STATE_DELTA
    patches on nested paths of the 1 MB state. Every 5,000 events a
    MESSAGES_SNAPSHOT of the newest 50 messages (bounded, so its parse cost
    does not grow with the stream). A tail too short for a whole cycle is
    filled with patches, so the stream has exactly ``count`` events and every
    message and call it opens is closed.
    """
    rng = random.Random(seed)
    lines: list[str] = []
    history: list[dict[str, Any]] = []
    next_snapshot = SNAPSHOT_EVERY
    serial = 0
    while len(lines) < count:
        if snapshots and len(lines) >= next_snapshot and count - len(lines) > 1:
            next_snapshot += SNAPSHOT_EVERY
            recent = history[-SNAPSHOT_MESSAGES:]
            lines.append(dumps({"type": "MESSAGES_SNAPSHOT", "messages": recent}))
            continue
        serial += 1
        cycle: list[str] = []
        mid = f"{prefix}{serial}"
        deltas = _text_deltas(rng, TEXT_DELTAS)
        cycle.append(dumps({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}))
        cycle.extend(
            dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d}) for d in deltas
        )
        cycle.append(dumps({"type": "TEXT_MESSAGE_END", "messageId": mid}))
        call = f"call-{prefix}{serial}"
        args = dumps(
            {"query": " ".join(rng.choice(_WORDS) for _ in range(6)), "limit": 10, "page": serial}
        )
        cycle.append(
            dumps(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call,
                    "toolCallName": REMOTE_TOOL,
                    "parentMessageId": mid,
                }
            )
        )
        cycle.extend(
            dumps({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": piece})
            for piece in _split(args, ARG_DELTAS)
        )
        cycle.append(dumps({"type": "TOOL_CALL_END", "toolCallId": call}))
        for p in range(3):
            cycle.append(dumps({"type": "STATE_DELTA", "delta": _patch(rng, serial * 3 + p)}))
        message = {
            "id": mid,
            "role": "assistant",
            "content": "".join(deltas),
            "toolCalls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": REMOTE_TOOL, "arguments": args},
                }
            ],
        }
        room = count - len(lines)
        if len(cycle) > room:
            # The tail: patches only, so every message and call the stream opened is closed.
            cycle = [
                dumps({"type": "STATE_DELTA", "delta": _patch(rng, serial * 3 + p)})
                for p in range(room)
            ]
        else:
            history.append(message)
        lines.extend(cycle)
    assert len(lines) == count
    return lines


KINDS = ("text deltas", "argument deltas", "state deltas", "starts and ends")
"""The event kinds of :func:`content_mix`, each streamed alone by :func:`kind_stream`."""


def kind_stream(kind: str, count: int, *, seed: int = 3) -> list[str]:
    """About ``count`` content events of one of :data:`KINDS`, as the mix streams them:
    deltas of one open message or call (after its start), patches on the 1 MB state, or
    messages and calls that open and close at once. Every opened item is closed."""
    if kind == "text deltas":
        delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "word "}
        start = {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}
        end = {"type": "TEXT_MESSAGE_END", "messageId": "m1"}
        return [dumps(start), *[dumps(delta)] * count, dumps(end)]
    if kind == "argument deltas":
        delta = {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"q":1,'}
        start = {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": REMOTE_TOOL}
        end = {"type": "TOOL_CALL_END", "toolCallId": "c1"}
        return [dumps(start), *[dumps(delta)] * count, dumps(end)]
    if kind == "state deltas":
        rng = random.Random(seed)
        return [dumps({"type": "STATE_DELTA", "delta": _patch(rng, n)}) for n in range(count)]
    if kind == "starts and ends":
        lines = []
        for n in range(count // 4):
            mid, call = f"m{n}", f"call-{n}"
            lines += [
                dumps({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}),
                dumps({"type": "TEXT_MESSAGE_END", "messageId": mid}),
                dumps(
                    {
                        "type": "TOOL_CALL_START",
                        "toolCallId": call,
                        "toolCallName": REMOTE_TOOL,
                        "parentMessageId": mid,
                    }
                ),
                dumps({"type": "TOOL_CALL_END", "toolCallId": call}),
            ]
        return lines
    raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


def many_messages(count: int) -> list[str]:
    """``count`` events that each add a message to one run: activity snapshots, tool calls
    whose parent id is new (each gets its own holder) and their results, in turn.
    Every one names a message by id, so a lookup that scanned the run would be quadratic."""
    lines: list[str] = []
    n = 0
    while len(lines) < count:
        n += 1
        cycle = [
            dumps(
                {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": f"act-{n}",
                    "activityType": "progress",
                    "content": {"step": n},
                }
            ),
            dumps(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": f"call-{n}",
                    "toolCallName": REMOTE_TOOL,
                    "parentMessageId": f"parent-{n}",
                }
            ),
            dumps({"type": "TOOL_CALL_END", "toolCallId": f"call-{n}"}),
            dumps(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"result-{n}",
                    "toolCallId": f"call-{n}",
                    "content": "ok",
                }
            ),
        ]
        lines.extend(cycle[: count - len(lines)])
    return lines


def wide_object(count: int) -> list[str]:
    """``count`` STATE_DELTAs that each add a member to one object of the state and change
    an earlier one: copying the object per patch would be quadratic."""
    lines = [dumps({"type": "STATE_SNAPSHOT", "snapshot": {"members": {}}})]
    for n in range(1, count):
        ops = [{"op": "add", "path": f"/members/m{n}", "value": {"n": n}}]
        if n > 1:
            ops.append({"op": "replace", "path": f"/members/m{n // 2}/n", "value": -n})
        lines.append(dumps({"type": "STATE_DELTA", "delta": ops}))
    return lines


LOCAL_TOOL = "local_lookup"
"""The tool ``local_calls`` calls: the benchmark's client runs it itself."""


def local_calls(count: int) -> list[str]:
    """``count`` calls of ``LOCAL_TOOL`` in one run: a round of ``count`` local tools once
    it finishes, each result stored in the round (copying the round per result would be
    quadratic)."""
    lines: list[str] = []
    for n in range(count):
        start = {"type": "TOOL_CALL_START", "toolCallId": f"call-{n}", "toolCallName": LOCAL_TOOL}
        lines.append(dumps(start))
        lines.append(dumps({"type": "TOOL_CALL_ARGS", "toolCallId": f"call-{n}", "delta": "{}"}))
        lines.append(dumps({"type": "TOOL_CALL_END", "toolCallId": f"call-{n}"}))
    return lines


def long_text(count: int, message_id: str = "m1") -> list[str]:
    """``count`` TEXT_MESSAGE_CONTENT deltas of one message, framed by its START and END,
    as the reference agent's ``long N`` scenario streams them (``token{i} `` each)."""
    lines = [dumps({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})]
    lines.extend(
        dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": f"token{i} "})
        for i in range(count)
    )
    lines.append(dumps({"type": "TEXT_MESSAGE_END", "messageId": message_id}))
    return lines
