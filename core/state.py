"""The reducer's state: frozen attrs classes, structurally shared between steps.

Only facts are stored. Everything the application reads (``is_loading``,
``pending_interrupts``, ``messages``...) is derived by :mod:`.selectors`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple, TypeVar

import attrs

from .errors import InterludeError
from .json import JSON
from .options import ExpiryPolicy, Options
from .pmap import PMap
from .pvec import PVec, Rope
from .wire.messages import (
    ActivityMessage,
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
)
from .wire.run_input import Interrupt, ResumeEntry, RunAgentInput

__all__ = [
    "Attempt",
    "Batch",
    "Checkpoint",
    "Claim",
    "CompletionInput",
    "IdHints",
    "OpenCall",
    "OpenText",
    "Run",
    "RunKind",
    "State",
    "Stream",
    "ToolRound",
    "ToolTask",
    "evolve",
    "replacer",
    "with_draft",
    "with_open_calls",
    "with_open_texts",
    "with_rope",
    "with_state",
]


def _expiries(batch: Batch) -> tuple[float, ...]:
    return tuple(sorted(t for i in batch.interrupts if (t := i.expires_at_epoch) is not None))


@attrs.frozen
class Batch:
    """A published batch of interrupts (R-A2). ``id`` is local and never sent."""

    id: str
    interrupts: tuple[Interrupt, ...]
    expiries: tuple[float, ...] = attrs.field(
        init=False, eq=False, repr=False, default=attrs.Factory(_expiries, takes_self=True)
    )
    """Every ``expires_at`` of the batch, in epoch seconds, soonest first: sorted once,
    so that each expiry finds the next one without a scan of the batch (R-G3)."""

    @property
    def earliest_expiry(self) -> float | None:
        return self.expiries[0] if self.expiries else None

    def next_expiry(self, now: float) -> float | None:
        """The soonest ``expires_at`` still ahead of ``now``, if any."""
        n = bisect_right(self.expiries, now)
        return self.expiries[n] if n < len(self.expiries) else None

    def is_expired(self, now: float) -> bool:
        """Whether an interrupt has expired at ``now`` (R-G1: ``now >= expires_at``)."""
        return bool(self.expiries) and now >= self.expiries[0]

    def expired_ids(self, now: float) -> tuple[str, ...]:
        """Ids of the interrupts expired at ``now`` (R-G1: ``now >= expires_at``)."""
        if not self.is_expired(now):
            return ()
        return tuple(
            i.id
            for i in self.interrupts
            if i.expires_at_epoch is not None and now >= i.expires_at_epoch
        )


@attrs.frozen
class Claim:
    """A resume in flight before its acknowledgement; the answers, copied (R-B4), and
    the expiry policy they were accepted under: a later ``Configure`` does not change
    whether this resume may be sent (R-F2)."""

    batch_id: str
    entries: tuple[ResumeEntry, ...]
    expiry: ExpiryPolicy = "block"


@attrs.frozen
class Checkpoint:
    """What is committed: never lost by a failure, stop or thread change (R-F6)."""

    messages: PVec[Message]
    state: JSON


# The two records below are rebuilt on every delta: named tuples are the cheapest
# immutable records to build (``with_rope``).


class OpenText(NamedTuple):
    """A text or reasoning message still streaming; its text is a rope, joined once."""

    message_id: str
    position: int
    """Where the message stands in the draft's messages."""
    rope: Rope
    reasoning: bool = False
    """A reasoning message: AG-UI keeps its events apart from a text message's."""
    owner: str | None = None
    """The ``subagentRunId`` of the event that opened it (None: the parent agent): a
    continuation tagged for another owner is rejected (AG-UI 1.0, Ownership)."""


class OpenCall(NamedTuple):
    """A tool call whose arguments are still streaming."""

    tool_call_id: str
    position: int
    """Where the assistant message that holds the call stands in the draft's messages."""
    rope: Rope
    owner: str | None = None
    """As :attr:`OpenText.owner`."""


_OpenT = TypeVar("_OpenT", OpenText, OpenCall)


def with_rope(o: _OpenT, rope: Rope) -> _OpenT:
    """``o`` with its rope replaced."""
    if isinstance(o, OpenText):
        return _tuple_new(OpenText, (o[0], o[1], rope, o[3], o[4]))
    return _tuple_new(OpenCall, (o[0], o[1], rope, o[3]))


_tuple_new = tuple.__new__


