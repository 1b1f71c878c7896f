"""The embedded reference agent over real HTTP: an ASGI app served by hypercorn on trio.

It is the server interlude's tests, examples and benchmarks talk to: a real socket on
127.0.0.1, a real ``text/event-stream`` body, and faults injected at the HTTP layer where real
servers fail. The scripted behaviour lives in `interlude.adapters.agent_scenarios`.

Run it by hand with ``python -m interlude.adapters.agent --port 8000``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from json.encoder import encode_basestring as _quote
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from interlude.adapters.agent_scenarios import (
    BadRequest,
    Event,
    Fault,
    FaultKind,
    RecordedRequest,
    ReferenceAgent,
    expiry_argument,
)

__all__ = [
    "AgentApp",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "ReferenceAgent",
    "encode_frame",
    "main",
    "serve_agent",
]

MAX_BODY_BYTES = 8 * 1024 * 1024
BATCH_BYTES = 64 * 1024
"""Frames are written in batches of about this size: one ASGI send per frame is the cost."""

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


_CONTENT_FRAME = '{"type":"TEXT_MESSAGE_CONTENT","messageId":%s,"delta":%s}'
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_frame(event: Event) -> bytes:
    """One SSE frame, as the official encoder writes it: ``data: {json}`` and a blank line.

    UTF-8, not ASCII escapes, as real servers send. A lone surrogate (possible in echoed
    text) can only sit inside a JSON string, where ``backslashreplace`` writes exactly its
    JSON escape.
    """
    if len(event) == 3 and event.get("type") == "TEXT_MESSAGE_CONTENT":
        mid, delta = event.get("messageId"), event.get("delta")
        if isinstance(mid, str) and isinstance(delta, str):  # the hot path of long streams
            data = _CONTENT_FRAME % (_quote(mid), _quote(delta))
            return b"data: " + data.encode("utf-8", "backslashreplace") + b"\n\n"
    return b"data: " + _dumps(event).encode("utf-8", "backslashreplace") + b"\n\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _TooDeep:
    """A body nested deeper than the JSON decoder recurses: refused with 400."""


_TOO_DEEP = _TooDeep()


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        return None
    except RecursionError:  # not a ValueError: it would be an HTTP 500
        return _TOO_DEEP


def _batches(frames: Iterable[bytes]) -> Iterable[bytes]:
    pending: list[bytes] = []
    size = 0
    for frame in frames:
        pending.append(frame)
        size += len(frame)
        if size >= BATCH_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


def _shaped(frames: list[bytes], fault: Fault | None) -> list[bytes]:
    """The frames a fault lets through, with whatever it inserts."""
    if fault is None:
        return frames
    cut = fault.after_events
    kind = fault.kind
    if kind in ("drop", "stall"):
        return frames[:cut]
    if kind == "run_error":
        error = {"type": "RUN_ERROR", "message": fault.message, "code": fault.code}
        return [*frames[:cut], encode_frame(error)]
    if kind == "malformed_json":
        return [*frames[:cut], b'data: {"type": "TEXT_MESSAGE_CONTENT", oops\n\n', *frames[cut:]]
    if kind == "oversize":
        filler = {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": "oversize",
            "delta": "x" * fault.size,
        }
        return [*frames[:cut], encode_frame(filler), *frames[cut:]]
    return frames


class AgentApp:
    """The ASGI application: records each request, applies its fault, streams the run."""

    def __init__(self, agent: ReferenceAgent) -> None:
        self.agent = agent

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            raw = await _read_body(receive)
        except _TooLarge:
            await _respond(send, 413, "request body too large")
            return
        if raw is None:
            return  # the client left mid-body: no request to record or answer
        body = _parse(raw)
        too_deep = body is _TOO_DEEP
        if too_deep:
            body = None
        self.agent.requests.append(
            RecordedRequest(scope["method"], scope["path"], headers, body, raw)
        )
        if scope["method"] != "POST":
            await _respond(send, 405, "POST a RunAgentInput", [(b"allow", b"POST")])
            return
        if too_deep:
            await _respond(send, 400, json.dumps({"error": "the body is nested too deeply"}), _JSON)
            return
        thread_id = body.get("threadId") if isinstance(body, dict) else None
        fault = self.agent.take_fault(thread_id if isinstance(thread_id, str) else None)
        if fault is not None and fault.kind == "refuse":
            extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fault.headers]
            await _respond(send, fault.status, fault.body, extra)
            return
        try:
            events = self.agent.run(body)
        except BadRequest as error:
            await _respond(send, 400, json.dumps({"error": str(error)}), _JSON)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            await _stream(send, [encode_frame(e) for e in events], fault)
            nursery.cancel_scope.cancel()


_JSON = [(b"content-type", b"application/json")]


async def _stream(send: ASGISendCallable, frames: list[bytes], fault: Fault | None) -> None:
    headers = _SSE_HEADERS
    if fault is not None and fault.kind == "wrong_content_type":
        headers = [(b"content-type", fault.content_type.encode("latin-1"))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    shaped = _shaped(frames, fault)
    if fault is not None and fault.kind == "delay":
        await trio.sleep(fault.before)
        for index, frame in enumerate(shaped):
            if index and fault.between:
                await trio.sleep(fault.between)
            await send({"type": "http.response.body", "body": frame, "more_body": True})
    else:
        for batch in _batches(shaped):
            await send({"type": "http.response.body", "body": batch, "more_body": True})
    if fault is not None and fault.kind == "stall":
        await trio.sleep_forever()
    if fault is not None and fault.kind == "drop":
        return  # no final chunk: hypercorn closes the connection mid-body
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_disconnect(receive: ASGIReceiveCallable, scope: trio.CancelScope) -> None:
    """A client that leaves ends the stream, so stalls and delays do not outlive it."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


