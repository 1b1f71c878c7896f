"""Boundaries and strictness of what comes in, each pinned by a test that failed against
a one-line change a mutation-testing round made (the limits are exact, the checks
strict, frozen values deeply frozen, the driver's command order kept)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import anyio
import httpx
import pytest
from rule_support import T0, ask, at, paused_chat

from interlude.adapters.fake import (
    FakeDriver,
    ScriptedAgent,
    drop,
    finished,
    held,
    reply,
    started,
    text,
    tool_call,
)
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.resource import Resource
from interlude.adapters.sse import SSEParser
from interlude.core import (
    AbortAttempt,
    FrozenDict,
    NotJSONError,
    Options,
    ProtocolError,
    PVec,
    RetryPolicy,
    StartAttempt,
    TransportError,
    UsageError,
    freeze,
    selectors,
)
from interlude.core.answers import (
    AnswerCheck,
    SchemaLimits,
    SchemaRejectedError,
    compile_answer_schema,
)
from interlude.core.commands import Command
from interlude.core.patch import MAX_COPIED, MAX_DEPTH, PatchError, apply_patch, parse_pointer
from interlude.core.wire import AssistantMessage, Message, ToolMessage, UserMessage
from interlude.core.wire.codec import MAX_DEPTH as MAX_FRAME_DEPTH
from interlude.core.wire.codec import WireError, decode_frame

# -- SSE and frames -----------------------------------------------------------------------


def test_a_line_one_byte_over_the_limit_in_one_chunk_is_refused() -> None:
    parser = SSEParser(max_frame_bytes=10)
    with pytest.raises(ProtocolError, match="limit of 10 bytes"):
        parser.feed(b"event:" + b"x" * 5 + b"\ndata: a\n\n")  # an 11-byte line
    assert SSEParser(max_frame_bytes=11).feed(b"event:" + b"x" * 5 + b"\ndata: a\n\n")


@pytest.mark.parametrize("tail", ["\u00a0", "\x0c", " trailing", "\u2028"])
def test_a_complete_event_followed_by_anything_but_json_whitespace_is_refused(tail: str) -> None:
    good = '{"type":"STEP_STARTED","stepName":"s"}'
    assert decode_frame(good + " \t\r\n")
    with pytest.raises(WireError):
        decode_frame(good + tail)


def test_nesting_one_level_past_the_bound_is_refused() -> None:
    depth = MAX_FRAME_DEPTH  # inside the event object: MAX_DEPTH + 1 levels in all
    with pytest.raises(WireError, match="nested deeper"):
        decode_frame('{"type":"STATE_SNAPSHOT","snapshot":' + "[" * depth + "]" * depth + "}")


# -- frozen JSON -----------------------------------------------------------------------------


def test_freezing_a_pvec_freezes_what_it_holds() -> None:
    """R-A4, R-B4: a PVec handed in (set_state of a value read back from state) with a
    plain dict inside must not let the application's dict into the state."""
    item = {"n": 1}
    frozen = freeze(PVec.from_iterable([item]))
    assert type(frozen) is PVec and type(frozen[0]) is FrozenDict
    item["n"] = 999
    assert frozen[0] == {"n": 1}


def test_the_path_of_a_value_that_is_not_json_escapes_tilde_before_slash() -> None:
    with pytest.raises(NotJSONError) as caught:
        freeze({"a/b~c": float("nan")})
    assert caught.value.path == "/a~1b~0c"


# -- patches -------------------------------------------------------------------------------


def test_a_patch_may_copy_exactly_max_copied_values() -> None:
    doc = freeze({"a": [0] * (MAX_COPIED - 1)})  # the array and its items: MAX_COPIED values
    copied: Any = apply_patch(doc, freeze([{"op": "copy", "from": "/a", "path": "/b"}]))
    assert len(copied["b"]) == MAX_COPIED - 1
    bigger = freeze({"a": [0] * MAX_COPIED})
    with pytest.raises(PatchError, match="more than"):
        apply_patch(bigger, freeze([{"op": "copy", "from": "/a", "path": "/b"}]))


