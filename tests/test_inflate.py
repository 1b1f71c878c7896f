"""The HTTP transport's own Content-Encoding decoder: bounded slices, every coding it reads."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

import pytest

from interlude.adapters.inflate import SLICE, CorruptBody, Inflater, coding_of

DATA = b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n\n' * 500


def inflate(coding: str | None, raw: bytes, read: int) -> bytes:
    """``raw`` fed in reads of ``read`` bytes; checks every slice's size on the way."""
    inflater = Inflater(coding)
    out = bytearray()
    for k in range(0, len(raw), read):
        for piece in inflater.slices(raw[k : k + read]):
            assert 0 < len(piece) <= SLICE
            out += piece
    return bytes(out)


def raw_deflate(data: bytes) -> bytes:
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return squeeze.compress(data) + squeeze.flush()


@pytest.mark.parametrize("read", [1, 2, 7, 4096, 1 << 30])
@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        (None, lambda d: d),
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),  # zlib-wrapped, as RFC 9110 defines it
        ("deflate", raw_deflate),  # raw, as many servers send it
    ],
)
def test_every_coding_reads_back_whatever_the_reads(
    coding: str | None, encode: Callable[[bytes], bytes], read: int
) -> None:
    assert inflate(coding, encode(DATA), read) == DATA


@pytest.mark.parametrize("read", [1, 100, 1 << 20])
def test_gzip_members_one_after_another_are_all_read(read: int) -> None:
    assert inflate("gzip", gzip.compress(DATA) + gzip.compress(b"more"), read) == DATA + b"more"


