"""Printing a turn as it streams: each new message once, assistant text delta by delta.

The resource's ``messages`` is the source of truth; the transcript remembers
how much of each message it printed, so after every change it prints only the
new suffix. What a stop or failure rolls back was already on screen, so it is
marked as discarded rather than silently contradicted.
"""

from __future__ import annotations

from collections.abc import Sequence

from interlude.core.json import thaw
from interlude.core.wire.messages import AssistantMessage, Message, ToolMessage

from .cli_console import Console
from .cli_forms import format_json

__all__ = ["Transcript"]

AGENT_PREFIX = "agent> "


class Transcript:
    """Prints the messages that a turn adds after :meth:`begin`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._start = 0
        self._printed: dict[str, str] = {}
        self._shown: set[str] = set()
        self._open: str | None = None

    def begin(self, messages: Sequence[Message]) -> None:
        """Start a turn: messages already in ``messages`` are not printed again."""
        self._start = len(messages)
        self._printed.clear()
        self._open = None

    def update(self, messages: Sequence[Message], *, settled: bool) -> None:
        """Print what is new. ``settled``: nothing streams any more (tool calls are complete)."""
        new = messages[self._start :]
        for n, message in enumerate(new):
            if isinstance(message, AssistantMessage):
                if message.content:
                    self._stream(message.id, message.content)
                if message.tool_calls and (settled or n < len(new) - 1):
                    for call in message.tool_calls:
                        if call.id not in self._shown:
                            self._shown.add(call.id)
                            args = call.function.arguments
                            name = _cut(call.function.name, 100)
                            self._note(f"[tool call] {name} {_cut(args)}")
            elif isinstance(message, ToolMessage) and message.id not in self._shown:
                self._shown.add(message.id)
                content = message.content
                shown = content if isinstance(content, str) else format_json(thaw(content))
                self._note(f"[tool result] {_cut(shown)}")
        if settled:
            self.console.end_line()
            self._open = None
            ids = {m.id for m in messages}
            if any(mid not in ids for mid in self._printed):
                self.console.line("(the unfinished reply above was discarded)")
                self._printed = {k: v for k, v in self._printed.items() if k in ids}

    def _stream(self, message_id: str, content: str) -> None:
        printed = self._printed.get(message_id)
        if printed is not None and content == printed:
            return
        if printed is not None and content.startswith(printed) and self._open == message_id:
            self.console.write(content[len(printed) :])
        else:  # a new message, or one rewritten by a snapshot: print it whole
            self.console.end_line()
            self.console.write(AGENT_PREFIX + content)
        self._printed[message_id] = content
        self._open = message_id

    def _note(self, text: str) -> None:
        self.console.line(text)
        self._open = None


def _cut(text: str, limit: int = 200) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."
