"""Boundaries and strictness of what comes in, each pinned by a test that failed against
a one-line change a mutation-testing round made (the limits are exact, the checks
strict, frozen values deeply frozen, the driver's command order kept)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

from interlude.adapters.fake import FakeDriver, ScriptedAgent, finished, reply, started, text
from interlude.adapters.httpx import HttpxTransport
from interlude.adapters.resource import Resource
from interlude.adapters.sse import SSEParser
from interlude.core import (
    AbortAttempt,
    FrozenDict,
    NotJSONError,
    Options,
    ProtocolError,
    PVec,
    StartAttempt,
    TransportError,
    UsageError,
    freeze,
)
from interlude.core.commands import Command
from interlude.core.patch import MAX_COPIED, MAX_DEPTH, PatchError, apply_patch, parse_pointer
from interlude.core.wire import AssistantMessage, UserMessage
from interlude.core.wire.codec import MAX_DEPTH as MAX_FRAME_DEPTH
from interlude.core.wire.codec import WireError, decode_frame

# -- SSE and frames -----------------------------------------------------------------------


def test_a_line_one_byte_over_the_limit_in_one_chunk_is_refused() -> None:
    parser = SSEParser(max_frame_bytes=10)
    with pytest.raises(ProtocolError, match="limit of 10 bytes"):
        parser.feed(b"event:" + b"x" * 5 + b"\ndata: a\n\n")  # an 11-byte line
    assert SSEParser(max_frame_bytes=11).feed(b"event:" + b"x" * 5 + b"\ndata: a\n\n")


@pytest.mark.parametrize("tail", ["\u00a0", "\x0c", " trailing", "\u2028"])
def test_a_complete_event_followed_by_anything_but_json_whitespace_is_refused(tail: str) -> None:
    good = '{"type":"STEP_STARTED","stepName":"s"}'
    assert decode_frame(good + " \t\r\n")
    with pytest.raises(WireError):
        decode_frame(good + tail)


def test_nesting_one_level_past_the_bound_is_refused() -> None:
    depth = MAX_FRAME_DEPTH  # inside the event object: MAX_DEPTH + 1 levels in all
    with pytest.raises(WireError, match="nested deeper"):
        decode_frame('{"type":"STATE_SNAPSHOT","snapshot":' + "[" * depth + "]" * depth + "}")


# -- frozen JSON -----------------------------------------------------------------------------


def test_freezing_a_pvec_freezes_what_it_holds() -> None:
    """R-A4, R-B4: a PVec handed in (set_state of a value read back from state) with a
    plain dict inside must not let the application's dict into the state."""
    item = {"n": 1}
    frozen = freeze(PVec.from_iterable([item]))
    assert type(frozen) is PVec and type(frozen[0]) is FrozenDict
    item["n"] = 999
    assert frozen[0] == {"n": 1}


def test_the_path_of_a_value_that_is_not_json_escapes_tilde_before_slash() -> None:
    with pytest.raises(NotJSONError) as caught:
        freeze({"a/b~c": float("nan")})
    assert caught.value.path == "/a~1b~0c"


# -- patches -------------------------------------------------------------------------------


def test_a_patch_may_copy_exactly_max_copied_values() -> None:
    doc = freeze({"a": [0] * (MAX_COPIED - 1)})  # the array and its items: MAX_COPIED values
    copied: Any = apply_patch(doc, freeze([{"op": "copy", "from": "/a", "path": "/b"}]))
    assert len(copied["b"]) == MAX_COPIED - 1
    bigger = freeze({"a": [0] * MAX_COPIED})
    with pytest.raises(PatchError, match="more than"):
        apply_patch(bigger, freeze([{"op": "copy", "from": "/a", "path": "/b"}]))


def test_a_pointer_of_one_token_more_than_max_depth_is_refused() -> None:
    assert len(parse_pointer("/a" * MAX_DEPTH)) == MAX_DEPTH
    with pytest.raises(PatchError, match=f"at most {MAX_DEPTH} tokens"):
        parse_pointer("/a" * (MAX_DEPTH + 1))


# -- intents and selectors -----------------------------------------------------------------


def test_a_content_part_whose_type_is_not_text_is_refused() -> None:
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat()
    with pytest.raises(UsageError, match="string 'type'"):
        chat.send([{"type": 5, "text": "hi"}])


