"""HttpxTransport against real servers on 127.0.0.1 (R-J4).

Well-formed answers come from hypercorn running a tiny ASGI app in the test's
own trio run; broken ones (a dropped connection, no answer at all) from a raw
TCP responder. Every wait is bounded, so a failure fails fast instead of hanging.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import os
import re
import socket
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.lowlevel
import httpx
import hypercorn.asyncio
import hypercorn.trio
import pytest
import trio
from asgi_support import request_body
from hypercorn.config import Config

from interlude.adapters.httpx import ERROR_BODY_LIMIT, HttpxTransport, retry_after
from interlude.adapters.inflate import SLICE, Inflater
from interlude.adapters.sse import SSEParser
from interlude.core.errors import ProtocolError, TransportError, UsageError

WAIT = 5.0  # seconds: the bound on any wait that should end almost at once

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


@dataclass
class Request:
    method: str
    path: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    receive: Receive

    def header(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k.lower() == name]


Handler = Callable[[Request, Send], Awaitable[None]]


def asgi(handler: Handler) -> Callable[[dict[str, Any], Receive, Send], Awaitable[None]]:
    """An ASGI app that reads the whole request, then lets ``handler`` answer it."""

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        body = await request_body(scope, receive, send)
        if body is None:
            return  # the lifespan protocol, answered
        request = Request(scope["method"], scope["path"], scope["headers"], body, receive)
        await handler(request, send)

    return app


async def start(send: Send, status: int = 200, content_type: bytes = b"text/event-stream") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type)],
        }
    )


async def body(send: Send, data: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def encoded(
    send: Send,
    data: bytes,
    coding: bytes,
    *,
    status: int = 200,
    content_type: bytes = b"text/event-stream",
) -> None:
    """A whole answer whose body is ``data``, sent with ``Content-Encoding: coding``."""
    headers = [(b"content-type", content_type), (b"content-encoding", coding)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await body(send, data, more=False)


def config(*binds: str) -> Config:
    cfg = Config()
    cfg.bind = list(binds)
    cfg.graceful_timeout = 0.5
    cfg.accesslog = None
    cfg.errorlog = None
    return cfg


@asynccontextmanager
async def hypercorn_server(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` with hypercorn on an ephemeral port; yield its URL."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(
            hypercorn.trio.serve, asgi(handler), config("127.0.0.1:0"), shutdown_trigger=stop.wait
        )
        binds = await nursery.start(serve)
        try:
            yield binds[0] + "/agent"
        finally:
            stop.set()


@asynccontextmanager
async def raw_server(answer: Callable[[trio.SocketStream], Awaitable[None]]) -> AsyncIterator[str]:
    """A bare TCP responder: ``answer`` writes whatever bytes it likes, then returns."""

    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.fail_after(WAIT):
                head = b""
                while b"\r\n\r\n" not in head:
                    got = await stream.receive_some()
                    if not got:
                        return
                    head += got
                length = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
                rest = head.partition(b"\r\n\r\n")[2]
                while length and len(rest) < int(length[1]):
                    rest += await stream.receive_some()
                await answer(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}/agent"
        nursery.cancel_scope.cancel()


async def collect(transport: HttpxTransport, request_body: bytes = b"{}") -> list[str]:
    with trio.fail_after(WAIT):
        async with aclosing(transport.stream(request_body)) as frames:
            return [data async for data in frames]


E = TypeVar("E", bound=BaseException)

FRAME = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
FRAME_DATA = '{"type":"RUN_STARTED","threadId":"t","runId":"r"}'


async def _read_into(got: list[str], transport: HttpxTransport) -> None:
    """Each frame's data into ``got`` as it arrives, until the stream ends or raises."""
    with trio.fail_after(WAIT):
        async with aclosing(transport.stream(b"{}")) as frames:
            async for data in frames:
                got.append(data)


# -- streaming ------------------------------------------------------------------


def test_frames_arrive_as_they_are_sent() -> None:
    """The server sends the next frames only once the client has the first one."""
    seen_first = trio.Event()

    async def handler(request: Request, send: Send) -> None:
        await start(send, content_type=b"text/event-stream; charset=utf-8")
        await body(send, b": hello\n\n" + FRAME)
        with trio.fail_after(WAIT):
            await seen_first.wait()
        await body(send, b'data: {"n":')
        await body(send, b"2}\r")
        await body(send, b"\n\r\ndata: \xe4\xb8")
        await body(send, b"\x96\n\n", more=False)

    async def main() -> None:
        got = []
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with trio.fail_after(WAIT):
                async with aclosing(transport.stream(b"{}")) as frames:
                    async for data in frames:
                        got.append(data)
                        seen_first.set()
        assert got == [FRAME_DATA, '{"n":2}', "世"]

    trio.run(main)


def test_the_request_is_sent_as_given() -> None:
    seen: list[Request] = []

    async def handler(request: Request, send: Send) -> None:
        seen.append(request)
        await start(send)
        await body(send, FRAME, more=False)

    payload = b'{"threadId": "t",  "runId":"r", "x": "\xc3\xa9"}\n'

    async def main() -> None:
        async with hypercorn_server(handler) as url:
            headers = {"Authorization": "Bearer s3cret", "X-Custom": "1", "accept": "*/*"}
            async with HttpxTransport(url, headers=headers) as transport:
                assert await collect(transport, payload) == [FRAME_DATA]

    trio.run(main)
    (request,) = seen
    assert (request.method, request.path, request.body) == ("POST", "/agent", payload)
    assert request.header(b"content-type") == [b"application/json"]
    assert request.header(b"accept") == [b"text/event-stream"]
    assert request.header(b"authorization") == [b"Bearer s3cret"]
    assert request.header(b"x-custom") == [b"1"]


def test_an_injected_client_is_used_and_left_open() -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async def handler(request: Request, send: Send) -> None:
        await start(send)
        await body(send, FRAME, more=False)

    async def main() -> None:
        async with (
            hypercorn_server(handler) as url,
            httpx.AsyncClient(event_hooks={"request": [record]}) as client,
        ):
            async with HttpxTransport(url, client=client) as transport:
                assert await collect(transport) == [FRAME_DATA]
                assert await collect(transport) == [FRAME_DATA]
            assert not client.is_closed
            assert len(sent) == 2

    trio.run(main)


