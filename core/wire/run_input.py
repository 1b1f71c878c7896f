"""The request a run starts from, and the interrupts and answers of a pause.

:class:`RunAgentInput` is what the client POSTs; :class:`Interrupt` is one
question of a ``RUN_FINISHED`` interrupt outcome; :class:`ResumeEntry` is one
answer, sent back in ``RunAgentInput.resume`` (R-B1, R-B6).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Literal, TypeAlias, Union

import attrs

from ..json import JSON, FrozenDict
from ..rfc3339 import parse_rfc3339
from .messages import Message

__all__ = [
    "ABSENT",
    "Absent",
    "Context",
    "Interrupt",
    "ResumeEntry",
    "ResumeStatus",
    "RunAgentInput",
    "Tool",
]


class Absent(enum.Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT
"""No payload at all, as opposed to ``None``, which is sent as ``"payload": null``."""

ResumeStatus: TypeAlias = Literal["resolved", "cancelled"]


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the agent may call; ``parameters`` is its JSON Schema (absent: ``None``)."""

    name: str
    description: str
    parameters: JSON = None
    metadata: FrozenDict | None = None


@attrs.frozen(kw_only=True)
class Context:
    """A named piece of ambient information for the run."""

    description: str
    value: str


@attrs.frozen(kw_only=True)
class ResumeEntry:
    """The answer to one interrupt.

    ``payload`` is :data:`ABSENT` when not given; any JSON value, ``None``
    included, is a given payload (R-B1).
    """

    interrupt_id: str
    status: ResumeStatus
    # Union, not |: JSON is a string alias at run time, and cattrs resolves this.
    payload: Union[JSON, Absent] = ABSENT  # noqa: UP007
    metadata: FrozenDict | None = None


def _epoch(self: Interrupt) -> float | None:
    return None if self.expires_at is None else parse_rfc3339(self.expires_at)


@attrs.frozen(kw_only=True)
class Interrupt:
    """One question of an interrupt outcome (R-A3: absent stays ``None``, ``""`` is kept).

    ``expires_at_epoch`` is ``expires_at`` in epoch seconds, computed once so
    expiry checks (R-G1) are a comparison; constructing an interrupt whose
    ``expires_at`` is not an RFC 3339 date-time with a zone raises ``ValueError``.
    """

    id: str
    reason: str
    message: str | None = None
    tool_call_id: str | None = None
    response_schema: FrozenDict | None = None
    expires_at: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None
    expires_at_epoch: float | None = attrs.field(
        init=False, eq=False, default=attrs.Factory(_epoch, takes_self=True)
    )


@attrs.frozen(kw_only=True)
class RunAgentInput:
    """A request to run the agent (also echoed in ``RUN_STARTED.input``).

    ``protocol_version`` is ``None`` only when a decoded input had none.
    """

    thread_id: str
    run_id: str
    state: JSON = None
    messages: Sequence[Message] = ()
    """Any immutable sequence: the runtime passes its persistent history as is, so
    capturing a request never copies a long history."""
    tools: tuple[Tool, ...] = ()
    context: tuple[Context, ...] = ()
    forwarded_props: JSON = None
    resume: tuple[ResumeEntry, ...] | None = None
    parent_run_id: str | None = None
    protocol_version: str | None = "1.0"
