"""Edges of the drivers and selectors that the rule files do not reach."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

import interlude.adapters.fake.driver as fake_driver_module
from interlude.adapters.agent_scenarios import rfc3339
from interlude.adapters.fake import (
    FakeClock,
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    drop,
    finished,
    held,
    interrupted,
    refuse,
    reply,
    started,
    text,
    tool_call,
)
from interlude.adapters.resource import Driver, Resource
from interlude.adapters.tools import ToolSignal
from interlude.adapters.trio import TrioDriver
from interlude.core.errors import ObserverError, TransportError, UsageError
from interlude.core.options import Options, RetryPolicy
from interlude.core.reducer import MAX_WARNINGS
from interlude.core.wire import (
    RunFinished,
    RunStarted,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
)


def test_R_F1_R_I2_an_observer_that_always_raises_is_reported_once_per_change() -> None:
    """An observer raising on every notification must not feed itself forever."""
    driver = FakeDriver(ScriptedAgent(lambda r: reply(started(r), finished(r))))
    chat = driver.chat()
    calls: list[int] = []

    def broken(resource: Any) -> None:
        calls.append(1)
        raise RuntimeError("bad observer")

    chat.subscribe(broken)
    chat.send("hi")  # returns: the failure is recorded, not looped on
    line = broken.__code__.co_firstlineno + 2  # where it raised
    assert chat.error == ObserverError(
        "an observer raised: RuntimeError: bad observer (in test_R_F1_R_I2_an_observer_that_"
        f"always_raises_is_reported_once_per_change.<locals>.broken, test_driver_edges.py:{line})"
    )
    assert not chat.is_loading  # R-F1: the run it interrupted is not retried
    assert len(calls) == 2  # the change, then the notification of its own failure
    driver.run_until_idle()
    assert driver.requests == []  # the aborted attempt never went out


def test_R_I2_an_observer_unsubscribed_inside_a_notification_is_not_called_again() -> None:
    """R-I2: an observer may call any method from inside a notification, unsubscribe
    included; once another observer's call to unsubscribe() returns, the unsubscribed
    one is not called, in that round either. (A torn-down widget's observer that
    raised would otherwise fail the run as an ObserverError.)"""
    driver = FakeDriver(
        ScriptedAgent(lambda r: reply(started(r), *text("a1", "Hello.", chunks=3), finished(r)))
    )
    chat = driver.chat()
    torn_down = False
    late_calls: list[int] = []

    def parent(resource: Any) -> None:
        nonlocal torn_down
        if resource.is_loading and not torn_down:
            torn_down = True
            unsubscribe_child()

    def child(resource: Any) -> None:
        if torn_down:
            late_calls.append(1)
            raise RuntimeError("widget destroyed")

    chat.subscribe(parent)
    unsubscribe_child = chat.subscribe(child)
    chat.send("hi")
    driver.run_until_idle()
    assert late_calls == []
    assert chat.error is None and chat.messages[-1].content == "Hello."


def test_R_I2_a_round_reaches_every_other_observer_after_one_changes_the_subscriptions() -> None:
    """R-I2: an observer that unsubscribes another, and subscribes a new one, inside a
    notification leaves the rest of that round alone: the observers after it are still
    called; the new one is called from the next change on."""
    chat = FakeDriver(ScriptedAgent()).chat()
    seen: dict[str, list[int]] = {name: [] for name in "abcd"}

    def record(name: str) -> Any:
        return lambda resource: seen[name].append(resource.state["n"])

    def rewire(resource: Any) -> None:
        seen["a"].append(resource.state["n"])
        if resource.state["n"] == 1:
            end_b()
            chat.subscribe(record("d"))

    chat.subscribe(rewire)
    end_b = chat.subscribe(record("b"))
    chat.subscribe(record("c"))
    chat.set_state({"n": 1})
    chat.set_state({"n": 2})
    assert seen == {"a": [1, 2], "b": [], "c": [1, 2], "d": [2]}
    assert chat.error is None


def test_run_until_idle_returns_the_steps_it_took() -> None:
    """reference.md: it returns the steps taken, as many as step() would have taken."""

    def script(req: Request) -> Any:
        return reply(started(req), *text("a1", "Hello there.", chunks=3), finished(req))

    stepped, run = FakeDriver(ScriptedAgent(script)), FakeDriver(ScriptedAgent(script))
    stepped.chat().send("hi")
    run.chat().send("hi")
    steps = 0
    while stepped.step():
        steps += 1
    assert steps > 0
    assert run.run_until_idle() == steps
    assert run.run_until_idle() == 0


def test_step_says_nothing_is_ready_once_stop_withdrew_the_queued_work() -> None:
    """A request, a local tool or the rest of a stream that stop() withdrew is not a step:
    step() returns False, and nothing is sent, run or delivered."""
    ran: list[Any] = []

    def script(req: Request) -> Any:
        return reply(started(req), tool_call("c1", "t", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(script))
    chat = driver.chat(local_tools={"t": ran.append})
    chat.send("hi")
    chat.stop()
    assert driver.step() is False
    assert driver.requests == []
    chat.send("again")
    while chat.core_state.tools is None:  # up to the tool call, queued but not yet run
        assert driver.step()
    chat.stop()
    assert driver.run_until_idle() == 1  # the stream's end; the withdrawn tool is no step
    assert ran == []
    chat.send("once more")
    assert driver.step() and driver.step()  # the request and its RUN_STARTED
    chat.stop()
    assert driver.step() is False  # the rest of the stream stopped with it
    assert ran == [] and len(driver.requests) == 2


def test_each_unsubscribe_ends_its_own_subscription_once() -> None:
    """An observer subscribed twice is called twice; each unsubscribe() ends one of the
    two, and calling it again ends nothing more (the other stays)."""
    driver = FakeDriver(ScriptedAgent(lambda r: reply(started(r), finished(r))))
    chat = driver.chat()
    calls: list[int] = []

    def observer(resource: Any) -> None:
        calls.append(1)

    first = chat.subscribe(observer)
    chat.subscribe(observer)
    chat.set_state({"n": 1})
    assert len(calls) == 2
    first()
    first()
    chat.set_state({"n": 2})
    assert len(calls) == 3


class _Counted:
    """An observer that counts how often it is compared with another."""

    compared = 0

    def __call__(self, resource: Any) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return self is other

    __hash__ = object.__hash__


def test_R_I2_subscriptions_are_found_without_a_search_of_the_others() -> None:
    """(Un)subscribing, and a round in which an observer unsubscribes another, cost the
    same with thousands of observers as with one: nothing compares an observer with the
    others (a search of them all for each would be quadratic in their number)."""
    chat = FakeDriver(ScriptedAgent()).chat()
    _Counted.compared = 0
    ends = [chat.subscribe(_Counted()) for _ in range(200)]
    chat.subscribe(lambda r: ends and ends.pop()())  # a round unsubscribes one mid-round
    chat.subscribe(_Counted())
    chat.set_state({"n": 1})
    for end in ends:
        end()
    chat.set_state({"n": 2})
    assert _Counted.compared == 0 and chat.error is None


def test_R_D5_a_declared_local_tool_without_a_function_becomes_a_tool_message() -> None:
    def answer(req: Request) -> Any:
        if len(driver.requests) == 1:
            return reply(started(req), tool_call("c1", "ghost", {}), finished(req))
        return reply(started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(Options(local_tools=frozenset({"ghost"})))
    chat.send("go")
    driver.run_until_idle()
    (result,) = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert result["toolCallId"] == "c1"
    assert "no function was registered for local tool 'ghost'" in result["content"]
    assert chat.error is None


def test_R_D5_the_fake_driver_runs_every_tool_shape_the_trio_driver_takes() -> None:
    """fn(arguments), fn(arguments, signal), and async tools: one tool, both drivers."""

    def plain(arguments: Any) -> str:
        return f"plain {arguments['n']}"

    def with_signal(arguments: Any, signal: ToolSignal) -> str:
        return f"signal {arguments['n']} cancelled={signal.cancelled}"

    async def awaited(arguments: Any) -> dict[str, Any]:
        await trio.sleep(0)
        return {"async": arguments["n"]}

    async def awaited_with_signal(arguments: Any, signal: ToolSignal) -> str:
        await trio.sleep(0)
        return f"async signal {arguments['n']}"

    tools = {"plain": plain, "sig": with_signal, "aw": awaited, "awsig": awaited_with_signal}

    results, chat = _each_called_once(tools)
    assert results == [
        "plain 0",
        "signal 1 cancelled=False",
        '{"async":2}',
        "async signal 3",
    ]
    assert chat.error is None


def _each_called_once(tools: dict[str, Any]) -> tuple[list[str], Resource]:
    """One call of each of ``tools`` (arguments ``{"n": its place}``) under the fake
    driver: the contents of the tool messages the follow-up run carried, and the chat."""

    def answer(req: Request) -> Any:
        if len(driver.requests) == 1:
            calls = [tool_call(f"c{n}", name, {"n": n}) for n, name in enumerate(tools)]
            return reply(started(req), *calls, finished(req))
        return reply(started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(local_tools=tools)
    chat.send("go")
    driver.run_until_idle()
    messages = driver.requests[1].json["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"], chat


def test_a_tool_taking_star_args_gets_the_signal_and_a_builtin_only_the_arguments() -> None:
    """A tool that takes any number of positional arguments (a forwarding wrapper) is
    passed the signal too; a builtin with no signature to read gets the arguments alone."""

    def forwarding(*args: Any) -> str:
        return f"{len(args)} {type(args[-1]).__name__}"

    tools = {"star": forwarding, "builtin": dict}

    results, chat = _each_called_once(tools)
    assert results == ["2 ToolSignal", '{"n":1}']
    assert chat.error is None


def test_R_J6_R_D5_pending_ids_run_in_call_order_once_each() -> None:
    """pendingToolCallIds in another order, with a repeat: results keep the stream's order."""
    ran: list[str] = []

    def answer(req: Request) -> Any:
        if len(driver.requests) == 1:
            outcome = {"type": "success", "pendingToolCallIds": ["c2", "c1", "c2"]}
            return reply(
                started(req),
                tool_call("c1", "t", {"n": 1}),
                tool_call("c2", "t", {"n": 2}),
                finished(req, outcome),
            )
        return reply(started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(local_tools={"t": lambda args: ran.append(args["n"]) or args["n"]})
    chat.send("go")
    driver.run_until_idle()
    results = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in results] == ["c1", "c2"]
    assert [json.loads(m["content"]) for m in results] == [1, 2]
    assert sorted(ran) == [1, 2]


