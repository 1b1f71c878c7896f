"""The SSE parser against WHATWG's rules, however the bytes are chunked (R-J4)."""

from __future__ import annotations

import itertools
import re
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlude.adapters.sse import SSEEvent, SSEParser
from interlude.core.errors import ProtocolError


def parse(*chunks: bytes, max_frame_bytes: int = 1 << 20) -> tuple[list[SSEEvent], bool]:
    """Feed the chunks, close, and return the events and the truncated flag."""
    parser = SSEParser(max_frame_bytes=max_frame_bytes)
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    events += parser.close()
    return events, parser.truncated


def events(*chunks: bytes) -> list[SSEEvent]:
    got, truncated = parse(*chunks)
    assert not truncated
    return got


def every_split(stream: bytes) -> list[tuple[bytes, bytes]]:
    return [(stream[:i], stream[i:]) for i in range(len(stream) + 1)]


def msg(data: str, event: str = "message", id: str | None = None) -> SSEEvent:
    return SSEEvent(event, data, id)


# -- fields ---------------------------------------------------------------------


def test_one_frame_of_data_is_a_message_event() -> None:
    assert events(b'data: {"type":"RUN_STARTED"}\n\n') == [msg('{"type":"RUN_STARTED"}')]


def test_data_lines_join_with_lf() -> None:
    assert events(b"data: a\ndata: b\ndata:\ndata: c\n\n") == [msg("a\nb\n\nc")]


def test_one_leading_space_is_stripped_and_no_more() -> None:
    assert events(b"data:x\n\ndata: x\n\ndata:  x\n\ndata:x \n\n") == [
        msg("x"),
        msg("x"),
        msg(" x"),
        msg("x "),
    ]


def test_only_the_first_colon_splits_name_from_value() -> None:
    assert events(b'data: {"a": "b:c"}\n\n') == [msg('{"a": "b:c"}')]


def test_an_empty_data_field_is_dispatched_with_empty_data() -> None:
    # WHATWG: the data buffer holds "\n", which is not empty.
    assert events(b"data:\n\ndata\n\n") == [msg(""), msg("")]


def test_a_frame_without_data_is_not_dispatched() -> None:
    assert events(b"event: x\n\nid: 1\n\nretry: 10\n\n\n\n") == []


def test_comments_and_keep_alives_are_ignored() -> None:
    stream = b": ping\n\n:\n\ndata: a\n: inside a frame\ndata: b\n\n:keep-alive\n\n"
    assert events(stream) == [msg("a\nb")]


def test_retry_and_unknown_fields_are_ignored() -> None:
    stream = b"retry: 1000\nfoo: bar\nDATA: no\ndata : no\nbaz\ndata: yes\n\n"
    assert events(stream) == [msg("yes")]


def test_event_names_the_next_frame_only() -> None:
    stream = b"event: custom\ndata: 1\n\ndata: 2\n\nevent: lost\n\ndata: 3\n\n"
    assert events(stream) == [msg("1", event="custom"), msg("2"), msg("3")]


