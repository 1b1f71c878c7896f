"""The AG-UI 1.0 wire codec: interoperability with the reference SDK, strictness,
R-A3/R-A4/R-A6 for interrupts, R-J1 tolerance, and hostile input."""

from __future__ import annotations

import contextlib
import datetime
import json
from typing import Any

import ag_ui.core as agui
import attrs
import pytest
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.core.json import FrozenDict, freeze_parsed, thaw
from interlude.core.rfc3339 import parse_rfc3339
from interlude.core.wire import (
    ABSENT,
    EVENT_TYPES,
    MAX_DEPTH,
    AssistantMessage,
    CancelledOutcome,
    Context,
    Interrupt,
    InterruptOutcome,
    LeftOut,
    MessagesSnapshot,
    ResumeEntry,
    RunAgentInput,
    RunFinished,
    StateDelta,
    SuccessOutcome,
    TextMessageContent,
    Tool,
    ToolCall,
    ToolMessage,
    UnknownEvent,
    UnknownOutcome,
    UserMessage,
    WireError,
    content_parts,
    decode_event,
    decode_frame,
    decode_message,
    decode_run_input,
    dumps,
    encode_event,
    encode_message,
    encode_request,
    encode_run_input,
    left_out_note,
    read_frame,
)
from interlude.core.wire.codec import converter


def fz(value: Any) -> Any:
    """``freeze_parsed``, typed loosely for tests."""
    return freeze_parsed(value)


# -- the reference SDK produces every event type; we read each one ---------------------

META = {"trace": "abc", "n": [1, 2, {"deep": None}]}


def _messages() -> list[Any]:
    return [
        agui.DeveloperMessage(id="d1", content="be brief", name="ops"),
        agui.SystemMessage(id="s1", content="", encrypted_value="enc", metadata=META),
        agui.UserMessage(id="u1", content="hello", subagent_run_id="sub-1"),
        agui.UserMessage(
            id="u2",
            content=[
                agui.TextPart(text="look"),
                agui.ImagePart(source=agui.UrlSource(value="https://x/y.png")),
            ],
        ),
        agui.AssistantMessage(
            id="a1",
            content="calling",
            tool_calls=[
                agui.ToolCall(
                    id="c1",
                    function=agui.FunctionCall(name="weather", arguments='{"city":"Paris"}'),
                    encrypted_value="tc-enc",
                    metadata={"k": 1},
                )
            ],
        ),
        agui.AssistantMessage(id="a2"),
        agui.ToolMessage(id="t1", content="sunny", tool_call_id="c1", error="partial"),
        agui.ActivityMessage(id="ac1", activity_type="plan", content={"steps": [1, 2]}),
        agui.ReasoningMessage(id="r1", content="thinking", encrypted_value="x"),
    ]