def _repeated(messages: Iterable[Message]) -> set[str]:
    """The message ids, and the tool call ids, that ``messages`` hold more than once."""
    seen: set[str] = set()
    calls: set[str] = set()
    twice: set[str] = set()
    for m in messages:
        if m.id in seen:
            twice.add(m.id)
        seen.add(m.id)
        for c in (m.tool_calls or ()) if isinstance(m, AssistantMessage) else ():
            if c.id in calls:
                twice.add(c.id)
            calls.add(c.id)
    return twice


class IdHints:
    """Where a draft's messages stand, by id: a hint that makes a lookup O(1).

    Shared by every version of one run's draft and only ever added to, like a
    rope's memo: no version's value changes. A hint is checked against the
    messages before it is used, so a stale one (from a sibling version the
    caller also stepped) costs a scan, never a wrong answer; an id with no hint
    was never appended to any version, so it is not there. An id noted twice (a
    duplicate in some version: a reused ``messageId``, or an application's own
    history) is never trusted: which of its messages is the newest depends on
    the version, so a lookup scans.
    """

    __slots__ = ("_at", "_calls", "_twice")

    def __init__(self, messages: Iterable[Message] = (), start: int = 0) -> None:
        self._at: dict[str, int] = {}
        self._calls: dict[str, int] = {}  # tool call id -> its holder's position
        self._twice: set[str] = set()  # ids, of messages or calls, noted more than once
        added = calls = 0
        for n, m in enumerate(messages, start):
            self._at[m.id] = n
            added += 1
            if isinstance(m, AssistantMessage) and m.tool_calls:
                self._calls.update(dict.fromkeys((c.id for c in m.tool_calls), n))
                calls += len(m.tool_calls)
        if len(self._at) < added or len(self._calls) < calls:  # rare: find them
            self._twice = _repeated(messages)

    def note(self, message_id: str, position: int) -> None:
        if message_id in self._at:
            self._twice.add(message_id)
        self._at[message_id] = position

    def get(self, message_id: str) -> int | None:
        return self._at.get(message_id)

    def note_call(self, tool_call_id: str, position: int) -> None:
        if tool_call_id in self._calls:
            self._twice.add(tool_call_id)
        self._calls[tool_call_id] = position

    def call(self, tool_call_id: str) -> int | None:
        """Where the message holding call ``tool_call_id`` stands, if it was ever added."""
        return self._calls.get(tool_call_id)

    def once(self, item_id: str) -> bool:
        """Whether ``item_id`` was noted once only, so a hint that checks out is it."""
        return item_id not in self._twice

    def __repr__(self) -> str:
        return f"IdHints({len(self._at)} ids, {len(self._calls)} calls)"


_NO_OWNERS = PMap.from_frozen_items(())


@attrs.frozen(slots=False)
class Stream:
    """What an acknowledged run has streamed: committed only when it finishes (R-A1)."""

    messages: PVec[Message]
    state: JSON
    open_texts: tuple[OpenText, ...] = ()
    open_calls: tuple[OpenCall, ...] = ()
    new_calls: PVec[str] = attrs.field(factory=PVec.empty)
    """Tool call ids started by this run, in order (R-D5 eligibility)."""
    base: int = 0
    """Messages from this index on were added by this run (committed ones come before);
    0 once a ``MESSAGES_SNAPSHOT`` made the whole history the run's."""
    steps: tuple[tuple[str | None, str], ...] = ()
    """Steps open, as ``(subagent run id, step name)``, in the order they started:
    AG-UI 1.0 fails a run that finishes with one open (an interrupted run aside)."""
    chunks: tuple[tuple[str | None, str, str], ...] = ()
    """Chunk streams open, as ``(lane, kind, id)``: the lane a ``subagentRunId`` (None:
    the parent agent), the kind ``"text"``, ``"reasoning"`` or ``"call"``. AG-UI 1.0
    (Streaming): one at most a lane, ended by any other event of its lane but a few,
    all by a ``MESSAGES_SNAPSHOT``, and by the run's finish (``stream.end_chunks``)."""
    adrift: tuple[tuple[str, str, str | None], ...] = ()
    """Items a ``MESSAGES_SNAPSHOT`` left no place for while a START-opened stream of
    theirs was open, as ``(kind, id, owner)``, the kind ``"text"``, ``"reasoning"`` or
    ``"call"``: still open (the producer ends them, and must before the finish), but
    what they stream has nowhere to go and is dropped; the snapshot warned."""
    fresh: int = 0
    """Messages from this index on were made by this run's events since its acknowledgement
    or its last ``MESSAGES_SNAPSHOT``: each one's attribution is its opener's."""
    owners: PMap = attrs.field(factory=lambda: _NO_OWNERS)
    """Who opened the other messages this run opened (a ``*_START`` reopening an earlier
    run's, an ``ACTIVITY_SNAPSHOT`` replacing one, what this run opened before a
    ``MESSAGES_SNAPSHOT``), by id: ``subagentRunId``, None for the parent agent. AG-UI
    1.0 (Subagents, Ownership) tracks ownership within a run: a reopening, or a call,
    under another owner is refused. An earlier run's message that no event of this run
    opened, or that a snapshot merely restates, has no owner here (tracking resets)."""
    ids: IdHints = attrs.field(factory=IdHints, eq=False, repr=False)
    """Positions of the messages and calls, the history's included, by id (see
    :class:`IdHints`): a run may reopen or extend an earlier run's (AG-UI 1.0)."""


