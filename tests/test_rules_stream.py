"""The AG-UI stream at the level of the fake driver and the reducer.

Rules proved here: R-J1 (every event type read, unknown types and fields
tolerated), R-J2 (messages from ``TEXT_MESSAGE_*``, ``REASONING_*``,
``TOOL_CALL_*``, ``MESSAGES_SNAPSHOT`` and ``ACTIVITY_*``; state from
``STATE_SNAPSHOT`` and atomic ``STATE_DELTA``), R-J3 (the lifecycle of a
stream: the matching ``RUN_STARTED`` first, one terminal event, late events),
R-J5 (the cancelled and unknown outcomes) and R-J6 (``pendingToolCallIds``),
with R-F1/R-F6 where a violation fails a run. The wire codec itself is tested
in ``test_wire.py``; here every event goes through the fake driver as a wire
frame, exactly as an endpoint would send it.

Streaming is observed with ``held`` replies: ``driver.release(n)`` lets the
stream deliver ``n`` more events, so a test can read the resource between two
deltas.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest

from interlude.adapters.fake import (
    FAKE_EPOCH,
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    held,
    interrupted,
    reply,
    run_error,
    started,
    state_delta,
    state_snapshot,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core import AbortAttempt, FrameReceived, Reload, Send, step
from interlude.core.errors import ProtocolError, RunError
from interlude.core.json import FrozenDict, freeze, thaw
from interlude.core.options import Options, RetryPolicy
from interlude.core.patch import SHARE_MEMBERS_FROM
from interlude.core.pmap import PMap
from interlude.core.pvec import PVec
from interlude.core.state import Checkpoint, State
from interlude.core.stream import MAX_OPEN
from interlude.core.wire import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from interlude.core.wire.codec import decode_message, encode_message

OPTS = Options(retry=RetryPolicy(jitter=0, base_delay=1))
"""Exact back-off: 1 s after the first failed attempt, 2 s after the second; three attempts."""

HISTORY: tuple[Message, ...] = (
    UserMessage(id="old-u", content="Earlier question"),
    AssistantMessage(id="old-a", content="Earlier answer"),
)
"""A history committed before the runs under test (their checkpoint must survive)."""

Handler = Callable[[Request], Reply]


# -- scripts and helpers ------------------------------------------------------------


def succeed(*events: Any) -> Handler:
    """Stream ``events`` between the matching RUN_STARTED and a plain RUN_FINISHED."""
    return lambda req: reply(started(req), *events, finished(req))


def succeed_held(*events: Any) -> Handler:
    """Like :func:`succeed`, one event per ``release``."""
    return lambda req: held(started(req), *events, finished(req))


def outcome(*events: Any, result: Mapping[str, Any] | None) -> Handler:
    """Stream ``events`` and finish with ``result`` as the outcome (None: absent)."""
    return lambda req: reply(started(req), *events, finished(req, result))


def pause(*interrupts: Mapping[str, Any], events: Sequence[Any] = ()) -> Handler:
    return lambda req: reply(started(req), *events, interrupted(req, *interrupts))


def chat_with(
    *replies: Handler | Reply,
    options: Options = OPTS,
    local_tools: Mapping[str, Callable[[Any], Any]] | None = None,
    messages: Sequence[Message] = HISTORY,
    state: Any = None,
    every: Handler | None = None,
) -> tuple[FakeDriver, Resource]:
    """A chat over a history; the agent answers with ``replies`` in order, then ``every``."""
    driver = FakeDriver(ScriptedAgent(every).then(*replies))
    chat = driver.chat(options, local_tools=local_tools, messages=messages, state=state)
    return driver, chat


def feed(driver: FakeDriver, n: int = 1) -> None:
    """Let a held stream deliver ``n`` more events and process them."""
    driver.release(n)
    driver.run_until_idle(follow_retries=False)


def start(chat: Resource, driver: FakeDriver, content: str = "Go", mid: str = "u1") -> Checkpoint:
    """Send a user message and let the request go out; returns the checkpoint the run
    started from (the user message included: it is committed when sent)."""
    chat.send(content, message_id=mid)
    checkpoint = chat.core_state.checkpoint
    driver.run_until_idle(follow_retries=False)
    return checkpoint


def user(mid: str = "u1", content: str = "Go") -> UserMessage:
    return UserMessage(id=mid, content=content)


def call(cid: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=cid, function=FunctionCall(name=name, arguments=arguments))


def reasoning(mid: str, delta: str) -> list[dict[str, Any]]:
    """A reasoning message streamed whole: START, one CONTENT, END."""
    return [
        ev("REASONING_MESSAGE_START", messageId=mid, role="reasoning"),
        ev("REASONING_MESSAGE_CONTENT", messageId=mid, delta=delta),
        ev("REASONING_MESSAGE_END", messageId=mid),
    ]


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    """A wire event: ``ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x")``."""
    return {"type": kind, **fields}


def arguments(message: Message) -> str:
    """The streamed arguments of the first tool call of an assistant message."""
    assert isinstance(message, AssistantMessage) and message.tool_calls, message
    return message.tool_calls[0].function.arguments


def obj(value: dict[str, Any]) -> FrozenDict:
    frozen = freeze(value)
    assert isinstance(frozen, FrozenDict)
    return frozen


def recorder(calls: list[Any], answer: Any) -> Callable[[Any], Any]:
    """A local tool that records the arguments it gets and answers ``answer``."""

    def tool(args: Any) -> Any:
        calls.append(args)
        return answer

    return tool


def streamed(*events: Any) -> list[Message]:
    """The messages one clean run of ``events`` adds after the user's (it must succeed)."""
    return list(settled(*events).messages)[len(HISTORY) + 1 :]


def settled(*events: Any, **setup: Any) -> Resource:
    """The chat after one clean run of ``events`` (it must succeed); ``setup`` goes to
    :func:`chat_with`."""
    driver, chat = chat_with(succeed(*events), **setup)
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    return chat


def assert_idle_ok(chat: Resource) -> None:
    assert (chat.is_loading, chat.is_resuming, chat.error) == (False, False, None)
    assert chat.pending_interrupts is None
    assert chat.needs_new_thread is False


def assert_rolled_back(driver: FakeDriver, chat: Resource, before: Checkpoint) -> ProtocolError:
    """A non-retryable protocol error: nothing committed, nothing retried (R-J2, R-F6)."""
    driver.run_until_idle()  # would follow a retry timer if one were (wrongly) set
    error = chat.error
    assert isinstance(error, ProtocolError), error
    assert error.retryable is False
    assert chat.core_state.checkpoint == before
    assert list(chat.messages) == list(before.messages)
    assert chat.state == before.state
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    assert len(driver.requests) == 1
    assert driver.pending_timers() == []
    return error


def refusal(*events: Any, ending: Mapping[str, Any] | None = None) -> str:
    """The ProtocolError's message for a run streaming ``events`` then finishing with
    ``ending`` (None: no outcome), after checking the run rolled back."""
    driver, chat = chat_with(outcome(*events, result=ending))
    return str(assert_rolled_back(driver, chat, start(chat, driver)))


def without_run_id(req: Request) -> dict[str, Any]:
    body = req.json
    del body["runId"]
    return body  # type: ignore[no-any-return]


# -- R-J2: text messages ----------------------------------------------------------------


def test_R_J2_a_new_resource_starts_from_the_empty_object_so_a_first_delta_applies() -> None:
    """AG-UI 1.0 (Run Input): an absent state means the empty object, and an agent
    computes its deltas against it. A new resource sent ``"state": null``, so an agent's
    first ``add /a`` failed the run with a ProtocolError; @ag-ui/client starts from {}."""
    driver, chat = chat_with(
        succeed(ev("STATE_DELTA", delta=[{"op": "add", "path": "/a", "value": 1}]))
    )
    assert thaw(chat.state) == {}
    start(chat, driver)
    driver.run_until_idle()
    assert chat.error is None and thaw(chat.state) == {"a": 1}
    assert driver.requests[0].json["state"] == {}
    _, given = chat_with(succeed(), state=[1])
    assert thaw(given.state) == [1]


def test_R_J2_text_message_streams_deltas_then_commits() -> None:
    """R-J2, R-A1: START/CONTENT x3/END builds one assistant message; while it streams,
    the last message shows the text so far and the checkpoint is untouched."""
    driver, chat = chat_with(succeed_held(*text("m1", "Hello, world", chunks=3)))
    before = start(chat, driver)
    assert list(chat.messages) == [*HISTORY, user()]
    assert chat.is_loading is True

    feed(driver)  # RUN_STARTED
    feed(driver)  # TEXT_MESSAGE_START
    assert chat.messages[-1] == AssistantMessage(id="m1", content="")
    seen = []
    for _ in range(3):
        feed(driver)  # TEXT_MESSAGE_CONTENT
        seen.append(chat.messages[-1].content)
        assert chat.is_loading is True
        assert len(chat.messages) == len(HISTORY) + 2
        assert chat.core_state.checkpoint == before
    assert seen == ["Hell", "Hello, w", "Hello, world"]

    feed(driver)  # TEXT_MESSAGE_END
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hello, world")
    assert chat.is_loading is True
    assert chat.core_state.checkpoint == before

    feed(driver)  # RUN_FINISHED
    feed(driver)  # end of stream
    assert_idle_ok(chat)
    expected = [*HISTORY, user(), AssistantMessage(id="m1", content="Hello, world")]
    assert list(chat.messages) == expected
    assert list(chat.core_state.checkpoint.messages) == expected
    assert len(driver.requests) == 1


@pytest.mark.parametrize(
    "event",
    [
        ev("TEXT_MESSAGE_START", messageId="m1", role="tool"),
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="reasoning", delta="x"),
        ev("REASONING_MESSAGE_START", messageId="r1", role="assistant"),
        ev("TOOL_CALL_RESULT", messageId="t1", toolCallId="c1", content="x", role="assistant"),
    ],
    ids=lambda e: f"{e['type']}-{e['role']}",
)
def test_R_J2_a_role_outside_the_events_set_is_a_protocol_error(event: dict[str, Any]) -> None:
    """AG-UI 1.0 (processing): a malformed known value is fatal, and no default may
    stand in for a malformed role. A text message with role 'tool' became an assistant
    message; a TOOL_CALL_RESULT with role 'assistant' was taken as a tool message."""
    driver, chat = chat_with(succeed(event))
    before = start(chat, driver)
    error = assert_rolled_back(driver, chat, before)
    assert repr(event["role"]) in str(error)


@pytest.mark.parametrize(
    ("events", "expected", "where"),
    [
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m1", role="narrator"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hi"),
                ev("TEXT_MESSAGE_END", messageId="m1"),
            ],
            AssistantMessage(id="m1", content="Hi"),
            "TEXT_MESSAGE_START",
        ),
        (
            [ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="narrator", delta="Hi")],
            AssistantMessage(id="m1", content="Hi"),
            "TEXT_MESSAGE_CHUNK",
        ),
        (
            [ev("TOOL_CALL_RESULT", messageId="t1", toolCallId="c1", content="x", role="oracle")],
            ToolMessage(id="t1", tool_call_id="c1", content="x"),
            "TOOL_CALL_RESULT",
        ),
    ],
    ids=["start", "chunk", "result"],
)
def test_R_J1_a_role_ag_ui_does_not_define_is_stripped_from_an_event(
    events: list[dict[str, Any]], expected: Message, where: str
) -> None:
    """AG-UI 1.0 (Processing Model): an unrecognised value of a closed set of strings
    ("a message `role`, for instance") is stripped, not fatal; in an optional position
    the field is removed, and an absent role means assistant. It failed the run."""
    driver, chat = chat_with(succeed(*events))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-1] == expected
    assert chat.warnings == (
        f"{where}: left out what AG-UI 1.0 does not define: value {events[0]['role']!r} at role",
    )


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("system", SystemMessage(id="m1", content="Be brief")),
        ("developer", DeveloperMessage(id="m1", content="Be brief")),
        ("user", UserMessage(id="m1", content="Be brief")),
        ("assistant", AssistantMessage(id="m1", content="Be brief")),
    ],
)
def test_R_J2_text_message_start_keeps_its_role(role: str, expected: Message) -> None:
    """R-J2: TEXT_MESSAGE_START's role decides the message kind; it is not forced to assistant."""
    driver, chat = chat_with(
        succeed(
            ev("TEXT_MESSAGE_START", messageId="m1", role=role),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Be "),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="brief"),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [*HISTORY, user(), expected]
    assert chat.messages[-1].role == role


def test_R_J2_text_message_without_role_is_assistant() -> None:
    driver, chat = chat_with(
        succeed(
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hi"),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hi")


def test_R_J1_R_J2_text_message_chunks_open_append_and_close_at_run_end() -> None:
    """R-J1, R-J2: the first TEXT_MESSAGE_CHUNK opens its message (id and role), a chunk
    without messageId continues the open one, a chunk for a new id opens another, and
    RUN_FINISHED closes them all (no TEXT_MESSAGE_END is sent)."""
    driver, chat = chat_with(
        succeed_held(
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="assistant", delta="Hel"),
            ev("TEXT_MESSAGE_CHUNK", delta="lo"),
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="!"),
            ev("TEXT_MESSAGE_CHUNK", messageId="m2", role="assistant", delta="Second"),
            ev("TEXT_MESSAGE_CHUNK", delta=" one"),
        )
    )
    before = start(chat, driver)
    feed(driver, 2)  # RUN_STARTED, first chunk
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hel")
    feed(driver)
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hello")
    feed(driver)
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hello!")
    feed(driver)
    assert chat.messages[-2:] == (
        AssistantMessage(id="m1", content="Hello!"),
        AssistantMessage(id="m2", content="Second"),
    )
    feed(driver)
    assert chat.messages[-1] == AssistantMessage(id="m2", content="Second one")
    assert chat.is_loading is True
    assert chat.core_state.checkpoint == before

    feed(driver, 2)  # RUN_FINISHED, end of stream
    assert_idle_ok(chat)
    assert list(chat.core_state.checkpoint.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(id="m1", content="Hello!"),
        AssistantMessage(id="m2", content="Second one"),
    ]


def test_R_J1_R_J2_reasoning_messages_from_start_content_end_and_chunks() -> None:
    """R-J1, R-J2: REASONING_MESSAGE_START/CONTENT/END and REASONING_MESSAGE_CHUNK build
    ReasoningMessages (role "reasoning"); REASONING_START/END only mark the phase."""
    driver, chat = chat_with(
        succeed_held(
            ev("REASONING_START", messageId="phase"),
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="Think"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="ing"),
            ev("REASONING_MESSAGE_END", messageId="r1"),
            ev("REASONING_MESSAGE_CHUNK", messageId="r2", delta="More"),
            ev("REASONING_MESSAGE_CHUNK", delta=" thought"),
            ev("REASONING_END", messageId="phase"),
            *text("m1", "Answer"),
        )
    )
    start(chat, driver)
    feed(driver, 2)  # RUN_STARTED, REASONING_START
    assert list(chat.messages) == [*HISTORY, user()]
    feed(driver, 2)  # REASONING_MESSAGE_START, first content
    assert chat.messages[-1] == ReasoningMessage(id="r1", content="Think")
    assert chat.messages[-1].role == "reasoning"
    assert chat.is_loading is True
    feed(driver, 2)  # content, end
    assert chat.messages[-1] == ReasoningMessage(id="r1", content="Thinking")
    feed(driver)  # first chunk of r2
    assert chat.messages[-1] == ReasoningMessage(id="r2", content="More")
    driver.run_until_idle()
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        ReasoningMessage(id="r1", content="Thinking"),
        ReasoningMessage(id="r2", content="More thought"),
        AssistantMessage(id="m1", content="Answer"),
    ]
    assert [m.role for m in chat.messages[-3:]] == ["reasoning", "reasoning", "assistant"]


# -- R-J2: tool calls -----------------------------------------------------------------------


def test_R_J2_tool_call_with_parent_attaches_to_the_open_text_message() -> None:
    """R-J2: TOOL_CALL_START naming the open text message as parent puts the call on
    that message: one assistant message with content and tool_calls; argument deltas
    concatenate and are visible as they arrive."""
    driver, chat = chat_with(
        succeed_held(
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Let me look"),
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup", parentMessageId="m1"),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta='{"q":'),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta=' "lamp"'),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta="}"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
    )
    start(chat, driver)
    feed(driver, 4)  # RUN_STARTED, START, CONTENT, TOOL_CALL_START
    assert chat.messages[-1] == AssistantMessage(
        id="m1", content="Let me look", tool_calls=(call("tc1", "lookup", ""),)
    )
    partial = []
    for _ in range(3):
        feed(driver)
        partial.append(arguments(chat.messages[-1]))
    assert partial == ['{"q":', '{"q": "lamp"', '{"q": "lamp"}']
    assert len(chat.messages) == len(HISTORY) + 2
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(
            id="m1", content="Let me look", tool_calls=(call("tc1", "lookup", '{"q": "lamp"}'),)
        ),
    ]


def test_R_J2_two_calls_open_on_one_message_stream_their_arguments_apart() -> None:
    """R-J2: parallel calls on one message: arguments interleave by id; a read shows each
    call's arguments so far, and the older call closes first without touching the newer."""
    driver, chat = chat_with(
        succeed_held(
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup", parentMessageId="m1"),
            ev("TOOL_CALL_START", toolCallId="tc2", toolCallName="price", parentMessageId="m1"),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta='{"q":'),
            ev("TOOL_CALL_ARGS", toolCallId="tc2", delta='{"id":'),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta=" 1}"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
            ev("TOOL_CALL_ARGS", toolCallId="tc2", delta=" 2}"),
            ev("TOOL_CALL_END", toolCallId="tc2"),
        )
    )
    start(chat, driver)
    feed(driver, 5)  # RUN_STARTED, both starts, the first delta of each
    assert chat.messages[-1] == AssistantMessage(
        id="m1", tool_calls=(call("tc1", "lookup", '{"q":'), call("tc2", "price", '{"id":'))
    )
    feed(driver, 2)  # the older call completes and closes while the newer one is open
    assert chat.messages[-1] == AssistantMessage(
        id="m1", tool_calls=(call("tc1", "lookup", '{"q": 1}'), call("tc2", "price", '{"id":'))
    )
    driver.release(100)
    driver.run_until_idle()  # the newer call ends
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(
        id="m1", tool_calls=(call("tc1", "lookup", '{"q": 1}'), call("tc2", "price", '{"id": 2}'))
    )


