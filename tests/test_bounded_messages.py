"""What a user reads when something goes wrong: bounded, and never an error of its own.

Error messages and warnings quote values from the network or the caller (ids, a
RUN_ERROR's text, an exception's message). A hostile or buggy peer sends megabytes; a
message keeps its start and its end (where the advice is) and names what it left out.
Quoting a deeply nested value must not raise ``RecursionError``, and an exception whose
``__str__`` raises must not escape the driver.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
import trio
from rule_support import RecordingDriver, ask, paused_chat, rejected, succeed

from interlude.adapters.fake import FakeDriver, ScriptedAgent, reply, run_error, started
from interlude.adapters.trio import TrioDriver
from interlude.core import (
    AttemptFailed,
    InterruptPendingError,
    InvalidResumeError,
    Options,
    ProtocolError,
    RetryPolicy,
    RunError,
    Send,
    SendStarting,
    TransportError,
    UsageError,
    initial_state,
    step,
)
from interlude.core.commands import StartAttempt
from interlude.core.errors import MAX_MESSAGE, clip, quote
from interlude.core.wire.messages import ToolMessage

HUGE = "x" * 5_000_000
BOUND = MAX_MESSAGE + 100  # the elision note's own length
NO_MESSAGE = "the agent reported an error (RUN_ERROR) without a message"


def deep(n: int) -> Any:
    v: Any = []
    for _ in range(n):
        v = [v]
    return v


def failed_with(*events: Any) -> Any:
    """The error of a chat whose one run streamed ``events`` after RUN_STARTED."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), *events)))
    chat = driver.chat(Options(retry=RetryPolicy(max_attempts=1)))
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is not None
    return chat.error


def test_clip_keeps_the_start_and_the_end_and_names_what_it_left_out() -> None:
    text = "start " + HUGE + " do this"
    clipped = clip(text)
    assert len(clipped) < BOUND
    assert clipped.startswith("start xxx") and clipped.endswith("x do this")
    assert "characters left out" in clipped
    assert clip("short") == "short"


def test_a_huge_run_error_message_is_clipped_in_str_and_repr() -> None:
    error = failed_with(run_error("boom " + HUGE))
    assert isinstance(error, RunError)
    assert len(str(error)) < BOUND and len(repr(error)) < BOUND
    assert str(error).startswith("boom xxx") and "characters left out" in str(error)


def test_a_huge_message_id_in_a_protocol_error_is_clipped() -> None:
    start = {"type": "TEXT_MESSAGE_START", "messageId": HUGE, "role": "assistant"}
    error = failed_with(start, start)
    assert isinstance(error, ProtocolError) and len(str(error)) < BOUND
    assert "characters left out" in str(error)


def test_a_warning_quoting_a_huge_value_is_clipped() -> None:
    driver = FakeDriver(
        ScriptedAgent(
            lambda req: reply(
                started(req),
                {
                    "type": "RUN_FINISHED",
                    "threadId": req.thread_id,
                    "runId": req.run_id,
                    "outcome": {"type": HUGE},
                },
            )
        )
    )
    chat = driver.chat()
    chat.send("go")
    driver.run_until_idle()
    (warning,) = chat.warnings
    assert "read as success" in warning and len(warning) < BOUND


@pytest.mark.parametrize(
    ("message", "code", "expected"),
    [
        ("", None, NO_MESSAGE),
        (" \n", "QUOTA", NO_MESSAGE + " [code 'QUOTA']"),
        ("over quota", "QUOTA", "over quota [code 'QUOTA']"),
    ],
)
def test_a_run_error_reads_its_code_and_says_when_it_has_no_message(
    message: str, code: str | None, expected: str
) -> None:
    """str() is what an application shows: an empty message read as '' before, and the
    code was in neither str() nor repr(). The endpoint's own fields stay as they came."""
    error = failed_with(run_error(message, code))
    assert isinstance(error, RunError)
    assert str(error) == expected
    assert (error.message, error.code) == (message, code)
    assert repr(error) == f"RunError({message!r}" + (f", code={code!r})" if code else ")")


