"""Arguments of the wrong kind: every intent refuses them with a UsageError that says
what it takes, and changes nothing (the errors table of SPEC.md; R-B2 for resume).

``property_tests/test_intent_fuzz.py`` draws such arguments at random; these are
the cases it found raising Python's own errors, and their neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rule_support import ask, paused_chat

from interlude.adapters.fake import (
    FakeDriver,
    ScriptedAgent,
    finished,
    reply,
    started,
)
from interlude.adapters.resource import Resource
from interlude.core import Options
from interlude.core.errors import InvalidResumeError, ResumeProblem, StaleBatchError, UsageError
from interlude.core.wire.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage

CASES: dict[str, tuple[Callable[[Resource], Any], str]] = {
    "configure(None)": (lambda r: r.configure(None), "takes an Options"),
    "configure(dict)": (lambda r: r.configure({"kind": "chat"}), "takes an Options"),
    "set_messages(None)": (lambda r: r.set_messages(None), "takes a list of messages"),
    "set_messages(a message)": (
        lambda r: r.set_messages(UserMessage(id="u", content="hi")),
        "takes a list of messages",
    ),
    "set_messages([a dict])": (
        lambda r: r.set_messages([{"id": "u", "role": "user"}]),
        "build messages with interlude.core.wire",
    ),
    "set_messages(an iterator of non-messages)": (
        lambda r: r.set_messages(iter([1])),
        r"item 0 is not a message \(int\)",
    ),
    "set_messages(a str)": (lambda r: r.set_messages("hi"), "takes a list of messages"),
    "set_messages([a message holding a set])": (
        lambda r: r.set_messages([UserMessage(id="u", content=({"type": "x", "v": {1}},))]),
        r"item 0 \(user message 'u'\) cannot be sent",
    ),
    "send(a dict)": (
        lambda r: r.send({"role": "user", "content": "hi"}),  # type: ignore[arg-type]
        "takes text, a UserMessage or a list of content parts, not the dict",
    ),
    "send(bytes)": (lambda r: r.send(b"hi"), "not the bytes"),  # type: ignore[arg-type]
    "send([numbers])": (lambda r: r.send([1, 2]), "content part 0 must be an object"),
    "send([a part without a type])": (
        lambda r: r.send([{"text": "hi"}]),
        "content part 0 must be an object with a string 'type'",
    ),
    "send([a part holding NaN])": (
        lambda r: r.send([{"type": "x", "v": float("nan")}]),
        "not a JSON value at /0/v",
    ),
    "send(message_id='')": (lambda r: r.send("hi", message_id=""), "non-empty string"),
    "send(message_id=3)": (lambda r: r.send("hi", message_id=3), "non-empty string"),  # type: ignore[arg-type]
    "send(UserMessage, another message_id)": (
        lambda r: r.send(UserMessage(id="u1", content="hi"), message_id="u2"),  # type: ignore[arg-type]
        "give the id once",
    ),
    "subscribe(None)": (lambda r: r.subscribe(None), "takes a callable"),  # type: ignore[arg-type]
    "send(UserMessage with an empty id)": (
        lambda r: r.send(UserMessage(id="", content="hi")),
        r"send\(\) \(user message\): its id must be a non-empty string",
    ),
    "set_messages([a message with an empty id])": (
        lambda r: r.set_messages([UserMessage(id="", content="hi")]),
        "item 0 \\(user message\\): its id must be a non-empty string",
    ),
    "set_messages([a message holding NaN])": (
        lambda r: r.set_messages(
            [UserMessage(id="u", content=({"type": "x", "v": float("nan")},))]
        ),
        "not a JSON value at /content/0/v: nan has no JSON form",
    ),
    "set_messages([an assistant message whose calls are not ToolCalls])": (
        lambda r: r.set_messages([AssistantMessage(id="a", tool_calls=("c1",))]),  # type: ignore[arg-type]
        r"item 0 \(assistant message 'a'\) cannot be sent: a member of it is not of the "
        r"interlude.core.wire class its field takes",
    ),
    "set_messages([a ToolCall without a FunctionCall])": (
        lambda r: r.set_messages(
            [AssistantMessage(id="a", tool_calls=(ToolCall(id="c1", function=None),))]  # type: ignore[arg-type]
        ),
        r"item 0 \(assistant message 'a'\) cannot be sent: a member of it is not of",
    ),
    "resume(an object)": (
        lambda r: r.resume(object(), []),  # type: ignore[arg-type]
        r"resume\(\) takes the pending batch's id \(pending_interrupts.id, a string\)",
    ),
    "resume(5)": (lambda r: r.resume(5, []), "a string\\), not 5"),  # type: ignore[arg-type]
}


FACTORY_CASES: dict[str, tuple[Callable[[FakeDriver], Any], str]] = {
    "chat(messages=[a dict])": (
        lambda d: d.chat(messages=[{"role": "user", "content": "hi"}]),  # type: ignore[list-item]
        r"messages= item 0 is not a message \(dict\)",
    ),
    "chat(messages=a message)": (
        lambda d: d.chat(messages=UserMessage(id="u", content="hi")),  # type: ignore[arg-type]
        "messages= takes a list of messages",
    ),
    "chat(messages=[calls given as dicts])": (
        lambda d: d.chat(
            messages=[
                AssistantMessage(
                    id="a",
                    tool_calls=({"id": "c1", "function": {"name": "f", "arguments": "{}"}},),  # type: ignore[arg-type]
                )
            ]
        ),
        r"messages= item 0 \(assistant message 'a'\) cannot be sent: a member of it is not",
    ),
    "chat(thread_id=5)": (lambda d: d.chat(thread_id=5), "thread_id= takes a non-empty string"),  # type: ignore[arg-type]
    "chat(thread_id='')": (lambda d: d.chat(thread_id=""), "thread_id= takes a non-empty string"),
    "chat(state=NaN)": (lambda d: d.chat(state=float("nan")), "state= takes a JSON value"),
    "completion(state={set})": (lambda d: d.completion(state={"s": {1}}), "state= takes a JSON"),
    "chat(options=dict)": (lambda d: d.chat({"kind": "chat"}), "takes an Options"),  # type: ignore[arg-type]
    "chat(messages=[an empty id])": (
        lambda d: d.chat(messages=[UserMessage(id="", content="hi")]),
        "its id must be a non-empty string",
    ),
    "chat(local_tools=[names])": (
        lambda d: d.chat(local_tools=["a"]),  # type: ignore[arg-type]
        r"chat\(\): local_tools maps tool names to callables.*not a list",
    ),
    "completion(local_tools=5)": (
        lambda d: d.completion(local_tools=5),  # type: ignore[arg-type]
        "local_tools maps tool names to callables",
    ),
    "chat(local_tools={1: f})": (
        lambda d: d.chat(local_tools={1: print}),  # type: ignore[dict-item]
        "a local tool's name is a non-empty string, not 1",
    ),
    "chat(local_tools={'': f})": (
        lambda d: d.chat(local_tools={"": print}),
        "a local tool's name is a non-empty string, not ''",
    ),
    "chat(local_tools={'a': 3})": (
        lambda d: d.chat(local_tools={"a": 3}),  # type: ignore[dict-item]
        "local tool 'a' must be a function .* not an int",
    ),
}


@pytest.mark.parametrize("call", FACTORY_CASES)
def test_a_resource_built_from_arguments_of_the_wrong_kind_is_refused_at_once(call: str) -> None:
    """Not later, from deep inside a run: the factory raises a UsageError that says why."""
    make, says = FACTORY_CASES[call]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    with pytest.raises(UsageError, match=says):
        make(driver)


@pytest.mark.parametrize(
    ("part", "says"),
    [
        (
            {"type": "binary", "mimeType": "image/png", "url": "u"},
            "content part 1 at type: AG-UI 1.0 defines no content part of type 'binary' "
            "('text', 'image', 'audio', 'video', 'document')",
        ),
        ({"type": "text", "text": 5}, "content part 1 at text: expected a string, got the number"),
        (
            {"type": "text", "text": "x", "mime": "a"},
            "content part 1 at mime: AG-UI 1.0 defines no such member of a text content part",
        ),
        ({"type": "image"}, "content part 1: an image content part needs 'source'"),
        (
            {"type": "image", "source": {"type": "url"}},
            "content part 1 at source: a url source needs 'value'",
        ),
        (
            {"type": "audio", "source": {"type": "s3", "value": "x"}},
            "content part 1 at source.type: AG-UI 1.0 defines no source of type 's3' "
            "('data', 'url', 'file')",
        ),
        (
            {"type": "document", "source": {"type": "data", "value": "aGk="}},
            "content part 1 at source: a data source needs 'mimeType'",
        ),
    ],
)
def test_content_parts_are_held_to_ag_ui_1_0(part: dict[str, Any], says: str) -> None:
    """AG-UI 1.0 (Schema: ContentPart) closes each part and source: an application's
    own parts are refused at the call for what a request could not carry (a pre-1.0
    'binary' part went out as given)."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    before = chat.core_state
    with pytest.raises(UsageError) as caught:
        chat.send([{"type": "text", "text": "look"}, part])
    assert str(caught.value).startswith(f"send(): {says}")
    assert chat.core_state is before