class _TooLarge(Exception):
    """The request body went past MAX_BODY_BYTES."""


async def _read_body(receive: ASGIReceiveCallable) -> bytes | None:
    """The whole request body; None if the client left before sending all of it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # http.disconnect
        chunk = message["body"]
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge
        chunks.append(chunk)
        if not message["more_body"]:
            return b"".join(chunks)


async def _respond(
    send: ASGISendCallable,
    status: int,
    body: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    all_headers = list(headers)
    if not any(name == b"content-type" for name, _ in all_headers):
        all_headers.append((b"content-type", b"text/plain; charset=utf-8"))
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body.encode(), "more_body": False})


async def _lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve_agent(
    agent: ReferenceAgent,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``agent`` until cancelled; ``nursery.start`` returns its URL, ``http://host:port/``.

    Raises ``OSError`` if it cannot listen there (a port in use, an unknown host).
    """
    _try_bind(host, port)
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 0.5
    async with trio.open_nursery() as nursery:
        app = AgentApp(agent)
        binds: list[str] = await nursery.start(
            partial(serve, app, config, shutdown_trigger=trio.sleep_forever)
        )
        task_status.started(binds[0] + "/")


def _try_bind(host: str, port: int) -> None:
    """Bind once and close at once, so that a bad address fails here, cleanly: hypercorn
    leaves the socket of a failed bind open (a ResourceWarning later, somewhere else)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as hypercorn does
        trial.bind(address)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a reference agent, print its URL, and run until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m interlude.adapters.agent", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port, default=8000, help="0 picks a free one")
    parser.add_argument(
        "--expires-in",
        type=expiry_argument,
        default=None,
        help="give every interrupt this many seconds",
    )
    args = parser.parse_args(argv)
    agent = ReferenceAgent(expires_in=args.expires_in)
    failure: OSError | None = None
    try:
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(_serve_until_signalled, agent, args.host, args.port)
    except* OSError as group:  # cannot bind: a port in use, an unknown host, no permission
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):  # nurseries nest their groups
            leaf = leaf.exceptions[0]
        failure = leaf  # type: ignore[assignment]
    if failure is not None:
        where = f"{args.host}:{args.port}"
        print(f"{parser.prog}: error: cannot serve on {where}: {failure}", file=sys.stderr)
        return 2
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, not {text!r}")
    return port


async def _serve_until_signalled(agent: ReferenceAgent, host: str, port: int) -> None:
    # Signals end the server through its nursery: a KeyboardInterrupt raised wherever the
    # main thread happens to be could land inside a request task, where hypercorn swallows it.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(partial(serve_agent, agent, host=host, port=port))
            print(url, flush=True)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    sys.exit(main())
