"""SSE over loopback: the embedded reference agent's ``long N`` scenario, end to end.

Three measurements of the same stream (RUN_STARTED, the agent's small
STATE_SNAPSHOT, TEXT_MESSAGE_START, N TEXT_MESSAGE_CONTENT deltas,
TEXT_MESSAGE_END, RUN_FINISHED), in one run:

``SSE parser``
    ``SSEParser.feed`` on the exact bytes the agent sends (``encode_frame``),
    in 64 KiB chunks cut anywhere, as socket reads arrive; against the
    ``json.loads`` floor of the same frames' data.
``fake driver``
    the same frame data as raw strings through ``FakeDriver`` to the reducer.
``HTTP``
    the reference agent in its own process on 127.0.0.1
    (``python -m interlude.adapters.agent --port 0``), ``HttpxTransport`` +
    ``TrioDriver``, to the reducer. The target is about what the transport
    adds on the client, so the server's sending does not run on the client's
    thread (on this 2-core machine it gets the other core).

The fake driver and HTTP are timed over the same span: from the moment
RUN_STARTED has been applied to the moment the run has finished (the server
builds and encodes its whole stream before it sends RUN_STARTED). HTTP is
also reported from ``send()`` to idle, which includes that building.
Neither reads selectors per event: this measures the transport.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import trio

from interlude.adapters.agent import BATCH_BYTES, ReferenceAgent, encode_frame
from interlude.adapters.fake import FakeDriver, ScriptedAgent, reply
from interlude.adapters.fake.script import Request
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.resource import Resource
from interlude.adapters.sse import SSEParser
from interlude.adapters.trio import TrioDriver

from .report import Section, fmt_rate
from .timing import loads_floor

__all__ = ["HttpResult", "agent_frames", "measure", "section"]

CHUNK = BATCH_BYTES
"""Bytes per ``feed`` call: the agent writes batches of this size."""


def _request(count: int, thread_id: str = "bench-thread", run_id: str = "bench-run") -> Any:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": None,
        "messages": [{"id": "u1", "role": "user", "content": f"long {count}"}],
        "tools": [],
        "context": [],
        "forwardedProps": None,
    }


def agent_frames(request: Any) -> list[bytes]:
    """The SSE frames the reference agent sends for ``request``, byte for byte."""
    return [encode_frame(e) for e in ReferenceAgent().run(request)]


def _data(frame: bytes) -> str:
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    return frame[6:-2].decode("utf-8")


@dataclass(frozen=True)
class HttpResult:
    deltas: int
    """TEXT_MESSAGE_CONTENT events in the stream."""
    frames: int
    """Frames timed in the fake-driver and HTTP spans (all after RUN_STARTED)."""
    stream_bytes: int
    parser_seconds: float
    parser_floor_seconds: float
    """``json.loads`` of every frame's data (the parser's floor)."""
    fake_seconds: float
    http_seconds: float
    http_total_seconds: float
    """HTTP from ``send()`` to idle: the server's building of the stream included."""
    http_share: float
    """HTTP throughput / fake-driver throughput: the median over repetitions of the two
    spans timed one after the other, so a fast or slow spell of the machine moves both."""

    @property
    def parser_rate(self) -> float:
        return (self.frames + 1) / self.parser_seconds

    @property
    def parser_floor_rate(self) -> float:
        return (self.frames + 1) / self.parser_floor_seconds

    @property
    def fake_rate(self) -> float:
        return self.frames / self.fake_seconds

    @property
    def http_rate(self) -> float:
        return self.frames / self.http_seconds

    @property
    def http_total_rate(self) -> float:
        return (self.frames + 1) / self.http_total_seconds


def _parse_all(chunks: list[bytes]) -> int:
    parser = SSEParser()
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    parser.close()
    if parser.truncated:
        raise AssertionError("the SSE parser saw a truncated stream")
    return count


def _time_parser(chunks: list[bytes], expected: int) -> float:
    start = time.perf_counter()
    got = _parse_all(chunks)
    seconds = time.perf_counter() - start
    if got != expected:
        raise AssertionError(f"the SSE parser returned {got} frames, not {expected}")
    return seconds


def _time_fake(count: int) -> tuple[float, Resource]:
    def answer(req: Request) -> Any:
        frames = agent_frames(_request(count, req.thread_id, req.run_id))
        return reply(*(_data(f) for f in frames))

    driver = FakeDriver(ScriptedAgent(answer))
    chat = driver.chat()
    chat.subscribe(_Finish(time.perf_counter))  # the observer the HTTP run needs, here too
    chat.send(f"long {count}")
    assert driver.step()  # the request goes out; the reply is built (untimed)
    assert driver.step()  # RUN_STARTED
    assert chat.core_state.run is not None and chat.core_state.draft is not None
    start = time.perf_counter()
    driver.run_until_idle(max_steps=10**8)
    seconds = time.perf_counter() - start
    _check(chat, count)
    return seconds, chat


def _check(chat: Resource, count: int) -> None:
    if chat.error is not None or chat.is_loading:
        raise AssertionError(f"the long stream did not finish cleanly: {chat.error!r}")
    last = chat.messages[-1]
    content = getattr(last, "content", "")
    if not isinstance(content, str) or not content.endswith(f"token{count - 1} "):
        raise AssertionError("the streamed text did not arrive whole")