def test_parts_in_your_own_messages_are_held_to_ag_ui_1_0_too() -> None:
    """A UserMessage given to send(), or a history given to set_messages(), had parts
    AG-UI 1.0 does not define left out without a word (a stored pre-1.0 history lost
    its images silently): they are refused, as send() refuses a list of parts."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    binary = {"type": "binary", "mimeType": "image/png", "url": "u"}
    with pytest.raises(UsageError) as sent:
        chat.send(UserMessage(id="u1", content=({"type": "text", "text": "a"}, binary)))  # type: ignore[arg-type]
    assert str(sent.value) == (
        "send() (user message 'u1'): content part 1 at type: AG-UI 1.0 defines no content "
        "part of type 'binary' ('text', 'image', 'audio', 'video', 'document')"
    )
    source = {"type": "s3", "value": "k"}
    result = ToolMessage(id="t1", tool_call_id="c1", content=({"type": "image", "source": source},))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as restored:
        chat.set_messages([result])
    assert str(restored.value) == (
        "set_messages() item 0 (tool message 't1'): content part 0 at source.type: AG-UI 1.0 "
        "defines no source of type 's3' ('data', 'url', 'file')"
    )
    assert list(chat.messages) == [] and driver.requests == []
    with_null = {"type": "text", "text": "a", "id": None}  # null stands for absent
    chat.set_messages([UserMessage(id="u2", content=(with_null,))])  # type: ignore[arg-type]
    assert chat.messages[0].content == ({"type": "text", "text": "a"},)


def test_parts_given_as_a_list_in_your_own_messages_are_held_to_ag_ui_1_0_too() -> None:
    """A message built with its parts in a list (not a tuple) is taken as well, and sent:
    a part AG-UI 1.0 does not define is refused there as in a tuple, not left out
    without a word (only a tuple's parts were compared with what the codec kept)."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    binary = {"type": "binary", "mimeType": "image/png", "url": "u"}
    parts = [{"type": "text", "text": "a"}, binary]
    with pytest.raises(UsageError, match=r"content part 1 at type: AG-UI 1\.0 defines no"):
        chat.send(UserMessage(id="u1", content=parts))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"item 0 \(user message 'u2'\): content part 1"):
        chat.set_messages([UserMessage(id="u2", content=parts)])  # type: ignore[arg-type]
    assert list(chat.messages) == [] and driver.requests == []
    defined = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    chat.send(UserMessage(id="u3", content=defined))  # type: ignore[arg-type]
    driver.run_until_idle()
    assert driver.requests[-1].json["messages"][0]["content"] == defined  # whole, as given


