"""The HTTP transport: POST a RunAgentInput, stream back the SSE frames' data (R-J4).

It carries bytes and reports failures as interlude errors; what a frame means
is the core's business. httpx runs on trio and on asyncio (through anyio), so
this module uses only anyio and httpx, never a loop directly.
"""

from __future__ import annotations

import codecs
import datetime
import email.utils
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Self

import anyio
import httpx

from interlude.core.errors import ProtocolError, TransportError, UsageError, redacted_url

from .inflate import CorruptBody, Inflater, coding_of
from .sse import DEFAULT_MAX_FRAME_BYTES, SSEParser

__all__ = [
    "ERROR_BODY_LIMIT",
    "HttpxTransport",
    "checked_headers",
    "endpoint_url",
    "redacted",
    "retry_after",
]

ERROR_BODY_LIMIT = 4096
"""Bytes of a non-2xx answer's body kept in the ``TransportError``: enough to explain."""
_LONGEST_WAIT = 2**31  # seconds: a longer Retry-After reads as this (RFC 9111 caps ages so)

_CLEANUP_SECONDS = 5.0  # bound on closing a response, which runs shielded from cancellation


class HttpxTransport:
    """POSTs request bodies to one AG-UI endpoint and streams the answers.

    ``headers`` are sent with every request (authentication, say); the
    transport sets ``Content-Type: application/json`` and
    ``Accept: text/event-stream`` itself, over any given. Timeouts are seconds,
    ``None`` for no limit: ``connect_timeout`` for the TCP/TLS connection,
    ``read_timeout`` for the response head to arrive once the request starts,
    ``idle_timeout`` for the longest silence between bytes of the body (send
    keep-alive comments more often than that). Timeouts apply per request, so
    they hold for an injected client too.

    ``client`` is used as given and left open; without one the transport makes
    its own and closes it in :meth:`aclose` (or at the end of ``async with``).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        connect_timeout: float | None = 10.0,
        read_timeout: float | None = 60.0,
        idle_timeout: float | None = 300.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.url = endpoint_url(url)  # a malformed URL fails here, not at the first run
        for name, seconds in (
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("idle_timeout", idle_timeout),
        ):
            _check_seconds(name, seconds)
        if type(max_frame_bytes) is not int or max_frame_bytes < 1:
            raise UsageError(
                f"HttpxTransport: max_frame_bytes takes a positive integer (bytes), "
                f"not {max_frame_bytes!r}"
            )
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise UsageError(
                f"HttpxTransport: client takes an httpx.AsyncClient or None, "
                f"not a {type(client).__name__}"
            )
        # Error messages name the endpoint without credentials or query (tokens live there).
        self._where = redacted(self.url)
        self._headers = checked_headers(headers)
        self._headers["Content-Type"] = "application/json"
        self._headers["Accept"] = "text/event-stream"
        # The codings this transport undoes itself, a bounded slice at a time (.inflate).
        self._headers.setdefault("Accept-Encoding", "gzip, deflate")
        self._owns_client = client is None
        self._client = httpx.AsyncClient() if client is None else client
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle_timeout = idle_timeout
        # httpx's read timeout bounds each wait for the socket: the gap between bytes. It is
        # read_timeout while the head is awaited, then idle_timeout for the body (see below).
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self._max_frame_bytes = max_frame_bytes

    async def aclose(self) -> None:
        """Close the client if the transport made it; an injected one stays open."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def stream(self, body: bytes) -> AsyncGenerator[str, None]:
        """POST ``body`` as given and yield each SSE frame's data as it arrives.

        The same as :meth:`stream_batches`, one frame at a time.
        """
        batches = self.stream_batches(body)
        try:
            async for batch in batches:
                for data in batch:
                    yield data
        finally:
            await batches.aclose()

    async def stream_batches(self, body: bytes) -> AsyncGenerator[list[str], None]:
        """POST ``body`` as given and yield the data of the SSE frames each network
        read completed, as a list (one hop per read instead of one per frame).

        Raises :class:`TransportError` for a non-2xx answer (with status and
        the body's first 4 KiB) and for network failures and timeouts
        (retryable); :class:`ProtocolError` for a 2xx that is not an event
        stream, a frame over ``max_frame_bytes``, or a stream that ends in the
        middle of a frame (retryable). Closing the generator, or cancelling the
        task reading it, closes the HTTP response at once; use
        ``contextlib.aclosing`` so that breaking out of the loop does too.
        """
        request = self._client.build_request(
            "POST", self.url, content=body, headers=self._headers, timeout=self._timeout
        )
        response = await self._send(request)
        # The head is in: from here a read waits at most idle_timeout. httpcore reads the
        # request's timeout extension when the body starts, and shares this very dict.
        request.extensions["timeout"] = {
            **request.extensions["timeout"],
            "read": self._idle_timeout,
        }
        read_already = response.is_stream_consumed  # a body given whole (a mock's): decoded
        # Raw bytes: httpx would inflate each read whole, a bomb's gigabyte at once.
        chunks = response.aiter_bytes() if read_already else response.aiter_raw()
        try:
            if not response.is_success:
                # The status says what happened, whatever coding the body is in.
                text = "(a body in a content coding interlude does not read)"
                error_inflater = _inflater(response, read_already)
                if error_inflater is not None:
                    text = await self._error_body(response, chunks, error_inflater)
                wait = retry_after(response.headers.get("Retry-After"), time.time())
                raise TransportError.from_status(
                    response.status_code,
                    text,
                    retry_after=wait,
                    endpoint=self._where,
                    location=_location(response),
                )
            inflater = _inflater(response, read_already)
            if inflater is None:
                raise ProtocolError(
                    f"{self._where} encoded the stream as "
                    f"{response.headers.get('Content-Encoding')!r}; interlude reads an event "
                    "stream sent as is, or in one layer of gzip or deflate",
                    retryable=True,  # R-F1: a protocol error before the acknowledgement
                )
            content_type = response.headers.get("Content-Type", "")
            if content_type.partition(";")[0].strip().lower() != "text/event-stream":
                what = f"content type {content_type!r}" if content_type else "no content type"
                # What the endpoint said instead (often an error object) is the clue; it
                # goes in .body, not the message, which is logged: it may echo credentials.
                said = await self._error_body(response, chunks, inflater)
                kept = "; its body is in the error's .body" if said else ""
                raise ProtocolError(
                    f"{self._where} answered HTTP {response.status_code} with {what}, "
                    f"not text/event-stream{kept}",
                    retryable=True,  # R-F1: a protocol error before the acknowledgement
                    body=said or None,
                )
            parser = SSEParser(max_frame_bytes=self._max_frame_bytes)
            head = bytearray()  # the stream's first bytes, while it has completed no frame
            framed = False
            while (chunk := await self._next_chunk(chunks)) is not None:
                for k, piece in enumerate(self._inflated(inflater, chunk)):
                    if k:  # a read that inflates to many slices: let the loop run between
                        await anyio.lowlevel.checkpoint()
                    if not framed and len(head) < ERROR_BODY_LIMIT:
                        head += piece[: ERROR_BODY_LIMIT - len(head)]
                    completed = parser.feed(piece)
                    if completed:
                        framed = True
                        yield [event.data for event in completed]
                    if parser.error is not None:  # after the frames the same read completed
                        raise parser.error
            parser.close()
            if parser.truncated:
                cut = "" if inflater.complete else " (and before the end of its compressed body)"
                # A body that is no event stream at all (an error object sent as one) is
                # the clue: in .body, as for a wrong content type, not in the message.
                sent = None if framed else _text(bytes(head), None, final=True)
                kept = "; what it sent is in the error's .body" if sent else ""
                raise ProtocolError(
                    f"the stream ended in the middle of an event{cut}{kept}",
                    retryable=True,
                    body=sent,
                )
        finally:
            await _release(response, chunks)

    async def _send(self, request: httpx.Request) -> httpx.Response:
        if self._client.is_closed:
            # httpx raises a RuntimeError, which a driver reads as retryable: the run would
            # wait out its back-off retrying what can never be sent.
            raise TransportError(
                f"the transport for {self._where} is closed (its aclose(), or the end of its "
                "`async with`, or of the client given to it, came first): nothing was sent",
                retryable=False,
            )
        # The whole wait for the head, connecting included, is bounded too: a server may
        # trickle the head a byte at a time, each read within httpx's limit.
        limit = None
        if self._read_timeout is not None:
            limit = self._read_timeout + (self._connect_timeout or 0)
        try:
            with anyio.fail_after(limit):
                return await self._client.send(request, stream=True)
        except TimeoutError:
            raise TransportError(
                f"{self._where} sent no complete response head within {limit:g} s "
                "(read_timeout plus connect_timeout)",
                retryable=True,
            ) from None
        except httpx.ConnectTimeout as exc:
            raise TransportError(
                f"could not connect to {self._where} within {self._connect_timeout} s",
                retryable=True,
            ) from exc
        except httpx.ReadTimeout as exc:
            raise TransportError(
                f"{self._where} sent no response within {self._read_timeout} s", retryable=True
            ) from exc
        except httpx.PoolTimeout as exc:
            raise TransportError(
                f"no connection to {self._where} came free in the client's pool within "
                f"{self._connect_timeout} s (connect_timeout): every open stream holds one. "
                "For more runs at once, pass client=httpx.AsyncClient(limits=httpx.Limits("
                "max_connections=...)); the default client holds 100",
                retryable=True,
            ) from exc
        except httpx.ConnectError as exc:
            raise TransportError(
                f"could not connect to {self._where}: {_why(exc)}", retryable=True
            ) from exc
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
            raise TransportError(
                f"the request to {self._where} could not be made: {_why(exc)}", retryable=False
            ) from exc
        except httpx.TransportError as exc:
            raise TransportError(
                f"the request to {self._where} failed before a response arrived: {_why(exc)}",
                retryable=True,
            ) from exc
        except httpx.HTTPStatusError as exc:
            # A response hook of the application's client raised for the status (httpx's
            # raise_for_status idiom): the status decides, as for any answer. The hook's
            # client closed the body unread; its message quotes the URL, query and all.
            response = exc.response
            raise TransportError.from_status(
                response.status_code,
                "",
                retry_after=retry_after(response.headers.get("Retry-After"), time.time()),
                endpoint=self._where,
                location=_location(response),
            ) from None
        except httpx.TooManyRedirects:
            raise TransportError(
                f"{self._where} redirected the request too many times (the client passed "
                "in follows redirects): use the URL it ends at",
                retryable=False,
            ) from None

    def _inflated(self, inflater: Inflater, chunk: bytes) -> Iterator[bytes]:
        try:
            yield from inflater.slices(chunk)
        except CorruptBody as exc:
            raise TransportError(
                f"the response body from {self._where} could not be decoded: {exc}",
                retryable=True,  # R-F1: a transport failure (retried before the ack only)
            ) from None

    async def _next_chunk(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next bytes of the body, ``None`` at its end; failures become interlude errors."""
        try:
            return await anext(chunks)
        except StopAsyncIteration:
            return None
        except httpx.ReadTimeout as exc:
            raise TransportError(
                f"the stream from {self._where} was silent for more than {self._idle_timeout} s "
                "(the transport's idle_timeout; an endpoint should send keep-alive comments)",
                retryable=True,
            ) from exc
        except httpx.TransportError as exc:
            raise TransportError(
                f"the connection to {self._where} broke while streaming: {_why(exc)}",
                retryable=True,
            ) from exc

    async def _error_body(
        self, response: httpx.Response, chunks: AsyncIterator[bytes], inflater: Inflater
    ) -> str:
        """The start of a non-2xx answer's body, as text; whatever arrived if reading fails."""
        got = bytearray()
        with anyio.move_on_after(self._read_timeout):
            try:
                async for chunk in chunks:
                    for piece in inflater.slices(chunk):
                        got += piece[: ERROR_BODY_LIMIT - len(got) + 1]
                        if len(got) > ERROR_BODY_LIMIT:
                            break
                    if len(got) > ERROR_BODY_LIMIT:
                        break
            except (httpx.HTTPError, CorruptBody):
                pass
        # A character cut at the limit is dropped, not shown as U+FFFD.
        cut = len(got) > ERROR_BODY_LIMIT
        return _text(bytes(got[:ERROR_BODY_LIMIT]), response.charset_encoding, final=not cut)


async def _release(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    """Close the response and unwind httpx's generators, even inside a cancelled scope.

    Closing only the outer generator would strand the ones nested in httpx and
    httpcore half-run, for the GC to find (and trio to warn about: httpx#3686).
    Reading on under an already cancelled scope raises at the innermost await
    and unwinds them all; httpcore then drops the connection it could not finish.
    """
    with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
        with anyio.CancelScope() as unwind:
            unwind.cancel()
            try:
                async for _ in chunks:
                    pass
            except Exception:  # the response is being discarded: its errors no longer matter
                pass
        await response.aclose()


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110 token)."""


def _inflater(response: httpx.Response, read_already: bool) -> Inflater | None:
    """The decoder for ``response``'s body; None for a coding it cannot undo (stacked
    layers multiply a bomb, an unknown one would reach the parser as bytes). A body
    httpx has already read (a mock's) is decoded already."""
    if read_already:
        return Inflater(None)
    try:
        return Inflater(coding_of(response.headers.get("Content-Encoding")))
    except ValueError:
        return None


def _text(data: bytes, charset: str | None, *, final: bool) -> str:
    """``data`` decoded in the body's declared charset, else as UTF-8; never raises.

    A charset names any codec Python has, some of them not text codecs at all
    (base64, zlib, rot13) or strict about their input (idna, utf-16): whatever
    goes wrong, the status still reaches the application.
    """
    if charset:
        try:
            text = codecs.getincrementaldecoder(charset)("replace").decode(data, final=final)
        except Exception:  # any codec's failure: the UTF-8 reading follows
            pass
        else:
            if isinstance(text, str):
                return text
    return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=final)