def test_R_F1_retry_progress_is_visible() -> None:
    """R-F1: while a run retries, an application can show why and until when
    ("reconnecting in 2 s: the connection dropped"), though ``error`` stays None."""
    driver = FakeDriver(ScriptedAgent().then(drop(), lambda r: reply(started(r), finished(r))))
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0, base_delay=2.0)))
    chat.send("go")
    assert (chat.is_retrying, chat.attempts) == (False, 1)
    assert (chat.retry_cause, chat.retry_due) == (None, None)
    driver.step()  # the first attempt goes out
    driver.step()  # and drops
    assert (chat.is_retrying, chat.attempts, chat.is_loading) == (True, 1, True)
    assert chat.error is None and isinstance(chat.retry_cause, TransportError)
    assert chat.retry_cause == TransportError("the connection dropped", retryable=True)
    assert chat.retry_due == driver.now() + 2.0
    cause = chat.retry_cause
    driver.advance(2.0)
    assert (chat.is_retrying, chat.attempts) == (False, 2)
    assert (chat.retry_cause, chat.retry_due) == (cause, None)  # the attempt after it
    driver.run_until_idle()
    assert (chat.is_retrying, chat.attempts, chat.error) == (False, 0, None)
    assert (chat.retry_cause, chat.retry_due) == (None, None)


