"""The public face of a resource, shared by every driver.

A :class:`Resource` holds the current :class:`~interlude.core.State`, turns
method calls into intents, steps the reducer, and hands the commands to its
driver. Notifications are queued and delivered one at a time after the
transition is committed, so an observer may call any method from inside a
notification (R-I2): the call steps the reducer at once (it raises at once if
rejected) and its own notification waits its turn. The reducer is never
re-entered.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar, runtime_checkable

import attrs

from interlude.core import inputs as i
from interlude.core import selectors as sel
from interlude.core.commands import Command, StartAttempt
from interlude.core.errors import (
    InterludeError,
    TransportError,
    UsageError,
    a_type,
    clip,
    describe_exception,
)
from interlude.core.json import JSON
from interlude.core.options import Options, ResourceKind
from interlude.core.reducer import Transition, initial_state, step
from interlude.core.selectors import MessageView
from interlude.core.state import Batch, State
from interlude.core.wire.messages import Message, UserMessage
from interlude.core.wire.run_input import Tool

__all__ = [
    "Driver",
    "Observer",
    "Resource",
    "ResourceFactory",
    "unwritable_request",
    "with_local_tools",
]

Observer = Callable[["Resource"], None]


@runtime_checkable
class Driver(Protocol):
    """What a resource needs from its driver: a clock and someone to run commands.

    ``isinstance(obj, Driver)`` works, but checks only that ``now`` and ``execute``
    are there, not what they take or return: a type checker checks the signatures.
    """

    def now(self) -> float: ...

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None: ...


class Resource:
    """A chat or completion resource: ``messages``, ``resume``, ``subscribe``...

    Create one through a driver (``FakeDriver.chat()``, ``TrioDriver.chat()``); a
    driver of your own builds it as ``Resource(driver, options)`` (reference.md,
    "Writing your own").
    Intents take effect synchronously: when ``resume`` returns, the batch is
    claimed and both flags are set; a rejected call raises a subclass of
    :class:`~interlude.core.errors.InterludeError` and changes nothing.
    """

    def __init__(
        self,
        driver: Driver,
        options: Options,
        *,
        thread_id: str | None = None,
        messages: Sequence[Message] = (),
        state: Any = None,
    ) -> None:
        """A resource of ``options.kind`` whose commands ``driver`` carries out.

        ``thread_id``, ``messages`` and ``state`` are where it starts (checked as
        ``initial_state`` checks them); ``state`` None (not given) starts from ``{}``.
        """
        self._driver = driver
        self._state = initial_state(options, thread_id=thread_id, messages=messages, state=state)
        # Each subscription by a token of its own, so that (un)subscribing costs O(1)
        # however many there are; a delivery round iterates a tuple of them, built
        # once after a change rather than for every notification.
        self._live: dict[object, Callable[[Any], None]] = {}
        self._observers: tuple[tuple[object, Callable[[Any], None]], ...] | None = ()
        self._pending_notifications = 0
        self._notifying = False
        # Set by a driver while a step must not happen here: why (the FakeDriver's, while
        # a sync tool runs, which under the TrioDriver has no loop to step on).
        self._refusal: str | None = None

    def __repr__(self) -> str:
        """Kind, thread id, flags, pending batch id and error type: never the history,
        the state or an error's message, so it is safe to log."""
        s = self._state
        thread = None if s.thread_id is None else clip(s.thread_id, 80)
        batch = None if s.batch is None else clip(s.batch.id, 80)
        error = None if s.error is None else type(s.error).__name__
        return (
            f"<{type(self).__name__} {s.options.kind} thread_id={thread!r} "
            f"loading={sel.is_loading(s)} resuming={s.resuming} batch={batch!r} error={error}>"
        )

    # -- reading -------------------------------------------------------------------
    #
    # Plain facts are read straight from the state; derived ones go through
    # interlude.core.selectors. Apps read these after every event, so each costs one call.

    @property
    def core_state(self) -> State:
        """The reducer's whole state (for tests and tools; treat as read-only)."""
        return self._state

    @property
    def kind(self) -> ResourceKind:
        return self._state.options.kind

    @property
    def messages(self) -> MessageView:
        """The committed history plus what the run in progress has streamed so far.

        Reasoning and activity messages are part of it (activity messages are never
        sent back to the agent). A ``MESSAGES_SNAPSHOT`` reconciles it by id: messages
        the snapshot omits are dropped, the user's own included, but activity and
        reasoning messages unless it carries that role.
        """
        return sel.messages(self._state)

    @property
    def state(self) -> JSON:
        """The shared state: as the run in progress streamed it, else as committed (``{}``
        unless given at creation; deeply immutable; ``interlude.core.thaw`` copies it)."""
        return sel.shared_state(self._state)

    @property
    def pending_interrupts(self) -> Batch | None:
        return self._state.batch

    @property
    def is_loading(self) -> bool:
        return sel.is_loading(self._state)

    @property
    def is_resuming(self) -> bool:
        return self._state.resuming

    @property
    def is_retrying(self) -> bool:
        """Waiting out a retry back-off; ``attempts`` counts the attempts made so far."""
        return sel.is_retrying(self._state)

    @property
    def attempts(self) -> int:
        return sel.attempts(self._state)

    @property
    def retry_cause(self) -> InterludeError | None:
        """What the current run's last retried attempt failed with (an HTTP 503, a
        timeout), to show while it retries; None on a first attempt or when idle."""
        return sel.retry_cause(self._state)

    @property
    def retry_due(self) -> float | None:
        """When the waiting retry goes out, on the driver's clock; None unless retrying."""
        return sel.retry_due(self._state)

    @property
    def error(self) -> InterludeError | None:
        return self._state.error

    @property
    def thread_id(self) -> str | None:
        return self._state.thread_id

    @property
    def needs_new_thread(self) -> bool:
        return self._state.needs_new_thread

    @property
    def is_expired(self) -> bool:
        """Whether the pending batch has an expired interrupt, by the driver's clock."""
        return sel.is_expired(self._state, self._driver.now())

    @property
    def warnings(self) -> tuple[str, ...]:
        return self._state.warnings

    @property
    def input(self) -> JSON:
        """A completion's current input."""
        return sel.input_value(self._state)

    @property
    def output(self) -> str | None:
        """A completion's output: the text of the newest assistant message after the last
        user message, or None."""
        return sel.output(self._state)

    # -- intents ---------------------------------------------------------------------

    def send(
        self,
        content: str | UserMessage | Sequence[Mapping[str, Any]],
        *,
        message_id: str | None = None,
    ) -> None:
        """Append a user message and run (superseding a run in progress).

        ``content`` is text, a :class:`~interlude.core.wire.UserMessage` (sent as
        it is, id included) or a list of AG-UI content parts.
        """
        self.apply(i.Send(content, message_id))

    def set_messages(self, messages: Iterable[Message]) -> None:
        # Read an iterator once, here; anything else goes on as given, to be checked.
        listed = tuple(messages) if isinstance(messages, Iterator) else messages
        self.apply(i.SetMessages(listed))  # type: ignore[arg-type]  # the reducer checks it

    def reload(self) -> bool:
        """Run again from the last user message, dropping what followed it (a completion:
        run its current input afresh); returns whether a run started (False with no user
        message, or no input). After the ``cancelled`` outcome this is how a completion's
        deferred input goes out."""
        t = self.apply(i.Reload())
        return any(isinstance(c, StartAttempt) for c in t.commands)

    def stop(self) -> None:
        """End the run and local tools in progress; what was committed stays.

        Each cancelled tool call gets an ``Error: cancelled: ...`` result. Before a
        resume's acknowledgement the claim is released (the batch stays); after it,
        ``needs_new_thread`` is set. With nothing in progress, nothing happens.
        """
        self.apply(i.Stop())

    def set_state(self, state: Any) -> None:
        """Replace the shared state (any JSON value) without running.

        Raises ``StateLockedError`` while a resume claim is held or a run is in progress.
        """
        self.apply(i.SetState(state))

    def resume(self, batch_id: str, entries: Sequence[Mapping[str, Any] | Any]) -> None:
        """Answer every interrupt of the batch; claims it before returning (R-C2)."""
        self.apply(i.Resume(batch_id, entries))

    def set_thread_id(self, thread_id: str | None) -> None:
        """Move to another thread (None: a generated one, if one is set); the same id: no-op.

        Ends the run and local tools in progress (their cancelled calls say the thread
        changed), retires the batch and any claim, and clears ``needs_new_thread`` and
        ``error``; the history and state are kept. A completion re-sends its current
        input if that had not completed successfully (R-E4).
        """
        self.apply(i.SetThreadId(thread_id))

    def set_input(self, value: Any) -> None:
        """A completion's input (any JSON value): runs it, superseding a run in progress.

        While paused, resuming or in recovery it is deferred: it runs when the resumed
        interaction succeeds, if it differs from the answered one; after the
        ``cancelled`` outcome it waits for ``reload()`` or a new thread, and after a
        failure or stop for a later resume that succeeds or the next thread. The
        current input again changes nothing.
        """
        self.apply(i.SetInput(value))

    def configure(self, options: Options) -> None:
        """Replace the options for later runs (R-F2: a captured request keeps its own).

        ``options.kind`` is ignored: the resource keeps its kind, as ``chat()`` and
        ``completion()`` set it. Local tools stay registered, declared or not.
        """
        if isinstance(options, Options):
            options = attrs.evolve(options, kind=self.kind)
        self.apply(i.Configure(options))

    @property
    def options(self) -> Options:
        """The current options; ``attrs.evolve(resource.options, ...)`` changes one field."""
        return self._state.options

    def subscribe(self, observer: Callable[[Self], None]) -> Callable[[], None]:
        """Call ``observer(resource)`` after every committed change; returns unsubscribe."""
        if not callable(observer):
            raise UsageError(
                f"subscribe() takes a callable, observer(resource), not {type(observer).__name__}"
            )
        token = object()
        self._live[token] = observer
        self._observers = None

        def unsubscribe() -> None:
            if self._live.pop(token, None) is not None:
                self._observers = None

        return unsubscribe

    # -- the loop ----------------------------------------------------------------------

    def apply(self, input: i.Input, *, now: float | None = None) -> Transition:
        """Step the reducer with ``input``; raises if it is a rejected intent.

        ``now`` is the driver's clock unless given: a driver passes the time a
        batch of frames arrived once, rather than reading its clock per frame.
        """
        if self._refusal is not None:
            raise RuntimeError(self._refusal)
        t = step(self._state, input, self._driver.now() if now is None else now)
        changed = t.state is not self._state
        self._state = t.state
        if t.commands:
            self._driver.execute(self, t.commands)
        if changed:
            self._notify()
        return t

    def _notify(self) -> None:
        self._pending_notifications += 1
        if self._notifying:
            return  # the running delivery loop will get to it
        self._notifying = True
        reported = False
        try:
            while self._pending_notifications:
                self._pending_notifications -= 1
                observers = self._observers
                if observers is None:
                    observers = self._observers = tuple(self._live.items())
                for token, observer in observers:
                    if self._observers is not observers and token not in self._live:
                        continue  # unsubscribed by an earlier observer of this round
                    try:
                        observer(self)
                    except Exception as exc:  # an application bug: report, don't crash
                        # Report the first failure of this delivery round only: an observer
                        # that raises on every change must not feed itself forever.
                        if not reported:
                            reported = True
                            self.apply(i.ObserverFailed(_observer_failure(observer, exc)))
        finally:
            self._notifying = False