def test_R_J2_tool_call_without_parent_gets_its_own_assistant_message() -> None:
    """R-J2: a call without parentMessageId is held by a new assistant message whose id
    is the tool call id; a text message before it is left alone."""
    driver, chat = chat_with(succeed(*text("m1", "Sure"), *tool_call("tc1", "lookup", {"q": 1})))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(id="m1", content="Sure"),
        AssistantMessage(id="tc1", tool_calls=(call("tc1", "lookup", '{"q": 1}'),)),
    ]


def test_R_J2_tool_call_parent_naming_no_message_of_the_run_creates_that_message() -> None:
    """R-J2: a parentMessageId that names no message of this run creates an assistant
    message with that id; a second call naming it joins the same message."""
    driver, chat = chat_with(
        succeed(
            *tool_call("tc1", "lookup", {"q": 1}, parent_message_id="a9"),
            *tool_call("tc2", "lookup", {"q": 2}, parent_message_id="a9"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(
            id="a9",
            tool_calls=(call("tc1", "lookup", '{"q": 1}'), call("tc2", "lookup", '{"q": 2}')),
        ),
    ]


def test_R_J1_R_J2_tool_call_chunks_open_the_call_and_append_arguments() -> None:
    """R-J1, R-J2: the first TOOL_CALL_CHUNK (with toolCallName) opens the call, later
    chunks append to it (with or without toolCallId), the run's end closes it."""
    driver, chat = chat_with(
        succeed_held(
            ev("TOOL_CALL_CHUNK", toolCallId="tc1", toolCallName="lookup", delta='{"q"'),
            ev("TOOL_CALL_CHUNK", toolCallId="tc1", delta=": "),
            ev("TOOL_CALL_CHUNK", delta="7}"),
            ev(
                "TOOL_CALL_CHUNK",
                toolCallId="tc2",
                toolCallName="fetch",
                parentMessageId="tc1",
                delta="{}",
            ),
        )
    )
    start(chat, driver)
    feed(driver, 2)
    assert chat.messages[-1] == AssistantMessage(
        id="tc1", tool_calls=(call("tc1", "lookup", '{"q"'),)
    )
    feed(driver)
    assert arguments(chat.messages[-1]) == '{"q": '
    feed(driver)
    assert arguments(chat.messages[-1]) == '{"q": 7}'
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(
            id="tc1", tool_calls=(call("tc1", "lookup", '{"q": 7}'), call("tc2", "fetch", "{}"))
        ),
    ]


def test_R_J2_R_D5_tool_call_result_adds_a_tool_message_and_the_call_is_not_run() -> None:
    """R-J2: TOOL_CALL_RESULT becomes a ToolMessage with the call's id; R-D5: a call that
    already has a result is not executed locally, even for a registered tool."""
    ran: list[Any] = []
    driver, chat = chat_with(
        succeed(
            *tool_call("tc1", "lookup", {"q": 1}),
            ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="tc1", content="42", role="tool"),
        ),
        local_tools={"lookup": ran.append},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(id="tc1", tool_calls=(call("tc1", "lookup", '{"q": 1}'),)),
        ToolMessage(id="r1", content="42", tool_call_id="tc1"),
    ]
    assert ran == []
    assert len(driver.requests) == 1


def test_R_J2_a_closed_message_started_again_in_the_run_continues() -> None:
    """AG-UI 1.0 (Text Messages): a closed message is closed, not sealed; a START with
    its id reopens it and further content appends. It became a second message with the
    same id (@ag-ui/client gives one). Reasoning messages alike."""
    assert streamed(
        *text("m1", "Hello, "),
        *text("m1", "world."),
        *reasoning("r1", "think"),
        *reasoning("r1", "ing"),
    ) == [
        AssistantMessage(id="m1", content="Hello, world."),
        ReasoningMessage(id="r1", content="thinking"),
    ]


def test_R_J2_a_reopened_tool_call_appends_its_arguments_and_runs_once() -> None:
    """AG-UI 1.0 (Tool Calls): further arguments of a reopened call append. Its
    arguments were split over two calls with one id, neither JSON, so the local tool
    never ran and the next request carried two assistant messages with one id."""
    ran: list[Any] = []
    driver, chat = chat_with(
        succeed(
            *tool_call("c1", "lookup", '{"q":'),
            *tool_call("c1", "lookup", " 1}"),
        ),
        succeed(),
        local_tools={"lookup": ran.append},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert ran == [{"q": 1}]
    holders = [m for m in chat.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert holders == [AssistantMessage(id="c1", tool_calls=(call("c1", "lookup", '{"q": 1}'),))]


def test_R_J2_a_calls_own_message_never_takes_an_id_a_message_has() -> None:
    """Call and message ids are separate namespaces: a call with no assistant message to
    join gets a message of its own, named after the call unless a message has that id
    (found by a mutation round: the history held two messages 'u1', and the next request
    sent both)."""
    chat = settled(
        ev("TOOL_CALL_START", toolCallId="u1", toolCallName="t"),
        ev("TOOL_CALL_END", toolCallId="u1"),
        ev("TOOL_CALL_START", toolCallId="u1#2", toolCallName="t", parentMessageId="old-u"),
        ev("TOOL_CALL_END", toolCallId="u1#2"),
    )
    assert [(m.id, m.role) for m in chat.messages] == [
        ("old-u", "user"),
        ("old-a", "assistant"),
        ("u1", "user"),
        ("u1#2", "assistant"),  # the first call's: "u1" is the user's
        ("u1#2#2", "assistant"),  # the second's, whose parent is a user message
    ]
    assert chat.messages[3].tool_calls == (call("u1", "t", ""),)  # type: ignore[union-attr]
    assert chat.messages[4].tool_calls == (call("u1#2", "t", ""),)  # type: ignore[union-attr]


def test_R_J2_event_metadata_merges_into_the_item_the_events_build() -> None:
    """AG-UI 1.0 (Metadata): a consumer MUST merge the metadata of every event making up
    an item, key by key, the last write winning, not recursively; a tool call's lands on
    the call, not its holder; an activity keeps its metadata through a replacing
    snapshot. Every event's metadata was dropped, and subagentRunId with it."""
    driver, chat = chat_with(
        succeed(
            ev("TEXT_MESSAGE_START", messageId="m1", metadata={"model": "x", "n": {"a": 1}}),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hi", metadata={"n": {"b": 2}}),
            ev("TEXT_MESSAGE_END", messageId="m1", metadata={"finish": "stop"}),
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="f", parentMessageId="m1"),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", metadata={"k": 1}),
            ev("TOOL_CALL_END", toolCallId="c1", metadata={"k": 2, "j": 0}),
            ev(
                "TOOL_CALL_RESULT",
                messageId="t1",
                toolCallId="c1",
                content="ok",
                metadata={"ms": 3},
                subagentRunId="sub-1",
            ),
            ev("TEXT_MESSAGE_CHUNK", messageId="m2", delta="a", metadata={"u": 1}),
            ev("TEXT_MESSAGE_CHUNK", messageId="m2", metadata={"usage": 9}),
            ev(
                "ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}, metadata={"x": 1}
            ),
            ev("ACTIVITY_DELTA", messageId="a1", activityType="P", patch=[], metadata={"y": 2}),
            ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={"s": 1}),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    by_id = {m.id: m for m in chat.messages}
    m1 = by_id["m1"]
    assert isinstance(m1, AssistantMessage)
    assert thaw(m1.metadata) == {"model": "x", "n": {"b": 2}, "finish": "stop"}
    assert m1.tool_calls is not None and thaw(m1.tool_calls[0].metadata) == {"k": 2, "j": 0}
    assert (thaw(by_id["t1"].metadata), by_id["t1"].subagent_run_id) == ({"ms": 3}, "sub-1")
    assert thaw(by_id["m2"].metadata) == {"u": 1, "usage": 9}
    assert thaw(by_id["a1"].metadata) == {"x": 1, "y": 2}


def test_R_J2_a_chunk_without_an_id_continues_the_open_chunk_stream_of_its_kind() -> None:
    """AG-UI 1.0 (Streaming): an id-less chunk continues its lane's open chunk stream of
    its kind; a reasoning chunk without an id once continued the newest open message of
    any kind, so the model's thinking landed in the answer."""
    assert streamed(
        ev("REASONING_MESSAGE_CHUNK", messageId="r1", delta="think"),
        ev("REASONING_MESSAGE_CHUNK", delta=" more"),
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="Answer."),
        ev("TEXT_MESSAGE_CHUNK", delta=" Done."),
    ) == [
        ReasoningMessage(id="r1", content="think more"),
        AssistantMessage(id="m1", content="Answer. Done."),
    ]


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (
            # A text chunk is a message event of the lane: the reasoning stream ended.
            [
                ev("REASONING_MESSAGE_CHUNK", messageId="r1", delta="think"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="Answer."),
                ev("REASONING_MESSAGE_CHUNK", delta=" more"),
            ],
            "a reasoning message chunk without an id, and no reasoning message chunk stream open",
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
                ev("STATE_DELTA", delta=[]),
                ev("TEXT_MESSAGE_CHUNK", delta="b"),
            ],
            "a text message chunk without an id, and no text message chunk stream open",
        ),
        (
            [
                ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="t", delta="{"),
                ev("CUSTOM", name="n", value=1),
                ev("TOOL_CALL_CHUNK", delta="}"),
            ],
            "a tool call chunk without an id, and no tool call chunk stream open",
        ),
        (
            # An explicit event for the item ends the shorthand: judged as the triad.
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="b"),
            ],
            "content for message 'm1', which is not open",
        ),
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m1"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="b"),
            ],
            "a TEXT_MESSAGE_CHUNK for 'm1', which a START opened and has not ended: a chunk "
            "does not continue an item of the start, content and end form",
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a", subagentRunId="s1"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m2", delta="b", subagentRunId="s2"),
                ev("TEXT_MESSAGE_CHUNK", delta="c"),
            ],
            "a text message chunk without an id or subagentRunId, and text message chunk "
            "streams open in several subagents: it continues none of them",
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a", subagentRunId="s1"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="b", subagentRunId="s2"),
            ],
            "a chunk of subagent 's2' continuing 'm1', which a chunk of subagent 's1' opened",
        ),
    ],
    ids=[
        "reasoning-after-text",
        "after-a-state-delta",
        "call-after-custom",
        "content-after-chunk",
        "chunk-after-start",
        "ambiguous",
        "other-subagent",
    ],
)
def test_R_J2_a_chunk_stream_ends_at_the_next_event_of_its_lane(
    events: list[dict[str, Any]], says: str
) -> None:
    """AG-UI 1.0 (Closing a chunk stream): the chunked form has no end event; a message,
    tool-call, step, state, custom or reasoning event in its lane ends it, and the two
    forms do not mix. An id-less chunk kept continuing the newest open message."""
    assert refusal(*events) == says


def test_R_J2_chunk_streams_stand_apart_by_lane_and_past_the_events_that_keep_them() -> None:
    """AG-UI 1.0: RAW, ACTIVITY_*, REASONING_ENCRYPTED_VALUE and SUBAGENT_STARTED end no
    chunk stream; a subagent's events leave the parent agent's stream open, and an
    untagged id-less chunk continues the sole open stream of its kind; a subagent's end
    ends its own streams; a chunk with the id of a stream ended before reopens it."""
    assert streamed(
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
        ev("RAW", event={"x": 1}),
        ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="P", content={}),
        ev("SUBAGENT_STARTED", subagentRunId="s1", name="helper"),
        ev("TEXT_MESSAGE_CHUNK", messageId="s-m", delta="x", subagentRunId="s1"),
        ev("STATE_DELTA", delta=[], subagentRunId="s1"),  # ends s1's stream only
        ev("TEXT_MESSAGE_CHUNK", delta="b"),
        ev("TEXT_MESSAGE_CHUNK", messageId="s-m", delta="y", subagentRunId="s1"),
        ev("SUBAGENT_FINISHED", subagentRunId="s1"),
        ev("TEXT_MESSAGE_CHUNK", delta="c"),
        ev("STATE_DELTA", delta=[]),
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="d"),
    ) == [
        AssistantMessage(id="m1", content="abcd"),
        ActivityMessage(id="act1", activity_type="P", content=FrozenDict()),
        AssistantMessage(id="s-m", content="xy", subagent_run_id="s1"),
    ]


@pytest.mark.parametrize(
    "events",
    [
        [
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("REASONING_MESSAGE_CONTENT", messageId="m1", delta="x"),
        ],
        [
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("TEXT_MESSAGE_END", messageId="r1"),
        ],
        [ev("TEXT_MESSAGE_START", messageId="m1"), ev("REASONING_MESSAGE_END", messageId="m1")],
        [
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
            ev("REASONING_MESSAGE_CHUNK", delta="b"),
        ],
        [
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
            ev("REASONING_MESSAGE_CHUNK", messageId="m1", delta="b"),
        ],
        [
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("TEXT_MESSAGE_CONTENT", messageId="r1", delta="x"),
        ],
        [
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("TEXT_MESSAGE_CONTENT", messageId="r1", delta="x"),
        ],
        [
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("REASONING_MESSAGE_END", messageId="r1"),
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("TEXT_MESSAGE_CONTENT", messageId="r1", delta="x"),
        ],
    ],
    ids=[
        "reasoning-content-in-text",
        "text-end-of-reasoning",
        "reasoning-end-of-text",
        "idless-reasoning-chunk-no-reasoning-open",
        "reasoning-chunk-names-text",
        "text-content-in-reasoning",
        "text-content-in-reasoning-beside-text",
        "text-content-in-reopened-reasoning",
    ],
)
def test_R_J2_a_reasoning_event_for_a_text_message_or_back_is_a_protocol_error(
    events: list[dict[str, Any]],
) -> None:
    """AG-UI 1.0 keeps reasoning and text apart ('MUST detect ... and fail the run');
    each of these was accepted, the content put in the other kind of message."""
    driver, chat = chat_with(succeed(*events))
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)


def test_R_J2_text_content_for_a_reasoning_message_says_which_lanes_crossed() -> None:
    driver, chat = chat_with(
        succeed(
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="think"),
            ev("TEXT_MESSAGE_CONTENT", messageId="r1", delta="Answer"),
        )
    )
    error = assert_rolled_back(driver, chat, start(chat, driver))
    assert str(error) == "a text event for message 'r1', a reasoning message"


def test_R_J2_a_text_message_started_with_the_id_of_a_calls_holder_joins_it() -> None:
    """A tool call whose parent message is not streamed yet gets a holder with that id;
    the text message that then starts with the id is the same message."""
    assert streamed(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote", parentMessageId="m1"),
        ev("TOOL_CALL_END", toolCallId="c1"),
        *text("m1", "Looking it up."),
    ) == [
        AssistantMessage(id="m1", content="Looking it up.", tool_calls=(call("c1", "remote", ""),))
    ]


@pytest.mark.parametrize(
    ("restart", "kind"),
    [
        (ev("REASONING_MESSAGE_START", messageId="m1", role="reasoning"), "a reasoning"),
        (ev("TEXT_MESSAGE_START", messageId="m1", role="user"), "a user"),
    ],
    ids=["reasoning", "user"],
)
def test_R_J2_a_message_restarted_as_another_kind_is_a_protocol_error(
    restart: dict[str, Any], kind: str
) -> None:
    driver, chat = chat_with(succeed(*text("m1", "Hi"), restart))
    before = start(chat, driver)
    error = assert_rolled_back(driver, chat, before)
    assert str(error) == (
        f"message 'm1' was started as {kind} message, but the history holds it "
        "as an assistant message"
    )


def test_R_J2_a_later_run_extends_an_earlier_runs_message_by_id() -> None:
    """R-J2 (AG-UI 1.0: a closed message is closed, not sealed, across runs too): a later
    run's TEXT_MESSAGE_START with an earlier message's id reopens it, its text appending,
    and a TOOL_CALL_START whose parentMessageId names it attaches there. One message with
    that id, where it stood; the request that started the run carried it unchanged."""
    driver, chat = chat_with(
        succeed(*text("m1", "First answer")),
        succeed(
            *text("m1", ", continued"),
            *tool_call("tc1", "lookup", {"q": 1}, parent_message_id="m1"),
        ),
    )
    start(chat, driver)
    driver.run_until_idle()
    assert chat.messages[-1] == AssistantMessage(id="m1", content="First answer")

    start(chat, driver, "Again", "u2")
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(
            id="m1",
            content="First answer, continued",
            tool_calls=(call("tc1", "lookup", '{"q": 1}'),),
        ),
        user("u2", "Again"),
    ]
    assert driver.requests[1].json["messages"][len(HISTORY) + 1] == {
        "id": "m1",
        "role": "assistant",
        "content": "First answer",
    }


def test_R_J2_R_F6_a_failed_run_leaves_the_earlier_message_it_extended_as_committed() -> None:
    """R-F6: what a failed run streamed into an earlier run's message is dropped with the
    rest of its draft: the committed message is the same object as before."""
    driver, chat = chat_with(
        succeed(*text("m1", "First answer")),
        succeed(
            *text("m1", " and more"),
            *tool_call("tc1", "lookup", {}, parent_message_id="m1"),
            ev("TEXT_MESSAGE_END", messageId="m1"),  # not open: a violation
        ),
    )
    start(chat, driver)
    driver.run_until_idle()
    committed = chat.messages[-1]
    before = start(chat, driver, "Again", "u2")
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError) and not chat.error.retryable
    assert chat.core_state.checkpoint == before and len(driver.requests) == 2
    assert chat.messages[len(HISTORY) + 1] is committed


def test_R_J2_a_later_run_updates_an_earlier_runs_activity_in_place() -> None:
    """AG-UI 1.0 (Activity): deltas and snapshots match an activity by messageId, so a
    progress widget one run opened a later run updates; no second message with its id."""
    driver, chat = chat_with(
        succeed(ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1})),
        succeed(
            ev(
                "ACTIVITY_DELTA",
                messageId="act1",
                activityType="PLAN",
                patch=[{"op": "replace", "path": "/s", "value": 2}],
            )
        ),
        succeed(ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="DONE", content={})),
    )
    for n in range(3):
        start(chat, driver, f"turn {n}", f"u{n}")
        driver.run_until_idle()
        (activity,) = [m for m in chat.messages if isinstance(m, ActivityMessage)]
        expected = [("PLAN", {"s": 1}), ("PLAN", {"s": 2}), ("DONE", {})][n]
        assert (activity.activity_type, thaw(activity.content)) == expected
    assert_idle_ok(chat)
    assert chat.warnings == ()