def test_R_F1_an_endpoints_retry_after_is_a_lower_bound_on_the_back_off() -> None:
    """R-F1: a refusal carrying Retry-After (7 s) is retried no sooner than that, even
    when the policy's back-off (1 s) is shorter."""
    driver = FakeDriver(
        ScriptedAgent().then(refuse(429, retry_after=7), lambda r: reply(started(r), finished(r)))
    )
    chat = driver.chat(Options(retry=RetryPolicy(jitter=0, base_delay=1.0)))
    chat.send("go")
    driver.run_until_idle(follow_retries=False)
    assert chat.is_retrying and len(driver.requests) == 1
    driver.advance(6.9)
    assert chat.is_retrying and len(driver.requests) == 1
    driver.advance(0.1)
    driver.run_until_idle()
    assert len(driver.requests) == 2 and chat.error is None and not chat.is_loading


def test_R_F1_a_retry_after_beyond_the_policy_ends_the_run_with_the_error() -> None:
    """R-F1: an endpoint asking for more than max_retry_after is not waited for: the run
    ends at once with its error, which says how long the endpoint asked for."""
    driver = FakeDriver(ScriptedAgent().then(refuse(503, retry_after=3600)))
    chat = driver.chat(Options(retry=RetryPolicy(max_retry_after=60)))
    chat.send("go")
    driver.run_until_idle()
    assert len(driver.requests) == 1 and not chat.is_loading and not chat.is_retrying
    assert isinstance(chat.error, TransportError)
    assert (chat.error.status, chat.error.retry_after) == (503, 3600)
    assert chat.error.message.endswith(
        "it asked to wait 3600 s before retrying (not retried: that is more than "
        "RetryPolicy.max_retry_after (60 s))"
    )


def test_R_J5_warnings_keep_only_the_newest() -> None:
    """reference.md (``warnings``): the newest 20 notes are kept, no more."""
    assert MAX_WARNINGS == 20  # the documented number

    def answer(req: Request) -> Any:
        return reply(started(req), text("m", "ok"), finished(req, {"type": "someday"}))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    for n in range(MAX_WARNINGS + 5):
        chat.send(f"m{n}")
        driver.run_until_idle()
    assert len(chat.warnings) == MAX_WARNINGS
    assert driver.requests[-1].run_id in chat.warnings[-1]


@pytest.mark.parametrize("loop", ["trio", "asyncio"])
def test_an_async_tool_runs_on_the_loop_the_fake_driver_is_told(loop: str) -> None:
    """Tools written for an asyncio app await asyncio's primitives: under a trio loop
    they failed as a tool message about trio's yield protocol, and error stayed None."""

    async def lookup(args: Any) -> str:
        if loop == "asyncio":
            await asyncio.sleep(0)
        else:
            await trio.sleep(0)
        return "found"

    def answer(req: Request) -> Any:
        if any(m["role"] == "tool" for m in req.json["messages"]):
            return reply(started(req), finished(req))
        return reply(started(req), *tool_call("c1", "lookup", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer), tool_loop=loop)  # type: ignore[arg-type]
    chat = driver.chat(local_tools={"lookup": lookup})
    chat.send("go")
    driver.run_until_idle()
    assert [m.content for m in chat.messages if m.role == "tool"] == ["found"]


def test_the_fake_drivers_tool_loop_is_checked() -> None:
    with pytest.raises(UsageError, match="tool_loop is 'trio' or 'asyncio', not 'curio'"):
        FakeDriver(tool_loop="curio")  # type: ignore[arg-type]


