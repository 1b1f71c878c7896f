"""The generated copies of the reducer's records (``state.replacer``, ``state.evolve``)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from interlude.core import (
    FrameReceived,
    Options,
    Send,
    SendStarting,
    initial_state,
    selectors,
    step,
)
from interlude.core.commands import StartAttempt
from interlude.core.state import State, _copier, evolve, replacer
from interlude.core.wire.messages import AssistantMessage


@attrs.frozen
class Checked:
    size: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen
class Converted:
    name: str = attrs.field(converter=str)


@attrs.frozen
class Hooked:
    value: int

    def __attrs_post_init__(self) -> None:
        pass


@pytest.mark.parametrize("cls", [Checked, Converted, Hooked])
def test_a_class_that_checks_its_fields_gets_no_generated_copy(cls: type) -> None:
    """Generated copies store values as given: a class with a validator, a converter or
    a post-init hook is refused when the copy is made, not skipped silently later."""
    field = attrs.fields(cls)[0].name
    with pytest.raises(TypeError, match="checks its fields"):
        replacer(cls, field)
    with pytest.raises(TypeError, match="checks its fields"):
        _copier(cls)


def test_generated_copies_equal_attrs_evolve() -> None:
    m = AssistantMessage(id="a", content="hi")
    assert replacer(AssistantMessage, "content")(m, "yo") == attrs.evolve(m, content="yo")
    assert evolve(m, content="yo", name="n") == attrs.evolve(m, content="yo", name="n")
    with pytest.raises(TypeError, match="has no field"):
        evolve(m, colour="red")


def test_message_lookups_stay_right_when_one_draft_is_stepped_two_ways() -> None:
    """The draft's id hints are shared by its versions; a caller that steps the same state
    twice (a test, a what-if) still gets each branch's own answer."""
    s, a = _acknowledged()

    def activity(state: State, mid: str) -> State:
        snap = _frame(type="ACTIVITY_SNAPSHOT", messageId=mid, activityType="x", content={"n": 0})
        return step(state, FrameReceived(a, snap), 0.0).state

    def bump(state: State, mid: str) -> State:
        patch = [{"op": "replace", "path": "/n", "value": 1}]
        delta = _frame(type="ACTIVITY_DELTA", messageId=mid, activityType="x", patch=patch)
        return step(state, FrameReceived(a, delta), 0.0).state

    left = activity(activity(s, "x"), "shared")  # x at 2, shared at 3
    right = activity(activity(s, "y"), "z")  # y at 2, z at 3
    right = activity(right, "shared")  # shared at 4: the hint now points there
    assert bump(left, "shared").error is None  # found at 3 in spite of the hint
    assert bump(right, "shared").error is None
    assert bump(left, "x").error is None
    # Not in this branch: skipped with a warning (AG-UI 1.0), the content unchanged.
    for state, mid in ((left, "y"), (right, "x"), (left, "never")):
        bumped = bump(state, mid)
        assert bumped.error is None and bumped.draft == state.draft
        assert bumped.warnings[-1].endswith("the delta was skipped")


def test_call_lookups_stay_right_when_one_draft_is_stepped_two_ways() -> None:
    """The same for tool calls (REASONING_ENCRYPTED_VALUE finds its call through the
    hints): a hint from the other branch is checked and, when wrong, a scan finds the
    call; a call started again after its end is reopened, not a second call."""
    s, a = _acknowledged()

    def call(state: State, cid: str) -> State:
        for event in (
            _frame(type="TOOL_CALL_START", toolCallId=cid, toolCallName="f"),
            _frame(type="TOOL_CALL_END", toolCallId=cid),
        ):
            state = step(state, FrameReceived(a, event), 0.0).state
        return state

    def sealed(state: State, cid: str) -> State:
        value = _frame(
            type="REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId=cid, encryptedValue="E"
        )
        return step(state, FrameReceived(a, value), 0.0).state

    def values(state: State) -> list[tuple[str, str | None]]:
        return [
            (c.id, c.encrypted_value)
            for m in selectors.messages(state)
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls or ()
        ]

    left = call(call(s, "c1"), "c2")  # c1's holder at 1, c2's at 2
    right = call(call(s, "c2"), "c1")  # the hint for c1 now says 2
    done = sealed(left, "c1")
    assert values(done) == [("c1", "E"), ("c2", None)] and done.warnings == ()
    assert values(sealed(right, "c1")) == [("c2", None), ("c1", "E")]
    twice = sealed(call(left, "c1"), "c1")  # c1 reopened (AG-UI 1.0): still one call
    assert values(twice) == [("c1", "E"), ("c2", None)]
    assert len(sealed(left, "c9").warnings) == 1  # in no branch: dropped, with a warning


def _acknowledged() -> tuple[State, int]:
    """A chat whose first run is acknowledged, and that run's attempt."""
    t = step(initial_state(Options(), thread_id="t"), Send("hi"), 0.0)
    (start,) = t.commands
    assert isinstance(start, StartAttempt)
    a = start.attempt
    s = step(t.state, SendStarting(a), 0.0).state
    run_id = start.run_input.run_id
    s = step(s, FrameReceived(a, _frame(type="RUN_STARTED", threadId="t", runId=run_id)), 0.0).state
    return s, a


def _frame(**event: Any) -> str:
    return json.dumps(event)
