"""The async driver: carries the reducer's commands out concurrently, for real.

It is the fake driver's twin (``interlude.adapters.fake``) on a real event
loop: every command is done the same way, but streams, timers and local tools
run as tasks of one task group owned by the driver, so leaving ``async with``
cancels them all and waits for them (structured concurrency). Written on
anyio, it runs under trio and under asyncio alike::

    async with HttpxTransport(url) as transport, TrioDriver(transport) as driver:
        chat = driver.chat()
        chat.send("hello")
        await chat.wait_idle()

The driver decides nothing about batches, claims, retries or expiry: it feeds
what happened back to the resource, which steps the reducer. Every
``resource.apply`` happens on the event loop thread; local sync tools run in
worker threads and only their results come back to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, NoReturn, Protocol, Self, assert_never

import anyio
import attrs
import trio
from anyio.abc import TaskGroup

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
from interlude.core.errors import ProtocolError, TransportError, a_type, describe_exception
from interlude.core.json import thaw
from interlude.core.options import Options
from interlude.core.reducer import Transition
from interlude.core.state import Batch
from interlude.core.wire.codec import WireError, encode_request
from interlude.core.wire.messages import Message

from .resource import Resource, ResourceFactory, unwritable_request
from .tools import LocalTool, ToolShape, ToolSignal, no_function

__all__ = ["AsyncDriver", "AsyncResource", "LocalTool", "ToolSignal", "Transport", "TrioDriver"]

_CLOSED = "the driver was closed"
"""Why a resource still loading when the driver's block ends was stopped, as a
cancelled tool call's result gives it."""


class Transport(Protocol):
    """Sends one request body and yields the data of each SSE frame of the answer.

    Raises :class:`TransportError` or :class:`ProtocolError` when the request
    or its stream fails (``interlude.adapters.httpx.HttpxTransport`` is one); any
    other exception is read as a retryable ``TransportError``. Each item yielded
    must be a ``str``: anything else fails the attempt with a non-retryable
    ``TransportError`` (the transport's bug).
    """

    def stream(self, body: bytes) -> AsyncIterator[str]: ...


class BatchTransport(Transport, Protocol):
    """A transport that can also hand over every frame one network read completed.

    The driver prefers ``stream_batches`` when a transport has it: one await per
    read instead of one per frame (``HttpxTransport`` has it).
    """

    def stream_batches(self, body: bytes) -> AsyncIterator[list[str]]: ...


@attrs.define(eq=False)
class _Books:
    """What the driver runs for one resource, by the reducer's ids."""

    resource: AsyncResource
    tools: Mapping[str, ToolShape]
    attempts: dict[int, anyio.CancelScope] = attrs.Factory(dict)
    timers: dict[int, anyio.CancelScope] = attrs.Factory(dict)
    running_tools: dict[int, tuple[anyio.CancelScope, ToolSignal]] = attrs.Factory(dict)

    def cancel_all(self) -> None:
        """Cancel every task, so none of them applies anything from now on."""
        for _, signal in self.running_tools.values():
            signal._cancel()
        for scopes in (self.attempts, self.timers):
            for scope in scopes.values():
                scope.cancel()
        for scope, _ in self.running_tools.values():
            scope.cancel()


