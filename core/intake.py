"""What the application hands in, checked once and made immutable.

Every intent and ``initial_state`` takes its arguments through these
functions, so a value of the wrong kind is refused with the same
:class:`~.errors.UsageError` wherever it enters, and the state only ever holds
frozen values that can be written as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import UsageError, quote
from .json import JSON, NotJSONError, freeze
from .wire.codec import WireError, content_parts, decode_message, encode_json, encode_message
from .wire.messages import MESSAGE_TYPES, Content, Message, UserMessage

__all__ = [
    "json_value",
    "message_id",
    "messages",
    "new_message_id",
    "serial_past",
    "serial_past_id",
    "thread_id",
    "user_content",
    "user_message",
]


def json_value(value: object, verb: str) -> JSON:
    """``value`` frozen; a ``UsageError`` naming the offending path if it is not JSON."""
    try:
        return freeze(value)
    except NotJSONError as exc:
        raise UsageError(f"{verb} takes a JSON value: {exc}") from None


def thread_id(value: object, verb: str) -> str | None:
    if value is not None and (type(value) is not str or not value):
        raise UsageError(
            f"{verb} takes a non-empty string, or None for a new id (got {_describe(value)})"
        )
    return value


def stop_why(value: object) -> str:
    if type(value) is not str or not value:
        raise UsageError(f"Stop.why must be a non-empty string (got {_describe(value)})")
    return value


def message_id(value: object, verb: str) -> str | None:
    if value is not None and (type(value) is not str or not value):
        raise UsageError(f"{verb}: message_id must be a non-empty string (got {_describe(value)})")
    return value


def user_content(content: object, verb: str) -> Content:
    """Text, or a list of AG-UI content parts (objects with a string ``type``)."""
    if isinstance(content, str):
        text = json_value(content, verb)  # a str subclass as its text, as freeze() reads it
        assert isinstance(text, str)
        return text
    if not isinstance(content, list | tuple):
        raise UsageError(
            f"{verb} takes text, a UserMessage or a list of content parts, not {_describe(content)}"
        )
    for n, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise UsageError(
                f"{verb}: content part {n} must be an object with a string 'type' "
                f'(such as {{"type": "text", "text": "..."}}), not {_describe(part)}'
            )
    parts = json_value(list(content), verb)
    assert isinstance(parts, tuple)
    try:
        # Your own parts are held to AG-UI 1.0 exactly: what it does not define is
        # refused here, where a network's would be left out (it cannot be sent).
        return content_parts(parts, strict=True)
    except WireError as exc:
        raise UsageError(f"{verb}: {exc}") from None


def messages(items: object, verb: str) -> tuple[Message, ...]:
    """A history from the application: messages only, each one writable as JSON.

    Each message goes through the wire codec and back, so what the state holds
    is frozen and equal to what a request will carry.
    """
    if isinstance(items, (str, bytes, Mapping, *MESSAGE_TYPES)) or not isinstance(items, Iterable):
        raise UsageError(f"{verb} takes a list of messages, not {_describe(items)}")
    out: list[Message] = []
    for n, m in enumerate(items):
        if not isinstance(m, MESSAGE_TYPES):
            raise UsageError(
                f"{verb} item {n} is not a message ({type(m).__name__}); "
                "build messages with interlude.core.wire (UserMessage, ...)"
            )
        out.append(_canonical(m, f"{verb} item {n}"))
    return tuple(out)


def new_message_id(mid: str, history: Iterable[Message], verb: str) -> str:
    """``mid``, given by the application for a new message, if no message has it yet."""
    if any(m.id == mid for m in history):
        raise UsageError(
            f"{verb}: message id {mid!r} is already in the history; give a new id, or none "
            "to have one generated"
        )
    return mid


def serial_past(history: Iterable[Message], prefix: str, serial: int) -> int:
    """``serial``, raised past every number a history's ids carry under ``prefix``.

    Generated ids are ``{prefix}-{kind}-{n}`` from a counter in the state: a history
    restored from an earlier runtime must not have its ids handed out again.
    """
    for m in history:
        serial = serial_past_id(m.id, prefix, serial)
    return serial


def serial_past_id(value: str | None, prefix: str, serial: int) -> int:
    """``serial``, raised past the number one id (a thread id) carries under ``prefix``,
    so that a generated id never repeats it."""
    if value is not None and value.startswith(prefix + "-"):
        tail = value.rpartition("-")[2]
        if tail.isdigit() and tail.isascii() and len(tail) <= 18:
            serial = max(serial, int(tail))
    return serial


def user_message(m: UserMessage, verb: str) -> UserMessage:
    checked = _canonical(m, verb)
    assert isinstance(checked, UserMessage)
    return checked


def _canonical(m: Message, where: str) -> Message:
    mid = getattr(m, "id", None)
    if type(mid) is not str or not mid:
        raise UsageError(f"{where} ({m.role} message): its id must be a non-empty string")
    try:
        canonical = decode_message(json.loads(encode_json(encode_message(m))))
    except (WireError, ValueError, TypeError, RecursionError, AttributeError) as exc:
        why = _why(m, exc)
        raise UsageError(f"{where} ({m.role} message {mid!r}) cannot be sent: {why}") from None
    content = getattr(m, "content", None)
    if content is not None and not isinstance(content, str) and content != canonical.content:
        # Parts the codec left out (what AG-UI 1.0 does not define): yours are refused,
        # as send() refuses them, rather than lost without a word. Parts in a list (never
        # equal to the codec's tuple) are checked too; a list of defined parts passes.
        try:
            content_parts(content, strict=True)
        except WireError as exc:
            raise UsageError(f"{where} ({m.role} message {mid!r}): {exc}") from None
    return canonical


def _why(m: Message, exc: Exception) -> object:
    """What is wrong with ``m``: where in it, when ``freeze`` can point at the value."""
    if isinstance(exc, AttributeError):
        # The encoder read a field of something else in place of a wire object (a str
        # or a dict in tool_calls, a ToolCall without a FunctionCall).
        return f"a member of it is not of the interlude.core.wire class its field takes ({exc})"
    try:
        freeze(encode_message(m))
    except NotJSONError as path_given:
        return path_given
    except (WireError, ValueError, TypeError, RecursionError):
        pass  # the first failure is the one to report
    return exc


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    return f"the {type(value).__name__} {quote(value)}"
