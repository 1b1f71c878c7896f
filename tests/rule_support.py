"""Helpers shared by the rule tests: a recording fake driver, scripted replies, and a
chat paused on a batch. (Imported as ``rule_support``: pytest puts ``tests/`` on the path.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from interlude.adapters.fake import (
    FAKE_EPOCH,
    FakeClock,
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    finished,
    interrupted,
    reply,
    started,
    text,
)
from interlude.adapters.resource import Resource
from interlude.core.commands import Command, RunTool
from interlude.core.options import Options
from interlude.core.state import Batch

T0 = FAKE_EPOCH


def at(seconds: float) -> str:
    """An RFC 3339 instant ``seconds`` after the fake clock's start."""
    return datetime.fromtimestamp(T0 + seconds, UTC).isoformat().replace("+00:00", "Z")


def ask(iid: str = "approve", expires: str | None = None) -> dict[str, Any]:
    """An interrupt as the wire carries it; ``expires`` an RFC 3339 instant."""
    it: dict[str, Any] = {"id": iid, "reason": "input_required", "message": f"{iid}?"}
    if expires is not None:
        it["expiresAt"] = expires
    return it


class RecordingDriver(FakeDriver):
    """A fake driver that records every command the resources emit.

    With ``manual_tools`` the ``RunTool`` commands are not run: the test
    finishes them itself (``ToolFinished``), in any order it likes.
    """

    def __init__(
        self, agent: ScriptedAgent, *, clock: FakeClock | None = None, manual_tools: bool = False
    ) -> None:
        super().__init__(agent, clock=clock)
        self.commands: list[Command] = []
        self.tool_runs: list[RunTool] = []
        self.manual_tools = manual_tools

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        self.commands.extend(commands)
        if self.manual_tools:
            self.tool_runs.extend(c for c in commands if isinstance(c, RunTool))
            commands = [c for c in commands if not isinstance(c, RunTool)]
        super().execute(resource, commands)

    def of(self, kind: type[Any]) -> list[Any]:
        return [c for c in self.commands if isinstance(c, kind)]


def pause(*interrupts: dict[str, Any], before: Sequence[Any] = ()) -> Callable[[Request], Reply]:
    """A reply that streams ``before`` and some text, then pauses with ``interrupts``
    (one ``ask()`` by default)."""

    def answer(req: Request) -> Reply:
        return reply(
            started(req),
            *before,
            *text(f"ask-{req.run_id}", "need approval"),
            interrupted(req, *(interrupts or (ask(),))),
        )

    return answer


def succeed(
    *events: Any, hold: bool = False, outcome: dict[str, Any] | None = None
) -> Callable[[Request], Reply]:
    """A reply that streams ``events`` and some text, then finishes (with ``outcome``)."""

    def answer(req: Request) -> Reply:
        return reply(
            started(req),
            *events,
            *text(f"done-{req.run_id}", f"done {req.run_id}"),
            finished(req, outcome),
            hold=hold,
        )

    return answer


def paused_chat(
    *interrupts: dict[str, Any],
    replies: Sequence[Any] = (),
    first: Callable[[Request], Reply] | None = None,
    before: Sequence[Any] = (),
    options: Options | None = None,
    thread_id: str | None = None,
    local_tools: dict[str, Any] | None = None,
    clock: FakeClock | None = None,
    manual_tools: bool = False,
) -> tuple[RecordingDriver, Resource, Batch]:
    """A chat that sent "hello" and paused with ``interrupts`` (or as ``first`` answers);
    ``replies`` answer the requests after it."""
    agent = ScriptedAgent(succeed()).then(first or pause(*interrupts, before=before), *replies)
    driver = RecordingDriver(agent, clock=clock, manual_tools=manual_tools)
    chat = driver.chat(options, thread_id=thread_id, local_tools=local_tools)
    chat.send("hello")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    assert batch is not None
    assert_paused(chat, batch)
    return driver, chat, batch


def assert_paused(r: Resource, batch: Batch) -> None:
    assert r.pending_interrupts is batch
    assert (r.is_loading, r.is_resuming, r.needs_new_thread) == (False, False, False)


def rejected(r: Resource, error: type[Exception], call: Callable[[], Any]) -> Any:
    """``call`` raises ``error`` and leaves the core state exactly as it was; returns it."""
    before = r.core_state
    with pytest.raises(error) as info:
        call()
    assert r.core_state == before
    return info.value


def step_until(driver: FakeDriver, done: Callable[[], bool], limit: int = 200) -> None:
    for _ in range(limit):
        if done():
            return
        assert driver.step(), "the driver ran out of work before the condition held"
    raise AssertionError("condition never held")


def user_texts(req: Request) -> list[str]:
    return [m["content"] for m in req.json["messages"] if m["role"] == "user"]