def reference_events() -> list[Any]:
    """One instance of each of the 31 event types, most optional fields set."""
    common: dict[str, Any] = {"timestamp": 1_700_000_000_000, "raw_event": {"p": [1]}}
    sub: dict[str, Any] = {"subagent_run_id": "sub-1", "metadata": META}
    interrupt = agui.Interrupt(
        id="i1",
        reason="tool_approval",
        message="",
        tool_call_id="c1",
        response_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        expires_at="2030-01-01T00:00:00Z",
        metadata={"risk": "high"},
        subagent_run_id="sub-1",
    )
    run_input = agui.RunAgentInput(
        thread_id="t",
        run_id="r",
        protocol_version="1.0",
        state={"a": 1},
        messages=_messages()[:3],
        tools=[agui.Tool(name="weather", description="", parameters={"type": "object"})],
        context=[agui.Context(description="tz", value="UTC")],
        forwarded_props={"x": True},
        resume=[agui.ResumeEntry(interrupt_id="i0", status="resolved", payload={"ok": 1})],
    )
    patch: list[Any] = [{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/b"}]
    return [
        agui.TextMessageStartEvent(message_id="m1", role="assistant", name="bot", **common, **sub),
        agui.TextMessageContentEvent(message_id="m1", delta="", **common, **sub),
        agui.TextMessageEndEvent(message_id="m1", **sub),
        agui.TextMessageChunkEvent(message_id="m2", role="user", delta="hi", name="n", **sub),
        agui.ToolCallStartEvent(tool_call_id="c1", tool_call_name="w", parent_message_id="m1"),
        agui.ToolCallArgsEvent(tool_call_id="c1", delta='{"a":', **sub),
        agui.ToolCallEndEvent(tool_call_id="c1"),
        agui.ToolCallChunkEvent(
            tool_call_id="c2", tool_call_name="w", parent_message_id="m1", delta="{}"
        ),
        agui.ToolCallResultEvent(message_id="t1", tool_call_id="c1", content="ok", role="tool"),
        agui.ToolCallResultEvent(
            message_id="t2", tool_call_id="c1", content=[agui.TextPart(text="x")]
        ),
        agui.StateSnapshotEvent(snapshot={"a": [1, {"b": None}]}, **sub),
        agui.StateSnapshotEvent(snapshot=None),
        agui.StateDeltaEvent(delta=patch, **common),
        agui.MessagesSnapshotEvent(messages=_messages(), metadata=META),
        agui.ActivitySnapshotEvent(
            message_id="ac1", activity_type="plan", content={"s": 1}, replace=False
        ),
        agui.ActivityDeltaEvent(message_id="ac1", activity_type="plan", patch=patch),
        agui.RawEvent(event={"anything": [1, 2]}, source="openai", **sub),
        agui.CustomEvent(name="ping", value=None, **sub),
        agui.RunStartedEvent(
            thread_id="t", run_id="r", parent_run_id="p", protocol_version="1.0", input=run_input
        ),
        agui.RunFinishedEvent(thread_id="t", run_id="r", result={"answer": 42}),
        agui.RunFinishedEvent(
            thread_id="t",
            run_id="r",
            outcome=agui.RunFinishedSuccessOutcome(pending_tool_call_ids=["c1", "c2"]),
            usage=[agui.TokenUsage(provider="p", input_tokens=3, output_tokens=4)],
        ),
        agui.RunFinishedEvent(
            thread_id="t",
            run_id="r",
            outcome=agui.RunFinishedInterruptOutcome(
                interrupts=[interrupt, agui.Interrupt(id="i2", reason="")]
            ),
        ),
        agui.RunFinishedEvent(
            thread_id="t", run_id="r", outcome=agui.RunFinishedCancelledOutcome()
        ),
        agui.RunErrorEvent(message="boom", code="E1", **common),
        agui.StepStartedEvent(step_name="plan", **sub),
        agui.StepFinishedEvent(step_name="plan"),
        agui.ReasoningStartEvent(message_id="r1", **sub),
        agui.ReasoningMessageStartEvent(message_id="r1"),
        agui.ReasoningMessageContentEvent(message_id="r1", delta="hmm"),
        agui.ReasoningMessageEndEvent(message_id="r1"),
        agui.ReasoningMessageChunkEvent(message_id="r1", delta="more"),
        agui.ReasoningEndEvent(message_id="r1"),
        agui.ReasoningEncryptedValueEvent(
            subtype="tool-call", entity_id="c1", encrypted_value="opaque", **sub
        ),
        agui.SubagentStartedEvent(
            subagent_run_id="sub-1",
            name="researcher",
            description="finds",
            parent_subagent_run_id="sub-0",
            parent_tool_call_id="c1",
            parent_message_id="m1",
        ),
        agui.SubagentFinishedEvent(
            subagent_run_id="sub-1",
            result=[1, 2],
            outcome=agui.SubagentFinishedSuspendedOutcome(interrupt_ids=["i1"]),
        ),
        agui.SubagentErrorEvent(subagent_run_id="sub-1", message="failed", code="X"),
    ]


def sse_data(event: Any) -> str:
    """The JSON text the reference encoder puts in an SSE frame."""
    frame = EventEncoder().encode(event)
    assert frame.startswith("data: ") and frame.endswith("\n\n")
    return frame[len("data: ") : -2]


def test_every_ag_ui_event_type_has_a_class() -> None:
    """R-J1: all 31 AG-UI 1.0 event types are read."""
    ours = {c.TYPE for c in EVENT_TYPES}
    assert ours == {t.value for t in agui.EventType}
    assert len(ours) == 31
    produced = {e.type.value for e in reference_events()}
    assert produced == ours


@pytest.mark.parametrize("event", reference_events(), ids=lambda e: e.type.value)
def test_reference_events_decode_and_round_trip(event: Any) -> None:
    """R-J1 interoperability: what ag-ui-protocol writes, we read, and write back the same."""
    data = sse_data(event)
    decoded = decode_frame(data)
    assert event.type.value == type(decoded).TYPE
    # Every field the reference wrote comes back, with the same wire names and values.
    assert json.loads(dumps(encode_event(decoded))) == json.loads(data)
    # And the reference SDK accepts what we write.
    back = type(event).model_validate(json.loads(dumps(encode_event(decoded))))
    assert back == event


def test_field_values_are_read_into_snake_case() -> None:
    decoded = decode_frame(sse_data(reference_events()[0]))
    assert decoded == decode_event(
        {
            "type": "TEXT_MESSAGE_START",
            "messageId": "m1",
            "role": "assistant",
            "name": "bot",
            "timestamp": 1_700_000_000_000,
            "rawEvent": {"p": [1]},
            "subagentRunId": "sub-1",
            "metadata": META,
        }
    )
    assert decoded.message_id == "m1"  # type: ignore[union-attr]
    assert decoded.subagent_run_id == "sub-1"  # type: ignore[union-attr]
    assert decoded.raw_event == {"p": (1,)}  # type: ignore[union-attr]


@pytest.mark.parametrize("event", reference_events(), ids=lambda e: e.type.value)
def test_the_exported_converter_holds_every_event_class_wire_form(event: Any) -> None:
    """The codec exports ``converter`` with every wire class's hooks registered: an
    application structuring or unstructuring through it gets the camelCase wire form
    that decode_frame and encode_event use, not cattrs' snake_case defaults."""
    data = sse_data(event)
    decoded = decode_frame(data)
    assert converter.structure(json.loads(data), type(decoded)) == decoded
    assert converter.unstructure(decoded) == {
        k: v for k, v in encode_event(decoded).items() if k != "type"
    }


def test_run_finished_interrupt_outcome_reads_every_field() -> None:
    """R-A3: every interrupt field is kept; absent stays None; "" is kept."""
    event = next(
        e
        for e in reference_events()
        if isinstance(e, agui.RunFinishedEvent)
        and isinstance(e.outcome, agui.RunFinishedInterruptOutcome)
    )
    decoded = decode_frame(sse_data(event))
    assert isinstance(decoded, RunFinished)
    assert isinstance(decoded.outcome, InterruptOutcome)
    first, second = decoded.outcome.interrupts
    assert first.id == "i1" and first.reason == "tool_approval"
    assert first.message == ""
    assert first.tool_call_id == "c1"
    assert first.response_schema == {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
    }
    assert first.expires_at == "2030-01-01T00:00:00Z"
    assert first.expires_at_epoch == 1893456000.0
    assert first.metadata == {"risk": "high"}
    assert first.subagent_run_id == "sub-1"
    assert second == Interrupt(id="i2", reason="")
    assert second.message is None and second.tool_call_id is None
    assert second.response_schema is None and second.expires_at is None
    assert second.metadata is None and second.subagent_run_id is None
    assert second.expires_at_epoch is None


def test_outcomes() -> None:
    """R-J5, R-J6: success (with pending ids), cancelled, absent, unknown."""

    def outcome(o: Any) -> Any:
        e = decode_event({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": o})
        assert isinstance(e, RunFinished)
        return e.outcome

    assert outcome({"type": "success"}) == SuccessOutcome()
    assert outcome({"type": "success", "pendingToolCallIds": []}) == SuccessOutcome(
        pending_tool_call_ids=()
    )
    assert outcome({"type": "success", "pendingToolCallIds": ["a", "b"]}) == SuccessOutcome(
        pending_tool_call_ids=("a", "b")
    )
    assert outcome({"type": "cancelled"}) == CancelledOutcome()
    assert outcome(None) is None
    unknown = outcome({"type": "suspended", "why": [1]})
    assert unknown == UnknownOutcome(type="suspended", raw=fz({"type": "suspended", "why": [1]}))
    bare = decode_event({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    assert isinstance(bare, RunFinished) and bare.outcome is None
    assert encode_event(bare) == {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    again = RunFinished(thread_id="t", run_id="r", outcome=unknown)
    assert json.loads(dumps(encode_event(again)))["outcome"] == {"type": "suspended", "why": [1]}


@pytest.mark.parametrize(
    "outcome",
    [
        {"type": "success", "pendingToolCallIds": "c1"},
        {"type": "success", "pendingToolCallIds": [1]},
    ],
)
def test_pending_tool_call_ids_must_be_strings(outcome: Any) -> None:
    with pytest.raises(WireError, match="pendingToolCallIds"):
        decode_event({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": outcome})


# -- messages ---------------------------------------------------------------------------


@pytest.mark.parametrize("message", _messages(), ids=lambda m: f"{m.role}-{m.id}")
def test_reference_messages_round_trip(message: Any) -> None:
    data = message.model_dump_json(by_alias=True)
    decoded = decode_message(json.loads(data))
    assert decoded.role == message.role
    assert json.loads(dumps(encode_message(decoded))) == json.loads(data)


def test_wire_key_is_importable_from_interlude_core_wire_as_the_reference_lists_it() -> None:
    """docs/reference.md lists ``wire_key(field_name)`` among ``interlude.core.wire``'s codec."""
    from interlude.core import wire

    assert "wire_key" in wire.__all__
    assert wire.wire_key("tool_call_id") == "toolCallId"
    assert wire.wire_key("pending_tool_call_ids") == "pendingToolCallIds"


def test_message_fields() -> None:
    m = decode_message(json.loads(_messages()[4].model_dump_json(by_alias=True)))
    assert isinstance(m, AssistantMessage)
    assert m.tool_calls is not None
    (call,) = m.tool_calls
    assert isinstance(call, ToolCall)
    assert call.function.name == "weather"
    assert call.function.arguments == '{"city":"Paris"}'
    assert call.type == "function" and call.encrypted_value == "tc-enc"
    assert call.metadata == {"k": 1}
    user = decode_message({"role": "user", "id": "u", "content": [{"type": "text", "text": "x"}]})
    assert isinstance(user, UserMessage)
    assert isinstance(user.content, tuple) and isinstance(user.content[0], FrozenDict)


def test_R_J1_a_message_of_an_unknown_role_is_dropped_from_its_list() -> None:
    """AG-UI 1.0 (Processing Model): inside a list, an unrecognisable element "is
    dropped and the list survives", and is named by its path. Alone, such a message has
    no list to leave: decode_message refuses it. (It was kept whole as UnknownMessage.)"""
    raw = {"role": "critic", "id": "x1", "score": [1, 2], "note": {"a": None}}
    hello = {"role": "user", "id": "u1", "content": "hi"}
    event, left = read_frame(json.dumps({"type": "MESSAGES_SNAPSHOT", "messages": [raw, hello]}))
    assert isinstance(event, MessagesSnapshot)
    assert event.messages == (UserMessage(id="u1", content="hi"),)
    assert left == (LeftOut(("messages", 0), "a message of role 'critic'"),)
    inp = decode_run_input({"threadId": "t", "runId": "r", "messages": [hello, raw]})
    assert inp.messages == (UserMessage(id="u1", content="hi"),)
    with pytest.raises(WireError, match=r"at role: AG-UI 1\.0 defines no message of role 'critic'"):
        decode_message(raw)
    with pytest.raises(WireError, match="at id: expected a string"):
        decode_message({"role": "user", "id": 5, "content": "hi"})


def test_content_parts_read_as_ag_ui_1_0_defines_them() -> None:
    """AG-UI 1.0 (Schema: ContentPart; Processing Model): a member a part or source does
    not define is stripped; a part of an unknown type is dropped from the list, and so
    is a media part whose source is of an unknown type; null stands for absent."""
    raw = {
        "id": "u",
        "role": "user",
        "content": [
            {"type": "binary", "mimeType": "image/png", "url": "u"},
            {"type": "text", "text": "look", "id": None, "score": 1},
            {"type": "image", "source": {"type": "s3", "value": "k"}},
            {"type": "video", "source": {"type": "url", "value": "v", "etag": "x"}},
            {"type": "document", "source": {"type": "file", "value": "f", "provider": "openai"}},
            {"type": "audio", "source": {"type": "file", "value": "g", "provider": None}},
        ],
    }
    m = decode_message(raw)
    assert isinstance(m, UserMessage)
    assert m.content == (
        {"type": "text", "text": "look"},
        {"type": "video", "source": {"type": "url", "value": "v"}},
        {"type": "document", "source": {"type": "file", "value": "f", "provider": "openai"}},
        {"type": "audio", "source": {"type": "file", "value": "g"}},  # provider is optional
    )
    tool = decode_message(
        {"id": "t", "role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "42"}]}
    )
    assert isinstance(tool, ToolMessage) and tool.content == ({"type": "text", "text": "42"},)


def test_content_parts_leaves_out_what_ag_ui_does_not_define_unless_strict() -> None:
    """reference.md: ``content_parts(parts)`` reads as a frame's content is read;
    ``strict=True`` refuses instead, as ``send`` does with an application's own parts."""
    parts = [{"type": "text", "text": "a", "score": 1}, {"type": "binary", "url": "u"}]
    assert content_parts(parts) == ({"type": "text", "text": "a"},)
    with pytest.raises(WireError, match=r"^content part 0 at score: AG-UI 1\.0 defines no such"):
        content_parts(parts, strict=True)


@pytest.mark.parametrize(
    ("part", "where"),
    [
        ({"type": "text"}, r"content\[0\]: a text content part needs 'text'"),
        ({"type": "text", "text": ["a"]}, r"content\[0\]\.text: expected a string"),
        ({"type": 3}, r"content\[0\]\.type: expected a string"),
        ({"type": "image", "source": "u"}, r"content\[0\]\.source: expected a source"),
        (
            {"type": "audio", "source": {"type": "data", "value": "x"}},
            r"content\[0\]\.source: a data source needs 'mimeType'",
        ),
        (
            {"type": "image", "source": {"type": "data", "mimeType": "image/png"}},
            r"content\[0\]\.source: a data source needs 'value'",
        ),
        (
            {"type": "document", "source": {"type": "file", "provider": "openai"}},
            r"content\[0\]\.source: a file source needs 'value'",
        ),
        (
            {"type": "image", "source": {"type": "url", "value": "v", "mimeType": 1}},
            r"content\[0\]\.source\.mimeType: expected a string",
        ),
    ],
)
def test_a_malformed_content_part_is_a_wire_error(part: dict[str, Any], where: str) -> None:
    """A defined member with a wrong value is malformed: fatal, not repaired (AG-UI 1.0)."""
    with pytest.raises(WireError, match=where):
        decode_message({"id": "u", "role": "user", "content": [part]})


def test_activities_stay_out_of_the_request() -> None:
    """AG-UI 1.0 (Run Input): activity messages are removed from the run input; the
    rest keep their order."""
    activity = decode_message(
        {"role": "activity", "id": "a1", "activityType": "PLAN", "content": {}}
    )
    hello = UserMessage(id="u1", content="hi")
    inp = RunAgentInput(thread_id="t", run_id="r", messages=(hello, activity, hello))
    assert [m["id"] for m in encode_run_input(inp)["messages"]] == ["u1", "u1"]


def test_a_history_of_only_activities_sends_no_messages() -> None:
    """AG-UI 1.0 (Run Input): activity messages are removed even when nothing else is
    in the history (an agent may render an activity before any message): the request
    carries an empty ``messages``, never the activities."""
    plan = decode_message({"role": "activity", "id": "a1", "activityType": "PLAN", "content": {}})
    steps = decode_message({"role": "activity", "id": "a2", "activityType": "STEP", "content": {}})
    inp = RunAgentInput(thread_id="t", run_id="r", messages=(plan, steps))
    assert encode_run_input(inp)["messages"] == []
    assert json.loads(encode_request(inp))["messages"] == []


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ("nope", "messages"),
        ([1], r"messages\[0\]"),
        ([{"id": "a"}], r"messages\[0\]\.role"),
        ([{"role": "user", "id": "a"}], "'content'"),
        ([{"role": "user", "id": "a", "content": 5}], r"messages\[0\]\.content"),
        ([{"role": "user", "id": "a", "content": ["x"]}], r"messages\[0\]\.content\[0\]"),
        ([{"role": "assistant", "id": 1}], r"messages\[0\]\.id"),
        (
            [{"role": "assistant", "id": "a", "toolCalls": [{"id": "c", "type": "function"}]}],
            "'function'",
        ),
        (
            [
                {
                    "role": "assistant",
                    "id": "a",
                    "toolCalls": [{"id": "c", "type": "function", "function": {"name": 1}}],
                }
            ],
            r"toolCalls\[0\]\.function\.name",
        ),
        (
            [{"role": "assistant", "id": "a", "toolCalls": [{"id": "c", "function": {}}]}],
            r"toolCalls\[0\]: missing required field 'type'",
        ),
        # A call that is not an object is malformed: never dropped as of an unknown type.
        (
            [{"role": "assistant", "id": "a", "toolCalls": [5]}],
            r"toolCalls\[0\]: expected a tool call \(an object\)",
        ),
        (
            [{"role": "assistant", "id": "a", "toolCalls": [None]}],
            r"toolCalls\[0\]: expected a tool call \(an object\), got null",
        ),
        ([{"role": "activity", "id": "a", "activityType": "p", "content": []}], "content"),
    ],
)
def test_messages_snapshot_must_hold_valid_messages(messages: Any, where: str) -> None:
    with pytest.raises(WireError, match="MESSAGES_SNAPSHOT") as info:
        decode_event({"type": "MESSAGES_SNAPSHOT", "messages": messages})
    assert info.match(where)


# -- run input ----------------------------------------------------------------------------


def test_run_input_encoding_is_understood_by_the_reference_sdk() -> None:
    """R-B6: camelCase, state always present, resume entries in wire form."""
    inp = RunAgentInput(
        thread_id="t",
        run_id="r",
        state=freeze_parsed({"n": 1}),
        messages=(UserMessage(id="u", content="hi"),),
        tools=(
            Tool(name="w", description="weather", parameters=freeze_parsed({"type": "object"})),
        ),
        context=(Context(description="tz", value="UTC"),),
        forwarded_props=freeze_parsed({"f": [1]}),
        resume=(
            ResumeEntry(interrupt_id="a", status="resolved", payload={"approved": False}),  # type: ignore[arg-type]
            ResumeEntry(interrupt_id="b", status="resolved", payload=None),
            ResumeEntry(interrupt_id="c", status="resolved", payload=0),
            ResumeEntry(interrupt_id="d", status="cancelled", metadata=freeze_parsed({"s": 1})),  # type: ignore[arg-type]
        ),
        parent_run_id="p",
    )
    wire = json.loads(dumps(encode_run_input(inp)))
    assert wire == {
        "threadId": "t",
        "runId": "r",
        "state": {"n": 1},
        "messages": [{"role": "user", "id": "u", "content": "hi"}],
        "tools": [{"name": "w", "description": "weather", "parameters": {"type": "object"}}],
        "context": [{"description": "tz", "value": "UTC"}],
        "forwardedProps": {"f": [1]},
        "resume": [
            {"interruptId": "a", "status": "resolved", "payload": {"approved": False}},
            {"interruptId": "b", "status": "resolved", "payload": None},
            {"interruptId": "c", "status": "resolved", "payload": 0},
            {"interruptId": "d", "status": "cancelled", "metadata": {"s": 1}},
        ],
        "parentRunId": "p",
        "protocolVersion": "1.0",
    }
    ref = agui.RunAgentInput.model_validate(wire)
    assert ref.resume is not None and ref.resume[3].status == "cancelled"
    assert decode_run_input(wire) == inp


def test_run_input_minimal_and_absent_fields() -> None:
    """R-B1: an absent payload is left out. A null state is left out too: AG-UI 1.0
    (Schema: RunAgentInput) takes any state "except null", and a whole optional field
    set to null "MUST be omitted" (The Event Model); an absent state reads as ``{}``."""
    inp = RunAgentInput(
        thread_id="t",
        run_id="r",
        resume=(ResumeEntry(interrupt_id="a", status="resolved"),),
    )
    wire = encode_run_input(inp)
    assert "state" not in wire
    assert encode_run_input(attrs.evolve(inp, state=FrozenDict()))["state"] == {}
    assert "forwardedProps" not in wire and "parentRunId" not in wire
    assert wire["resume"] == [{"interruptId": "a", "status": "resolved"}]
    assert wire["tools"] == [] and wire["context"] == []
    assert decode_run_input(json.loads(dumps(wire))).resume == (
        ResumeEntry(interrupt_id="a", status="resolved", payload=ABSENT),
    )
    assert "resume" not in encode_run_input(RunAgentInput(thread_id="t", run_id="r"))


def test_run_input_from_the_reference_sdk() -> None:
    ref = agui.RunAgentInput(thread_id="t", run_id="r", messages=_messages())
    inp = decode_run_input(json.loads(ref.model_dump_json(by_alias=True)))
    assert inp.tools == () and inp.context == () and inp.resume is None
    assert inp.protocol_version is None  # absent stays absent
    assert len(inp.messages) == len(_messages())
    # ... and is written back absent: a null protocolVersion "MUST be omitted".
    assert "protocolVersion" not in encode_run_input(inp)


def test_null_tools_and_context_read_as_none() -> None:
    """A JSON writer of None sends null for them: absent means none."""
    inp = decode_run_input({"threadId": "t", "runId": "r", "tools": None, "context": None})
    assert inp.tools == () and inp.context == ()


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"threadId": 1}, "threadId"),
        ({"messages": {}}, "messages"),
        ({"tools": [{"name": "x"}]}, "'description'"),
        ({"tools": "x"}, "at tools: expected an array of tools, got the string 'x'"),
        ({"tools": [{"name": 1}]}, r"at tools\[0\]\.name: expected a string"),
        ({"context": {}}, "at context: expected an array of context entries"),
        ({"resume": [{"interruptId": "a", "status": "maybe"}]}, r"resume\[0\]\.status"),
        ({"resume": [{"interruptId": "a", "status": "resolved", "metadata": 1}]}, "metadata"),
    ],
)
def test_bad_run_input(patch: dict[str, Any], where: str) -> None:
    with pytest.raises(WireError, match=where):
        decode_run_input({"threadId": "t", "runId": "r", "messages": [], **patch})


# -- R-A6: malformed interrupt outcomes -----------------------------------------------------


def finished(outcome: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": outcome}


def interrupts(*items: Any) -> dict[str, Any]:
    return finished({"type": "interrupt", "interrupts": list(items)})


OK = {"id": "i1", "reason": "approval"}

R_A6_CASES = {
    "missing list": (finished({"type": "interrupt"}), "missing required field 'interrupts'"),
    "null list": (finished({"type": "interrupt", "interrupts": None}), "got null"),
    "not a list": (finished({"type": "interrupt", "interrupts": {"id": "x"}}), "an object"),
    "empty list": (interrupts(), "at least one interrupt"),
    "duplicate ids": (interrupts(OK, {"id": "i2", "reason": ""}, OK), "duplicate interrupt id"),
    "item not an object": (interrupts("i1"), r"interrupts\[0\]"),
    "id missing": (interrupts({"reason": "r"}), "missing required field 'id'"),
    "id not a string": (interrupts({"id": 7, "reason": "r"}), r"interrupts\[0\]\.id"),
    "id null": (interrupts({"id": None, "reason": "r"}), r"interrupts\[0\]\.id"),
    "reason missing": (interrupts({"id": "i"}), "missing required field 'reason'"),
    "reason not a string": (interrupts({**OK, "reason": ["r"]}), r"\.reason"),
    "message not a string": (interrupts({**OK, "message": 1}), r"\.message"),
    "tool_call_id not a string": (interrupts({**OK, "toolCallId": True}), r"\.toolCallId"),
    "subagent_run_id not a string": (interrupts({**OK, "subagentRunId": {}}), "subagentRunId"),
    "response_schema not an object": (interrupts({**OK, "responseSchema": True}), "responseS"),
    "response_schema an array": (interrupts({**OK, "responseSchema": []}), "responseSchema"),
    "metadata not an object": (interrupts({**OK, "metadata": "m"}), r"\.metadata"),
    "expires_at not a string": (interrupts({**OK, "expiresAt": 1893456000}), "expiresAt"),
    "expires_at date only": (interrupts({**OK, "expiresAt": "2030-01-01"}), "date alone"),
    "expires_at no zone": (interrupts({**OK, "expiresAt": "2030-01-01T00:00:00"}), "zone"),
    "expires_at Feb 30": (interrupts({**OK, "expiresAt": "2026-02-30T00:00:00Z"}), "no day 30"),
    "expires_at hour 25": (interrupts({**OK, "expiresAt": "2026-01-01T25:00:00Z"}), "25:00"),
    "expires_at garbage": (interrupts({**OK, "expiresAt": "tomorrow"}), "RFC 3339"),
    "second item bad": (interrupts(OK, {"id": "i2", "reason": 3}), r"interrupts\[1\]\.reason"),
    "outcome not an object": (finished("interrupt"), "outcome"),
    "outcome type missing": (finished({"interrupts": [OK]}), r"outcome\.type"),
}


@pytest.mark.parametrize("case", list(R_A6_CASES), ids=list(R_A6_CASES))
def test_R_A6_malformed_interrupt_outcome_is_a_wire_error(case: str) -> None:
    """R-A6: every malformed interrupt outcome is refused with a message saying where."""
    obj, pattern = R_A6_CASES[case]
    with pytest.raises(WireError, match="malformed RUN_FINISHED event") as info:
        decode_event(obj)
    assert info.match(pattern)
    assert isinstance(info.value, ValueError)
    with pytest.raises(WireError):
        decode_frame(json.dumps(obj))


def test_R_A6_well_formed_interrupts_with_offsets_and_fractions() -> None:
    e = decode_event(
        interrupts(
            {**OK, "expiresAt": "2030-01-01T01:30:00.25+01:30"},
            {"id": "i2", "reason": "", "expiresAt": "2030-01-01t00:00:00z"},
        )
    )
    assert isinstance(e, RunFinished) and isinstance(e.outcome, InterruptOutcome)
    assert [i.expires_at_epoch for i in e.outcome.interrupts] == [1893456000.25, 1893456000.0]


def test_R_A3_absent_stays_absent_and_empty_strings_are_kept() -> None:
    """R-A3: optional fields absent from the wire are None; "" is kept; null reads as absent."""
    e = decode_event(interrupts({"id": "", "reason": "", "message": "", "toolCallId": ""}))
    assert isinstance(e, RunFinished) and isinstance(e.outcome, InterruptOutcome)
    (it,) = e.outcome.interrupts
    assert (it.id, it.reason, it.message, it.tool_call_id) == ("", "", "", "")
    assert it.response_schema is None and it.expires_at is None and it.metadata is None
    assert it.subagent_run_id is None
    wire = json.loads(dumps(encode_event(e)))
    assert wire["outcome"]["interrupts"] == [
        {"id": "", "reason": "", "message": "", "toolCallId": ""}
    ]
    nulls = decode_event(interrupts({**OK, "message": None, "metadata": None}))
    assert isinstance(nulls, RunFinished) and isinstance(nulls.outcome, InterruptOutcome)
    assert nulls.outcome.interrupts[0] == Interrupt(id="i1", reason="approval")


def test_R_A4_schema_and_metadata_are_deeply_immutable() -> None:
    """R-A4: frozen, thaw gives an equal plain copy, the source dict cannot reach them."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    }
    meta: dict[str, Any] = {"tags": ["a", {"b": 1}]}
    source = interrupts({**OK, "responseSchema": schema, "metadata": meta})
    e = decode_event(source)
    assert isinstance(e, RunFinished) and isinstance(e.outcome, InterruptOutcome)
    it = e.outcome.interrupts[0]
    assert isinstance(it.response_schema, FrozenDict) and isinstance(it.metadata, FrozenDict)
    props = it.response_schema["properties"]
    assert isinstance(props, FrozenDict)
    assert isinstance(it.response_schema["required"], tuple)
    with pytest.raises(TypeError):
        it.response_schema["type"] = "array"
    with pytest.raises(TypeError):
        props["ok"] = FrozenDict()
    with pytest.raises(TypeError):
        it.metadata.clear()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        it.reason = "x"  # type: ignore[misc]
    plain = thaw(it.response_schema)
    assert plain == schema and type(plain) is dict and type(plain["required"]) is list
    assert thaw(it.metadata) == meta
    plain["type"] = "changed"
    schema["properties"]["ok"]["type"] = "string"
    schema["required"].append("more")
    meta["tags"][1]["b"] = 2
    source["outcome"]["interrupts"].clear()
    assert thaw(it.response_schema) == {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    }
    assert it.metadata == {"tags": ("a", {"b": 1})}
    assert len(e.outcome.interrupts) == 1


def test_interrupt_constructed_directly_checks_expires_at() -> None:
    assert Interrupt(id="i", reason="", expires_at="1970-01-01T00:00:10Z").expires_at_epoch == 10
    with pytest.raises(ValueError, match="no day 30"):
        Interrupt(id="i", reason="", expires_at="2026-02-30T00:00:00Z")


# -- R-J1: tolerance --------------------------------------------------------------------------


def test_R_J1_unknown_event_types_are_kept() -> None:
    raw = {"type": "FUTURE_THING", "x": [1, {"y": 2}]}
    e = decode_event(raw)
    assert isinstance(e, UnknownEvent) and e.type == "FUTURE_THING" and e.TYPE == "FUTURE_THING"
    assert thaw(e.raw) == raw and isinstance(e.raw["x"], tuple)
    assert json.loads(dumps(encode_event(e))) == raw


def test_R_J1_unknown_fields_are_ignored() -> None:
    e = decode_frame(
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d",'
        '"future":{"deep":[1,2]},"anotherField":null}'
    )
    assert e == TextMessageContent(message_id="m", delta="d")
    i = decode_event(interrupts({**OK, "priority": 5}))
    assert isinstance(i, RunFinished) and isinstance(i.outcome, InterruptOutcome)
    assert i.outcome.interrupts == (Interrupt(id="i1", reason="approval"),)


def test_R_J1_what_a_reading_strips_is_named_by_its_path() -> None:
    """AG-UI 1.0 (Processing Model): a member nothing defines, a content part of an
    unknown type and a media part whose source is of one are stripped, each named by its
    path for the warning, and so is a message of an unknown role (dropped from its
    list); what is kept whole (an unknown outcome or event type) and what the schema
    leaves open (patch operations, state, metadata) is not."""
    snapshot = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {
                "id": "u",
                "role": "user",
                "mood": "x",
                "content": [
                    {"type": "text", "text": "a", "lang": "en"},
                    {"type": "hologram"},
                    {"type": "image", "source": {"type": "ipfs", "value": "v"}, "alt": "a"},
                    {"type": "audio", "source": {"type": "url", "value": "v", "etag": "e"}},
                ],
            },
            {
                "id": "a",
                "role": "assistant",
                "metadata": {"free": 1},
                "toolCalls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}", "strict": True},
                    }
                ],
            },
            {"id": "n", "role": "narrator", "anything": 1},
        ],
    }
    event, left = read_frame(json.dumps(snapshot))
    assert isinstance(event, MessagesSnapshot)
    assert left == (
        LeftOut(("messages", 0), "member 'mood'"),
        LeftOut(("messages", 0, "content", 0), "member 'lang'"),
        LeftOut(("messages", 0, "content", 1), "a content part of type 'hologram'"),
        LeftOut(("messages", 0, "content", 2), "an image part with a source of type 'ipfs'"),
        LeftOut(("messages", 0, "content", 3, "source"), "member 'etag'"),
        LeftOut(("messages", 1, "toolCalls", 0, "function"), "member 'strict'"),
        LeftOut(("messages", 2), "a message of role 'narrator'"),
    )
    assert left_out_note("MESSAGES_SNAPSHOT", left) == (
        "MESSAGES_SNAPSHOT: left out what AG-UI 1.0 does not define: member 'mood' at "
        "messages[0], member 'lang' at messages[0].content[0], a content part of type "
        "'hologram' at messages[0].content[1] and 4 more"
    )
    assert read_frame(json.dumps(interrupts({**OK, "priority": 5})))[1] == (
        LeftOut(("outcome", "interrupts", 0), "member 'priority'"),
    )
    assert read_frame(json.dumps(finished({"type": "cancelled", "why": "user"})))[1] == (
        LeftOut(("outcome",), "member 'why'"),
    )
    started = {
        "type": "RUN_STARTED",
        "threadId": "t",
        "runId": "r",
        "input": {
            "threadId": "t",
            "runId": "r",
            "tools": [{"name": "n", "description": "d", "v": 2}],
        },
    }
    assert read_frame(json.dumps(started))[1] == (LeftOut(("input", "tools", 0), "member 'v'"),)
    nothing_left_out = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "d", "timestamp": 1},
        {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/a", "value": 1}]},
        {"type": "STATE_SNAPSHOT", "snapshot": {"any": {"thing": 1}}},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {"type": "later", "x": 1},
        },
        {"type": "FUTURE_THING", "x": 1},
        {"type": "CUSTOM", "name": "n", "value": {"free": 1}, "rawEvent": {"free": 2}},
    ]
    for raw in nothing_left_out:
        assert read_frame(json.dumps(raw))[1] == (), raw


def test_what_a_reading_strips_names_at_most_40_characters_of_a_name() -> None:
    """A warning names what was stripped briefly: an agent's long key, role or type
    shows its first 40 characters and its length, in every kind of note."""
    name = "n" * 41
    cut = f"{name[:40]!r}… (41 chars)"
    snapshot = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {
                "id": "u",
                "role": "user",
                name: 1,
                "content": [
                    {"type": "text", "text": "a", name: 1},
                    {"type": name},
                    {"type": "image", "source": {"type": name, "value": "v"}},
                    {"type": "audio", "source": {"type": "url", "value": "v", name: 1}},
                ],
            },
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {"id": "c", "type": name, "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"id": "x", "role": name},
        ],
    }
    assert read_frame(json.dumps(snapshot))[1] == (
        LeftOut(("messages", 0), f"member {cut}"),
        LeftOut(("messages", 0, "content", 0), f"member {cut}"),
        LeftOut(("messages", 0, "content", 1), f"a content part of type {cut}"),
        LeftOut(("messages", 0, "content", 2), f"an image part with a source of type {cut}"),
        LeftOut(("messages", 0, "content", 3, "source"), f"member {cut}"),
        LeftOut(("messages", 1, "toolCalls", 0), f"a tool call of type {cut}"),
        LeftOut(("messages", 2), f"a message of role {cut}"),
    )
    with pytest.raises(WireError) as info:
        decode_message({"id": "x", "role": name})
    assert str(info.value).endswith(f"defines no message of role {cut}")


@pytest.mark.parametrize("role", ["narrator", "", "User"])
@pytest.mark.parametrize(
    "raw",
    [
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": "x"},
    ],
    ids=lambda raw: raw["type"],
)
def test_R_J1_an_events_role_ag_ui_does_not_define_is_stripped_and_named(
    raw: dict[str, Any], role: str
) -> None:
    """An optional role outside AG-UI 1.0's closed set reads as absent, with a note,
    for an event of the common shape (the shortcut's) as for any other."""
    for frame in (raw, {**raw, "timestamp": 1}):
        event, left = read_frame(json.dumps({**frame, "role": role}))
        assert event == decode_event(frame)
        assert left == (LeftOut(("role",), f"value {role!r}"),)
    assert read_frame(json.dumps({**raw, "role": "user"})) == (
        decode_event({**raw, "role": "user"}),
        (),
    )
    assert decode_frame(json.dumps({**raw, "role": "user"})).role == "user"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("frame", "where", "what"),
    [
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "K"}, ("role",), "value"),
        ({"type": "RUN_ERROR", "message": "m", "usage": [{"K": 1}]}, ("usage", 0), "member"),
        (
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "K"}},
            ("outcome",),
            "an outcome of type",
        ),
        (
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "s",
                "outcome": {"type": "success", "K": 1},
            },
            ("outcome",),
            "member",
        ),
    ],
)
def test_R_J1_what_a_reading_strips_is_named_whole_up_to_40_characters(
    frame: dict[str, Any], where: tuple[Any, ...], what: str
) -> None:
    """The warning quotes a stripped name or value whole up to 40 characters, and cuts a
    longer one with its length (an agent's long keys stay readable in one line)."""
    for n, shown in ((40, repr("k" * 40)), (41, repr("k" * 40) + "… (41 chars)")):
        text = json.dumps(frame).replace('"K"', json.dumps("k" * n))
        assert read_frame(text)[1] == (LeftOut(where, f"{what} {shown}"),)