def test_the_last_event_id_persists_across_frames() -> None:
    parser = SSEParser()
    got = parser.feed(b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert got == [msg("a", id="7"), msg("b", id="7"), msg("c", id="")]
    assert parser.last_event_id == ""


def test_event_and_id_values_without_a_space_are_kept_whole() -> None:
    """WHATWG strips one space after the colon only if there is one, in every field."""
    stream = b"event:e\nid:7\ndata: a\n\nevent:  f\nid: 8\ndata: b\n\n"
    assert events(stream) == [msg("a", event="e", id="7"), msg("b", event=" f", id="8")]


def test_an_id_in_invalid_utf8_becomes_replacement_characters() -> None:
    """Bad network bytes in an id are read like any other field's, never an exception."""
    assert events(b"id: 1\xff\ndata: a\n\n") == [msg("a", id="1\ufffd")]


def test_an_id_holding_nul_is_ignored() -> None:
    assert events(b"id: 1\n\nid: 2\x003\ndata: a\n\n") == [msg("a", id="1")]


def test_an_id_alone_still_sets_the_last_event_id() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 9\n\n") == []
    assert parser.last_event_id == "9"


def test_a_star_import_gives_the_documented_names() -> None:
    """reference.md: the parser, its frames and its default bound are the public names."""
    namespace: dict[str, object] = {}
    exec("from interlude.adapters.sse import *", namespace)
    names = set(namespace) - {"__builtins__"}
    assert names == {"DEFAULT_MAX_FRAME_BYTES", "SSEEvent", "SSEParser"}


# -- line ends ------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_every_line_end_works(eol: bytes) -> None:
    stream = b"event: e" + eol + b"data: a" + eol + b"data: b" + eol + eol
    assert events(stream) == [msg("a\nb", event="e")]


def test_line_ends_can_be_mixed() -> None:
    assert events(b"data: a\rdata: b\r\ndata: c\n\r\n") == [msg("a\nb\nc")]


def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    assert events(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [msg("a\nb")]


def test_an_empty_chunk_between_cr_and_lf_keeps_them_one_line_end() -> None:
    # R-J4: a transport may deliver empty chunks; they must not split a CRLF in two.
    assert events(b"data: a\r", b"", b"\ndata: b\n\n") == [msg("a\nb")]
    assert events(b"data: a\r", b"", b"", b"\n\n") == [msg("a")]


def test_cr_then_cr_lf_is_two_line_ends() -> None:
    assert events(b"data: a\r", b"\r\n") == [msg("a")]
    assert events(b"data: a\r\r\n") == [msg("a")]


def test_a_lone_chunk_of_lf_after_cr_ends_nothing_more() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\n") == [msg("a")]


# -- bytes and characters ---------------------------------------------------------


def test_a_bom_at_the_start_is_stripped() -> None:
    assert events(b"\xef\xbb\xbfdata: a\n\n") == [msg("a")]


def test_a_bom_split_across_chunks_is_stripped() -> None:
    assert events(b"\xef", b"\xbb", b"\xbfdata: a\n\n") == [msg("a")]
    assert events(b"", b"\xef\xbb", b"\xbf", b"data: a\n\n") == [msg("a")]


def test_only_one_bom_is_stripped() -> None:
    # The second BOM makes the field name "\ufeffdata", which is unknown.
    assert events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: \xef\xbb\xbfb\n\n") == [msg("\ufeffb")]


def test_a_bom_later_in_the_stream_is_data() -> None:
    assert events(b"data: a\n\n", b"\xef\xbb\xbfdata: b\n\n") == [msg("a")]


def test_a_start_that_only_looks_like_a_bom_is_kept() -> None:
    assert events(b"\xef\xbb", b"\n", b"data: a\n\n") == [msg("a")]


def test_multibyte_characters_split_anywhere_decode_whole() -> None:
    stream = 'data: {"delta":"héllo 世界 🎉"}\n\n'.encode()
    for head, tail in every_split(stream):
        assert events(head, tail) == [msg('{"delta":"héllo 世界 🎉"}')]
    assert events(*(stream[i : i + 1] for i in range(len(stream)))) == [
        msg('{"delta":"héllo 世界 🎉"}')
    ]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert events(b"data: a\xffb\xe4\xb8\n\n") == [msg("a\ufffdb\ufffd")]
    assert events(b"event: \xc3\ndata: x\n\n") == [msg("x", event="\ufffd")]


# -- chunking -------------------------------------------------------------------

SAMPLE = (
    b"\xef\xbb\xbf: welcome\r\n\r\n"
    b'id: 1\r\nevent: e\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    b"data: \xe4\xb8\x96\n\n"
    b"data:x\rdata\r\r"
    b"retry: 5\ndata: last\n\n"
)
SAMPLE_EVENTS = [
    msg('{"a":\n1}', event="e", id="1"),
    msg("世", id="1"),
    msg("x\n", id="1"),
    msg("last", id="1"),
]


def test_the_sample_parses_whole() -> None:
    assert events(SAMPLE) == SAMPLE_EVENTS


def test_every_two_way_split_gives_the_same_events() -> None:
    for head, tail in every_split(SAMPLE):
        assert events(head, tail) == SAMPLE_EVENTS


def test_one_byte_chunks_give_the_same_events() -> None:
    assert events(*(SAMPLE[i : i + 1] for i in range(len(SAMPLE)))) == SAMPLE_EVENTS


def test_many_frames_in_one_chunk() -> None:
    line = b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello "}\n\n'
    got = events(line * 1000)
    assert len(got) == 1000
    assert set(got) == {msg('{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello "}')}


# -- end of stream --------------------------------------------------------------


@pytest.mark.parametrize(
    "stream",
    [b"data: a", b"data: a\n", b"data: a\ndata: b\n", b"event: e\n", b"data: a\n\ndata", b"\xef"],
)
def test_an_unterminated_frame_is_discarded_and_reported(stream: bytes) -> None:
    got, truncated = parse(stream)
    assert truncated
    assert got == ([msg("a")] if stream.startswith(b"data: a\n\n") else [])


@pytest.mark.parametrize(
    "stream", [b"", b"data: a\n\n", b"data: a\n\n: bye\n", b"\n", b"\r", b"\xef\xbb\xbf"]
)
def test_a_clean_end_is_not_truncated(stream: bytes) -> None:
    """A stream of only a BOM is empty, not cut: the BOM is whole, so nothing is held."""
    _, truncated = parse(stream)
    assert not truncated


def test_a_fresh_parser_reports_nothing_yet() -> None:
    """Before any frame ends there is no last event id, no error and no truncation."""
    parser = SSEParser()
    assert parser.feed(b"data: a\nid: 1\n") == []
    assert (parser.last_event_id, parser.error, parser.truncated) == (None, None, False)


def test_closing_twice_keeps_the_truncated_flag() -> None:
    """A second close (a ``finally`` after an explicit one) does not forget the cut."""
    parser = SSEParser()
    parser.feed(b"data: a\n")
    parser.close()
    parser.close()
    assert parser.truncated


def test_feed_after_close_is_a_usage_error() -> None:
    parser = SSEParser()
    assert parser.close() == []
    assert parser.close() == []
    with pytest.raises(RuntimeError, match=r"SSEParser.feed\(\) after close\(\)"):
        parser.feed(b"data: a\n\n")


# -- size bound -----------------------------------------------------------------


def test_a_frame_at_the_limit_passes() -> None:
    # Data "a\nb" counts 4 bytes with its joining and final LFs.
    assert parse(b"data: a\ndata: b\n\n", max_frame_bytes=4)[0] == [msg("a\nb")]


def test_a_frame_over_the_limit_raises() -> None:
    """R-F1: the error is a retryable protocol error (retried before the acknowledgement)."""
    with pytest.raises(ProtocolError, match="exceeds the limit of 4 bytes") as caught:
        parse(b"data: a\ndata: bc\n\n", max_frame_bytes=4)
    assert caught.value.retryable


def test_many_lines_over_the_limit_raise_before_the_frame_ends() -> None:
    parser = SSEParser(max_frame_bytes=100)
    with pytest.raises(ProtocolError):
        for _ in range(100):
            parser.feed(b"data: 0123456789\n")


def test_a_long_line_raises_as_soon_as_it_passes_the_limit() -> None:
    parser = SSEParser(max_frame_bytes=1000)
    fed = 0
    with pytest.raises(ProtocolError):
        for _ in range(10_000):
            parser.feed(b"d")
            fed += 1
    assert fed == 1000  # the 1001st byte raised: nothing more was buffered


def test_a_data_line_raises_at_the_byte_that_puts_its_frame_over_the_limit() -> None:
    """The bound is exact in bytes for a data line still arriving too: its value and LF
    count on top of the frame's data as soon as the bytes come."""
    parser = SSEParser(max_frame_bytes=10)
    for byte in b"data: 12345678":  # 8 bytes of value and the LF to come: 9
        parser.feed(bytes([byte]))
    parser.feed(b"9")  # 10: at the limit
    with pytest.raises(ProtocolError):
        parser.feed(b"0")
    parser = SSEParser(max_frame_bytes=4)
    assert parser.feed(b"data: abc\n") == []  # the frame holds 4 bytes: at the limit
    for byte in b"data":
        parser.feed(bytes([byte]))  # may yet be another field
    with pytest.raises(ProtocolError):
        parser.feed(b":")  # a data line: even an empty value adds its LF


def test_a_data_line_without_a_space_raises_at_the_byte_that_passes_the_limit() -> None:
    """With no space after the colon every byte after it is value: "data:xxxx" and its
    LF to come hold 5 bytes, at a limit of 5; one more byte passes it."""
    parser = SSEParser(max_frame_bytes=5)
    assert parser.feed(b"data:xxxx") == []
    with pytest.raises(ProtocolError):
        parser.feed(b"x")


def test_data_lines_without_a_colon_count_towards_the_limit() -> None:
    """WHATWG reads a bare ``data`` line as ``data:`` with an empty value: one LF more."""
    assert parse(b"data: abc\ndata\n\n", max_frame_bytes=5) == ([msg("abc\n")], False)
    with pytest.raises(ProtocolError):
        parse(b"data: abcd\ndata\n\n", max_frame_bytes=5)
    assert parse(b"data\n" * 5 + b"\n", max_frame_bytes=5) == ([msg("\n" * 4)], False)
    with pytest.raises(ProtocolError):
        parse(b"data\n" * 6 + b"\n", max_frame_bytes=5)


def test_the_default_limit_is_16_mib() -> None:
    """reference.md: ``SSEParser()`` and the transport bound a frame at 16 MiB."""
    value = b"x" * (16 * 1024 * 1024 - 1)  # and its LF: 16 MiB
    (event,) = SSEParser().feed(b"data: " + value + b"\n\n")
    assert len(event.data) == len(value)
    with pytest.raises(ProtocolError, match="16777216 bytes"):
        SSEParser().feed(b"data: " + value + b"x\n\n")


@pytest.mark.parametrize("line", [b": " + b"x" * 2000, b"event: " + b"x" * 2000, b"x" * 2000])
def test_any_long_line_raises(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(line + b"\n\n", max_frame_bytes=1000)


@pytest.mark.parametrize(
    "stream",
    [
        b"data: ok\n\ndata: " + b"x" * 20 + b"\n\n",  # a data line over the limit
        b"data: ok\n\n: " + b"x" * 20 + b"\n",  # any line over the limit
        b"data: ok\n\ndata: " + b"x" * 20,  # a line over it, still arriving
    ],
)
def test_frames_before_one_over_the_limit_come_out_then_it_raises(stream: bytes) -> None:
    """R-J4: a frame completed before the one over the limit is not lost with it when
    they share a read (a RUN_FINISHED followed by junk); the next call raises."""
    parser = SSEParser(max_frame_bytes=10)
    assert parser.feed(stream) == [msg("ok")]
    with pytest.raises(ProtocolError, match="exceeds the limit of 10 bytes"):
        parser.close()
    parser = SSEParser(max_frame_bytes=10)
    assert parser.feed(stream) == [msg("ok")]
    with pytest.raises(ProtocolError, match="exceeds the limit of 10 bytes"):
        parser.feed(b"data: more\n\n")  # the stream is broken: nothing more is read


def test_the_error_after_returned_frames_is_raised_once() -> None:
    """reference.md: the next feed or close raises it; once raised, closing is quiet."""
    parser = SSEParser(max_frame_bytes=10)
    assert parser.feed(b"data: ok\n\ndata: " + b"x" * 20 + b"\n\n") == [msg("ok")]
    with pytest.raises(ProtocolError):
        parser.feed(b"data: more\n\n")
    assert parser.close() == []


def test_the_error_after_returned_frames_is_raised_once_by_close_too() -> None:
    """reference.md: close raises it if feed has not; a second close is quiet."""
    parser = SSEParser(max_frame_bytes=10)
    assert parser.feed(b"data: ok\n\ndata: " + b"x" * 20 + b"\n\n") == [msg("ok")]
    with pytest.raises(ProtocolError):
        parser.close()
    assert parser.close() == []


def test_a_frame_over_the_limit_with_nothing_before_raises_at_once() -> None:
    parser = SSEParser(max_frame_bytes=10)
    with pytest.raises(ProtocolError):
        parser.feed(b"data: " + b"x" * 20 + b"\n\n")
    assert parser.close() == []  # raised once: closing after it is quiet


def test_the_limit_resets_with_each_frame() -> None:
    frame = b"data: " + b"x" * 90 + b"\n\n"
    assert len(parse(frame * 100, max_frame_bytes=100)[0]) == 100


def test_the_limit_is_the_same_however_the_stream_is_chunked() -> None:
    """R-J4: a line still arriving counts as it will once whole (a data line by its value,
    any other line alone), so TCP's read boundaries cannot decide whether a frame passes."""
    # Data "ab\nc" counts 5 bytes; the comment between its lines counts for nothing.
    stream = b"data: ab\n: c\ndata: c\n\n"
    whole = parse(stream, max_frame_bytes=5)
    assert whole == ([msg("ab\nc")], False)
    assert parse(*(stream[k : k + 1] for k in range(len(stream))), max_frame_bytes=5) == whole
    assert parse(b"data: a\ndata: b\n", b"\n", max_frame_bytes=4) == ([msg("a\nb")], False)
    assert parse(b"data: a\ndata: ", b"b\n\n", max_frame_bytes=4) == ([msg("a\nb")], False)


def test_a_huge_frame_in_one_byte_chunks_is_linear() -> None:
    """2 MB fed a byte at a time: quadratic buffering would take minutes, not a second."""
    size = 2 * 1024 * 1024
    parser = SSEParser()
    feed = parser.feed
    for byte in (b"d", b"a", b"t", b"a", b":"):
        assert feed(byte) == []
    x = b"x"
    for _ in itertools.repeat(None, size):
        feed(x)  # returns [] until the line ends
    assert feed(b"\n") == []
    (event,) = feed(b"\n")
    assert event.data == "x" * size


def test_many_data_lines_in_small_chunks_are_linear() -> None:
    stream = b"data: 0123456789abcdef\n" * 50_000 + b"\n"
    parser = SSEParser()
    out: list[SSEEvent] = []
    for i in range(0, len(stream), 7):
        out += parser.feed(stream[i : i + 7])
    assert len(out) == 1
    assert out[0].data.count("\n") == 49_999


# -- properties -----------------------------------------------------------------


def reference(stream: bytes) -> tuple[list[SSEEvent], bool]:
    """WHATWG read literally: decode everything, split lines by regex, interpret."""
    text = stream.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    lines = re.split("\r\n|\r|\n", text)
    tail = lines.pop()
    out: list[SSEEvent] = []
    data: list[str] | None = None
    event = ""
    last_id: str | None = None
    fields = False
    for line in lines:
        if line == "":
            if data is not None:
                out.append(SSEEvent(event or "message", "\n".join(data), last_id))
            data, event, fields = None, "", False
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data = [*(data or []), value]
            continue
        fields = True
        if name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return out, bool(tail or data is not None or fields)


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


text_values = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)
line_ends = st.sampled_from(["\n", "\r", "\r\n"])


@st.composite
def frames(draw: st.DrawFn) -> tuple[list[str], SSEEvent]:
    """The lines of one valid frame (without the blank line) and the event it makes."""
    datas = draw(st.lists(text_values, min_size=1, max_size=4))
    event = draw(st.one_of(st.none(), text_values.filter(lambda s: s != "")))
    # Without the space, a value that begins with one would lose it.
    lines = [f"data: {d}" if draw(st.booleans()) or d[:1] == " " else f"data:{d}" for d in datas]
    if event is not None:
        lines.insert(draw(st.integers(0, len(lines))), f"event: {event}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), f": {draw(text_values)}")
    return lines, SSEEvent(event or "message", "\n".join(datas), None)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    parts = draw(st.lists(frames(), max_size=6))
    lines: list[str] = []
    for frame_lines, _ in parts:
        lines += [*frame_lines, ""]
    out: list[str] = []
    after_cr = False
    for line in lines:
        eol = draw(line_ends)
        if after_cr and line == "" and eol == "\n":
            eol = "\r\n"  # CR then a blank line's LF would read as one CRLF
        out.append(line + eol)
        after_cr = eol == "\r"
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + "".join(out)).encode(), [e for _, e in parts]


@given(streams(), st.lists(st.integers(min_value=0), max_size=20))
def test_valid_streams_parse_the_same_however_chunked(
    case: tuple[bytes, list[SSEEvent]], cuts: list[int]
) -> None:
    stream, expected = case
    assert events(stream) == expected
    assert events(*chunked(stream, cuts)) == expected


noise = st.lists(
    st.sampled_from(
        [
            *(b"data", b"data:", b": ", b" ", b"event:", b"id:", b"x", b"\x00"),
            *(b"\r", b"\n", b"\r\n"),
            *(b"\xef\xbb\xbf", b"\xef", b"\xff", b"\xe4\xb8", b"\x96", b"\xf0\x9f\x8e\x89"),
        ]
    ),
    max_size=40,
).map(b"".join)


@given(noise, st.lists(st.integers(min_value=0), max_size=20))
def test_arbitrary_bytes_match_the_literal_reading(stream: bytes, cuts: list[int]) -> None:
    expected = reference(stream)
    assert parse(stream) == expected
    assert parse(*chunked(stream, cuts)) == expected
    assert parse(*(stream[i : i + 1] for i in range(len(stream)))) == expected


def outcome(chunks: list[bytes], limit: int) -> tuple[list[SSEEvent], bool] | str:
    try:
        return parse(*chunks, max_frame_bytes=limit)
    except ProtocolError:
        return "too big"


@given(streams(), st.lists(st.integers(min_value=0), max_size=20))
def test_a_frame_passes_at_its_size_and_fails_below_it_however_chunked(
    case: tuple[bytes, list[SSEEvent]], cuts: list[int]
) -> None:
    """The bound is a frame's data (its LFs counted) or any other line, whatever the reads."""
    stream, expected = case
    lines = re.split(rb"\r\n|\r|\n", stream.removeprefix(b"\xef\xbb\xbf"))
    need = max(
        [len(e.data.encode()) + 1 for e in expected]
        + [len(line) for line in lines if not line.startswith(b"data")]
    )
    for chunks in ([stream], chunked(stream, cuts), [bytes([b]) for b in stream]):
        assert outcome(chunks, need or 1) == (expected, False)
        if need > 1:
            assert outcome(chunks, need - 1) == "too big"


def test_a_frame_of_very_many_data_lines_is_joined_right_and_held_compactly() -> None:
    """Each list entry costs some 80 bytes over its value; past a thousand lines a frame's
    data moves into one buffer, so 16 MiB of short lines cannot take gigabytes."""
    values = [str(n % 10).encode() if n % 3 else b"" for n in range(5000)]
    stream = b"".join(b"data:" + v + b"\n" for v in values) + b"\n"
    expected = "\n".join(v.decode() for v in values)
    parser = SSEParser()
    got = parser.feed(stream[:-1])  # everything but the frame's end
    assert got == [] and len(parser._data) <= 1024  # the rest is in the buffer
    assert parser.feed(b"\n") == [msg(expected)]
    for size in (1, 7, 4096):  # and however it is chunked
        assert events(*(stream[k : k + size] for k in range(0, len(stream), size))) == [
            msg(expected)
        ]


def test_a_frame_of_very_many_bare_data_lines_is_held_compactly() -> None:
    """A ``data`` line without a colon is a data line too: its frame moves into one buffer
    the same way, past a thousand lines (16 MiB of ``data`` lines is 3.4 million)."""
    parser = SSEParser()
    assert parser.feed(b"data\n" * 5000) == []
    assert len(parser._data) <= 1024
    assert parser.feed(b"\n") == [msg("\n" * 4999)]


@pytest.mark.parametrize("count", [1024, 1025, 1026, 2049, 2050, 2051])
def test_a_frame_ending_where_its_lines_move_into_one_buffer_is_whole(count: int) -> None:
    """Past 1,024 data lines a frame's data moves into one buffer (white-box: the
    counts sit at and around those moves). A frame that ends right after one is still
    dispatched whole, and cut there it is still reported as truncated."""
    values = [str(n % 10).encode() for n in range(count)]
    lines = b"".join(b"data:" + v + (b"\n" if n % 2 else b"\r\n") for n, v in enumerate(values))
    for tail in (b"\n", b"data\n\n"):
        expected = "\n".join(v.decode() for v in values) + ("\n" if tail != b"\n" else "")
        assert events(lines + tail) == [msg(expected)]
    assert parse(lines) == ([], True)


def test_a_huge_chunk_of_line_ends_is_parsed_in_bounded_slices() -> None:
    """A decompressed read can be megabytes of bare line ends; frames still come out."""
    chunk = b"\n" * (3 << 20) + b"data: after\n\n" + b"\r\n" * (1 << 20)
    assert events(chunk, b"data: end\n\n") == [msg("after"), msg("end")]


def test_a_huge_chunk_of_line_ends_holds_one_slice_of_lines_at_a_time() -> None:
    """3 MiB of bare line ends is 3 million lines: split whole, their list alone takes 24 MB;
    split a 1 MiB slice at a time, a third of that (a gzip bomb's read stays bounded)."""
    chunk = b"\n" * (3 << 20) + b"data: a\n\n"
    parser = SSEParser()
    tracemalloc.start()
    try:
        assert parser.feed(chunk) == [msg("a")]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