def _observer_failure(observer: object, exc: BaseException) -> str:
    """The exception, which observer raised it and where: the state keeps no traceback."""
    name = getattr(observer, "__qualname__", None) or type(observer).__qualname__
    # The first frame is the call in _notify; the next is the observer's own line.
    frames = traceback.extract_tb(exc.__traceback__)[1:2]
    where = f", {os.path.basename(frames[0].filename)}:{frames[0].lineno}" if frames else ""
    return f"{describe_exception(exc)} (in {name}{where})"


R = TypeVar("R", bound=Resource)


class ResourceFactory(Generic[R]):
    """``chat()`` and ``completion()`` for every driver; a driver implements ``_create``."""

    def chat(
        self,
        options: Options | None = None,
        *,
        local_tools: Mapping[str, Callable[..., Any]] | None = None,
        thread_id: str | None = None,
        messages: Sequence[Message] = (),
        state: Any = None,
    ) -> R:
        """A chat resource. ``local_tools`` run here when the agent calls them."""
        tools = _local_tools(local_tools, "chat()")
        opts = with_local_tools(options or Options(), "chat", tools)
        return self._create(opts, tools, thread_id, messages, state)

    def completion(
        self,
        options: Options | None = None,
        *,
        local_tools: Mapping[str, Callable[..., Any]] | None = None,
        thread_id: str | None = None,
        state: Any = None,
    ) -> R:
        """A completion resource: ``set_input(value)`` runs it (R-E)."""
        tools = _local_tools(local_tools, "completion()")
        opts = with_local_tools(options or Options(), "completion", tools)
        return self._create(opts, tools, thread_id, (), state)

    def _create(
        self,
        options: Options,
        local_tools: Mapping[str, Callable[..., Any]],
        thread_id: str | None,
        messages: Sequence[Message],
        state: Any,
    ) -> R:
        raise NotImplementedError