def test_send_takes_a_user_message_and_keeps_its_id() -> None:
    """SPEC: send takes a text or a user message; content parts are frozen, as sent."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "url", "value": "u", "mimeType": "image/png"}},
    ]
    chat.send(UserMessage(id="u1", content=tuple(parts), name="ann"))  # type: ignore[arg-type]
    driver.run_until_idle()
    chat.send(parts, message_id="u2")
    driver.run_until_idle()
    assert chat.error is None
    sent = driver.requests[-1].json["messages"]
    assert sent[0] == {"id": "u1", "role": "user", "content": parts, "name": "ann"}
    assert sent[-1] == {"id": "u2", "role": "user", "content": parts}
    parts[0]["text"] = "changed later"  # the caller's list is not the state's
    assert chat.messages[-1].content[0]["text"] == "look"  # type: ignore[index]


def test_resume_entry_keys_of_mixed_types_are_reported_not_sorted_into_a_crash() -> None:
    """An entry whose keys mix strings and numbers is refused with its unknown keys listed."""
    _, chat, batch = paused_chat(ask("a"))
    before = chat.core_state
    with pytest.raises(InvalidResumeError) as info:
        chat.resume(batch.id, [{"interrupt_id": "a", "status": "resolved", "x": 1, 0: 2}])
    assert chat.core_state is before
    # Named by the interrupt it answers, as the other problems are, and the keys it takes.
    assert info.value.problems == (
        "entry for 'a' has unknown keys ['x', 0] (an entry takes interrupt_id, status, "
        "payload and metadata)",
    )
    with pytest.raises(InvalidResumeError) as info:
        chat.resume(batch.id, [{"interrupt_id": "zz", "status": "resolved", "paylod": 1}])
    assert info.value.problems[0].startswith("entry 0 has unknown keys ['paylod']")


def test_a_resume_entry_naming_two_different_interrupts_is_refused() -> None:
    """R-B2: interrupt_id and interruptId that disagree are a problem, not a silent pick."""
    _, chat, batch = paused_chat(ask("a"))
    before = chat.core_state
    entry = {"interrupt_id": "a", "interruptId": "b", "status": "resolved", "payload": 1}
    with pytest.raises(InvalidResumeError, match="interrupt_id 'a' and interruptId 'b'; give one"):
        chat.resume(batch.id, [entry])
    assert chat.core_state is before
    chat.resume(batch.id, [{**entry, "interruptId": "a"}])  # the same id twice is fine
    assert chat.is_resuming


@pytest.mark.parametrize("iid", [float("nan"), None, 7])
def test_an_interrupt_id_that_is_not_a_string_is_a_problem_not_a_crash(iid: Any) -> None:
    """Found by the intent fuzzer: {'interrupt_id': nan} alone raised KeyError (NaN is
    not equal to itself, so it was read as disagreeing with an interruptId not given)."""
    _, chat, batch = paused_chat(ask("a"))
    before = chat.core_state
    with pytest.raises(InvalidResumeError, match="entry 0 has no string interrupt_id"):
        chat.resume(batch.id, [{"interrupt_id": iid, "status": "resolved"}])
    assert chat.core_state is before


@pytest.mark.parametrize("call", CASES)
def test_an_argument_of_the_wrong_kind_is_a_usage_error_that_changes_nothing(call: str) -> None:
    intent, says = CASES[call]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    before = chat.core_state
    with pytest.raises(UsageError, match=says):
        intent(chat)
    assert chat.core_state is before
    chat.send("still works")
    driver.run_until_idle()
    assert chat.error is None and len(driver.requests) == 1


WHOLE_MESSAGES: dict[str, tuple[Callable[[FakeDriver, Resource], Any], str]] = {
    "chat(thread_id=5)": (
        lambda d, r: d.chat(thread_id=5),  # type: ignore[arg-type]
        "thread_id= takes a non-empty string, or None for a new id (got the int 5)",
    ),
    "set_thread_id('')": (
        lambda d, r: r.set_thread_id(""),
        "set_thread_id() takes a non-empty string, or None for a new id (got the str '')",
    ),
    "send(message_id=3)": (
        lambda d, r: r.send("hi", message_id=3),  # type: ignore[arg-type]
        "send(): message_id must be a non-empty string (got the int 3)",
    ),
    "send(None)": (
        lambda d, r: r.send(None),  # type: ignore[arg-type]
        "send() takes text, a UserMessage or a list of content parts, not None",
    ),
    "send([a part without a type])": (
        lambda d, r: r.send([{"text": "x"}]),
        "send(): content part 0 must be an object with a string 'type' "
        '(such as {"type": "text", "text": "..."}), not the dict {\'text\': \'x\'}',
    ),
    "send(an id in the history)": (
        lambda d, r: r.send("x", message_id="u1"),
        "send(): message id 'u1' is already in the history; give a new id, or none to "
        "have one generated",
    ),
    "set_messages('hi')": (
        lambda d, r: r.set_messages("hi"),
        "set_messages() takes a list of messages, not the str 'hi'",
    ),
    "set_messages([1])": (
        lambda d, r: r.set_messages([UserMessage(id="u", content="a"), 1]),
        "set_messages() item 1 is not a message (int); build messages with "
        "interlude.core.wire (UserMessage, ...)",
    ),
    "set_messages([an empty id])": (
        lambda d, r: r.set_messages([UserMessage(id="", content="a")]),
        "set_messages() item 0 (user message): its id must be a non-empty string",
    ),
    "set_messages([a number as id])": (
        lambda d, r: r.set_messages([UserMessage(id=5, content="a")]),  # type: ignore[arg-type]
        "set_messages() item 0 (user message): its id must be a non-empty string",
    ),
    "set_messages([a tool message without its call id])": (
        lambda d, r: r.set_messages([ToolMessage(id="t", tool_call_id=None, content="x")]),  # type: ignore[arg-type]
        "set_messages() item 0 (tool message 't') cannot be sent: malformed message: at "
        "toolCallId: expected a string, got null",
    ),
    "set_messages([a set inside])": (
        lambda d, r: r.set_messages([UserMessage(id="u", content=({"type": "x", "v": {1}},))]),  # type: ignore[dict-item]
        "set_messages() item 0 (user message 'u') cannot be sent: not a JSON value at "
        "/content/0/v: a set has no JSON form",
    ),
    "completion(state={set})": (
        lambda d, r: d.completion(state={"a": {1}}),
        "state= takes a JSON value: not a JSON value at /a: a set has no JSON form",
    ),
    "set_input({1: 2})": (
        lambda d, r: d.completion().set_input({1: 2}),
        "set_input() takes a JSON value: not a JSON value at /: object key of type int, not str",
    ),
}


@pytest.mark.parametrize("call", WHOLE_MESSAGES)
def test_a_usage_error_says_which_call_what_it_takes_and_what_it_got(call: str) -> None:
    """The whole message, as an application's log shows it: the call (or argument), what
    it takes, and the value given, described by its type."""
    make, message = WHOLE_MESSAGES[call]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=[UserMessage(id="u1", content="first")])
    with pytest.raises(UsageError) as caught:
        make(driver, chat)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "send",
    [
        lambda r: r.send("again", message_id="u1"),
        lambda r: r.send(UserMessage(id="u1", content="again")),
    ],
    ids=["message_id", "UserMessage"],
)
def test_send_refuses_an_id_the_history_already_has(send: Callable[[Resource], Any]) -> None:
    """Endpoints recognise a repeated user message by its id (failures.md): a new message
    with an old id could be dropped as a repeat."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=[UserMessage(id="u1", content="first")])
    before = chat.core_state
    with pytest.raises(UsageError, match="message id 'u1' is already in the history"):
        send(chat)
    assert chat.core_state is before