def _location(response: httpx.Response) -> str | None:
    """A redirect's target, absolute, without credentials or query (tokens live there)."""
    value = response.headers.get("Location")
    if not value or not 300 <= response.status_code < 400:
        return None
    try:
        return redacted(response.request.url.join(value))
    except (httpx.InvalidURL, ValueError):
        return None


def _check_seconds(name: str, value: object) -> None:
    if value is None:
        return
    if type(value) not in (int, float) or not 0 < value < math.inf:  # type: ignore[operator]
        raise UsageError(
            f"HttpxTransport: {name} takes seconds (a positive number) or None for no "
            f"limit, not {value!r}"
        )


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 §10.2.3): delta-seconds or
    an HTTP date, counted from ``now`` (epoch seconds). None when absent or unreadable,
    so a malformed header never blocks a retry; a date in the past means 0."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        # A huge number is still a long wait (past any max_retry_after), not no wait; a
        # few digits are enough to say so, once leading zeros are off.
        return float(min(int(value.lstrip("0")[:12] or "0"), _LONGEST_WAIT))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)  # asctime's form has no zone: HTTP dates are GMT
    return min(max(0.0, when.timestamp() - now), float(_LONGEST_WAIT))


def endpoint_url(url: object) -> httpx.URL:
    """``url`` as an absolute http(s) URL with a host; a ``UsageError`` saying why not."""
    problem = None
    try:
        parsed = httpx.URL(url)  # type: ignore[arg-type]  # refused below if not text
    except (httpx.InvalidURL, TypeError) as exc:
        problem = str(exc)
    else:
        if parsed.scheme not in ("http", "https"):
            problem = "it needs http:// or https://"
        elif not parsed.host:
            problem = "it has no host"
    if problem is None:
        return parsed
    shown = redacted(url) if isinstance(url, str) else repr(url)
    hint = ""
    if isinstance(url, str) and "://" not in url and " " not in url and url[:1].isalnum():
        hint = f" (did you mean 'http://{shown}'?)"
    raise UsageError(f"{shown!r} is not an endpoint URL: {problem}{hint}")