def test_optional_nulls_read_as_absent() -> None:
    """The older Python SDK wrote null for every unset optional field."""
    e = decode_event(
        {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": "m",
            "delta": "d",
            "timestamp": None,
            "rawEvent": None,
            "metadata": None,
            "subagentRunId": None,
        }
    )
    assert e == TextMessageContent(message_id="m", delta="d")


_WIRE_VALUES = st.one_of(
    st.text(max_size=5),
    st.none(),
    st.integers(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.lists(st.dictionaries(st.sampled_from(["op", "path", "id", "role"]), st.text(max_size=3))),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(
    st.sampled_from(EVENT_TYPES),
    st.dictionaries(
        st.sampled_from(
            [
                "messageId",
                "delta",
                "toolCallId",
                "toolCallName",
                "parentMessageId",
                "role",
                "threadId",
                "runId",
                "message",
                "code",
                "stepName",
                "name",
                "timestamp",
                "subagentRunId",
                "snapshot",
                "messages",
                "content",
                "activityType",
                "patch",
                "value",
                "event",
                "source",
                "replace",
                "subtype",
                "entityId",
                "encryptedValue",
            ]
        ),
        _WIRE_VALUES,
        max_size=7,
    ),
)
@settings(max_examples=400)
def test_the_shortcut_for_common_events_decodes_like_the_general_path(
    cls: Any, fields: dict[str, Any]
) -> None:
    """Events of the common shape (required fields, optional strings) skip the general decoder;
    an extra unknown key (ignored by AG-UI) forces the general one: both must agree,
    on the event built and on the error raised."""
    obj = {"type": cls.TYPE, **fields}
    results = []
    for candidate in (obj, {**obj, "zzUnknownKey": 0}):
        try:
            results.append(decode_event(candidate))
        except WireError as exc:
            results.append(str(exc))
    assert results[0] == results[1]
    if not isinstance(results[0], str):
        assert type(results[0]) is cls


# -- strictness and hostile input ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "pattern"),
    [
        ([1, 2], "must be a JSON object"),
        ("TEXT_MESSAGE_CONTENT", "must be a JSON object"),
        (None, "must be a JSON object"),
        ({}, 'string "type"'),
        ({"type": 5}, 'string "type"'),
        ({"type": None}, 'string "type"'),
        ({"type": ["RUN_STARTED"]}, 'string "type"'),
        ({"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}, "missing required field 'messageId'"),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}, "missing required field 'delta'"),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": 1, "delta": "x"}, "at messageId"),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": None}, "at delta: .*null"),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": True}, "boolean"),
        (
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "", "timestamp": True},
            "at timestamp: expected a number",
        ),
        (
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "", "timestamp": "1"},
            "at timestamp",
        ),
        ({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": 3}, "TOOL_CALL_ARGS.*delta"),
        (
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c",
                "toolCallName": "n",
                "parentMessageId": 5,
            },
            "at parentMessageId: expected a string, got the number 5",
        ),
        (
            {"type": "STEP_STARTED", "stepName": "s", "subagentRunId": True},
            "at subagentRunId: expected a string, got the boolean true",
        ),
        ({"type": "STATE_DELTA", "delta": {"op": "add"}}, "at delta: expected an array"),
        ({"type": "STATE_DELTA", "delta": [1]}, r"at delta\[0\]: expected an object"),
        ({"type": "STATE_DELTA"}, "missing required field 'delta'"),
        ({"type": "STATE_SNAPSHOT"}, "missing required field 'snapshot'"),
        ({"type": "CUSTOM", "name": "n"}, "missing required field 'value'"),
        (
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "a", "content": 1},
            "content",
        ),
        ({"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "a", "patch": [[]]}, "patch"),
        (
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "m",
                "activityType": "a",
                "content": {},
                "replace": 1,
            },
            "replace",
        ),
        (
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": {"threadId": "t"}},
            r"input",
        ),
        ({"type": "RUN_ERROR", "message": "m", "usage": {}}, "usage"),
        ({"type": "RUN_ERROR", "message": "m", "metadata": []}, "metadata"),
        ({"type": "MESSAGES_SNAPSHOT"}, "missing required field 'messages'"),
        (
            {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": 1},
            "content",
        ),
        ({"type": "SUBAGENT_STARTED", "name": "n"}, "subagentRunId"),
    ],
)
def test_malformed_events_raise_wire_error(obj: Any, pattern: str) -> None:
    with pytest.raises(WireError, match=pattern):
        decode_event(obj)