def test_an_owned_client_is_closed_with_the_transport() -> None:
    async def main() -> None:
        async with HttpxTransport("http://127.0.0.1:9/") as transport:
            client = transport._client
        assert client.is_closed

    trio.run(main)


@pytest.mark.parametrize("owned", [True, False], ids=["owned-client", "injected-client"])
def test_a_closed_transport_fails_for_good_and_sends_nothing(owned: bool) -> None:
    """R-F1: httpx refuses to send on a closed client (a RuntimeError), which read as a
    retryable failure: the run waited out its whole back-off, retrying what could never
    be sent, and its error said to try again. Closed is closed: not retryable."""
    arrived: list[bytes] = []

    async def handler(request: Request, send: Send) -> None:
        arrived.append(request.body)
        await start(send)
        await body(send, FRAME, more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url:
            client = None if owned else httpx.AsyncClient()
            transport = HttpxTransport(url, client=client)
            assert await collect(transport) == [FRAME_DATA]
            await (transport.aclose() if owned else client.aclose())  # type: ignore[union-attr]
            with pytest.raises(TransportError) as caught:
                await collect(transport)
            assert caught.value.retryable is False
            assert "closed" in caught.value.message and "nothing was sent" in caught.value.message
            assert len(arrived) == 1

    trio.run(main)


# -- errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:8000", r"needs http:// or https:// \(did you mean 'http://localhost:8000'\?\)"),
        (
            "1.2.3.4:8000/agent",  # an address whose second character is not alphanumeric
            r"needs http:// or https:// \(did you mean 'http://1\.2\.3\.4:8000/agent'\?\)",
        ),
        ("ftp://example.com/agent", "needs http:// or https://$"),
        ("http://", "has no host$"),
        ("not a url", "needs http:// or https://$"),
        ("/agent", "needs http:// or https://$"),  # no hint: 'http:///agent' has no host
        (8000, "Invalid type for url"),
    ],
)
def test_a_url_that_is_not_an_endpoint_is_refused_at_construction(url: Any, says: str) -> None:
    """Not at the first run, as a non-retryable error about a missing protocol."""
    with pytest.raises(UsageError, match=says):
        HttpxTransport(url)


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"X-Name": "é"}, "the value of header 'X-Name' must be ASCII text on one line"),
        ({"X-Name": "a\r\nInjected: yes"}, "holds a line break or NUL"),
        ({"Bad Name": "v"}, "must be an HTTP token (letters, digits, -): the one beginning 'Bad'"),
        ({"": "v"}, "must be an HTTP token (letters, digits, -): not empty text"),
        ({" X": "v"}, "not text with a character HTTP does not allow"),
        ({"X": 5}, "holds a value of type int"),
        ([("X", "v")], "headers takes a mapping of names to values"),
        # Both would be sent; which credential counts would be the server's choice.
        ({"Authorization": "a", "authorization": "b"}, "header 'authorization' is given twice"),
    ],
)
def test_a_header_http_cannot_carry_is_refused_at_construction(
    headers: dict[str, Any], says: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        HttpxTransport("http://127.0.0.1:1/", headers=headers)


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("ftp://user:SECRET@host/agent?token=SECRET", None),
        ("user:SECRET@host/agent?token=SECRET#SECRET", None),
        ("http:///agent?token=SECRET", None),
        ("http://127.0.0.1:1/", {"Authorization": "Bearer SECRET\n"}),
        ("http://127.0.0.1:1/", {"Authorization SECRET": "x"}),
        ("http://127.0.0.1:1/", {"X-Key": "SECRET é"}),
        ("http://127.0.0.1:1/", {"X-Key": b"SECRET"}),
    ],
)
def test_a_refusal_at_construction_never_quotes_a_credential(
    url: str, headers: dict[str, Any] | None
) -> None:
    """Errors are logged and shown: a URL's userinfo and query, a header's value and a
    malformed header's name (a token read from a file keeps its newline) stay out."""
    with pytest.raises(UsageError) as caught:
        HttpxTransport(url, headers=headers)
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        ({"read_timeout": "x"}, "read_timeout takes seconds (a positive number) or None"),
        ({"connect_timeout": 0}, "connect_timeout takes seconds"),
        ({"idle_timeout": float("inf")}, "idle_timeout takes seconds"),
        ({"idle_timeout": True}, "idle_timeout takes seconds"),
        ({"max_frame_bytes": 0}, "max_frame_bytes takes a positive integer"),
        ({"max_frame_bytes": 1.5}, "max_frame_bytes takes a positive integer"),
        ({"client": "x"}, "client takes an httpx.AsyncClient or None, not a str"),
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_at_construction(
    argument: dict[str, Any], says: str
) -> None:
    """Not at every attempt, as a retryable TransportError about concatenating str."""
    with pytest.raises(UsageError, match=re.escape(says)):
        HttpxTransport("http://127.0.0.1:1/", **argument)


def test_the_smallest_settings_are_accepted() -> None:
    """A positive integer is any from 1: the boundary is not refused with the zero."""
    transport = HttpxTransport("http://127.0.0.1:1/", max_frame_bytes=1)
    trio.run(transport.aclose)


def test_a_star_import_gives_the_public_names_only() -> None:
    """``from interlude.adapters.httpx import *`` brings the transport and its helpers,
    not the modules it uses (``time``, ``re``, ``httpx`` would shadow the caller's)."""
    namespace: dict[str, Any] = {}
    exec("from interlude.adapters.httpx import *", namespace)
    assert set(namespace) - {"__builtins__"} == {
        "ERROR_BODY_LIMIT",
        "HttpxTransport",
        "checked_headers",
        "endpoint_url",
        "redacted",
        "retry_after",
    }


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (
            300,
            "(a redirect to http://h/next: interlude does not follow redirects; use the new URL)",
        ),
        (
            308,
            "(a redirect to http://h/next: interlude does not follow redirects; use the new URL)",
        ),
        (401, "(check the credentials the transport sends: its headers)"),
        (403, "(check the credentials the transport sends: its headers)"),
        (404, "(check the endpoint URL: it takes POST requests of RunAgentInput)"),
        (405, "(check the endpoint URL: it takes POST requests of RunAgentInput)"),
        (400, ""),
        (500, ""),
    ],
)
def test_a_status_the_application_can_fix_says_what_to_check(status: int, hint: str) -> None:
    error = TransportError.from_status(status, "", endpoint="E", location="http://h/next")
    assert error.message == f"the endpoint E answered HTTP {status}" + (f" {hint}" if hint else "")
    assert not TransportError.from_status(299, "", location="x").message.endswith(")")


