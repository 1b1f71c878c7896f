"""How a run's content events fold into its draft: guards ``test_rules_stream.py``
leaves open.

Rules proved here: R-J2 (a stream that breaks AG-UI fails with a ProtocolError whose
message names what broke; the bounds on what may be open at once; chunks continue the
stream of their own lane; a lookup by id never lands on another message). Events go
through the fake driver as wire frames, or through the core's ``step`` where the
behaviour depends on two versions of one state (the core is pure).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from interlude.adapters.fake import (
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    held,
    reply,
    started,
)
from interlude.adapters.resource import Resource
from interlude.core import FrameReceived, step
from interlude.core.errors import ProtocolError
from interlude.core.json import FrozenDict
from interlude.core.options import Options, RetryPolicy
from interlude.core.state import State
from interlude.core.stream import MAX_OPEN, with_arguments, with_call
from interlude.core.wire import (
    ActivityMessage,
    AssistantMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    ToolCall,
    UserMessage,
)

OPTS = Options(retry=RetryPolicy(jitter=0, base_delay=1))

HISTORY: tuple[Message, ...] = (UserMessage(id="old-u", content="Earlier question"),)
HISTORY_WIRE = {"id": "old-u", "role": "user", "content": "Earlier question"}

Handler = Callable[[Request], Reply]


# -- helpers ----------------------------------------------------------------------------


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    """A wire event: ``ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x")``."""
    return {"type": kind, **fields}


def chat_with(handler: Handler) -> tuple[FakeDriver, Resource]:
    driver = FakeDriver(ScriptedAgent().then(handler))
    return driver, driver.chat(OPTS, messages=HISTORY)


def run(*events: Any) -> Resource:
    """The chat after one run streaming ``events`` between RUN_STARTED and RUN_FINISHED."""
    return run_on(HISTORY, *events)


def run_on(history: tuple[Message, ...], *events: Any) -> Resource:
    """``run``, for a chat whose history is ``history``."""
    driver = FakeDriver(
        ScriptedAgent().then(lambda req: reply(started(req), *events, finished(req)))
    )
    chat = driver.chat(OPTS, messages=history)
    chat.send("Go", message_id="u1")
    driver.run_until_idle()
    return chat


def refusal(*events: Any) -> str:
    """The ProtocolError's message for a run streaming ``events`` (it must fail)."""
    chat = run(*events)
    assert isinstance(chat.error, ProtocolError), chat.error
    assert chat.error.retryable is False
    assert list(chat.messages) == [*HISTORY, UserMessage(id="u1", content="Go")]
    return str(chat.error)


def acked() -> State:
    """The core state of a chat whose run was just acknowledged: its draft exists."""
    driver, chat = chat_with(
        lambda req: held(started(req), ev("CUSTOM", name="x", value=1), finished(req))
    )
    chat.send("Go", message_id="u1")
    driver.run_until_idle(follow_retries=False)
    driver.release(1)
    driver.run_until_idle(follow_retries=False)
    return chat.core_state


def stepped(s: State, *events: dict[str, Any]) -> State:
    """``s`` after the core reads ``events`` as frames of its run's attempt."""
    assert s.run is not None and s.run.attempt is not None
    for e in events:
        s = step(s, FrameReceived(s.run.attempt.id, json.dumps(e)), 0.0).state
    return s


