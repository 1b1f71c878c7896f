"""Interop with the official ``ag_ui`` package (``ag-ui-protocol`` on PyPI), over real HTTP.

Streams written by ``ag_ui.encoder.EventEncoder`` must parse exactly as the equivalent JSON
our embedded agent writes (``interlude.adapters.agent.encode_frame``): the same typed events,
field by field, for every AG-UI 1.0 event type with every optional field set, whether read
by the SSE parser in process or served by hypercorn and read through ``HttpxTransport``.
The other way round, every RunAgentInput interlude sends validates with the reference
``ag_ui.core.RunAgentInput`` model, resume payloads ``null``, ``false`` and ``0`` included.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import ag_ui.core as agui
import attrs
import hypercorn.trio
import pydantic
import pytest
import trio
from ag_ui.encoder import EventEncoder
from asgi_support import request_body
from hypercorn.config import Config

from interlude.adapters.agent import ReferenceAgent, encode_frame
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.sse import SSEParser
from interlude.adapters.trio import TrioDriver
from interlude.core import ABSENT, Options, thaw
from interlude.core.json import freeze
from interlude.core.wire import (
    ActivityMessage,
    AssistantMessage,
    Context,
    DeveloperMessage,
    Event,
    FunctionCall,
    Interrupt,
    InterruptOutcome,
    ReasoningMessage,
    ResumeEntry,
    RunAgentInput,
    RunFinished,
    RunStarted,
    SystemMessage,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    decode_frame,
    dumps,
    encode_run_input,
)

WAIT = 5.0
ENCODER = EventEncoder()
EVENT = pydantic.TypeAdapter(agui.Event)

# -- every event type, written twice ------------------------------------------------------

TS = 1_767_225_600_123
RAW = {"provider": "llm", "chunk": [1, None, {"deep": True}]}
META = {"trace": "abc", "nullable": None, "n": 0}
COMMON: dict[str, Any] = {"timestamp": TS, "raw_event": RAW, "metadata": META}
COMMON_WIRE: dict[str, Any] = {"timestamp": TS, "rawEvent": RAW, "metadata": META}
SUB: dict[str, Any] = {"subagent_run_id": "sub-1"}
SUB_WIRE: dict[str, Any] = {"subagentRunId": "sub-1"}

SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "note": {"type": ["string", "null"]}},
    "required": ["approved"],
    "additionalProperties": False,
}
FULL_INTERRUPT = agui.Interrupt(
    id="purchase",
    reason="tool_approval",
    message="Approve this purchase?",
    tool_call_id="c1",
    response_schema=SCHEMA,
    expires_at="2099-01-01T00:00:00.250+02:00",
    metadata={"price": 249, "currency": "USD", "gift": False, "note": None},
    subagent_run_id="sub-1",
)
FULL_INTERRUPT_WIRE = {
    "id": "purchase",
    "reason": "tool_approval",
    "message": "Approve this purchase?",
    "toolCallId": "c1",
    "responseSchema": SCHEMA,
    "expiresAt": "2099-01-01T00:00:00.250+02:00",
    "metadata": {"price": 249, "currency": "USD", "gift": False, "note": None},
    "subagentRunId": "sub-1",
}
# R-A3: an empty reason and an empty message are kept; absent stays absent.
BARE_INTERRUPT = agui.Interrupt(id="shipping-address", reason="", message="")
BARE_INTERRUPT_WIRE = {"id": "shipping-address", "reason": "", "message": ""}

USAGE = agui.TokenUsage(
    provider="openai",
    model="gpt",
    input_tokens=10,
    output_tokens=5,
    total_tokens=15,
    reasoning_tokens=2,
    cached_input_tokens=3,
    cache_write_input_tokens=1,
)
USAGE_WIRE = {
    "provider": "openai",
    "model": "gpt",
    "inputTokens": 10,
    "outputTokens": 5,
    "totalTokens": 15,
    "reasoningTokens": 2,
    "cachedInputTokens": 3,
    "cacheWriteInputTokens": 1,
}
PATCH = [
    {"op": "add", "path": "/orders/-", "value": {"id": "o1"}},
    {"op": "remove", "path": "/cart/item"},
    {"op": "replace", "path": "/address", "value": None},
    {"op": "move", "from": "/a", "path": "/b"},
    {"op": "copy", "from": "/b", "path": "/c"},
    {"op": "test", "path": "/turns", "value": 0},
]
TOOL_CALL = agui.ToolCall(
    id="c1",
    function=agui.FunctionCall(name="place_order", arguments='{"item":"lamp"}'),
    encrypted_value="enc-call",
    metadata={"k": 1},
)
TOOL_CALL_WIRE = {
    "id": "c1",
    "type": "function",
    "function": {"name": "place_order", "arguments": '{"item":"lamp"}'},
    "encryptedValue": "enc-call",
    "metadata": {"k": 1},
}
MSG_OPT: dict[str, Any] = {"encrypted_value": "enc", "metadata": {"m": True}, **SUB}
MSG_OPT_WIRE: dict[str, Any] = {"encryptedValue": "enc", "metadata": {"m": True}, **SUB_WIRE}
MESSAGES = [
    agui.DeveloperMessage(id="d1", content="be brief", name="ops", **MSG_OPT),
    agui.SystemMessage(id="s1", content="", name="sys", **MSG_OPT),
    agui.UserMessage(
        id="u1",
        content=[
            agui.TextPart(text="look", id="p1", metadata={"x": 1}),
            agui.ImagePart(source=agui.UrlSource(value="https://x/y.png", mime_type="image/png")),
            agui.DocumentPart(
                source=agui.DataSource(value="aGVsbG8=", mime_type="application/pdf")
            ),
            agui.AudioPart(source=agui.FileSource(value="file-1", provider="openai")),
        ],
        name="ann",
        **MSG_OPT,
    ),
    agui.AssistantMessage(id="a1", content="", tool_calls=[TOOL_CALL], name="bot", **MSG_OPT),
    agui.ToolMessage(id="t1", content="sunny", tool_call_id="c1", error="partial", **MSG_OPT),
    agui.ActivityMessage(
        id="ac1", activity_type="plan", content={"steps": [1, 2]}, metadata={"m": 1}, **SUB
    ),
    agui.ReasoningMessage(id="r1", content="thinking", **MSG_OPT),
]
MESSAGES_WIRE: list[dict[str, Any]] = [
    {"id": "d1", "role": "developer", "content": "be brief", "name": "ops", **MSG_OPT_WIRE},
    {"id": "s1", "role": "system", "content": "", "name": "sys", **MSG_OPT_WIRE},
    {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "look", "id": "p1", "metadata": {"x": 1}},
            {
                "type": "image",
                "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"},
            },
            {
                "type": "document",
                "source": {"type": "data", "value": "aGVsbG8=", "mimeType": "application/pdf"},
            },
            {"type": "audio", "source": {"type": "file", "value": "file-1", "provider": "openai"}},
        ],
        "name": "ann",
        **MSG_OPT_WIRE,
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": "",
        "toolCalls": [TOOL_CALL_WIRE],
        "name": "bot",
        **MSG_OPT_WIRE,
    },
    {
        "id": "t1",
        "role": "tool",
        "content": "sunny",
        "toolCallId": "c1",
        "error": "partial",
        **MSG_OPT_WIRE,
    },
    {
        "id": "ac1",
        "role": "activity",
        "activityType": "plan",
        "content": {"steps": [1, 2]},
        "metadata": {"m": 1},
        **SUB_WIRE,
    },
    {"id": "r1", "role": "reasoning", "content": "thinking", **MSG_OPT_WIRE},
]
# The reference SDK leaves out every optional field whose value is None, so it cannot write a
# resolved entry with ``"payload": null``; RUN_STARTED.input here carries false and 0 instead
# (null payloads are checked in the other direction, on our requests, below).
INPUT = agui.RunAgentInput(
    thread_id="t",
    run_id="r0",
    parent_run_id="p0",
    protocol_version="1.0",
    state={"turns": 1, "cart": None},
    messages=MESSAGES,
    tools=[
        agui.Tool(
            name="get_local_time",
            description="The user's local time.",
            parameters={"type": "object", "properties": {}},
            metadata={"local": True},
        )
    ],
    context=[agui.Context(description="tz", value="Europe/Paris")],
    forwarded_props={"flag": False, "n": 0},
    resume=[
        agui.ResumeEntry(interrupt_id="i-false", status="resolved", payload=False),
        agui.ResumeEntry(interrupt_id="i-zero", status="resolved", payload=0, metadata={"x": 1}),
        agui.ResumeEntry(interrupt_id="i-gone", status="cancelled"),
    ],
)
INPUT_WIRE = {
    "threadId": "t",
    "runId": "r0",
    "parentRunId": "p0",
    "protocolVersion": "1.0",
    "state": {"turns": 1, "cart": None},
    "messages": MESSAGES_WIRE,
    "tools": [
        {
            "name": "get_local_time",
            "description": "The user's local time.",
            "parameters": {"type": "object", "properties": {}},
            "metadata": {"local": True},
        }
    ],
    "context": [{"description": "tz", "value": "Europe/Paris"}],
    "forwardedProps": {"flag": False, "n": 0},
    "resume": [
        {"interruptId": "i-false", "status": "resolved", "payload": False},
        {"interruptId": "i-zero", "status": "resolved", "payload": 0, "metadata": {"x": 1}},
        {"interruptId": "i-gone", "status": "cancelled"},
    ],
}


def _pair(
    event: Any, wire: dict[str, Any], *, full: bool = True
) -> tuple[Any, dict[str, Any], bool]:
    return event, wire, full


# (official event, the JSON our agent writes for it, whether every optional field is set)
PAIRS: list[tuple[Any, dict[str, Any], bool]] = [
    _pair(
        agui.TextMessageStartEvent(
            message_id="m1", role="assistant", name="helper", **COMMON, **SUB
        ),
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", "name": "helper"}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.TextMessageContentEvent(message_id="m1", delta='Hé ☕ 😀 "q"\nline', **COMMON, **SUB),
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 'Hé ☕ 😀 "q"\nline'}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.TextMessageContentEvent(message_id="m1", delta=""),
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ""},
        full=False,
    ),
    _pair(
        agui.TextMessageEndEvent(message_id="m1", **COMMON, **SUB),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.TextMessageChunkEvent(
            message_id="m2", role="developer", delta="chunk", name="n", **COMMON, **SUB
        ),
        {
            "type": "TEXT_MESSAGE_CHUNK",
            "messageId": "m2",
            "role": "developer",
            "delta": "chunk",
            "name": "n",
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallStartEvent(
            tool_call_id="c1", tool_call_name="place_order", parent_message_id="m1", **COMMON, **SUB
        ),
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "place_order",
            "parentMessageId": "m1",
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallArgsEvent(tool_call_id="c1", delta='{"item":', **COMMON, **SUB),
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"item":'}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallEndEvent(tool_call_id="c1", **COMMON, **SUB),
        {"type": "TOOL_CALL_END", "toolCallId": "c1"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallChunkEvent(
            tool_call_id="c2",
            tool_call_name="lookup",
            parent_message_id="m1",
            delta="{}",
            **COMMON,
            **SUB,
        ),
        {
            "type": "TOOL_CALL_CHUNK",
            "toolCallId": "c2",
            "toolCallName": "lookup",
            "parentMessageId": "m1",
            "delta": "{}",
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallResultEvent(
            message_id="t1", tool_call_id="c1", content="order placed", role="tool", **COMMON, **SUB
        ),
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "t1",
            "toolCallId": "c1",
            "content": "order placed",
            "role": "tool",
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ToolCallResultEvent(
            message_id="t2", tool_call_id="c1", content=[agui.TextPart(text="12:34")]
        ),
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "t2",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": "12:34"}],
        },
        full=False,
    ),
    _pair(
        agui.StateSnapshotEvent(snapshot={"cart": {}, "orders": [], "n": None}, **COMMON, **SUB),
        {"type": "STATE_SNAPSHOT", "snapshot": {"cart": {}, "orders": [], "n": None}}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.StateDeltaEvent(delta=PATCH, **COMMON, **SUB),
        {"type": "STATE_DELTA", "delta": PATCH} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.MessagesSnapshotEvent(messages=MESSAGES, **COMMON),
        {"type": "MESSAGES_SNAPSHOT", "messages": MESSAGES_WIRE} | COMMON_WIRE,
    ),
    _pair(
        agui.ActivitySnapshotEvent(
            message_id="ac1",
            activity_type="plan",
            content={"steps": ["a", "b"]},
            replace=False,
            **COMMON,
            **SUB,
        ),
        {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "ac1",
            "activityType": "plan",
            "content": {"steps": ["a", "b"]},
            "replace": False,
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ActivityDeltaEvent(
            message_id="ac1",
            activity_type="plan",
            patch=[{"op": "replace", "path": "/steps/0", "value": "done"}],
            **COMMON,
            **SUB,
        ),
        {
            "type": "ACTIVITY_DELTA",
            "messageId": "ac1",
            "activityType": "plan",
            "patch": [{"op": "replace", "path": "/steps/0", "value": "done"}],
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.RawEvent(event={"anything": [1, 2]}, source="openai", **COMMON, **SUB),
        {"type": "RAW", "event": {"anything": [1, 2]}, "source": "openai"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.CustomEvent(name="ping", value=None, **COMMON, **SUB),
        {"type": "CUSTOM", "name": "ping", "value": None} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.RunStartedEvent(
            thread_id="t",
            run_id="r1",
            parent_run_id="r0",
            protocol_version="1.0",
            input=INPUT,
            **COMMON,
        ),
        {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r1",
            "parentRunId": "r0",
            "protocolVersion": "1.0",
            "input": INPUT_WIRE,
        }
        | COMMON_WIRE,
    ),
    _pair(
        agui.RunFinishedEvent(
            thread_id="t",
            run_id="r1",
            result={"answer": 42, "none": None},
            outcome=agui.RunFinishedSuccessOutcome(pending_tool_call_ids=["c1", "c2"]),
            usage=[USAGE],
            **COMMON,
        ),
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r1",
            "result": {"answer": 42, "none": None},
            "outcome": {"type": "success", "pendingToolCallIds": ["c1", "c2"]},
            "usage": [USAGE_WIRE],
        }
        | COMMON_WIRE,
    ),
    _pair(
        agui.RunFinishedEvent(
            thread_id="t",
            run_id="r1",
            result={"paused": True},
            outcome=agui.RunFinishedInterruptOutcome(interrupts=[FULL_INTERRUPT, BARE_INTERRUPT]),
            usage=[USAGE],
            **COMMON,
        ),
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r1",
            "result": {"paused": True},
            "outcome": {
                "type": "interrupt",
                "interrupts": [FULL_INTERRUPT_WIRE, BARE_INTERRUPT_WIRE],
            },
            "usage": [USAGE_WIRE],
        }
        | COMMON_WIRE,
    ),
    _pair(
        agui.RunFinishedEvent(
            thread_id="t", run_id="r1", outcome=agui.RunFinishedCancelledOutcome()
        ),
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1", "outcome": {"type": "cancelled"}},
        full=False,
    ),
    _pair(
        agui.RunFinishedEvent(thread_id="t", run_id="r1"),
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        full=False,
    ),
    _pair(
        agui.RunErrorEvent(message="boom", code="E1", usage=[USAGE], **COMMON),
        {"type": "RUN_ERROR", "message": "boom", "code": "E1", "usage": [USAGE_WIRE]} | COMMON_WIRE,
    ),
    _pair(
        agui.StepStartedEvent(step_name="plan", **COMMON, **SUB),
        {"type": "STEP_STARTED", "stepName": "plan"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.StepFinishedEvent(step_name="plan", **COMMON, **SUB),
        {"type": "STEP_FINISHED", "stepName": "plan"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningStartEvent(message_id="r1", **COMMON, **SUB),
        {"type": "REASONING_START", "messageId": "r1"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningMessageStartEvent(message_id="r1", role="reasoning", **COMMON, **SUB),
        {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningMessageContentEvent(message_id="r1", delta="hmm", **COMMON, **SUB),
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hmm"}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningMessageEndEvent(message_id="r1", **COMMON, **SUB),
        {"type": "REASONING_MESSAGE_END", "messageId": "r1"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningMessageChunkEvent(message_id="r1", delta="more", **COMMON, **SUB),
        {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "more"}
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningEndEvent(message_id="r1", **COMMON, **SUB),
        {"type": "REASONING_END", "messageId": "r1"} | COMMON_WIRE | SUB_WIRE,
    ),
    _pair(
        agui.ReasoningEncryptedValueEvent(
            subtype="tool-call", entity_id="c1", encrypted_value="opaque", **COMMON, **SUB
        ),
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": "tool-call",
            "entityId": "c1",
            "encryptedValue": "opaque",
        }
        | COMMON_WIRE
        | SUB_WIRE,
    ),
    _pair(
        agui.SubagentStartedEvent(
            subagent_run_id="sub-1",
            name="researcher",
            description="looks things up",
            parent_subagent_run_id="sub-0",
            parent_tool_call_id="c1",
            parent_message_id="m1",
            **COMMON,
        ),
        {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": "sub-1",
            "name": "researcher",
            "description": "looks things up",
            "parentSubagentRunId": "sub-0",
            "parentToolCallId": "c1",
            "parentMessageId": "m1",
        }
        | COMMON_WIRE,
    ),
    _pair(
        agui.SubagentFinishedEvent(
            subagent_run_id="sub-1",
            result={"found": 3},
            outcome=agui.SubagentFinishedSuspendedOutcome(interrupt_ids=["purchase"]),
            **COMMON,
        ),
        {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "sub-1",
            "result": {"found": 3},
            "outcome": {"type": "suspended", "interruptIds": ["purchase"]},
        }
        | COMMON_WIRE,
    ),
    _pair(
        agui.SubagentFinishedEvent(
            subagent_run_id="sub-2", outcome=agui.SubagentFinishedSuccessOutcome()
        ),
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "sub-2", "outcome": {"type": "success"}},
        full=False,
    ),
    _pair(
        agui.SubagentErrorEvent(subagent_run_id="sub-1", message="failed", code="X", **COMMON),
        {"type": "SUBAGENT_ERROR", "subagentRunId": "sub-1", "message": "failed", "code": "X"}
        | COMMON_WIRE,
    ),
]


def _id(pair: tuple[Any, dict[str, Any], bool]) -> str:
    event, wire, full = pair
    outcome = wire.get("outcome", {}).get("type") if isinstance(wire.get("outcome"), dict) else None
    return f"{event.type.value}{'-' + outcome if outcome else ''}{'' if full else '-minimal'}"


# -- helpers -------------------------------------------------------------------------------


def frames(raw: bytes, chunk: int = 7) -> list[str]:
    """The data of each SSE frame, fed to our parser in small pieces."""
    parser = SSEParser()
    out = [e.data for i in range(0, len(raw), chunk) for e in parser.feed(raw[i : i + chunk])]
    out += [e.data for e in parser.close()]
    assert not parser.truncated
    return out


def assert_same(a: Any, b: Any, path: str) -> None:
    """Equal field by field, with the same Python types (``False`` is not ``0``)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if attrs.has(type(a)):
        for f in attrs.fields(type(a)):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, Mapping):
        assert list(a) == list(b) or set(a) == set(b), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), f"{path}: {len(a)} items != {len(b)}"
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{n}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def unset_optionals(model: pydantic.BaseModel) -> list[str]:
    """Names of the model's optional fields left at None."""
    return [
        name
        for name, field in type(model).model_fields.items()
        if not field.is_required() and getattr(model, name) is None
    ]


