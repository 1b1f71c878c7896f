"""What the reducer asks adapters to do. Imperative names; adapters decide nothing."""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

from .json import JSON
from .wire.run_input import RunAgentInput

__all__ = [
    "AbortAttempt",
    "CancelTimer",
    "CancelTool",
    "Command",
    "RunTool",
    "StartAttempt",
    "StartTimer",
]


@attrs.frozen
class StartAttempt:
    """POST ``run_input`` and feed its stream back tagged with ``attempt``.

    Before transmitting, feed ``SendStarting(attempt)``; if that step answers
    ``AbortAttempt(attempt)``, send nothing.
    """

    attempt: int
    run_input: RunAgentInput


@attrs.frozen
class AbortAttempt:
    """Close attempt ``attempt``'s stream now (or never open it)."""

    attempt: int


@attrs.frozen
class StartTimer:
    """Feed ``TimerFired(timer)`` when the clock reaches ``due`` (seconds)."""

    timer: int
    due: float
    purpose: Literal["retry", "expiry"]


@attrs.frozen
class CancelTimer:
    timer: int


@attrs.frozen
class RunTool:
    """Run local tool ``name`` with parsed ``arguments``; feed ``ToolFinished(task)``."""

    task: int
    tool_call_id: str
    name: str
    arguments: JSON


@attrs.frozen
class CancelTool:
    task: int


Command: TypeAlias = StartAttempt | AbortAttempt | StartTimer | CancelTimer | RunTool | CancelTool