def test_R_J2_a_later_run_reopens_an_earlier_runs_tool_call() -> None:
    """AG-UI 1.0 (Tool Calls): a closed call may be reopened by a TOOL_CALL_START with
    its id, across runs too: the arguments append, the name and parent stand; it is not
    a new call, so it is not run as a local tool (R-D5)."""
    ran: list[Any] = []
    driver, chat = chat_with(
        succeed(*tool_call("tc1", "remote", {"a": 1})),
        succeed(
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="other"),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta="!"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
        ),
        local_tools={"other": lambda args: ran.append(args) or "ran"},
    )
    start(chat, driver)
    driver.run_until_idle()
    start(chat, driver, "Again", "u2")
    driver.run_until_idle()
    assert_idle_ok(chat)
    calls = [
        c for m in chat.messages if isinstance(m, AssistantMessage) for c in m.tool_calls or ()
    ]
    assert calls == [call("tc1", "remote", '{"a": 1}!')]
    assert ran == []


# -- R-J2: state ----------------------------------------------------------------------------


def test_R_J2_state_snapshot_replaces_the_state_and_commits_at_the_end() -> None:
    driver, chat = chat_with(
        succeed_held(state_snapshot({"plan": ["a", "b"], "done": False})),
        succeed(),
        state={"old": True, "n": 1},
    )
    before = start(chat, driver)
    feed(driver, 2)  # RUN_STARTED, STATE_SNAPSHOT
    assert thaw(chat.state) == {"plan": ["a", "b"], "done": False}
    assert chat.core_state.checkpoint == before  # streamed, not yet committed
    assert chat.is_loading is True
    feed(driver, 2)
    assert_idle_ok(chat)
    assert thaw(chat.core_state.checkpoint.state) == {"plan": ["a", "b"], "done": False}
    start(chat, driver, "Next", "u2")
    assert driver.requests[1].json["state"] == {"plan": ["a", "b"], "done": False}


def test_R_J2_state_delta_applies_several_operations() -> None:
    """R-J2: STATE_DELTA is RFC 6902: add, remove, replace, move, copy and test, in order."""
    driver, chat = chat_with(
        succeed(
            state_delta(
                {"op": "add", "path": "/items/-", "value": "c"},
                {"op": "replace", "path": "/n", "value": 2},
                {"op": "remove", "path": "/gone"},
                {"op": "copy", "from": "/items/0", "path": "/first"},
                {"op": "move", "from": "/tmp", "path": "/moved"},
                {"op": "test", "path": "/n", "value": 2},
                {"op": "add", "path": "/nested", "value": {"a/b": [1]}},
            ),
            state_delta({"op": "add", "path": "/nested/a~1b/0", "value": 0}),
        ),
        state={"items": ["a", "b"], "n": 1, "gone": 1, "tmp": {"x": 1}},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert thaw(chat.state) == {
        "items": ["a", "b", "c"],
        "n": 2,
        "first": "a",
        "moved": {"x": 1},
        "nested": {"a/b": [0, 1]},
    }


def test_R_J2_long_arrays_share_structure_and_still_read_and_send_as_arrays() -> None:
    """R-J2 at scale: a patched long array becomes a persistent vector, so the next patch
    copies a few slots, not the array; it still equals the tuple, thaws to a list, is
    committed at RUN_FINISHED and goes out as a JSON array in the next request."""
    items = [{"id": n, "status": "open"} for n in range(500)]
    driver, chat = chat_with(
        succeed_held(
            state_delta({"op": "replace", "path": "/items/7/status", "value": "shipped"}),
            state_delta({"op": "add", "path": "/items/-", "value": {"id": 500}}),
            state_delta({"op": "remove", "path": "/items/0"}),
        ),
        succeed(),
        state={"items": items},
    )
    start(chat, driver)
    feed(driver, 2)  # RUN_STARTED and the first patch
    first = chat.state["items"]  # type: ignore[index]
    assert isinstance(first, PVec) and len(first) == 500
    feed(driver, 1)
    second = chat.state["items"]  # type: ignore[index]
    assert second[:500] == first and second[500] == {"id": 500}
    assert first[7] is second[7]  # shared, not copied
    feed(driver, 2)  # the removal and RUN_FINISHED
    assert_idle_ok(chat)
    expected = [*items[1:7], {"id": 7, "status": "shipped"}, *items[8:], {"id": 500}]
    assert thaw(chat.core_state.checkpoint.state) == {"items": expected}
    assert chat.state == freeze({"items": expected})  # equal to the all-tuples form
    start(chat, driver, "Next", "u2")
    assert driver.requests[1].json["state"] == {"items": expected}


@pytest.mark.parametrize(
    "bad_op",
    [
        pytest.param({"op": "remove", "path": "/missing"}, id="remove-missing-path"),
        pytest.param({"op": "test", "path": "/n", "value": 99}, id="test-failure"),
        pytest.param({"op": "replace", "path": "/nope/deeper", "value": 1}, id="no-parent"),
        pytest.param({"op": "add", "path": "/items/7", "value": 1}, id="index-out-of-range"),
        pytest.param({"op": "add", "value": 1}, id="no-path"),
    ],
)
def test_R_J2_R_F6_invalid_state_delta_fails_the_run_atomically(bad_op: dict[str, Any]) -> None:
    """R-J2, R-F6: an invalid patch (its earlier operations valid) is a non-retryable
    ProtocolError; nothing of it, nor of what the run streamed before, is committed."""
    driver, chat = chat_with(
        succeed(
            *text("m1", "Working"),
            state_delta({"op": "replace", "path": "/n", "value": 5}),
            state_delta(
                {"op": "replace", "path": "/n", "value": 6},
                {"op": "add", "path": "/items/-", "value": "z"},
                bad_op,
            ),
            *text("m2", "never reached"),
        ),
        state={"n": 0, "items": ["a"]},
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)
    assert thaw(chat.state) == {"n": 0, "items": ["a"]}
    assert list(chat.messages) == [*HISTORY, user()]


def test_R_J2_invalid_patch_seen_while_streaming_keeps_nothing_half_applied() -> None:
    """R-J2: the streamed state right before a failing patch is the one before the patch;
    after the failure the committed state is back."""
    driver, chat = chat_with(
        succeed_held(
            state_delta({"op": "replace", "path": "/n", "value": 1}),
            state_delta(
                {"op": "replace", "path": "/n", "value": 2},
                {"op": "remove", "path": "/missing"},
            ),
        ),
        state={"n": 0},
    )
    before = start(chat, driver)
    feed(driver, 2)
    assert thaw(chat.state) == {"n": 1}
    assert chat.is_loading is True
    feed(driver)
    assert_rolled_back(driver, chat, before)
    assert thaw(chat.state) == {"n": 0}


# -- R-J2: messages snapshot ------------------------------------------------------------------


def test_R_J2_messages_snapshot_reconciles_by_id() -> None:
    """R-J2: MESSAGES_SNAPSHOT replaces the history; an unchanged message keeps the same
    object, a changed one is replaced, a missing one is gone, a new one is added."""
    driver, chat = chat_with(
        succeed(*text("a1", "Answer one"), *text("a2", "Answer two")),
        succeed(
            ev(
                "MESSAGES_SNAPSHOT",
                messages=[
                    {"id": "old-u", "role": "user", "content": "Earlier question"},
                    {"id": "u1", "role": "user", "content": "Go"},
                    {"id": "a1", "role": "assistant", "content": "Answer one (edited)"},
                    {"id": "u2", "role": "user", "content": "Next"},
                    {"id": "a3", "role": "assistant", "content": "New"},
                ],
            )
        ),
    )
    start(chat, driver)
    driver.run_until_idle()
    old = {m.id: m for m in chat.messages}
    assert set(old) == {"old-u", "old-a", "u1", "a1", "a2"}
    old_u2 = start(chat, driver, "Next", "u2").messages[-1]
    assert old_u2 == user("u2", "Next")
    driver.run_until_idle()
    assert_idle_ok(chat)
    expected = [
        UserMessage(id="old-u", content="Earlier question"),
        user(),
        AssistantMessage(id="a1", content="Answer one (edited)"),
        user("u2", "Next"),
        AssistantMessage(id="a3", content="New"),
    ]
    assert list(chat.messages) == expected
    assert list(chat.core_state.checkpoint.messages) == expected
    assert chat.messages[0] is old["old-u"]
    assert chat.messages[1] is old["u1"]
    assert chat.messages[3] is old_u2
    assert chat.messages[2] is not old["a1"]


def test_R_J2_messages_snapshot_restating_a_number_as_a_boolean_replaces_the_message() -> None:
    """R-J2: the snapshot's copy replaces a held message unless it is the same; ``==``
    took ``{"done": true}`` for the ``{"done": 1}`` held, so the history kept the ``1``
    the agent no longer says (and would show it, or send it back, as a number)."""

    def plan(done: Any) -> dict[str, Any]:
        restated = {
            "id": "p1",
            "role": "activity",
            "activityType": "plan",
            "content": {"done": done},
        }
        return ev("MESSAGES_SNAPSHOT", messages=[restated])

    driver, chat = chat_with(succeed(plan(1)), succeed(plan(True)), messages=())
    start(chat, driver)
    driver.run_until_idle()
    held = chat.messages[-1]
    assert held.id == "p1" and type(held.content["done"]) is int
    start(chat, driver, "Again", "u2")
    driver.run_until_idle()
    assert_idle_ok(chat)
    restated = next(m for m in chat.messages if m.id == "p1")
    assert restated.content["done"] is True


def test_R_J2_messages_snapshot_restating_a_number_in_an_array_replaces_the_message() -> None:
    """R-J2: "the same" looks inside arrays too: ``[1]`` restated as ``[true]`` is a
    change, and the history holds the snapshot's copy."""

    def plan(done: Any) -> dict[str, Any]:
        restated = {
            "id": "p1",
            "role": "activity",
            "activityType": "plan",
            "content": {"steps": [{"done": done}, done]},
        }
        return ev("MESSAGES_SNAPSHOT", messages=[restated])

    driver, chat = chat_with(succeed(plan(1)), succeed(plan(True)), messages=())
    start(chat, driver)
    driver.run_until_idle()
    start(chat, driver, "Again", "u2")
    driver.run_until_idle()
    assert_idle_ok(chat)
    restated = next(m for m in chat.messages if m.id == "p1")
    assert thaw(restated.content) == {"steps": [{"done": True}, True]}
    assert restated.content["steps"][0]["done"] is True and restated.content["steps"][1] is True


def test_R_J2_messages_snapshot_restates_open_streams() -> None:
    """R-J2: a text message and a tool call still streaming are restated by a
    MESSAGES_SNAPSHOT: the snapshot's version is what shows and what the run's end
    commits (they stay open: AG-UI 1.0 says the snapshot closes nothing)."""
    snapshot = [
        {"id": "u1", "role": "user", "content": "Go"},
        {
            "id": "m1",
            "role": "assistant",
            "content": "Full text",
            "toolCalls": [
                {"id": "tc1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
    ]
    driver, chat = chat_with(
        succeed_held(
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Partial"),
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup", parentMessageId="m1"),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta='{"q": "half'),
            ev("MESSAGES_SNAPSHOT", messages=snapshot),
            ev("TEXT_MESSAGE_END", messageId="m1"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
        ),
    )
    start(chat, driver)
    feed(driver, 5)
    assert chat.messages[-1] == AssistantMessage(
        id="m1", content="Partial", tool_calls=(call("tc1", "lookup", '{"q": "half'),)
    )
    feed(driver)  # MESSAGES_SNAPSHOT
    expected = [
        user(),
        AssistantMessage(id="m1", content="Full text", tool_calls=(call("tc1", "lookup", "{}"),)),
    ]
    assert list(chat.messages) == expected
    assert chat.is_loading is True
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == expected
    assert list(chat.core_state.checkpoint.messages) == expected


def test_R_J2_a_message_with_parts_is_not_reopened_for_text() -> None:
    """R-J2: after a MESSAGES_SNAPSHOT a START may reopen any message it holds, but text
    appended to a user message with parts would have replaced them (the image lost)."""
    parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "here"}]
    driver, chat = chat_with(
        succeed(
            ev("MESSAGES_SNAPSHOT", messages=[{"id": "u9", "role": "user", "content": parts}]),
            ev("TEXT_MESSAGE_START", messageId="u9", role="user"),
            ev("TEXT_MESSAGE_CONTENT", messageId="u9", delta="!"),
        )
    )
    error = assert_rolled_back(driver, chat, start(chat, driver))
    assert str(error) == (
        "message 'u9' was started again, but it holds content parts, not text, so text "
        "cannot be appended to it"
    )


def test_R_J2_messages_snapshot_keeps_positions_and_client_only_messages() -> None:
    """AG-UI 1.0 (State, MESSAGES_SNAPSHOT): a message the consumer holds keeps its
    position (the snapshot's order counts only for new ones); activity and reasoning
    messages, which a producer may not track, survive a snapshot that carries none of
    their role; a message still streaming goes on (content after the snapshot appends
    to its text; it failed as 'not open'). interlude adopted the snapshot's order and
    dropped activity and reasoning messages."""
    snapshot = [
        {"id": "m1", "role": "assistant", "content": "Hello"},
        {"id": "u1", "role": "user", "content": "Go"},
        {"id": "a9", "role": "assistant", "content": "New"},
    ]
    driver, chat = chat_with(
        succeed(
            *reasoning("r1", "hmm"),
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1}),
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hel"),
            ev("MESSAGES_SNAPSHOT", messages=snapshot),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta=", world"),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        user(),  # HISTORY is not in the snapshot: dropped, as the producer declared
        ReasoningMessage(id="r1", content="hmm"),
        ActivityMessage(id="act1", activity_type="PLAN", content=freeze({"s": 1})),
        AssistantMessage(id="m1", content="Hello, world"),
        AssistantMessage(id="a9", content="New"),
    ]


def test_R_J2_a_snapshot_carrying_a_role_declares_all_of_it() -> None:
    """The exception is per role and self-revoking: a snapshot with any activity message
    declares the complete activity set, so an activity it omits is dropped."""
    snapshot = [
        {"id": "u1", "role": "user", "content": "Go"},
        {"id": "act2", "role": "activity", "activityType": "PLAN", "content": {}},
    ]
    driver, chat = chat_with(
        succeed(
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1}),
            ev("MESSAGES_SNAPSHOT", messages=snapshot),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert [m.id for m in chat.messages] == ["u1", "act2"]


# -- R-J2: activities -----------------------------------------------------------------------


def test_R_J1_R_J2_activity_snapshots_and_deltas() -> None:
    """R-J1, R-J2: ACTIVITY_SNAPSHOT creates an ActivityMessage; a second one with
    replace=false keeps the first; ACTIVITY_DELTA patches its content; a snapshot
    without replace=false replaces it."""
    driver, chat = chat_with(
        succeed_held(
            ev(
                "ACTIVITY_SNAPSHOT",
                messageId="act1",
                activityType="PLAN",
                content={"steps": ["a"]},
            ),
            ev(
                "ACTIVITY_SNAPSHOT",
                messageId="act1",
                activityType="PLAN",
                content={"steps": ["ignored"]},
                replace=False,
            ),
            ev(
                "ACTIVITY_DELTA",
                messageId="act1",
                activityType="PLAN",
                patch=[{"op": "add", "path": "/steps/-", "value": "b"}],
            ),
            ev(
                "ACTIVITY_SNAPSHOT",
                messageId="act2",
                activityType="SEARCH",
                content={"q": "lamp"},
            ),
            ev(
                "ACTIVITY_SNAPSHOT",
                messageId="act2",
                activityType="SEARCH",
                content={"q": "lamps"},
                replace=True,
            ),
        )
    )
    start(chat, driver)

    def plan() -> ActivityMessage:
        return ActivityMessage(id="act1", activity_type="PLAN", content=obj({"steps": steps}))

    feed(driver, 2)
    steps = ["a"]
    assert chat.messages[-1] == plan()
    assert chat.messages[-1].role == "activity"
    feed(driver)  # replace=false: kept
    assert chat.messages[-1] == plan()
    assert len(chat.messages) == len(HISTORY) + 2
    feed(driver)  # delta
    steps = ["a", "b"]
    assert chat.messages[-1] == plan()
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        plan(),
        ActivityMessage(id="act2", activity_type="SEARCH", content=obj({"q": "lamps"})),
    ]


def test_R_J1_an_unknown_event_type_before_run_started_or_after_the_finish_is_dropped() -> None:
    """AG-UI 1.0 (Processing Model): an event of a type the consumer does not know MUST
    NOT abort the run. One before RUN_STARTED failed the attempt as 'the stream began
    with FUTURE_THING' (retried, then a ProtocolError); one after RUN_FINISHED set
    'error' as more after the finish."""

    def handler(req: Request) -> Reply:
        return reply(
            ev("FUTURE_THING"), started(req), *text("m1", "Hi"), finished(req), ev("LATER_THING")
        )

    driver, chat = chat_with(handler)
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert len(driver.requests) == 1
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hi")
    assert chat.warnings == (
        "an event of type 'FUTURE_THING', which AG-UI 1.0 does not define, was dropped",
        "an event of type 'LATER_THING', which AG-UI 1.0 does not define, was dropped",
    )


def test_warnings_hold_each_note_once_however_often_it_recurs() -> None:
    """A producer may send the same thing thousands of times: a recurring note moves to
    the end instead of repeating, so it cannot flush the other notes out."""
    nowhere = ev("ACTIVITY_DELTA", messageId="zz", activityType="P", patch=[])
    chat = settled(
        ev("FUTURE_THING"),
        *[e for _ in range(30) for e in (nowhere, ev("FUTURE_THING"))],
        nowhere,
    )
    assert chat.warnings == (
        "an event of type 'FUTURE_THING', which AG-UI 1.0 does not define, was dropped",
        "ACTIVITY_DELTA for 'zz', which names no message; the delta was skipped",
    )


def test_R_J1_a_note_repeated_back_to_back_is_no_change_to_observe() -> None:
    """An unknown event type dropped again, its note already the newest, leaves the
    state as it was: observers are not called for each of thousands of repeats."""
    driver, chat = chat_with(
        lambda req: held(started(req), ev("FUTURE_THING"), ev("FUTURE_THING"), finished(req))
    )
    start(chat, driver)
    feed(driver)  # RUN_STARTED
    seen: list[tuple[str, ...]] = []
    chat.subscribe(lambda r: seen.append(r.warnings))
    feed(driver)
    assert len(seen) == 1
    before = chat.core_state
    feed(driver)  # the same note again
    assert chat.core_state is before and len(seen) == 1