# -- coverage of the table -------------------------------------------------------------------


def test_the_table_covers_every_event_type_and_outcome_with_every_optional_field() -> None:
    """R-J1: every AG-UI 1.0 event type; every optional field set on the full variants."""
    assert {e.type.value for e, _, _ in PAIRS} == {t.value for t in agui.EventType}
    outcomes = {type(e.outcome) for e, _, _ in PAIRS if isinstance(e, agui.RunFinishedEvent)}
    assert outcomes >= {
        agui.RunFinishedSuccessOutcome,
        agui.RunFinishedInterruptOutcome,
        agui.RunFinishedCancelledOutcome,
        type(None),
    }
    for event, _, full in PAIRS:
        if full:
            assert unset_optionals(event) == [], event.type
    assert unset_optionals(FULL_INTERRUPT) == []
    assert unset_optionals(USAGE) == []
    assert unset_optionals(INPUT) == []
    for message in MESSAGES:
        assert unset_optionals(message) == [], message.role
    # The hand-written JSON is what the official model reads too.
    for event, wire, _ in PAIRS:
        assert EVENT.validate_python(wire) == event


# -- the same events, in process -------------------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_official_encoder_frames_parse_exactly_like_our_agents_json(
    pair: tuple[Any, dict[str, Any], bool],
) -> None:
    """R-J1, R-J4: EventEncoder's frame and encode_frame's frame give the same typed event."""
    event, wire, _ = pair
    theirs_raw = ENCODER.encode(event).encode("utf-8")
    ours_raw = encode_frame(wire)
    [theirs_data] = frames(theirs_raw)
    [ours_data] = frames(ours_raw)
    assert json.loads(theirs_data) == json.loads(ours_data) == wire
    theirs, ours = decode_frame(theirs_data), decode_frame(ours_data)
    assert_same(theirs, ours, wire["type"])
    assert theirs == ours
    assert type(ours).__name__ != "UnknownEvent"