def _kind(value: object) -> str:
    """What ``value`` is, without quoting it (it may be a credential)."""
    if isinstance(value, str):
        return "text with a character HTTP does not allow" if value else "empty text"
    return f"a value of type {type(value).__name__}"


def redacted(url: str | httpx.URL) -> str:
    """``url`` as error messages show it: without credentials, query or fragment, where
    tokens live. Works on text that does not parse as a URL too."""
    if isinstance(url, httpx.URL):
        return str(url.copy_with(userinfo=b"", query=None, fragment=None))
    return redacted_url(url)


def checked_headers(headers: Mapping[str, str] | None) -> httpx.Headers:
    """``headers`` as httpx sends them; a ``UsageError`` naming one HTTP cannot carry."""
    if headers is not None and not isinstance(headers, Mapping):
        raise UsageError(
            f"headers takes a mapping of names to values, such as "
            f"{{'Authorization': 'Bearer ...'}}; not a {type(headers).__name__}"
        )
    # Neither a value nor a whole bad name is quoted: a credential may be either.
    seen: set[str] = set()
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            valid = _TOKEN.match(name) if isinstance(name, str) else None
            raise UsageError(
                "a header name must be an HTTP token (letters, digits, -): "
                + (f"the one beginning {valid.group()!r} is not" if valid else f"not {_kind(name)}")
            )
        what = None
        if not isinstance(value, str):
            what = _kind(value)
        elif any(c in value for c in "\r\n\0"):
            what = "a line break or NUL"
        elif not value.isascii():
            what = "a character that is not ASCII"
        if what is not None:
            raise UsageError(
                f"the value of header {name!r} must be ASCII text on one line; it holds "
                f"{what} (encode other text, for example as RFC 8187 or base64)"
            )
        if name.lower() in seen:
            # HTTP names are case-insensitive: both would be sent, and which one counts
            # (a credential, say) would be up to the server.
            raise UsageError(
                f"header {name!r} is given twice, in different cases (HTTP header names "
                f"are case-insensitive): keep one"
            )
        seen.add(name.lower())
    return httpx.Headers(headers)