def test_a_wire_error_holds_the_event_type_the_path_and_the_reason_apart() -> None:
    """A driver reporting a bad frame can name its parts without parsing the message."""
    with pytest.raises(WireError) as info:
        decode_event({"type": "STATE_DELTA", "delta": [{"op": "add"}, "x"]})
    err = info.value
    assert (err.event_type, err.path, err.reason) == (
        "STATE_DELTA",
        "delta[1]",
        "expected an object, got the string 'x'",
    )
    assert str(err) == f"malformed STATE_DELTA event: at delta[1]: {err.reason}"
    with pytest.raises(WireError) as info:
        decode_frame("[]")
    assert (info.value.event_type, info.value.path) == (None, "")


@pytest.mark.parametrize(
    ("text", "got"),
    [
        ("{}", "none"),
        ('{"type":null}', "null"),
        ('{"type":["RUN_STARTED"]}', "an array of 1 item"),
        ('{"type":{"RUN_STARTED":1}}', "an object"),
        ('{"type":5}', "the number 5"),
    ],
)
def test_a_frame_without_a_string_type_says_what_it_has(text: str, got: str) -> None:
    """Through decode_frame too (its shortcut first), a frame whose type is missing, null or
    not a string is a WireError saying which, never another exception (an array or an
    object cannot even be looked up as a type)."""
    with pytest.raises(WireError) as info:
        decode_frame(text)
    assert str(info.value) == f'an AG-UI event needs a string "type", got {got}'


