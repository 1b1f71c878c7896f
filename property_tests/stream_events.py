"""Hypothesis strategies for AG-UI content events in wire form, ids drawn to collide.

Message and call ids come from small pools (``"c1"`` is both a call id and the id
a parentless call's holder message gets), so a drawn stream keeps meeting the
awkward cases: content for a closed message, a call whose parent is an activity,
a snapshot replacing a message still streaming.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["annotated_events", "content_events", "event", "small_json", "well_formed_events"]

MESSAGE_IDS = ("m1", "m2", "c1")  # "c1" is also a call id: a parentless call's holder
CALL_IDS = ("c1", "c2")
ROLES = (None, "assistant", "user", "system", "developer")

message_ids = st.sampled_from(MESSAGE_IDS)
call_ids = st.sampled_from(CALL_IDS)
deltas = st.sampled_from(["a", "b ", '{"q":', "1}"])
small_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["x", "y"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=4,
)
patches = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "replace", "remove", "test"]),
            "path": st.sampled_from(["/a", "/b", "/a/0", "/a/-", ""]),
            "value": small_json,
        }
    ),
    max_size=2,
)


def event(kind: str, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    """``kind`` with its fields drawn; a field drawn as None is left out."""
    return st.fixed_dictionaries(fields).map(
        lambda f: {"type": kind, **{k: v for k, v in f.items() if v is not None}}
    )


wire_calls = st.lists(
    st.builds(
        lambda cid, args: {
            "id": cid,
            "type": "function",
            "function": {"name": "lookup", "arguments": args},
        },
        call_ids,
        st.sampled_from(['{"q": 1}', "{", ""]),
    ),
    max_size=2,
)
parts = st.lists(
    st.sampled_from(
        [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "url", "value": "u"}},
            {"type": "text", "text": "x", "score": 1},  # a member 1.0 does not define
            {"type": "binary", "url": "u"},  # a pre-1.0 part: dropped
            {"type": "audio", "source": {"type": "s3", "value": "k"}},  # dropped whole
            {"type": "text"},  # malformed: fatal
        ]
    ),
    max_size=2,
)
wire_messages = st.lists(
    st.one_of(
        st.builds(lambda i: {"id": i, "role": "user", "content": "hi"}, message_ids),
        st.builds(
            lambda i, calls: {"id": i, "role": "assistant", "content": "yo", "toolCalls": calls},
            message_ids,
            wire_calls,
        ),
        st.builds(
            lambda i, c: {"id": i, "role": "tool", "content": "r", "toolCallId": c},
            message_ids,
            call_ids,
        ),
        st.builds(lambda i: {"id": i, "role": "reasoning", "content": "hm"}, message_ids),
        st.builds(
            lambda i: {"id": i, "role": "activity", "activityType": "PLAN", "content": {}},
            message_ids,
        ),
        st.builds(lambda i: {"id": i, "role": "narrator", "content": 1}, message_ids),
        st.builds(lambda i, p: {"id": i, "role": "user", "content": p}, message_ids, parts),
    ),
    max_size=3,
)
"""Messages of every role (an unknown one included) with ids that collide with the
stream's; the assistant's calls may have unreadable arguments, a user's content may
hold parts AG-UI 1.0 does not define (left out) or malformed ones (fatal)."""

well_formed_events = st.one_of(
    event("TEXT_MESSAGE_START", messageId=message_ids, role=st.sampled_from(ROLES)),
    event("TEXT_MESSAGE_CONTENT", messageId=message_ids, delta=deltas),
    event("TEXT_MESSAGE_END", messageId=message_ids),
    event("TEXT_MESSAGE_CHUNK", messageId=st.none() | message_ids, delta=st.none() | deltas),
    event("REASONING_MESSAGE_START", messageId=message_ids, role=st.just("reasoning")),
    event("REASONING_MESSAGE_CONTENT", messageId=message_ids, delta=deltas),
    event("REASONING_MESSAGE_END", messageId=message_ids),
    event("REASONING_MESSAGE_CHUNK", messageId=st.none() | message_ids, delta=st.none() | deltas),
    event(
        "TOOL_CALL_START",
        toolCallId=call_ids,
        toolCallName=st.sampled_from(["lookup", "local"]),
        parentMessageId=st.none() | message_ids,
    ),
    event("TOOL_CALL_ARGS", toolCallId=call_ids, delta=deltas),
    event("TOOL_CALL_END", toolCallId=call_ids),
    event(
        "TOOL_CALL_CHUNK",
        toolCallId=st.none() | call_ids,
        toolCallName=st.none() | st.just("lookup"),
        parentMessageId=st.none() | message_ids,
        delta=st.none() | deltas,
    ),
    event("TOOL_CALL_RESULT", messageId=message_ids, toolCallId=call_ids, content=st.just("ok")),
    event("STATE_SNAPSHOT", snapshot=st.fixed_dictionaries({"a": st.lists(small_json)})),
    event("STATE_DELTA", delta=patches),
    event("MESSAGES_SNAPSHOT", messages=wire_messages),
    event(
        "ACTIVITY_SNAPSHOT",
        messageId=message_ids,
        activityType=st.just("PLAN"),
        content=st.fixed_dictionaries({"a": small_json}),
        replace=st.none() | st.booleans(),
    ),
    event("ACTIVITY_DELTA", messageId=message_ids, activityType=st.just("PLAN"), patch=patches),
    event(
        "REASONING_ENCRYPTED_VALUE",
        subtype=st.sampled_from(["message", "tool-call", "other"]),
        entityId=message_ids | call_ids,
        encryptedValue=st.just("E"),
    ),
    event("STEP_STARTED", stepName=st.just("s")),
    event("STEP_FINISHED", stepName=st.just("s")),
    event("CUSTOM", name=st.just("n"), value=small_json),
)


@st.composite
def _annotated(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed event, sometimes with ``metadata`` (merged into what the event
    names, key by key) and a ``subagentRunId`` (which a ``MESSAGES_SNAPSHOT`` cannot
    carry, AG-UI 1.0: there it is stripped, with a warning)."""
    e = dict(draw(well_formed_events))
    if draw(st.integers(0, 3)) == 0:
        e["metadata"] = draw(st.dictionaries(st.sampled_from(["k", "source"]), small_json))
    if draw(st.integers(0, 5)) == 0:
        e["subagentRunId"] = draw(st.sampled_from(["sub1", "sub2"]))
    return e


annotated_events = _annotated()


def _junked(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed event with one field set to a value of a wrong kind, or dropped."""
    e = dict(draw(annotated_events))
    key = draw(st.sampled_from(sorted(e)))
    if draw(st.booleans()):
        del e[key]
    else:
        e[key] = draw(st.one_of(st.integers(), st.just([]), st.just({}), st.floats()))
    return e


content_events = st.integers(0, 9).flatmap(
    lambda n: annotated_events if n else st.composite(_junked)()
)
"""Content events, one in ten with a field of the wrong kind or missing (even ``type``);
a quarter of them carry metadata."""