class TrioDriver(ResourceFactory["AsyncResource"]):
    """Runs resources against a :class:`Transport` on trio or asyncio (through anyio).

    Use it as ``async with TrioDriver(transport) as driver``; resources are
    created and used inside that block. ``clock`` returns epoch seconds; the
    default is the wall time read on entry plus the event loop's elapsed time,
    so a mock clock (``trio.testing.MockClock``) moves it too.
    """

    def __init__(self, transport: Transport, clock: Callable[[], float] | None = None) -> None:
        self._transport = transport
        self._clock = clock
        self._tg: TaskGroup | None = None
        self._entered = False
        self._closing = False  # leaving the block: nothing new may start
        self._wall_start = 0.0
        self._loop_start = 0.0
        self._loop_thread = -1  # the event loop's thread: the only one that may step resources
        self._loop_time: Callable[[], float] = anyio.current_time
        # Weak: a resource the application dropped, with nothing running, is freed (its
        # books live on the resource, and a running task holds them while it runs).
        self._resources: weakref.WeakSet[AsyncResource] = weakref.WeakSet()

    # -- lifetime ----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("a TrioDriver can be entered only once")
        self._entered = True
        self._loop_thread = threading.get_ident()
        self._loop_time = _loop_clock()
        self._wall_start = time.time()
        self._loop_start = self._loop_time()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop what runs, cancel every stream, timer and tool, and wait for them all to end.

        A resource left loading is stopped first, through the reducer, so that its
        state says what happened (R-F4/R-F5 as for ``stop()``) instead of loading forever.
        """
        assert self._tg is not None
        # From here an observer woken by the stops below cannot start new work, nor
        # create a resource the loop below would miss: it would be left loading.
        self._closing = True
        resources = list(self._resources)
        for r in resources:
            if r.is_loading:
                # Still running here (the driver stops only below); a cancelled
                # tool's result says the driver closed, not that stop() was called.
                r.apply(i.Stop(_CLOSED))
        tg, self._tg = self._tg, None
        for r in resources:
            r._books.cancel_all()
            r._wake()  # a wait in another task raises now, not at its timeout
        tg.cancel_scope.cancel()
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is not None and _only(group, exc):
                return None  # the block's own exception, not grouped: let it pass as raised
            raise

    @property
    def running(self) -> bool:
        """Whether the driver is inside its ``async with`` block and can run commands."""
        return self._tg is not None

    # -- resources (chat() and completion() come from ResourceFactory) ------------------

    def _create(
        self,
        options: Options,
        local_tools: Mapping[str, Callable[..., Any]],
        thread_id: str | None,
        messages: Sequence[Message],
        state: Any,
    ) -> AsyncResource:
        self._require_running()
        self._refuse_when_closing("a new resource")
        if options.id_prefix is None:
            # Ids unique across runtimes: a saved batch id never names a new batch (R-I1).
            options = attrs.evolve(options, id_prefix=f"interlude-{secrets.token_hex(4)}")
        r = AsyncResource(self, options, thread_id=thread_id, messages=messages, state=state)
        tools = {name: ToolShape.of(fn) for name, fn in local_tools.items()}
        r._books = _Books(r, tools)
        self._resources.add(r)
        return r

    # -- the Driver protocol -------------------------------------------------------------

    def now(self) -> float:
        """Epoch seconds: the injected clock, else wall time at entry plus loop time since."""
        if self._clock is not None:
            return self._clock()
        if self._tg is None:
            return time.time()
        return self._wall_start + (self._loop_time() - self._loop_start)

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        if not isinstance(resource, AsyncResource) or resource._async_driver is not self:
            raise RuntimeError("this resource was not created by this driver")
        books = resource._books
        for c in commands:
            if isinstance(c, StartAttempt):
                scope = books.attempts[c.attempt] = anyio.CancelScope()
                self._spawn(self._run_attempt, books, c, scope, name=f"attempt {c.attempt}")
            elif isinstance(c, AbortAttempt):
                _cancel(books.attempts, c.attempt)
            elif isinstance(c, StartTimer):
                scope = books.timers[c.timer] = anyio.CancelScope()
                self._spawn(self._run_timer, books, c, scope, name=f"{c.purpose} timer {c.timer}")
            elif isinstance(c, CancelTimer):
                _cancel(books.timers, c.timer)
            elif isinstance(c, RunTool):
                scope, signal = anyio.CancelScope(), ToolSignal()
                books.running_tools[c.task] = (scope, signal)
                self._spawn(self._run_tool, books, c, scope, signal, name=f"tool {c.name}")
            elif isinstance(c, CancelTool):
                running = books.running_tools.pop(c.task, None)
                if running is not None:
                    running[1]._cancel()
                    running[0].cancel()
            else:
                assert_never(c)

    # -- tasks -----------------------------------------------------------------------------

    def _require_running(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError(
                "the TrioDriver is not running: use its resources inside "
                "`async with TrioDriver(transport) as driver:`"
            )
        return self._tg

    def _refuse_when_closing(self, what: str) -> None:
        if self._closing:
            raise RuntimeError(
                f"the TrioDriver is closing (its `async with` block is ending): {what} "
                "would start work nothing is left to carry out"
            )

    def _spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> None:
        self._require_running().start_soon(fn, *args, name=f"interlude {name}")

    async def _run_attempt(self, books: _Books, c: StartAttempt, scope: anyio.CancelScope) -> None:
        """Announce the send, send unless withdrawn, and feed the stream back."""
        resource = books.resource
        try:
            with scope:
                if scope.cancel_called:
                    return  # aborted before it started
                try:
                    body = encode_request(c.run_input)
                except WireError as exc:
                    resource.apply(i.AttemptFailed(c.attempt, unwritable_request(exc)))
                    return
                resource.apply(i.SendStarting(c.attempt))
                if scope.cancel_called:
                    return  # the reducer withdrew it: send nothing
                await self._stream(resource, c.attempt, body, scope, books.attempts)
        finally:
            if books.attempts.get(c.attempt) is scope:
                del books.attempts[c.attempt]

    async def _stream(
        self,
        resource: AsyncResource,
        attempt: int,
        body: bytes,
        scope: anyio.CancelScope,
        live: dict[int, anyio.CancelScope],
    ) -> None:
        ending: i.StreamEnded | i.AttemptFailed
        try:
            frames = _batches(self._transport, body)
        except Exception as exc:  # a transport that fails as it is called, before any await
            if not scope.cancel_called:
                resource.apply(_failed(attempt, exc))
            return
        try:
            while True:
                try:
                    batch = await anext(frames)
                except StopAsyncIteration:
                    ending = i.StreamEnded(attempt)
                    break
                except Exception as exc:
                    ending = _failed(attempt, exc)
                    break
                except asyncio.CancelledError as exc:
                    if not _raised_of_its_own(exc):
                        raise
                    ending = _failed(attempt, exc)  # as for a tool's: see _raised_of_its_own
                    break
                except BaseExceptionGroup as group:
                    _raise_cancellation_alone(group)
                if scope.cancel_called:
                    return  # aborted: a frame that arrives now is never delivered
                if not all(type(data) is str for data in batch):
                    ending = i.AttemptFailed(attempt, _not_text(batch))
                    break
                now = self.now()  # the frames of one read arrived together
                for data in batch:
                    # AbortAttempt takes the attempt out of ``live`` at once (a cheaper
                    # test than the scope's, which reads the clock for its deadline).
                    if live.get(attempt) is not scope:
                        return
                    resource.apply(i.FrameReceived(attempt, data), now=now)
        finally:
            # Whatever the close raised: the frames read already say how the attempt ended.
            with contextlib.suppress(Exception):  # raised in this task, it ends the driver
                await _aclose(frames)
        if not scope.cancel_called:
            resource.apply(ending)

    async def _run_timer(self, books: _Books, c: StartTimer, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                # Sleep on the loop's clock, then re-read ours: fire only once it says ``due``.
                while (left := c.due - self.now()) > 0:
                    await anyio.sleep(left)
                if not scope.cancel_called:
                    del books.timers[c.timer]
                    books.resource.apply(i.TimerFired(c.timer))
        finally:
            if books.timers.get(c.timer) is scope:
                del books.timers[c.timer]

    async def _run_tool(
        self, books: _Books, c: RunTool, scope: anyio.CancelScope, signal: ToolSignal
    ) -> None:
        finished = False
        try:
            with scope:
                if scope.cancel_called:
                    return  # cancelled before it started: never run it (nor start its thread)
                result = await _call_tool(books.tools.get(c.name), c, signal)
                if not scope.cancel_called:  # cancelled while the result was on its way
                    del books.running_tools[c.task]
                    books.resource.apply(result)
                    finished = True
        finally:
            if not finished:  # cancelled by CancelTool or by the driver closing
                signal._cancel()
                running = books.running_tools.get(c.task)
                if running is not None and running[0] is scope:
                    del books.running_tools[c.task]


def _cancel(scopes: dict[int, anyio.CancelScope], key: int) -> None:
    scope = scopes.pop(key, None)
    if scope is not None:
        scope.cancel()


async def _call_tool(tool: ToolShape | None, c: RunTool, signal: ToolSignal) -> i.ToolFinished:
    if tool is None:
        return i.ToolFinished(c.task, error=no_function(c.name))
    arguments = thaw(c.arguments)
    args = tool.arguments(arguments, signal)
    try:
        if tool.is_async:
            value = await tool.fn(*args)
        else:
            ok, value = await _in_own_thread(tool.fn, *args, name=f"interlude tool {c.name}")
            if not ok:  # anything the tool raised in its thread, SystemExit included
                return i.ToolFinished(c.task, error=value)
            if inspect.isawaitable(value):  # an async function behind some wrapper
                value = await value
    except Exception as exc:  # the tool's failure becomes a tool message; cancellation passes
        return i.ToolFinished(c.task, error=exc)  # the reducer writes "TypeName: message"
    except asyncio.CancelledError as exc:
        if not _raised_of_its_own(exc):
            raise
        return i.ToolFinished(c.task, error=exc)
    except BaseExceptionGroup as group:
        _raise_cancellation_alone(group)
    return i.ToolFinished(c.task, value=value)


def _raise_cancellation_alone(group: BaseExceptionGroup[Any]) -> NoReturn:
    """Raise the cancellation in a group a tool's or transport's own task group raised,
    without the rest: trio's cancel scope takes its ``Cancelled`` out of a group and
    raises the rest (the cleanup failures of a task cancelled anyway) out of the
    driver's task group, ending it and the application's block."""
    cancelled, rest = group.split(anyio.get_cancelled_exc_class())
    if cancelled is None or (rest is not None and rest.split(Exception)[1] is not None):
        raise group  # no cancellation, or a KeyboardInterrupt or SystemExit: let it end all
    raise cancelled from None


def _raised_of_its_own(exc: asyncio.CancelledError) -> bool:
    """Whether a CancelledError is a tool's or a transport's own (it awaited a future that
    someone else cancelled), not a cancellation of this task: let through, it would
    cancel the driver's task group, stopping every resource without a word and leaving
    the application's block without an exception."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # on trio: only trio.Cancelled cancels, never this
        return True
    return task is None or task.cancelling() == 0


