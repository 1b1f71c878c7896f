"""Arguments of the wrong kind: every intent refuses them with a UsageError that says
what it takes, and changes nothing (the errors table of SPEC.md; R-B2 for resume).

``property_tests/test_intent_fuzz.py`` draws such arguments at random; these are
the cases it found raising Python's own errors, and their neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interlude.adapters.fake import (
    FakeDriver,
    ScriptedAgent,
    finished,
    interrupted,
    reply,
    started,
)
from interlude.adapters.resource import Resource
from interlude.core.errors import InvalidResumeError, UsageError
from interlude.core.wire.messages import UserMessage

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
}


def test_resume_entry_keys_of_mixed_types_are_reported_not_sorted_into_a_crash() -> None:
    """An entry whose keys mix strings and numbers is refused with its unknown keys listed."""
    ask = {"id": "a", "reason": "input_required"}
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), interrupted(req, ask))))
    chat = driver.chat()
    chat.send("Go")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    before = chat.core_state
    with pytest.raises(InvalidResumeError, match=r"unknown keys \['x', 0\]"):
        chat.resume(batch.id, [{"interrupt_id": "a", "status": "resolved", "x": 1, 0: 2}])
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