def test_the_local_tools_given_are_copied_when_the_resource_is_made() -> None:
    """A tool added to the caller's dict later was used, though never declared."""
    tools: dict[str, Any] = {"known": lambda args: "ok"}

    def answer(req: Request) -> Any:
        if any(m["role"] == "tool" for m in req.json["messages"]):
            return reply(started(req), finished(req))
        return reply(started(req), *tool_call("c1", "later", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(local_tools=tools)
    tools["later"] = lambda args: "should not run"
    chat.send("go")
    driver.run_until_idle()
    assert [t.name for t in chat.options.tools] == ["known"]
    # Not a local tool of this resource: the call is the endpoint's, nothing runs here.
    assert [m for m in chat.messages if m.role == "tool"] == []
    assert len(driver.requests) == 1 and chat.error is None


def test_a_tool_whose_wrapped_chain_is_a_cycle_is_still_taken() -> None:
    def tool(args: Any) -> str:
        return "ok"

    tool.__wrapped__ = tool  # type: ignore[attr-defined]  # inspect.unwrap raises ValueError
    driver = FakeDriver(ScriptedAgent())
    driver.chat(local_tools={"t": tool})


def test_a_request_reads_the_tool_results_it_carries() -> None:
    """What a test author asserts after a tool round: each call's result by its id,
    a failed tool's included, without digging through the messages."""

    def broken(args: Any) -> str:
        raise KeyError("toaster")

    def answer(req: Request) -> Any:
        if req.tool_results:
            return reply(started(req), finished(req))
        calls = [*tool_call("c1", "price", {"item": "kettle"}), *tool_call("c2", "broken", {})]
        return reply(started(req), *calls, finished(req))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat(local_tools={"price": lambda args: {"usd": 30}, "broken": broken})
    chat.send("go")
    driver.run_until_idle()
    first, follow_up = driver.requests
    assert first.tool_results == {}
    assert follow_up.tool_results == {"c1": '{"usd":30}', "c2": "Error: KeyError: 'toaster'"}


def test_cancelled_timers_leave_the_fake_drivers_heap() -> None:
    """Each answered batch with an expiry cancels its timer; the heap must not keep them
    all until their due time (a cost audit: every idle check read the whole heap, so
    run_until_idle slowed with the number of batches a long test had answered), nor the
    note of which were cancelled grow with them."""
    far = "2099-01-01T00:00:00Z"

    def answer(req: Any) -> Any:
        if req.resume is not None:
            return reply(started(req), finished(req))
        ask = {"id": "q", "reason": "input_required", "expiresAt": far}
        return reply(started(req), interrupted(req, ask))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    for n in range(300):
        chat.send(f"buy {n}")
        driver.run_until_idle()
        batch = chat.pending_interrupts
        assert batch is not None and driver.pending_timers() == [(batch.earliest_expiry, "expiry")]
        chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": n}])
        driver.run_until_idle()
        assert driver.pending_timers() == []
    assert len(driver._timers) <= 64 and len(driver._cancelled_timers) <= 64
    assert len(driver.requests) == 600 and chat.error is None


def _books(driver: FakeDriver) -> int:
    """Entries in the driver's bookkeeping (its agent's record of requests aside)."""
    return sum(len(v) for v in vars(driver).values() if isinstance(v, dict | set | list | deque))


def test_R_H1_a_long_lived_fake_resource_leaves_no_notes_of_what_it_stopped() -> None:
    """One chat kept for hours stops runs, changes threads and cancels local tools many
    times. The fake driver noted every aborted attempt and every cancelled tool forever
    (4 entries a round here), though only a start or a tool still queued needs one."""

    def answer(req: Request) -> Any:
        if req.json["messages"][-1]["content"] == "calls a tool":
            return reply(started(req), *tool_call(req.run_id, "t", {}), finished(req))
        return held(started(req), *text("m", "partial", chunks=3), finished(req))

    agent = ScriptedAgent(answer)
    driver = FakeDriver(agent)
    chat = driver.chat(local_tools={"t": lambda args: 1})

    def rounds(n: int) -> None:
        for _ in range(n):
            chat.send("never sent")
            chat.stop()  # AbortAttempt before the request went out
            chat.send("stopped midway")
            driver.run_until_idle()
            driver.release(2)
            driver.run_until_idle()
            chat.stop()  # AbortAttempt of a live stream
            chat.send("calls a tool")
            while chat.core_state.tools is None and driver.step():
                pass
            assert chat.core_state.tools is not None
            chat.set_thread_id(None)  # R-H1: the tool is cancelled before it runs
            driver.run_until_idle()
            assert not chat.is_loading and chat.error is None
            chat.set_messages([])
            agent.requests.clear()

    rounds(10)
    books = _books(driver)
    rounds(100)
    assert _books(driver) == books


def test_R_H1_an_async_tool_that_stops_its_own_run_leaves_no_note_behind() -> None:
    """An async local tool may call its resource's methods; one that calls ``stop()``
    cancels itself while it runs. Its tool is no longer queued, so nothing is noted: a
    chat doing this for hours keeps the driver's books the same size."""

    def answer(req: Request) -> Any:
        return reply(started(req), *tool_call(req.run_id, "halt", {}), finished(req))

    async def halt(arguments: Any) -> str:
        chat.stop()  # CancelTool of the tool now running
        return "stopped"

    agent = ScriptedAgent(answer)
    driver = FakeDriver(agent)
    chat = driver.chat(local_tools={"halt": halt})

    def rounds(n: int) -> None:
        for _ in range(n):
            chat.send("go")
            driver.run_until_idle()
            assert not chat.is_loading and chat.error is None
            chat.set_messages([])
            agent.requests.clear()

    rounds(3)
    books = _books(driver)
    rounds(20)
    assert _books(driver) == books


def test_a_long_lived_fake_driver_forgets_the_resources_an_application_dropped() -> None:
    """A test helper or an SDK that makes a resource per request on one driver: each
    one's entry in the driver's books outlived it (the name it is known by)."""
    driver = FakeDriver(ScriptedAgent(lambda r: reply(started(r), finished(r))))
    books = _books(driver)
    chats = [driver.chat() for _ in range(50)]  # alive together: 50 addresses
    for chat in chats:
        chat.send("hi")
    driver.run_until_idle()
    assert not any(chat.is_loading for chat in chats)
    gone = [weakref.ref(chat) for chat in chats]
    del chats, chat
    gc.collect()
    assert [r for r in gone if r() is not None] == []
    assert _books(driver) == books


def _at_a_freed_address(
    driver: FakeDriver, abandon: Any, monkeypatch: pytest.MonkeyPatch
) -> Resource:
    """A resource of ``driver`` at the address of one that ``abandon`` left with an
    aborted attempt or a cancelled timer and then dropped. CPython gives a freed
    object's address to a new one sooner or later; here the driver sees one address
    for every resource, so the test does not wait on chance."""
    monkeypatch.setattr(fake_driver_module, "id", lambda obj: 1, raising=False)
    old = driver.chat(Options(retry=RetryPolicy(jitter=0)))
    abandon(old)
    del old
    gc.collect()
    return driver.chat(Options(retry=RetryPolicy(jitter=0)))


def test_the_fake_driver_never_hands_a_freed_resources_aborted_attempts_to_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fake driver kept aborted attempts by ``(id(resource), attempt)``: a new
    resource at a freed one's address found its own first attempt (the same number,
    counters being per resource) already aborted, never sent it, and loaded forever."""
    driver = FakeDriver(ScriptedAgent(lambda r: reply(started(r), finished(r))))

    def stopped_before_its_send(chat: Resource) -> None:
        chat.send("hi")
        chat.stop()  # AbortAttempt before the request went out
        driver.run_until_idle()

    chat = _at_a_freed_address(driver, stopped_before_its_send, monkeypatch)
    sent = len(driver.requests)
    chat.send("hi")
    driver.run_until_idle()
    assert len(driver.requests) == sent + 1
    assert not chat.is_loading and chat.error is None


def test_the_fake_driver_never_hands_a_freed_resources_cancelled_timers_to_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same for timers: a retry timer of the new resource, numbered as the freed
    one's cancelled back-off was, must still fire."""
    agent = ScriptedAgent(lambda r: reply(started(r), finished(r)))
    driver = FakeDriver(agent)

    def stopped_in_its_back_off(chat: Resource) -> None:
        agent.then(refuse(503))
        chat.send("hi")
        driver.run_until_idle(follow_retries=False)
        assert chat.is_retrying
        chat.stop()  # CancelTimer for the retry
        driver.run_until_idle()

    chat = _at_a_freed_address(driver, stopped_in_its_back_off, monkeypatch)
    sent = len(driver.requests)
    agent.then(refuse(503))
    chat.send("hi")
    driver.run_until_idle()
    assert len(driver.requests) == sent + 2  # refused, then retried
    assert not chat.is_loading and chat.error is None


async def _awaits_a_cancelled_task(args: Any) -> str:
    task = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    return await task  # type: ignore[no-any-return]


def _exits(args: Any) -> str:
    raise SystemExit(3)


@pytest.mark.parametrize(
    ("tool", "says"),
    [(_awaits_a_cancelled_task, "CancelledError"), (_exits, "SystemExit: 3")],
    ids=["own-cancel", "sync-exit"],
)
def test_the_fake_driver_reads_a_tools_base_exception_as_the_trio_driver_does(
    tool: Any, says: str
) -> None:
    """R-D5, and the fake driver's promise to run tools as the TrioDriver does: a
    CancelledError the tool raised itself, or a sync tool's SystemExit, is the tool's
    failure (it escaped step() before)."""

    def answer(req: Any) -> Any:
        if len(driver.requests) == 1:
            return reply(started(req), *tool_call("c1", "t", {}), finished(req))
        return reply(started(req), *text("m2", "Done."), finished(req))

    driver = FakeDriver(ScriptedAgent(answer), tool_loop="asyncio")
    chat = driver.chat(local_tools={"t": tool})
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None and chat.messages[-1].content == "Done."
    (result,) = driver.requests[1].tool_results.values()
    assert result.startswith(f"Error: {says}")


async def _exits_async(args: Any) -> str:
    raise SystemExit(3)


def test_an_async_tools_system_exit_leaves_the_fake_driver_as_it_ends_the_trio_driver() -> None:
    """An async tool runs on the driver's own loop: its SystemExit is the program's, not
    the tool's failure, so it leaves step() (under the TrioDriver it ends the block), where
    a sync tool's is written as the tool's result (the case above)."""

    def answer(req: Any) -> Any:
        return reply(started(req), *tool_call("c1", "t", {}), finished(req))

    driver = FakeDriver(ScriptedAgent(answer), tool_loop="asyncio")
    chat = driver.chat(local_tools={"t": _exits_async})
    chat.send("go")
    with pytest.raises(SystemExit) as caught:
        driver.run_until_idle()
    assert caught.value.code == 3
    assert len(driver.requests) == 1  # no tool message was sent as its result


def test_live_timers_still_fire_in_order_after_the_heap_is_cleaned() -> None:
    """The cleaning of cancelled timers keeps the heap a heap: cancelled timers due
    sooner sit above live ones, and once they are taken out, each live timer still
    fires at its own time, the soonest first."""

    def answer(req: Any) -> Any:
        if req.resume is not None:
            return reply(started(req), finished(req))
        due = req.json["messages"][-1]["content"]
        ask = {"id": "q", "reason": "input_required", "expiresAt": due}
        return reply(started(req), interrupted(req, ask))

    driver = FakeDriver(ScriptedAgent(answer))
    start = driver.clock.now()
    churn = driver.chat()

    def cancelled_timers(count: int) -> None:  # each due in 5 minutes, then cancelled
        for _ in range(count):
            churn.send(rfc3339(start + 300))
            driver.run_until_idle()
            batch = churn.pending_interrupts
            assert batch is not None
            churn.resume(batch.id, [{"interrupt_id": "q", "status": "cancelled"}])
            driver.run_until_idle()

    cancelled_timers(40)
    waiting = []
    for minutes in (30, 10, 20):  # three live expiry timers, out of order
        chat = driver.chat()
        chat.send(rfc3339(start + minutes * 60))
        driver.run_until_idle()
        waiting.append((minutes, chat))
    cancelled_timers(25)  # the 65th cancellation cleans the heap, last of all
    assert len(driver.pending_timers()) == 3
    told: list[int] = []
    for minutes, chat in waiting:
        chat.subscribe(lambda r, minutes=minutes: told.append(minutes))
    for left, minutes in enumerate((10, 20, 30), 1):
        driver.advance_to(start + minutes * 60)
        assert told == [10, 20, 30][:left]  # its timer fired at its own time (R-G3)
        assert len(driver.pending_timers()) == 3 - left


# -- a script's answers are checked where they come in -----------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        lambda req: [started(req), finished(req)],  # the events, not wrapped in reply(...)
        lambda req: None,  # a handler that forgot to return
    ],
)
def test_a_handler_that_returns_no_reply_is_named_with_its_request(answer: Any) -> None:
    agent = ScriptedAgent(answer).then(lambda req: reply(started(req), finished(req)))
    driver = FakeDriver(agent)
    chat = driver.chat()
    chat.send("first")
    driver.run_until_idle()  # the queued answer: a Reply
    chat.send("second")
    with pytest.raises(TypeError, match=r"request 2 .*not a Reply.*wrap the events in reply\("):
        driver.run_until_idle()