@pytest.mark.parametrize(
    "cls",
    [
        c
        for c in EVENT_TYPES
        if any(a.default is attrs.NOTHING and a.name != "subagent_run_id" for a in attrs.fields(c))
    ],
    ids=lambda c: c.TYPE,
)
def test_an_event_of_only_its_optional_members_is_missing_its_required_ones(cls: Any) -> None:
    """A frame with every member all events may carry, and none its type requires, is
    malformed: never an event whose required fields hold nothing."""
    optional = {"timestamp": 1, "rawEvent": {}, "metadata": {}, "subagentRunId": "s"}
    with pytest.raises(WireError, match="missing required field"):
        decode_frame(json.dumps({"type": cls.TYPE, **optional}))


def test_error_messages_never_dump_huge_values() -> None:
    huge = "x" * 100_000
    for obj in (
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": huge},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": [huge] * 1000, "delta": ""},
        interrupts({**OK, "expiresAt": huge}),
        interrupts({"id": huge, "reason": ""}, {"id": huge, "reason": ""}),
        {"type": "RUN_ERROR", "message": 1, huge: huge},
    ):
        with pytest.raises(WireError) as info:
            decode_event(obj)
        assert len(str(info.value)) < 300, str(info.value)[:400]


def test_an_error_quotes_a_string_of_up_to_60_characters_whole() -> None:
    for n, shown in ((60, "'" + "x" * 60 + "'"), (61, "'" + "x" * 60 + "'… (61 chars)")):
        with pytest.raises(WireError) as info:
            decode_event({"type": "STATE_DELTA", "delta": "x" * n})
        assert info.value.reason == f"expected an array of objects, got the string {shown}"


