"""Memory: many resources paused at once in one process (report only).

Each resource is a chat driven by one shared ``FakeDriver``: a user message,
an assistant reply streamed in deltas, and a pause on a batch of two
interrupts (one with a response schema and metadata). ``tracemalloc``
counts what stays allocated once they are all paused, after the fake agent's
own request log (the request bodies it keeps for tests) is emptied.
"""

from __future__ import annotations

import gc
import tracemalloc
from dataclasses import dataclass
from typing import Any

from interlude.adapters.fake import FakeDriver, ScriptedAgent, interrupted, reply, started, text
from interlude.adapters.fake.script import Request
from interlude.adapters.resource import Resource

from .report import Section

__all__ = ["MemoryResult", "measure", "section"]

_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["approved"],
    "additionalProperties": False,
}


def _pause(req: Request) -> Any:
    return reply(
        started(req),
        *text("a1", "I can order the espresso machine for you, at 249 USD.", chunks=8),
        interrupted(
            req,
            {
                "id": "purchase",
                "reason": "tool_approval",
                "message": "Approve this purchase?",
                "responseSchema": _SCHEMA,
                "metadata": {"item": "espresso machine", "price": 249, "currency": "USD"},
            },
            {"id": "shipping-address", "reason": "input_required", "message": "Which address?"},
        ),
    )


@dataclass(frozen=True)
class MemoryResult:
    resources: int
    total_bytes: int
    """Allocated and still live after pausing them all (tracemalloc, current)."""
    peak_bytes: int
    messages_each: int

    @property
    def per_resource(self) -> float:
        return self.total_bytes / self.resources


def measure(count: int) -> MemoryResult:
    """Pause ``count`` chats at once and count the bytes they hold."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        driver = FakeDriver(ScriptedAgent(_pause))
        gc.collect()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        chats: list[Resource] = []
        for n in range(count):
            chat = driver.chat()
            chat.send(f"order an espresso machine ({n})")
            driver.run_until_idle()
            driver.agent.requests.clear()  # the fake agent's log, not the resource's
            chats.append(chat)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    for chat in chats:
        batch = chat.pending_interrupts
        if batch is None or len(batch.interrupts) != 2 or chat.is_loading or chat.error:
            raise AssertionError("a resource did not pause on its batch of two")
    return MemoryResult(count, after - before, peak - before, len(chats[0].messages))


def section(count: int) -> Section:
    r = measure(count)
    out = Section(f"4. Memory: {count:,} resources paused at once (report only)")
    out.add(f"{count:,} paused chats, live bytes (tracemalloc)", f"{r.total_bytes / 1e6:.2f} MB")
    out.add("per resource", f"{r.per_resource / 1024:.2f} KiB")
    out.add("peak while pausing them, per resource", f"{r.peak_bytes / count / 1024:.2f} KiB")
    out.notes.append(
        f"each: {r.messages_each} committed messages (user, assistant) and a pending batch "
        "of 2 interrupts (one with a response schema and metadata); one shared FakeDriver"
    )
    return out
