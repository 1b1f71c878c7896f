"""A deterministic, step-by-step driver: no threads, no sockets, no sleeping.

Intents take effect at once (claims, flags, exceptions), but the commands
they emit wait in a FIFO queue until the test steps the driver. So a test can
act between a claim and its send: stop it, or move the clock past an expiry.

::

    agent = ScriptedAgent(lambda req: reply(started(req), *text("m1", "hi"), finished(req)))
    driver = FakeDriver(agent)
    chat = driver.chat()
    chat.send("hello")          # claims nothing, sends nothing yet
    driver.run_until_idle()     # the request goes out, every event is delivered
    assert chat.messages[-1].content == "hi"
    assert agent.requests[0].json["messages"][0]["content"] == "hello"

``step()`` does one thing (sends one request, delivers one event, runs one
tool, or fires one timer already due); ``release()`` lets a held stream
deliver more; ``advance(seconds)`` moves the fake clock and fires the timers
that fall due, in order.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import inspect
import json
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args, overload

import attrs
import trio

from interlude.core import inputs as i
from interlude.core.commands import (
    AbortAttempt,
    CancelTimer,
    CancelTool,
    Command,
    RunTool,
    StartAttempt,
    StartTimer,
)
from interlude.core.errors import UsageError, a_type
from interlude.core.json import thaw
from interlude.core.options import Options
from interlude.core.wire.codec import WireError, dumps, encode_event, encode_request
from interlude.core.wire.messages import Message

from ..resource import Resource, ResourceFactory, unwritable_request
from ..tools import LocalTool, ToolShape, ToolSignal, no_function
from .script import Reply, Request

__all__ = ["FAKE_EPOCH", "FakeClock", "FakeDriver", "ScriptedAgent", "ToolFunction", "ToolLoop"]

FAKE_EPOCH = 1_798_761_600.0
"""2027-01-01T00:00:00Z: where every fake clock starts, so tests are repeatable."""

ToolLoop = Literal["trio", "asyncio"]
"""The event loops the fake driver can run an async local tool on."""

ToolFunction = LocalTool
"""A local tool, as for the TrioDriver: ``fn(arguments)`` or ``fn(arguments, signal)``,
sync or async; returns a JSON value or text. Under the fake driver it runs to its end
within one step, and its signal is never set (a cancelled tool has not started)."""


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self, start: float = FAKE_EPOCH) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError("the fake clock does not go backwards")
        self._now = when


class ScriptedAgent:
    """A fake AG-UI endpoint: ``handler(request) -> Reply`` for every request.

    Every request is kept in ``requests`` in the order it was sent, with the
    exact body text, so a test can read what went over the wire.
    """

    def __init__(self, handler: Callable[[Request], Reply] | None = None) -> None:
        self._handler = handler
        self._queued: deque[Callable[[Request], Reply] | Reply] = deque()
        self.requests: list[Request] = []

    def then(self, *replies: Callable[[Request], Reply] | Reply) -> ScriptedAgent:
        """Answer the next requests with these, in order, before the handler.

        Each is a :class:`Reply` or a function of the :class:`Request` returning one;
        anything else raises ``TypeError`` here, and nothing is queued.
        """
        for n, item in enumerate(replies, 1):
            if not isinstance(item, Reply) and not callable(item):
                raise TypeError(
                    f"then() item {n} is {a_type(item)}, not a Reply or a function of the "
                    f"request returning one: {_WRAP}"
                )
        self._queued.extend(replies)
        return self

    def answer(self, request: Request) -> Reply:
        """The answer to ``request``; ``TypeError`` if the script's is not a Reply."""
        self.requests.append(request)
        if self._queued:
            nxt = self._queued.popleft()
            answer = nxt if isinstance(nxt, Reply) else nxt(request)
        elif self._handler is None:
            raise AssertionError(
                f"the scripted agent has no answer for request {len(self.requests)} "
                f"(run {request.run_id}); add one with then() or a handler"
            )
        else:
            answer = self._handler(request)
        if not isinstance(answer, Reply):
            what = "None" if answer is None else a_type(answer)
            raise TypeError(
                f"the scripted agent's answer to request {len(self.requests)} (run "
                f"{request.run_id}) is {what}, not a Reply: {_WRAP}"
            )
        return answer


_WRAP = "wrap the events in reply(...) (or use held, refuse or drop)"


@attrs.define
class _Stream:
    resource: Resource
    attempt: int
    reply: Reply
    position: int = 0
    released: int = 0
    closed: bool = False


@attrs.define
class _Timer:
    resource: Resource
    timer: int
    purpose: str


if TYPE_CHECKING:  # a default (PEP 696): a bare ``FakeDriver`` is ``FakeDriver[Resource]``
    from typing_extensions import TypeVar

    R = TypeVar("R", bound=Resource, default=Resource)