def _local_tools(value: object, verb: str) -> dict[str, Callable[..., Any]]:
    """``local_tools`` as given to ``chat()``/``completion()``: names to callables."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(
            f"{verb}: local_tools maps tool names to callables, such as "
            f"{{'get_time': get_time}}; not {a_type(value)}"
        )
    for name, fn in value.items():
        if type(name) is not str or not name:
            raise UsageError(f"{verb}: a local tool's name is a non-empty string, not {name!r}")
        if not callable(fn):
            raise UsageError(
                f"{verb}: local tool {name!r} must be a function (or an object with "
                f"__call__), not {a_type(fn)}"
            )
    return dict(value)


def unwritable_request(problem: Exception) -> TransportError:
    """The failure a driver reports when a request has no JSON text (nothing was sent).

    Not retryable: the same request would fail the same way.
    """
    return TransportError(
        f"{problem}; nothing was sent. Replace the value that has no JSON form "
        "(set_messages, set_state or configure) and run again",
        retryable=False,
    )


def with_local_tools(
    options: Options, kind: ResourceKind, local_tools: Mapping[str, Callable[..., Any]]
) -> Options:
    """Options for a resource of ``kind`` whose ``local_tools`` run in this process.

    A local tool not declared in ``options.tools`` is declared with its
    docstring as the description.
    """
    if not isinstance(options, Options):
        raise UsageError(
            f"a resource takes an Options, not {a_type(options)}; "
            "build one with interlude.core.Options(...)"
        )
    declared = {t.name for t in options.tools}
    extra = tuple(
        Tool(name=name, description=(fn.__doc__ or name).strip())
        for name, fn in local_tools.items()
        if name not in declared
    )
    return attrs.evolve(
        options,
        kind=kind,
        tools=options.tools + extra,
        local_tools=options.local_tools | frozenset(local_tools),
    )