def test_R_J2_an_event_that_ends_no_chunk_stream_is_no_change_to_observe() -> None:
    """AG-UI 1.0 (Closing a chunk stream): an event ends the chunk streams of its own lane
    only; the parent agent's CUSTOM event while a subagent's text chunk stream is open
    ends nothing and changes nothing, so observers are not called, and the chunk stream
    goes on."""
    chunk = {"messageId": "m1", "subagentRunId": "s1"}
    driver, chat = chat_with(
        succeed_held(
            ev("TEXT_MESSAGE_CHUNK", **chunk, delta="Hi"),
            ev("CUSTOM", name="ping", value=1),
            ev("TEXT_MESSAGE_CHUNK", **chunk, delta=" there"),
        )
    )
    start(chat, driver)
    feed(driver, 2)  # RUN_STARTED, the first chunk
    seen: list[Resource] = []
    chat.subscribe(seen.append)
    before = chat.core_state
    feed(driver)  # CUSTOM
    assert chat.core_state is before and seen == []
    driver.release(2)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Hi there", subagent_run_id="s1")


def test_R_J1_a_message_of_an_unknown_role_is_dropped_from_its_list_with_a_warning() -> None:
    """AG-UI 1.0 (Processing Model): an unrecognised union member inside a list "is
    dropped and the list survives", and a consumer "MUST NOT let a stripped property
    survive into the value application code receives"; it SHOULD warn, naming the path.
    A MESSAGES_SNAPSHOT's message of a role AG-UI 1.0 does not define was kept in the
    history as an UnknownMessage (and left out of requests)."""
    narrator = {"id": "n1", "role": "narrator", "content": "Meanwhile..."}
    driver, chat = chat_with(
        succeed(
            ev("MESSAGES_SNAPSHOT", messages=[encode_message(user()), narrator]),
            *text("m1", "Done"),
        ),
        succeed(),
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert [m.id for m in chat.messages] == ["u1", "m1"]
    assert chat.warnings == (
        "MESSAGES_SNAPSHOT: left out what AG-UI 1.0 does not define: a message of role "
        "'narrator' at messages[1]",
    )
    chat.send("Next", message_id="u2")
    driver.run_until_idle()
    assert [m["id"] for m in driver.requests[-1].json["messages"]] == ["u1", "m1", "u2"]


def test_R_B6_a_null_state_is_left_out_of_the_request() -> None:
    """AG-UI 1.0 (Schema: RunAgentInput): ``state`` is "State except null, optional",
    and "A whole optional field set to null MUST be omitted" (The Event Model); an
    absent state means ``{}`` (Run Input). A STATE_SNAPSHOT may carry null ("A required
    JSON payload can be null"), and the next request carried ``"state": null``."""
    driver, chat = chat_with(
        succeed(ev("STATE_SNAPSHOT", snapshot=None), *text("m1", "Done")), succeed()
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.state is None
    chat.send("Next", message_id="u2")
    driver.run_until_idle()
    assert "state" not in driver.requests[-1].json


def test_R_J2_activity_messages_stay_in_the_history_but_never_go_back() -> None:
    """AG-UI 1.0 (Run Input): activity messages are the consumer's rendering material;
    a consumer MUST strip them from the messages it sends. They were sent back."""
    driver, chat = chat_with(
        succeed(ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={})),
        succeed(),
    )
    start(chat, driver)
    driver.run_until_idle()
    assert any(isinstance(m, ActivityMessage) for m in chat.messages)
    chat.send("Next")
    driver.run_until_idle()
    sent = driver.requests[-1].json["messages"]
    assert "activity" not in {m["role"] for m in sent}
    assert [m["id"] for m in sent] == [
        m.id for m in chat.messages if not isinstance(m, ActivityMessage)
    ][: len(sent)]


def test_R_J2_a_wide_activity_is_patched_without_rebuilding_its_content(
    pmaps_built: list[int],
) -> None:
    """R-J2 at scale: an activity whose content has thousands of members (a map keyed by
    task id) takes each ACTIVITY_DELTA as one C-level copy of its FrozenDict. It used to
    be made a PMap and copied back on every delta, in Python: 133 ms a delta at 32,000
    members, and a stream adding a member per delta went quadratic (4,000: 16.7 s)."""
    wide = {f"task{i}": "queued" for i in range(SHARE_MEMBERS_FROM + 100)}
    deltas = [
        ev(
            "ACTIVITY_DELTA",
            messageId="act1",
            activityType="TASKS",
            patch=[{"op": "replace", "path": f"/task{k}", "value": "done"}],
        )
        for k in range(5)
    ]
    driver, chat = chat_with(
        succeed(
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="TASKS", content=wide),
            *deltas,
        )
    )
    built = pmaps_built
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    (activity,) = [m for m in chat.messages if isinstance(m, ActivityMessage)]
    assert type(activity.content) is FrozenDict and built == []
    assert [activity.content[f"task{k}"] for k in (0, 4, 5)] == ["done", "done", "queued"]


def test_R_J2_a_wide_shared_state_becomes_a_pmap_once_and_stays_one(
    pmaps_built: list[int],
) -> None:
    """The other side of the activity rule: the shared state is not typed as a
    FrozenDict, so a wide one becomes a PMap at its first patch and every later patch
    changes it in O(log n), with no PMap built again."""
    wide = {f"k{i}": i for i in range(SHARE_MEMBERS_FROM + 100)}
    deltas = [
        ev("STATE_DELTA", delta=[{"op": "replace", "path": f"/k{k}", "value": -k}])
        for k in range(5)
    ]
    driver, chat = chat_with(succeed(ev("STATE_SNAPSHOT", snapshot=wide), *deltas))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert type(chat.state) is PMap and pmaps_built == [len(wide)]
    assert [chat.state[f"k{k}"] for k in (1, 4, 5)] == [-1, -4, 5]


def test_R_J2_an_unknown_patch_op_is_left_out_with_a_warning() -> None:
    """AG-UI 1.0 (processing): unrecognised material, such as an op a newer producer
    defines, is dropped with a warning and the rest applied. It failed the run."""
    driver, chat = chat_with(
        succeed(
            state_delta(
                {"op": "add", "path": "/a", "value": 1},
                {"op": "frobnicate", "path": "/n", "value": 1},
                {"op": "add", "path": "/b", "value": 2},
            ),
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1}),
            ev(
                "ACTIVITY_DELTA",
                messageId="act1",
                activityType="PLAN",
                patch=[{"op": "twist", "path": "/s"}, {"op": "replace", "path": "/s", "value": 2}],
            ),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert thaw(chat.state) == {"a": 1, "b": 2}
    (activity,) = [m for m in chat.messages if isinstance(m, ActivityMessage)]
    assert thaw(activity.content) == {"s": 2}
    assert chat.warnings == (
        "STATE_DELTA: left out operation 1: unknown op 'frobnicate'",
        "ACTIVITY_DELTA: left out operation 0: unknown op 'twist'",
    )


@pytest.mark.parametrize("target", ["nope", "m1"])
def test_R_J2_an_activity_delta_for_no_activity_is_skipped_with_a_warning(target: str) -> None:
    """AG-UI 1.0 (Activity): a delta naming no message, or a message that is not an
    activity, is skipped; the consumer surfaces a warning and MUST NOT fail the run (it
    did). The delta's activityType retypes the activity it amends."""
    driver, chat = chat_with(
        succeed(
            *text("m1", "Partial work"),
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1}),
            ev("ACTIVITY_DELTA", messageId=target, activityType="PLAN", patch=[]),
            ev(
                "ACTIVITY_DELTA",
                messageId="act1",
                activityType="SEARCH",
                patch=[{"op": "add", "path": "/x", "value": 1}],
            ),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    (activity,) = [m for m in chat.messages if isinstance(m, ActivityMessage)]
    assert (activity.activity_type, thaw(activity.content)) == ("SEARCH", {"s": 1, "x": 1})
    names = {"nope": "no message", "m1": "an assistant message, not an activity"}[target]
    assert chat.warnings == (
        f"ACTIVITY_DELTA for {target!r}, which names {names}; the delta was skipped",
    )


@pytest.mark.parametrize(
    "delta",
    [
        pytest.param(
            ev(
                "ACTIVITY_DELTA",
                messageId="act1",
                activityType="PLAN",
                patch=[{"op": "remove", "path": "/missing"}],
            ),
            id="invalid-patch",
        ),
    ],
)
def test_R_J2_bad_activity_delta_is_a_protocol_error(delta: dict[str, Any]) -> None:
    driver, chat = chat_with(
        succeed(
            *text("m1", "Partial work"),
            ev("ACTIVITY_SNAPSHOT", messageId="act1", activityType="PLAN", content={"s": 1}),
            delta,
        )
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(
            [
                ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
                ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Partial"),
            ],
            id="open-text",
        ),
        pytest.param(
            [ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup", parentMessageId="m1")],
            id="open-call-holder",
        ),
        pytest.param(
            [*text("m1", "Closed"), *text("m2", "Another")],
            id="closed-text",
        ),
    ],
)
def test_R_J2_activity_snapshot_replacing_a_streaming_message_is_a_protocol_error(
    opening: list[dict[str, Any]],
) -> None:
    """R-J2, R-F6: an ACTIVITY_SNAPSHOT with the id of a message that is no activity
    would replace it (a message still streaming would leave its deltas, or its open
    call, nowhere to go): the run fails with a ProtocolError and rolls back, and an app
    reading the messages after every event sees no failure."""
    driver, chat = chat_with(
        succeed(
            *opening,
            ev("ACTIVITY_SNAPSHOT", messageId="m1", activityType="PLAN", content={"s": 1}),
            ev("TEXT_MESSAGE_END", messageId="m1"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
        )
    )
    reads: list[Message | None] = []
    chat.subscribe(lambda r: reads.append(r.messages[-1] if len(r.messages) else None))
    before = start(chat, driver)
    error = assert_rolled_back(driver, chat, before)
    assert (
        str(error)
        == "ACTIVITY_SNAPSHOT for 'm1', which names an assistant message, not an activity"
    )
    assert reads and chat.warnings == ()


def test_R_J2_an_activity_snapshot_may_take_the_id_of_a_dropped_message() -> None:
    """A message of a role AG-UI 1.0 does not define never enters the history (it is
    dropped from its snapshot), so its id is free for an activity. (Once kept, such a
    message crashed an ACTIVITY_SNAPSHOT naming it, found by the stream fuzz.)"""
    driver, chat = chat_with(
        succeed(
            ev("MESSAGES_SNAPSHOT", messages=[{"id": "m2", "role": "narrator", "content": 1}]),
            ev("ACTIVITY_SNAPSHOT", messageId="m2", activityType="PLAN", content={"a": None}),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert [(type(m), m.id) for m in chat.messages] == [(ActivityMessage, "m2")]


# -- R-J1: tolerance ------------------------------------------------------------------------


def test_R_J1_unknown_event_types_and_unknown_fields_are_tolerated() -> None:
    """R-J1: an event type AG-UI 1.0 does not define, and unknown fields on known events,
    messages and outcomes, are read past: the run completes as without them."""

    def handler(req: Request) -> Reply:
        return reply(
            {**started(req), "futureField": {"x": 1}, "protocolVersion": "1.0"},
            ev("FUTURE_THING", payload=[1, 2], messageId="m1"),
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant", sparkle=True),
            ev("FUTURE_THING"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hi", confidence=0.9),
            ev("TEXT_MESSAGE_END", messageId="m1", extra=None),
            {**state_snapshot({"k": 1}), "version": 7},
            {**finished(req, {"type": "success", "note": "new"}), "trailer": "x"},
        )

    driver, chat = chat_with(handler)
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [*HISTORY, user(), AssistantMessage(id="m1", content="Hi")]
    assert thaw(chat.state) == {"k": 1}
    # AG-UI 1.0 (Processing Model): an unknown type is dropped with a warning naming it,
    # given once while it stands among the warnings, however often the type comes; an
    # unknown member is stripped with a warning naming its path.
    left_out = "left out what AG-UI 1.0 does not define"
    assert chat.warnings == (
        f"RUN_STARTED: {left_out}: member 'futureField'",
        f"TEXT_MESSAGE_START: {left_out}: member 'sparkle'",
        "an event of type 'FUTURE_THING', which AG-UI 1.0 does not define, was dropped",
        f"TEXT_MESSAGE_CONTENT: {left_out}: member 'confidence'",
        f"TEXT_MESSAGE_END: {left_out}: member 'extra'",
        f"STATE_SNAPSHOT: {left_out}: member 'version'",
        f"RUN_FINISHED: {left_out}: member 'trailer', member 'note' at outcome",
    )
    assert len(driver.requests) == 1


def test_R_J1_a_snapshot_keeps_what_it_can_and_names_what_it_stripped() -> None:
    """R-J1, AG-UI 1.0 (Processing Model): a content part of an unknown type is dropped
    from its list and an unknown member stripped; the rest of the snapshot stands, and
    the warning names each removal by its path."""
    parts = [{"type": "hologram", "frames": 3}, {"type": "text", "text": "see", "lang": "en"}]
    snapshot = ev(
        "MESSAGES_SNAPSHOT",
        messages=[
            *map(encode_message, (*HISTORY, user())),
            {"id": "u2", "role": "user", "content": parts},
        ],
    )
    driver, chat = chat_with(outcome(snapshot, result=None))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-1] == UserMessage(id="u2", content=({"type": "text", "text": "see"},))
    assert chat.warnings == (
        "MESSAGES_SNAPSHOT: left out what AG-UI 1.0 does not define: a content part of type "
        "'hologram' at messages[3].content[0], member 'lang' at messages[3].content[1]",
    )


PASS_THROUGH = [
    ev("RAW", event={"vendor": "x", "data": [1]}, source="openai"),
    ev("CUSTOM", name="progress", value={"pct": 50}),
    ev("STEP_STARTED", stepName="plan"),
    ev("STEP_FINISHED", stepName="plan"),
    ev("REASONING_START", messageId="phase"),
    ev("REASONING_END", messageId="phase"),
    ev("SUBAGENT_STARTED", subagentRunId="s1", name="helper", parentMessageId="m1"),
    ev("SUBAGENT_FINISHED", subagentRunId="s1", result={"ok": True}),
    ev("SUBAGENT_ERROR", subagentRunId="s2", message="subagent failed", code="E"),
]


def test_R_J1_pass_through_events_do_not_disturb_messages_or_state() -> None:
    """R-J1: RAW, CUSTOM, STEP_*, REASONING_START/END and SUBAGENT_* (an error of a
    subagent included) are read and leave messages, state and the run's outcome alone,
    even when they arrive in the middle of a streaming message and tool call."""

    def body(noise: list[dict[str, Any]]) -> list[Any]:
        return [
            *noise,
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
            *noise,
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Hello"),
            *noise,
            ev("TEXT_MESSAGE_END", messageId="m1"),
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup"),
            *noise,
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta="{}"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
            state_snapshot({"s": 1}),
            *noise,
        ]

    plain_driver, plain = chat_with(succeed(*body([])))
    start(plain, plain_driver)
    plain_driver.run_until_idle()
    noisy_driver, noisy = chat_with(succeed(*body(PASS_THROUGH)))
    start(noisy, noisy_driver)
    noisy_driver.run_until_idle()

    assert_idle_ok(noisy)
    assert noisy.core_state.checkpoint == plain.core_state.checkpoint
    assert list(noisy.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(id="m1", content="Hello"),
        AssistantMessage(id="tc1", tool_calls=(call("tc1", "lookup", "{}"),)),
    ]
    assert thaw(noisy.state) == {"s": 1}
    assert noisy.warnings == ()


def encrypted(subtype: str, entity: str, value: str = "E") -> dict[str, Any]:
    return ev("REASONING_ENCRYPTED_VALUE", subtype=subtype, entityId=entity, encryptedValue=value)


def test_R_J1_encrypted_reasoning_values_ride_their_message_or_call_into_the_next_request() -> None:
    """R-J1: REASONING_ENCRYPTED_VALUE stores its opaque value with the message or tool
    call it names (while streaming or after), it is committed with them and sent back
    unmodified in the next request."""
    driver, chat = chat_with(
        succeed(
            ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="Think"),
            encrypted("message", "r1", "E1"),
            ev("REASONING_MESSAGE_END", messageId="r1"),
            ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup"),
            encrypted("tool-call", "tc1", "E2"),
            ev("TOOL_CALL_ARGS", toolCallId="tc1", delta="{}"),
            ev("TOOL_CALL_END", toolCallId="tc1"),
        ),
        succeed(),
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.warnings == ()
    reasoning, holder = chat.messages[-2], chat.messages[-1]
    assert reasoning == ReasoningMessage(id="r1", content="Think", encrypted_value="E1")
    assert isinstance(holder, AssistantMessage) and holder.tool_calls is not None
    expected_call = call("tc1", "lookup", "{}")
    assert holder.tool_calls == (attrs.evolve(expected_call, encrypted_value="E2"),)
    start(chat, driver, "Next", "u2")
    sent = driver.requests[1].json["messages"]
    assert {"id": "r1", "role": "reasoning", "content": "Think", "encryptedValue": "E1"} in sent
    calls = [m["toolCalls"] for m in sent if m.get("toolCalls")]
    assert calls[-1][0]["encryptedValue"] == "E2"


def test_R_J1_an_encrypted_value_finds_its_call_anywhere_in_the_history() -> None:
    """R-J1: the value for a tool call goes to that call, wherever its holder stands
    (found through the draft's hints, not a scan back from the newest message): in the
    run, in an earlier run (AG-UI 1.0 names the call by id, whoever streamed it), and
    after a MESSAGES_SNAPSHOT in the snapshot's calls."""
    history = (
        *HISTORY,
        AssistantMessage(id="old-call", tool_calls=(call("old1", "lookup", "{}"),)),
        ToolMessage(id="old-r", tool_call_id="old1", content="done"),
        UserMessage(id="u0", content="again"),
    )
    calls = [
        e
        for k in range(1, 4)
        for e in (
            ev("TOOL_CALL_START", toolCallId=f"tc{k}", toolCallName="lookup"),
            ev("TOOL_CALL_END", toolCallId=f"tc{k}"),
        )
    ]
    snapshot_message = {
        "id": "snap-a",
        "role": "assistant",
        "toolCalls": [
            {"id": "sc1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        ],
    }
    driver, chat = chat_with(
        succeed(
            *calls,
            *text("m1", "between"),
            encrypted("tool-call", "tc1", "E1"),  # the oldest call of the run
            encrypted("tool-call", "tc3", "E3"),
            encrypted("tool-call", "old1", "E0"),  # an earlier run's
        ),
        succeed(
            ev("MESSAGES_SNAPSHOT", messages=[snapshot_message]),
            encrypted("tool-call", "sc1", "S1"),
        ),
        messages=history,
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.warnings == ()
    holders = [m for m in chat.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    values = {c.id: c.encrypted_value for m in holders for c in m.tool_calls or ()}
    assert values == {"old1": "E0", "tc1": "E1", "tc2": None, "tc3": "E3"}
    start(chat, driver, "Next", "u2")
    driver.run_until_idle()
    (snap,) = [m for m in chat.messages if m.id == "snap-a"]
    assert isinstance(snap, AssistantMessage) and snap.tool_calls is not None
    assert snap.tool_calls[0].encrypted_value == "S1"


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        pytest.param(
            encrypted("message", "nope"),
            "message 'nope'",
            id="unknown-message",
        ),
        pytest.param(
            encrypted("tool-call", "nope"),
            "tool call 'nope'",
            id="unknown-call",
        ),
        pytest.param(
            encrypted("future", "m1"),
            "unknown subtype 'future'",
            id="unknown-subtype",
        ),
    ],
)
def test_R_J1_an_encrypted_value_with_no_place_is_dropped_with_a_warning(
    event: dict[str, Any], fragment: str
) -> None:
    """R-J1: a value naming nothing in the history (or of an unknown subtype) is
    dropped with a warning; the run is not failed and nothing else changes."""
    body = [*text("m1", "Hi")]
    plain_driver, plain = chat_with(succeed(*body))
    start(plain, plain_driver)
    plain_driver.run_until_idle()
    driver, chat = chat_with(succeed(*body, event))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.core_state.checkpoint == plain.core_state.checkpoint
    assert len(chat.warnings) == 1 and fragment in chat.warnings[0]


# -- R-J2: violations after the acknowledgement ---------------------------------------------


VIOLATIONS = {
    "content-for-unopened-message": [ev("TEXT_MESSAGE_CONTENT", messageId="m9", delta="x")],
    "end-twice": [
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant"),
        ev("TEXT_MESSAGE_END", messageId="m2"),
        ev("TEXT_MESSAGE_END", messageId="m2"),
    ],
    "content-after-end": [
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant"),
        ev("TEXT_MESSAGE_END", messageId="m2"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="late"),
    ],
    "start-twice": [
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant"),
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant"),
    ],
    "args-for-unknown-call": [ev("TOOL_CALL_ARGS", toolCallId="tc9", delta="{}")],
    "tool-call-end-unknown": [ev("TOOL_CALL_END", toolCallId="tc9")],
    "tool-call-started-twice": [
        ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup"),
        ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="lookup"),
    ],
    "first-tool-call-chunk-without-name": [ev("TOOL_CALL_CHUNK", toolCallId="tc1", delta="{}")],
    "text-chunk-without-id-nothing-open": [ev("TEXT_MESSAGE_CHUNK", delta="x")],
    "reasoning-content-unopened": [ev("REASONING_MESSAGE_CONTENT", messageId="r9", delta="x")],
    "malformed-frame-after-ack": ["{oops"],
    "known-event-missing-required-field": [ev("TEXT_MESSAGE_CONTENT", messageId="m1")],
    "content-for-another-message-while-one-is-open": [
        ev("TEXT_MESSAGE_START", messageId="m2", role="assistant"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m9", delta="not m2's"),
    ],
    "activity-delta-to-a-non-object": [
        ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="plan", content={"step": 1}),
        ev(
            "ACTIVITY_DELTA",
            messageId="a1",
            activityType="plan",
            patch=[{"op": "replace", "path": "", "value": 5}],
        ),
    ],
}


@pytest.mark.parametrize(
    "one",
    [
        lambda n: ev("TEXT_MESSAGE_START", messageId=f"open-{n}", role="assistant"),
        lambda n: ev("TOOL_CALL_START", toolCallId=f"call-{n}", toolCallName="remote"),
    ],
    ids=["messages", "calls"],
)
def test_R_J2_one_more_than_max_open_at_once_is_a_protocol_error(
    one: Callable[[int], Any],
) -> None:
    driver, chat = chat_with(succeed(*(one(n) for n in range(MAX_OPEN + 1))))
    start(chat, driver)
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError)
    assert f"more than {MAX_OPEN}" in str(chat.error) and "open at once" in str(chat.error)


def test_R_J2_max_open_messages_and_calls_are_allowed_at_once() -> None:
    """The bound on what may be open at once (a hostile-stream limit) is MAX_OPEN itself."""
    opened = [
        *(
            ev("TEXT_MESSAGE_START", messageId=f"open-{n}", role="assistant")
            for n in range(MAX_OPEN)
        ),
        *(
            ev("TOOL_CALL_START", toolCallId=f"c-{n}", toolCallName="remote")
            for n in range(MAX_OPEN)
        ),
        *(ev("TEXT_MESSAGE_END", messageId=f"open-{n}") for n in range(MAX_OPEN)),
        *(ev("TOOL_CALL_END", toolCallId=f"c-{n}") for n in range(MAX_OPEN)),
    ]
    driver, chat = chat_with(succeed(*opened))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert len(chat.messages) == len(HISTORY) + 1 + 2 * MAX_OPEN


@pytest.mark.parametrize(
    ("events", "ending", "named"),
    [
        ([ev("TEXT_MESSAGE_START", messageId="m1")], None, "message 'm1'"),
        (
            [ev("TOOL_CALL_START", toolCallId="tc1", toolCallName="remote")],
            {"type": "success"},
            "tool call 'tc1'",
        ),
        (
            [ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning")],
            {"type": "cancelled"},
            "message 'r1'",
        ),
        (
            # A START for what a chunk stream assembles ends the stream and reopens the
            # message: the START's to end.
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
                ev("TEXT_MESSAGE_START", messageId="m1"),
            ],
            None,
            "message 'm1'",
        ),
        (
            [ev("TEXT_MESSAGE_START", messageId=f"m{n}") for n in range(5)],
            None,
            "message 'm0', message 'm1', message 'm2' and 2 more",
        ),
        (
            [ev("TEXT_MESSAGE_START", messageId=f"m{n}") for n in range(3)],
            None,
            "message 'm0', message 'm1', message 'm2'",  # three named, none "more"
        ),
    ],
    ids=["text", "call", "reasoning-cancelled", "chunk-then-start", "many", "three"],
)
def test_R_J2_a_run_that_finishes_with_a_started_item_open_fails(
    events: list[dict[str, Any]], ending: dict[str, Any] | None, named: str
) -> None:
    """AG-UI 1.0 (Runs and Steps): RUN_FINISHED requires everything a *_START opened to be
    ended, for a success and a cancelled run alike; anything still open is fatal. (The
    run used to commit it as it stood.)"""
    says = f"RUN_FINISHED with {named} still open: a run must end what it starts"
    assert refusal(*events, ending=ending) == says


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (
            [ev("STEP_FINISHED", stepName="plan")],
            "STEP_FINISHED for step 'plan', which is not open",
        ),
        (
            [ev("STEP_STARTED", stepName="plan"), ev("STEP_STARTED", stepName="plan")],
            "step 'plan' was started twice",
        ),
        (
            [
                ev("STEP_STARTED", stepName="plan", subagentRunId="s1"),
                ev("STEP_FINISHED", stepName="plan"),
            ],
            "STEP_FINISHED for step 'plan', which is not open",
        ),
        (
            [ev("STEP_STARTED", stepName="plan"), ev("STEP_STARTED", stepName="act")],
            "RUN_FINISHED with step 'plan', step 'act' still open: a run must end what it starts",
        ),
        (
            [ev("STEP_STARTED", stepName="plan", subagentRunId="s1")],
            "RUN_FINISHED with step 'plan' of subagent 's1' still open: a run must end what "
            "it starts",
        ),
    ],
    ids=["finish-unopened", "start-twice", "finish-in-another-lane", "open-at-end", "subagent"],
)
def test_R_J2_unbalanced_steps_fail_the_run(events: list[dict[str, Any]], says: str) -> None:
    """AG-UI 1.0 (Runs and Steps): a step name is open at most once in its lane, only an
    open step finishes, and every step ends before the run does; @ag-ui/client refuses
    such a stream too. Steps were read past unchecked."""
    assert refusal(*events) == says


def test_R_J2_steps_may_overlap_and_repeat_and_each_lane_has_its_own() -> None:
    """Steps overlap freely and a name may open again once it finished; a subagent's step
    is apart from the parent agent's of the same name."""
    driver, chat = chat_with(
        outcome(
            ev("STEP_STARTED", stepName="plan"),
            ev("STEP_STARTED", stepName="plan", subagentRunId="s1"),
            ev("STEP_STARTED", stepName="act"),
            ev("STEP_FINISHED", stepName="plan"),
            ev("STEP_STARTED", stepName="plan"),
            ev("STEP_FINISHED", stepName="plan", subagentRunId="s1"),
            ev("STEP_FINISHED", stepName="act"),
            ev("STEP_FINISHED", stepName="plan"),
            result=None,
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)


def test_R_A1_an_interrupt_inside_a_step_pauses() -> None:
    """R-A1: a run that stops to ask inside a step (a graph node that interrupts before
    it ends) commits and publishes its batch; only a finishing run must end its steps."""
    driver, chat = chat_with(
        pause(
            {"id": "approve", "reason": "input_required"},
            events=[ev("STEP_STARTED", stepName="approve"), *text("m1", "Approve?")],
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert chat.error is None and chat.pending_interrupts is not None
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Approve?")


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="user", delta="b"),
            ],
            "a chunk continuing 'm1' gives role 'user', where its opener gave 'assistant'",
        ),
        (
            [
                ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="user", name="ann", delta="a"),
                ev("TEXT_MESSAGE_CHUNK", name="bob", delta="b"),
            ],
            "a chunk continuing 'm1' gives name 'bob', where its opener gave 'ann'",
        ),
        (
            [
                ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="lookup", delta="{"),
                ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="other", delta="}"),
            ],
            "a chunk continuing 'c1' gives toolCallName 'other', where its opener gave 'lookup'",
        ),
    ],
    ids=["role-by-omission", "name", "tool-call-name"],
)
def test_R_J2_a_chunk_contradicting_its_opener_fails_the_run(
    events: list[dict[str, Any]], says: str
) -> None:
    """AG-UI 1.0 (Streaming, continuation chunks): a repeated role, name or toolCallName
    must equal the opener's (no role on the opener means assistant); the continuation
    was taken and its value silently dropped."""
    assert refusal(*events) == says