@pytest.mark.parametrize(
    ("value", "told"),
    [
        (None, "null"),
        ([], "an array of 0 items"),
        (["m"], "an array of 1 item"),
        (["m", "n"], "an array of 2 items"),
        ({"id": "m"}, "an object"),
        (("m",), "a tuple"),  # decode_event given Python values, not parsed JSON
        (5, "the number 5"),
        (1.5, "the number 1.5"),
        (-0.0, "the number -0.0"),
    ],
)
def test_an_error_names_the_kind_of_value_given_for_a_string(value: Any, told: str) -> None:
    """An array by its length, an object as such, a number by its digits shown bare:
    'got the number '5'' would read as if the agent had sent the string "5"."""
    with pytest.raises(WireError) as info:
        decode_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": value, "delta": ""})
    assert info.value.reason == f"expected a string, got {told}"


@pytest.mark.parametrize(
    ("timestamp", "told"),
    [
        (False, "expected a number, got the boolean false"),
        (True, "expected a number, got the boolean true"),
        (2**53, "of zero, got the number 9007199254740992"),
        (10**29, "of zero, got the number 1" + "0" * 29),  # 30 digits: whole
        (10**30, "of zero, got the number 1" + "0" * 29 + r"… \(31 chars\)"),
        # 78 digits, but under 2**256: its digits are still worth showing (cut short)
        (2**256 - 1, r"of zero, got the number 11579208923\d{19}… \(78 chars\)"),
        (2**256, "of zero, got a number of more than 77 digits"),
    ],
)
def test_an_error_names_the_kind_of_value_it_refused(timestamp: Any, told: str) -> None:
    with pytest.raises(WireError, match=f"at timestamp: .*{told}$"):
        decode_event({"type": "STEP_STARTED", "stepName": "s", "timestamp": timestamp})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        "nope",
        '{"type":"RUN_STARTED"} trailing',
        '{"type":"STATE_SNAPSHOT","snapshot":NaN}',
        '{"type":"STATE_SNAPSHOT","snapshot":Infinity}',
        '{"type":"STATE_SNAPSHOT","snapshot":-Infinity}',
        # Valid JSON past a float's range: it read as inf, committed, then every request
        # failed to encode, the user blamed ("replace the value").
        '{"type":"STATE_SNAPSHOT","snapshot":{"a":1e400}}',
        '{"type":"STATE_SNAPSHOT","snapshot":[-1E+999]}',
        '{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"x","role":"critic","n":1e999}]}',
        ' {"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{"n":2e308}}',
        '{"type":"STATE_SNAPSHOT","snapshot":1' + "0" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        "[" * 100_000,
        '{"type":"STATE_SNAPSHOT","snapshot":' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"type":"STATE_SNAPSHOT","snapshot":' + '{"a":' * 50_000 + "1" + "}" * 50_001,
        '{"type":"STATE_SNAPSHOT","snapshot":'
        + "[" * (MAX_DEPTH + 1)
        + "]" * (MAX_DEPTH + 1)
        + "}",
        "[]",
        "42",
        # A whole event with anything before it is not one JSON value either.
        'x{"type":"STEP_STARTED","stepName":"s"}',
        '[{"type":"STEP_STARTED","stepName":"s"}',
    ],
    ids=lambda t: t[:40],
)
def test_hostile_frames_raise_wire_error(text: str) -> None:
    with pytest.raises(WireError):
        decode_frame(text)


@pytest.mark.parametrize("lead", ["", " "])  # the fast scanner, then the general decoder
def test_a_huge_integer_is_named_not_answered_with_pythons_advice(lead: str) -> None:
    """The error says what is wrong with the frame, not Python's own advice to call
    sys.set_int_max_str_digits(), which an application cannot act on for a frame."""
    text = lead + '{"type":"STATE_SNAPSHOT","snapshot":{"n":' + "9" * 5000 + "}}"
    with pytest.raises(WireError, match="an integer of more than 4300 digits") as info:
        decode_frame(text)
    assert "set_int_max_str_digits" not in str(info.value)


@pytest.mark.parametrize("lead", ["", " "])  # the fast scanner, then the general decoder
def test_a_number_past_a_floats_range_is_named_by_its_first_40_characters(lead: str) -> None:
    number = "1." + "2" * 60 + "e400"
    with pytest.raises(WireError) as info:
        decode_frame(lead + '{"type":"STATE_SNAPSHOT","snapshot":' + number + "}")
    assert str(info.value) == (
        f"the frame is not JSON we accept: the number {number[:40]} is past a float's range"
        " (1.8e308)"
    )


def test_text_that_is_not_json_is_named_by_the_json_decoders_reason() -> None:
    with pytest.raises(WireError) as info:
        decode_frame("nope")
    assert str(info.value) == "the frame is not JSON: 'Expecting value: line 1 column 1 (char 0)'"


def test_a_wide_frame_with_more_brackets_than_the_depth_bound_is_accepted() -> None:
    """The bound is on depth, not on how many objects and arrays a frame holds."""
    items = [{"n": [n]} for n in range(MAX_DEPTH)]
    e = decode_frame(dumps({"type": "STATE_SNAPSHOT", "snapshot": {"items": items}}))
    assert e.snapshot == fz({"items": items})  # type: ignore[union-attr]


@pytest.mark.parametrize("lead", ["", " "])  # the fast scanner, then the general decoder
def test_a_frame_may_nest_256_levels_as_documented_and_no_more(lead: str) -> None:
    """The reference documents MAX_DEPTH as 256: an agent may rely on exactly that."""
    assert MAX_DEPTH == 256

    def frame(levels: int) -> str:  # the event object is the first level
        inner = levels - 1
        return lead + '{"type":"STATE_SNAPSHOT","snapshot":' + "[" * inner + "]" * inner + "}"

    assert isinstance(decode_frame(frame(256)).snapshot, tuple)  # type: ignore[union-attr]
    with pytest.raises(WireError, match="nested deeper than 256 levels"):
        decode_frame(frame(257))


