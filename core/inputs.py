"""Everything the reducer accepts, in three families (the design card).

*Intents* come from the application and are imperative (``Resume``).
*Wire inputs* carry what an attempt's stream delivered, tagged with the
attempt that received it. *World events* are what adapters report, in the
past tense (``StreamEnded``, ``TimerFired``). Intents may be rejected with an
exception; wire inputs and world events never raise: bad data becomes an
error recorded in the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

import attrs

from .errors import ProtocolError, TransportError
from .options import Options
from .wire.events import Event
from .wire.messages import Message, UserMessage

__all__ = [
    "AttemptFailed",
    "Configure",
    "EventReceived",
    "FrameReceived",
    "Input",
    "Intent",
    "ObserverFailed",
    "Reload",
    "Resume",
    "Send",
    "SendStarting",
    "SetInput",
    "SetMessages",
    "SetState",
    "SetThreadId",
    "Stop",
    "StreamEnded",
    "TimerFired",
    "ToolFinished",
    "WorldEvent",
]

# -- intents -------------------------------------------------------------------


@attrs.frozen
class Send:
    """Append a user message and run.

    ``content`` is text, a ``UserMessage`` (kept as it is, id included), or a
    list of AG-UI content parts (objects with a string ``type``).
    """

    content: str | UserMessage | Sequence[Any]
    message_id: str | None = None


STOP_CALLED = "stop() was called"
"""What a cancelled tool call's result names when the application called ``stop()``."""


@attrs.frozen
class SetMessages:
    """Replace the history; run if it ends with a user or tool message."""

    messages: Sequence[Message]


@attrs.frozen
class Reload:
    """Drop the last assistant turn and run again from the last user message."""


@attrs.frozen
class Stop:
    """End the run and any local tools in progress, keeping what was committed.

    ``why``: the cause a cancelled tool call's result gives ("Error: cancelled:
    <why> before the tool returned"); a driver that stops its resources as it
    closes says so rather than naming a ``stop()`` the application never called.
    """

    why: str = STOP_CALLED


@attrs.frozen
class SetState:
    """Replace the shared state without running (allowed while paused, R-D1)."""

    state: Any


@attrs.frozen
class Resume:
    """Answer every interrupt of batch ``batch_id`` (R-B1).

    ``entries`` are mappings with ``interrupt_id``, ``status``, optional
    ``payload`` and ``metadata``, or :class:`~interlude.core.wire.ResumeEntry`
    values. They are checked and copied at claim time (R-B4).
    """

    batch_id: str
    entries: Sequence[Mapping[str, Any] | Any]


@attrs.frozen
class SetThreadId:
    """Move to another thread (None: a generated one); same id: nothing (R-H)."""

    thread_id: str | None


@attrs.frozen
class SetInput:
    """A completion resource's input (R-E)."""

    value: Any


@attrs.frozen
class Configure:
    """New options; they apply to requests captured from now on (R-F2)."""

    options: Options


Intent: TypeAlias = (
    Send | SetMessages | Reload | Stop | SetState | Resume | SetThreadId | SetInput | Configure
)

# -- wire inputs ---------------------------------------------------------------


# The two wire inputs are named tuples rather than attrs classes: one is built
# per event, and a tuple is the cheapest immutable record to build.


class FrameReceived(NamedTuple):
    """The data of one SSE frame of attempt ``attempt`` (decoded by the reducer)."""

    attempt: int
    data: str


class EventReceived(NamedTuple):
    """An already-typed AG-UI event of attempt ``attempt``."""

    attempt: int
    event: Event


# -- world events --------------------------------------------------------------


@attrs.frozen
class SendStarting:
    """The adapter is about to transmit attempt ``attempt``.

    The reducer checks expiry once more here (R-F3); if it answers with
    ``AbortAttempt`` for this attempt, the adapter sends nothing.
    """

    attempt: int


@attrs.frozen
class StreamEnded:
    """Attempt ``attempt``'s response stream ended cleanly."""

    attempt: int


@attrs.frozen
class AttemptFailed:
    """Attempt ``attempt`` failed below AG-UI (or its frames could not be read)."""

    attempt: int
    error: TransportError | ProtocolError


@attrs.frozen
class TimerFired:
    timer: int


@attrs.frozen
class ToolFinished:
    """Local tool task ``task`` returned ``value`` or failed with ``error``: a message, or
    the exception itself (written as ``"TypeName: message"``, as the drivers do)."""

    task: int
    value: Any = None
    error: str | BaseException | None = None


@attrs.frozen
class ObserverFailed:
    """An application observer raised while being notified; never retried (R-F1)."""

    message: str


WorldEvent: TypeAlias = (
    SendStarting | StreamEnded | AttemptFailed | TimerFired | ToolFinished | ObserverFailed
)

Input: TypeAlias = Intent | FrameReceived | EventReceived | WorldEvent