def test_R_J2_a_chunk_repeating_its_openers_fields_unchanged_continues() -> None:
    driver, chat = chat_with(
        outcome(
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="a"),
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", role="assistant", delta="b"),
            ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="lookup", delta="{"),
            ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="lookup", delta="}"),
            result=None,
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-2:] == (
        AssistantMessage(id="m1", content="ab"),
        AssistantMessage(id="c1", tool_calls=(call("c1", "lookup", "{}"),)),
    )


def test_R_J2_items_a_chunk_opened_are_ended_by_the_finish() -> None:
    """AG-UI 1.0 (Streaming): the chunked form has no end event; the run's end closes
    what chunks opened, so a run finishing with them open succeeds."""
    driver, chat = chat_with(
        outcome(
            ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="Hi"),
            ev("REASONING_MESSAGE_CHUNK", messageId="r1", delta="hm"),
            ev("TOOL_CALL_CHUNK", toolCallId="tc1", toolCallName="remote", delta="{}"),
            result=None,
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert [m.id for m in chat.messages][-3:] == ["m1", "r1", "tc1"]


def test_R_J1_an_encrypted_value_for_an_earlier_runs_message_or_call_is_stored_there() -> None:
    """R-J1: AG-UI 1.0 names the message or call by id, whichever run streamed it; the
    value is stored in place (no second message with that id) and goes back with it."""
    old_call = AssistantMessage(id="old-c", tool_calls=(call("tc-old", "t", "{}"),))
    history = (*HISTORY, old_call)
    driver, chat = chat_with(
        succeed(encrypted("tool-call", "tc-old", "EC"), encrypted("message", "old-c", "EM")),
        messages=history,
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.warnings == ()
    assert [m.id for m in chat.messages][: len(history)] == [m.id for m in history]
    stored = chat.messages[len(history) - 1]
    assert isinstance(stored, AssistantMessage) and stored.tool_calls is not None
    assert (stored.encrypted_value, stored.tool_calls[0].encrypted_value) == ("EM", "EC")
    assert [m.id for m in chat.messages].count("old-c") == 1


def test_R_J1_an_encrypted_value_for_an_activity_is_dropped_with_a_warning() -> None:
    """R-J1: an activity message has no place for one (AG-UI 1.0 gives it none)."""
    driver, chat = chat_with(
        succeed(
            ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}),
            encrypted("message", "a1", "E"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.warnings == (
        "REASONING_ENCRYPTED_VALUE for message 'a1', an activity message, which cannot "
        "hold one; the value was dropped",
    )


@pytest.mark.parametrize("events", list(VIOLATIONS.values()), ids=list(VIOLATIONS))
def test_R_J2_R_F6_violation_after_ack_is_fatal_and_rolls_back(events: list[Any]) -> None:
    """R-J2, R-F1, R-F6: an event that breaks AG-UI after the acknowledgement is a
    non-retryable ProtocolError; the run's streamed messages and state are dropped,
    the committed checkpoint is intact and no retry request goes out."""
    driver, chat = chat_with(
        succeed(
            *text("m1", "Streamed but never committed"),
            state_snapshot({"streamed": True}),
            *events,
            *text("m3", "after the violation"),
        ),
        state={"committed": True},
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)
    assert list(chat.messages) == [*HISTORY, user()]
    assert thaw(chat.state) == {"committed": True}


# -- R-J3: the lifecycle of a stream --------------------------------------------------------


BAD_FIRST_EVENTS: dict[str, Callable[[Request], Any]] = {
    "text-first": lambda req: ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
    "state-first": lambda req: state_snapshot({"x": 1}),
    "finished-first": finished,
    "unknown-type-first": lambda req: ev("FUTURE_THING"),
    "run-started-other-run-id": lambda req: {**started(req), "runId": "someone-else"},
    "run-started-other-thread": lambda req: {**started(req), "threadId": "other-thread"},
    "malformed-json": lambda req: "{oops",
}


@pytest.mark.parametrize("first", list(BAD_FIRST_EVENTS.values()), ids=list(BAD_FIRST_EVENTS))
def test_R_J3_R_F1_stream_not_opening_with_matching_run_started_is_retried(
    first: Callable[[Request], Any],
) -> None:
    """R-J3, R-F1, R-F2: anything but the matching RUN_STARTED first is a retryable
    protocol error: after the back-off the same request goes out with a fresh run id."""
    driver, chat = chat_with(
        lambda req: reply(first(req), *text("bad", "never shown"), finished(req)),
        succeed(*text("m1", "Second try")),
    )
    start(chat, driver)
    assert len(driver.requests) == 1
    assert driver.pending_timers() == [(FAKE_EPOCH + 1.0, "retry")]
    assert (chat.is_loading, chat.error) == (True, None)
    assert list(chat.messages) == [*HISTORY, user()]

    driver.advance(0.5)
    driver.run_until_idle(follow_retries=False)
    assert len(driver.requests) == 1  # still waiting out the back-off
    driver.advance(0.5)
    driver.run_until_idle(follow_retries=False)
    assert len(driver.requests) == 2
    first_req, second_req = driver.requests
    assert first_req.run_id != second_req.run_id
    assert first_req.thread_id == second_req.thread_id
    assert without_run_id(first_req) == without_run_id(second_req)
    assert second_req.resume is None

    assert_idle_ok(chat)
    assert list(chat.messages) == [
        *HISTORY,
        user(),
        AssistantMessage(id="m1", content="Second try"),
    ]


def test_R_J3_malformed_frames_before_ack_exhaust_the_budget_with_a_retryable_error() -> None:
    """R-J3, R-F1: malformed JSON before the acknowledgement is retried with back-off
    (1 s, then 2 s); when the budget runs out the recorded error says retryable=True."""
    driver, chat = chat_with(every=lambda req: reply("{oops", started(req), finished(req)))
    before = start(chat, driver)
    driver.run_until_idle()
    assert len(driver.requests) == 3
    assert len({r.run_id for r in driver.requests}) == 3
    assert driver.clock.now() == FAKE_EPOCH + 3.0
    error = chat.error
    assert isinstance(error, ProtocolError)
    assert error.retryable is True
    assert error.message.endswith("(gave up after 3 attempt(s), RetryPolicy.max_attempts)")
    assert chat.core_state.checkpoint == before
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    assert driver.pending_timers() == []


def test_R_J3_R_F1_run_error_as_the_first_event_is_not_retried() -> None:
    """R-J3, R-F1: a stream may begin with RUN_ERROR: the run fails with RunError, once."""
    driver, chat = chat_with(lambda req: reply(run_error("quota exceeded", "QUOTA")))
    before = start(chat, driver)
    driver.run_until_idle()
    assert chat.error == RunError("quota exceeded", "QUOTA")
    assert len(driver.requests) == 1
    assert chat.core_state.checkpoint == before
    assert chat.is_loading is False


def test_R_J3_end_of_stream_before_ack_is_retried() -> None:
    """R-J3: an empty stream (ended before RUN_STARTED) is a retryable protocol error."""
    driver, chat = chat_with(reply(), succeed(*text("m1", "Done")))
    start(chat, driver)
    assert driver.pending_timers() == [(FAKE_EPOCH + 1.0, "retry")]
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m1", content="Done")


def test_R_J3_R_F6_truncated_run_after_ack_fails_and_commits_nothing() -> None:
    """R-J3, R-F6: a stream that ends after RUN_STARTED without a terminal event is a
    failure, never a success: the partial text is not committed and nothing is retried."""
    driver, chat = chat_with(
        lambda req: reply(
            started(req),
            ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Half an ans"),
            state_snapshot({"half": True}),
        ),
        state={"whole": True},
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)
    assert all(m.id != "m1" for m in chat.messages)


def test_R_J3_truncated_run_after_ack_is_a_failure_even_with_complete_messages() -> None:
    driver, chat = chat_with(lambda req: reply(started(req), *text("m1", "Complete text")))
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)


def test_R_J3_duplicate_run_started_after_ack_fails_the_run() -> None:
    driver, chat = chat_with(
        lambda req: reply(started(req), *text("m1", "One"), started(req), finished(req))
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)


@pytest.mark.parametrize(
    "override",
    [{"runId": "other-run"}, {"threadId": "other-thread"}],
    ids=["other-run-id", "other-thread-id"],
)
def test_R_J3_run_finished_with_other_ids_fails_the_run(override: dict[str, str]) -> None:
    driver, chat = chat_with(
        lambda req: reply(started(req), *text("m1", "One"), {**finished(req), **override})
    )
    before = start(chat, driver)
    assert_rolled_back(driver, chat, before)


def interrupt_then(*late: Any) -> Handler:
    """An interrupted run whose stream goes on after RUN_FINISHED with ``late``."""

    def handler(req: Request) -> Reply:
        return held(
            started(req),
            *text("m1", "Need approval"),
            interrupted(req, {"id": "approve", "reason": "input_required"}),
            *late,
        )

    return handler


def test_R_J3_late_run_error_is_surfaced_and_does_not_withdraw_the_batch() -> None:
    """R-J3, R-A1: after RUN_FINISHED with an interrupt outcome, a late RUN_ERROR on the
    same stream sets ``error`` but the batch stays published (same object), the
    checkpoint stays committed, and the batch can still be resumed."""
    driver, chat = chat_with(
        interrupt_then(run_error("late trouble", "LATE")),
        succeed(*text("m2", "Resumed")),
    )
    start(chat, driver)
    feed(driver, 5)  # RUN_STARTED, 3 text events, RUN_FINISHED(interrupt)
    batch = chat.pending_interrupts
    assert batch is not None
    assert [it.id for it in batch.interrupts] == ["approve"]
    committed = chat.core_state.checkpoint
    assert list(committed.messages)[-1] == AssistantMessage(id="m1", content="Need approval")
    assert (chat.is_loading, chat.error) == (False, None)

    feed(driver)  # the late RUN_ERROR
    assert chat.error == RunError("late trouble", "LATE")
    assert chat.pending_interrupts is batch
    assert chat.core_state.checkpoint == committed
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    feed(driver)  # end of stream
    assert chat.pending_interrupts is batch

    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": True}])
    assert chat.error is None
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert driver.requests[1].resume == [
        {"interruptId": "approve", "status": "resolved", "payload": True}
    ]
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m2", content="Resumed")


def test_R_J3_a_late_run_error_while_a_resume_is_sent_leaves_the_resume_alone() -> None:
    """R-J3, R-F4: the interrupted run's late RUN_ERROR arrives after resume() sent its
    request but before the acknowledgement. It is surfaced; the claim stands and the
    resume goes on (recovery is for a failure inside the acknowledged interaction, R-F5)."""
    driver, chat = chat_with(
        interrupt_then(run_error("late")),
        lambda req: held(started(req), *text("m2", "Resumed"), finished(req)),
    )
    start(chat, driver)
    feed(driver, 5)
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": True}])
    driver.run_until_idle(follow_retries=False)  # the resume's request is out, unanswered
    first, _ = driver.requests
    s = chat.core_state
    assert s.claim is not None and first.attempt in s.lingering
    t = step(s, FrameReceived(first.attempt, json.dumps(run_error("late"))), FAKE_EPOCH)
    assert t.commands == (AbortAttempt(first.attempt),)  # its stream has said its last
    assert t.state.error == RunError("late") and first.attempt not in t.state.lingering
    assert (t.state.claim, t.state.resuming, t.state.run) == (s.claim, True, s.run)
    assert (t.state.batch, t.state.needs_new_thread) == (s.batch, False)


def test_R_J3_a_late_run_error_during_a_tool_follow_up_leaves_the_follow_up_alone() -> None:
    """R-J3: a run that finished with a local tool call sends a late RUN_ERROR while its
    follow-up run is out. It is surfaced, and the follow-up is not aborted (outside a
    resumed interaction there is no recovery to enter)."""
    driver, chat = chat_with(
        lambda req: held(
            started(req), *tool_call("c1", "lookup", {}), finished(req), run_error("late")
        ),
        lambda req: held(started(req), *text("m2", "B"), finished(req)),
        local_tools={"lookup": lambda args: "found"},
    )
    start(chat, driver)
    feed(driver, 5)  # the first run, its tool, and the follow-up's request
    first, follow_up = driver.requests
    s = chat.core_state
    assert s.run is not None and s.run.attempt is not None
    assert s.run.attempt.id == follow_up.attempt and first.attempt in s.lingering
    t = step(s, FrameReceived(first.attempt, json.dumps(run_error("late"))), FAKE_EPOCH)
    assert t.commands == (AbortAttempt(first.attempt),)  # its stream has said its last
    assert t.state.error == RunError("late") and first.attempt not in t.state.lingering
    assert (t.state.run, t.state.needs_new_thread) == (s.run, False)


def test_R_J3_a_late_run_error_ends_its_stream_so_nothing_replaces_it() -> None:
    """R-J3: a late RUN_ERROR is surfaced, and it is the stream's last word (AG-UI 1.0:
    only a new run may follow a RUN_ERROR, which R-J3 refuses). What the endpoint sends
    after it is not read: it neither replaces the RunError with a ProtocolError nor
    records a second RUN_ERROR."""
    after = ev("TEXT_MESSAGE_START", messageId="late", role="assistant")
    driver, chat = chat_with(interrupt_then(run_error("late", "LATE"), after, run_error("again")))
    start(chat, driver)
    feed(driver, 5)
    batch = chat.pending_interrupts
    assert batch is not None
    feed(driver, 3)  # the late RUN_ERROR, and what would follow it
    assert chat.error == RunError("late", "LATE")
    assert chat.pending_interrupts is batch and chat.core_state.lingering == frozenset()


LATE_EVENTS: dict[str, Callable[[], Any]] = {
    "text": lambda: ev("TEXT_MESSAGE_START", messageId="late", role="assistant"),
    "state": lambda: state_snapshot({"late": True}),
    "run-started": lambda: ev("RUN_STARTED", threadId="t", runId="r"),
    "run-finished": lambda: ev("RUN_FINISHED", threadId="t", runId="r"),
    "malformed": lambda: "{oops",
}


@pytest.mark.parametrize("late", list(LATE_EVENTS.values()), ids=list(LATE_EVENTS))
def test_R_J3_other_late_events_are_protocol_errors_that_keep_the_batch(
    late: Callable[[], Any],
) -> None:
    """R-J3: after a run closes only a late RUN_ERROR is tolerated; anything else is
    recorded as a ProtocolError, but the batch and the checkpoint stay."""
    driver, chat = chat_with(interrupt_then(late()))
    start(chat, driver)
    feed(driver, 5)
    batch = chat.pending_interrupts
    assert batch is not None
    committed = chat.core_state.checkpoint
    feed(driver)
    assert isinstance(chat.error, ProtocolError)
    assert chat.pending_interrupts is batch
    assert chat.core_state.checkpoint == committed
    assert list(chat.messages) == list(committed.messages)
    assert thaw(chat.state) == {}
    assert (chat.is_loading, chat.is_resuming, chat.needs_new_thread) == (False, False, False)
    driver.release(10)
    driver.run_until_idle()
    assert len(driver.requests) == 1
    assert chat.pending_interrupts is batch


def test_R_J3_late_event_after_success_is_recorded_and_keeps_the_commit() -> None:
    driver, chat = chat_with(
        lambda req: reply(
            started(req), *text("m1", "Done"), finished(req), *text("m2", "after the end")
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert isinstance(chat.error, ProtocolError)
    assert list(chat.messages) == [*HISTORY, user(), AssistantMessage(id="m1", content="Done")]
    assert chat.is_loading is False
    assert len(driver.requests) == 1


@pytest.mark.parametrize(
    ("late", "expected"),
    [
        (
            ev("TEXT_MESSAGE_START", messageId="late", role="assistant"),
            ProtocolError("the endpoint sent more after RUN_FINISHED: a TEXT_MESSAGE_START event"),
        ),
        # A RUN_ERROR was only recorded (R-J3): the tool ran, the follow-up went out, and
        # the interaction 'settled' with the endpoint's failure beside it.
        (run_error("charge failed"), RunError("charge failed")),
    ],
)
def test_R_J3_R_F5_a_late_event_inside_a_resumed_interaction_requires_a_new_thread(
    late: dict[str, Any], expected: Exception
) -> None:
    """R-F5 with R-J3: the resumed run finishes (a local tool left), then its stream sends
    more. A failure anywhere before the interaction settles means recovery, no follow-up:
    a protocol error, and a RUN_ERROR too."""
    driver, chat = chat_with(
        interrupt_then(),
        lambda req: reply(started(req), *tool_call("c1", "lookup", {}), finished(req), late),
        local_tools={"lookup": lambda args: "found"},
        every=succeed(*text("m9", "follow-up")),
    )
    start(chat, driver)
    feed(driver, 5)
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": True}])
    driver.run_until_idle()
    assert chat.error == expected
    assert (chat.needs_new_thread, chat.is_resuming, chat.is_loading) == (True, False, False)
    assert len(driver.requests) == 2  # no follow-up run for the tool


def test_R_J3_the_resumes_acknowledgement_closes_the_stream_of_the_run_it_answers() -> None:
    """Late events of the run that published the batch, arriving after the resume was
    acknowledged, concern nothing left: that stream is closed, nothing is recorded."""
    driver, chat = chat_with(
        interrupt_then(ev("TEXT_MESSAGE_START", messageId="late", role="assistant")),
        succeed(*text("m2", "Resumed")),
    )
    start(chat, driver)
    feed(driver, 5)  # the interrupted run, its late event still held
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": True}])
    driver.run_until_idle()  # the resume is acknowledged and settles
    driver.release(10)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m2", content="Resumed")


@pytest.mark.parametrize("new_input", ["send", "reload"])
def test_R_J3_new_input_closes_the_streams_of_finished_runs(new_input: str) -> None:
    """A finished run's stream stays open only for a late RUN_ERROR (R-J3). New input
    closes it: an endpoint that holds its connections open must not pile them up, and
    the old run's late RUN_ERROR must not become the new run's error."""
    driver, chat = chat_with(
        lambda req: held(started(req), *text("m1", "Done"), finished(req), run_error("late A")),
        succeed(*text("m2", "B")),
    )
    start(chat, driver)
    feed(driver, 5)  # run A finished; its late RUN_ERROR is still held
    (first,) = driver.requests
    assert chat.core_state.lingering == {first.attempt}
    t = step(chat.core_state, Send("again") if new_input == "send" else Reload(), FAKE_EPOCH)
    assert AbortAttempt(first.attempt) in t.commands
    assert t.state.lingering == frozenset()
    chat.send("again") if new_input == "send" else chat.reload()
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert chat.core_state.lingering == frozenset()
    chat.apply(FrameReceived(first.attempt, json.dumps(run_error("late A"))))
    assert_idle_ok(chat)
    assert chat.messages[-1] == AssistantMessage(id="m2", content="B")


# -- R-J5: the cancelled and unknown outcomes -----------------------------------------------


def test_R_J5_cancelled_outcome_commits_and_starts_nothing() -> None:
    """R-J5, R-A5: RUN_FINISHED with outcome cancelled commits what was streamed, runs no
    local tool (even one registered and called in that run), sends no follow-up; the
    next run is an ordinary run."""
    ran: list[Any] = []
    driver, chat = chat_with(
        outcome(
            *text("m1", "Stopping here"),
            *tool_call("tc1", "lookup", {"q": 1}),
            state_snapshot({"step": 1}),
            result={"type": "cancelled"},
        ),
        succeed(*text("m2", "Fresh")),
        local_tools={"lookup": ran.append},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert ran == []
    assert len(driver.requests) == 1
    assert driver.pending_timers() == []
    expected = [
        *HISTORY,
        user(),
        AssistantMessage(id="m1", content="Stopping here"),
        AssistantMessage(id="tc1", tool_calls=(call("tc1", "lookup", '{"q": 1}'),)),
    ]
    assert list(chat.core_state.checkpoint.messages) == expected
    assert thaw(chat.state) == {"step": 1}

    start(chat, driver, "Next", "u2")
    driver.run_until_idle()
    assert len(driver.requests) == 2
    assert driver.requests[1].resume is None
    assert [m["id"] for m in driver.requests[1].json["messages"]] == [
        *(m.id for m in expected),
        "u2",
    ]
    assert ran == []
    assert_idle_ok(chat)


def test_R_J5_cancelled_outcome_ends_a_resumed_interaction_without_recovery() -> None:
    """R-J5, R-C4, R-F5: inside a resumed interaction a cancelled outcome ends it cleanly:
    is_resuming False, needs_new_thread False, what it streamed committed."""
    ran: list[Any] = []
    driver, chat = chat_with(
        pause({"id": "approve", "reason": "input_required"}, events=text("m1", "May I?")),
        lambda req: held(
            started(req),
            *text("m2", "Cancelled by the agent"),
            *tool_call("tc1", "lookup", {}),
            finished(req, {"type": "cancelled"}),
        ),
        local_tools={"lookup": ran.append},
    )
    start(chat, driver)
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": {}}])
    driver.run_until_idle()
    feed(driver, 4)  # RUN_STARTED and the text
    assert (chat.is_loading, chat.is_resuming, chat.pending_interrupts) == (True, True, None)
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert ran == []
    assert chat.messages[-2] == AssistantMessage(id="m2", content="Cancelled by the agent")
    assert len(driver.requests) == 2
    chat.send("Carry on", message_id="u2")  # no RecoveryRequiredError
    assert chat.is_resuming is False


def test_R_J5_unknown_outcome_is_read_as_success_with_a_warning() -> None:
    """R-J5, R-J6: an outcome type AG-UI 1.0 does not define is success: the calls to local
    tools run and a follow-up goes out; ``warnings`` names the type."""
    ran: list[Any] = []
    driver, chat = chat_with(
        outcome(
            *text("m1", "Handing off"),
            *tool_call("tc1", "lookup", {"q": 1}),
            result={"type": "handoff", "target": "elsewhere"},
        ),
        succeed(*text("m2", "Follow-up")),
        local_tools={"lookup": recorder(ran, "found")},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert chat.error is None
    assert len(chat.warnings) == 1
    assert "handoff" in chat.warnings[0]
    assert ran == [{"q": 1}]
    assert len(driver.requests) == 2
    assert driver.requests[1].resume is None
    assert_idle_ok(chat)
    tool_messages = [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content, m.error) for m in tool_messages] == [("tc1", "found", None)]
    assert chat.messages[-1] == AssistantMessage(id="m2", content="Follow-up")


def test_R_J5_cancelled_and_success_outcomes_add_no_warning() -> None:
    driver, chat = chat_with(
        outcome(*text("m1", "a"), result={"type": "cancelled"}),
        outcome(*text("m2", "b"), result={"type": "success"}),
    )
    start(chat, driver)
    driver.run_until_idle()
    start(chat, driver, "again", "u2")
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert chat.warnings == ()


# -- R-J6: pendingToolCallIds ---------------------------------------------------------------


def test_R_J6_pending_tool_call_ids_run_exactly_those_calls() -> None:
    """R-J6, R-D5: a success outcome's pendingToolCallIds names the calls the client runs:
    exactly those; an id the run did not stream gets an error tool message; the
    follow-up carries the results and no resume."""
    ran: list[Any] = []

    def lookup(args: Any) -> Any:
        ran.append(args)
        return {"found": args["q"]}

    driver, chat = chat_with(
        outcome(
            *tool_call("tc1", "lookup", {"q": 1}),
            *tool_call("tc2", "lookup", {"q": 2}),
            *tool_call("tc3", "lookup", {"q": 3}),
            result={"type": "success", "pendingToolCallIds": ["tc1", "tc3", "tc9"]},
        ),
        succeed(*text("m2", "Thanks")),
        local_tools={"lookup": lookup},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert ran == [{"q": 1}, {"q": 3}]
    assert len(driver.requests) == 2
    follow_up = driver.requests[1]
    assert follow_up.resume is None
    sent_results = [m for m in follow_up.json["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in sent_results] == ["tc1", "tc3", "tc9"]

    assert_idle_ok(chat)
    results = [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["tc1", "tc3", "tc9"]
    assert [json.loads(str(m.content)) for m in results[:2]] == [{"found": 1}, {"found": 3}]
    assert (results[0].error, results[1].error) == (None, None)
    assert results[2].error == (
        "the run named tool call 'tc9' in pendingToolCallIds, but the history holds no "
        "call with that id"
    )
    assert chat.messages[-1] == AssistantMessage(id="m2", content="Thanks")


def test_R_J6_R_D5_a_named_call_that_already_has_a_result_is_not_run_again() -> None:
    """R-J6 within R-D5: pendingToolCallIds naming a call the run already answered with a
    TOOL_CALL_RESULT runs only the others; no second result, a warning names it."""
    ran: list[Any] = []
    driver, chat = chat_with(
        outcome(
            *tool_call("tc1", "lookup", {"q": 1}),
            ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="tc1", content="server did it"),
            *tool_call("tc2", "lookup", {"q": 2}),
            result={"type": "success", "pendingToolCallIds": ["tc1", "tc2"]},
        ),
        succeed(*text("m2", "Thanks")),
        local_tools={"lookup": recorder(ran, "ok")},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert ran == [{"q": 2}]
    results = [(m.tool_call_id, m.content) for m in chat.messages if isinstance(m, ToolMessage)]
    assert results == [("tc1", "server did it"), ("tc2", "ok")]
    assert [w for w in chat.warnings if "'tc1'" in w and "already have a result" in w]
    assert_idle_ok(chat)


@pytest.mark.parametrize(
    "result",
    [None, {"type": "success"}, {"type": "success", "pendingToolCallIds": []}],
    ids=["no-outcome", "success-without-ids", "empty-ids"],
)
def test_R_J6_R_D5_without_pending_ids_the_calls_are_derived_from_the_stream(
    result: dict[str, Any] | None,
) -> None:
    """R-J6, R-D5: without pendingToolCallIds (absent or empty) the client runs the calls
    this run started, to tools it registered, that have no result yet; a call from an
    earlier run is not run again."""
    ran: list[Any] = []
    driver, chat = chat_with(
        outcome(*tool_call("tc0", "lookup", {"q": 0}), result={"type": "cancelled"}),
        outcome(
            *tool_call("tc1", "lookup", {"q": 1}),
            *tool_call("tc2", "server_side", {"q": 2}),
            *tool_call("tc3", "lookup", {"q": 3}),
            ev("TOOL_CALL_RESULT", messageId="r3", toolCallId="tc3", content="done"),
            result=result,
        ),
        succeed(*text("m9", "All done")),
        local_tools={"lookup": recorder(ran, "ok")},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert ran == []
    start(chat, driver, "Next", "u2")
    driver.run_until_idle()
    assert ran == [{"q": 1}]
    assert len(driver.requests) == 3
    assert driver.requests[2].resume is None
    assert_idle_ok(chat)
    results = [(m.tool_call_id, m.content) for m in chat.messages if isinstance(m, ToolMessage)]
    assert results == [("tc3", "done"), ("tc1", "ok")]
    assert chat.messages[-1] == AssistantMessage(id="m9", content="All done")


def test_R_J2_metadata_of_args_for_the_one_open_call_is_kept() -> None:
    """AG-UI 1.0 (Metadata): every event making up a tool call merges its metadata into
    the call, TOOL_CALL_ARGS included when it is the only call open (the common case,
    which takes a shortcut past the merge when an event carries none)."""
    (holder,) = streamed(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", metadata={"chunk": 1}),
        ev("TOOL_CALL_END", toolCallId="c1"),
    )
    assert isinstance(holder, AssistantMessage) and holder.tool_calls is not None
    (c1,) = holder.tool_calls
    assert (c1.function.arguments, thaw(c1.metadata)) == ("{}", {"chunk": 1})


def test_R_J2_a_tool_call_streaming_through_a_messages_snapshot_goes_on() -> None:
    """AG-UI 1.0: a MESSAGES_SNAPSHOT opens and closes nothing. A tool call still open
    when it arrives takes further arguments, appended to the snapshot's, and its
    TOOL_CALL_END is accepted (it failed as 'not open')."""
    snapshot = [
        {"id": "u1", "role": "user", "content": "Go"},
        {
            "id": "m1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "remote", "arguments": '{"q":'},
                }
            ],
        },
    ]
    driver, chat = chat_with(
        succeed(
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote", parentMessageId="m1"),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta='{"q": "ha'),
            ev("MESSAGES_SNAPSHOT", messages=snapshot),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta=" 1}"),
            ev("TOOL_CALL_END", toolCallId="c1"),
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [
        user(),
        AssistantMessage(id="m1", tool_calls=(call("c1", "remote", '{"q": 1}'),)),
    ]


def test_R_J2_a_lookup_by_id_is_the_same_whatever_a_sibling_version_did() -> None:
    """The core is pure: same state, same input, same output. A history holding an
    activity 'x' then an assistant message 'x' (histories may repeat an id) skips an
    ACTIVITY_DELTA 'x' (the newest 'x' is no activity), however a sibling version
    stepped from the same state used the IdHints they share: one once left them at the
    older 'x', and the delta patched the activity instead. (The stream itself no longer
    makes two messages of one id: a call's own message is 'x#2' when 'x' is taken.)"""
    history = (
        *HISTORY,
        ActivityMessage(id="x", activity_type="t", content=FrozenDict({"n": 0})),
        AssistantMessage(id="x", content="the newest 'x'"),
    )
    sibling = [
        ev("ACTIVITY_SNAPSHOT", messageId="y", activityType="t", content={"n": 0}),
        ev("TOOL_CALL_START", toolCallId="x", toolCallName="t"),  # held by 'x#2'
        ev("TEXT_MESSAGE_START", messageId="x", role="assistant"),  # reopens 'x'
    ]
    delta = ev(
        "ACTIVITY_DELTA",
        messageId="x",
        activityType="t",
        patch=[{"op": "replace", "path": "/n", "value": 1}],
    )

    def acked() -> State:
        driver, chat = chat_with(succeed_held(ev("CUSTOM", name="x", value=1)), messages=history)
        start(chat, driver)
        feed(driver)  # RUN_STARTED: the draft exists
        return chat.core_state

    def go(s: State, *events: dict[str, Any]) -> State:
        assert s.run is not None and s.run.attempt is not None
        for e in events:
            s = step(s, FrameReceived(s.run.attempt.id, json.dumps(e)), 0.0).state
        return s

    alone = go(acked(), delta)
    parent = acked()
    go(parent, *sibling)  # a sibling: notes ids in the hints this state shares
    after_sibling = go(parent, delta)
    assert after_sibling.draft is not None and alone.draft is not None
    assert list(after_sibling.draft.messages) == list(alone.draft.messages)
    assert after_sibling.draft.messages[len(HISTORY)].content == {"n": 0}  # not patched
    assert (
        after_sibling.warnings
        == alone.warnings
        == (
            "ACTIVITY_DELTA for 'x', which names an assistant message, not an activity; "
            "the delta was skipped",
        )
    )


def test_R_J2_a_continuation_tagged_for_another_owner_fails_the_run() -> None:
    """AG-UI 1.0 (Subagents, Ownership): a consumer MUST reject a CONTENT, END or ARGS
    whose subagentRunId disagrees with the START that opened its item (it was appended
    to the other producer's message). Absent means the parent agent."""
    s1 = {"subagentRunId": "s1"}
    s2 = {"subagentRunId": "s2"}
    cases = [
        (
            [ev("TEXT_MESSAGE_START", messageId="m1", **s1)],
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x", **s2),
            "a TEXT_MESSAGE_CONTENT of subagent 's2' continuing message 'm1', which "
            "subagent 's1' opened",
        ),
        (
            [ev("TEXT_MESSAGE_START", messageId="m1")],
            ev("TEXT_MESSAGE_END", messageId="m1", **s2),
            "a TEXT_MESSAGE_END of subagent 's2' continuing message 'm1', which the "
            "parent agent opened",
        ),
        (
            [
                ev("TEXT_MESSAGE_START", messageId="m0", **s1),
                ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning", **s1),
            ],
            ev("REASONING_MESSAGE_CONTENT", messageId="r1", delta="x", **s2),
            "a REASONING_MESSAGE_CONTENT of subagent 's2' continuing message 'r1', which "
            "subagent 's1' opened",
        ),
        (
            [ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup", **s1)],
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", **s2),
            "a TOOL_CALL_ARGS of subagent 's2' continuing tool call 'c1', which subagent "
            "'s1' opened",
        ),
        (
            [ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup", **s1)],
            ev("TOOL_CALL_END", toolCallId="c1"),  # untagged: accepted...
            None,
        ),
        (
            [ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup")],
            ev("TOOL_CALL_END", toolCallId="c1", **s1),
            "a TOOL_CALL_END of subagent 's1' continuing tool call 'c1', which the "
            "parent agent opened",
        ),
        (
            [ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}, **s1)],
            ev("ACTIVITY_DELTA", messageId="a1", activityType="P", patch=[], **s2),
            "an ACTIVITY_DELTA of subagent 's2' continuing activity 'a1', which subagent "
            "'s1' opened",
        ),
    ]
    for opening, continuation, expected in cases:
        if expected is None:
            assert streamed(*opening, continuation)[-1].role == "assistant"
        else:
            assert refusal(*opening, continuation) == expected, continuation


def test_R_J2_untagged_and_agreeing_continuations_are_accepted() -> None:
    """A producer that tags only the opener is conformant: an untagged continuation
    continues whatever its opener owns. Two subagents may stream at once."""
    s1 = {"subagentRunId": "s1"}
    s2 = {"subagentRunId": "s2"}
    assert streamed(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="a", **s1),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="b"),
        ev("TEXT_MESSAGE_START", messageId="m2", **s2),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="c", **s1),
        ev("TEXT_MESSAGE_CONTENT", messageId="m2", delta="x", **s2),
        ev("TEXT_MESSAGE_END", messageId="m2", **s2),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup", **s1),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", **s1),
        ev("TOOL_CALL_END", toolCallId="c1", **s1),
    ) == [
        AssistantMessage(id="m1", content="abc", subagent_run_id="s1"),
        AssistantMessage(id="m2", content="x", subagent_run_id="s2"),
        AssistantMessage(id="c1", tool_calls=(call("c1", "lookup", "{}"),), subagent_run_id="s1"),
    ]


def test_R_J2_a_tool_call_belongs_to_the_owner_of_its_message() -> None:
    """AG-UI 1.0 (Subagents): a tool call inherits the attribution of the message that
    holds it. An untagged start inherits the owner (its tagged ARGS are accepted); a
    holder made for a tagged call without a parent is attributed to that owner (it
    was attributed to the parent agent); a start tagged for another owner than its
    parent message's is refused."""
    s1 = {"subagentRunId": "s1"}
    assert streamed(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Looking"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup", parentMessageId="m1"),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", **s1),
        ev("TOOL_CALL_END", toolCallId="c1", **s1),
        ev("TOOL_CALL_START", toolCallId="c2", toolCallName="lookup", **s1),
        ev("TOOL_CALL_END", toolCallId="c2"),
    ) == [
        AssistantMessage(
            id="m1",
            content="Looking",
            tool_calls=(call("c1", "lookup", "{}"),),
            subagent_run_id="s1",
        ),
        AssistantMessage(id="c2", tool_calls=(call("c2", "lookup", ""),), subagent_run_id="s1"),
    ]
    assert refusal(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Looking"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev(
            "TOOL_CALL_START",
            toolCallId="c1",
            toolCallName="lookup",
            parentMessageId="m1",
            subagentRunId="s2",
        ),
    ) == (
        "tool call 'c1' of subagent 's2' in message 'm1', which subagent 's1' streamed: "
        "a call belongs to its message's owner"
    )


def test_R_J2_ownership_is_tracked_for_what_this_run_opened_not_what_a_snapshot_restates() -> None:
    """AG-UI 1.0 (Subagents): ownership is tracked within a run, for the items a START
    or an ACTIVITY_SNAPSHOT opened. A MESSAGES_SNAPSHOT opens nothing: an earlier run's
    activity or message it keeps or restates stays free for another owner this run (a
    snapshot made all of them count as this run's). A second reopening of an earlier
    run's message by another owner in the same run is refused (it was not seen)."""
    activity = ActivityMessage(
        id="a0", activity_type="P", content=obj({"n": 0}), subagent_run_id="s1"
    )
    earlier = AssistantMessage(id="m0", content="a", subagent_run_id="s1")
    keep = [encode_message(user()), {"id": "m0", "role": "assistant", "content": "a"}]
    s2 = {"subagentRunId": "s2"}
    chat = settled(
        ev("MESSAGES_SNAPSHOT", messages=keep),
        ev("ACTIVITY_DELTA", messageId="a0", activityType="P", patch=[], **s2),
        ev("TEXT_MESSAGE_START", messageId="m0", **s2),
        ev("TEXT_MESSAGE_CONTENT", messageId="m0", delta="b", **s2),
        ev("TEXT_MESSAGE_END", messageId="m0"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", parentMessageId="m0", **s2),
        ev("TOOL_CALL_END", toolCallId="c1", **s2),
        messages=[activity, earlier],
    )
    assert [m.id for m in chat.messages] == ["a0", "m0", "u1"]
    m0 = chat.messages[1]
    assert isinstance(m0, AssistantMessage) and m0.content == "ab"
    assert m0.tool_calls == (call("c1", "t", ""),)
    error = refusal(
        ev("TEXT_MESSAGE_START", messageId="old-a", subagentRunId="s2"),
        ev("TEXT_MESSAGE_END", messageId="old-a"),
        ev("TEXT_MESSAGE_START", messageId="old-a", subagentRunId="s3"),
    )
    assert error == (
        "message 'old-a' was started again by subagent 's3', but subagent 's2' streamed it "
        "in this run"
    )


def test_R_J2_what_this_run_opened_keeps_its_owner_through_a_snapshot() -> None:
    """A MESSAGES_SNAPSHOT opens nothing: a message this run's START opened keeps that
    opener when the snapshot restates it under another attribution; one the snapshot
    drops is gone, and a START of its id makes a new message for any owner."""
    s1, s2 = {"subagentRunId": "s1"}, {"subagentRunId": "s2"}
    restated = [encode_message(user()), {"id": "m1", "role": "assistant", "content": "A", **s2}]
    assert refusal(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("MESSAGES_SNAPSHOT", messages=restated),
        ev("TEXT_MESSAGE_START", messageId="m1", **s2),
    ) == (
        "message 'm1' was started again by subagent 's2', but subagent 's1' streamed it in this run"
    )
    chat = settled(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("MESSAGES_SNAPSHOT", messages=[encode_message(user())]),
        ev("TEXT_MESSAGE_START", messageId="m1", **s2),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="new", **s2),
        ev("TEXT_MESSAGE_END", messageId="m1"),
    )
    assert list(chat.messages) == [
        user(),
        AssistantMessage(id="m1", content="new", subagent_run_id="s2"),
    ]


def test_R_J2_items_adrift_count_against_the_open_limit_of_their_own_kind() -> None:
    """MAX_OPEN bounds messages and calls open at once, adrift ones included, each kind
    on its own (adrift messages made a tool call 'more than 256 tool calls open')."""
    starts = [ev("TEXT_MESSAGE_START", messageId=f"open-{n}") for n in range(MAX_OPEN)]
    ends = [ev("TEXT_MESSAGE_END", messageId=f"open-{n}") for n in range(MAX_OPEN)]
    chat = settled(
        *starts,
        ev("MESSAGES_SNAPSHOT", messages=[encode_message(user())]),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
        ev("TOOL_CALL_END", toolCallId="c1"),
        *ends,
    )
    assert [m.id for m in chat.messages] == ["u1", "c1"]
    error = refusal(
        *starts,
        ev("MESSAGES_SNAPSHOT", messages=[encode_message(user())]),
        ev("TEXT_MESSAGE_START", messageId="one-more"),
    )
    assert error == f"more than {MAX_OPEN} messages open at once"


def test_R_J2_the_owner_of_a_reopened_or_restated_stream_is_its_opener() -> None:
    """Ownership tracking resets across runs: a START reopening an earlier run's
    message of subagent 's1' under 's2' makes 's2' its owner for this run. A snapshot
    restating a streaming message does not change who opened the stream; nor does a
    snapshot setting it adrift."""
    earlier = AssistantMessage(id="m0", content="old ", subagent_run_id="s1")
    chat = settled(
        ev("TEXT_MESSAGE_START", messageId="m0", subagentRunId="s2"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m0", delta="new", subagentRunId="s2"),
        ev("TEXT_MESSAGE_END", messageId="m0", subagentRunId="s2"),
        messages=[earlier],
    )
    assert chat.messages[0] == AssistantMessage(id="m0", content="old new", subagent_run_id="s1")

    restated = [{"id": "m1", "role": "assistant", "content": "A", "subagentRunId": "s2"}]
    assert refusal(
        ev("TEXT_MESSAGE_START", messageId="m1", subagentRunId="s1"),
        ev("MESSAGES_SNAPSHOT", messages=restated),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x", subagentRunId="s2"),
    ) == (
        "a TEXT_MESSAGE_CONTENT of subagent 's2' continuing message 'm1', which "
        "subagent 's1' opened"
    )
    assert refusal(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup", subagentRunId="s1"),
        ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", subagentRunId="s2"),
    ) == ("a TOOL_CALL_ARGS of subagent 's2' continuing tool call 'c1', which subagent 's1' opened")


def test_R_J2_a_message_reopened_in_its_run_by_another_owner_fails_the_run() -> None:
    """AG-UI 1.0 (Text Messages): within a run, a reopening under a different owner is
    the attribution mismatch the subagent rules reject; across runs it is not checked."""
    assert refusal(
        *text("m1", "a"),
        ev("TEXT_MESSAGE_START", messageId="m1", subagentRunId="s9"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
    ) == (
        "message 'm1' was started again by subagent 's9', but the parent agent streamed "
        "it in this run"
    )


ADRIFT_NOTE = (
    "MESSAGES_SNAPSHOT left no place for {} while streaming (dropped, or restated as a "
    "message it cannot continue): open until ended, its content dropped"
)
"""The warning of a snapshot that sets a streaming item adrift."""


def test_R_J2_a_message_a_snapshot_drops_while_it_streams_stays_open_without_a_place() -> None:
    """AG-UI 1.0: a MESSAGES_SNAPSHOT replaces the history and opens and closes nothing.
    A message it drops mid-stream is still the producer's to end: its further content
    (and metadata) has nowhere to go and is dropped, its END is accepted, and the run
    commits the snapshot's history. (The END failed the run as 'not open'.)"""
    snapshot = [{"id": "u1", "role": "user", "content": "Go"}]
    driver, chat = chat_with(
        succeed_held(
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="Half"),
            ev("MESSAGES_SNAPSHOT", messages=snapshot),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta=" more", metadata={"k": 1}),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
    )
    start(chat, driver)
    feed(driver, 4)  # RUN_STARTED to the snapshot
    assert list(chat.messages) == [user()]
    assert chat.warnings == (ADRIFT_NOTE.format("message 'm1'"),)
    driver.release(100)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.core_state.checkpoint.messages) == [user()]
    assert len(chat.warnings) == 1  # the content after it is dropped quietly


def test_R_J2_a_message_a_snapshot_dropped_must_still_end_before_the_finish() -> None:
    """AG-UI 1.0 (Runs): what a START opened must end before RUN_FINISHED, whether or not
    a snapshot took its place (it escaped the finish check)."""
    assert (
        refusal(
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="lost"),
        )
        == "RUN_FINISHED with message 'm1' still open: a run must end what it starts"
    )


def test_R_J2_a_message_dropped_by_a_snapshot_cannot_be_started_again_while_open() -> None:
    assert (
        refusal(
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
            ev("TEXT_MESSAGE_START", messageId="m1"),
        )
        == "message 'm1' was started twice"
    )
    assert refusal(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
        ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
        ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="remote", delta="{}"),
    ) == (
        "a TOOL_CALL_CHUNK for 'c1', which a START opened and has not ended: a chunk does "
        "not continue an item of the start, content and end form"
    )


def test_R_J2_a_tool_call_a_snapshot_drops_while_it_streams_is_not_run() -> None:
    """A call the snapshot dropped mid-stream takes its further arguments nowhere, ends
    quietly, and is not in the history, so no local tool runs for it (R-D5)."""
    calls: list[Any] = []
    driver, chat = chat_with(
        succeed(
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="lookup"),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta='{"q":'),
            ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta=" 1}", metadata={"k": 1}),
            ev("TOOL_CALL_END", toolCallId="c1", metadata={"k": 2}),
        ),
        local_tools={"lookup": recorder(calls, "found")},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == [user()]
    assert calls == [] and len(driver.requests) == 1
    assert chat.warnings == (ADRIFT_NOTE.format("tool call 'c1'"),)


