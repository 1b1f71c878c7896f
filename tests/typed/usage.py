"""Application code as the docs write it, type-checked under ``mypy --strict`` by
``make typecheck``: the public types must let it through without casts or ignores.
It also runs, as a test (``test_typed_usage.py``)."""

from __future__ import annotations

from typing import Any

from interlude.adapters.fake import FakeDriver, ScriptedAgent, finished, reply, started
from interlude.adapters.fake.script import Reply, Request
from interlude.adapters.resource import Resource
from interlude.core import (
    FrozenDict,
    Input,
    Message,
    MessageView,
    ResumeEntry,
    StartAttempt,
    Transition,
    freeze,
    initial_state,
    step,
)
from interlude.core import Send as SendIntent
from interlude.core.answers import compile_answer_schema
from interlude.core.wire import encode_request


def text_of(message: Message) -> str | None:
    """Every message has ``content``: text, content parts, or a tool's result."""
    content = message.content
    return content if isinstance(content, str) else None


def last_text(view: MessageView) -> str | None:
    return text_of(view[-1]) if len(view) else None


def schema_checks() -> bool:
    schema: FrozenDict = freeze({"type": "object", "required": ["approved"]})
    validator = compile_answer_schema(schema)
    items: tuple[object, ...] = freeze([1, 2, 3])
    return validator.check({"approved": True}).ok and items == (1, 2, 3)


def an_answer() -> ResumeEntry:
    """A typed entry's payload and metadata are frozen JSON (reference.md, resume)."""
    return ResumeEntry(
        interrupt_id="purchase",
        status="resolved",
        payload=freeze({"approved": True}),
        metadata=freeze({"via": "form"}),
    )


def first_request_body() -> bytes:
    t = step(initial_state(), SendIntent("hello"), 1_800_000_000.0)
    (start,) = t.commands
    assert isinstance(start, StartAttempt)
    return encode_request(start.run_input)


class Recorded(Resource):
    """A subclass observed with its own type."""

    seen: int = 0


def observe_a_subclass() -> int:
    def answer(req: Request) -> Reply:
        return reply(started(req), finished(req))

    driver = FakeDriver(ScriptedAgent(answer), resource_class=Recorded)
    chat = driver.chat()
    assert isinstance(chat, Recorded)

    def count(r: Recorded) -> None:  # typed by the resource's own class
        r.seen += 1

    chat.subscribe(count)
    chat.send("hi")
    driver.run_until_idle()
    return chat.seen


class Inputs(Resource):
    """docs/testing.md's subclass: keeps the name of every input it steps."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inputs: list[str] = []

    def apply(self, input: Input, *, now: float | None = None) -> Transition:
        self.inputs.append(type(input).__name__)
        return super().apply(input, now=now)


def record_inputs() -> list[str]:
    """``resource_class`` types what ``chat()`` and ``completion()`` return: no isinstance."""
    driver = FakeDriver(
        ScriptedAgent(lambda req: reply(started(req), finished(req))), resource_class=Inputs
    )
    chat = driver.chat()
    chat.send("hi")
    driver.run_until_idle()
    completion: Inputs = driver.completion()
    return chat.inputs + completion.inputs


def plain_driver(driver: FakeDriver) -> Resource:
    """A bare ``FakeDriver`` (no type argument) is a driver of plain resources, under --strict."""
    return driver.chat()


def default_driver() -> Resource:
    return plain_driver(FakeDriver())