@pytest.mark.parametrize(
    ("charset", "sent"),
    [
        *((c, b"token expired \xff") for c in ("base64", "hex", "zlib", "uu", "rot13")),
        *((c, b"token expired \xff") for c in ("idna", "utf-16", "no-such-codec")),
        ("base64", b"dG9r"),  # valid base64: its codec gives bytes, not text
    ],
)
def test_an_error_answer_keeps_its_status_whatever_charset_it_declares(
    charset: str, sent: bytes
) -> None:
    """A charset can name any codec Python has: the status must reach the application
    (a 401 read as a retryable status-less error was retried and never called a 401),
    and the body is text, read as UTF-8 when the charset does not give text."""

    async def handler(request: Request, send: Send) -> None:
        await start(send, 401, b"text/plain; charset=" + charset.encode())
        await body(send, sent, more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        assert (caught.value.status, caught.value.retryable) == (401, False)
        assert "check the credentials" in caught.value.message
        assert caught.value.body == sent.decode("utf-8", "replace")

    trio.run(main)


def test_a_redirect_is_not_followed_and_says_where_it_points() -> None:
    async def handler(request: Request, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 308,
                "headers": [(b"location", b"/v2/agent?token=secret")],
            }
        )
        await body(send, b"", more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        error = caught.value
        assert (error.status, error.retryable) == (308, False)
        target = str(httpx.URL(url).join("/v2/agent"))
        assert error.message == (
            f"the endpoint {url} answered HTTP 308 (a redirect to {target}: interlude does "
            "not follow redirects; use the new URL)"
        )

    trio.run(main)


@pytest.mark.parametrize("location", [None, b""], ids=["no-location", "empty-location"])
def test_a_redirect_that_says_nowhere_is_still_a_redirect_error(location: bytes | None) -> None:
    """A 3xx without a (usable) Location header: the status still says what happened,
    not retried, with no target to name; never a crash reading the missing header."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {} if location is None else {"Location": location.decode()}
        return httpx.Response(302, headers=headers)

    with pytest.raises(TransportError) as caught:
        trio.run(_mock_collect, handler)
    assert caught.value == TransportError.from_status(302, "", endpoint="http://agent.test/")
    assert caught.value.message == (
        "the endpoint http://agent.test/ answered HTTP 302 (a redirect: interlude does not "
        "follow redirects; use the new URL)"
    )


def test_a_location_on_an_answer_that_is_no_redirect_is_not_called_a_redirect() -> None:
    """A 503 pointing at a status page: it is a retryable 503, not a redirect to follow."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Location": "/status?token=SECRET", "Content-Type": "text/plain"}
        return httpx.Response(503, headers=headers, content=b"down for maintenance")

    with pytest.raises(TransportError) as caught:
        trio.run(_mock_collect, handler)
    error = caught.value
    assert (error.status, error.retryable, error.body) == (503, True, "down for maintenance")
    assert error.message == "the endpoint http://agent.test/ answered HTTP 503"


