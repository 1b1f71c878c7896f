"""The AG-UI 1.0 events, one frozen class per event type (R-J1).

Each class names its wire ``type`` in the class attribute ``TYPE`` and is
named like AG-UI's own (``TEXT_MESSAGE_CONTENT`` is :class:`TextMessageContent`).
Optional fields default to ``None``, meaning the key was absent. JSON-valued
fields (snapshots, patches, values, results, metadata, raw events) hold
frozen JSON, so events can be kept in states and shared without copying.

An event type AG-UI 1.0 does not define becomes :class:`UnknownEvent` and
an outcome type it does not define becomes :class:`UnknownOutcome`: both are
tolerated, never errors (R-J1, R-J5).
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from ..json import JSON, FrozenDict
from .messages import Content, Message
from .run_input import Interrupt, RunAgentInput

__all__ = [
    "EVENT_TYPES",
    "ActivityDelta",
    "ActivitySnapshot",
    "CancelledOutcome",
    "Custom",
    "Event",
    "InterruptOutcome",
    "MessagesSnapshot",
    "Outcome",
    "Raw",
    "ReasoningEncryptedValue",
    "ReasoningEnd",
    "ReasoningMessageChunk",
    "ReasoningMessageContent",
    "ReasoningMessageEnd",
    "ReasoningMessageStart",
    "ReasoningStart",
    "RunError",
    "RunFinished",
    "RunStarted",
    "StateDelta",
    "StateSnapshot",
    "StepFinished",
    "StepStarted",
    "SubagentError",
    "SubagentFinished",
    "SubagentStarted",
    "SuccessOutcome",
    "TextMessageChunk",
    "TextMessageContent",
    "TextMessageEnd",
    "TextMessageStart",
    "ToolCallArgs",
    "ToolCallChunk",
    "ToolCallEnd",
    "ToolCallResult",
    "ToolCallStart",
    "UnknownEvent",
    "UnknownOutcome",
]


@attrs.frozen(kw_only=True)
class _Base:
    """The fields every event may carry. ``timestamp`` is kept as sent (an integer within
    2**53 - 1 of zero; ``5.0`` counts as one, as in JSON Schema)."""

    timestamp: int | float | None = None
    raw_event: JSON = None
    metadata: FrozenDict | None = None


@attrs.frozen(kw_only=True)
class _Attributed(_Base):
    """An event that may belong to a subagent's work."""

    subagent_run_id: str | None = None


# -- text messages -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TextMessageStart(_Attributed):
    """Opens a streamed text message; an absent ``role`` means assistant."""

    TYPE: ClassVar[str] = "TEXT_MESSAGE_START"
    message_id: str
    role: str | None = None
    name: str | None = None


@attrs.frozen(kw_only=True)
class TextMessageContent(_Attributed):
    """Appends ``delta`` (possibly empty) to an open text message."""

    TYPE: ClassVar[str] = "TEXT_MESSAGE_CONTENT"
    message_id: str
    delta: str


@attrs.frozen(kw_only=True)
class TextMessageEnd(_Attributed):
    TYPE: ClassVar[str] = "TEXT_MESSAGE_END"
    message_id: str


@attrs.frozen(kw_only=True)
class TextMessageChunk(_Attributed):
    """Start, content and end in one; a continuation omits what has not changed."""

    TYPE: ClassVar[str] = "TEXT_MESSAGE_CHUNK"
    message_id: str | None = None
    role: str | None = None
    delta: str | None = None
    name: str | None = None


# -- tool calls ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolCallStart(_Attributed):
    TYPE: ClassVar[str] = "TOOL_CALL_START"
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallArgs(_Attributed):
    TYPE: ClassVar[str] = "TOOL_CALL_ARGS"
    tool_call_id: str
    delta: str


@attrs.frozen(kw_only=True)
class ToolCallEnd(_Attributed):
    TYPE: ClassVar[str] = "TOOL_CALL_END"
    tool_call_id: str