def test_a_queued_answer_that_returns_no_reply_is_named_with_its_request() -> None:
    driver = FakeDriver(ScriptedAgent().then(lambda req: [started(req), finished(req)]))
    driver.chat().send("hi")
    with pytest.raises(TypeError, match=r"request 1 .*a list, not a Reply"):
        driver.run_until_idle()


def test_then_takes_replies_and_functions_only() -> None:
    agent = ScriptedAgent()
    with pytest.raises(TypeError, match=r"then\(\) item 2 is a list.*wrap the events in reply\("):
        agent.then(refuse(503), [{"type": "RUN_STARTED"}])
    with pytest.raises(TypeError, match=r"then\(\) item 1 is a dict"):
        agent.then({"type": "RUN_STARTED"})


def test_a_reply_takes_typed_events_as_well_as_wire_json() -> None:
    """The script module's promise: a reply's events may be typed events from
    ``interlude.core.wire``; each goes over the wire as its AG-UI JSON."""

    def script(req: Request) -> Reply:
        return reply(
            RunStarted(thread_id=req.thread_id, run_id=req.run_id),
            TextMessageStart(message_id="a1", role="assistant"),
            TextMessageContent(message_id="a1", delta="typed"),
            TextMessageEnd(message_id="a1"),
            RunFinished(thread_id=req.thread_id, run_id=req.run_id),
        )

    driver = FakeDriver(ScriptedAgent(script))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert chat.error is None and not chat.is_loading
    assert chat.messages[-1].content == "typed"