def test_a_pointer_of_one_token_more_than_max_depth_is_refused() -> None:
    assert len(parse_pointer("/a" * MAX_DEPTH)) == MAX_DEPTH
    with pytest.raises(PatchError, match=f"at most {MAX_DEPTH} tokens"):
        parse_pointer("/a" * (MAX_DEPTH + 1))


# -- intents and selectors -----------------------------------------------------------------


def test_a_content_part_whose_type_is_not_text_is_refused() -> None:
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    with pytest.raises(UsageError, match="string 'type'"):
        chat.send([{"type": 5, "text": "hi"}])


def test_a_completions_output_is_none_once_a_newer_user_message_is_last() -> None:
    """The output belongs to the input: an answer to an older question is not it."""
    history = [
        UserMessage(id="u1", content="first"),
        AssistantMessage(id="a1", content="old answer"),
        UserMessage(id="u2", content="second"),
    ]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=history)
    assert chat.output is None
    chat.send("third")
    driver.run_until_idle()
    assert chat.output is None
    driver2 = FakeDriver(
        ScriptedAgent(lambda req: reply(started(req), *text("a2", "new"), finished(req)))
    )
    chat2 = driver2.chat(messages=history)
    chat2.reload()
    driver2.run_until_idle()
    assert chat2.output == "new"


class Slot(IntEnum):
    QUESTION = 0
    ANSWER = 1


def _held_chat(*events: Any, history: Sequence[Message] = ()) -> tuple[FakeDriver, Resource]:
    """A chat whose first run streams ``events`` one ``release`` at a time."""
    driver = FakeDriver(ScriptedAgent(lambda req: held(started(req), *events, finished(req))))
    chat = driver.chat(messages=history)
    chat.send("hi", message_id="u1")
    driver.step()  # the request goes out
    return driver, chat


def _released(driver: FakeDriver, count: int) -> None:
    for _ in range(count):
        driver.release(1)
        driver.step()


def test_R_J2_messages_read_while_streaming_show_the_text_so_far_however_read() -> None:
    """R-J2: an open message shows its text as far as it has arrived, whether read by
    index (from either end), by slice, by iteration, compared or printed."""
    driver, chat = _held_chat(*text("a1", "Hello", chunks=2))
    _released(driver, 3)  # RUN_STARTED, TEXT_MESSAGE_START, the first delta
    so_far = AssistantMessage(id="a1", content="Hel")
    view = chat.messages
    assert len(view) == 2
    assert view[1] == view[-1] == so_far
    assert view[Slot.ANSWER] == so_far  # an int subclass indexes as its int
    assert view[0] == view[-2] == UserMessage(id="u1", content="hi")
    assert view[1:] == view[-1:] == (so_far,) and view[::-1][0] == so_far
    assert list(view) == [UserMessage(id="u1", content="hi"), so_far]
    assert view == [UserMessage(id="u1", content="hi"), so_far] and view != [so_far]
    assert repr(view).startswith("MessageView([UserMessage(") and "'Hel'" in repr(view)
    assert view != [so_far, so_far] and view != [so_far]  # equal item by item, and as long
    assert view != [UserMessage(id="u1", content="hi")]  # a prefix is not equal
    assert (view == 5) is False and (view != 5) is True  # not a sequence: not equal
    empty = driver.chat().messages
    assert empty == [] and empty == () and empty != ""  # text is not a sequence of messages
    for index in (2, -3):
        with pytest.raises(IndexError, match=r"^message index out of range$"):
            view[index]
    _released(driver, 1)
    assert chat.messages[-1].content == "Hello" and view[-1] == so_far  # a view stays as read
    driver.run_until_idle()
    assert chat.messages[-1] == AssistantMessage(id="a1", content="Hello")