def test_intent_errors_quote_the_callers_value_briefly() -> None:
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat()
    chat.send("first", message_id=HUGE)
    driver.run_until_idle()
    error = rejected(chat, UsageError, lambda: chat.send("again", message_id=HUGE))
    assert len(str(error)) < BOUND
    for call in (
        lambda: chat.send("x", message_id=deep(5000)),
        lambda: chat.set_thread_id(deep(5000)),
        lambda: chat.resume(deep(5000), []),
    ):
        error = rejected(chat, UsageError, call)  # not RecursionError from repr()
        assert "[[[[...]]]]" in str(error)
    with pytest.raises(UsageError, match=r"not \[\[\[\[\.\.\.\]\]\]\]"):
        Options(id_prefix=deep(5000))
    error = rejected(chat, UsageError, lambda: chat.configure(5))  # type: ignore[arg-type]
    assert "not an int;" in str(error)
    assert quote(HUGE).count("x") < 100


def test_resume_entries_naming_a_huge_or_deep_id_are_rejected_briefly() -> None:
    _, chat, batch = paused_chat()
    for iid in (HUGE, deep(5000)):
        entry = {"interrupt_id": iid, "status": "resolved", "payload": 1}
        error = rejected(chat, InvalidResumeError, lambda e=entry: chat.resume(batch.id, [e]))
        assert len(str(error)) < 1000 and "no entry for 'approve'" in str(error)


def test_a_claimed_batch_tells_send_to_wait_not_to_resume() -> None:
    """resume() of a claimed batch raises BatchClaimedError: the advice was a dead end."""
    _, chat, batch = paused_chat(replies=[succeed(hold=True)])
    chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved", "payload": 1}])
    error = rejected(chat, InterruptPendingError, lambda: chat.send("more"))
    assert "wait for it to settle (is_resuming)" in str(error)
    assert "resume()" not in str(error)


class BadStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


def test_a_tool_raising_an_exception_without_a_readable_message_is_its_failure() -> None:
    def tool(args: Any) -> Any:
        raise BadStr

    agent = ScriptedAgent(succeed()).then(
        lambda req: reply(
            started(req),
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "t"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "RUN_FINISHED", "threadId": req.thread_id, "runId": req.run_id},
        )
    )
    driver = RecordingDriver(agent)
    chat = driver.chat(local_tools={"t": tool})
    chat.send("go")
    driver.run_until_idle()  # raised out of the driver before
    (result,) = [m for m in chat.messages if isinstance(m, ToolMessage)]
    assert result.content == "Error: BadStr (its message could not be read)"
    assert (chat.is_loading, chat.error) == (False, None)


def test_an_observer_raising_an_exception_without_a_readable_message_is_recorded() -> None:
    driver = FakeDriver(ScriptedAgent(succeed()))
    chat = driver.chat()

    def observer(_: Any) -> None:
        raise BadStr

    chat.subscribe(observer)
    chat.send("go")  # raised ValueError out of send() before, the send already taken
    assert "BadStr (its message could not be read)" in str(chat.error)
    assert not chat.is_loading


def test_a_retryable_error_given_up_on_keeps_its_cause() -> None:
    """The recorded copy ("gave up after N attempts") lost __cause__, the driver's
    original exception (say httpx.ConnectError), which a service logs."""
    s = initial_state(Options(retry=RetryPolicy(max_attempts=1)))
    t = step(s, Send("go"), 0.0)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), 0.0).state
    cause = ConnectionRefusedError("refused")
    error = TransportError("could not connect", retryable=True)
    error.__cause__ = cause
    s = step(s, AttemptFailed(start.attempt, error), 0.0).state
    assert s.error is not None and "gave up after 1 attempt" in str(s.error)
    assert s.error.__cause__ is cause


def error_of_a_run(transport: Any, options: Options | None = None) -> Any:
    """The ``error`` a chat on a TrioDriver over ``transport`` ends its first run with."""
    errors: list[Any] = []

    async def main() -> None:
        with trio.fail_after(10):
            async with TrioDriver(transport) as driver:
                chat = driver.chat(options)
                chat.send("go")
                while chat.is_loading:
                    await trio.sleep(0.01)
                errors.append(chat.error)

    trio.run(main)
    (error,) = errors
    return error


