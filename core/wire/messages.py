"""The messages of an AG-UI 1.0 conversation, one class per role.

Each class names its role in the class attribute ``role``. Field names are
the snake_case forms of the wire's camelCase keys (the codec renames them).
Optional fields default to ``None``, which means the key was absent; empty
strings are kept as they came. JSON-valued fields hold frozen JSON
(:mod:`interlude.core.json`), so a message can be shared between states
without copying.

A message whose role AG-UI 1.0 does not define has no class: the codec drops it
from the list that held it, with a warning (AG-UI 1.0, Processing Model: inside a
list, an unrecognisable element is dropped and the list survives).
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from ..json import JSON, FrozenDict

__all__ = [
    "MESSAGE_TYPES",
    "ActivityMessage",
    "AssistantMessage",
    "Content",
    "DeveloperMessage",
    "FunctionCall",
    "Message",
    "ReasoningMessage",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]

Content: TypeAlias = "str | tuple[JSON, ...]"
"""Text, or an ordered tuple of content parts (each a frozen JSON object)."""


@attrs.frozen(kw_only=True)
class FunctionCall:
    """The function a tool call invokes; ``arguments`` is JSON text, as streamed."""

    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call an assistant message makes."""

    id: str
    function: FunctionCall
    type: str = "function"
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None


@attrs.frozen(kw_only=True)
class DeveloperMessage:
    role: ClassVar[str] = "developer"

    id: str
    content: str
    name: str | None = None
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class SystemMessage:
    role: ClassVar[str] = "system"

    id: str
    content: str
    name: str | None = None
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """Text, tool calls, or both; either may be absent (``None``)."""

    role: ClassVar[str] = "assistant"

    id: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    name: str | None = None
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class UserMessage:
    role: ClassVar[str] = "user"

    id: str
    content: Content
    name: str | None = None
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class ToolMessage:
    """What a tool returned; ``error`` says why it failed, beside any partial content."""

    role: ClassVar[str] = "tool"

    id: str
    content: Content
    tool_call_id: str
    error: str | None = None
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class ActivityMessage:
    """Structured progress kept in the conversation's order; ``content`` is an object."""

    role: ClassVar[str] = "activity"

    id: str
    activity_type: str
    content: FrozenDict
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


@attrs.frozen(kw_only=True)
class ReasoningMessage:
    role: ClassVar[str] = "reasoning"

    id: str
    content: str
    encrypted_value: str | None = None
    metadata: FrozenDict | None = None
    subagent_run_id: str | None = None


Message: TypeAlias = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)

MESSAGE_TYPES = (
    DeveloperMessage,
    SystemMessage,
    AssistantMessage,
    UserMessage,
    ToolMessage,
    ActivityMessage,
    ReasoningMessage,
)
"""Every message class, for ``isinstance`` checks."""