def test_R_J2_a_tool_call_read_while_streaming_shows_its_arguments_so_far() -> None:
    """R-J2: the arguments of an open call, inside its parent assistant message, after
    that message's own text has ended; the earlier assistant messages read as they are."""
    start, args = tool_call("c1", "lookup", '{"q": "x"}', parent_message_id="a1")[:2]
    partial = {**args, "delta": '{"q": '}
    earlier = [UserMessage(id="u0", content="hello"), AssistantMessage(id="a0", content="Hi.")]
    driver, chat = _held_chat(*text("a1", "Let me look."), start, partial, history=earlier)
    _released(driver, 6)
    assert list(chat.messages)[:2] == earlier and chat.messages[1] == earlier[1]
    (open_call,) = chat.messages[-1].tool_calls  # type: ignore[union-attr]
    assert (open_call.id, open_call.function.name) == ("c1", "lookup")
    assert open_call.function.arguments == '{"q": '
    assert chat.messages[-1].content == "Let me look."  # type: ignore[union-attr]
    assert list(chat.messages)[-1] == chat.messages[3] == chat.messages[-1]


def test_R_J2_an_open_message_first_in_the_history_reads_as_streamed() -> None:
    """A snapshot that empties the history, then a message streaming at index 0."""
    driver, chat = _held_chat({"type": "MESSAGES_SNAPSHOT", "messages": []}, *text("a1", "Hey"))
    _released(driver, 4)
    assert chat.messages[0] == chat.messages[-1] == AssistantMessage(id="a1", content="Hey")


def _agrees(r: Resource, driver: FakeDriver) -> None:
    """Every selector of ``interlude.core.selectors`` says what the resource says."""
    s, now = r.core_state, driver.now()
    assert selectors.messages(s) == r.messages and selectors.shared_state(s) == r.state
    assert selectors.pending_interrupts(s) is r.pending_interrupts
    assert selectors.is_loading(s) is r.is_loading
    assert selectors.is_resuming(s) is r.is_resuming
    assert selectors.is_retrying(s) is r.is_retrying
    assert selectors.needs_new_thread(s) is r.needs_new_thread
    assert selectors.is_expired(s, now) is r.is_expired
    assert bool(selectors.expired_interrupt_ids(s, now)) is r.is_expired
    assert (selectors.attempts(s), selectors.retry_cause(s), selectors.retry_due(s)) == (
        r.attempts,
        r.retry_cause,
        r.retry_due,
    )
    assert (selectors.error(s), selectors.thread_id(s)) == (r.error, r.thread_id)
    assert (selectors.input_value(s), selectors.output(s)) == (r.input, r.output)


def test_the_core_selectors_agree_with_the_resource_through_a_resume_and_recovery() -> None:
    """An application on its own driver reads the same facts from the core's selectors
    (paused, expired, resuming, failed after the acknowledgement) as a resource shows."""
    resumed = lambda req: drop(started(req), *text("x", "partial"))  # noqa: E731
    driver, chat, batch = paused_chat(
        ask("a", expires=at(10)), ask("b"), replies=[resumed], thread_id="t1"
    )
    s = chat.core_state
    _agrees(chat, driver)
    assert (selectors.pending_interrupts(s), selectors.thread_id(s)) == (batch, "t1")
    assert selectors.expired_interrupt_ids(s, T0 + 10) == ("a",)
    assert selectors.expired_interrupt_ids(s, T0 + 9.5) == ()
    assert selectors.is_expired(s, T0 + 10) and not selectors.is_expired(s, T0 + 9.5)
    chat.resume(batch.id, [{"interrupt_id": i, "status": "cancelled"} for i in ("a", "b")])
    _agrees(chat, driver)
    assert selectors.is_resuming(chat.core_state) and selectors.is_loading(chat.core_state)
    driver.run_until_idle()
    _agrees(chat, driver)
    s = chat.core_state
    assert selectors.needs_new_thread(s) and isinstance(selectors.error(s), TransportError)
    assert not selectors.is_resuming(s) and selectors.pending_interrupts(s) is None