def test_a_redirect_a_response_hook_raises_for_says_where_it_points() -> None:
    """An application's client whose response hook calls raise_for_status raises for a
    3xx too: the error still names the target, as for a redirect the transport reads."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(307, headers={"Location": "https://new.test/agent?key=SECRET"})

    async def raise_for_status(response: httpx.Response) -> None:
        response.raise_for_status()

    async def main() -> None:
        async with (
            httpx.AsyncClient(
                transport=httpx.MockTransport(handler),
                event_hooks={"response": [raise_for_status]},
            ) as client,
            HttpxTransport("http://agent.test/", client=client) as transport,
        ):
            await collect(transport)

    with pytest.raises(TransportError) as caught:
        trio.run(main)
    assert (caught.value.status, caught.value.retryable) == (307, False)
    assert caught.value.message == (
        "the endpoint http://agent.test/ answered HTTP 307 (a redirect to "
        "https://new.test/agent: interlude does not follow redirects; use the new URL)"
    )


def test_a_2xx_that_is_not_an_event_stream_quotes_what_it_said() -> None:
    said = b'{"error": {"code": "streaming_disabled",\n "message": "use /v1/sse"}}'

    async def handler(request: Request, send: Send) -> None:
        await start(send, 200, b"application/json")
        await body(send, said + b" " * 1000 + b"x" * 1000, more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(ProtocolError) as caught:
                await collect(transport)
        # The body is kept, as a non-2xx answer's is; the message does not quote it.
        assert caught.value == ProtocolError(
            f"{url} answered HTTP 200 with content type 'application/json', not "
            "text/event-stream; its body is in the error's .body",
            retryable=True,
            body=(said + b" " * 1000 + b"x" * 1000).decode()[:ERROR_BODY_LIMIT],
        )

    trio.run(main)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (503, True), (429, True), (400, False), (404, False), (600, False), (999, False)],
)
def test_a_non_2xx_answer_is_a_transport_error(status: int, retryable: bool) -> None:
    async def handler(request: Request, send: Send) -> None:
        await start(send, status, b"text/plain; charset=utf-8")
        await body(send, f"no luck: {status}".encode(), more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        error = caught.value
        assert (error.status, error.retryable, error.body) == (
            status,
            retryable,
            f"no luck: {status}",
        )
        assert error == TransportError.from_status(status, f"no luck: {status}", endpoint=url)
        hints = {
            404: " (check the endpoint URL: it takes POST requests of RunAgentInput)",
            600: " (a status HTTP does not define: not retried)",
            999: " (a status HTTP does not define: not retried)",
        }
        assert error.message == f"the endpoint {url} answered HTTP {status}" + hints.get(status, "")

    trio.run(main)


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (503, True)])
def test_a_status_a_response_hook_raises_for_is_classified_by_its_status(
    status: int, retryable: bool
) -> None:
    """An application's client whose response hook calls raise_for_status (an httpx
    idiom, and a reason to pass a client in) made every status a retryable failure
    quoting the URL, query and token included, without its status."""

    async def handler(request: Request, send: Send) -> None:
        await start(send, status, b"application/json")
        await body(send, b'{"error": "nope"}', more=False)

    async def raise_for_status(response: httpx.Response) -> None:
        response.raise_for_status()

    async def main() -> None:
        async with (
            hypercorn_server(handler) as url,
            httpx.AsyncClient(event_hooks={"response": [raise_for_status]}) as client,
            HttpxTransport(url + "?api_key=SECRET", client=client) as transport,
        ):
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        error = caught.value
        assert (error.status, error.retryable) == (status, retryable)
        assert error.message == f"the endpoint {url} answered HTTP {status}"
        assert "SECRET" not in repr(error)

    trio.run(main)


def test_a_redirect_loop_an_injected_client_follows_is_not_retried() -> None:
    async def handler(request: Request, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 307, "headers": [(b"location", b"/again")]}
        )
        await body(send, b"", more=False)

    async def main() -> None:
        async with (
            hypercorn_server(handler) as url,
            httpx.AsyncClient(follow_redirects=True, max_redirects=3) as client,
            HttpxTransport(url, client=client) as transport,
        ):
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        assert caught.value.retryable is False
        assert caught.value.message == (
            f"{url} redirected the request too many times (the client passed in follows "
            "redirects): use the URL it ends at"
        )

    trio.run(main)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("Tue, 01 Dec 2026 00:00:30 GMT", 30.0),  # an HTTP date, from now
        ("Mon, 30 Nov 2026 00:00:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
        ("-5", None),
        ("1.5", None),  # delta-seconds are whole
        ("\u0661\u0662", None),  # Arabic-Indic digits: str.isdigit, but not DIGIT (RFC 5234)
        ("12345678901", 2.0**31),  # absurd, but a long wait all the same: capped
        ("9" * 400, 2.0**31),
        ("Tue, 01 Dec 2026 00:00:30", 30.0),  # no zone: HTTP dates are GMT
        ("Tue Dec  1 00:00:30 2026", 30.0),  # asctime's form (RFC 9110 5.6.7: accept it)
        ("Tuesday, 01-Dec-26 00:00:30 GMT", 30.0),  # RFC 850's form
        ("9" * 5000, 2.0**31),  # past int()'s 4,300-digit limit: still no ValueError
        ("0000000000007", 7.0),  # leading zeros are still delta-seconds (1*DIGIT)
        ("0" * 5000, 0.0),
        ("Tue, 01 Dec 99999999999 00:00:00 GMT", None),  # a year past datetime's range
        ("Fri, 31 Dec 9999 23:59:59 GMT", 2.0**31),  # a far date waits as long as a big number
    ],
)
def test_retry_after_reads_seconds_and_http_dates(
    header: str | None, seconds: float | None
) -> None:
    now = 1_796_083_200.0  # Tue, 01 Dec 2026 00:00:00 GMT
    assert retry_after(header, now) == seconds


@pytest.fixture
def local_zone_far_from_utc() -> Iterator[None]:
    """The machine's local zone set 9 hours east of UTC (POSIX TZ: no tz database
    needed), restored after."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "XST-9"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.parametrize(
    "header",
    [
        "Tue, 01 Dec 2026 00:00:30",  # no zone
        "Tue Dec  1 00:00:30 2026",  # asctime's form, which has none
        "Tue, 01 Dec 2026 00:00:30 -0000",  # RFC 5322's "zone unknown"
        "Tue, 01 Dec 2026 00:00:30 GMT",
    ],
)
def test_a_retry_after_date_is_gmt_whatever_the_machine_s_zone(
    header: str, local_zone_far_from_utc: None
) -> None:
    """RFC 9110 5.6.7: HTTP dates are GMT. A client east of UTC reading a zoneless date
    in its own zone would take it for 9 hours ago and retry at once."""
    assert time.localtime(0).tm_hour == 9  # the zone did change
    now = 1_796_083_200.0  # Tue, 01 Dec 2026 00:00:00 GMT
    assert retry_after(header, now) == 30.0


def test_a_retry_after_header_rides_the_transport_error() -> None:
    async def handler(request: Request, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [(b"content-type", b"text/plain"), (b"retry-after", b"12")],
            }
        )
        await body(send, b"slow down", more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        assert (caught.value.status, caught.value.retry_after) == (429, 12.0)
        assert caught.value.retryable
        assert caught.value.message.endswith("HTTP 429; it asked to wait 12 s before retrying")

    trio.run(main)


def test_a_long_retry_after_is_shown_in_whole_seconds() -> None:
    error = TransportError.from_status(503, "", retry_after=2147483647.0)
    assert error.message.endswith("it asked to wait 2147483647 s before retrying")
    assert TransportError.from_status(503, "", retry_after=1.5).message.endswith(
        "1.5 s before retrying"
    )


def test_a_long_error_body_is_cut() -> None:
    async def handler(request: Request, send: Send) -> None:
        await start(send, 502, b"text/html")
        await body(send, b"x")
        for _ in range(100):
            await body(send, "é".encode() * 500)
        await body(send, b"", more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        # 4096 bytes end half way through an "é": that half is dropped.
        assert caught.value.body == "x" + "é" * (ERROR_BODY_LIMIT // 2 - 1)
        assert caught.value.retryable

    trio.run(main)


def test_an_error_body_cut_where_a_read_ends_drops_a_character_cut_there() -> None:
    """A first read of exactly ERROR_BODY_LIMIT bytes ending half way through a character:
    more follows, so that half is dropped rather than shown as U+FFFD."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"x" * (ERROR_BODY_LIMIT - 1) + "é".encode()[:1]
        yield "é".encode()[1:] + b" and more"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, headers={"Content-Type": "text/plain"}, content=chunks())

    async def main() -> None:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
            HttpxTransport("http://agent.test/", client=client) as transport,
        ):
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        assert caught.value.body == "x" * (ERROR_BODY_LIMIT - 1)

    trio.run(main)


async def _mock_collect(handler: Callable[[httpx.Request], httpx.Response]) -> list[str]:
    """``collect`` through an httpx.MockTransport answering with ``handler``."""
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
        HttpxTransport("http://agent.test/", client=client) as transport,
    ):
        return await collect(transport)


def _failed_event_stream(
    chunks: Callable[[], AsyncIterator[bytes]], failure: type[E], **options: Any
) -> tuple[list[str], E]:
    """The frames a 200 event stream of ``chunks`` delivered through an httpx.MockTransport
    before it raised, and the ``failure`` it raised."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=chunks())

    got: list[str] = []

    async def main() -> None:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
            HttpxTransport("http://agent.test/", client=client, **options) as transport,
        ):
            await _read_into(got, transport)

    with pytest.raises(failure) as caught:
        trio.run(main)
    return got, caught.value


def test_an_error_body_is_read_in_the_charset_it_declares() -> None:
    """An error page in ISO-8859-1 reads as its author wrote it, not as broken UTF-8."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            503, headers={"Content-Type": "text/plain; charset=iso-8859-1"}, content=b"caf\xe9"
        )

    with pytest.raises(TransportError) as caught:
        trio.run(_mock_collect, handler)
    assert caught.value.body == "café"


def test_an_error_answer_in_a_coding_the_transport_cannot_read_keeps_its_status() -> None:
    """A 503 compressed as brotli: its body is not read (a bomb would be), but the status
    still decides and the body says why it is missing."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": "text/plain", "Content-Encoding": "br", "Retry-After": "3"}
        return httpx.Response(503, headers=headers, stream=httpx.ByteStream(b"\x8b\x02\x80x"))

    with pytest.raises(TransportError) as caught:
        trio.run(_mock_collect, handler)
    assert caught.value == TransportError.from_status(
        503,
        "(a body in a content coding interlude does not read)",
        retry_after=3.0,
        endpoint="http://agent.test/",
    )


def test_a_body_given_whole_is_not_decoded_twice() -> None:
    """A mock's body given whole is decoded by httpx already: its Content-Encoding has
    been undone, and reading it as gzip again would fail a good stream."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=gzip.compress(FRAME))

    assert trio.run(_mock_collect, handler) == [FRAME_DATA]


def test_none_means_no_limit_for_every_timeout() -> None:
    """reference.md: each timeout is a positive number of seconds or None (no limit)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=FRAME)

    async def main() -> list[str]:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
            HttpxTransport(
                "http://agent.test/",
                client=client,
                connect_timeout=None,
                read_timeout=None,
                idle_timeout=None,
            ) as transport,
        ):
            return await collect(transport)

    assert trio.run(main) == [FRAME_DATA]