def test_nesting_up_to_the_bound_is_accepted_in_a_frame_with_more_brackets() -> None:
    """The exact depth walk runs only past MAX_DEPTH brackets: there, too, a frame nesting
    exactly MAX_DEPTH levels is read (one more is refused, above)."""
    depth = MAX_DEPTH - 2  # inside the event object and the snapshot's outer array
    text = '{"type":"STATE_SNAPSHOT","snapshot":[' + "[" * depth + "]" * depth + ",{}]}"
    assert text.count("[") + text.count("{") > MAX_DEPTH
    e = decode_frame(text)
    assert e.snapshot[1] == fz({})  # type: ignore[union-attr,index]


def test_deep_nesting_given_to_decode_event_is_a_wire_error() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(WireError):
        decode_event({"type": "STATE_SNAPSHOT", "snapshot": deep})


def test_deep_nesting_given_to_decode_message_or_decode_run_input_is_a_wire_error() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(WireError, match=r"^the message is nested too deeply$"):
        decode_message({"id": "u", "role": "user", "content": "x", "metadata": {"d": deep}})
    with pytest.raises(WireError, match=r"^the run input is nested too deeply$"):
        decode_run_input({"threadId": "t", "runId": "r", "state": deep})


def test_frames_with_surrounding_whitespace_decode() -> None:
    assert decode_frame(' \n{"type":"STEP_STARTED","stepName":"s"}\r\n ').TYPE == "STEP_STARTED"


def test_decode_frame_refuses_non_text() -> None:
    with pytest.raises(WireError):
        decode_frame(b'{"type":"RUN_STARTED"}')  # type: ignore[arg-type]


def test_decoded_json_is_deeply_frozen_like_freeze_parsed() -> None:
    snapshot = {"a": [1, {"b": [None, True, 1.5, "s", {"c": {}}]}], "d": {}}
    e = decode_event({"type": "STATE_SNAPSHOT", "snapshot": snapshot})
    frozen = freeze_parsed(snapshot)
    assert e.snapshot == frozen  # type: ignore[union-attr]

    def shapes(v: Any) -> Any:
        if isinstance(v, dict):
            return (type(v), {k: shapes(x) for k, x in v.items()})
        if isinstance(v, tuple | list):
            return (type(v), [shapes(x) for x in v])
        return type(v)

    assert shapes(e.snapshot) == shapes(frozen)  # type: ignore[union-attr]
    d = decode_event({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/x", "value": [1]}]})
    assert isinstance(d, StateDelta)
    assert d.delta == ({"op": "add", "path": "/x", "value": (1,)},)
    assert isinstance(d.delta[0], FrozenDict) and isinstance(d.delta[0]["value"], tuple)


def test_encode_event_hands_back_the_events_own_frozen_json_values() -> None:
    """encode_event's JSON values are the frozen ones the event holds (as documented),
    not copies into dicts and lists."""
    e = decode_frame(
        '{"type":"CUSTOM","name":"n","value":{"a":[1,{"b":2}]},"rawEvent":[1,[2]],"timestamp":5}'
    )
    out = encode_event(e)
    assert out["value"] is e.value  # type: ignore[union-attr]
    assert out["rawEvent"] is e.raw_event
    assert isinstance(out["value"], FrozenDict) and isinstance(out["rawEvent"], tuple)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
        max_leaves=30,
    )
)
def test_any_json_value_round_trips_through_custom(value: Any) -> None:
    text = dumps({"type": "CUSTOM", "name": "n", "value": value})
    e = decode_frame(text)
    assert e.value == freeze_parsed(json.loads(text)["value"])  # type: ignore[union-attr]
    assert dumps(encode_event(e)) == text


@given(st.text(max_size=40))
def test_arbitrary_text_never_escapes_as_another_exception(text: str) -> None:
    with contextlib.suppress(WireError):
        decode_frame(text)


def test_dumps_is_compact_deterministic_and_strict() -> None:
    assert (
        dumps({"a": [1, "é"], "b": FrozenDict({"c": (None,)})}) == '{"a":[1,"é"],"b":{"c":[null]}}'
    )
    with pytest.raises(ValueError):
        dumps(float("nan"))


def test_event_classes_are_frozen_with_type_names() -> None:
    e = TextMessageContent(message_id="m", delta="d")
    assert e.TYPE == "TEXT_MESSAGE_CONTENT"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        e.delta = "x"  # type: ignore[misc]
    assert encode_event(e) == {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "d"}


# -- RFC 3339 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01T00:00:00+00:00", 0.0),
        ("1970-01-01T00:00:00-00:00", 0.0),
        ("1970-01-01T01:00:00+01:00", 0.0),
        ("1969-12-31T23:59:59Z", -1.0),
        ("2024-02-29T12:00:00Z", 1709208000.0),
        ("2000-02-29T00:00:00Z", 951782400.0),
        ("2030-01-01T00:00:00.5Z", 1893456000.5),
        ("2030-01-01t00:00:00z", 1893456000.0),
        ("2026-03-01T05:30:00+05:30", 1772323200.0),
        ("2026-02-28T23:59:59-11:59", 1772366339.0),
        ("2016-12-31T23:59:60Z", 1483228799.999999),  # leap second: clamped
        ("2016-12-31T15:59:60-08:00", 1483228799.999999),  # the same, in another zone
        ("2017-01-01T05:29:60+05:30", 1483228799.999999),  # and east of UTC
        ("2015-06-30T23:59:60Z", 1435708799.999999),
        ("2017-01-01T00:59:60+01:00", 1483228799.999999),  # the day after, locally
        ("2024-06-30T00:00:00Z", 1719705600.0),  # the last day of each 30-day month
        ("2024-09-30T00:00:00Z", 1727654400.0),
        ("2024-11-30T00:00:00Z", 1732924800.0),
        ("2026-01-01T23:59:00+23:59", 1767225600.0),  # the widest offsets there are
        ("2026-01-01T00:00:00-23:59", 1767311940.0),
    ],
)
def test_rfc3339_valid(text: str, epoch: float) -> None:
    assert parse_rfc3339(text) == pytest.approx(epoch, abs=1e-6)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@given(
    st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30)),
    st.integers(-(23 * 60 + 59), 23 * 60 + 59),
)
def test_rfc3339_gives_the_instant_datetime_gives(local: datetime.datetime, offset: int) -> None:
    # Every day of the calendar: an epoch count off by a day anywhere in four centuries shows.
    zone = datetime.timezone(datetime.timedelta(minutes=offset))
    instant = local.replace(tzinfo=zone)
    sign, minutes = ("-" if offset < 0 else "+"), abs(offset)
    text = local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    if local.year < 1000:
        text = f"{local.year:04d}" + text[len(str(local.year)) :]
    whole = (instant.replace(microsecond=0) - _EPOCH) // datetime.timedelta(seconds=1)
    assert parse_rfc3339(text) == whole


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-30T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2024-06-31T00:00:00Z",
        "2024-09-31T00:00:00Z",
        "2024-11-31T00:00:00Z",
        "2024-02-30T00:00:00Z",  # a leap year's February has 29 days, not more
        "2000-02-30T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-01T25:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T23:60:00Z",
        "2026-01-01T23:59:61Z",
        "2027-06-15T12:34:60Z",  # a leap second only ends a month, at 23:59:60 UTC
        "2016-12-30T23:59:60Z",
        "2016-12-31T23:58:60Z",
        "2016-12-31T23:59:60+01:00",  # 22:59:60 UTC
        "2017-01-01T00:59:60+02:00",  # 22:59:60 UTC
        "2017-01-31T23:59:60-01:00",  # February 1st, 00:59:60 UTC
        "2026-01-01",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00Z",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+01:60",
        "2026-01-01T00:00:00.Z",
        "26-01-01T00:00:00Z",
        "2026-1-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "2026-W01-1T00:00:00Z",
        "２０２６-01-01T00:00:00Z",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z ",
        "",
        "x" * 10_000,
    ],
)
def test_rfc3339_invalid(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_rfc3339(text)
    assert len(str(info.value)) < 200


def test_rfc3339_says_where_a_leap_second_may_fall() -> None:
    with pytest.raises(ValueError) as info:
        parse_rfc3339("2027-06-15T12:34:60Z")
    assert str(info.value) == (
        "'2027-06-15T12:34:60Z': a leap second (:60) comes only at 23:59:60 UTC "
        "on the last day of a month"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tomorrow", "'tomorrow' is not an RFC 3339 date-time with a zone"),
        (
            "2030-01-01",
            "'2030-01-01' is not an RFC 3339 date-time with a zone (a date alone names no instant)",
        ),
        (
            "2030-01-01T00:00:00",
            "'2030-01-01T00:00:00' is not an RFC 3339 date-time with a zone"
            " (the zone, Z or ±hh:mm, is required)",
        ),
        (
            "2030-01-01 00:00",
            "'2030-01-01 00:00' is not an RFC 3339 date-time with a zone"
            " (the zone, Z or ±hh:mm, is required)",
        ),
        (
            "x" * 64,  # the longest input read, and so quoted whole
            f"{'x' * 64!r} is not an RFC 3339 date-time with a zone",
        ),
    ],
    ids=["garbage", "date alone", "no zone", "no zone nor seconds", "64 characters"],
)
def test_rfc3339_says_what_is_missing(text: str, message: str) -> None:
    """R-A6: a date alone or a zoneless time is named as such; other text gets no hint."""
    with pytest.raises(ValueError) as info:
        parse_rfc3339(text)
    assert str(info.value) == message