def test_refuse_is_an_http_503_unless_told_otherwise() -> None:
    """reference.md: ``refuse(status=503, ...)``: a retryable refusal naming its status."""
    error = refuse().fail_before_send
    assert isinstance(error, TransportError) and error.retryable and error.status == 503


def test_drop_fails_the_transport_with_the_error_it_is_given() -> None:
    """``drop(*events, error=...)``: after the events the run fails with that error, not
    with the default dropped connection."""
    gone = TransportError("the gateway went away", retryable=False)
    driver = FakeDriver(ScriptedAgent(lambda req: drop(started(req), error=gone)))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    assert chat.error == gone and len(driver.requests) == 1


@pytest.mark.parametrize(("content", "chunks"), [("abc", 3), ("abcd", 2), ("ab", 5)])
def test_text_streams_its_content_in_as_many_deltas_as_asked_at_most(
    content: str, chunks: int
) -> None:
    """``text(id, content, chunks=n)``: n deltas of about equal size (fewer only when the
    content is shorter than n), which together are the content."""
    deltas = [e["delta"] for e in text("a1", content, chunks=chunks) if "delta" in e]
    assert "".join(deltas) == content
    assert len(deltas) == min(chunks, len(content))


def test_tool_call_writes_its_parent_only_when_given() -> None:
    """``tool_call(...)`` writes the wire form an agent would: ``parentMessageId`` is
    absent unless given (AG-UI: optional), never a null, and the arguments are JSON."""
    start, args, end = tool_call("c1", "t", {"n": 1})
    assert start == {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "t"}
    assert args == {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"n": 1}'}
    assert end == {"type": "TOOL_CALL_END", "toolCallId": "c1"}
    assert tool_call("c1", "t", "{}", parent_message_id="a1")[0]["parentMessageId"] == "a1"