# -- R-J2: what a violation says ----------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (
            [ev("TEXT_MESSAGE_END", messageId="m9")],
            "end of message 'm9', which is not open",
        ),
        (
            [ev("TOOL_CALL_END", toolCallId="c9")],
            "end of tool call 'c9', which is not open",
        ),
        (
            [ev("TOOL_CALL_ARGS", toolCallId="c9", delta="{}")],
            "arguments for tool call 'c9', which is not open",
        ),
        (
            [ev("TOOL_CALL_END", toolCallId="c9", subagentRunId="s1")],
            "end of tool call 'c9', which is not open",
        ),
        (
            # One call open: arguments naming another are not that call's.
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
                ev("TOOL_CALL_ARGS", toolCallId="c9", delta="{}"),
            ],
            "arguments for tool call 'c9', which is not open",
        ),
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m1"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m9", delta="x"),
            ],
            "content for message 'm9', which is not open",
        ),
        (
            [ev("TOOL_CALL_CHUNK", toolCallId="c1", delta="{}")],
            "the first TOOL_CALL_CHUNK of 'c1' has no toolCallName",
        ),
        (
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
                ev("TOOL_CALL_CHUNK", toolCallId="c1", delta="{}"),
            ],
            "a TOOL_CALL_CHUNK for 'c1', which a START opened and has not ended: a chunk "
            "does not continue an item of the start, content and end form",
        ),
        (
            [
                ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="plan", content={"n": 1}),
                ev(
                    "ACTIVITY_DELTA",
                    messageId="a1",
                    activityType="plan",
                    patch=[{"op": "replace", "path": "", "value": 5}],
                ),
            ],
            "an ACTIVITY_DELTA patch made the activity content a non-object",
        ),
        (
            [ev("TEXT_MESSAGE_START", messageId="m1"), ev("TEXT_MESSAGE_START", messageId="m1")],
            "message 'm1' was started twice",
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a", subagentRunId="a"),
                ev("TEXT_MESSAGE_CHUNK", delta="b", subagentRunId="b"),
            ],
            "a text message chunk without an id, and no text message chunk stream open",
        ),
        (
            [ev("REASONING_MESSAGE_START", messageId="r1", role="assistant")],
            "REASONING_MESSAGE_START 'r1' has role 'assistant', not 'reasoning'",
        ),
        (
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
            ],
            "tool call 'c1' was started twice",
        ),
        (
            [
                ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
                ev("TOOL_CALL_END", toolCallId="c1"),
                ev(
                    "TOOL_CALL_RESULT",
                    messageId="r1",
                    toolCallId="c1",
                    content="done",
                    role="assistant",
                ),
            ],
            "TOOL_CALL_RESULT 'r1' has role 'assistant', not 'tool'",
        ),
        (
            [ev("TEXT_MESSAGE_START", messageId="m1", role="tool")],
            "text message 'm1' has role 'tool'; a text message is developer, system, "
            "assistant or user",
        ),
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m1"),
                ev("REASONING_MESSAGE_CONTENT", messageId="m1", delta="x"),
            ],
            "a reasoning event for message 'm1', a text message",
        ),
        *(
            (
                [
                    ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a", subagentRunId="s1"),
                    ev(end, subagentRunId="s1", **fields),
                    ev("TEXT_MESSAGE_CHUNK", delta="b", subagentRunId="s1"),
                ],
                "a text message chunk without an id, and no text message chunk stream open",
            )
            for end, fields in (("SUBAGENT_FINISHED", {}), ("SUBAGENT_ERROR", {"message": "x"}))
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a", subagentRunId="s1"),
                ev("MESSAGES_SNAPSHOT", messages=[HISTORY_WIRE]),
                ev("TEXT_MESSAGE_CHUNK", delta="b", subagentRunId="s1"),
            ],
            "a text message chunk without an id, and no text message chunk stream open",
        ),
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m1"),
                ev("REASONING_MESSAGE_CHUNK", messageId="m1", delta="x"),
            ],
            "a reasoning event for message 'm1', a text message",
        ),
    ],
    ids=[
        "end-message",
        "end-call",
        "args",
        "end-call-tagged",
        "args-while-another-is-open",
        "content",
        "first-call-chunk-without-name",
        "call-chunk-after-start",
        "activity-made-a-non-object",
        "start-twice",
        "id-less-chunk-of-a-lane-with-none-open",
        "reasoning-start-with-another-role",
        "call-started-twice",
        "result-with-another-role",
        "text-start-with-another-role",
        "reasoning-content-for-a-text-message",
        "id-less-chunk-after-its-subagent-finished",
        "id-less-chunk-after-its-subagent-failed",
        "subagents-id-less-chunk-after-a-messages-snapshot",
        "reasoning-chunk-for-a-text-message",
    ],
)
def test_R_J2_a_violation_says_which_event_broke_what(
    events: list[dict[str, Any]], says: str
) -> None:
    """R-J2: the ProtocolError a user reads names the event, the item it named and how
    it broke AG-UI there."""
    assert refusal(*events) == says