async def _in_own_thread(fn: Callable[..., Any], *args: Any, name: str) -> tuple[bool, Any]:
    """``(True, fn(*args))``, or ``(False, the exception it raised)``, from a daemon
    thread of its own; cancelling the wait abandons it.

    Not anyio's worker pool: a tool that ignores its signal keeps its thread, and on
    trio 40 such threads would hold the pool's every token, so no sync tool would run
    again; on asyncio the pool's threads also hold the interpreter's exit.
    """
    call_soon = _call_soon_threadsafe()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:  # the tool's, whatever it is: a thread's SystemExit
            outcome.append((False, exc))  # would end only that thread, so report it
        with contextlib.suppress(RuntimeError):  # the loop has ended: nobody waits any more
            call_soon(done.set)

    threading.Thread(target=work, name=name, daemon=True).start()
    await done.wait()
    return outcome[0]


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """How a thread schedules a call on the running loop (trio's or asyncio's)."""
    try:
        return trio.lowlevel.current_trio_token().run_sync_soon
    except RuntimeError:
        return asyncio.get_running_loop().call_soon_threadsafe


async def _aclose(frames: AsyncIterator[Any]) -> None:
    """Close the transport's stream (an async generator's ``finally`` runs now)."""
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        await aclose()


class AsyncResource(Resource):
    """A resource of a :class:`TrioDriver`, with awaitables for its progress.

    Every wait takes a ``timeout`` in seconds (of the event loop's clock) and
    raises :class:`TimeoutError` naming what did not happen.
    """

    def __init__(
        self,
        driver: TrioDriver,
        options: Options,
        *,
        thread_id: str | None = None,
        messages: Sequence[Message] = (),
        state: Any = None,
    ) -> None:
        super().__init__(driver, options, thread_id=thread_id, messages=messages, state=state)
        self._async_driver = driver
        self._books: _Books  # set by the driver as it creates the resource
        self._changes = 0
        self._changed: anyio.Event | None = None
        self.subscribe(self._count_change)

    def apply(self, input: i.Input, *, now: float | None = None) -> Transition:
        """Step the reducer; refused (state unchanged) once the driver has stopped, from
        any thread but the event loop's, and for an intent that may start a run once the
        driver has begun to close."""
        driver = self._async_driver
        if driver._tg is None:
            driver._require_running()  # raises, saying what to do
        if threading.get_ident() != driver._loop_thread:
            # From a sync tool's worker thread, say: the step would commit, and then its
            # commands could not start (task groups and scopes are the loop's), leaving the
            # resource loading forever.
            raise RuntimeError(
                "a resource's methods run on the event loop's thread only, not in a worker "
                "thread such as a sync local tool's: make the tool async to call them"
            )
        if driver._closing and isinstance(input, _STARTING_INTENTS):
            driver._refuse_when_closing(type(input).__name__)
        return super().apply(input, now=now)

    async def wait_idle(self, timeout: float = 30) -> None:
        """Wait until no run or local tool is in progress (``is_loading`` is False)."""
        await self._wait(lambda: not self.is_loading, timeout, "become idle")

    async def wait_for_batch(self, timeout: float = 30) -> Batch:
        """Wait until a batch awaits answers (pending and not claimed), and return it.

        Only a run in progress can publish one: as soon as the resource is idle
        (``is_loading`` False) with no batch, it raises :class:`RuntimeError` rather
        than wait out ``timeout`` for a batch that cannot come, at once if it is so
        when called (call it after the intent that starts the run). When the run
        ended with an error, the ``RuntimeError`` names it and has it as its
        ``__cause__``.
        """

        def ready() -> bool:
            if self.pending_interrupts is not None and not self.is_resuming:
                return True
            if self._async_driver._tg is None:
                return False  # _wait says the driver has stopped: the first reason
            if not self.is_loading and self.pending_interrupts is None:
                error = self.error
                if error is not None:
                    raise RuntimeError(
                        f"the run ended with an error and no batch: {describe_exception(error)}"
                    ) from error
                raise RuntimeError(
                    "the resource is idle with no batch: no run is in progress to publish "
                    "one (the last run ended without an interrupt, or none has started). "
                    "Call wait_for_batch after the intent that starts a run"
                )
            return False

        await self._wait(ready, timeout, "publish a batch awaiting answers")
        batch = self.pending_interrupts
        assert batch is not None
        return batch

    async def next_change(self, timeout: float = 30) -> None:
        """Wait for the next committed transition."""
        start = self._changes
        await self._wait(lambda: self._changes > start, timeout, "change")

    def _count_change(self, _: Resource) -> None:
        self._changes += 1
        self._wake()

    def _wake(self) -> None:
        """Let every wait re-check its condition (and whether the driver still runs)."""
        event, self._changed = self._changed, None
        if event is not None:
            event.set()

    async def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        with anyio.move_on_after(timeout):
            while not ready():
                if self._async_driver._tg is None:
                    raise RuntimeError(
                        f"the resource cannot {what}: its TrioDriver has stopped (its "
                        "`async with` block ended); wait inside the block"
                    )
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
            return
        if ready():  # it came in the very tick the time ran out
            return
        raise TimeoutError(
            f"the resource did not {what} within {timeout} s "
            f"(is_loading={self.is_loading}, is_resuming={self.is_resuming}, "
            f"pending_interrupts={'yes' if self.pending_interrupts else 'no'}, "
            f"error={self.error!r})"
        )


