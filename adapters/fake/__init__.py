"""Deterministic fake transports, a fake clock and a step-by-step driver for tests.

See ``docs/testing.md`` for a walkthrough.
"""

from .driver import FAKE_EPOCH, FakeClock, FakeDriver, ScriptedAgent, ToolFunction
from .script import (
    Reply,
    Request,
    drop,
    finished,
    held,
    interrupted,
    refuse,
    reply,
    run_error,
    started,
    state_delta,
    state_snapshot,
    text,
    tool_call,
)

__all__ = [
    "FAKE_EPOCH",
    "FakeClock",
    "FakeDriver",
    "Reply",
    "Request",
    "ScriptedAgent",
    "ToolFunction",
    "drop",
    "finished",
    "held",
    "interrupted",
    "refuse",
    "reply",
    "run_error",
    "started",
    "state_delta",
    "state_snapshot",
    "text",
    "tool_call",
]