def test_R_J2_one_step_more_than_max_open_at_once_is_a_protocol_error() -> None:
    """R-J2: steps open at once are bounded like messages and calls (a hostile stream's
    growth); the error says so, rather than waiting for the finish to find them open."""
    says = refusal(*(ev("STEP_STARTED", stepName=f"s{n}") for n in range(MAX_OPEN + 1)))
    assert says == f"more than {MAX_OPEN} steps open at once"


def test_R_J2_a_message_adrift_counts_once_against_the_open_limit() -> None:
    """R-J2: a message a snapshot set adrift is still open and counts against MAX_OPEN,
    once: beside it, MAX_OPEN - 1 more may be open, and the run succeeds."""
    others = [f"m{n}" for n in range(1, MAX_OPEN)]
    chat = run(
        ev("TEXT_MESSAGE_START", messageId="m0"),
        ev("MESSAGES_SNAPSHOT", messages=[HISTORY_WIRE]),
        *(ev("TEXT_MESSAGE_START", messageId=m) for m in others),
        *(ev("TEXT_MESSAGE_END", messageId=m) for m in ["m0", *others]),
    )
    assert chat.error is None
    assert [m.id for m in chat.messages] == ["old-u", *others]


def test_R_J2_an_invalid_activity_delta_says_it_was_the_activity_patch() -> None:
    """R-J2: a patch that cannot apply fails the run; the error says which patch (the
    activity's, not the state's) before what the patch error says."""
    says = refusal(
        ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="plan", content={"n": 1}),
        ev(
            "ACTIVITY_DELTA",
            messageId="a1",
            activityType="plan",
            patch=[{"op": "remove", "path": "/missing"}],
        ),
    )
    assert says.startswith("invalid ACTIVITY_DELTA patch: ") and "'/missing'" in says


def test_R_J1_an_encrypted_value_of_an_unknown_subtype_is_dropped_with_a_warning() -> None:
    """R-J1: an unknown subtype is tolerated: the run succeeds and the warning a user reads
    names the subtype and says the value was dropped."""
    chat = run(ev("REASONING_ENCRYPTED_VALUE", subtype="other", entityId="u1", encryptedValue="E"))
    assert chat.error is None
    assert chat.warnings == (
        "REASONING_ENCRYPTED_VALUE with unknown subtype 'other'; the value was dropped",
    )


# -- R-J2: chunks ---------------------------------------------------------------------------


def test_R_J2_an_untagged_id_less_chunk_continues_the_parent_agents_stream() -> None:
    """AG-UI 1.0 (Streaming): an id-less chunk continues its lane's open stream of its
    kind; a subagent's stream of the same kind, open beside it, is no ambiguity."""
    chat = run(
        ev("TEXT_MESSAGE_CHUNK", messageId="p1", delta="parent"),
        ev("TEXT_MESSAGE_CHUNK", messageId="s1", delta="sub", subagentRunId="a"),
        ev("TEXT_MESSAGE_CHUNK", delta=" goes on"),
    )
    assert chat.error is None
    assert list(chat.messages)[len(HISTORY) + 1 :] == [
        AssistantMessage(id="p1", content="parent goes on"),
        AssistantMessage(id="s1", content="sub", subagent_run_id="a"),
    ]