RunKind = Literal["first", "resume", "follow_up"]


@attrs.frozen
class Attempt:
    id: int
    run_id: str
    number: int
    """1 for the first attempt of a logical run; the retry budget counts these."""
    sent: bool = False
    """The driver announced the send (``SendStarting``) and it was not withdrawn."""
    acked: bool = False


@attrs.frozen(slots=False)
class Run:
    """One logical run: its captured request, its current attempt, what it streamed."""

    kind: RunKind
    template: RunAgentInput
    """The request as captured; retries change only ``run_id`` (R-F2)."""
    attempt: Attempt | None
    """None while waiting for a retry timer."""
    attempts: int = 1
    """Attempts started so far; the retry budget counts these (R-F1)."""
    retry_timer: int | None = None
    retry_cause: InterludeError | None = None
    """The failure of the latest attempt that was retried (None before any retry)."""
    retry_due: float | None = None
    """When the retry timer fires (None unless waiting for it)."""


@attrs.frozen
class ToolTask:
    task: int
    tool_call_id: str
    name: str
    result: ToolMessage | None = None


@attrs.frozen
class ToolRound:
    """Local tools of one finished run, running concurrently; results in call order.

    The tasks' numbers are consecutive, in call order, so a result finds its task by
    subtraction and is stored in O(log n): a round of thousands of calls costs no more
    per result than a round of one.
    """

    tasks: PVec[ToolTask]
    waiting: int
    """Tasks without a result yet."""

    @property
    def done(self) -> bool:
        return self.waiting == 0

    def find(self, task: int) -> int | None:
        """The position of running task ``task``, or None (unknown, or finished)."""
        if not self.tasks or type(task) is not int:
            return None
        n = task - self.tasks[0].task
        if 0 <= n < len(self.tasks) and (t := self.tasks[n]).task == task and t.result is None:
            return n
        return None

    def finish(self, n: int, result: ToolMessage) -> ToolRound:
        """This round with the task at position ``n`` given its ``result``."""
        t = self.tasks[n]
        return ToolRound(self.tasks.set(n, evolve(t, result=result)), self.waiting - 1)


@attrs.frozen
class CompletionInput:
    """A completion's input value (a wrapper, so that ``None`` is a real input)."""

    value: JSON


@attrs.frozen(kw_only=True, slots=False)
class State:
    options: Options
    serial: int = 0
    """The source of every generated id: incremented, never reused (R-A2)."""
    thread_id: str | None = None
    checkpoint: Checkpoint
    batch: Batch | None = None
    claim: Claim | None = None
    resuming: bool = False
    """A resumed interaction is under way: from the claim until it settles (R-C4)."""
    run: Run | None = None
    draft: Stream | None = None
    """What the current attempt streamed since its RUN_STARTED: set at the acknowledgement,
    None whenever ``run`` is (kept beside ``run``, not in it, so that a content event copies
    one record less)."""
    tools: ToolRound | None = None
    tool_rounds: int = 0
    """Follow-up runs made so far in the current interaction."""
    lingering: frozenset[int] = frozenset()
    """Attempts whose run finished but whose stream is open: a late RUN_ERROR is read."""
    expiry_timer: int | None = None
    needs_new_thread: bool = False
    error: InterludeError | None = None
    warnings: tuple[str, ...] = ()
    input: CompletionInput | None = None
    """Completion resources: the current input (R-E)."""
    answered: CompletionInput | None = None
    """Completion resources: the input the last completion started with."""
    settled: bool = False
    """Completion resources: whether the completion of ``answered`` succeeded."""