# -- timers already due fire without moving the clock ------------------------------------


def _asks(expires_at: str) -> Any:
    ask = {"id": "q", "reason": "input_required", "expiresAt": expires_at}
    return lambda req: reply(started(req), interrupted(req, ask))


def test_an_expiry_already_past_fires_in_run_until_idle_without_moving_the_clock() -> None:
    """An interrupt that expired before the fake clock's epoch: its timer is due at once,
    so running until idle fires it (observers are told, R-G3), and the clock stays."""
    driver = FakeDriver(ScriptedAgent().then(_asks("2026-12-31T23:59:00Z")))
    start = driver.clock.now()
    chat = driver.chat()
    timers: list[int | None] = []
    chat.subscribe(lambda r: timers.append(r.core_state.expiry_timer))
    chat.send("hi")
    driver.run_until_idle()
    assert driver.pending_timers() == []  # it fired: no advance(0) needed
    assert timers[-1] is None and any(t is not None for t in timers)  # observers were told
    assert chat.is_expired and chat.pending_interrupts is not None
    assert driver.clock.now() == start


def test_step_fires_a_due_timer_once_nothing_else_is_queued() -> None:
    driver = FakeDriver(ScriptedAgent().then(_asks("2026-12-31T23:59:00Z")))
    chat = driver.chat()
    chat.send("hi")
    while driver.pending_timers() == []:
        assert driver.step()  # the request, RUN_STARTED, then RUN_FINISHED starts the timer
    assert driver.step()  # the stream's end: queued actions come first
    assert driver.pending_timers() != []
    assert driver.step()  # then the timer due at or before now()
    assert driver.pending_timers() == [] and not driver.step()


def test_due_timers_fire_without_follow_retries_and_future_ones_wait() -> None:
    driver = FakeDriver(ScriptedAgent(_asks("2026-12-31T23:59:00Z")))
    past, future = driver.chat(), driver.chat()
    past.send("hi")
    driver.run_until_idle(follow_retries=False)
    assert driver.pending_timers() == []
    driver.agent = ScriptedAgent(_asks("2027-01-01T00:01:00Z"))
    future.send("hi")
    driver.run_until_idle()  # an expiry in the future never moves the clock by itself
    assert len(driver.pending_timers()) == 1 and not future.is_expired


def test_a_timer_that_stop_cancelled_is_never_a_step_once_its_time_has_come() -> None:
    """stop() during a retry back-off cancels the retry's timer: once the clock is past
    its due time, step() still says nothing is ready, run_until_idle() takes no step,
    the clock stays where the test set it and no retry goes out."""
    driver = FakeDriver(ScriptedAgent().then(refuse(503)))
    chat = driver.chat(Options(retry=RetryPolicy(max_attempts=3, jitter=0)))
    chat.send("hi")
    driver.run_until_idle(follow_retries=False)
    assert chat.is_retrying and len(driver.pending_timers()) == 1
    chat.stop()
    assert driver.pending_timers() == []
    later = driver.clock.now() + 60
    driver.clock.set(later)
    assert driver.step() is False
    assert driver.run_until_idle() == 0 and driver.clock.now() == later
    assert len(driver.requests) == 1


def test_run_until_idle_stops_the_clock_at_an_expiry_that_cancels_the_retry() -> None:
    """The claim's interrupt expires during the retry back-off: the expiry releases the
    claim and cancels the retry, so nothing happens at the retry's due time and the
    clock must not be moved there."""
    soon = "2027-01-01T00:00:00.300Z"  # FAKE_EPOCH + 0.3 s; the back-off is 0.5 s
    driver = FakeDriver(ScriptedAgent().then(_asks(soon), refuse(503)))
    start = driver.clock.now()
    chat = driver.chat(Options(retry=RetryPolicy(max_attempts=3, jitter=0)))
    chat.send("hi")
    driver.run_until_idle(follow_retries=False)
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": 1}])
    driver.run_until_idle()
    assert len(driver.requests) == 2  # the refused resume; its retry never went out
    assert chat.error is not None and "expired before the resume could be retried" in str(
        chat.error
    )
    assert driver.pending_timers() == []
    assert driver.clock.now() - start == pytest.approx(0.3)  # not 0.5


# -- the builders write wire JSON: a snake_case key is a mistake, not a translation ------


@pytest.mark.parametrize(
    ("snake", "camel"),
    [
        ("expires_at", "expiresAt"),
        ("response_schema", "responseSchema"),
        ("tool_call_id", "toolCallId"),
        ("subagent_run_id", "subagentRunId"),
    ],
)
def test_interrupted_rejects_the_snake_case_form_of_a_wire_key(snake: str, camel: str) -> None:
    ask = {"id": "p", "reason": "confirm", snake: "x"}
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), interrupted(req, ask))))
    driver.chat().send("hi")
    with pytest.raises(UsageError, match=rf"interrupt 'p'.*'{snake}'.*write '{camel}'"):
        driver.run_until_idle()


