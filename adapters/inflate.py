"""A response body's ``Content-Encoding`` undone a bounded slice at a time.

httpx decodes each network read whole, so one read of a gzip bomb (1 MB of
compressed line ends is about a gigabyte) lands in memory at once and blocks
the event loop while it inflates. Here each read comes out in slices of at
most :data:`SLICE` bytes, and the caller may yield to the loop between them.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = ["CODINGS", "SLICE", "CorruptBody", "Inflater", "coding_of"]

SLICE = 1 << 20
"""The most bytes one step of inflating gives out."""

CODINGS = {"identity": None, "gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}
"""The content codings read, each to the layer it names (None: none)."""


_GZIP_MAGIC = b"\x1f\x8b"
_REPLAY = 1 << 16  # bytes of a "deflate" body kept to read again as raw deflate


class CorruptBody(ValueError):
    """The body is not valid data in its declared coding."""


def coding_of(header: str | None) -> str | None:
    """The one layer ``header`` (a ``Content-Encoding``) names: ``"gzip"``, ``"deflate"`` or None.

    Raises ``ValueError`` for stacked layers or a coding not in :data:`CODINGS`:
    stacked layers multiply a bomb, and an unknown one would reach the parser as bytes.
    """
    codings = [c.strip().lower() for c in (header or "").split(",") if c.strip()]
    if any(c not in CODINGS for c in codings):
        raise ValueError("unknown content coding")
    layers = [CODINGS[c] for c in codings if CODINGS[c] is not None]
    if len(layers) > 1:
        raise ValueError("stacked content codings")
    return layers[0] if layers else None


class Inflater:
    """Undoes one layer of ``coding`` (``"gzip"``, ``"deflate"`` or None for none).

    Feed the raw reads in order to :meth:`slices`; each read's decoded bytes
    come out in pieces of at most :data:`SLICE` bytes.
    """

    __slots__ = ("_coding", "_done", "_seen", "_z")

    def __init__(self, coding: str | None) -> None:
        self._coding = coding
        # A "deflate" body may be zlib-wrapped (RFC 9110) or raw (as many servers send
        # it): until the first output the bytes are kept, to read again as raw.
        self._seen: bytes | None = b"" if coding == "deflate" else None
        self._z = _decompressor(coding) if coding is not None else None
        self._done = False  # the coded stream ended: what follows is ignored

    @property
    def complete(self) -> bool:
        """The coded stream reached its end (always, with no coding): False for a cut body."""
        z = self._z
        return z is None or self._done or z.eof

    def slices(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, the next raw read, a slice at a time.

        Raises :class:`CorruptBody` where the data stops being valid, after the bytes
        decoded before that point.
        """
        z = self._z
        if self._done:
            return
        if z is None:
            for k in range(0, len(data), SLICE):
                yield data[k : k + SLICE]
            return
        if self._seen is not None:
            # Bounded: zlib checks its header in the first two bytes, so a raw body
            # fails long before this much arrives without output.
            self._seen = self._seen + data if len(self._seen) < _REPLAY else None
        more = bool(data)
        while more:
            # zlib drops all of a failing call's output: the state before it is kept (about
            # 3 µs a read) to decode again up to the damage, so a stream's last events come
            # out before a bad check value at its end.
            before = z.copy()
            try:
                out = z.decompress(data, SLICE)
            except zlib.error as exc:
                salvaged = _up_to_damage(before, data)
                first = next(salvaged, None)
                if self._seen is None or first is not None:  # no raw deflate, if it decoded
                    self._seen = None
                    if first is not None:
                        yield first
                        yield from salvaged
                    raise CorruptBody(str(exc)) from None
                z = self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                data, self._seen = self._seen, None
                continue
            if out:
                self._seen = None
                yield out
            if z.unconsumed_tail:
                data = z.unconsumed_tail
            elif z.eof and z.unused_data:
                data = z.unused_data
                if self._coding == "gzip" and _GZIP_MAGIC.startswith(data[:2]):
                    # A gzip body may hold several members, one after the other.
                    z = self._z = _decompressor("gzip")
                else:
                    # Padding or garbage after the end: ignored, as gzip(1) and httpx do,
                    # rather than failing a run whose events all arrived.
                    self._done = True
                    return
            elif len(out) == SLICE and not z.eof:
                # Stopped by the slice's bound with the input used up: zlib may still hold
                # output (the rest of a long match) that only another call gives out.
                data = b""
            else:
                more = False


def _up_to_damage(z: zlib._Decompress, data: bytes) -> Iterator[bytes]:
    """What ``data`` decodes to through ``z`` before the first byte zlib refuses."""
    step, k = 512, 0  # 512 bytes inflate to at most about 0.5 MB: within a SLICE
    while k < len(data) and not z.eof:
        piece, kept = data[k : k + step], z.copy()
        try:
            out = z.decompress(piece)
        except zlib.error:
            if step == 1:
                return
            z, step = kept, 1  # the damage is in this piece: again, a byte at a time
            continue
        if out:
            yield out
        k += len(piece)


def _decompressor(coding: str) -> zlib._Decompress:
    return zlib.decompressobj(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)
