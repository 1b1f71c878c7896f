"""An incremental Server-Sent Events parser, sans-IO, following WHATWG HTML §9.2.6.

It splits lines on bytes and decodes each field once it is whole: a line end is
ASCII, so it can never fall inside a UTF-8 sequence, and decoding per line with
U+FFFD replacement gives exactly what decoding the whole stream would. That
keeps a multi-byte character split across chunks correct without a decoder
state, and makes the size bound exact in bytes.

Every byte is looked at a constant number of times, whatever the chunking: a
partial line grows in a ``bytearray`` and is joined once, when its line ends.
"""

from __future__ import annotations

from typing import NamedTuple

from interlude.core.errors import ProtocolError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "SSEEvent", "SSEParser"]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The default bound on one frame's data, or one line, in bytes."""

_BOM = b"\xef\xbb\xbf"
_SLICE = 1 << 20
"""Bytes parsed at a time: a longer chunk is fed in slices of this size."""
_SPILL_AT = 1024
"""Data lines a frame holds as a list before they move into one buffer."""


class SSEEvent(NamedTuple):
    """One dispatched frame.

    ``event`` is ``"message"`` when the frame named none. ``id`` is the stream's
    last event id when the frame was dispatched (WHATWG keeps it across frames;
    ``None`` until an ``id:`` field is seen).
    """

    event: str
    data: str
    id: str | None


_new_event = tuple.__new__  # SSEEvent's own __new__ is a Python function: twice as slow


