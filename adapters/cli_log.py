"""``--log FILE``: every request body sent and every SSE frame received, as JSON lines.

It wraps the transport rather than the driver, so what is logged is exactly
what crossed the wire: the request body the driver serialised (parsed back to
JSON, byte-for-byte equal in meaning) and each frame's decoded data.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any, TextIO

from interlude.core.errors import InterludeError

from .trio import Transport

__all__ = ["LoggingTransport"]


class LoggingTransport:
    """A :class:`~interlude.adapters.trio.Transport` that logs through to another one.

    Each line is ``{"ts", "direction", "request", ...}``: ``direction`` is
    ``send`` (with ``body``), ``receive`` (with ``data``, or ``raw`` when the
    frame is not JSON) or ``error`` (with ``error`` and ``message``, and
    ``status`` for an HTTP answer); ``request`` numbers the requests so frames
    can be matched to the request they answer.
    """

    def __init__(
        self, inner: Transport, sink: TextIO, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._inner = inner
        self._sink = sink
        self._clock = clock
        self._requests = 0

    async def stream(self, body: bytes) -> AsyncGenerator[str, None]:
        self._requests += 1
        n = self._requests
        text = body.decode("utf-8", "replace")
        sent = _decoded(text)
        if isinstance(sent, _Raw):
            self._write({"direction": "send", "request": n, "raw": text})
        else:
            self._write({"direction": "send", "request": n, "body": sent})
        try:
            async with aclosing(_frames(self._inner, body)) as frames:
                async for data in frames:
                    parsed = _decoded(data)
                    if isinstance(parsed, _Raw):
                        self._write({"direction": "receive", "request": n, "raw": data})
                    else:
                        self._write({"direction": "receive", "request": n, "data": parsed})
                    yield data
        except InterludeError as exc:
            line: dict[str, Any] = {
                "direction": "error",
                "request": n,
                "error": type(exc).__name__,
                "message": exc.message,
            }
            status = getattr(exc, "status", None)
            if status is not None:
                line["status"] = status
            self._write(line)
            raise

    def _write(self, fields: dict[str, Any]) -> None:
        stamp = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds")
        record = {"ts": stamp.replace("+00:00", "Z"), **fields}
        text = json.dumps(record, ensure_ascii=False)
        # A lone surrogate (a JSON escape of half an emoji, valid on the wire) has no UTF-8
        # form: the file would refuse it. It sits inside a JSON string, where
        # backslashreplace writes exactly its JSON escape.
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        self._sink.write(text + "\n")
        self._sink.flush()


class _Raw:
    """A frame whose data is not JSON: logged as text."""


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _Raw()


async def _frames(inner: Transport, body: bytes) -> AsyncGenerator[str, None]:
    """The inner stream as an async generator, so ``aclosing`` closes it (and its response)."""
    stream = inner.stream(body)
    try:
        async for data in stream:
            yield data
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