def test_R_J2_a_message_chunk_and_a_call_chunk_of_one_id_in_two_lanes_stand_apart() -> None:
    """Message and call ids are separate namespaces: a parent agent's message chunk 'x'
    opens message 'x', not the continuation of a subagent's tool call chunk 'x'."""
    chat = run(
        ev(
            "TOOL_CALL_CHUNK",
            toolCallId="x",
            toolCallName="t",
            parentMessageId="p",
            delta="{",
            subagentRunId="a",
        ),
        ev("TEXT_MESSAGE_CHUNK", messageId="x", delta="hi"),
        ev("TOOL_CALL_CHUNK", toolCallId="x", delta="}", subagentRunId="a"),
    )
    assert chat.error is None
    assert list(chat.messages)[len(HISTORY) + 1 :] == [
        AssistantMessage(
            id="p",
            tool_calls=(ToolCall(id="x", function=FunctionCall(name="t", arguments="{}")),),
            subagent_run_id="a",
        ),
        AssistantMessage(id="x", content="hi"),
    ]


SUB_TEXT = ev("TEXT_MESSAGE_CHUNK", messageId="m", delta="hi", subagentRunId="a")
SUB_CALL = ev("TOOL_CALL_CHUNK", toolCallId="x", toolCallName="t", delta="{", subagentRunId="a")


@pytest.mark.parametrize(
    ("events", "item"),
    [
        ([SUB_TEXT, ev("TEXT_MESSAGE_CONTENT", messageId="m", delta="!")], "'m'"),
        ([SUB_TEXT, ev("TEXT_MESSAGE_END", messageId="m")], "'m'"),
        ([SUB_CALL, ev("TOOL_CALL_ARGS", toolCallId="x", delta="}")], "'x'"),
        ([SUB_CALL, ev("TOOL_CALL_END", toolCallId="x")], "'x'"),
        (
            [
                SUB_TEXT,
                ev("TEXT_MESSAGE_END", messageId="m"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m", delta="!", subagentRunId="a"),
            ],
            "'m'",
        ),
        (
            [
                SUB_CALL,
                ev("TOOL_CALL_END", toolCallId="x"),
                ev("TOOL_CALL_CHUNK", delta="}", subagentRunId="a"),
            ],
            "'x'",
        ),
    ],
    ids=[
        "content",
        "end",
        "args",
        "call-end",
        "end-then-chunk",
        "call-end-then-chunk",
    ],
)
def test_R_J2_an_untagged_continuation_of_a_subagents_chunked_item_fails_the_run(
    events: list[dict[str, Any]], item: str
) -> None:
    """The two forms do not mix (docs/failures.md, Known limits): a ``*_CONTENT``,
    ``*_END`` or ``TOOL_CALL_ARGS`` for an item a chunk opened fails the run with a
    ProtocolError naming the item, also when it is untagged and the chunk was a
    subagent's. (In the chunk's own lane it does: the event ends the chunk stream first.)
    Today the untagged one is applied to the subagent's item from the parent agent's
    lane, and the stream's chunk record outlives the item it closed: a chunk continuing
    it then stops the run with a bare AssertionError out of the driver."""
    assert item in refusal(*events)


def test_R_J2_an_untagged_chunk_naming_a_subagents_chunk_stream_continues_it() -> None:
    """AG-UI 1.0 (Subagents): an untagged continuation continues whatever its opener
    owns: a chunk without subagentRunId, naming a subagent's open chunk stream by id,
    adds to that subagent's message."""
    chat = run(
        ev("TEXT_MESSAGE_CHUNK", messageId="s1", delta="sub", subagentRunId="a"),
        ev("TEXT_MESSAGE_CHUNK", messageId="s1", delta=" more"),
    )
    assert chat.error is None
    assert list(chat.messages)[len(HISTORY) + 1 :] == [
        AssistantMessage(id="s1", content="sub more", subagent_run_id="a"),
    ]


def test_R_J2_a_messages_snapshot_ends_a_chunk_stream_and_a_chunk_of_its_id_reopens_it() -> None:
    """AG-UI 1.0 (Closing a chunk stream): a MESSAGES_SNAPSHOT ends every chunk stream
    (nothing is set adrift, no warning); the snapshot's text for the message stands, and
    a later chunk with its id reopens it and adds to that text."""
    user = {"id": "u1", "role": "user", "content": "Go"}
    chat = run(
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
        ev(
            "MESSAGES_SNAPSHOT",
            messages=[HISTORY_WIRE, user, {"id": "m1", "role": "assistant", "content": "A"}],
        ),
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="b"),
    )
    assert chat.error is None and chat.warnings == ()
    assert list(chat.messages)[len(HISTORY) + 1 :] == [AssistantMessage(id="m1", content="Ab")]