else:  # typing.TypeVar takes no default before Python 3.13
    from typing import TypeVar

    R = TypeVar("R", bound=Resource)

_KEEP_CANCELLED = 64
"""Cancelled timers noted before the heap is cleaned of them (amortized O(1) each)."""


class FakeDriver(ResourceFactory[R]):
    """Runs resources against a :class:`ScriptedAgent`, one step at a time.

    Generic in the class of its resources: ``FakeDriver(agent)`` is a
    ``FakeDriver[Resource]``, and ``FakeDriver(agent, resource_class=Recorded)`` a
    ``FakeDriver[Recorded]``, whose ``chat()`` and ``completion()`` are typed ``Recorded``.
    """

    @overload
    def __init__(
        self: FakeDriver[Resource],
        agent: ScriptedAgent | None = None,
        *,
        clock: FakeClock | None = None,
        tool_loop: ToolLoop = "trio",
    ) -> None: ...

    @overload
    def __init__(
        self,
        agent: ScriptedAgent | None = None,
        *,
        clock: FakeClock | None = None,
        resource_class: type[R],
        tool_loop: ToolLoop = "trio",
    ) -> None: ...

    def __init__(
        self,
        agent: ScriptedAgent | None = None,
        *,
        clock: FakeClock | None = None,
        resource_class: type[Any] = Resource,
        tool_loop: ToolLoop = "trio",
    ) -> None:
        """``resource_class`` lets wrappers and tests use a subclass of Resource.
        ``tool_loop``: the event loop an async local tool runs to its end on, inside
        a step: ``"trio"``, or ``"asyncio"`` for tools that use asyncio's libraries."""
        if tool_loop not in get_args(ToolLoop):
            raise UsageError(f"FakeDriver: tool_loop is 'trio' or 'asyncio', not {tool_loop!r}")
        self._tool_loop = tool_loop
        self.agent = agent if agent is not None else ScriptedAgent()
        self.resource_class: type[R] = resource_class
        self.clock = clock if clock is not None else FakeClock()
        self._actions: deque[tuple[str, Any]] = deque()
        self._timers: list[tuple[float, int, _Timer]] = []
        self._timer_seq = 0
        self._cancelled_timers: set[tuple[int, int]] = set()
        self._streams: dict[tuple[int, int], _Stream] = {}
        # Attempts queued to start, until past their SendStarting, and tools queued to
        # run: True once aborted or cancelled. Only these need a note (a stream is closed
        # at once, a running tool's late result is ignored), so a long-lived resource's
        # stops and thread changes leave nothing behind.
        self._to_start: dict[tuple[int, int], bool] = {}
        self._to_run: dict[tuple[int, int], bool] = {}
        self._tools: dict[int, Mapping[str, ToolShape]] = {}
        # The books above name a resource by a number of its own, never by id(): a freed
        # resource's address is given to a new one, which must not inherit its aborted
        # attempts, cancelled timers and tools (nor find its own never sent, or never fired).
        self._keys: dict[int, tuple[weakref.ref[Resource], int]] = {}
        self._key_serial = 0

    # -- resources (chat() and completion() come from ResourceFactory) -----------------

    def _create(
        self,
        options: Options,
        local_tools: Mapping[str, Callable[..., Any]],
        thread_id: str | None,
        messages: Sequence[Message],
        state: Any,
    ) -> R:
        r = self.resource_class(self, options, thread_id=thread_id, messages=messages, state=state)
        key = self._key(r)
        self._tools[key] = {name: ToolShape.of(fn) for name, fn in local_tools.items()}
        weakref.finalize(r, self._tools.pop, key, None)
        return r

    def _key(self, resource: Resource) -> int:
        """The number this driver's books know ``resource`` by, for its whole life."""
        address = id(resource)
        entry = self._keys.get(address)
        if entry is None or entry[0]() is not resource:  # new, or a freed one's address
            self._key_serial += 1
            ref = weakref.ref(resource, functools.partial(_forget, self._keys, address))
            entry = self._keys[address] = (ref, self._key_serial)
        return entry[1]

    # -- the Driver protocol -------------------------------------------------------------

    def now(self) -> float:
        return self.clock._now  # read on every event: one call, not two

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        key = self._key(resource)
        for c in commands:
            if isinstance(c, StartAttempt):
                self._to_start[key, c.attempt] = False
                self._actions.append(("start", (resource, c)))
            elif isinstance(c, AbortAttempt):
                if (key, c.attempt) in self._to_start:
                    self._to_start[key, c.attempt] = True
                stream = self._streams.pop((key, c.attempt), None)
                if stream is not None:
                    stream.closed = True
            elif isinstance(c, StartTimer):
                self._timer_seq += 1
                t = _Timer(resource, c.timer, c.purpose)
                heapq.heappush(self._timers, (c.due, self._timer_seq, t))
            elif isinstance(c, CancelTimer):
                self._cancelled_timers.add((key, c.timer))
                if len(self._cancelled_timers) > _KEEP_CANCELLED:
                    self._drop_cancelled_timers()
            elif isinstance(c, RunTool):
                self._to_run[key, c.task] = False
                self._actions.append(("tool", (resource, c)))
            elif isinstance(c, CancelTool) and (key, c.task) in self._to_run:
                self._to_run[key, c.task] = True

    # -- stepping --------------------------------------------------------------------------

    def step(self) -> bool:
        """Carry out one queued action, else fire the soonest timer due at or before
        ``now()`` (it would have fired already on a real loop); False when nothing is
        ready. The clock does not move."""
        while self._actions:
            kind, payload = self._actions.popleft()
            if kind == "deliver":  # the common action: one frame
                if self._deliver(payload):
                    return True
            elif kind == "start" and self._start(*payload):
                return True
            if kind == "tool" and self._run_tool(*payload):
                return True
        return bool(self._timers) and self._fire_next(self.clock._now)

    def run_until_idle(self, *, max_steps: int = 100_000, follow_retries: bool = True) -> int:
        """Step until nothing is ready; returns the steps taken.

        Timers due at or before ``now()`` fire (a step each). With ``follow_retries``,
        when nothing else is ready, the clock moves to the next timer on the way to
        the soonest retry: an expiry due before that retry fires at its own time
        first, and the steps it causes run there, so a retry it cancels is never
        reached. Expiry timers never move the clock by themselves. Held streams wait
        for ``release``. Raises ``AssertionError`` when ``max_steps`` steps are taken
        and a step more is ready (that step is not taken).
        """
        steps = 0
        while steps < max_steps:
            if self.step():
                steps += 1
                continue
            due = self._next_due("retry") if follow_retries else None
            if due is None:
                return steps
            self._fire_next(due)  # true: the retry itself is live and due by then
            steps += 1
        if not self._ready() and (not follow_retries or self._next_due("retry") is None):
            return steps  # idle after exactly max_steps
        raise AssertionError(f"not idle after {max_steps} steps: is the script looping?")

    def advance(self, seconds: float) -> None:
        """Move the clock forward, firing every timer that falls due, in order."""
        self.advance_to(self.clock.now() + seconds)

    def advance_to(self, when: float) -> None:
        while self._fire_next(when):
            pass
        self.clock.set(max(when, self.clock.now()))

    def release(self, count: int = 1) -> None:
        """Let held streams deliver ``count`` more events each."""
        for stream in list(self._streams.values()):
            if stream.reply.hold and not stream.closed:
                was_parked = stream.released == 0
                stream.released += count
                if was_parked:
                    self._actions.append(("deliver", stream))

    def pending_timers(self) -> list[tuple[float, str]]:
        """``(due, purpose)`` of every live timer, soonest first."""
        return sorted((due, t.purpose) for due, _, t in self._timers if not self._cancelled(t))

    @property
    def requests(self) -> list[Request]:
        return self.agent.requests

    # -- actions ---------------------------------------------------------------------------

    def _drop_cancelled_timers(self) -> None:
        """Take cancelled timers out of the heap (they stay in it until their due time
        otherwise, and every idle check reads the whole heap)."""
        dead = self._cancelled_timers
        self._timers = [e for e in self._timers if not self._cancelled(e[2])]
        heapq.heapify(self._timers)
        dead.clear()  # timer ids are never reused once cancelled

    def _cancelled(self, t: _Timer) -> bool:
        return (self._key(t.resource), t.timer) in self._cancelled_timers

    def _fire_next(self, until: float) -> bool:
        """Fire the soonest live timer due at or before ``until``, moving the clock to
        its due time if that is later than now; False if there is none."""
        timers = self._timers
        while timers and timers[0][0] <= until:
            due, _, t = heapq.heappop(timers)
            if self._cancelled(t):
                continue
            self.clock.set(max(due, self.clock.now()))
            t.resource.apply(i.TimerFired(t.timer))
            return True
        return False

    def _ready(self) -> bool:
        """Whether ``step()`` would do something; it changes nothing. Mirrors the
        refusals of ``_start``, ``_deliver``, ``_run_tool`` and ``_fire_next``, which
        consume what they refuse (and ``_deliver`` runs for every event), so they do
        not call this; test_fake_driver's out-of-steps cases hold the two together."""
        for kind, payload in self._actions:
            if kind == "deliver":
                if not payload.closed and (not payload.reply.hold or payload.released > 0):
                    return True
            elif kind == "start":
                if not self._to_start[self._key(payload[0]), payload[1].attempt]:
                    return True
            elif not self._to_run[self._key(payload[0]), payload[1].task]:
                return True
        now = self.clock._now
        return any(due <= now and not self._cancelled(t) for due, _, t in self._timers)

    def _next_due(self, purpose: str) -> float | None:
        live = [
            due for due, _, t in self._timers if t.purpose == purpose and not self._cancelled(t)
        ]
        return min(live) if live else None

    def _start(self, resource: Resource, c: StartAttempt) -> bool:
        key = (self._key(resource), c.attempt)
        try:
            if self._to_start[key]:
                return False  # aborted before its turn
            try:
                body = encode_request(c.run_input).decode("utf-8")  # the text that goes out
            except WireError as exc:
                resource.apply(i.AttemptFailed(c.attempt, unwritable_request(exc)))
                return True
            resource.apply(i.SendStarting(c.attempt))
            if self._to_start[key]:
                return True  # the reducer withdrew it (expiry found before the send)
        finally:
            del self._to_start[key]  # from here an abort closes the stream
        reply = self.agent.answer(Request(attempt=c.attempt, run_input=c.run_input, body=body))
        if reply.fail_before_send is not None:
            resource.apply(i.AttemptFailed(c.attempt, reply.fail_before_send))
            return True
        stream = _Stream(resource, c.attempt, reply)
        self._streams[key] = stream
        if not reply.hold:
            self._actions.append(("deliver", stream))
        return True

    def _deliver(self, stream: _Stream) -> bool:
        if stream.closed:
            return False
        if stream.reply.hold:
            if stream.released == 0:
                return False  # parked until release()
            stream.released -= 1
        r = stream.reply
        position = stream.position
        failed = r.fail_after is not None and position >= r.fail_after
        if failed or position >= len(r.events):
            stream.closed = True
            self._streams.pop((self._key(stream.resource), stream.attempt), None)
            if failed:
                stream.resource.apply(i.AttemptFailed(stream.attempt, r.failure))
            else:
                stream.resource.apply(i.StreamEnded(stream.attempt))
            return True
        item = r.events[position]
        stream.position = position + 1
        if not r.hold or stream.released > 0:
            self._actions.append(("deliver", stream))
        data = item if type(item) is str else _frame_data(item)  # raw lines: the common case
        stream.resource.apply(i.FrameReceived(stream.attempt, data))
        return True

    def _run_tool(self, resource: Resource, c: RunTool) -> bool:
        if self._to_run.pop((self._key(resource), c.task)):
            return False
        tool = self._tools[self._key(resource)].get(c.name)
        try:
            if tool is None:
                raise no_function(c.name)
            # The same shapes as the TrioDriver's: fn(arguments) or fn(arguments, signal);
            # an async tool runs to its end on a loop of its own, inside this step.
            args = tool.arguments(thaw(c.arguments), ToolSignal())
            if tool.is_async:
                value = tool.fn(*args)
            else:
                # Under the TrioDriver a sync tool runs in a worker thread, where the
                # resource's methods raise: refused here too, so a test finds it.
                resource._refusal = _SYNC_TOOL_CALLED
                try:
                    value = tool.fn(*args)
                finally:
                    resource._refusal = None
            if inspect.isawaitable(value):  # an async tool, or one behind a wrapper
                value = self._run_to_end(value)
        except Exception as exc:  # the tool's failure becomes a tool message
            resource.apply(i.ToolFinished(c.task, error=exc))  # written "TypeName: message"
        except (asyncio.CancelledError, SystemExit) as exc:
            # As under the TrioDriver: a CancelledError the tool raised itself (nothing
            # cancels it here), and a sync tool's SystemExit (there it ends only the
            # tool's thread), are the tool's failure; an async tool's SystemExit is not.
            if isinstance(exc, SystemExit) and tool is not None and tool.is_async:
                raise
            resource.apply(i.ToolFinished(c.task, error=exc))
        else:
            resource.apply(i.ToolFinished(c.task, value=value))
        return True

    def _run_to_end(self, awaitable: Awaitable[Any]) -> Any:
        async def wait() -> Any:
            return await awaitable

        return asyncio.run(wait()) if self._tool_loop == "asyncio" else trio.run(wait)


_SYNC_TOOL_CALLED = (
    "a sync local tool cannot call its resource's methods: under the TrioDriver it runs in "
    "a worker thread, where they raise (the FakeDriver refuses them as well): make the "
    "tool async to call them"
)


def _forget(keys: dict[int, tuple[weakref.ref[Resource], int]], address: int, ref: Any) -> None:
    """A freed resource's entry leaves the books (unless its address has a new one)."""
    if address in keys and keys[address][0] is ref:
        del keys[address]


def _frame_data(item: Any) -> str:
    if isinstance(item, str):  # a str subclass (an exact str never gets here): its text
        return str.__str__(item)
    if isinstance(item, Mapping):
        return json.dumps(item)
    return dumps(encode_event(item))