class SSEParser:
    """Feed bytes as they arrive; get back the frames they complete.

    A frame is dispatched at the blank line that ends it, and only if it had a
    ``data`` field (``data:`` with an empty value counts, as in WHATWG). At end
    of stream, call :meth:`close`: an unterminated frame is discarded, as WHATWG
    requires, and :attr:`truncated` says whether there was one, so the caller
    can report a stream cut in the middle of an event. Once a frame passes the
    limit the stream is broken: :attr:`error` says why, and the frames completed
    before it come out first (a read may hold a run's last event and junk after it).
    """

    __slots__ = (
        "_closed",
        "_data",
        "_data_len",
        "_event",
        "_fields",
        "_head",
        "_id",
        "_partial",
        "_skip_lf",
        "_spilled",
        "_start",
        "_unraised",
        "error",
        "last_event_id",
        "max_frame_bytes",
        "truncated",
    )

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.truncated = False
        """Set by :meth:`close`: the stream ended part way through a frame."""
        self.last_event_id: str | None = None
        """The id committed by the last frame end, for a reconnect's ``Last-Event-ID``."""
        self._start = True  # still deciding whether the stream opens with a BOM
        self._head = b""  # the bytes held back while deciding
        self._skip_lf = False  # the last chunk ended in CR: a leading LF completes that CRLF
        self._partial = bytearray()  # the current line, not yet ended
        self._data: list[bytes] = []  # the frame's data values
        self._data_len = 0  # bytes held by _data and _spilled, counting the joining LFs
        self._spilled = bytearray()  # earlier data values of a frame of very many lines
        self._event = ""
        self._id: str | None = None  # WHATWG's "last event ID buffer"
        self._fields = False  # a field other than data was seen in this frame
        self._closed = False
        self.error: ProtocolError | None = None
        """Why the stream is broken (a frame or line past the limit); None while it is not."""
        self._unraised = False  # error is set, but the frames before it were returned instead

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume the next bytes of the stream; return the frames they complete.

        Raises :class:`ProtocolError` when a frame's data or a single line
        grows past ``max_frame_bytes``, before buffering any more of it; if these
        bytes completed frames before that, it returns them and sets :attr:`error`,
        and the next call (this or :meth:`close`) raises it.
        """
        if self._closed:
            raise RuntimeError("SSEParser.feed() after close()")
        if self.error is not None:
            self._unraised = False
            raise self.error
        events: list[SSEEvent] = []
        try:
            if len(chunk) > _SLICE:
                # A decompressed read can be huge and all line ends: split in bounded
                # slices, so the list of lines stays small (the state carries across).
                for k in range(0, len(chunk), _SLICE):
                    self._feed(chunk[k : k + _SLICE], events)
            else:
                self._feed(chunk, events)
        except ProtocolError as exc:
            self.error = exc
            if not events:
                raise
            self._unraised = True
        return events

    def _feed(self, chunk: bytes, events: list[SSEEvent]) -> None:
        if self._start:
            chunk = self._head + chunk
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._head = chunk
                return
            self._start = False
            self._head = b""
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        if self._skip_lf and chunk:  # an empty chunk does not end the CRLF wait
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        elif b"\n" not in chunk:  # the middle of a line: a trickle, or a long line
            self._more(chunk)
            return
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if self._partial:
            self._partial += lines[0]
            lines[0] = bytes(self._partial)
            self._partial.clear()
        self._lines(lines, events)
        if rest:
            self._more(rest)

    def _more(self, piece: bytes) -> None:
        """Add to the unfinished line, within the bound.

        The line counts as it will once whole: a data line its value and LF on top of
        the frame's data, any other line alone. So a frame passes or fails the same
        however the network splits it."""
        partial = self._partial
        partial += piece
        size = len(partial)
        if size < 5 and b"data:".startswith(partial):
            return  # it may yet be a data line of an empty value: judged once it says
        if partial.startswith(b"data:"):
            size += self._data_len - (6 if size > 5 and partial[5] == 0x20 else 5) + 1
        if size > self.max_frame_bytes:
            raise self._too_big()

    def close(self) -> list[SSEEvent]:
        """End of stream: discard an unterminated frame and say so in :attr:`truncated`.

        Returns no events (a frame needs its blank line); the list keeps the
        call symmetric with :meth:`feed`. Raises :attr:`error` if :meth:`feed` has
        not raised it yet.
        """
        if not self._closed:
            self._closed = True
            pending = self._data or self._spilled or self._fields
            self.truncated = bool(self._head or self._partial or pending)
            self._head = b""
            self._partial = bytearray()
            self._data = []
            self._spilled = bytearray()
            self._data_len = 0
        if self._unraised:
            self._unraised = False
            assert self.error is not None
            raise self.error
        return []

    def _lines(self, lines: list[bytes], events: list[SSEEvent]) -> None:
        # The hot loop: a blank line or a "data:" line is handled inline, the rest
        # in _field. Locals stand in for attributes until the loop ends.
        data = self._data
        size = self._data_len
        limit = self.max_frame_bytes
        for line in lines:
            if not line:
                self.last_event_id = self._id
                if data or self._spilled:
                    if self._spilled:
                        raw = self._unspill(data)
                    else:
                        raw = data[0] if len(data) == 1 else b"\n".join(data)
                    event = self._event or "message"
                    text = raw.decode("utf-8", "replace")
                    events.append(_new_event(SSEEvent, (event, text, self._id)))
                    data.clear()
                    size = 0
                self._event = ""
                self._fields = False
            elif line.startswith(b"data:"):
                value = line[6:] if len(line) > 5 and line[5] == 0x20 else line[5:]
                size += len(value) + 1
                if size > limit:
                    self._data_len = size
                    raise self._too_big()
                data.append(value)
                if len(data) > _SPILL_AT:
                    self._spill(data)
            else:
                self._data_len = size
                self._field(line)
                size = self._data_len
        self._data_len = size

    def _field(self, line: bytes) -> None:
        """Any line but a blank or ``data:`` one: comments and the other fields."""
        if len(line) > self.max_frame_bytes:
            raise self._too_big()
        if line[0] == 0x3A:  # ":" opens a comment, which includes keep-alives
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":  # "data" with no colon, or "data:" already handled inline
            self._data_len += len(value) + 1
            if self._data_len > self.max_frame_bytes:
                raise self._too_big()
            self._data.append(value)
            if len(self._data) > _SPILL_AT:
                self._spill(self._data)
            return
        self._fields = True
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self._id = value.decode("utf-8", "replace")
        # An id holding NUL, "retry" and unknown fields are ignored.

    def _spill(self, data: list[bytes]) -> None:
        """Move a frame's data lines into one buffer. Each list entry costs some 80 bytes
        besides its value: 16 MiB of empty data lines would take over a gigabyte."""
        spilled = self._spilled
        if spilled:
            spilled += b"\n"
        spilled += b"\n".join(data)
        data.clear()

    def _unspill(self, data: list[bytes]) -> bytes:
        """The whole data of a frame that spilled: the buffer and the lines since."""
        if data:
            self._spill(data)
        raw = bytes(self._spilled)
        self._spilled.clear()
        return raw

    def _too_big(self) -> ProtocolError:
        return ProtocolError(
            f"an SSE frame or line exceeds the limit of {self.max_frame_bytes} bytes "
            "(max_frame_bytes)",
            retryable=True,  # R-F1: a protocol error; retried only before the acknowledgement
        )