@pytest.mark.parametrize(
    ("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
@pytest.mark.parametrize("tail", [b"\0" * 7, b"trailing garbage", b"\x1f", b"\x1f\0\0"])
def test_padding_or_garbage_after_the_end_is_ignored(
    coding: str, encode: Callable[[bytes], bytes], tail: bytes
) -> None:
    """As gzip(1) and httpx do: a run whose events all arrived is not failed by padding."""
    assert inflate(coding, encode(DATA) + tail, 5) == DATA


@pytest.mark.parametrize(
    ("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
def test_reads_after_the_end_are_dropped_as_they_come(
    coding: str, encode: Callable[[bytes], bytes]
) -> None:
    """The transport reads on until the server closes: padding sent after the end, however
    much, is neither decoded nor kept, so it cannot grow memory read after read."""
    inflater = Inflater(coding)
    assert b"".join(inflater.slices(encode(DATA) + b"\0")) == DATA
    tracemalloc.start()
    try:
        for _ in range(100):
            assert list(inflater.slices(b"\0" * (64 << 10))) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # 6.4 MB arrived
    assert inflater.complete


def test_a_deflate_body_is_one_stream_and_a_gzip_member_after_it_is_garbage() -> None:
    """Only gzip bodies hold several members: bytes after a deflate stream are ignored,
    even when they look like gzip."""
    assert inflate("deflate", zlib.compress(DATA) + gzip.compress(b"more"), 5) == DATA


@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", raw_deflate)],
)
def test_complete_tells_a_whole_body_from_a_cut_one(
    coding: str, encode: Callable[[bytes], bytes]
) -> None:
    body = encode(DATA)
    whole, cut = Inflater(coding), Inflater(coding)
    assert b"".join(whole.slices(body)) == DATA
    assert whole.complete
    assert DATA.startswith(b"".join(cut.slices(body[: len(body) // 2])))
    assert not cut.complete


def test_complete_after_a_second_gzip_member_and_with_no_coding() -> None:
    two = Inflater("gzip")
    list(two.slices(gzip.compress(DATA) + gzip.compress(b"more")[:5]))
    assert not two.complete
    assert Inflater(None).complete


def test_a_read_that_inflates_to_many_megabytes_comes_out_in_slices() -> None:
    """reference.md: the transport undoes a coding "in slices of at most 1 MiB"."""
    assert SLICE == 1 << 20
    bomb = gzip.compress(b"\n" * (5 * SLICE + 3))
    pieces = [len(p) for p in Inflater("gzip").slices(bomb)]
    assert pieces == [SLICE] * 5 + [3]


def test_identity_is_sliced_too() -> None:
    assert [len(p) for p in Inflater(None).slices(b"x" * (SLICE + 1))] == [SLICE, 1]


@pytest.mark.parametrize(
    ("coding", "raw"),
    [
        ("gzip", b"this is not gzip"),
        ("deflate", b"\xff\xff\xff\xff not deflate either"),
        ("gzip", gzip.compress(DATA)[:-8] + b"badcrc!!"),
        ("gzip", zlib.compress(DATA)),  # valid data, but in another coding than declared
    ],
)
def test_a_body_not_in_its_coding_is_corrupt(coding: str, raw: bytes) -> None:
    with pytest.raises(CorruptBody):
        inflate(coding, raw, 64)


def _bad_check_value(raw: bytes) -> bytes:
    """``raw`` with the last byte of its CRC-32 (gzip) or Adler-32 (zlib) flipped."""
    at = len(raw) - 5 if raw[:2] == b"\x1f\x8b" else len(raw) - 1
    return raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]


@pytest.mark.parametrize("read", [1, 7, 4096, 1 << 30])
@pytest.mark.parametrize(
    ("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
def test_what_arrived_before_a_bad_check_value_comes_out_before_the_error(
    coding: str, encode: Callable[[bytes], bytes], read: int
) -> None:
    """A body whose check value is wrong: every byte before it is read out, then the body
    is corrupt. zlib drops all of a failing call's output, so a read holding a stream's
    last events and its damaged end used to lose those events (a finished run failed)."""
    raw = _bad_check_value(encode(DATA))
    inflater = Inflater(coding)
    out = bytearray()
    with pytest.raises(CorruptBody, match="incorrect data check"):
        for k in range(0, len(raw), read):
            for piece in inflater.slices(raw[k : k + read]):
                assert 0 < len(piece) <= SLICE
                out += piece
    assert out == DATA


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        (None, None),
        ("", None),
        ("identity", None),
        ("gzip", "gzip"),
        ("X-GZIP", "gzip"),
        ("identity, gzip", "gzip"),
        (" deflate ", "deflate"),
    ],
)
def test_the_header_names_one_layer(header: str | None, coding: str | None) -> None:
    assert coding_of(header) == coding


@pytest.mark.parametrize("header", ["gzip, gzip", "gzip, deflate", "br", "zstd", "compress"])
def test_stacked_or_unknown_codings_are_refused(header: str) -> None:
    with pytest.raises(ValueError, match=r"stacked|unknown"):
        coding_of(header)


@pytest.mark.parametrize("more", [5, 50, 100])
@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", raw_deflate)],
)
def test_a_body_just_over_a_slice_reads_back_whole_in_one_read(
    coding: str, encode: Callable[[bytes], bytes], more: int
) -> None:
    """A body that inflates to a few bytes more than a slice, in one network read: every
    byte comes out and the body is complete. zlib may have used up the read's input and
    still hold output back (the rest of a long match), which is asked for only by another
    call; a raw deflate body has no check value after its data, so no later read asks."""
    data = b"x" * (SLICE + more)
    inflater = Inflater(coding)
    assert b"".join(inflater.slices(encode(data))) == data
    assert inflater.complete


@pytest.mark.parametrize("more", [5, 50, 100])
@pytest.mark.parametrize(
    ("coding", "encode", "check"), [("gzip", gzip.compress, 8), ("deflate", zlib.compress, 4)]
)
def test_a_read_gives_out_all_it_decodes_before_the_next_read(
    coding: str, encode: Callable[[bytes], bytes], check: int, more: int
) -> None:
    """A read holding all of a body's compressed data but not its check value: all the
    data comes out of that read. The transport passes each read's output on as the frames
    it completes, so a byte held back until the next read delays a frame until the server
    sends more (or for good, if it sends nothing more)."""
    data = b"x" * (SLICE + more)
    body = encode(data)
    inflater = Inflater(coding)
    assert b"".join(inflater.slices(body[:-check])) == data
    assert b"".join(inflater.slices(body[-check:])) == b""
    assert inflater.complete


def test_a_star_import_gives_only_the_public_names() -> None:
    """The decoder, its errors, its codings and its slice bound; not zlib or typing."""
    namespace: dict[str, object] = {}
    exec("from interlude.adapters.inflate import *", namespace)
    names = set(namespace) - {"__builtins__"}
    assert names == {"CODINGS", "SLICE", "CorruptBody", "Inflater", "coding_of"}