@attrs.frozen(kw_only=True)
class ToolCallChunk(_Attributed):
    TYPE: ClassVar[str] = "TOOL_CALL_CHUNK"
    tool_call_id: str | None = None
    tool_call_name: str | None = None
    parent_message_id: str | None = None
    delta: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallResult(_Attributed):
    """What a tool returned; it becomes the tool message ``message_id``."""

    TYPE: ClassVar[str] = "TOOL_CALL_RESULT"
    message_id: str
    tool_call_id: str
    content: Content
    role: str | None = None


# -- state, messages, activities -----------------------------------------------


@attrs.frozen(kw_only=True)
class StateSnapshot(_Attributed):
    TYPE: ClassVar[str] = "STATE_SNAPSHOT"
    snapshot: JSON


@attrs.frozen(kw_only=True)
class StateDelta(_Attributed):
    """An RFC 6902 patch; each operation is a frozen object, checked when applied."""

    TYPE: ClassVar[str] = "STATE_DELTA"
    delta: tuple[FrozenDict, ...]


@attrs.frozen(kw_only=True)
class MessagesSnapshot(_Base):
    TYPE: ClassVar[str] = "MESSAGES_SNAPSHOT"
    messages: tuple[Message, ...]


@attrs.frozen(kw_only=True)
class ActivitySnapshot(_Attributed):
    """An activity's content; ``replace=False`` keeps an existing one."""

    TYPE: ClassVar[str] = "ACTIVITY_SNAPSHOT"
    message_id: str
    activity_type: str
    content: FrozenDict
    replace: bool | None = None


@attrs.frozen(kw_only=True)
class ActivityDelta(_Attributed):
    TYPE: ClassVar[str] = "ACTIVITY_DELTA"
    message_id: str
    activity_type: str
    patch: tuple[FrozenDict, ...]


# -- pass-through --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Raw(_Attributed):
    TYPE: ClassVar[str] = "RAW"
    event: JSON
    source: str | None = None


@attrs.frozen(kw_only=True)
class Custom(_Attributed):
    TYPE: ClassVar[str] = "CUSTOM"
    name: str
    value: JSON


# -- lifecycle -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SuccessOutcome:
    """The run completed; ``pending_tool_call_ids`` names calls left to the client (R-J6)."""

    TYPE: ClassVar[str] = "success"
    pending_tool_call_ids: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class InterruptOutcome:
    """The run is paused on these interrupts, in the server's order (never empty, R-A6)."""

    TYPE: ClassVar[str] = "interrupt"
    interrupts: tuple[Interrupt, ...]


@attrs.frozen(kw_only=True)
class CancelledOutcome:
    """The run was stopped without failing; nothing is waited for (R-J5)."""

    TYPE: ClassVar[str] = "cancelled"


@attrs.frozen(kw_only=True)
class UnknownOutcome:
    """An outcome type AG-UI 1.0 does not define: read as success (R-J5)."""

    type: str
    raw: FrozenDict


Outcome: TypeAlias = SuccessOutcome | InterruptOutcome | CancelledOutcome | UnknownOutcome


@attrs.frozen(kw_only=True)
class RunStarted(_Base):
    TYPE: ClassVar[str] = "RUN_STARTED"
    thread_id: str
    run_id: str
    parent_run_id: str | None = None
    protocol_version: str | None = None
    input: RunAgentInput | None = None


@attrs.frozen(kw_only=True)
class RunFinished(_Base):
    """Closes a run that did not fail; an absent ``outcome`` (``None``) means success."""

    TYPE: ClassVar[str] = "RUN_FINISHED"
    thread_id: str
    run_id: str
    result: JSON = None
    outcome: Outcome | None = None
    usage: tuple[FrozenDict, ...] | None = None


@attrs.frozen(kw_only=True)
class RunError(_Base):
    TYPE: ClassVar[str] = "RUN_ERROR"
    message: str
    code: str | None = None
    usage: tuple[FrozenDict, ...] | None = None


@attrs.frozen(kw_only=True)
class StepStarted(_Attributed):
    TYPE: ClassVar[str] = "STEP_STARTED"
    step_name: str


@attrs.frozen(kw_only=True)
class StepFinished(_Attributed):
    TYPE: ClassVar[str] = "STEP_FINISHED"
    step_name: str