def test_finished_rejects_snake_case_keys_in_its_outcome_and_its_interrupts() -> None:
    def outcome(value: Any) -> Any:
        return lambda req: reply(started(req), finished(req, value))

    pending = {"type": "success", "pending_tool_call_ids": ["c1"]}
    nested = {"type": "interrupt", "interrupts": [{"id": "p", "reason": "c", "expires_at": "x"}]}
    for value, camel in [(pending, "pendingToolCallIds"), (nested, "expiresAt")]:
        driver = FakeDriver(ScriptedAgent(outcome(value)))
        driver.chat().send("hi")
        with pytest.raises(UsageError, match=f"write '{camel}'"):
            driver.run_until_idle()


def test_interrupted_keeps_camel_case_keys_as_given() -> None:
    schema = {"type": "object"}
    ask = {"id": "p", "reason": "c", "expiresAt": "2099-01-01T00:00:00Z", "responseSchema": schema}
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), interrupted(req, ask))))
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    (it,) = batch.interrupts
    assert it.expires_at == "2099-01-01T00:00:00Z" and it.response_schema == schema


# -- what a resource and a driver say about themselves ----------------------------------


def test_a_resources_repr_is_short_and_never_holds_the_history() -> None:
    ask = {"id": "q", "reason": "input_required"}
    driver = FakeDriver(
        ScriptedAgent().then(
            lambda req: reply(started(req), interrupted(req, ask)),
            refuse(400, "no"),
        )
    )
    chat = driver.chat(thread_id="checkout-1")
    assert repr(chat) == (
        "<Resource chat thread_id='checkout-1' loading=False resuming=False batch=None error=None>"
    )
    chat.send("my card number is 4111 1111 1111 1111")
    assert "loading=True" in repr(chat)
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    chat.resume(batch.id, [{"interrupt_id": "q", "status": "resolved", "payload": "secret"}])
    assert f"loading=True resuming=True batch={batch.id!r} error=None" in repr(chat)
    driver.run_until_idle()
    text_ = repr(chat)
    assert text_.endswith(f"loading=False resuming=False batch={batch.id!r} error=TransportError>")
    assert "4111" not in text_ and "secret" not in text_ and len(text_) < 200


def test_a_subclass_and_a_completion_name_themselves_in_their_repr() -> None:
    class Recorded(Resource):
        pass

    driver = FakeDriver(resource_class=Recorded)
    assert repr(driver.completion()).startswith("<Recorded completion thread_id=")


def _paused_with_prefix(prefix: str, thread_id: str) -> Resource:
    """A chat with thread ``thread_id``, paused on a batch whose id starts with ``prefix``."""
    ask = {"id": "q", "reason": "input_required"}
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), interrupted(req, ask))))
    chat = driver.chat(Options(id_prefix=prefix), thread_id=thread_id)
    chat.send("hi")
    driver.run_until_idle()
    assert chat.pending_interrupts is not None
    return chat


@pytest.mark.parametrize("length", [80, 81, 5_000])
def test_a_resources_repr_shows_ids_whole_up_to_80_characters_and_clips_longer_ones(
    length: int,
) -> None:
    """reference.md: ``repr(resource)`` is one short line. A thread id or batch id of up
    to 80 characters is shown whole; a longer one is clipped (start and end kept), so a
    log line stays short however long the ids an application makes."""
    suffix = _paused_with_prefix("p", "t").core_state.batch.id[1:]  # type: ignore[union-attr]
    thread_id = "t" * length
    chat = _paused_with_prefix("p" * (length - len(suffix)), thread_id)
    batch_id = chat.core_state.batch.id  # type: ignore[union-attr]
    assert len(batch_id) == length
    text_ = repr(chat)
    if length <= 80:
        assert f"thread_id={thread_id!r}" in text_ and f"batch={batch_id!r}" in text_
    else:
        assert thread_id not in text_ and batch_id not in text_
        assert "characters left out" in text_ and len(text_) < 400


class _Silent:
    async def stream(self, body: bytes) -> AsyncIterator[str]:
        return
        yield ""


def test_the_driver_protocol_is_checked_by_isinstance() -> None:
    """It only checks that ``now`` and ``execute`` are there, not their signatures."""
    assert isinstance(FakeDriver(), Driver)
    assert isinstance(TrioDriver(_Silent()), Driver)
    assert not isinstance(object(), Driver)
    assert not isinstance(FakeClock(), Driver)  # now() alone is not a driver


def test_a_sync_tool_calling_its_resource_fails_as_under_the_trio_driver() -> None:
    """R-D5: under the TrioDriver a sync tool runs in a worker thread, where the resource's
    methods raise RuntimeError, which becomes the tool's failure. The fake refuses them
    the same way, so a tool tested here does not work only here."""

    def calls(req: Request) -> Reply:
        return reply(started(req), tool_call("c1", "save", {}), finished(req))

    agent = ScriptedAgent().then(calls, lambda req: reply(started(req), finished(req)))
    driver = FakeDriver(agent)
    chat = driver.chat(local_tools={"save": lambda args: chat.set_state({"saved": True})})
    chat.send("go")
    driver.run_until_idle()
    assert chat.error is None and chat.state == {}  # the tool's call changed nothing
    (result,) = [m for m in driver.requests[1].json["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("Error: RuntimeError: a sync local tool cannot call")
    chat.set_state({"after": 1})  # refused only while the tool ran
    assert chat.state == {"after": 1}