def test_interrupt_outcome_fields_read_from_the_official_encoder() -> None:
    """R-A3, R-J1: every optional interrupt field is read; empty strings kept; absent stays None."""
    event = agui.RunFinishedEvent(
        thread_id="t",
        run_id="r1",
        outcome=agui.RunFinishedInterruptOutcome(interrupts=[FULL_INTERRUPT, BARE_INTERRUPT]),
    )
    [data] = frames(ENCODER.encode(event).encode())
    decoded = decode_frame(data)
    assert isinstance(decoded, RunFinished) and isinstance(decoded.outcome, InterruptOutcome)
    full, bare = decoded.outcome.interrupts
    expected = Interrupt(
        id="purchase",
        reason="tool_approval",
        message="Approve this purchase?",
        tool_call_id="c1",
        response_schema=freeze(SCHEMA),  # type: ignore[arg-type]
        expires_at="2099-01-01T00:00:00.250+02:00",
        metadata=freeze({"price": 249, "currency": "USD", "gift": False, "note": None}),  # type: ignore[arg-type]
        subagent_run_id="sub-1",
    )
    assert_same(full, expected, "interrupts[0]")
    assert full.expires_at_epoch == pytest.approx(4070901600.25)
    assert_same(bare, Interrupt(id="shipping-address", reason="", message=""), "interrupts[1]")
    assert thaw(full.metadata)["gift"] is False and thaw(full.metadata)["note"] is None