AsyncDriver = TrioDriver
"""The same driver under a name that does not suggest trio only: it runs on asyncio too."""

_STARTING_INTENTS = (i.Send, i.SetMessages, i.Reload, i.Resume, i.SetThreadId, i.SetInput)
"""The intents refused while the driver closes: those that may start a run."""


def _only(group: BaseExceptionGroup[Any], exc: BaseException) -> bool:
    """Whether ``group`` holds just ``exc`` (trio re-groups a group it is given)."""
    if group.exceptions == (exc,):
        return True
    (inner, *more) = group.exceptions
    return (
        not more
        and isinstance(exc, BaseExceptionGroup)
        and isinstance(inner, BaseExceptionGroup)
        and inner.message == exc.message
        and inner.exceptions == exc.exceptions
    )


async def _one_by_one(frames: AsyncIterator[str]) -> AsyncIterator[list[str]]:
    try:
        async for data in frames:
            yield [data]
    finally:
        await _aclose(frames)


def _not_text(batch: list[Any]) -> TransportError:
    """A custom transport's frames that are not text: its bug, so not retried."""
    kind = next(a_type(d) for d in batch if type(d) is not str)
    return TransportError(
        f"the transport yielded {kind} as a frame's data, which must be a str: "
        "decode the bytes (UTF-8) and yield the data field's text",
        retryable=False,
    )


def _failed(attempt: int, exc: BaseException) -> i.AttemptFailed:
    """How a transport's exception ends an attempt: its own error, or a retryable one."""
    if isinstance(exc, TransportError | ProtocolError):
        return i.AttemptFailed(attempt, exc)
    # A transport bug or a raw I/O error: retryable, as a dropped connection is.
    return i.AttemptFailed(attempt, TransportError(describe_exception(exc), retryable=True))


def _batches(transport: Transport, body: bytes) -> AsyncIterator[list[str]]:
    """The transport's frames, in lists: its own batches when it has them."""
    stream_batches = getattr(transport, "stream_batches", None)
    if stream_batches is not None:
        batches: AsyncIterator[list[str]] = stream_batches(body)
        return batches
    return _one_by_one(transport.stream(body))


def _loop_clock() -> Callable[[], float]:
    """The running loop's clock, read directly (``anyio.current_time`` looks the
    backend up on every call, and ``now()`` is read on every event)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return asyncio.get_running_loop().time
    return trio.current_time