def test_a_2xx_that_is_not_an_event_stream_is_a_protocol_error() -> None:
    async def handler(request: Request, send: Send) -> None:
        await start(send, 200, b"application/json")
        await body(send, b'{"type":"RUN_STARTED"}', more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(ProtocolError, match="'application/json'") as caught:
                await collect(transport)
        assert caught.value.retryable  # R-F1: a protocol error before the acknowledgement

    trio.run(main)


REFUSED_BODIES = {
    # Stacked layers multiply a bomb; a coding the transport cannot undo would reach the
    # parser as bytes: refused before the body is read.
    **{
        coding: (coding.encode(), b"\x1f\x8b not read", ProtocolError, "in one layer of gzip")
        for coding in ["gzip, gzip", "br", "gzip, deflate", "zstd"]
    },
    # A body that is not valid in its one coding: a transport failure.
    "corrupt gzip": (
        b"gzip",
        gzip.compress(FRAME)[:-8] + b"garbage!" + b"more garbage",
        TransportError,
        "could not be decoded",
    ),
}


@pytest.mark.parametrize("case", REFUSED_BODIES)
def test_bodies_in_codings_the_transport_cannot_read_are_refused_unread(case: str) -> None:
    """Refused, and retryable as R-F1 makes every transport failure and protocol error
    before the acknowledgement (a server's answer may differ next time)."""
    coding, data, error, says = REFUSED_BODIES[case]

    async def handler(request: Request, send: Send) -> None:
        await encoded(send, data, coding)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(error, match=says) as caught:
                await collect(transport)
        assert caught.value.retryable

    trio.run(main)


def test_one_layer_of_gzip_is_read() -> None:
    async def handler(request: Request, send: Send) -> None:
        await encoded(send, gzip.compress(FRAME), b"gzip")

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            assert await collect(transport) == [FRAME_DATA]

    trio.run(main)


def _encoded(coding: bytes, data: bytes) -> bytes:
    if coding == b"deflate":
        return zlib.compress(data)
    if coding == b"raw deflate":
        squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return squeeze.compress(data) + squeeze.flush()
    return gzip.compress(data)


@pytest.mark.parametrize("coding", [b"gzip", b"x-gzip", b"deflate", b"raw deflate"])
def test_a_compressed_read_is_inflated_a_bounded_slice_at_a_time(
    coding: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bomb (a few KB that inflate to 24 MiB of comment lines, in one network read)
    reaches the parser in slices of at most 1 MiB, and the event loop runs between
    them: httpx would inflate the read whole, in memory and without a break."""
    filler = (b": " + b"x" * 1000 + b"\n") * (24 * 1024)
    fed: list[int] = []
    checkpoints = 0
    real_feed = SSEParser.feed
    real_checkpoint = anyio.lowlevel.checkpoint

    def feed(parser: SSEParser, chunk: bytes) -> list[Any]:
        fed.append(len(chunk))
        return real_feed(parser, chunk)

    async def checkpoint() -> None:
        nonlocal checkpoints
        checkpoints += 1
        await real_checkpoint()

    monkeypatch.setattr(SSEParser, "feed", feed)
    monkeypatch.setattr(anyio.lowlevel, "checkpoint", checkpoint)

    async def handler(request: Request, send: Send) -> None:
        name = b"deflate" if coding == b"raw deflate" else coding
        await encoded(send, _encoded(coding, FRAME + filler + FRAME), name)

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            assert await collect(transport) == [FRAME_DATA, FRAME_DATA]

    trio.run(main)
    assert sum(fed) == len(filler) + 2 * len(FRAME)
    assert max(fed) <= SLICE
    assert (
        checkpoints >= len(filler) // SLICE - len(fed) // 2
    )  # nearly every slice but a read's first


def test_the_transport_asks_only_for_the_codings_it_reads() -> None:
    """br or zstd would be refused: httpx offers them when their packages are installed."""
    seen: list[list[bytes]] = []

    async def handler(request: Request, send: Send) -> None:
        seen.append(request.header(b"accept-encoding"))
        await start(send)
        await body(send, FRAME, more=False)

    async def main() -> None:
        async with hypercorn_server(handler) as url:
            async with HttpxTransport(url) as transport:
                await collect(transport)
            async with HttpxTransport(url, headers={"Accept-Encoding": "identity"}) as transport:
                await collect(transport)
            async with httpx.AsyncClient(headers={"Accept-Encoding": "br, zstd"}) as client:
                await collect(HttpxTransport(url, client=client))

    trio.run(main)
    assert seen == [[b"gzip, deflate"], [b"identity"], [b"gzip, deflate"]]


def test_a_compressed_error_body_is_read_only_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inflated = 0
    slices = Inflater.slices

    def counted(self: Inflater, data: bytes) -> Iterator[bytes]:
        nonlocal inflated
        for piece in slices(self, data):
            inflated += len(piece)
            yield piece

    monkeypatch.setattr(Inflater, "slices", counted)

    async def handler(request: Request, send: Send) -> None:
        bomb = gzip.compress(b"overloaded " + b"z" * (64 << 20))
        await encoded(send, bomb, b"gzip", status=503, content_type=b"text/plain")

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError, match="HTTP 503") as caught:
                await collect(transport)
        assert caught.value.body == ("overloaded " + "z" * (64 << 20))[:ERROR_BODY_LIMIT]

    trio.run(main)
    # The rest of the bomb is never inflated: not even the rest of the read it came in.
    assert inflated <= 4 * SLICE


def test_an_endless_error_body_is_read_only_up_to_the_limit() -> None:
    reads = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal reads
        while True:
            reads += 1
            await anyio.lowlevel.checkpoint()  # as a socket read would: cancellable
            yield b"busy " * 200

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Content-Type": "text/plain"}, content=endless())

    with pytest.raises(TransportError, match="HTTP 503") as caught:
        trio.run(_mock_collect, handler)
    assert caught.value.body == ("busy " * 1000)[:ERROR_BODY_LIMIT]
    assert reads <= ERROR_BODY_LIMIT // 1000 + 2  # not read on until read_timeout


def test_a_frame_over_the_limit_is_a_protocol_error() -> None:
    async def handler(request: Request, send: Send) -> None:
        await start(send)
        await body(send, FRAME)
        await body(send, b"data: " + b"x" * 2000 + b"\n\n", more=False)

    async def main() -> None:
        got = []
        async with (
            hypercorn_server(handler) as url,
            HttpxTransport(url, max_frame_bytes=1000) as transport,
        ):
            with pytest.raises(ProtocolError) as caught:
                await _read_into(got, transport)
        assert got == [FRAME_DATA]
        # Retryable (R-F1): before the acknowledgement the run is tried again.
        assert caught.value == ProtocolError(
            "an SSE frame or line exceeds the limit of 1000 bytes (max_frame_bytes)",
            retryable=True,
        )

    trio.run(main)


def test_frames_in_the_same_read_as_one_over_the_limit_still_arrive() -> None:
    """A RUN_FINISHED and the oversized frame after it, in one read: the run's end is not
    lost with it (the same bytes in two reads deliver it), then the stream fails."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"

    async def answer(stream: trio.SocketStream) -> None:
        await stream.send_all(head + FRAME + FRAME + b"data: " + b"x" * 2000 + b"\n\n")

    async def main() -> None:
        got = []
        async with (
            raw_server(answer) as url,
            HttpxTransport(url, max_frame_bytes=1000) as transport,
        ):
            with pytest.raises(ProtocolError, match="exceeds the limit of 1000 bytes"):
                await _read_into(got, transport)
        assert got == [FRAME_DATA, FRAME_DATA]

    trio.run(main)


def test_a_frame_over_the_limit_fails_at_once_not_at_the_next_read() -> None:
    """The read that completes frames and then passes max_frame_bytes: its frames arrive,
    then the error, without waiting on a stream that may send nothing more for minutes."""

    async def chunks() -> AsyncIterator[bytes]:
        yield FRAME + FRAME + b"data: " + b"x" * 2000 + b"\n\n"
        await trio.sleep_forever()  # the endpoint keeps the stream open, silent

    got, failure = _failed_event_stream(chunks, ProtocolError, max_frame_bytes=1000)
    assert got == [FRAME_DATA, FRAME_DATA]
    assert "exceeds the limit of 1000 bytes" in failure.message


def test_frames_in_the_same_read_as_a_damaged_gzip_end_still_arrive() -> None:
    """A gzip body sent in one read whose CRC at the end is wrong: its frames (a run's
    RUN_FINISHED among them) arrive, then the body is reported corrupt."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        b"Connection: close\r\n\r\n"
    )
    packed = gzip.compress(FRAME + FRAME)
    damaged = packed[:-5] + bytes([packed[-5] ^ 1]) + packed[-4:]  # the CRC's last byte

    async def answer(stream: trio.SocketStream) -> None:
        await stream.send_all(head + damaged)

    async def main() -> None:
        got = []
        async with raw_server(answer) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError, match="could not be decoded"):
                await _read_into(got, transport)
        assert got == [FRAME_DATA, FRAME_DATA]

    trio.run(main)


def test_a_body_that_is_no_event_stream_is_kept_in_the_error() -> None:
    """An endpoint that sends an error object as text/event-stream (no data lines): the
    stream ends mid-"event", and what it sent is the clue, so it is in ``.body`` (not in
    the message, which is logged). A stream that had sent frames keeps no body."""
    said = b'{"error": "model not found"}'

    def answer_with(body: bytes) -> Any:
        async def answer(stream: trio.SocketStream) -> None:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            await stream.send_all(head + b"\r\n" + body)

        return answer

    async def main() -> None:
        for body, kept in ((said, said.decode()), (FRAME + said, None)):
            async with raw_server(answer_with(body)) as url, HttpxTransport(url) as transport:
                with pytest.raises(ProtocolError) as caught:
                    with trio.fail_after(WAIT):
                        async for _ in transport.stream(b"{}"):
                            pass
            assert caught.value.retryable and caught.value.body == kept
            assert ("in the error's .body" in caught.value.message) is (kept is not None)
            assert "model not found" not in caught.value.message

    trio.run(main)


@pytest.mark.parametrize(
    ("pieces", "kept"),
    [
        # An HTML error page sent as an event stream, over three reads: its first 4 KiB.
        (
            [b"<" + b"x" * 2999, b"y" * 3000, b"z" * 3000],
            "<" + "x" * 2999 + "y" * (ERROR_BODY_LIMIT - 3000),
        ),
        # The body itself ends half way through a character: shown as U+FFFD, not lost.
        ([b"model not found \xc3"], "model not found \ufffd"),
    ],
    ids=["long", "cut-character"],
)
def test_what_a_body_that_is_no_event_stream_kept_is_its_first_4_kib(
    pieces: list[bytes], kept: str
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    got, failure = _failed_event_stream(chunks, ProtocolError)
    assert got == []
    assert failure == ProtocolError(
        "the stream ended in the middle of an event; what it sent is in the error's .body",
        retryable=True,
        body=kept,
    )


def _gzip_flushed(*pieces: bytes) -> bytes:
    """``pieces`` in one gzip stream, flushed after each as a streaming server does; no end."""
    squeeze = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return b"".join(squeeze.compress(p) + squeeze.flush(zlib.Z_SYNC_FLUSH) for p in pieces)


@pytest.mark.parametrize(
    ("coding", "says"),
    [
        (None, "the stream ended in the middle of an event"),
        (
            "gzip",  # the server stops mid-event: its gzip stream has no end either
            "the stream ended in the middle of an event (and before the end of its "
            "compressed body)",
        ),
    ],
)
def test_a_stream_cut_mid_frame_is_a_retryable_protocol_error(
    coding: str | None, says: str
) -> None:
    body = FRAME + b'data: {"type":"TEXT_'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
    if coding == "gzip":
        body = _gzip_flushed(FRAME, b'data: {"type":"TEXT_')
        head += b"Content-Encoding: gzip\r\n"

    async def answer(stream: trio.SocketStream) -> None:
        await stream.send_all(head + b"\r\n" + body)

    async def main() -> None:
        got = []
        async with raw_server(answer) as url, HttpxTransport(url) as transport:
            with pytest.raises(ProtocolError) as caught:
                with trio.fail_after(WAIT):
                    async for data in transport.stream(b"{}"):
                        got.append(data)
        assert got == [FRAME_DATA]
        assert caught.value == ProtocolError(says, retryable=True)

    trio.run(main)


def test_a_connection_dropped_inside_a_chunked_body_is_a_retryable_transport_error() -> None:
    async def answer(stream: trio.SocketStream) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        await stream.send_all(head + b"%x\r\n%s\r\n" % (len(FRAME), FRAME) + b"10\r\ndata: ")

    async def main() -> None:
        async with raw_server(answer) as url, HttpxTransport(url) as transport:
            with pytest.raises(TransportError, match="broke while streaming") as caught:
                await collect(transport)
        assert caught.value.retryable

    trio.run(main)


def test_a_refused_connection_is_a_retryable_transport_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there

    async def main() -> None:
        url = f"http://user:pw@127.0.0.1:{port}/agent?token=s3cret"
        async with HttpxTransport(url) as transport:
            with pytest.raises(TransportError, match="could not connect") as caught:
                await collect(transport)
        assert caught.value.retryable
        assert caught.value.status is None
        assert f"127.0.0.1:{port}/agent" in caught.value.message
        assert "pw" not in caught.value.message
        assert "s3cret" not in caught.value.message

    trio.run(main)


def test_a_connection_not_made_in_time_is_a_retryable_transport_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    async def main() -> None:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
            HttpxTransport("http://agent.test/?token=SECRET", client=client) as transport,
        ):
            with pytest.raises(TransportError) as caught:
                await collect(transport)
        assert caught.value == TransportError(
            "could not connect to http://agent.test/ within 10.0 s", retryable=True
        )
        assert isinstance(caught.value.__cause__, httpx.ConnectTimeout)

    trio.run(main)


@pytest.mark.parametrize(
    ("raised", "says", "retryable"),
    [
        (httpx.LocalProtocolError, "could not be made", False),  # the same again would fail
        (httpx.UnsupportedProtocol, "could not be made", False),
        (httpx.RemoteProtocolError, "failed before a response arrived", True),
        (httpx.ReadError, "failed before a response arrived", True),
    ],
)
def test_a_failure_before_the_head_is_a_transport_error(
    raised: type[httpx.TransportError], says: str, retryable: bool
) -> None:
    """Whatever an injected client's transport raises before the head, the run gets a
    TransportError (R-F1), retryable unless the request itself cannot be made."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise raised("refused", request=request)

    async def main() -> None:
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client,
            HttpxTransport("http://agent.test/?token=SECRET", client=client) as transport,
        ):
            with pytest.raises(TransportError, match=says) as caught:
                await collect(transport)
        assert caught.value.retryable is retryable
        assert "SECRET" not in caught.value.message
        assert caught.value.message.endswith(": refused")  # why, in httpx's words

    trio.run(main)


@pytest.mark.parametrize(
    ("raised", "says"),
    [
        (httpx.ConnectError, "could not connect to http://agent.test/: ConnectError"),
        (httpx.UnsupportedProtocol, "could not be made: UnsupportedProtocol"),
        (httpx.ReadError, "failed before a response arrived: ReadError"),
    ],
)
def test_a_failure_httpx_gives_no_words_for_is_named_by_its_kind(
    raised: type[httpx.TransportError], says: str
) -> None:
    """An httpx error with an empty message (a bare OSError underneath gives one) still
    says what went wrong: its class, not a sentence ending in ': '."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise raised("", request=request)

    with pytest.raises(TransportError) as caught:
        trio.run(_mock_collect, handler)
    assert caught.value.message.endswith(says)


def test_a_stream_broken_without_words_is_named_by_its_kind() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield FRAME
        raise httpx.RemoteProtocolError("")

    got, failure = _failed_event_stream(chunks, TransportError)
    assert got == [FRAME_DATA]
    assert failure.retryable
    assert failure.message == (
        "the connection to http://agent.test/ broke while streaming: RemoteProtocolError"
    )


def test_a_full_connection_pool_says_how_to_carry_more_streams() -> None:
    """Every open stream holds a connection of the client's pool (100 in httpx's default
    client); one more waits connect_timeout, then fails retryably, saying what to pass."""
    holding = trio.Event()

    async def answer(stream: trio.SocketStream) -> None:
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(FRAME), FRAME)
        )
        holding.set()
        await trio.sleep(WAIT)  # the first stream stays open, holding the one connection

    async def main() -> None:
        async with (
            raw_server(answer) as url,
            httpx.AsyncClient(limits=httpx.Limits(max_connections=1)) as client,
            HttpxTransport(url, client=client, connect_timeout=0.2) as transport,
            trio.open_nursery() as nursery,
        ):

            async def first() -> None:
                async with aclosing(transport.stream(b"{}")) as frames:
                    async for _ in frames:
                        pass

            nursery.start_soon(first)
            await holding.wait()
            with pytest.raises(TransportError, match="came free") as caught:
                await collect(transport)
            nursery.cancel_scope.cancel()
        assert caught.value.retryable and caught.value.status is None
        assert "within 0.2 s (connect_timeout): every open stream holds one" in str(caught.value)
        assert "httpx.Limits(max_connections=...)" in str(caught.value)

    trio.run(main)


def test_no_response_head_in_time_is_a_retryable_transport_error() -> None:
    async def answer(stream: trio.SocketStream) -> None:
        await trio.sleep(WAIT)

    async def main() -> None:
        async with raw_server(answer) as url, HttpxTransport(url, read_timeout=0.2) as transport:
            with pytest.raises(TransportError, match=r"no response within 0\.2 s") as caught:
                await collect(transport)
        assert caught.value.retryable

    trio.run(main)


def test_the_idle_timeout_does_not_cut_the_wait_for_the_head() -> None:
    """reference.md: read_timeout bounds the wait for the head, idle_timeout only the
    silences of the body; a slow head with a short idle_timeout is not an error."""

    async def answer(stream: trio.SocketStream) -> None:
        await trio.sleep(0.5)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        await stream.send_all(head + b"Content-Length: %d\r\n\r\n%s" % (len(FRAME), FRAME))

    async def main() -> None:
        async with (
            raw_server(answer) as url,
            HttpxTransport(url, read_timeout=WAIT, idle_timeout=0.2) as transport,
        ):
            assert await collect(transport) == [FRAME_DATA]

    trio.run(main)


@pytest.mark.parametrize(
    ("connect_timeout", "limit"), [(0.5, "1.1"), (None, "0.6")], ids=["both", "no-connect-limit"]
)
def test_a_head_trickled_a_byte_at_a_time_is_bounded_as_a_whole(
    connect_timeout: float | None, limit: str
) -> None:
    """Each byte comes well within read_timeout, so httpx never times out; the head as a
    whole may take read_timeout plus connect_timeout (no connect limit adds nothing)."""

    async def answer(stream: trio.SocketStream) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(200):  # 4 s of head, and never its end
            await stream.send_all(b"x")
            await trio.sleep(0.02)  # far inside read_timeout, even on a loaded machine

    async def main() -> None:
        async with (
            raw_server(answer) as url,
            HttpxTransport(url, read_timeout=0.6, connect_timeout=connect_timeout) as transport,
        ):
            started = trio.current_time()
            with pytest.raises(TransportError) as caught:
                await collect(transport)
            took = trio.current_time() - started
        assert caught.value == TransportError(
            f"{url} sent no complete response head within {limit} s "
            "(read_timeout plus connect_timeout)",
            retryable=True,
        )
        assert float(limit) <= took < 3.0  # not cut early, and not left to trickle on

    trio.run(main)


def test_a_silent_stream_is_a_retryable_transport_error() -> None:
    async def handler(request: Request, send: Send) -> None:
        await start(send)
        await body(send, FRAME)
        with trio.move_on_after(WAIT):
            await request.receive()  # the client leaving

    async def main() -> None:
        got = []
        async with (
            hypercorn_server(handler) as url,
            HttpxTransport(url, idle_timeout=0.2) as transport,
        ):
            with pytest.raises(TransportError, match=r"silent for more than 0\.2 s") as caught:
                await _read_into(got, transport)
        assert got == [FRAME_DATA]
        assert caught.value.retryable

    trio.run(main)


# -- stopping -------------------------------------------------------------------


def disconnect_watcher() -> tuple[trio.Event, Handler]:
    """A handler that sends one frame, then sets the event when the client goes away."""
    gone = trio.Event()

    async def handler(request: Request, send: Send) -> None:
        await start(send)
        await body(send, FRAME)
        with trio.fail_after(WAIT):
            message = await request.receive()
        assert message["type"] == "http.disconnect"
        gone.set()

    return gone, handler


def test_closing_the_generator_closes_the_response() -> None:
    gone, handler = disconnect_watcher()

    async def main() -> None:
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with trio.fail_after(WAIT):
                async with aclosing(transport.stream(b"{}")) as frames:
                    assert await anext(frames) == FRAME_DATA
                await gone.wait()

    trio.run(main)


def test_cancelling_the_reader_closes_the_response() -> None:
    gone, handler = disconnect_watcher()

    async def main() -> None:
        got: list[str] = []
        async with hypercorn_server(handler) as url, HttpxTransport(url) as transport:
            with trio.fail_after(WAIT):
                async with trio.open_nursery() as nursery:

                    async def read() -> None:
                        async for data in transport.stream(b"{}"):
                            got.append(data)
                            nursery.cancel_scope.cancel()

                    nursery.start_soon(read)
                await gone.wait()
        assert got == [FRAME_DATA]

    trio.run(main)


# -- asyncio --------------------------------------------------------------------


def test_streaming_and_closing_under_asyncio() -> None:
    async def main() -> None:
        seen_first = asyncio.Event()
        gone = asyncio.Event()

        async def handler(request: Request, send: Send) -> None:
            await start(send)
            await body(send, FRAME)
            async with asyncio.timeout(WAIT):
                await seen_first.wait()
            await body(send, b'data: {"n":2}\n\n')
            if request.body == b"stop early":
                async with asyncio.timeout(WAIT):
                    assert (await request.receive())["type"] == "http.disconnect"
                gone.set()
            else:
                await body(send, b'data: {"n":3}\n\n', more=False)

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        stop = asyncio.Event()
        server = asyncio.create_task(
            hypercorn.asyncio.serve(
                asgi(handler), config(f"fd://{sock.detach()}"), shutdown_trigger=stop.wait
            )
        )
        try:
            async with HttpxTransport(f"http://127.0.0.1:{port}/agent") as transport:
                got = []
                async with asyncio.timeout(WAIT):
                    async with aclosing(transport.stream(b"{}")) as frames:
                        async for data in frames:
                            got.append(data)
                            seen_first.set()
                assert got == [FRAME_DATA, '{"n":2}', '{"n":3}']

                seen_first.clear()
                async with asyncio.timeout(WAIT):
                    async with aclosing(transport.stream(b"stop early")) as frames:
                        assert await anext(frames) == FRAME_DATA
                        seen_first.set()
                        assert await anext(frames) == '{"n":2}'
                    await gone.wait()
        finally:
            stop.set()
            async with asyncio.timeout(WAIT):
                await server

    asyncio.run(main())