def test_a_completions_output_is_none_once_a_newer_user_message_is_last() -> None:
    """The output belongs to the input: an answer to an older question is not it."""
    history = [
        UserMessage(id="u1", content="first"),
        AssistantMessage(id="a1", content="old answer"),
        UserMessage(id="u2", content="second"),
    ]
    driver = FakeDriver(ScriptedAgent(lambda req: reply(started(req), finished(req))))
    chat = driver.chat(messages=history)
    assert chat.output is None
    chat.send("third")
    driver.run_until_idle()
    assert chat.output is None
    driver2 = FakeDriver(
        ScriptedAgent(lambda req: reply(started(req), *text("a2", "new"), finished(req)))
    )
    chat2 = driver2.chat(messages=history)
    chat2.reload()
    driver2.run_until_idle()
    assert chat2.output == "new"


# -- the HTTP transport ---------------------------------------------------------------------


def test_media_types_are_compared_case_insensitively() -> None:
    body = b'data: {"a":1}\n\n'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "Text/Event-Stream"}, content=body)

    async def main() -> list[str]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            transport = HttpxTransport("http://agent.test/run", client=client)
            return [data async for data in transport.stream(b"{}")]

    assert anyio.run(main) == ['{"a":1}']


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\0b"])
def test_a_header_value_with_a_line_break_or_nul_is_refused_at_construction(value: str) -> None:
    with pytest.raises(UsageError, match="ASCII text on one line"):
        HttpxTransport("http://agent.test/run", headers={"X-Token": value})


# -- the order a driver sees ------------------------------------------------------------------


class Recording:
    """A Driver that records the commands in the order it is given them."""

    def __init__(self) -> None:
        self.executed: list[Command] = []

    def now(self) -> float:
        return 1_800_000_000.0

    def execute(self, resource: Resource, commands: Sequence[Command]) -> None:
        self.executed.extend(commands)


def test_a_driver_gets_a_transitions_commands_before_observers_hear_of_it() -> None:
    """An observer that stops the run from its first notification: the driver must see
    the StartAttempt before the AbortAttempt, or a simple driver would start a run it
    was already told to abort."""
    driver = Recording()
    chat = Resource(driver, Options())
    chat.subscribe(lambda r: r.stop() if r.is_loading else None)
    chat.send("hi")
    kinds = [type(c) for c in driver.executed]
    assert kinds == [StartAttempt, AbortAttempt]
    start, abort = driver.executed
    assert isinstance(start, StartAttempt) and abort == AbortAttempt(start.attempt)


def test_a_pmap_from_state_is_a_json_object_wherever_one_is_expected() -> None:
    """Parts of a resource's state can be PMaps; handed back as metadata they are objects."""
    from rule_support import ask, paused_chat

    from interlude.core import Tool
    from interlude.core.pmap import PMap

    wide = PMap.from_mapping({"k": 1})
    options = Options(tools=[Tool(name="t", description="d", metadata=wide)])
    assert options.tools[0].metadata == {"k": 1}
    assert type(options.tools[0].metadata) is FrozenDict
    driver, chat, batch = paused_chat(ask())
    entry = {"interrupt_id": "approve", "status": "resolved", "payload": 1, "metadata": wide}
    chat.resume(batch.id, [entry])
    driver.run_until_idle()
    assert driver.requests[-1].json["resume"][0]["metadata"] == {"k": 1}


@pytest.mark.parametrize("coding", ["br", "gzip, gzip"])
def test_an_error_status_in_a_coding_not_read_keeps_its_status_and_retry_after(
    coding: str,
) -> None:
    """The status says what happened: a 503 is retryable, whatever its body's coding."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Encoding": coding, "Retry-After": "3", "Content-Type": "text/plain"}

        async def body() -> Any:
            yield b"\x00not read"

        return httpx.Response(503, headers=headers, content=body())

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            transport = HttpxTransport("http://agent.test/run", client=client)
            with pytest.raises(TransportError) as caught:
                async for _ in transport.stream(b"{}"):
                    pass
        assert caught.value.status == 503 and caught.value.retryable
        assert caught.value.retry_after == 3.0

    anyio.run(main)