def test_run_started_input_from_the_official_encoder_keeps_false_and_zero_payloads() -> None:
    """R-B1: false and 0 stay payloads (not absent, not None) when the SDK writes them."""
    event = next(e for e, _, _ in PAIRS if isinstance(e, agui.RunStartedEvent))
    [data] = frames(ENCODER.encode(event).encode())
    decoded = decode_frame(data)
    assert isinstance(decoded, RunStarted) and decoded.input is not None
    resume = decoded.input.resume
    assert resume is not None
    assert [(e.interrupt_id, e.status) for e in resume] == [
        ("i-false", "resolved"),
        ("i-zero", "resolved"),
        ("i-gone", "cancelled"),
    ]
    assert resume[0].payload is False
    assert resume[1].payload == 0 and type(resume[1].payload) is int
    assert resume[2].payload is ABSENT
    assert [type(m).__name__ for m in decoded.input.messages] == [
        "DeveloperMessage",
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ActivityMessage",
        "ReasoningMessage",
    ]


def test_the_reference_agents_own_streams_reencoded_by_the_sdk_parse_the_same() -> None:
    """Real scenario streams: our agent's JSON, read by the SDK and re-encoded, decode the same."""
    agent = ReferenceAgent(clock=lambda: 1_800_000_000.0, expires_in=60.0)
    user = {"id": "u1", "role": "user", "content": "buy an espresso machine"}
    base = {"threadId": "t", "state": None, "tools": [], "context": [], "forwardedProps": {}}
    streams = [agent.run({**base, "runId": "r1", "messages": [user]})]
    answers = [
        {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
        {"interruptId": "shipping-address", "status": "cancelled"},
    ]
    streams.append(agent.run({**base, "runId": "r2", "messages": [user], "resume": answers}))
    tool = {"name": "get_local_time", "description": "time"}
    ask = {"id": "u2", "role": "user", "content": "what time is it"}
    streams.append(agent.run({**base, "runId": "r3", "messages": [ask], "tools": [tool]}))
    seen = set()
    for stream in streams:
        for wire in stream:
            seen.add(wire["type"])
            theirs_raw = ENCODER.encode(EVENT.validate_python(wire)).encode()
            [theirs] = frames(theirs_raw)
            [ours] = frames(encode_frame(wire))
            assert json.loads(theirs) == json.loads(ours)
            assert_same(decode_frame(theirs), decode_frame(ours), wire["type"])
    assert {"RUN_STARTED", "STATE_DELTA", "TOOL_CALL_RESULT", "RUN_FINISHED"} <= seen


# -- over HTTP: a tiny endpoint written with the SDK -----------------------------------------

Answer = Callable[[dict[str, Any]], bytes]


class Endpoint:
    """A tiny AG-UI endpoint: each POST gets the next scripted answer as an SSE body."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = deque(answers)
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = await request_body(scope, receive, send)
        if body is None:
            return  # the lifespan protocol, answered
        self.bodies.append(body)
        answer = self.answers.popleft()(json.loads(body))
        headers = [(b"content-type", ENCODER.get_content_type().encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer, "more_body": False})


def over_http(app: Endpoint, body: Callable[[str], Awaitable[None]]) -> None:
    async def main() -> None:
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.loglevel = "WARNING"
        config.graceful_timeout = 0.5
        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(
                    partial(hypercorn.trio.serve, app, config, shutdown_trigger=trio.sleep_forever)
                )
                await body(binds[0] + "/")
                nursery.cancel_scope.cancel()

    trio.run(main)


def sdk_stream(*events: Any) -> bytes:
    return "".join(ENCODER.encode(e) for e in events).encode("utf-8")


def test_streams_served_over_http_parse_identically() -> None:
    """R-J4: the SDK's stream and ours, served by hypercorn, read through HttpxTransport."""
    theirs_raw = sdk_stream(*(e for e, _, _ in PAIRS))
    ours_raw = b"".join(encode_frame(w) for _, w, _ in PAIRS)
    app = Endpoint(lambda _: theirs_raw, lambda _: ours_raw)
    got: list[list[Event]] = []

    async def body(url: str) -> None:
        async with HttpxTransport(url) as transport:
            for _ in range(2):
                with trio.fail_after(WAIT):
                    got.append([decode_frame(data) async for data in transport.stream(b"{}")])

    over_http(app, body)
    theirs, ours = got
    assert len(theirs) == len(ours) == len(PAIRS)
    for n, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        assert_same(a, b, f"frame {n} ({PAIRS[n][1]['type']})")
    assert theirs == [decode_frame(f) for f in frames(ours_raw)]


def test_a_driver_pauses_on_an_sdk_interrupt_and_its_resume_validates_with_the_sdk_model() -> None:
    """R-A1, R-A3, R-B1, R-B6: an SDK-written pause over HTTP; null/false/0 payloads go back."""
    interrupts = [
        agui.Interrupt(id="i-null", reason="input_required", message="Anything?"),
        agui.Interrupt(id="i-false", reason="tool_approval", tool_call_id="c1"),
        agui.Interrupt(id="i-zero", reason="input_required", response_schema={"type": "integer"}),
        FULL_INTERRUPT.model_copy(update={"id": "i-cancel"}),
    ]
    received: list[agui.RunAgentInput] = []

    def pause(request: dict[str, Any]) -> bytes:
        ref = agui.RunAgentInput.model_validate(request)
        received.append(ref)
        ids = {"thread_id": ref.thread_id, "run_id": ref.run_id}
        return sdk_stream(
            agui.RunStartedEvent(**ids, protocol_version="1.0"),
            agui.TextMessageStartEvent(message_id="m1", role="assistant"),
            agui.TextMessageContentEvent(message_id="m1", delta="Four questions."),
            agui.TextMessageEndEvent(message_id="m1"),
            agui.StateSnapshotEvent(snapshot={"step": 1}),
            agui.RunFinishedEvent(
                **ids, outcome=agui.RunFinishedInterruptOutcome(interrupts=interrupts)
            ),
        )

    def finish(request: dict[str, Any]) -> bytes:
        ref = agui.RunAgentInput.model_validate(request)
        received.append(ref)
        ids = {"thread_id": ref.thread_id, "run_id": ref.run_id}
        return sdk_stream(
            agui.RunStartedEvent(**ids),
            agui.TextMessageChunkEvent(message_id="m2", role="assistant", delta="Thanks."),
            agui.RunFinishedEvent(**ids, outcome=agui.RunFinishedSuccessOutcome()),
        )

    app = Endpoint(pause, finish)
    entries = [
        {"interrupt_id": "i-null", "status": "resolved", "payload": None},
        {"interrupt_id": "i-false", "status": "resolved", "payload": False},
        {"interrupt_id": "i-zero", "status": "resolved", "payload": 0, "metadata": {"via": "form"}},
        {"interrupt_id": "i-cancel", "status": "cancelled"},
    ]

    async def body(url: str) -> None:
        async with HttpxTransport(url) as transport, TrioDriver(transport) as driver:
            chat = driver.chat(Options(), thread_id="t-sdk")
            chat.send("go")
            with trio.fail_after(WAIT):
                batch = await chat.wait_for_batch(WAIT)
            assert [i.id for i in batch.interrupts] == ["i-null", "i-false", "i-zero", "i-cancel"]
            assert batch.interrupts[0].message == "Anything?"
            assert batch.interrupts[1].tool_call_id == "c1"
            assert thaw(batch.interrupts[2].response_schema) == {"type": "integer"}
            assert_same(
                batch.interrupts[3],
                Interrupt(
                    id="i-cancel",
                    reason="tool_approval",
                    message="Approve this purchase?",
                    tool_call_id="c1",
                    response_schema=freeze(SCHEMA),  # type: ignore[arg-type]
                    expires_at="2099-01-01T00:00:00.250+02:00",
                    metadata=freeze({"price": 249, "currency": "USD", "gift": False, "note": None}),  # type: ignore[arg-type]
                    subagent_run_id="sub-1",
                ),
                "i-cancel",
            )
            assert chat.messages[-1].content == "Four questions."  # type: ignore[union-attr]
            assert thaw(chat.state) == {"step": 1}
            chat.resume(batch.id, entries)
            with trio.fail_after(WAIT):
                await chat.wait_idle(WAIT)
            assert chat.error is None and chat.pending_interrupts is None
            assert chat.messages[-1].content == "Thanks."  # type: ignore[union-attr]

    over_http(app, body)
    first, resume = received
    assert first.resume is None and first.thread_id == resume.thread_id == "t-sdk"
    assert resume.run_id != first.run_id
    assert resume.state == {"step": 1}
    assert [m.role for m in resume.messages] == ["user", "assistant"]
    assert resume.resume is not None
    null, false, zero, cancel = resume.resume
    assert (null.interrupt_id, null.status, null.payload) == ("i-null", "resolved", None)
    assert false.payload is False
    assert zero.payload == 0 and type(zero.payload) is int and zero.metadata == {"via": "form"}
    assert cancel.status == "cancelled" and cancel.payload is None
    # The SDK model reads an absent payload and null alike; the bytes tell them apart.
    wire = json.loads(app.bodies[1])["resume"]
    assert wire[0] == {"interruptId": "i-null", "status": "resolved", "payload": None}
    assert wire[1] == {"interruptId": "i-false", "status": "resolved", "payload": False}
    assert wire[3] == {"interruptId": "i-cancel", "status": "cancelled"}


# -- our RunAgentInput, read by the SDK model --------------------------------------------------


def test_encoded_run_input_validates_with_the_sdk_model() -> None:
    """R-B1, R-B6: every message kind, tools, context, props, and null/false/0 payloads.
    Activity messages are stripped (AG-UI 1.0, Run Input: they never travel back)."""
    inp = RunAgentInput(
        thread_id="t",
        run_id="r2",
        parent_run_id="r1",
        state=freeze({"cart": None, "n": 0, "ok": False}),
        messages=(
            DeveloperMessage(id="d1", content="be brief", name="ops"),
            SystemMessage(id="s1", content=""),
            UserMessage(
                id="u1",
                content=freeze(({"type": "text", "text": "hi"},)),  # type: ignore[arg-type]
                metadata=freeze({"k": None}),  # type: ignore[arg-type]
            ),
            AssistantMessage(
                id="a1",
                tool_calls=(
                    ToolCall(id="c1", function=FunctionCall(name="w", arguments='{"a":1}')),
                ),
            ),
            ToolMessage(id="t1", content="sunny", tool_call_id="c1", error="partial"),
            ActivityMessage(id="ac1", activity_type="plan", content=freeze({"s": [1]})),  # type: ignore[arg-type]
            ReasoningMessage(id="r1", content="thinking", encrypted_value="x"),
        ),
        tools=(
            Tool(
                name="get_local_time",
                description="The user's local time.",
                parameters=freeze({"type": "object"}),
            ),
        ),
        context=(Context(description="tz", value="UTC"),),
        forwarded_props=freeze({"flag": False}),
        resume=(
            ResumeEntry(interrupt_id="i-null", status="resolved", payload=None),
            ResumeEntry(interrupt_id="i-false", status="resolved", payload=False),
            ResumeEntry(interrupt_id="i-zero", status="resolved", payload=0),
            ResumeEntry(interrupt_id="i-float", status="resolved", payload=0.0),
            ResumeEntry(interrupt_id="i-empty", status="resolved", payload=""),
            ResumeEntry(
                interrupt_id="i-deny",
                status="resolved",
                payload=freeze({"approved": False}),
                metadata=freeze({"by": "ann"}),  # type: ignore[arg-type]
            ),
            ResumeEntry(interrupt_id="i-absent", status="resolved"),
            ResumeEntry(interrupt_id="i-cancel", status="cancelled"),
        ),
    )
    text = dumps(encode_run_input(inp))
    wire = json.loads(text)
    ref = agui.RunAgentInput.model_validate(wire)
    ref_from_json = agui.RunAgentInput.model_validate_json(text)
    assert ref == ref_from_json
    assert (ref.thread_id, ref.run_id, ref.parent_run_id) == ("t", "r2", "r1")
    assert ref.protocol_version == "1.0"
    assert ref.state == {"cart": None, "n": 0, "ok": False}
    assert [type(m).__name__ for m in ref.messages] == [
        "DeveloperMessage",
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ReasoningMessage",
    ]
    assert "activity" not in text
    assert ref.messages[3].tool_calls[0].function.arguments == '{"a":1}'  # type: ignore[union-attr]
    assert ref.messages[4].error == "partial"  # type: ignore[union-attr]
    assert ref.tools is not None and ref.tools[0].name == "get_local_time"
    assert ref.context == [agui.Context(description="tz", value="UTC")]
    assert ref.forwarded_props == {"flag": False}
    assert ref.resume is not None
    payloads = [(e.interrupt_id, e.status, e.payload) for e in ref.resume]
    assert payloads == [
        ("i-null", "resolved", None),
        ("i-false", "resolved", False),
        ("i-zero", "resolved", 0),
        ("i-float", "resolved", 0.0),
        ("i-empty", "resolved", ""),
        ("i-deny", "resolved", {"approved": False}),
        ("i-absent", "resolved", None),
        ("i-cancel", "cancelled", None),
    ]
    assert ref.resume[1].payload is False
    assert type(ref.resume[2].payload) is int and type(ref.resume[3].payload) is float
    assert ref.resume[5].metadata == {"by": "ann"}
    # What the SDK cannot tell apart, the wire does: null is sent, absent is left out.
    entries = wire["resume"]
    assert entries[0] == {"interruptId": "i-null", "status": "resolved", "payload": None}
    assert "payload" not in entries[6] and "payload" not in entries[7]
