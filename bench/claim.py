"""``resume`` claim latency on a long committed history.

A chat is built through the fake driver with a history of N messages
(``driver.chat(messages=...)``), sent one more message, and paused by the
agent with a batch of two interrupts. Then, many times over:
``resource.resume(batch_id, entries)`` is timed (the synchronous claim: the
entries are checked and frozen, the request captured, ``StartAttempt``
queued in the fake driver and not carried out), and ``resource.stop()``
(untimed) releases the claim, leaving the same batch pending (R-F4) for the
next round.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

from interlude.adapters.fake import FakeDriver, ScriptedAgent, interrupted, reply, started, text
from interlude.adapters.fake.script import Request
from interlude.adapters.resource import Resource
from interlude.core import UserMessage
from interlude.core.wire.messages import AssistantMessage, Message

from .report import Section, fmt_seconds

__all__ = ["ENTRIES", "ClaimResult", "history", "measure", "paused_chat", "section"]

ENTRIES: list[dict[str, Any]] = [
    {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": True, "qty": 2}},
    {"interrupt_id": "shipping-address", "status": "resolved", "payload": {"addressId": "a-1"}},
]

_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "qty": {"type": "integer"}},
    "required": ["approved"],
}


def history(count: int) -> list[Message]:
    """``count`` committed messages, user and assistant in turn, about 100 characters each."""
    out: list[Message] = []
    for n in range(count):
        words = f"message {n}: the order ships from the warehouse near you within three days"
        if n % 2:
            out.append(AssistantMessage(id=f"h{n}", content=words))
        else:
            out.append(UserMessage(id=f"h{n}", content=words))
    return out


def _pause(req: Request) -> Any:
    return reply(
        started(req),
        *text("a-pause", "I need two answers before I order."),
        interrupted(
            req,
            {"id": "purchase", "reason": "tool_approval", "responseSchema": _SCHEMA},
            {"id": "shipping-address", "reason": "input_required", "message": "Which address?"},
        ),
    )


def paused_chat(messages: int) -> tuple[FakeDriver, Resource, str]:
    """A chat paused on a batch of two interrupts, with ``messages`` + 2 committed messages."""
    driver = FakeDriver(ScriptedAgent(_pause))
    chat = driver.chat(messages=history(messages))
    chat.send("order two espresso machines")
    driver.run_until_idle()
    batch = chat.pending_interrupts
    if batch is None or chat.error is not None or chat.is_loading:
        raise AssertionError(f"the chat did not pause: error={chat.error!r}")
    driver.agent.requests.clear()
    return driver, chat, batch.id


@dataclass(frozen=True)
class ClaimResult:
    history: int
    """Committed messages when the claim is made."""
    samples: tuple[float, ...]
    line_loads: float
    """Seconds for ``json.loads`` of one typical event line (a text delta)."""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


_LINE = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"the order ships "}'


def _line_loads(rounds: int = 20_000) -> float:
    loads = json.loads
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            loads(_LINE)
        best = min(best, (time.perf_counter() - start) / rounds)
    return best


def measure(messages: int, claims: int) -> ClaimResult:
    """Time ``claims`` claims of the same batch on a ``messages``-long history."""
    _, chat, batch_id = paused_chat(messages)
    committed = len(chat.messages)
    samples: list[float] = []
    gc.collect()
    clock = time.perf_counter
    for _ in range(claims):
        start = clock()
        chat.resume(batch_id, ENTRIES)
        samples.append(clock() - start)
        if not chat.is_resuming or chat.pending_interrupts is None:
            raise AssertionError("resume() returned without claiming the batch")
        chat.stop()  # releases the claim; the batch stays pending (R-F4)
        if chat.is_resuming or chat.error is not None:
            raise AssertionError("stop() did not release the claim cleanly")
    return ClaimResult(committed, tuple(samples), _line_loads())


# -- the table ------------------------------------------------------------------------

TARGET_SECONDS = 1e-3


def section(messages: int, claims: int, *, small: int = 10) -> Section:
    long = measure(messages, claims)
    short = measure(small, claims)
    out = Section("2. resume() claim latency (synchronous claim; commands queued, not run)")
    out.add(
        f"claim on a {long.history:,}-message history (median of {claims:,})",
        fmt_seconds(long.median),
        f"< {fmt_seconds(TARGET_SECONDS)}",
        long.median < TARGET_SECONDS,
    )
    out.add("  best / p99", f"{fmt_seconds(long.best)} / {fmt_seconds(long.p99)}")
    out.add(
        "  relative to json.loads of one text-delta line",
        f"{long.median / long.line_loads:.0f}x ({fmt_seconds(long.line_loads)} per line)",
    )
    out.add(
        f"claim on a {short.history:,}-message history (median)",
        fmt_seconds(short.median),
    )
    out.add(
        f"  median, {long.history:,} / {short.history:,} messages",
        f"{long.median / short.median:.2f}",
    )
    out.notes += [
        "each round: resource.resume(batch_id, 2 entries) timed, then stop() (untimed) "
        "releases the claim and the same batch stays pending for the next round",
        "the target is absolute (< 1 ms) by the issue's wording; p99 includes scheduler "
        "preemption on this shared 2-core machine",
    ]
    return out