def test_R_J2_a_snapshot_that_empties_the_history_drops_the_calls_the_run_made() -> None:
    """MESSAGES_SNAPSHOT with no messages: the call the run made and closed is gone with
    the rest, so the run settles with an empty history and no local tool runs (R-D5).
    Looking for the call in an empty history must find nothing, not fail the step."""
    calls: list[Any] = []
    driver, chat = chat_with(
        succeed(*tool_call("c1", "lookup", {"q": 1}), ev("MESSAGES_SNAPSHOT", messages=[])),
        local_tools={"lookup": recorder(calls, "found")},
    )
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert list(chat.messages) == []
    assert calls == [] and len(driver.requests) == 1


def test_R_J2_R_D5_a_call_a_snapshot_holds_twice_runs_as_its_last_statement_says() -> None:
    """A MESSAGES_SNAPSHOT may hold one call id twice (in two assistant messages, or in
    one); the call this run made runs once, as the last of them states it, wherever the
    run's other calls sit. (The older statement won whenever the search for another call
    of the run, one older than both or one the snapshot dropped, went on past it.)"""

    def holder(mid: str, cid: str, name: str, args: str) -> dict[str, Any]:
        function = {"name": name, "arguments": args}
        call = {"id": cid, "type": "function", "function": function}
        return {"id": mid, "role": "assistant", "toolCalls": [call]}

    older = holder("a1", "c1", "other", '{"v": "old"}')
    newer = holder("a2", "c1", "lookup", '{"v": "new"}')
    second = holder("a0", "c2", "lookup", '{"v": "c2"}')
    for snapshot, expected in (
        ([older, newer], [{"v": "new"}]),
        ([second, older, newer], [{"v": "new"}, {"v": "c2"}]),
        ([{**older, "toolCalls": older["toolCalls"] + newer["toolCalls"]}], [{"v": "new"}]),
    ):
        lookups: list[Any] = []
        others: list[Any] = []
        driver, chat = chat_with(
            succeed(
                *tool_call("c1", "lookup", {}),
                *tool_call("c2", "lookup", {}),
                ev("MESSAGES_SNAPSHOT", messages=snapshot),
            ),
            succeed(),
            local_tools={"lookup": recorder(lookups, "found"), "other": recorder(others, "x")},
        )
        start(chat, driver)
        driver.run_until_idle()
        assert_idle_ok(chat)
        assert [thaw(a) for a in lookups] == expected and others == []