class _Finish:
    """The observer the HTTP run is timed with: it marks the change that acknowledged the
    run (its RUN_STARTED; earlier changes are send() and SendStarting) and sets ``done``
    when the run is over, finished or failed (a run that fails before its RUN_STARTED
    must end the wait too). The fake-driver run gets the same observer, so that both
    spans do the same work per event."""

    def __init__(self, clock: Callable[[], float], done: trio.Event | None = None) -> None:
        self.clock, self.done = clock, done
        self.acked: float | None = None

    def __call__(self, r: Resource) -> None:
        if self.acked is None and r.core_state.draft is not None:  # from the RUN_STARTED on
            self.acked = self.clock()
        if not r.is_loading and self.done is not None:
            self.done.set()


async def _time_http(url: str, count: int) -> tuple[float, float]:
    """(RUN_STARTED → idle, send → idle) seconds for one ``long count`` run over HTTP."""
    clock = time.perf_counter
    finish = _Finish(clock, trio.Event())
    assert finish.done is not None
    async with HttpxTransport(url) as transport, TrioDriver(transport) as driver:
        chat = driver.chat()
        chat.subscribe(finish)
        with trio.fail_after(600):
            start = clock()
            chat.send(f"long {count}")
            # Waiting on our own event, not wait_idle(): wait_idle wakes its task on
            # every change, which would add a task switch per event to the span.
            await finish.done.wait()
            end = clock()
        _check(chat, count)
    assert finish.acked is not None
    return end - finish.acked, end - start


@contextlib.contextmanager
def _agent_process() -> Iterator[str]:
    """The reference agent in a child process on an ephemeral port; its URL."""
    command = [sys.executable, "-m", "interlude.adapters.agent", "--port", "0"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the reference agent did not start (it printed {url!r})")
        yield url
    finally:
        child.terminate()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def measure(count: int, reps: int, *, progress: Callable[[str], None] | None = None) -> HttpResult:
    """Best of ``reps`` for each measurement, interleaved."""
    frames = agent_frames(_request(count))
    data = [_data(f) for f in frames]
    stream = b"".join(frames)
    chunks = [stream[n : n + CHUNK] for n in range(0, len(stream), CHUNK)]
    timed_frames = len(frames) - 1  # everything after RUN_STARTED
    best = {"parser": float("inf"), "floor": float("inf"), "fake": float("inf")}
    best.update(http=float("inf"), total=float("inf"))
    shares: list[float] = []

    async def main() -> None:
        with _agent_process() as url:
            for rep in range(reps):
                if progress:
                    progress(f"http: repetition {rep + 1}/{reps}")
                best["floor"] = min(best["floor"], loads_floor(data, 1))
                best["parser"] = min(best["parser"], _time_parser(chunks, len(frames)))
                fake = _time_fake(count)[0]
                best["fake"] = min(best["fake"], fake)
                span, total = await _time_http(url, count)
                best["http"] = min(best["http"], span)
                shares.append(fake / span)
                best["total"] = min(best["total"], total)

    trio.run(main)
    return HttpResult(
        deltas=count,
        frames=timed_frames,
        stream_bytes=len(stream),
        parser_seconds=best["parser"],
        parser_floor_seconds=best["floor"],
        fake_seconds=best["fake"],
        http_seconds=best["http"],
        http_total_seconds=best["total"],
        http_share=statistics.median(shares),
    )


# -- the table ------------------------------------------------------------------------

MIN_PARSER_VS_FLOOR = 0.5
MIN_HTTP_VS_FAKE = 0.8


def section(count: int, reps: int, *, progress: Callable[[str], None] | None = None) -> Section:
    r = measure(count, reps, progress=progress)
    out = Section(f"3. SSE over loopback: reference agent 'long {count}' (text deltas)")
    out.add(
        f"SSE parser alone ({r.stream_bytes / 1e6:.1f} MB in 64 KiB chunks)",
        f"{r.parser_rate:,.0f} frames/s",
    )
    out.add("json.loads floor (same frames' data)", f"{r.parser_floor_rate:,.0f} frames/s")
    ratio = r.parser_rate / r.parser_floor_rate
    out.add(
        "parser throughput / floor throughput",
        f"{ratio:.2f}",
        f">= {MIN_PARSER_VS_FLOOR:g}",
        ratio >= MIN_PARSER_VS_FLOOR,
    )
    out.add("fake driver, same frames to the reducer", fmt_rate(r.fake_rate))
    out.add("HTTP end to end (HttpxTransport + TrioDriver)", fmt_rate(r.http_rate))
    share = r.http_share
    out.add(
        "HTTP / fake driver throughput",
        f"{share:.1%}",
        f">= {MIN_HTTP_VS_FAKE:.0%}",
        share >= MIN_HTTP_VS_FAKE,
    )
    out.add("HTTP from send() to idle (server builds its stream)", fmt_rate(r.http_total_rate))
    out.notes += [
        f"{r.frames:,} frames timed after RUN_STARTED in both the fake driver and HTTP; "
        f"best of {reps}, interleaved; the share is the median over the {reps} repetitions "
        "of HTTP against the fake-driver run just before it",
        "the agent runs in its own process on 127.0.0.1 (python -m interlude.adapters.agent "
        "--port 0), so the span measures the client: transport, parser, driver, reducer",
        "no selectors per event here (wait is on an observer-set event, not wait_idle())",
    ]
    return out