def test_the_core_selectors_agree_with_the_resource_while_a_run_retries() -> None:
    driver = FakeDriver(ScriptedAgent().then(drop(), lambda r: reply(started(r), finished(r))))
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0, base_delay=2.0)))
    chat.send("go")
    driver.step()
    driver.step()  # the first attempt drops: a back-off
    _agrees(chat, driver)
    s = chat.core_state
    assert selectors.is_retrying(s) and selectors.attempts(s) == 1
    assert selectors.retry_due(s) == driver.now() + 2.0
    assert selectors.retry_cause(s) == TransportError("the connection dropped", retryable=True)
    driver.run_until_idle()
    _agrees(chat, driver)
    assert selectors.attempts(chat.core_state) == 0


def test_a_completions_input_and_output_read_through_the_selectors() -> None:
    """``output`` is the newest assistant text after the input; ``input`` the value set."""
    driver = FakeDriver(
        ScriptedAgent(lambda req: reply(started(req), *text("a1", "A haiku."), finished(req)))
    )
    page = driver.completion()
    assert selectors.input_value(page.core_state) is None
    assert selectors.output(page.core_state) is None
    page.set_input({"topic": "rain"})
    driver.run_until_idle()
    _agrees(page, driver)
    assert selectors.input_value(page.core_state) == {"topic": "rain"}
    assert selectors.output(page.core_state) == "A haiku."


def test_the_output_skips_tool_results_to_the_assistant_message_before_them() -> None:
    """Only a user message ends the search: tool results after the answer do not."""
    history = [
        UserMessage(id="u1", content="q"),
        AssistantMessage(id="a1", content="answer"),
        ToolMessage(id="t1", tool_call_id="c1", content="42"),
    ]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=history)
    assert chat.output == selectors.output(chat.core_state) == "answer"
    assert driver.chat(messages=history[2:]).output is None
    assert driver.chat(messages=history[1:]).output == "answer"  # the first message, too
    assert driver.chat(messages=history[:1]).output is None


# -- answer schemas ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extra"),
    [("\u00e9t\u00e9", 2), ("\ud800", 2)],  # "été": 5 bytes; a lone surrogate: 3
    ids=["accents", "lone surrogate"],
)
def test_R_B3_a_schemas_size_limit_is_inclusive_and_counted_in_utf8_bytes(
    text: str, extra: int
) -> None:
    """``SchemaLimits.max_bytes`` bounds the schema as compact UTF-8 JSON: a schema of
    exactly that many bytes compiles, one byte more is refused with its size, and
    characters outside ASCII count by their encoded bytes, not as one each (a lone
    surrogate, which JSON may carry, as the 3 bytes it is written in)."""
    schema = {"type": "string", "description": text}
    size = len('{"type":"string","description":""}') + len(text) + extra
    validator = compile_answer_schema(schema, limits=SchemaLimits(max_bytes=size))
    assert validator.check("x").ok and not validator.check(1).ok
    for limit in (size - 1, size - extra):  # the second is over the bytes, not the characters
        with pytest.raises(SchemaRejectedError) as caught:
            compile_answer_schema(schema, limits=SchemaLimits(max_bytes=limit))
        assert caught.value.reason == f"it is {size} bytes as JSON, over {limit}"


@pytest.mark.parametrize(
    ("draft", "key"),
    [
        ("http://json-schema.org/draft-04/schema#", "id"),
        ("http://json-schema.org/draft-07/schema#", "$id"),
    ],
    ids=["draft-04 id", "draft-07 $id"],
)
def test_R_B3_a_schema_with_an_absolute_base_uri_still_checks_its_local_refs(
    draft: str, key: str
) -> None:
    """A schema that names itself by URL (``id`` in draft-04, ``$id`` later) is common in
    published schemas: its ``#/...`` refs stay local and nothing is fetched."""
    schema = {
        "$schema": draft,
        key: "http://example.com/approval.json",
        "definitions": {"reason": {"type": "string"}},
        "properties": {"why": {"$ref": "#/definitions/reason"}},
    }
    validator = compile_answer_schema(schema)
    assert validator.check({"why": "ok"}).ok
    assert validator.check({"why": 1}) == AnswerCheck(
        ok=False, problems=("data.why must be string",)
    )