def test_R_J2_a_snapshot_restating_a_streaming_message_as_one_it_cannot_continue() -> None:
    """A restatement the stream cannot go on in sets it adrift too: a user message with
    content parts (text appended would replace them), or a message of the other lane (a
    reasoning message for a text stream). The snapshot's message stands untouched."""
    parts = [{"type": "text", "text": "hi"}]
    restated = [
        [{"id": "m1", "role": "user", "content": parts}],
        [{"id": "m1", "role": "reasoning", "content": "think"}],
        [{"id": "m1", "role": "tool", "content": "42", "toolCallId": "c0"}],
    ]
    for messages in restated:
        chat = settled(
            ev("TEXT_MESSAGE_START", messageId="m1"),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x"),
            ev("MESSAGES_SNAPSHOT", messages=messages),
            ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="y"),
            ev("TEXT_MESSAGE_END", messageId="m1"),
        )
        assert list(chat.messages) == [decode_message(messages[0])]
        assert chat.warnings == (ADRIFT_NOTE.format("message 'm1'"),)


def test_R_J2_an_adrift_message_keeps_its_lane() -> None:
    """(The snapshot carries the reasoning role, so it drops the reasoning 'r1'.)"""
    snapshot = [
        {"id": "u1", "role": "user", "content": "Go"},
        {"id": "r0", "role": "reasoning", "content": "warm up"},
    ]
    error = refusal(
        *reasoning("r0", "warm up"),
        ev("REASONING_MESSAGE_START", messageId="r1", role="reasoning"),
        ev("MESSAGES_SNAPSHOT", messages=snapshot),
        ev("TEXT_MESSAGE_CONTENT", messageId="r1", delta="x"),
    )
    assert error == "a text event for message 'r1', a reasoning message"


