"""Values with no JSON text never reach a request, and never crash a driver.

Python holds two kinds of value that ``json.dumps(...).encode("utf-8")`` cannot
write: integers past Python's digit limit for ``int -> str`` and strings holding a
lone surrogate. The first is refused where it comes in (R-B2 for a resume; a
``UsageError`` elsewhere). The second is text an agent may well send, half an
emoji's ``\\u`` pair in one delta, so it is kept and goes back out as its
``\\u`` escape, as JSON allows. Anything else that still cannot be written ends
the run with a non-retryable ``TransportError``; nothing is sent or lost.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from rule_support import ask, paused_chat

from interlude.adapters.fake import (
    FakeDriver,
    ScriptedAgent,
    finished,
    held,
    reply,
    started,
)
from interlude.adapters.fake.script import Request
from interlude.core import inputs as i
from interlude.core.errors import InvalidResumeError, ProtocolError, TransportError, UsageError
from interlude.core.json import MAX_INT_DIGITS, FrozenDict, NotJSONError, freeze, frozen_unchecked
from interlude.core.wire import (
    InterruptOutcome,
    RunFinished,
    StateSnapshot,
    WireError,
    encode_json,
    encode_request,
)
from interlude.core.wire.run_input import Interrupt, RunAgentInput

HUGE = 10**MAX_INT_DIGITS  # MAX_INT_DIGITS + 1 digits


class Level(enum.IntEnum):
    HIGH = 3


class Choice(str, enum.Enum):  # noqa: UP042 - the mixin apps still use; str() is "Choice.APPROVE"
    APPROVE = "approve"


class Colour(enum.StrEnum):
    RED = "red"


def test_str_subclasses_freeze_to_the_text_json_dumps_writes() -> None:
    """R-B1: an enum payload goes out as json.dumps would write it, never as its repr."""
    frozen = freeze({Choice.APPROVE: Choice.APPROVE, "c": [Colour.RED]})
    assert frozen == {"approve": "approve", "c": ("red",)}
    assert [type(k) for k in frozen] == [str, str]  # type: ignore[union-attr]
    assert type(frozen["approve"]) is str  # type: ignore[index]
    assert json.loads(encode_json(frozen)) == json.loads(
        json.dumps({"approve": "approve", "c": ["red"]})
    )


def test_str_enum_text_is_sent_as_its_value() -> None:
    driver = FakeDriver(ScriptedAgent(finish))
    chat = driver.chat()
    chat.send(Choice.APPROVE)
    driver.run_until_idle()
    assert driver.requests[0].json["messages"][0]["content"] == "approve"
    assert type(chat.messages[0].content) is str


def test_an_enum_payload_is_sent_as_its_value() -> None:
    driver, chat, batch = paused_chat(ask("q"))
    chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": Choice.APPROVE}])
    driver.run_until_idle()
    assert driver.requests[-1].resume == [
        {"interruptId": "q", "status": "resolved", "payload": "approve"}
    ]


@pytest.mark.parametrize("qid", [Choice.APPROVE, Colour.RED])
def test_an_enum_interrupt_id_is_held_as_its_text(qid: str) -> None:
    """R-B1, R-B4: the claim holds the id's text, as the request carries it, and a
    problem with the entry is placed at its interrupt and named by that text."""
    driver, chat, batch = paused_chat(ask(str.__str__(qid)))
    with pytest.raises(InvalidResumeError) as info:
        chat.resume(batch.id, [{"interrupt_id": qid, "status": "later"}])
    assert info.value.for_interrupt(qid) and "Choice" not in str(info.value)
    chat.resume(batch.id, [{"interrupt_id": qid, "status": "resolved"}])
    claim = chat.core_state.claim
    assert claim is not None and [type(e.interrupt_id) for e in claim.entries] == [str]
    driver.run_until_idle()
    assert driver.requests[-1].resume == [{"interruptId": qid, "status": "resolved"}]


def finish(req: Request) -> Any:
    return reply(started(req), finished(req))


def test_freeze_takes_integers_up_to_the_digit_limit_and_refuses_longer_ones() -> None:
    assert freeze({"n": HUGE - 1})["n"] == HUGE - 1  # type: ignore[index]
    assert freeze([-(HUGE - 1)]) == (-(HUGE - 1),)
    assert freeze(Level.HIGH) == 3 and type(freeze(Level.HIGH)) is int
    with pytest.raises(NotJSONError, match=f"/a/0: an integer of more than {MAX_INT_DIGITS}"):
        freeze({"a": [HUGE]})
    with pytest.raises(NotJSONError, match="integer of more than"):
        freeze(-HUGE)


def test_a_resume_payload_with_an_oversized_integer_is_an_invalid_resume() -> None:
    """R-B2: a payload with no JSON form is refused at the call; nothing is claimed."""
    _, chat, batch = paused_chat(ask("q"))
    before = chat.core_state
    with pytest.raises(InvalidResumeError, match="payload that is not JSON"):
        chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": HUGE}])
    assert chat.core_state is before and not chat.is_resuming


def test_set_state_with_an_oversized_integer_is_a_usage_error() -> None:
    chat = FakeDriver(ScriptedAgent(finish)).chat()
    before = chat.core_state
    with pytest.raises(UsageError, match="integer of more than"):
        chat.set_state({"n": HUGE})
    assert chat.core_state is before


def test_a_lone_surrogate_goes_out_as_its_json_escape() -> None:
    assert encode_json({"t": "a\ud83d"}) == b'{"t":"a\\ud83d"}'
    assert encode_json({"t": "caf\u00e9 \U0001f600"}) == '{"t":"café 😀"}'.encode()
    assert json.loads(encode_json("\ud83d" + "\ude00")) == "\U0001f600"


def test_an_emoji_split_across_two_deltas_is_sent_back_whole() -> None:
    """An agent that splits a UTF-16 pair between deltas gets the same text back."""

    def split(req: Request) -> Any:
        return reply(
            started(req),
            '{"type":"TEXT_MESSAGE_START","messageId":"a1","role":"assistant"}',
            '{"type":"TEXT_MESSAGE_CONTENT","messageId":"a1","delta":"smile \\ud83d"}',
            '{"type":"TEXT_MESSAGE_CONTENT","messageId":"a1","delta":"\\ude00!"}',
            '{"type":"TEXT_MESSAGE_END","messageId":"a1"}',
            finished(req),
        )

    driver = FakeDriver(ScriptedAgent(finish).then(split))
    chat = driver.chat()
    chat.send("Smile")
    driver.run_until_idle()
    assert chat.error is None and chat.messages[-1].content == "smile \ud83d\ude00!"
    chat.send("Again")
    driver.run_until_idle()
    assert chat.error is None
    sent = driver.requests[-1]
    assert "smile \\ud83d\\ude00!" in sent.body
    assert sent.json["messages"][1]["content"] == "smile \U0001f600!"


def test_a_request_with_no_json_text_fails_the_run_without_crashing_the_driver() -> None:
    """A value that got past the checks (built with the internal ``frozen_unchecked``) can
    hold what freeze() would refuse. The send reports it; nothing is sent or lost."""
    driver = FakeDriver(ScriptedAgent(finish))
    chat = driver.chat()
    chat.send("Load")
    driver.run_until_idle()
    chat.set_state(frozen_unchecked({"n": HUGE}))
    chat.send("Next")
    driver.run_until_idle()  # must not raise
    error = chat.error
    assert isinstance(error, TransportError) and not error.retryable
    assert "cannot be written as JSON" in str(error) and "nothing was sent" in str(error)
    assert len(driver.requests) == 1  # the second request never went out
    assert [m.content for m in chat.messages] == ["Load", "Next"] and not chat.is_loading


def test_a_typed_event_is_checked_and_frozen_as_a_frame_is() -> None:
    """R-A4: an interrupt that arrives as a typed event (EventReceived) is published as
    frozen copies; a typed event with no wire form fails the run like a bad frame."""
    schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    driver = FakeDriver(ScriptedAgent(lambda req: held(started(req))))
    chat = driver.chat()
    chat.send("Go")
    driver.step()
    driver.release()
    driver.step()  # RUN_STARTED
    run = chat.core_state.run
    assert run is not None and run.attempt is not None
    req = driver.requests[0]
    ask = Interrupt(id="q", reason="input_required", response_schema=schema)  # type: ignore[arg-type]
    done = RunFinished(
        thread_id=req.thread_id, run_id=req.run_id, outcome=InterruptOutcome(interrupts=(ask,))
    )
    chat.apply(i.EventReceived(run.attempt.id, done))
    batch = chat.pending_interrupts
    assert batch is not None and batch.interrupts[0].response_schema == schema
    published = batch.interrupts[0].response_schema
    assert isinstance(published, FrozenDict) and published is not schema
    schema["properties"] = {}  # the adapter's dict changes later: the batch does not
    assert "approved" in published["properties"]  # type: ignore[operator]

    driver = FakeDriver(ScriptedAgent(lambda req: held(started(req))))
    chat = driver.chat()
    chat.send("Go")
    driver.step()
    driver.release()
    driver.step()
    run = chat.core_state.run
    assert run is not None and run.attempt is not None
    unwritable = StateSnapshot(snapshot=frozen_unchecked({"n": HUGE}))
    chat.apply(i.EventReceived(run.attempt.id, unwritable))
    assert isinstance(chat.error, ProtocolError) and "has no wire form" in str(chat.error)
    assert not chat.is_loading and [m.content for m in chat.messages] == ["Go"]


def test_encode_request_names_the_problem() -> None:
    inp = RunAgentInput(thread_id="t", run_id="r", state=frozen_unchecked({"n": HUGE}))
    with pytest.raises(WireError, match="the request cannot be written as JSON"):
        encode_request(inp)
    # The reason is quoted, not just its length.
    nan = RunAgentInput(thread_id="t", run_id="r", state=frozen_unchecked({"n": float("nan")}))
    with pytest.raises(WireError) as info:
        encode_request(nan)
    assert str(info.value).startswith(
        "the request cannot be written as JSON: 'Out of range float values are not JSON compliant"
    )
