"""Any HTTP answer, cut into any chunks, ends the run cleanly through the real transport.

``HttpxTransport`` and ``TrioDriver`` are driven over an ``httpx.MockTransport``
(no socket, so each example is quick) whose answer Hypothesis draws: a status,
a content type, and a body assembled from well-formed frames for this very
request, broken frames and raw noise (CR, stray bytes, invalid UTF-8, comments,
oversized lines), sent as is or gzip- or deflate-encoded (sometimes with noise
in the compressed bytes), delivered in drawn chunks. Retries and back-off run on trio's
autojumping mock clock. Whatever is drawn:

- nothing escapes the driver, and the resource becomes idle;
- its ``error`` is ``None`` or an ``InterludeError`` (a malformed stream is a
  ``ProtocolError``, a bad status a ``TransportError``): never another type;
- half the drawn answers are sound runs with harmless extras (comments, ids,
  unknown events, one text message), and those commit without error.
"""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from typing import Any

import httpx
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.trio import TrioDriver
from interlude.core.errors import InterludeError
from interlude.core.options import Options, RetryPolicy

GOOD = [
    'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n',
    'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n\n',
    'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n',
    'data: {"type":"MYSTERY"}\n\n',
    ": keep-alive\n",
    "event: message\nid: 7\nretry: 10\n",
]
"""Frames and lines a sound stream may carry (the first three make one message)."""
PIECES = st.sampled_from(
    [
        "STARTED",  # the RUN_STARTED this request expects
        "FINISHED",  # its RUN_FINISHED
        'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n',
        'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n\n',
        'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n',
        'data: {"type":"RUN_ERROR","message":"boom"}\n\n',
        'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/x","value":1}]}\n\n',
        'data: {"type":"MYSTERY"}\n\n',
        "data: {not json\n\n",
        "data: [1,2]\n\n",
        'data: {"type":\n',
        "data: \n\n",
        ": keep-alive\n",
        "event: other\n",
        "id: 7\n",
        "retry: 10\n",
        "\n",
        "\r",
        "\r\n",
        "\ufeff",
        "data: " + "x" * 300,
    ]
)
NOISE = st.sampled_from([b"\xff", b"\xe4\xb8", b"\x00", b"data", b":", b" "])


CODINGS = st.sampled_from([None, None, None, "gzip", "deflate", "raw deflate"])
"""How the body is encoded: a sound run must commit whichever, however it is cut."""


def encoded(coding: str | None, body: bytes) -> bytes:
    if coding == "gzip":
        return gzip.compress(body)
    if coding == "deflate":
        return zlib.compress(body)
    if coding == "raw deflate":
        squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return squeeze.compress(body) + squeeze.flush()
    return body


@st.composite
def answers(draw: st.DrawFn) -> dict[str, Any]:
    cuts = draw(st.lists(st.integers(0, 4000), max_size=6))
    coding = draw(CODINGS)
    if draw(st.booleans()):
        # A run as an agent sends it, with harmless extras: it should commit.
        extras = st.sampled_from([GOOD[:3], *[[p] for p in GOOD[3:]]]).map(list)
        middle = [p for chunk in draw(st.lists(extras, max_size=3)) for p in chunk]
        parts = [b"STARTED", *(p.encode() for p in middle), b"FINISHED"]
        sse = "text/event-stream"
        return {
            "parts": parts,
            "cuts": cuts,
            "status": 200,
            "type": sse,
            "sound": 1,
            "coding": coding,
        }
    parts = draw(st.lists(PIECES.map(str.encode) | NOISE, max_size=12))
    status = draw(st.sampled_from([200] * 6 + [204, 400, 429, 500, 503]))
    kind = draw(st.sampled_from(["text/event-stream"] * 4 + ["application/json", ""]))
    # Some broken answers also break their coding: noise inside the compressed bytes.
    garble = draw(st.none() | st.tuples(st.integers(0, 4000), NOISE)) if coding else None
    return {
        **{"parts": parts, "cuts": cuts, "status": status, "type": kind, "sound": 0},
        **{"coding": coding, "garble": garble},
    }


def body_for(request: httpx.Request, answer: dict[str, Any]) -> list[bytes]:
    """The drawn body with this request's own RUN_STARTED/RUN_FINISHED, in drawn chunks."""
    run = json.loads(request.content)
    ids = {"threadId": run["threadId"], "runId": run["runId"]}
    frames = {
        b"STARTED": f"data: {json.dumps({'type': 'RUN_STARTED', **ids})}\n\n".encode(),
        b"FINISHED": f"data: {json.dumps({'type': 'RUN_FINISHED', **ids})}\n\n".encode(),
    }
    body = encoded(answer["coding"], b"".join(frames.get(p, p) for p in answer["parts"]))
    if answer.get("garble"):
        at, noise = answer["garble"]
        at %= len(body) + 1
        body = body[:at] + noise + body[at:]
    points = sorted({c % (len(body) + 1) for c in answer["cuts"]})
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=150)
@given(first=answers(), later=answers())
def test_any_http_answer_in_any_chunks_ends_the_run_cleanly(
    first: dict[str, Any], later: dict[str, Any]
) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        answer = first if not seen else later  # the first attempt, then every retry
        seen.append(answer)
        chunks = body_for(request, answer)

        async def stream() -> Any:
            for chunk in chunks:
                yield chunk

        headers = {"content-type": answer["type"]} if answer["type"] else {}
        if answer["coding"]:
            headers["content-encoding"] = "gzip" if answer["coding"] == "gzip" else "deflate"
        return httpx.Response(answer["status"], headers=headers, content=stream())

    async def main() -> None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        transport = HttpxTransport("http://agent.test/run", client=client, max_frame_bytes=256)
        options = Options(retry=RetryPolicy(max_attempts=2, base_delay=1, jitter=0))
        async with client, TrioDriver(transport) as driver:
            chat = driver.chat(options)
            chat.send("Go")
            await chat.wait_idle(timeout=600)  # mock time: retries take none
            assert not chat.is_loading
            error = chat.error
            assert error is None or isinstance(error, InterludeError), repr(error)
            if first["sound"]:
                assert error is None, repr(error)  # a sound run, however chunked
                assert chat.messages[0].role == "user"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert 1 <= len(seen) <= 2