def test_R_J2_a_later_snapshot_restating_an_adrift_message_gives_it_back_its_place() -> None:
    """What streams while it is adrift is lost; after a snapshot restates it, deltas
    append to the snapshot's text again."""
    only_user = [{"id": "u1", "role": "user", "content": "Go"}]
    both = [*only_user, {"id": "m1", "role": "assistant", "content": "A"}]
    chat = settled(
        ev("TEXT_MESSAGE_START", messageId="m1"),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="a"),
        ev("MESSAGES_SNAPSHOT", messages=only_user),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="lost"),
        ev("MESSAGES_SNAPSHOT", messages=both),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="b"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
    )
    assert list(chat.messages) == [user(), AssistantMessage(id="m1", content="Ab")]
    assert chat.warnings == (ADRIFT_NOTE.format("message 'm1'"),)


def test_R_A1_an_interrupt_commits_the_snapshot_with_an_item_adrift() -> None:
    """An interrupted run commits as it stands (R-A1): an adrift item has nothing to
    commit and simply ends with the run."""
    driver, chat = chat_with(
        pause(
            {"id": "approve", "reason": "input_required"},
            events=[
                ev("TEXT_MESSAGE_START", messageId="m1"),
                ev("MESSAGES_SNAPSHOT", messages=[{"id": "u1", "role": "user", "content": "Go"}]),
                ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="lost"),
            ],
        )
    )
    start(chat, driver)
    driver.run_until_idle()
    assert chat.error is None and chat.pending_interrupts is not None
    assert list(chat.core_state.checkpoint.messages) == [user()]


ONLY_USER = [{"id": "u1", "role": "user", "content": "Go"}]
"""A MESSAGES_SNAPSHOT's messages that leave no place for anything streaming."""


def test_R_J2_an_adrift_message_keeps_the_owner_its_start_gave_it() -> None:
    """AG-UI 1.0 (Subagents, Ownership): a message set adrift is still its opener's.
    Its continuations tagged for that owner are accepted (their content dropped); one
    tagged for another owner is refused, naming the opener (not the parent agent)."""
    s1 = {"subagentRunId": "s1"}
    chat = settled(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="lost", **s1),
        ev("TEXT_MESSAGE_END", messageId="m1", **s1),
    )
    assert list(chat.messages) == [user()]
    assert refusal(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TEXT_MESSAGE_END", messageId="m1", subagentRunId="s2"),
    ) == ("a TEXT_MESSAGE_END of subagent 's2' continuing message 'm1', which subagent 's1' opened")


def test_R_J2_an_adrift_item_is_not_continued_or_restarted_in_another_form() -> None:
    """An adrift item is still open: a chunk naming an adrift message is the mixed-form
    error, as for a message in place, and a TOOL_CALL_START of an adrift call is a
    second start (it made a new call beside the one still open)."""
    assert refusal(
        ev("TEXT_MESSAGE_START", messageId="m1"),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TEXT_MESSAGE_CHUNK", messageId="m1", delta="x"),
    ) == (
        "a TEXT_MESSAGE_CHUNK for 'm1', which a START opened and has not ended: a chunk does "
        "not continue an item of the start, content and end form"
    )
    assert (
        refusal(
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
            ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
        )
        == "tool call 'c1' was started twice"
    )


def test_R_J2_an_adrift_call_does_not_hold_its_id_as_a_message_id() -> None:
    """Message ids and tool call ids are apart: a call 'c1' adrift (its holder, made
    with the id 'c1', dropped by the snapshot) does not stop a message 'c1' from
    starting, and the call's END still ends the call."""
    chat = settled(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="remote"),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TEXT_MESSAGE_START", messageId="c1"),
        ev("TEXT_MESSAGE_CONTENT", messageId="c1", delta="hi"),
        ev("TEXT_MESSAGE_END", messageId="c1"),
        ev("TOOL_CALL_END", toolCallId="c1"),
    )
    assert list(chat.messages) == [user(), AssistantMessage(id="c1", content="hi")]


def test_R_J2_adrift_tool_calls_count_against_the_tool_call_limit() -> None:
    """MAX_OPEN bounds tool calls open at once, adrift ones included (as for messages)."""
    starts = [ev("TOOL_CALL_START", toolCallId=f"c{n}", toolCallName="t") for n in range(MAX_OPEN)]
    error = refusal(
        *starts,
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TOOL_CALL_START", toolCallId="one-more", toolCallName="t"),
    )
    assert error == f"more than {MAX_OPEN} tool calls open at once"


def test_R_J2_a_later_snapshot_restating_an_adrift_call_gives_it_back_its_place() -> None:
    """As for a message: arguments streamed while the call is adrift are lost; once a
    snapshot restates its holder, further arguments append to the snapshot's."""
    restated = [
        *ONLY_USER,
        encode_message(AssistantMessage(id="a1", tool_calls=(call("c1", "t", '{"q"'),))),
    ]
    chat = settled(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="lost"),
        ev("MESSAGES_SNAPSHOT", messages=restated),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta=": 1}"),
        ev("TOOL_CALL_END", toolCallId="c1"),
    )
    assert list(chat.messages) == [
        user(),
        AssistantMessage(id="a1", tool_calls=(call("c1", "t", '{"q": 1}'),)),
    ]


def test_R_J2_a_call_restated_while_it_streams_keeps_its_opener() -> None:
    """A snapshot that restates a streaming call's holder opens nothing: the call is
    still its START's, so that owner's ARGS go on and another owner's are refused."""
    s1 = {"subagentRunId": "s1"}
    restated = [
        *ONLY_USER,
        encode_message(AssistantMessage(id="c1", tool_calls=(call("c1", "t", "{"),))),
    ]
    chat = settled(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", **s1),
        ev("MESSAGES_SNAPSHOT", messages=restated),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="}", **s1),
        ev("TOOL_CALL_END", toolCallId="c1", **s1),
    )
    assert list(chat.messages) == [
        user(),
        AssistantMessage(id="c1", tool_calls=(call("c1", "t", "{}"),)),  # as restated
    ]
    assert (
        refusal(
            ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", **s1),
            ev("MESSAGES_SNAPSHOT", messages=restated),
            ev("TOOL_CALL_ARGS", toolCallId="c1", delta="}", subagentRunId="s2"),
        )
        == "a TOOL_CALL_ARGS of subagent 's2' continuing tool call 'c1', which subagent 's1' opened"
    )


def test_R_J2_a_tool_call_reopened_in_its_run_keeps_its_messages_owner() -> None:
    """AG-UI 1.0 (Subagents): a call belongs to its message's owner, reopened or not. An
    untagged START reopening a call of subagent 's1' continues for 's1' (its tagged
    ARGS are accepted); a START tagged for another owner is refused."""
    s1 = {"subagentRunId": "s1"}
    assert streamed(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", **s1),
        ev("TOOL_CALL_END", toolCallId="c1"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t"),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", **s1),
        ev("TOOL_CALL_END", toolCallId="c1", **s1),
    ) == [AssistantMessage(id="c1", tool_calls=(call("c1", "t", "{}"),), subagent_run_id="s1")]
    assert refusal(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", **s1),
        ev("TOOL_CALL_END", toolCallId="c1"),
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", subagentRunId="s2"),
    ) == (
        "tool call 'c1' of subagent 's2' in message 'c1', which subagent 's1' streamed: "
        "a call belongs to its message's owner"
    )


def test_R_J2_an_untagged_call_in_an_earlier_runs_message_inherits_its_attribution() -> None:
    """No event of this run opened the earlier run's 'm0' (of subagent 's1'): an untagged
    call started in it takes the message's attribution, so ARGS tagged 's1' go on."""
    earlier = AssistantMessage(id="m0", content="a", subagent_run_id="s1")
    chat = settled(
        ev("TOOL_CALL_START", toolCallId="c1", toolCallName="t", parentMessageId="m0"),
        ev("TOOL_CALL_ARGS", toolCallId="c1", delta="{}", subagentRunId="s1"),
        ev("TOOL_CALL_END", toolCallId="c1"),
        messages=[earlier],
    )
    assert chat.messages[0] == AssistantMessage(
        id="m0", content="a", tool_calls=(call("c1", "t", "{}"),), subagent_run_id="s1"
    )


def test_R_J2_a_tool_call_chunk_of_a_subagent_is_that_subagents() -> None:
    """A TOOL_CALL_CHUNK tagged for 's1' opening a call without a parent makes its
    holder attributed to 's1' (as a tagged TOOL_CALL_START does), and the call is
    its: another subagent's call in that message is refused."""
    s1 = {"subagentRunId": "s1"}
    assert streamed(
        ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="t", delta="{}", **s1),
    ) == [AssistantMessage(id="c1", tool_calls=(call("c1", "t", "{}"),), subagent_run_id="s1")]
    assert (
        refusal(
            ev("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="t", delta="{}", **s1),
            ev("TOOL_CALL_START", toolCallId="c2", toolCallName="t", parentMessageId="c1"),
            ev("TOOL_CALL_END", toolCallId="c2", subagentRunId="s2"),
        )
        == "a TOOL_CALL_END of subagent 's2' continuing tool call 'c2', which subagent 's1' opened"
    )


def test_R_J2_a_message_a_snapshot_dropped_loses_its_owner_for_good() -> None:
    """What the snapshot dropped goes with its owner: a message 's1' opened and a
    snapshot dropped, started again by 's2', is 's2''s (it may reopen it)."""
    s1, s2 = {"subagentRunId": "s1"}, {"subagentRunId": "s2"}
    chat = settled(
        ev("TEXT_MESSAGE_START", messageId="m1", **s1),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("MESSAGES_SNAPSHOT", messages=ONLY_USER),
        ev("TEXT_MESSAGE_START", messageId="m1", **s2),
        ev("TEXT_MESSAGE_END", messageId="m1"),
        ev("TEXT_MESSAGE_START", messageId="m1", **s2),
        ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta="x"),
        ev("TEXT_MESSAGE_END", messageId="m1"),
    )
    assert list(chat.messages) == [
        user(),
        AssistantMessage(id="m1", content="x", subagent_run_id="s2"),
    ]


def test_R_J2_an_activity_the_parent_agent_opened_takes_no_subagents_delta() -> None:
    """AG-UI 1.0 (Subagents, Ownership): an ACTIVITY_DELTA tagged for a subagent must not
    continue an activity the parent agent's ACTIVITY_SNAPSHOT opened in this run."""
    assert refusal(
        ev("ACTIVITY_SNAPSHOT", messageId="a1", activityType="P", content={}),
        ev("ACTIVITY_DELTA", messageId="a1", activityType="P", patch=[], subagentRunId="s1"),
    ) == (
        "an ACTIVITY_DELTA of subagent 's1' continuing activity 'a1', which the parent agent opened"
    )


def test_R_J2_a_tool_result_reusing_a_message_id_fails_the_run_unless_it_repeats_one() -> None:
    """AG-UI 1.0 (Tool Calls): a TOOL_CALL_RESULT is a message with its own id. One naming
    an id the history holds made a second message with it; the same result sent again
    is dropped with a warning, another fails the run."""
    result = ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="tc1", content="done")
    driver, chat = chat_with(succeed(*tool_call("tc1", "remote", {}), result, result))
    start(chat, driver)
    driver.run_until_idle()
    assert_idle_ok(chat)
    assert [m.id for m in chat.messages].count("r1") == 1
    assert chat.warnings == (
        "TOOL_CALL_RESULT 'r1' repeats a result the history holds; it was dropped",
    )

    clash = ev("TOOL_CALL_RESULT", messageId="u1", toolCallId="tc1", content="done")
    driver, chat = chat_with(succeed(*tool_call("tc1", "remote", {}), clash))
    error = assert_rolled_back(driver, chat, start(chat, driver))
    assert str(error) == (
        "TOOL_CALL_RESULT 'u1' names a message id the history already holds (a user "
        "message): a result needs an id of its own"
    )


def test_R_J2_an_echo_of_a_failed_local_tools_result_is_a_repeat_as_a_successful_ones_is() -> None:
    """R-D5, R-J2: an endpoint that streams back the client's own tool message as a
    TOOL_CALL_RESULT repeats a result the history holds: dropped with a warning. The
    event cannot carry the ``error`` a failed local tool's message holds, so that field
    is no difference; the echo of a failed tool must not fail the run when the echo of
    a successful one does not."""

    def boom(arguments: Any) -> Any:
        raise RuntimeError("no clock here")

    def echo(req: Any) -> Any:
        (result,) = [m for m in req.json["messages"] if m["role"] == "tool"]
        again = ev(
            "TOOL_CALL_RESULT",
            messageId=result["id"],
            toolCallId=result["toolCallId"],
            content=result["content"],
        )
        return reply(started(req), again, finished(req))

    for tool in (lambda arguments: "fine", boom):
        first = succeed(*tool_call("tc1", "local", {}))
        driver = FakeDriver(ScriptedAgent().then(first, echo))
        chat = driver.chat(local_tools={"local": tool})
        chat.send("go")
        driver.run_until_idle()
        assert chat.error is None, chat.error
        assert len(driver.requests) == 2
        (held,) = [m for m in chat.messages if m.role == "tool"]
        assert chat.warnings == (
            f"TOOL_CALL_RESULT {held.id!r} repeats a result the history holds; it was dropped",
        )


def test_R_J2_a_tool_result_repeated_after_an_encrypted_value_is_still_a_repeat() -> None:
    """R-J1, R-J2: the encrypted value stored since with a result is what the
    TOOL_CALL_RESULT event cannot carry, so it is no difference: the same result sent
    again is dropped with a warning, and the stored value stays."""
    result = ev("TOOL_CALL_RESULT", messageId="r1", toolCallId="tc1", content="done")
    chat = settled(
        *tool_call("tc1", "remote", {}), result, encrypted("message", "r1", "E1"), result
    )
    assert chat.warnings == (
        "TOOL_CALL_RESULT 'r1' repeats a result the history holds; it was dropped",
    )
    (held,) = [m for m in chat.messages if m.id == "r1"]
    assert isinstance(held, ToolMessage) and held.encrypted_value == "E1"


def test_R_J2_a_tool_result_differing_only_as_true_from_1_is_not_a_repeat() -> None:
    """A repeat is the same JSON: a result whose metadata says ``true`` where the held
    one says ``1`` is another result, and fails the run as any id clash does. Python's
    ``==`` took it for a repeat and dropped it with a warning."""
    first = ev(
        "TOOL_CALL_RESULT", messageId="r1", toolCallId="tc1", content="ok", metadata={"n": 1}
    )
    again = {**first, "metadata": {"n": True}}
    driver, chat = chat_with(succeed(*tool_call("tc1", "remote", {}), first, again))
    error = assert_rolled_back(driver, chat, start(chat, driver))
    assert "TOOL_CALL_RESULT 'r1' names a message id the history already holds" in str(error)
