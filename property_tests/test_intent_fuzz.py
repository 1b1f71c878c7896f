"""Any argument an application passes to an intent is taken or refused with an InterludeError.

The public methods are called with drawn arguments of every shape (strings,
numbers, NaN, nested lists and dicts, sets, bytes, objects, messages of the
wrong kind) on a chat and a completion, idle or paused. Whatever is drawn:

- the call returns, or raises a subclass of ``InterludeError`` (not a
  ``TypeError``, ``KeyError`` or ``AttributeError`` from inside the library),
  whose message is not empty;
- a refused call leaves the very same state object (R-B2: rejected intents
  change nothing);
- the resource still runs afterwards: a plain ``send`` or ``set_input`` goes out.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.adapters.fake import FakeDriver, ScriptedAgent, interrupted, reply
from interlude.adapters.fake.script import Request, finished, started
from interlude.adapters.resource import Resource
from interlude.core.errors import InterludeError
from interlude.core.options import Options
from interlude.core.wire.messages import AssistantMessage, ToolMessage, UserMessage

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.just(math.nan),
    st.text(max_size=4),
    st.binary(max_size=3),
    st.just(object()),
    st.just({1, 2}),
    st.sampled_from(
        [
            UserMessage(id="u", content="hi"),
            AssistantMessage(id="a", content="yo"),
            ToolMessage(id="t", content="r", tool_call_id="c"),
        ]
    ),
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3) | st.integers(0, 2), inner, max_size=3)
        | st.tuples(inner)
    ),
    max_leaves=6,
)

PENDING = "<the pending batch's id>"
"""Stands for the id of the batch pending when the call is made."""
entries = st.fixed_dictionaries(
    {
        "interrupt_id": st.sampled_from(["a", "b"]) | values,
        "status": st.sampled_from(["resolved", "cancelled"]) | values,
    },
    optional={"payload": values, "metadata": values, "extra": values},
)

calls = st.one_of(
    st.tuples(st.just("send"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(
        st.just("send"),
        st.tuples(st.text(max_size=3)),
        st.fixed_dictionaries({"message_id": values}),
    ),
    st.tuples(st.just("set_messages"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(st.just("set_state"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(st.just("set_thread_id"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(st.just("set_input"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(st.just("resume"), st.tuples(values, values), st.fixed_dictionaries({})),
    st.tuples(
        st.just("resume"),
        st.tuples(st.just(PENDING), st.lists(values | entries, max_size=2) | values),
        st.fixed_dictionaries({}),
    ),
    st.tuples(st.just("configure"), st.tuples(values), st.fixed_dictionaries({})),
    st.tuples(st.sampled_from(["stop", "reload"]), st.just(()), st.fixed_dictionaries({})),
)


def paused_reply(req: Request) -> Any:
    return reply(started(req), interrupted(req, {"id": "a", "reason": "input_required"}))


@settings(max_examples=500)
@given(
    kind=st.sampled_from(["chat", "completion"]),
    paused=st.booleans(),
    drawn=st.lists(calls, min_size=1, max_size=4),
)
def test_any_intent_argument_is_taken_or_refused_with_an_interlude_error(
    kind: str, paused: bool, drawn: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
) -> None:
    plain = ScriptedAgent(lambda req: reply(started(req), finished(req)))
    driver = FakeDriver(plain.then(paused_reply) if paused else plain)
    resource: Resource = driver.completion() if kind == "completion" else driver.chat()
    if paused:  # start from a pending batch, so resume has something to answer
        if kind == "completion":
            resource.set_input("Go")
        else:
            resource.send("Go")
        driver.run_until_idle()
        assert resource.pending_interrupts is not None

    for name, args, kwargs in drawn:
        state = resource.core_state
        if args[:1] == (PENDING,):
            batch = resource.pending_interrupts
            args = (batch.id if batch is not None else "none", *args[1:])
        try:
            getattr(resource, name)(*args, **kwargs)
        except InterludeError as exc:
            assert str(exc), f"{name} raised {type(exc).__name__} with no message"
            assert resource.core_state is state, f"a refused {name} changed the state"
        driver.run_until_idle(max_steps=200)

    # Still usable: recover if the calls left it needing a new thread or paused, then run.
    if resource.needs_new_thread:
        resource.set_thread_id("fresh")
    if resource.pending_interrupts is not None:
        batch = resource.pending_interrupts
        answers = [{"interrupt_id": it.id, "status": "cancelled"} for it in batch.interrupts]
        resource.resume(batch.id, answers)
        driver.run_until_idle()
    sent = len(driver.requests)
    if kind == "completion":
        resource.set_input("again")
    else:
        resource.send("again")
    driver.run_until_idle()
    assert len(driver.requests) == sent + 1


def test_configure_takes_options() -> None:
    """The one well-formed call of the drawn kinds that the fuzz above rarely makes."""
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    chat.configure(Options())
    chat.send("Go")
    driver.run_until_idle()
    assert chat.error is None and len(driver.requests) == 1
