"""Every public fact of a resource, derived from the state and never stored twice.

Selectors are cheap: none walks the history. ``messages`` returns a view that
shows a streaming message's text as far as it has arrived, joining its
deltas only when that message is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from .errors import InterludeError
from .json import JSON
from .pvec import PVec
from .state import Batch, State, Stream
from .stream import WITH_CONTENT as _WITH_CONTENT
from .stream import with_arguments
from .wire.messages import AssistantMessage, Message

__all__ = [
    "MessageView",
    "attempts",
    "error",
    "expired_interrupt_ids",
    "input_value",
    "is_expired",
    "is_loading",
    "is_resuming",
    "is_retrying",
    "messages",
    "needs_new_thread",
    "output",
    "pending_interrupts",
    "retry_cause",
    "retry_due",
    "shared_state",
    "thread_id",
]


class MessageView(Sequence[Message]):
    """The history as a read-only sequence; open messages show their text so far.

    Lazy: building the view costs nothing, and an open message's text is joined
    only when that message is read.
    """

    __slots__ = ("_base", "_len", "_open")

    def __init__(self, base: PVec[Message], stream: Stream | None = None) -> None:
        # Built on every read of ``messages``: plain slot stores, no helper calls.
        self._base = base
        self._len = base._count  # len(base), without the dunder dispatch
        # Only a stream with open messages or calls has text a read must join.
        self._open = (
            stream if stream is not None and (stream.open_texts or stream.open_calls) else None
        )

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if type(index) is not int and isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        try:
            message = self._base[index]
        except IndexError:
            raise IndexError("message index out of range") from None
        if self._open is None:
            return message
        return _as_streamed(self._open, index if index >= 0 else index + self._len, message)

    def __iter__(self) -> Iterator[Message]:
        if self._open is None:
            return iter(self._base)
        stream = self._open
        return (_as_streamed(stream, i, m) for i, m in enumerate(self._base))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"


def _as_streamed(stream: Stream, index: int, message: Message) -> Message:
    """``message`` at ``index`` with the text and arguments streamed into it so far."""
    for o in stream.open_texts:
        if o.position == index:
            message = _WITH_CONTENT[type(message)](message, o.rope.text())
            break
    for c in stream.open_calls:
        if c.position == index and isinstance(message, AssistantMessage):
            message = with_arguments(message, c.tool_call_id, c.rope.text())
    return message


def messages(s: State) -> MessageView:
    """The committed history, plus what the run in progress has streamed so far."""
    stream = s.draft
    return MessageView(s.checkpoint.messages if stream is None else stream.messages, stream)


def shared_state(s: State) -> JSON:
    """The shared state: as streamed by the run in progress, else as committed."""
    stream = s.draft
    return stream.state if stream is not None else s.checkpoint.state


def pending_interrupts(s: State) -> Batch | None:
    """The batch awaiting answers, or claimed until its acknowledgement (R-A7, R-C3)."""
    return s.batch


def is_loading(s: State) -> bool:
    """A run, a retry wait or a local tool is in progress (R-C4)."""
    return s.run is not None or s.tools is not None


def is_retrying(s: State) -> bool:
    """Waiting out a back-off before the next attempt of the current run (R-F1)."""
    return s.run is not None and s.run.attempt is None


def retry_cause(s: State) -> InterludeError | None:
    """The failure the current run last retried after: while it waits (``is_retrying``)
    and during the attempt that follows; None on a first attempt or when idle (R-F1)."""
    return s.run.retry_cause if s.run is not None else None


def retry_due(s: State) -> float | None:
    """When the waiting retry goes out (the driver's clock); None unless ``is_retrying``."""
    return s.run.retry_due if s.run is not None else None


def attempts(s: State) -> int:
    """Attempts the current run has started so far (0 when no run is in progress)."""
    return s.run.attempts if s.run is not None else 0


def is_resuming(s: State) -> bool:
    """From the claim until the resumed interaction settles (R-C2, R-C4)."""
    return s.resuming


def error(s: State) -> InterludeError | None:
    return s.error


def thread_id(s: State) -> str | None:
    return s.thread_id


def needs_new_thread(s: State) -> bool:
    """Recovery: only ``set_thread_id`` with a different id goes on (R-F5)."""
    return s.needs_new_thread


def expired_interrupt_ids(s: State, now: float) -> tuple[str, ...]:
    return s.batch.expired_ids(now) if s.batch is not None else ()


def is_expired(s: State, now: float) -> bool:
    """The pending batch has an expired interrupt and cannot be resumed (R-G1)."""
    return s.batch is not None and s.batch.is_expired(now)


def input_value(s: State) -> JSON:
    """A completion's current input (None when none was set)."""
    return s.input.value if s.input is not None else None


def output(s: State) -> str | None:
    """A completion's output: the text of the newest assistant message, if any."""
    view = messages(s)
    for n in range(len(view) - 1, -1, -1):
        m = view[n]
        if isinstance(m, AssistantMessage):
            return m.content
        if m.role == "user":
            return None
    return None