def test_R_J2_a_call_chunk_of_another_id_ends_the_call_chunk_stream_open() -> None:
    """AG-UI 1.0 (Closing a chunk stream): a TOOL_CALL_CHUNK for another call ends the
    lane's open call chunk stream (its arguments stand as they are), so an id-less chunk
    after it continues the new call, with no choice between two."""
    chat = run(
        ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="t", delta="{"),
        ev("TOOL_CALL_CHUNK", toolCallId="c2", toolCallName="t", delta="{"),
        ev("TOOL_CALL_CHUNK", delta="}"),
    )
    assert chat.error is None
    assert [
        (c.id, c.function.arguments)
        for m in list(chat.messages)[len(HISTORY) + 1 :]
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls or ()
    ] == [("c1", "{"), ("c2", "{}")]


# -- R-J2: lookups by id across versions of one state ---------------------------------------


def test_R_J2_a_message_a_sibling_version_appended_is_not_found_at_its_place() -> None:
    """The core is pure: a message id a sibling version (stepped from the same state)
    appended is unknown here, even where this version put another message at the same
    place; starting it makes a message of its own and leaves the other one alone.
    (White-box only in how the sibling arises: two ``step`` calls on one state.)"""
    parent = acked()
    stepped(parent, ev("TEXT_MESSAGE_START", messageId="z"))  # the sibling, dropped
    events = [
        ev("TEXT_MESSAGE_START", messageId="w"),
        ev("TEXT_MESSAGE_CONTENT", messageId="w", delta="W"),
        ev("TEXT_MESSAGE_START", messageId="z"),
        ev("TEXT_MESSAGE_CONTENT", messageId="z", delta="Z"),
        ev("TEXT_MESSAGE_END", messageId="z"),
        ev("TEXT_MESSAGE_END", messageId="w"),
    ]
    after = stepped(parent, *events)
    alone = stepped(acked(), *events)
    assert after.draft is not None and alone.draft is not None
    assert after.error is None
    assert list(after.draft.messages)[len(HISTORY) + 1 :] == [
        AssistantMessage(id="w", content="W"),
        AssistantMessage(id="z", content="Z"),
    ]
    assert list(after.draft.messages) == list(alone.draft.messages)


@pytest.mark.parametrize(
    "sibling",
    [
        [ev("TEXT_MESSAGE_START", messageId="z")],
        [ev("TOOL_CALL_START", toolCallId="z", toolCallName="t")],
    ],
    ids=["message", "call"],
)
def test_R_J2_an_id_only_a_sibling_version_appended_is_not_in_the_history(
    sibling: list[dict[str, Any]],
) -> None:
    """A message or call a sibling version appended, past this version's end, is not in
    this one's history: an encrypted value for it is dropped with the warning a user
    reads, the same as in a state no sibling touched."""
    kind = "message" if sibling[0]["type"].startswith("TEXT") else "tool-call"
    value = ev("REASONING_ENCRYPTED_VALUE", subtype=kind, entityId="z", encryptedValue="E")
    parent = acked()
    stepped(parent, *sibling)
    after = stepped(parent, value)
    alone = stepped(acked(), value)
    what = "message" if kind == "message" else "tool call"
    assert after.error is None
    assert (
        after.warnings
        == alone.warnings
        == (
            f"REASONING_ENCRYPTED_VALUE for {what} 'z', which is not in the history; "
            "the value was dropped",
        )
    )