# -- fast copies for the hot path -----------------------------------------------------
#
# ``attrs.evolve`` inspects the class on every call; a content event copies three
# objects, so the streaming path uses these instead: each is generated once, for
# one class and one field.
#
# State, Run and Stream keep their fields in a ``__dict__`` (``slots=False``):
# copying one is a single C-level dict copy, where a slotted class needs a
# Python-level store per field (State has 19). Small records stay slotted.

_T = TypeVar("_T")
_set_dict = object.__dict__["__setattr__"]


def replacer(cls: type[_T], field: str) -> Callable[[_T, Any], _T]:
    names = [a.name for a in attrs.fields(cls)]  # type: ignore[arg-type]
    if field not in names:
        raise AttributeError(f"{cls.__name__} has no field {field!r}")
    fn: Callable[[_T, Any], _T] = _generate(
        cls,
        "old, value",
        lambda n: "value" if n == field else f"old.{n}",
        f"d[{field!r}] = value",
    )
    fn.__doc__ = f"A copy of a {cls.__name__} with {field} replaced (a fast attrs.evolve)."
    return fn


def _copier(cls: type[_T]) -> Callable[[_T, dict[str, Any]], _T]:
    """A generated ``attrs.evolve`` for one class: checks names, then copies once."""
    names = frozenset(a.name for a in attrs.fields(cls))  # type: ignore[arg-type]
    check = "    if not changes.keys() <= _fields:\n        _unknown(_cls, changes)\n"
    fn: Callable[[_T, dict[str, Any]], _T] = _generate(
        cls,
        "old, changes",
        lambda n: f"changes[{n!r}] if {n!r} in changes else old.{n}",
        "d.update(changes)",
        check,
        {"_fields": names, "_unknown": _unknown_fields},
    )
    return fn


def _generate(
    cls: type[_T],
    params: str,
    value_of: Callable[[str], str],
    update: str,
    prelude: str = "",
    names: dict[str, Any] | None = None,
) -> Any:
    """A function ``copy(params)`` returning a new ``cls``: a slotted class gets each field
    stored from ``value_of(field)``; a dict-backed one a copy of ``old.__dict__`` changed
    by the statement ``update`` (on ``d``). Generated from field names only.

    The copy stores values as given, so it serves only classes with nothing to run on
    construction: one with a validator, converter or post-init hook is refused here, at
    import, rather than have its checks skipped silently.
    """
    if hasattr(cls, "__attrs_post_init__") or any(
        a.validator is not None or a.converter is not None
        for a in attrs.fields(cls)  # type: ignore[arg-type]
    ):
        raise TypeError(f"{cls.__name__} checks its fields: use attrs.evolve for it")
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_set_dict": _set_dict}
    env.update(names or {})
    if "__slots__" in cls.__dict__:
        stores = []
        for a in attrs.fields(cls):  # type: ignore[arg-type]
            env[f"_set_{a.name}"] = getattr(cls, a.name).__set__
            stores.append(f"    _set_{a.name}(new, {value_of(a.name)})")
        body = "\n".join(stores)
    else:
        body = f"    d = old.__dict__.copy()\n    {update}\n    _set_dict(new, '__dict__', d)"
    exec(f"def copy({params}):\n{prelude}    new = _new(_cls)\n{body}\n    return new\n", env)
    return env["copy"]


def _unknown_fields(cls: type, changes: dict[str, Any]) -> None:
    names = {a.name for a in attrs.fields(cls)}
    unknown = ", ".join(sorted(set(changes) - names))
    raise TypeError(f"{cls.__name__} has no field(s) {unknown}")


def evolve(obj: _T, **changes: Any) -> _T:
    """``attrs.evolve`` without its per-call introspection, for the reducer's records and
    the messages it builds (other attrs classes go to ``attrs.evolve``)."""
    copier = _COPIERS.get(type(obj))
    return attrs.evolve(obj, **changes) if copier is None else copier(obj, changes)  # type: ignore[misc]


_COPIERS: dict[type[Any], Callable[[Any, dict[str, Any]], Any]] = {
    cls: _copier(cls)
    for cls in (
        State,
        Run,
        Stream,
        Attempt,
        Checkpoint,
        ToolTask,
        AssistantMessage,
        ToolCall,
        FunctionCall,
        ActivityMessage,
    )
}


with_draft: Callable[[State, Stream], State] = replacer(State, "draft")
with_open_texts: Callable[[Stream, tuple[OpenText, ...]], Stream] = replacer(Stream, "open_texts")
with_open_calls: Callable[[Stream, tuple[OpenCall, ...]], Stream] = replacer(Stream, "open_calls")
with_state: Callable[[Stream, JSON], Stream] = replacer(Stream, "state")