def test_R_B3_an_answer_a_self_referencing_schema_cannot_check_is_a_problem() -> None:
    """A ``$ref`` to itself compiles (it is not fetched, nor unbounded in size) but never
    ends when checking: every answer gets a problem saying so, not a RecursionError."""
    validator = compile_answer_schema({"anyOf": [{"$ref": "#"}, {"type": "integer"}]})
    for answer in (1, "x", [[]]):
        assert validator.check(answer) == AnswerCheck(
            ok=False, problems=("the schema's $refs recurse too deeply to check this answer",)
        )


# -- the HTTP transport ---------------------------------------------------------------------


def test_media_types_are_compared_case_insensitively() -> None:
    body = b'data: {"a":1}\n\n'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "Text/Event-Stream"}, content=body)

    async def main() -> list[str]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            transport = HttpxTransport("http://agent.test/run", client=client)
            return [data async for data in transport.stream(b"{}")]

    assert anyio.run(main) == ['{"a":1}']


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\0b"])
def test_a_header_value_with_a_line_break_or_nul_is_refused_at_construction(value: str) -> None:
    with pytest.raises(UsageError, match="ASCII text on one line"):
        HttpxTransport("http://agent.test/run", headers={"X-Token": value})


# -- the order a driver sees ------------------------------------------------------------------


class Recording:
    """A Driver that records the commands in the order it is given them."""

    def __init__(self) -> None:
        self.executed: list[Command] = []

    def now(self) -> float:
        return 1_800_000_000.0

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        self.executed.extend(commands)


def test_a_driver_gets_a_transitions_commands_before_observers_hear_of_it() -> None:
    """An observer that stops the run from its first notification: the driver must see
    the StartAttempt before the AbortAttempt, or a simple driver would start a run it
    was already told to abort."""
    driver = Recording()
    chat = Resource(driver, Options())
    chat.subscribe(lambda r: r.stop() if r.is_loading else None)
    chat.send("hi")
    kinds = [type(c) for c in driver.executed]
    assert kinds == [StartAttempt, AbortAttempt]
    start, abort = driver.executed
    assert isinstance(start, StartAttempt) and abort == AbortAttempt(start.attempt)


def test_a_pmap_from_state_is_a_json_object_wherever_one_is_expected() -> None:
    """Parts of a resource's state can be PMaps; handed back as metadata they are objects."""
    from rule_support import ask, paused_chat

    from interlude.core import Tool
    from interlude.core.pmap import PMap

    wide = PMap.from_mapping({"k": 1})
    options = Options(tools=[Tool(name="t", description="d", metadata=wide)])
    assert options.tools[0].metadata == {"k": 1}
    assert type(options.tools[0].metadata) is FrozenDict
    driver, chat, batch = paused_chat(ask())
    entry = {"interrupt_id": "approve", "status": "resolved", "payload": 1, "metadata": wide}
    chat.resume(batch.id, [entry])
    driver.run_until_idle()
    assert driver.requests[-1].json["resume"][0]["metadata"] == {"k": 1}


@pytest.mark.parametrize("coding", ["br", "gzip, gzip"])
def test_an_error_status_in_a_coding_not_read_keeps_its_status_and_retry_after(
    coding: str,
) -> None:
    """The status says what happened: a 503 is retryable, whatever its body's coding."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Encoding": coding, "Retry-After": "3", "Content-Type": "text/plain"}

        async def body() -> Any:
            yield b"\x00not read"

        return httpx.Response(503, headers=headers, content=body())

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            transport = HttpxTransport("http://agent.test/run", client=client)
            with pytest.raises(TransportError) as caught:
                async for _ in transport.stream(b"{}"):
                    pass
        assert caught.value.status == 503 and caught.value.retryable
        assert caught.value.retry_after == 3.0

    anyio.run(main)