def test_R_J2_a_call_a_sibling_version_added_is_found_only_where_this_version_holds_it() -> None:
    """The core is pure: a call a sibling version added (stepped from the same state) is
    not held by the message this version put at the same place, and once this version
    adds it too, an encrypted value for it lands on this version's call.
    (White-box only in how the sibling arises: two ``step`` calls on one state.)"""
    value = ev("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="z", encryptedValue="E")
    parent = acked()
    stepped(parent, ev("TOOL_CALL_START", toolCallId="z", toolCallName="t"))  # the sibling
    parent = stepped(
        parent,
        ev("TEXT_MESSAGE_START", messageId="w"),
        ev("TEXT_MESSAGE_END", messageId="w"),
    )
    missing = stepped(parent, value)
    assert missing.error is None
    assert missing.warnings == (
        "REASONING_ENCRYPTED_VALUE for tool call 'z', which is not in the history; "
        "the value was dropped",
    )
    after = stepped(
        parent,
        ev("TOOL_CALL_START", toolCallId="z", toolCallName="t"),
        ev("TOOL_CALL_END", toolCallId="z"),
        value,
    )
    assert after.error is None and after.warnings == ()
    assert after.draft is not None
    assert list(after.draft.messages)[len(HISTORY) + 1 :] == [
        AssistantMessage(id="w", content=""),
        AssistantMessage(
            id="z",
            tool_calls=(
                ToolCall(
                    id="z",
                    function=FunctionCall(name="t", arguments=""),
                    encrypted_value="E",
                ),
            ),
        ),
    ]


def test_R_J1_an_encrypted_value_for_a_later_call_of_a_message_lands_on_that_call() -> None:
    """R-J1: one message holds several calls, each keeping its own encrypted value: the
    value for the second call rides that call, not the first."""
    chat = run(
        ev("TEXT_MESSAGE_START", messageId="m1"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", parentMessageId="m1"),
        ev("TOOL_CALL_END", toolCallId="c1"),
        ev("TOOL_CALL_START", toolCallId="c2", toolCallName="t", parentMessageId="m1"),
        ev("TOOL_CALL_END", toolCallId="c2"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="c2", encryptedValue="E"),
    )
    assert chat.error is None
    (message,) = list(chat.messages)[len(HISTORY) + 1 :]
    assert isinstance(message, AssistantMessage) and message.tool_calls is not None
    assert [(c.id, c.encrypted_value) for c in message.tool_calls] == [("c1", None), ("c2", "E")]


def test_with_call_and_with_arguments_name_a_call_the_message_does_not_hold() -> None:
    """The public helpers of ``interlude.core.stream``: ``with_call`` answers None for a
    call the message does not hold (one holding no calls at all included), and
    ``with_arguments`` refuses it with a ValueError naming both ids."""
    plain = AssistantMessage(id="m1", content="text only")
    holder = AssistantMessage(
        id="m2", tool_calls=(ToolCall(id="c1", function=FunctionCall(name="t", arguments="")),)
    )
    assert with_call(plain, "c1", lambda c: c) is None
    assert with_call(holder, "c9", lambda c: c) is None
    with pytest.raises(ValueError, match="'m2' holds no tool call 'c9'"):
        with_arguments(holder, "c9", "{}")
    with pytest.raises(ValueError, match="'m1' holds no tool call 'c1'"):
        with_arguments(plain, "c1", "{}")


def test_R_J2_a_snapshot_restating_a_streaming_message_without_content_lets_it_go_on() -> None:
    """R-J2: a MESSAGES_SNAPSHOT may restate a message still streaming with no content yet
    (``content: null``, an assistant message holding only its tool calls): the stream goes
    on in it, its later deltas are its text, and nothing is set adrift or warned about."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    restated = {"id": "m1", "role": "assistant", "content": None, "toolCalls": [call]}
    chat = run(
        ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
        ev("MESSAGES_SNAPSHOT", messages=[HISTORY_WIRE, restated]),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="after"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
    )
    assert chat.error is None and chat.warnings == ()
    (m1,) = [m for m in chat.messages if m.id == "m1"]
    assert m1.content == "after"
    assert [c.id for c in m1.tool_calls or ()] == ["c1"]


@pytest.mark.parametrize(
    "history",
    [
        (UserMessage(id="d", content="one"), AssistantMessage(id="d", content="two")),
        (
            UserMessage(id="d", content="one"),
            ActivityMessage(id="d", activity_type="P", content=FrozenDict()),
        ),
        (ReasoningMessage(id="d", content="one"), ReasoningMessage(id="d", content="two")),
    ],
    ids=["user-and-assistant", "an-activity-second", "reasoning-twice"],
)
def test_R_J2_a_snapshot_naming_an_id_the_history_holds_twice_leaves_one_message(
    history: tuple[Message, ...],
) -> None:
    """R-J2: messages are reconciled by id: an application's history may hold two
    messages of one id, and a MESSAGES_SNAPSHOT restating that id leaves one message of
    it, at the first one's place, not two copies of the snapshot's. A snapshot without
    activity or reasoning messages keeps those of the history it does not name, not those
    whose id it names: an activity or reasoning message holding the id again goes too."""
    snapshot = [
        {"id": "d", "role": "user", "content": "restated"},
        {"id": "u1", "role": "user", "content": "Go"},
    ]
    chat = run_on(history, ev("MESSAGES_SNAPSHOT", messages=snapshot))
    assert chat.error is None
    assert list(chat.messages) == [
        UserMessage(id="d", content="restated"),
        UserMessage(id="u1", content="Go"),
    ]


def test_R_J2_a_reasoning_message_set_adrift_goes_on_where_a_later_snapshot_restates_it() -> None:
    """R-J2: a MESSAGES_SNAPSHOT that drops a reasoning message still streaming sets it
    adrift (a warning); a later snapshot restating it as a reasoning message gives it its
    place back, and the reasoning deltas after that are its text."""
    user = {"id": "u1", "role": "user", "content": "Go"}
    chat = run(
        ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
        ev(
            "MESSAGES_SNAPSHOT",
            messages=[HISTORY_WIRE, user, {"id": "r0", "role": "reasoning", "content": "x"}],
        ),
        ev(
            "MESSAGES_SNAPSHOT",
            messages=[HISTORY_WIRE, user, {"id": "r1", "role": "reasoning", "content": "so far"}],
        ),
        ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta=", more"),
        ev("REASONING_MESSAGE_END", messageId="r1"),
    )
    assert chat.error is None
    assert list(chat.messages)[len(HISTORY) + 1 :] == [
        ReasoningMessage(id="r1", content="so far, more")
    ]
    assert chat.warnings == (
        "MESSAGES_SNAPSHOT left no place for message 'r1' while streaming (dropped, or "
        "restated as a message it cannot continue): open until ended, its content dropped",
    )


def test_R_J2_a_call_the_first_message_holds_is_found_when_its_id_is_not_unique() -> None:
    """R-J2: a lookup by id never misses: in an application's history whose first message
    holds call 'c1', and which also holds two messages of id 'c1' (ids the hints do not
    trust), an encrypted value for that call still lands on it."""
    holder = AssistantMessage(
        id="a0", tool_calls=(ToolCall(id="c1", function=FunctionCall(name="t", arguments="")),)
    )
    history = (holder, UserMessage(id="c1", content="x"), UserMessage(id="c1", content="y"))
    value = ev("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="c1", encryptedValue="E")
    chat = run_on(history, value)
    assert chat.error is None and chat.warnings == ()
    first = chat.messages[0]
    assert isinstance(first, AssistantMessage) and first.tool_calls is not None
    assert first.tool_calls[0].encrypted_value == "E"


def _holders(call_id: str) -> tuple[Message, ...]:
    """Two messages holding one call ``call_id``: the id is then one the hints do not
    trust (noted twice), so a lookup of a message of that id scans."""
    calls = (ToolCall(id=call_id, function=FunctionCall(name="t", arguments="")),)
    return (
        AssistantMessage(id="a1", tool_calls=calls),
        AssistantMessage(id="a2", tool_calls=calls),
    )


@pytest.mark.parametrize(
    ("history", "mid"),
    [((UserMessage(id="m0", content="hi"), *_holders("m0")), "m0"), (_holders("u1"), "u1")],
    ids=["first", "last"],
)
def test_R_J2_a_message_is_found_wherever_it_stands_when_its_id_is_not_unique(
    history: tuple[Message, ...], mid: str
) -> None:
    """R-J2: a lookup by id never misses: a user message whose id two messages also hold
    as a call id, first in the history or last (the one ``send`` added), is found, so a
    TOOL_CALL_RESULT reusing its id is refused, not made a second message of that id."""
    result = ev("TOOL_CALL_RESULT", messageId=mid, toolCallId=mid, content="done")
    chat = run_on(history, result)
    assert isinstance(chat.error, ProtocolError)
    assert str(chat.error) == (
        f"TOOL_CALL_RESULT '{mid}' names a message id the history already holds (a user "
        "message): a result needs an id of its own"
    )


EARLIER_ACTIVITY = ActivityMessage(
    id="a1", activity_type="P", content=FrozenDict(), subagent_run_id="s1"
)


@pytest.mark.parametrize(
    ("history", "before"),
    [
        ((*HISTORY, EARLIER_ACTIVITY), []),
        (
            HISTORY,
            [
                ev(
                    "ACTIVITY_SNAPSHOT",
                    messageId="a1",
                    activityType="P",
                    content={},
                    subagentRunId="s1",
                ),
                ev(
                    "MESSAGES_SNAPSHOT",
                    messages=[HISTORY_WIRE, {"id": "u1", "role": "user", "content": "Go"}],
                ),
            ],
        ),
    ],
    ids=["an-earlier-runs", "one-a-messages-snapshot-restated"],
)
def test_R_J2_a_replacing_activity_snapshot_makes_an_activity_not_made_here_its_subagents(
    history: tuple[Message, ...], before: list[dict[str, Any]]
) -> None:
    """AG-UI 1.0 (Activity, Subagents): a replacing ACTIVITY_SNAPSHOT re-mints an activity
    the run did not make here (an earlier run's, or one a MESSAGES_SNAPSHOT made the
    run's history): its deltas are then the replacing subagent's, and one tagged for the
    first owner fails the run."""
    chat = run_on(
        history,
        *before,
        ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}, subagentRunId="s2"),
        ev("ACTIVITY_DELTA", messageId="a1", activityType="P", patch=[], subagentRunId="s1"),
    )
    assert isinstance(chat.error, ProtocolError)
    assert str(chat.error) == (
        "an ACTIVITY_DELTA of subagent 's1' continuing activity 'a1', which subagent 's2' opened"
    )


def test_R_J2_an_activity_this_run_made_belongs_to_its_latest_replacing_subagent() -> None:
    """AG-UI 1.0 (Activity, Subagents): an activity this run made, replaced by one subagent's
    snapshot and then by another's, takes deltas from the latest only. Its opener is the
    message's own attribution, which a second replacement must not leave stale."""
    snapshots = [
        ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}, subagentRunId=s)
        for s in ("s1", "s2", "s3")
    ]

    def delta(subagent: str) -> dict[str, Any]:
        patch = [{"op": "add", "path": "/n", "value": 1}]
        return ev(
            "ACTIVITY_DELTA", messageId="a1", activityType="P", patch=patch, subagentRunId=subagent
        )

    chat = run_on(HISTORY, *snapshots, delta("s3"))
    assert chat.error is None
    assert chat.messages[-1] == ActivityMessage(
        id="a1", activity_type="P", content=FrozenDict(n=1), subagent_run_id="s3"
    )
    chat = run_on(HISTORY, *snapshots, delta("s2"))
    assert isinstance(chat.error, ProtocolError)
    assert str(chat.error) == (
        "an ACTIVITY_DELTA of subagent 's2' continuing activity 'a1', which subagent 's3' opened"
    )