def test_rfc3339_clamps_a_leap_second_into_the_minute_it_belongs_to() -> None:
    """The leap second is an instant after :59.999998 and before the next day began,
    so an expiry set to it passes neither early nor a second late."""
    leap = parse_rfc3339("2016-12-31T23:59:60Z")
    assert parse_rfc3339("2016-12-31T23:59:59.999998Z") < leap
    assert leap < parse_rfc3339("2017-01-01T00:00:00Z")
    fraction = "2016-12-31T23:59:60.5Z"  # a fraction of the leap second clamps the same way
    assert parse_rfc3339(fraction) == leap


def test_rfc3339_reads_up_to_64_characters() -> None:
    """A fraction may be long, but input past 64 characters is refused unread."""
    longest = "2030-01-01T00:00:00." + "0" * 43 + "Z"
    assert len(longest) == 64 and parse_rfc3339(longest) == 1893456000.0
    with pytest.raises(ValueError, match="is not an RFC 3339 date-time") as info:
        parse_rfc3339(longest.replace(".", ".0"))
    assert "(65 chars)" in str(info.value)


def test_rfc3339_refuses_non_strings() -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(1893456000)  # type: ignore[arg-type]


@given(st.datetimes(timezones=st.timezones()))
def test_rfc3339_agrees_with_datetime(dt: Any) -> None:
    offset = dt.utcoffset()
    if offset is None or offset.seconds % 60 or dt.year < 1:
        return
    text = dt.isoformat(timespec="microseconds")
    assert parse_rfc3339(text) == pytest.approx(dt.timestamp(), abs=1e-6)


def test_a_reasoning_message_start_without_its_role_is_malformed() -> None:
    """AG-UI 1.0 (Schema: ReasoningMessageStartEvent): ``role`` is "Fixed, and required
    rather than defaulted", and a JSON event omitting a required field is "rejected as
    malformed" (Processing Model). The reading supplied 'reasoning' for it."""
    frame = {"type": "REASONING_MESSAGE_START", "messageId": "r1"}
    with pytest.raises(WireError, match="missing required field 'role'"):
        read_frame(json.dumps(frame))
    event, left = read_frame(json.dumps({**frame, "role": "reasoning"}))
    assert event.role == "reasoning" and left == ()  # type: ignore[union-attr]


@pytest.mark.parametrize("timestamp", [1.5, 2**53, -(2**53), 1e300])
def test_a_timestamp_that_is_not_a_safe_integer_is_malformed(timestamp: float) -> None:
    """AG-UI 1.0 (Schema: BaseEvent): ``timestamp`` is an ``integer`` (min
    -9007199254740991, max 9007199254740991), "Deliberately not a float", and a value
    the schema rejects in a field it describes "MUST be fatal" (Processing Model). Any
    number was kept."""
    frame = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "", "timestamp": 0}
    with pytest.raises(WireError, match="at timestamp: expected an integer"):
        read_frame(json.dumps({**frame, "timestamp": timestamp}))
    for fine in (2**53 - 1, -(2**53 - 1), 1_700_000_000_000.0):
        event, _ = read_frame(json.dumps({**frame, "timestamp": fine}))
        assert event.timestamp == fine  # type: ignore[union-attr]


def test_token_usage_is_read_as_the_closed_object_ag_ui_defines() -> None:
    """AG-UI 1.0 (Schema: TokenUsage): a closed object whose counts are integers from 0
    to 9007199254740991. A count of the wrong kind is malformed, and fatal; a member it
    does not define is stripped with a warning (Processing Model). Any object was kept
    as it came."""
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    for bad, at in [
        ({"inputTokens": "5"}, r"usage\[0\]\.inputTokens"),
        ({"outputTokens": -1}, r"usage\[0\]\.outputTokens"),
        ({"totalTokens": 0.5}, r"usage\[0\]\.totalTokens"),
        ({"model": 4}, r"usage\[0\]\.model"),
    ]:
        with pytest.raises(WireError, match=f"at {at}: expected"):
            read_frame(json.dumps({**finished, "usage": [bad]}))
    entry = {"provider": "openai", "model": "m", "inputTokens": 7, "costUsd": 0.1}
    event, left = read_frame(json.dumps({"type": "RUN_ERROR", "message": "m", "usage": [entry]}))
    assert thaw(event.usage) == [{"provider": "openai", "model": "m", "inputTokens": 7}]  # type: ignore[union-attr]
    assert left == (LeftOut(("usage", 0), "member 'costUsd'"),)
    # A count may be 0; null stands for absent, for the list and for a member.
    entry = {"inputTokens": 0, "outputTokens": 0, "totalTokens": None, "model": None}
    event, left = read_frame(json.dumps({**finished, "usage": [entry]}))
    assert thaw(event.usage) == [{"inputTokens": 0, "outputTokens": 0}]  # type: ignore[union-attr]
    assert left == ()
    event, _ = read_frame(json.dumps({**finished, "usage": None}))
    assert event.usage is None  # type: ignore[union-attr]
    # An entry that is not an object is malformed, not a crash.
    for bad in (5, None, ["inputTokens"]):
        with pytest.raises(WireError, match=r"at usage\[0\]: expected a token usage entry"):
            read_frame(json.dumps({**finished, "usage": [bad]}))


def test_a_subagent_outcome_is_read_as_ag_ui_defines_it() -> None:
    """AG-UI 1.0 (Schema: SubagentFinishedOutcome): success, or suspended with an
    optional array of interrupt ids, each closed. A known member of the wrong kind is
    malformed, and fatal; a member or an outcome type it does not define is stripped
    with a warning (Processing Model: "an outcome named after it shipped"), and an
    absent outcome means success. Any object was kept as it came."""
    finished = {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"}
    for bad, at in [
        ({"type": "suspended", "interruptIds": 5}, r"outcome\.interruptIds"),
        ({"type": "suspended", "interruptIds": [1]}, r"outcome\.interruptIds\[0\]"),
        ({"type": 5}, r"outcome\.type"),
        ([], "outcome"),
    ]:
        with pytest.raises(WireError, match=f"at {at}: expected"):
            read_frame(json.dumps({**finished, "outcome": bad}))
    event, left = read_frame(json.dumps({**finished, "outcome": {"type": "paused", "n": 1}}))
    assert event.outcome is None  # type: ignore[union-attr]
    assert left == (LeftOut(("outcome",), "an outcome of type 'paused'"),)
    outcome = {"type": "suspended", "interruptIds": ["i1"], "why": "x"}
    event, left = read_frame(json.dumps({**finished, "outcome": outcome}))
    assert thaw(event.outcome) == {"type": "suspended", "interruptIds": ["i1"]}  # type: ignore[union-attr]
    assert left == (LeftOut(("outcome",), "member 'why'"),)


@pytest.mark.parametrize(
    "event_type", ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK", "TOOL_CALL_RESULT"]
)
@pytest.mark.parametrize("role", [[1], {"a": 1}, 5, True])
def test_a_role_that_is_not_a_string_is_malformed_not_a_crash(event_type: str, role: Any) -> None:
    """Only an unrecognised *string* is stripped from a closed set; any other kind of
    value is malformed. An array or object once escaped as a TypeError (unhashable)."""
    frame = {"type": event_type, "messageId": "m", "toolCallId": "c", "role": role}
    frame |= {"delta": "x"} if event_type == "TEXT_MESSAGE_CHUNK" else {"content": "x"}
    if event_type == "TEXT_MESSAGE_START":
        del frame["toolCallId"], frame["content"]
    with pytest.raises(WireError, match="at role: expected a string"):
        read_frame(json.dumps(frame))


def test_R_J1_a_tool_call_is_read_with_its_required_type() -> None:
    """AG-UI 1.0 (Schema: ToolCall): ``type`` is ``"function"``, **required**; a value
    omitting a required field is "rejected as malformed" (Processing Model), and an
    unrecognised value in a required position removes what holds it ("Inside a list,
    the unrecognisable element is dropped"). The reading supplied 'function' for a
    missing type, and kept any other type, which then went back to the agent."""
    call = {"id": "c", "function": {"name": "f", "arguments": "{}"}}
    assistant = {"role": "assistant", "id": "a", "toolCalls": [call]}
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": [assistant]}
    with pytest.raises(WireError, match=r"toolCalls\[0\]: missing required field 'type'"):
        read_frame(json.dumps(snapshot))
    calls = [{**call, "type": "retrieval"}, {**call, "id": "d", "type": "function"}]
    event, left = read_frame(
        json.dumps({**snapshot, "messages": [{**assistant, "toolCalls": calls}]})
    )
    assert isinstance(event, MessagesSnapshot)
    assert [c.id for c in event.messages[0].tool_calls or ()] == ["d"]  # type: ignore[union-attr]
    assert left == (LeftOut(("messages", 0, "toolCalls", 0), "a tool call of type 'retrieval'"),)
