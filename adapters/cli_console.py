"""The terminal side of the CLI: output that knows where the cursor is, a spinner, line input.

Input is read by a worker thread (``readline`` on stdin) so the event loop keeps
streaming and serving the embedded agent while a person types. A read that
outlives the wait for it (the form was cancelled by an expiry) is kept for the
next question, so no typed line is lost to a stranded thread.

The spinner writes only ``\\r``, its text and spaces on stderr, and only when
both stdout and stderr are terminals and the cursor is at the start of a line:
it works in a dumb terminal and never cuts into streamed text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TextIO

import trio

__all__ = ["Console", "show_progress", "visible"]

SPIN_FRAMES: Final = "|/-\\"
QUIET_BEFORE_SPINNING: Final = 0.3
"""Seconds without output before the spinner shows: a streaming reply needs no spinner."""


_CONTROLS: Final = {
    **{c: f"^{chr(c + 64)}" for c in range(0x20) if chr(c) not in "\n\t"},
    0x7F: "^?",
    **{c: f"\\x{c:02x}" for c in range(0x80, 0xA0)},
    # A lone surrogate (half an emoji an agent split) has no UTF-8 form: printing it raises.
    **{c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)},
    # Bidirectional overrides and isolates reorder what follows them on the line.
    **{c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F))},
    **{c: f"\\u{c:04x}" for c in range(0x2066, 0x206A)},
}


def one_line(text: str, limit: int = 200) -> str:
    """``text`` for a place that must stay one line (an id, a reason, a choice): line
    ends shown as ``\\n``, and at most ``limit`` characters."""
    flat = text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def capped(text: str, limit: int = 4000) -> str:
    """``text`` cut at ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not shown)"


def visible(text: str) -> str:
    """``text`` with control characters shown as ``^[``-style escapes; lone surrogates and
    bidirectional controls as ``\\u`` escapes.

    Everything printed comes from the network (agent text, schemas, error
    bodies): an escape sequence in it must not move the cursor, retitle the
    window or write the clipboard, and a ``\r`` must not overwrite a line.
    """
    return text.translate(_CONTROLS)


class _Read:
    """One outstanding ``readline`` in a worker thread."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.line = ""


class Console:
    """stdout for the transcript and prompts, stderr for errors and the spinner."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        inp: TextIO | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.err = err
        self.inp = inp
        self._clock = clock
        self.at_line_start = True
        self.last_output = clock()
        self.fancy = _isatty(out) and _isatty(err)
        self.echo_input = inp is not None and not _isatty(inp)
        """Echo lines read from a pipe, so the transcript shows what was answered."""
        self._spun = 0
        self._frame = 0
        self._read: _Read | None = None
        self._prompt: str | None = None
        self._nursery: trio.Nursery | None = None

    # -- output --------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Write to stdout as is (streamed text); clears the spinner first."""
        if not text:
            return
        self.clear_spinner()
        self.out.write(visible(text))
        self.out.flush()
        self.at_line_start = text.endswith("\n")
        self.last_output = self._clock()

    def line(self, text: str = "") -> None:
        """A whole line of its own on stdout."""
        self.end_line()
        self.write(text + "\n")

    def end_line(self) -> None:
        if not self.at_line_start:
            self.write("\n")

    def say(self, text: str = "") -> None:
        """The form's :class:`~interlude.adapters.cli_ask.Prompter` output."""
        self.line(text)

    def error(self, text: str) -> None:
        """Lines on stderr, starting on a fresh line."""
        self.end_line()
        self.clear_spinner()
        self.err.write(visible(text.rstrip("\n")) + "\n")
        self.err.flush()
        self.last_output = self._clock()

    def spin(self, label: str) -> None:
        """Draw the next spinner frame, if this terminal and cursor position allow it."""
        if not self.fancy or not self.at_line_start:
            return
        text = f"{SPIN_FRAMES[self._frame % len(SPIN_FRAMES)]} {label}"
        self._frame += 1
        self.err.write("\r" + text + " " * max(0, self._spun - len(text)))
        self.err.flush()
        self._spun = max(self._spun, len(text))

    def clear_spinner(self) -> None:
        if self._spun:
            self.err.write("\r" + " " * self._spun + "\r")
            self.err.flush()
            self._spun = 0

    # -- input ---------------------------------------------------------------------------

    def reading_in(self, nursery: trio.Nursery) -> None:
        """Where reads run: a nursery that lives as long as this console is used."""
        self._nursery = nursery

    async def ask(self, prompt: str) -> str | None:
        """Show ``prompt`` and read one line (without its newline); None at end of input."""
        if self.inp is None or self._nursery is None:
            raise RuntimeError("this console has no input")
        self.end_line()
        self.write(prompt)
        read = self._read
        if read is None:
            read = self._read = _Read()
            self._nursery.start_soon(self._readline, read, self.inp)
        self._prompt = prompt
        try:
            await read.done.wait()
        finally:
            self._prompt = None
        self._read = None
        self.at_line_start = True  # the terminal echoed the newline
        if not read.line:
            self.out.write("\n")  # Ctrl-D leaves the cursor after the prompt
            self.out.flush()
            return None
        line = read.line.rstrip("\n").rstrip("\r")
        if self.echo_input:
            self.write(line + "\n")
        return line

    def remind(self, text: str) -> None:
        """A note while a prompt may be waiting (Ctrl-C at a prompt); shows the prompt again."""
        self.error(text)
        if self._prompt is not None:
            self.write(self._prompt)

    @staticmethod
    async def _readline(read: _Read, inp: TextIO) -> None:
        try:
            read.line = await trio.to_thread.run_sync(inp.readline, abandon_on_cancel=True)
        except (OSError, ValueError):  # stdin closed or unreadable: end of input
            read.line = ""
        read.done.set()


async def show_progress(
    console: Console, label: Callable[[], str | None], *, every: float = 0.1
) -> None:
    """Animate the spinner while ``label()`` names a wait and nothing was printed lately.

    Runs until cancelled; the caller clears the spinner.
    """
    while True:
        await trio.sleep(every)
        text = label()
        if text is not None and console._clock() - console.last_output >= QUIET_BEFORE_SPINNING:
            console.spin(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
