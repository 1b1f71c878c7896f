"""interlude.core: the pure interrupt/resume state machine.

One function decides everything::

    from interlude.core import Options, Send, initial_state, step

    state = initial_state(Options())
    t = step(state, Send("hello"), now=1_800_000_000.0)
    t.state      # the new state (the old one is unchanged)
    t.commands   # what an adapter must do: (StartAttempt(...),)

No I/O, clock, randomness or threads: time is the ``now`` argument, ids come
from a counter in the state. Read the state through the selectors
(``interlude.core.selectors``) or, more conveniently, through a resource of
an adapter (``interlude.adapters.fake``, ``interlude.adapters.trio``).
"""

from .commands import (
    AbortAttempt,
    CancelTimer,
    CancelTool,
    Command,
    RunTool,
    StartAttempt,
    StartTimer,
)
from .errors import (
    BatchClaimedError,
    BatchExpiredError,
    InterludeError,
    InterruptPendingError,
    InvalidResumeError,
    ObserverError,
    ProtocolError,
    RecoveryRequiredError,
    ResumeProblem,
    RunError,
    StaleBatchError,
    StateLockedError,
    ToolError,
    TransportError,
    UsageError,
)
from .inputs import (
    AttemptFailed,
    Configure,
    EventReceived,
    FrameReceived,
    Input,
    Intent,
    ObserverFailed,
    Reload,
    Resume,
    Send,
    SendStarting,
    SetInput,
    SetMessages,
    SetState,
    SetThreadId,
    Stop,
    StreamEnded,
    TimerFired,
    ToolFinished,
    WorldEvent,
)
from .json import JSON, FrozenDict, NotJSONError, freeze, json_default, thaw
from .options import ExpiryPolicy, Options, ResourceKind, RetryPolicy
from .pvec import PVec
from .reducer import Transition, initial_state, step
from .selectors import MessageView
from .state import Batch, State
from .wire.messages import (
    AssistantMessage,
    Message,
    ToolMessage,
    UserMessage,
)
from .wire.run_input import ABSENT, Context, Interrupt, ResumeEntry, RunAgentInput, Tool

__all__ = [
    "ABSENT",
    "JSON",
    "AbortAttempt",
    "AssistantMessage",
    "AttemptFailed",
    "Batch",
    "BatchClaimedError",
    "BatchExpiredError",
    "CancelTimer",
    "CancelTool",
    "Command",
    "Configure",
    "Context",
    "EventReceived",
    "ExpiryPolicy",
    "FrameReceived",
    "FrozenDict",
    "Input",
    "Intent",
    "InterludeError",
    "Interrupt",
    "InterruptPendingError",
    "InvalidResumeError",
    "Message",
    "MessageView",
    "NotJSONError",
    "ObserverError",
    "ObserverFailed",
    "Options",
    "PVec",
    "ProtocolError",
    "RecoveryRequiredError",
    "Reload",
    "ResourceKind",
    "Resume",
    "ResumeEntry",
    "ResumeProblem",
    "RetryPolicy",
    "RunAgentInput",
    "RunError",
    "RunTool",
    "Send",
    "SendStarting",
    "SetInput",
    "SetMessages",
    "SetState",
    "SetThreadId",
    "StaleBatchError",
    "StartAttempt",
    "StartTimer",
    "State",
    "StateLockedError",
    "Stop",
    "StreamEnded",
    "TimerFired",
    "Tool",
    "ToolError",
    "ToolFinished",
    "ToolMessage",
    "Transition",
    "TransportError",
    "UsageError",
    "UserMessage",
    "WorldEvent",
    "freeze",
    "initial_state",
    "json_default",
    "step",
    "thaw",
]