# -- reasoning -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReasoningStart(_Attributed):
    TYPE: ClassVar[str] = "REASONING_START"
    message_id: str


@attrs.frozen(kw_only=True)
class ReasoningMessageStart(_Attributed):
    TYPE: ClassVar[str] = "REASONING_MESSAGE_START"
    message_id: str
    role: str = "reasoning"


@attrs.frozen(kw_only=True)
class ReasoningMessageContent(_Attributed):
    TYPE: ClassVar[str] = "REASONING_MESSAGE_CONTENT"
    message_id: str
    delta: str


@attrs.frozen(kw_only=True)
class ReasoningMessageEnd(_Attributed):
    TYPE: ClassVar[str] = "REASONING_MESSAGE_END"
    message_id: str


@attrs.frozen(kw_only=True)
class ReasoningMessageChunk(_Attributed):
    TYPE: ClassVar[str] = "REASONING_MESSAGE_CHUNK"
    message_id: str | None = None
    delta: str | None = None


@attrs.frozen(kw_only=True)
class ReasoningEnd(_Attributed):
    TYPE: ClassVar[str] = "REASONING_END"
    message_id: str


@attrs.frozen(kw_only=True)
class ReasoningEncryptedValue(_Attributed):
    """An opaque reasoning artefact for a message or tool call (``subtype``)."""

    TYPE: ClassVar[str] = "REASONING_ENCRYPTED_VALUE"
    subtype: str
    entity_id: str
    encrypted_value: str


# -- subagents -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SubagentStarted(_Base):
    TYPE: ClassVar[str] = "SUBAGENT_STARTED"
    subagent_run_id: str
    name: str
    description: str | None = None
    parent_subagent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None


@attrs.frozen(kw_only=True)
class SubagentFinished(_Base):
    """A subagent invocation ended; ``outcome`` is kept as a frozen object."""

    TYPE: ClassVar[str] = "SUBAGENT_FINISHED"
    subagent_run_id: str
    result: JSON = None
    outcome: FrozenDict | None = None


@attrs.frozen(kw_only=True)
class SubagentError(_Base):
    TYPE: ClassVar[str] = "SUBAGENT_ERROR"
    subagent_run_id: str
    message: str
    code: str | None = None


@attrs.frozen(kw_only=True)
class UnknownEvent:
    """An event type AG-UI 1.0 does not define, kept whole (R-J1)."""

    type: str
    raw: FrozenDict

    @property
    def TYPE(self) -> str:
        """The wire type, like the ``TYPE`` every event class has."""
        return self.type


Event: TypeAlias = (
    TextMessageStart
    | TextMessageContent
    | TextMessageEnd
    | TextMessageChunk
    | ToolCallStart
    | ToolCallArgs
    | ToolCallEnd
    | ToolCallChunk
    | ToolCallResult
    | StateSnapshot
    | StateDelta
    | MessagesSnapshot
    | ActivitySnapshot
    | ActivityDelta
    | Raw
    | Custom
    | RunStarted
    | RunFinished
    | RunError
    | StepStarted
    | StepFinished
    | ReasoningStart
    | ReasoningMessageStart
    | ReasoningMessageContent
    | ReasoningMessageEnd
    | ReasoningMessageChunk
    | ReasoningEnd
    | ReasoningEncryptedValue
    | SubagentStarted
    | SubagentFinished
    | SubagentError
    | UnknownEvent
)

EVENT_TYPES: tuple[type[Event], ...] = (
    TextMessageStart,
    TextMessageContent,
    TextMessageEnd,
    TextMessageChunk,
    ToolCallStart,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallChunk,
    ToolCallResult,
    StateSnapshot,
    StateDelta,
    MessagesSnapshot,
    ActivitySnapshot,
    ActivityDelta,
    Raw,
    Custom,
    RunStarted,
    RunFinished,
    RunError,
    StepStarted,
    StepFinished,
    ReasoningStart,
    ReasoningMessageStart,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageChunk,
    ReasoningEnd,
    ReasoningEncryptedValue,
    SubagentStarted,
    SubagentFinished,
    SubagentError,
)
"""The 31 AG-UI 1.0 event classes (not :class:`UnknownEvent`)."""