def test_a_restored_history_never_gets_its_generated_ids_again() -> None:
    """Ids come from a counter in the state (no randomness in the core): a state built
    from a saved history starts the counter past every number its ids carry, so the
    next message and run ids are new even under the same prefix."""
    first = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = first.chat(thread_id="support-42")
    chat.send("first question")
    first.run_until_idle()
    chat.send("second question")
    first.run_until_idle()
    saved = list(chat.messages)
    used = {m.id for m in saved} | {r.run_id for r in first.requests}

    second = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    restored = second.chat(thread_id="support-42", messages=saved)
    restored.send("third question")
    second.run_until_idle()
    (request,) = second.requests
    new_ids = {restored.messages[-1].id, request.run_id}
    assert not new_ids & used, new_ids & used
    assert [m["id"] for m in request.json["messages"]][:-1] == [m.id for m in saved]

    again = second.chat(thread_id="support-42")
    again.set_messages(saved)
    again.send("fourth question")
    assert again.messages[-1].id not in used


@pytest.mark.parametrize(
    ("history_id", "thread_id", "next_id"),
    [
        ("interlude-user-41", None, "interlude-msg-42"),
        ("interlude-tool-" + "9" * 18, None, "interlude-msg-1" + "0" * 18),  # the longest read
        ("interlude-user-" + "9" * 19, None, "interlude-msg-1"),  # longer: not one of ours
        ("interlude-user-\u0664\u0662", None, "interlude-msg-1"),  # digits, but not ASCII
        ("interlude-user-4a", None, "interlude-msg-1"),
        ("interludeuser-50", None, "interlude-msg-1"),  # not under the prefix
        ("x-interlude-user-60", None, "interlude-msg-1"),
        ("u1", "interlude-thread-77", "interlude-msg-78"),  # a thread id counts too
        ("u1", "interlude-thread-x", "interlude-msg-1"),
    ],
)
def test_the_id_counter_starts_past_only_the_numbers_its_own_ids_could_carry(
    history_id: str, thread_id: str | None, next_id: str
) -> None:
    """Generated ids are ``{prefix}-{kind}-{n}``: an id of that form in a restored history
    (or the thread id) moves the counter past ``n``; an id the runtime could not have
    generated (not under the prefix, not ASCII digits, over 18 of them) leaves it."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=[UserMessage(id=history_id, content="a")], thread_id=thread_id)
    chat.send("b")
    assert chat.messages[-1].id == next_id
    history = [UserMessage(id=i, content="a") for i in ("p-user-5", "interlude-user-9")]
    mine = driver.chat(Options(id_prefix="p"), messages=history)  # another prefix, another form
    mine.send("b")
    assert mine.messages[-1].id == "p-msg-6"


def test_resume_problems_are_placed_at_their_interrupts_for_a_form() -> None:
    """R-B2: InvalidResumeError.details places each problem at the interrupt (and the
    entry) it concerns, so a form shows it next to its question, not as a list of text."""
    _, chat, batch = paused_chat(ask("a"), ask("b"), ask("c"))
    entries = [
        {"interrupt_id": "a", "status": "maybe"},
        {"interruptId": "b", "status": "cancelled", "payload": 1},
        {"interrupt_id": "zzz", "status": "resolved"},
        "not a mapping",
    ]
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    error = caught.value
    assert error.details == (
        ResumeProblem("entry for 'a' has a status other than 'resolved' or 'cancelled'", "a", 0),
        ResumeProblem("entry for 'b' is cancelled and must not carry a payload", "b", 1),
        ResumeProblem(
            "entry for 'zzz' names no interrupt of this batch (it holds 'a', 'b', 'c')", None, 2
        ),
        ResumeProblem("entry 3 is a str, not a mapping", None, 3),
        ResumeProblem("no entry for 'c'", "c", None),
    )
    assert error.problems == tuple(p.message for p in error.details)
    assert error.for_interrupt("c") == ("no entry for 'c'",)
    assert error.for_interrupt("a") == (error.problems[0],)


def test_every_problem_of_an_entry_is_reported_not_the_first_alone() -> None:
    """R-B2: a form shows the user everything to fix at once: an entry's status, payload
    and metadata are each checked (only the first problem was reported)."""
    _, chat, batch = paused_chat(ask("a"), ask("b"))
    entries = [
        {"interrupt_id": "a", "status": "maybe", "payload": {1, 2}, "metadata": [1]},
        {"interrupt_id": "b", "status": "cancelled", "payload": 1, "metadata": "m"},
    ]
    before = chat.core_state
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    assert chat.core_state is before
    assert caught.value.for_interrupt("a") == (
        "entry for 'a' has a status other than 'resolved' or 'cancelled'",
        "entry for 'a' has a payload that is not JSON (a set has no JSON form)",
        "entry for 'a' has metadata that is not a JSON object",
    )
    assert caught.value.for_interrupt("b") == (
        "entry for 'b' is cancelled and must not carry a payload",
        "entry for 'b' has metadata that is not a JSON object",
    )


def test_R_B2_a_resume_with_nothing_pending_says_so_and_nothing_else() -> None:
    """A stale batch id when no batch is pending: no form to rebuild."""
    driver, chat, batch = paused_chat(ask("a"))
    chat.resume(batch.id, [{"interrupt_id": "a", "status": "resolved"}])
    driver.run_until_idle()
    assert chat.pending_interrupts is None
    with pytest.raises(StaleBatchError) as info:
        chat.resume(batch.id, [{"interrupt_id": "a", "status": "resolved"}])
    assert str(info.value) == (
        f"batch {batch.id!r} is not the pending batch (no batch is pending); nothing awaits answers"
    )
