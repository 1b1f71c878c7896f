"""A driver written from reference.md's "Writing your own" alone, on plain asyncio.

It builds its resources as ``Resource(driver, options)``, starts work in
``execute`` and feeds inputs back from that work. The tests check that the
whole surface a framework author relies on works through it: streaming, a
batch answered and resumed, a local tool declared and run, an abort that
answers the attempt's own frame, the stream left open after RUN_FINISHED.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from interlude.adapters.resource import Resource
from interlude.core import (
    AbortAttempt,
    CancelTimer,
    CancelTool,
    Command,
    FrameReceived,
    Options,
    RunError,
    RunTool,
    SendStarting,
    StartAttempt,
    StartTimer,
    StreamEnded,
    TimerFired,
    ToolFinished,
    thaw,
)
from interlude.core.wire import Tool, encode_request

Agent = Callable[[dict[str, Any]], Sequence[str]]


class AsyncioDriver:
    """``execute`` only starts tasks and timers; they feed the inputs back."""

    def __init__(
        self, agent: Agent, tools: dict[str, Callable[[Any], Any]], *, hold_open: bool = False
    ) -> None:
        self.agent, self.tools, self.hold_open = agent, tools, hold_open
        self.tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.timers: dict[int, asyncio.TimerHandle] = {}
        self.bodies: list[dict[str, Any]] = []
        self.open_streams: set[int] = set()
        self.aborted_from_within: list[int] = []  # AbortAttempts that came inside their stream

    def now(self) -> float:
        return time.time()

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        loop = asyncio.get_running_loop()
        for c in commands:
            if isinstance(c, StartAttempt):
                self._start(("attempt", c.attempt), self._attempt(resource, c))
            elif isinstance(c, AbortAttempt):
                if self.tasks.get(("attempt", c.attempt)) is asyncio.current_task():
                    self.aborted_from_within.append(c.attempt)
                self._cancel(("attempt", c.attempt))
            elif isinstance(c, StartTimer):
                if c.timer in self.timers:
                    self.timers.pop(c.timer).cancel()
                delay = max(0.0, c.due - self.now())
                self.timers[c.timer] = loop.call_later(delay, resource.apply, TimerFired(c.timer))
            elif isinstance(c, CancelTimer):
                if c.timer in self.timers:
                    self.timers.pop(c.timer).cancel()
            elif isinstance(c, RunTool):
                self._start(("tool", c.task), self._tool(resource, c))
            elif isinstance(c, CancelTool):
                self._cancel(("tool", c.task))

    def _start(self, key: tuple[str, int], work: Any) -> None:
        self.tasks[key] = asyncio.get_running_loop().create_task(work)

    def _cancel(self, key: tuple[str, int]) -> None:
        task = self.tasks.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _attempt(self, resource: Resource, c: StartAttempt) -> None:
        body = encode_request(c.run_input)
        if AbortAttempt(c.attempt) in resource.apply(SendStarting(c.attempt)).commands:
            return
        self.bodies.append(json.loads(body))
        self.open_streams.add(c.attempt)
        try:
            for data in self.agent(self.bodies[-1]):
                await asyncio.sleep(0)
                resource.apply(FrameReceived(c.attempt, data))
                if ("attempt", c.attempt) not in self.tasks:
                    return  # aborted by the input just fed (a RUN_ERROR, say)
            if self.hold_open:
                await asyncio.Event().wait()  # a body that never ends; AbortAttempt cancels
            resource.apply(StreamEnded(c.attempt))
        finally:
            self.open_streams.discard(c.attempt)

    async def _tool(self, resource: Resource, c: RunTool) -> None:
        try:
            value = self.tools[c.name](thaw(c.arguments))
        except Exception as exc:
            resource.apply(ToolFinished(c.task, error=exc))
        else:
            resource.apply(ToolFinished(c.task, value=value))

    async def idle(self, resource: Resource) -> None:
        while resource.is_loading:
            await asyncio.sleep(0)


def event(type_: str, **fields: Any) -> str:
    return json.dumps({"type": type_, **fields})


def run(body: dict[str, Any], *middle: str, outcome: Any = None) -> list[str]:
    ids = {"threadId": body["threadId"], "runId": body["runId"]}
    end = {"outcome": outcome} if outcome is not None else {}
    return [event("RUN_STARTED", **ids), *middle, event("RUN_FINISHED", **ids, **end)]


def say(mid: str, *parts: str) -> list[str]:
    return [
        event("TEXT_MESSAGE_START", messageId=mid, role="assistant"),
        *(event("TEXT_MESSAGE_CONTENT", messageId=mid, delta=p) for p in parts),
        event("TEXT_MESSAGE_END", messageId=mid),
    ]


def test_streaming_a_batch_and_a_resume_through_resource() -> None:
    """Observers see the text as it streams; a batch is claimed by resume and answered."""

    def agent(body: dict[str, Any]) -> list[str]:
        if body.get("resume"):
            return run(body, *say("a2", "Ordered."))
        ask = {"id": "approve", "reason": "input_required", "message": "Buy?"}
        return run(
            body,
            *say("a1", "Let me ", "check."),
            outcome={"type": "interrupt", "interrupts": [ask]},
        )

    async def main() -> None:
        driver = AsyncioDriver(agent, {})
        chat = Resource(driver, Options())
        seen: list[str] = []
        chat.subscribe(lambda r: seen.append(r.messages[-1].content if len(r.messages) else ""))
        chat.send("buy it")
        await driver.idle(chat)
        assert "Let me " in seen and chat.messages[-1].content == "Let me check."
        batch = chat.pending_interrupts
        assert batch is not None and [i.id for i in batch.interrupts] == ["approve"]
        chat.resume(batch.id, [{"interrupt_id": "approve", "status": "resolved"}])
        assert chat.is_resuming  # claimed synchronously, before any task ran
        await driver.idle(chat)
        assert chat.messages[-1].content == "Ordered." and chat.pending_interrupts is None
        assert driver.bodies[-1]["resume"] == [{"interruptId": "approve", "status": "resolved"}]
        for task in driver.tasks.values():
            task.cancel()

    asyncio.run(main())


def test_a_local_tool_is_declared_in_tools_and_run_by_the_driver() -> None:
    """``local_tools`` names what runs here; ``tools`` is what the endpoint is told."""

    def agent(body: dict[str, Any]) -> list[str]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return run(body, *say("a2", "It is noon."))
        call = [
            event("TOOL_CALL_START", toolCallId="c1", toolCallName="clock"),
            event("TOOL_CALL_ARGS", toolCallId="c1", delta='{"tz": "UTC"}'),
            event("TOOL_CALL_END", toolCallId="c1"),
        ]
        return run(body, *call)

    async def main() -> None:
        driver = AsyncioDriver(agent, {"clock": lambda args: f"noon {args['tz']}"})
        options = Options(
            tools=(Tool(name="clock", description="the time"),),
            local_tools=frozenset({"clock"}),
        )
        chat = Resource(driver, options)
        chat.send("what time is it?")
        await driver.idle(chat)
        assert [t["name"] for t in driver.bodies[0]["tools"]] == ["clock"]
        assert chat.messages[-2].content == "noon UTC"
        assert chat.messages[-1].content == "It is noon." and chat.error is None
        for task in driver.tasks.values():
            task.cancel()

    asyncio.run(main())


def test_an_abort_answering_the_attempts_own_frame_stops_its_reading() -> None:
    """RUN_ERROR is fed from the stream's own task; the AbortAttempt that answers it
    reaches execute() inside that task, which must stop reading rather than cancel."""
    after_error = event("TEXT_MESSAGE_START", messageId="x", role="assistant")

    def agent(body: dict[str, Any]) -> list[str]:
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        return [event("RUN_STARTED", **ids), event("RUN_ERROR", message="no"), after_error]

    async def main() -> None:
        driver = AsyncioDriver(agent, {})
        chat = Resource(driver, Options())
        chat.send("hi")
        await driver.idle(chat)
        await asyncio.sleep(0)
        assert chat.error == RunError("no") and not driver.open_streams
        assert len(driver.aborted_from_within) == 1  # inside apply(FrameReceived(RUN_ERROR))
        assert [m.id for m in chat.messages] == [chat.messages[0].id]  # "x" never read

    asyncio.run(main())


def test_after_run_finished_the_resource_is_idle_and_the_stream_still_open() -> None:
    """A body that does not end after RUN_FINISHED: the resource is idle, the stream
    open (a late RUN_ERROR is still read, R-J3); the next send closes it."""

    def agent(body: dict[str, Any]) -> list[str]:
        return run(body, *say(f"a{len(body['messages'])}", "ok"))

    async def main() -> None:
        driver = AsyncioDriver(agent, {}, hold_open=True)
        chat = Resource(driver, Options())
        chat.send("one")
        await driver.idle(chat)
        await asyncio.sleep(0)
        assert not chat.is_loading and chat.error is None
        (first,) = driver.open_streams
        chat.send("two")
        await driver.idle(chat)
        await asyncio.sleep(0)
        (second,) = driver.open_streams  # the first closed by AbortAttempt
        assert second != first
        assert [m.content for m in chat.messages] == ["one", "ok", "two", "ok"]
        for task in driver.tasks.values():
            task.cancel()

    asyncio.run(main())
