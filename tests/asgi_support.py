"""A helper shared by the tests that serve tiny ASGI apps with hypercorn."""

from __future__ import annotations

from typing import Any


async def request_body(scope: Any, receive: Any, send: Any) -> bytes | None:
    """The whole body of an HTTP request; None for the lifespan protocol, which this
    answers (startup, then shutdown) before returning."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return None
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body