def test_a_custom_transport_yielding_bytes_fails_the_run_not_the_driver() -> None:
    """A transport that yields bytes or a dict is its author's bug: a non-retryable
    TransportError that says what to yield, where UsageError about FrameReceived (an
    input the author never built) used to tear down the driver's task group."""

    class BytesTransport:
        async def stream(self, body: bytes) -> Any:
            req = json.loads(body)
            started = {"type": "RUN_STARTED", "threadId": req["threadId"], "runId": req["runId"]}
            yield json.dumps(started).encode()

    error = error_of_a_run(BytesTransport())
    assert isinstance(error, TransportError) and not error.retryable
    assert "yielded a bytes as a frame's data, which must be a str" in str(error)


def test_clip_keeps_a_message_of_exactly_max_message_whole() -> None:
    """MAX_MESSAGE is the longest message kept whole: one character more is clipped."""
    assert clip("y" * MAX_MESSAGE) == "y" * MAX_MESSAGE
    longer = clip("y" * (MAX_MESSAGE + 1))
    assert "[2 characters left out]" in longer


def test_a_value_whose_repr_raises_is_named_by_its_type() -> None:
    """quote() names the type of a value whose repr() raises (here an int past 4,300
    digits), so the UsageError about it is raised, not repr()'s ValueError."""
    big = 10**5000
    assert quote(big) == "<int object>"
    says = r"^RetryPolicy\.jitter takes a number in \[0, 1\], not <int object>$"
    with pytest.raises(UsageError, match=says):
        RetryPolicy(jitter=big)


def test_a_type_name_starting_with_a_capital_vowel_takes_an() -> None:
    """The article reads the type's name case-blind: 'an OrderedDict', not 'a OrderedDict'."""
    with pytest.raises(UsageError, match=r"^options must be an Options, not an OrderedDict$"):
        initial_state(OrderedDict())  # type: ignore[arg-type]


def test_a_number_option_given_a_deep_value_is_refused_briefly() -> None:
    """A numeric option quotes the wrong value briefly: a deeply nested one raised
    RecursionError from repr() instead of the UsageError."""
    says = r"^RetryPolicy\.max_attempts takes an integer >= 1, not \[\[\[\[\.\.\.\]\]\]\]$"
    with pytest.raises(UsageError, match=says):
        RetryPolicy(max_attempts=deep(5000))


def test_a_missing_entry_for_a_huge_interrupt_id_is_named_briefly() -> None:
    """The problem naming an interrupt the entries left out quotes the server's id
    briefly, as every problem does: a huge id from the network made a huge problem."""
    iid = "q" * 100_000
    _, chat, batch = paused_chat(ask(iid))
    error = rejected(chat, InvalidResumeError, lambda: chat.resume(batch.id, []))
    (problem,) = error.details
    assert problem.message == f"no entry for {quote(iid)}"
    assert problem.interrupt_id == iid
    assert len(problem.message) < 100


def test_a_custom_transport_raising_an_exception_without_a_readable_message_is_retryable() -> None:
    """Any exception from a transport is a retryable TransportError named by it; one whose
    str() raises is named by its type, and must not escape the driver."""

    class BadTransport:
        async def stream(self, body: bytes) -> Any:
            raise BadStr
            yield ""  # pragma: no cover - makes this an async generator

    error = error_of_a_run(BadTransport(), Options(retry=RetryPolicy(max_attempts=1)))
    assert isinstance(error, TransportError) and error.retryable
    assert str(error).startswith("BadStr (its message could not be read)")


@pytest.mark.parametrize(
    ("limit", "clipped"),
    [
        (0, " ... [10 characters left out] ... "),
        (1, " ... [10 characters left out] ... "),
        (2, "a ... [9 characters left out] ... "),
        (3, "ab ... [7 characters left out] ... j"),
    ],
)
def test_clip_with_a_small_limit_keeps_only_what_the_limit_allows(limit: int, clipped: str) -> None:
    """clip is public: a limit under 3 kept no tail, and text[-0:] is the whole text, so
    the result held all of it while saying characters were left out."""
    assert clip("abcdefghij", limit) == clipped
