"""Any sequence of content events, however wrong, is either taken or refused cleanly.

Hypothesis draws runs of AG-UI content events from a small pool of message and
call ids, so events collide: content for a message that is closed, a call whose
parent is an activity, a snapshot replacing a message still streaming, an
encrypted value for a call that never was. An app reads every selector after
every event. Whatever the sequence:

- nothing escapes the driver (no crash, and no observer sees one: R-I2);
- the run ends either committed with no error, or with a non-retryable
  ``ProtocolError`` and the checkpoint exactly as before (R-J2, R-F6);
- a committed history goes out again as valid wire JSON in the next request,
  message for message.

A second test varies how the run ends (a plain finish, an interrupt, a
``RUN_ERROR``, a stream cut before its end, events after ``RUN_FINISHED``) and
lets calls name a tool that runs locally, on a chat and on a completion.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.adapters.fake import FakeDriver, ScriptedAgent, reply
from interlude.adapters.fake.script import Request, finished, interrupted, started
from interlude.adapters.resource import Resource
from interlude.core.errors import ProtocolError, RunError
from interlude.core.json import thaw
from interlude.core.wire.codec import decode_run_input

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


wire_messages = st.lists(
    st.one_of(
        st.builds(lambda i: {"id": i, "role": "user", "content": "hi"}, message_ids),
        st.builds(lambda i: {"id": i, "role": "assistant", "content": "yo"}, message_ids),
    ),
    max_size=3,
)

content_events = st.one_of(
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
    event("CUSTOM", name=st.just("n"), value=small_json),
)


def read_everything(r: Resource) -> None:
    """What an app might read after any event: every selector, every message."""
    for message in r.messages:
        assert message.id
    _ = (r.is_loading, r.is_resuming, r.pending_interrupts, r.error, thaw(r.state), r.warnings)
    _ = (r.output, r.input, r.attempts, r.is_retrying, r.needs_new_thread)


def watched(resource: Resource) -> list[BaseException]:
    """Subscribe an observer that reads everything; returns what it raised (the observer
    re-raises too, so the resource records an ObserverError)."""
    seen: list[BaseException] = []

    def observer(r: Resource) -> None:
        try:
            read_everything(r)
        except BaseException as exc:
            seen.append(exc)
            raise

    resource.subscribe(observer)
    return seen


@settings(max_examples=400)
@given(events=st.lists(content_events, max_size=14))
def test_R_J2_R_F6_any_content_sequence_commits_or_fails_cleanly(
    events: list[dict[str, Any]],
) -> None:
    def run(req: Request) -> Any:
        return reply(started(req), *events, finished(req))

    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))).then(run))
    chat = driver.chat(state={"a": [1]})
    seen = watched(chat)
    chat.send("Go", message_id="u0")
    before = chat.core_state.checkpoint
    driver.run_until_idle(follow_retries=False)

    assert seen == []
    assert not chat.is_loading
    if chat.error is not None:
        assert isinstance(chat.error, ProtocolError), chat.error
        assert chat.error.retryable is False
        assert chat.core_state.checkpoint == before
        return
    committed = list(chat.messages)
    chat.send("Next", message_id="u9")
    driver.run_until_idle(follow_retries=False)
    sent = decode_run_input(driver.requests[-1].json)
    assert list(sent.messages) == [*committed, sent.messages[-1]]
    assert chat.error is None, chat.error


ENDINGS = ("finish", "interrupt", "run_error", "cut", "late_events")


@settings(max_examples=300)
@given(
    events=st.lists(content_events, max_size=10),
    ending=st.sampled_from(ENDINGS),
    late=st.lists(content_events, min_size=1, max_size=2),
    kind=st.sampled_from(["chat", "completion"]),
)
def test_R_J2_R_J3_any_content_then_any_ending_settles_without_a_crash(
    events: list[dict[str, Any]], ending: str, late: list[dict[str, Any]], kind: str
) -> None:
    def run(req: Request) -> Any:
        if ending == "interrupt":
            ask = {"id": "approve", "reason": "input_required", "message": "ok?"}
            return reply(started(req), *events, interrupted(req, ask))
        if ending == "run_error":
            return reply(started(req), *events, {"type": "RUN_ERROR", "message": "boom"})
        if ending == "cut":
            return reply(started(req), *events)  # no terminal event: retried
        if ending == "late_events":
            return reply(started(req), *events, finished(req), *late)
        return reply(started(req), *events, finished(req))

    calls: list[Any] = []
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))).then(run))
    make = driver.completion if kind == "completion" else driver.chat
    chat = make(state={"a": [1]}, local_tools={"local": calls.append})
    seen = watched(chat)
    if kind == "completion":
        chat.set_input("Go")
    else:
        chat.send("Go", message_id="u0")
    before = chat.core_state.checkpoint
    driver.run_until_idle()

    assert seen == []
    assert not chat.is_loading
    error = chat.error
    if isinstance(error, RunError):
        assert ending == "run_error"
    elif isinstance(error, ProtocolError):
        # A violation in the content, or a late event after RUN_FINISHED (R-J3).
        assert error.retryable is False
    else:
        assert error is None, error
    if error is not None and ending != "late_events":
        assert chat.core_state.checkpoint == before  # nothing of a failed run is kept
    if chat.pending_interrupts is not None:
        assert ending == "interrupt" and error is None
    for request in driver.requests:  # every request, tool follow-ups included, is valid
        decode_run_input(request.json)
