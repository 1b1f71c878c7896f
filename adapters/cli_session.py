"""A conversation in the terminal: the prompt loop, the answer form, and unattended scripts.

The session only reads the resource's public facts (``pending_interrupts``,
``is_loading``, ``error``, ``needs_new_thread``...) and calls its intents; every
decision about batches, claims and expiry stays in the runtime. Errors are
told as what happened and what the person can do next, never as tracebacks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import trio

from interlude.core.errors import (
    BatchExpiredError,
    InterludeError,
    InterruptPendingError,
    ProtocolError,
    RecoveryRequiredError,
    RunError,
    ToolError,
    TransportError,
)
from interlude.core.json import thaw
from interlude.core.state import Batch

from .cli_ask import FormAborted, ask_batch, describe_interrupt
from .cli_console import Console, show_progress
from .cli_forms import format_duration, format_json, parse_bool
from .cli_script import CANCEL, Script, ScriptError
from .cli_transcript import Transcript
from .trio import AsyncResource

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "HELP",
    "Session",
    "describe_error",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
"""A network, protocol or run error, or an expired batch, in an unattended run."""
EXIT_USAGE: Final = 2
"""Bad arguments or answers file, or an interrupt the script has no (valid) answer for
(including questions asked again right after the script's answers to them)."""
EXIT_INTERRUPTED: Final = 130

HELP: Final = """\
Type a message and press Enter. Commands:
  /new    start a new thread (abandons pending questions)
  /state  print the shared state
  /retry  run the last message again (after an error)
  /quit   exit (or press Ctrl-D)
Ctrl-C stops a reply that is streaming."""

WAITING: Final = "waiting…"
RESUMING: Final = "resuming…"


class _Quit(Exception):
    """The person asked to leave."""


def describe_error(error: InterludeError, secrets: Sequence[str] = ()) -> list[str]:
    """What happened and what it usually means, for a person: first line first.

    A response may echo the request, credentials included: each of ``secrets`` (the
    header values and URL credentials sent) is shown as ``***`` in what it said.
    """
    kind = type(error).__name__
    lines = [f"error ({kind}): {error.message}"]
    if isinstance(error, TransportError):
        if error.status is not None and error.body:
            lines.append(f"  the response said: {_one_line(_scrubbed(error.body, secrets))}")
        lines.append("  " + _transport_advice(error.status))
    elif isinstance(error, ProtocolError):
        if error.body:
            lines.append(f"  the response said: {_one_line(_scrubbed(error.body, secrets))}")
        lines.append(
            "  the endpoint does not follow AG-UI 1.0 here: is the URL an AG-UI agent endpoint?"
        )
    elif isinstance(error, RunError):
        if error.code:
            lines[0] += f" (code {error.code})"
        lines.append("  the agent reported that the run failed")
    elif isinstance(error, BatchExpiredError):
        lines.append("  an expired batch cannot be resumed; a new thread starts a new workflow")
    elif isinstance(error, ToolError):
        lines.append("  the agent kept asking for local tools without finishing; the loop was cut")
    return lines


def _transport_advice(status: int | None) -> str:
    if status is None:
        return "check that the agent is running and the URL is right"
    if status in (401, 403):
        return "the endpoint refused the request: pass credentials with --header 'Name: value'"
    if status in (404, 405):
        return "check the URL: it should be the agent's AG-UI endpoint"
    if status == 429:
        return "the endpoint is limiting requests; try again later"
    if status in (501, 505):
        return "the server does not handle this request: is the URL an AG-UI agent endpoint?"
    if status >= 500:
        return "the server failed or is overloaded; try again in a moment"
    return "the endpoint rejected the request"


def _scrubbed(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class Session:
    """One resource, one console: ``interactive()`` or ``scripted(script)`` returns an exit code."""

    def __init__(
        self,
        chat: AsyncResource,
        console: Console,
        *,
        now: Callable[[], float],
        secrets: Sequence[str] = (),
    ) -> None:
        self.chat = chat
        self.console = console
        self.now = now
        self.secrets = tuple(secrets)
        """Never shown, even when an error's body echoes them (see :func:`describe_error`)."""
        self.transcript = Transcript(console)
        self.stopped = False
        """Set when Ctrl-C stopped a run (an unattended run then exits 130)."""
        self._reported: InterludeError | None = None
        # The answers sent for a batch, offered again if its resume is not taken (R-F4):
        # only the pending batch can be resumed, so one batch's are kept, not every one's.
        self._sent: dict[str, list[dict[str, Any]]] = {}
        self._declined: set[str] = set()
        self._warned: set[str] = set()
        self._declined_recovery = False

    # -- shared ----------------------------------------------------------------------------

    async def follow(self, label: str) -> None:
        """Print what streams until the interaction settles (nothing loading)."""
        chat = self.chat
        async with trio.open_nursery() as nursery:
            nursery.start_soon(show_progress, self.console, lambda: self._progress(label))
            while True:
                self.transcript.update(chat.messages, settled=not chat.is_loading)
                if not chat.is_loading:
                    break
                await chat.next_change(timeout=math.inf)
            nursery.cancel_scope.cancel()
        self.console.clear_spinner()

    def _progress(self, label: str) -> str | None:
        chat = self.chat
        if not chat.is_loading:
            return None
        if chat.is_retrying:
            return f"retrying (attempt {chat.attempts + 1})…"
        return label

    def interrupt(self) -> None:
        """Ctrl-C: stop the run in progress, else remind how to leave."""
        if self.chat.is_loading:
            self.stopped = True
            self.chat.stop()
            self.console.error("stopped (Ctrl-C)")
        else:
            self.console.remind("(Ctrl-C stops a streaming reply; /quit or Ctrl-D exits)")

    def report(self) -> bool:
        """Print the resource's error if it is new; whether there is one."""
        error = self.chat.error
        if error is None:
            return False
        if error is not self._reported:
            self._reported = error
            self.console.error("\n".join(describe_error(error, self.secrets)))
        return True

    def show_state(self) -> None:
        state = thaw(self.chat.state)
        self.console.line(json.dumps(state, indent=2, ensure_ascii=False, default=str))

    def new_thread(self) -> None:
        self.chat.set_thread_id(None)
        self._declined.clear()
        self._declined_recovery = False
        tid = self.chat.thread_id
        if tid is None:  # nothing was sent yet: the runtime picks the id on the first run
            self.console.line("(a new thread starts with your next message)")
        else:
            self.console.line(f"(new thread {tid}: earlier messages are kept)")

    async def _run(self, start: Callable[[], object], label: str) -> bool:
        """Call an intent that starts a run, then follow it; False if the intent was refused."""
        try:
            start()
        except InterludeError as exc:
            self._refused(exc)
            return False
        self.stopped = False
        if label == RESUMING:
            self.console.line(RESUMING)
        self.transcript.begin(self.chat.messages)  # the new user message is not echoed
        await self.follow(label)
        warnings = self.chat.warnings
        for warning in warnings:
            if warning not in self._warned:
                self.console.error(f"note: {warning}")
        # The state keeps the newest notes only, so remembering those is enough not to
        # repeat one, and a long session does not remember every note it ever showed.
        self._warned = set(warnings)
        if self.stopped and self.chat.error is None:
            self.console.line("(stopped)")
        return True

    def _refused(self, exc: InterludeError) -> None:
        if isinstance(exc, RecoveryRequiredError):
            self.console.error("This thread cannot go on after the failed resume: type /new.")
        elif isinstance(exc, InterruptPendingError):
            self.console.error(
                "The agent is still waiting for answers to questions that can no longer be "
                "answered: type /new to start a new thread."
            )
        else:
            self.console.error(f"error ({type(exc).__name__}): {exc.message}")

    # -- interactive -----------------------------------------------------------------------

    async def interactive(self, banner: str) -> int:
        self.console.line(banner)
        try:
            while True:
                await self._step()
        except _Quit:
            return EXIT_OK

    async def _step(self) -> None:
        chat = self.chat
        batch = chat.pending_interrupts
        if chat.needs_new_thread and not self._declined_recovery:
            self.console.error(
                "The resumed workflow failed or was stopped after the agent took your answers, "
                "so it cannot go on on this thread (a new thread starts a new workflow)."
            )
            if not await self._offer_new_thread():
                self._declined_recovery = True
            return
        if batch is not None and not chat.is_resuming and batch.id not in self._declined:
            if chat.is_expired:
                self._say_expired(batch)
                if not await self._offer_new_thread():
                    self._declined.add(batch.id)
                return
            await self._answer(batch)
            return
        line = await self._ask("you> ")
        await self._command_or_message(line)

    async def _command_or_message(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        if text == "/quit":
            raise _Quit
        if text == "/new":
            self.new_thread()
        elif text == "/state":
            self.show_state()
        elif text == "/help":
            self.console.line(HELP)
        elif text == "/retry":
            await self._retry()
        elif text.startswith("/") and " " not in text:
            self.console.error(f"unknown command {text}; /help lists the commands")
        else:
            if await self._run(lambda: self.chat.send(line), WAITING) and self.report():
                self._advise()

    async def _retry(self) -> None:
        ran = False

        def reload() -> None:
            nonlocal ran
            ran = self.chat.reload()

        if await self._run(reload, WAITING) and not ran:
            self.console.line("(nothing to retry: there is no message of yours to run again)")
        elif self.report():
            self._advise()

    def _advise(self) -> None:
        chat = self.chat
        if chat.needs_new_thread:
            return  # the next step offers a new thread
        if chat.pending_interrupts is not None:
            if not chat.is_expired:
                self.console.error("  your answers were not taken: you can send them again")
            return
        self.console.error("  type /retry to try again, or send another message")

    async def _answer(self, batch: Batch) -> None:
        entries = self._sent.get(batch.id)
        if entries is not None:
            again = await self._yes_no(
                "Send the same answers again? (y: resend, n: answer again): "
            )
            entries = entries if again else None
        if entries is None:
            try:
                entries = await self._form(batch)
            except FormAborted as aborted:
                if aborted.command == "/quit":
                    raise _Quit from None
                self.new_thread()
                return
            if entries is None:
                return  # expired while the form was open: the next step says so
        self._sent = {batch.id: entries}
        if not await self._run(lambda: self.chat.resume(batch.id, entries), RESUMING):
            return
        if self.report():
            self._advise()

    async def _form(self, batch: Batch) -> list[dict[str, Any]] | None:
        """The answers, or None when the batch expired while they were being typed."""
        chat = self.chat
        expired = False
        result: list[dict[str, Any]] | None = None
        aborted: FormAborted | None = None
        async with trio.open_nursery() as nursery:

            async def watch_expiry() -> None:
                nonlocal expired
                while not chat.is_expired:
                    await chat.next_change(timeout=math.inf)
                expired = True
                nursery.cancel_scope.cancel()

            if batch.earliest_expiry is not None:
                nursery.start_soon(watch_expiry)
            try:
                result = await ask_batch(
                    self.console,
                    batch,
                    now=self.now(),
                    messages=chat.messages,
                    commands={"/state": self.show_state},
                )
            except FormAborted as exc:  # raised here, not grouped by the nursery
                aborted = exc
            nursery.cancel_scope.cancel()
        if aborted is not None:
            raise aborted
        if expired:
            return None
        if result is not None:
            self.console.line(f"Sending {len(result)} answer(s)...")
        return result

    def _say_expired(self, batch: Batch) -> None:
        when = batch.earliest_expiry
        ago = f" {format_duration(self.now() - when)} ago" if when is not None else ""
        self.console.error(
            f"The agent's questions expired{ago}: they cannot be answered or resumed any more."
        )

    async def _offer_new_thread(self) -> bool:
        if await self._yes_no("Start a new thread? (y/n): "):
            self.new_thread()
            return True
        self.console.line("Type /new when you want a new thread; /quit exits.")
        return False

    async def _yes_no(self, prompt: str) -> bool:
        while True:
            line = await self._ask(prompt)
            if line.strip() == "/quit":
                raise _Quit
            try:
                return parse_bool(line)
            except ValueError:
                self.console.line("answer y or n")

    async def _ask(self, prompt: str) -> str:
        line = await self.console.ask(prompt)
        if line is None:
            raise _Quit
        return line

    # -- unattended ------------------------------------------------------------------------

    async def scripted(self, script: Script) -> int:
        """Send each message, answer every batch from ``script``, print the transcript."""
        asked: set[str] = set()
        for message in script.messages:
            self.console.line(f"you> {message}")
            if not await self._run(_sender(self.chat, message), WAITING):
                return EXIT_FAILED
            code = await self._settle_scripted(script, asked)
            if code != EXIT_OK:
                return code
        unused = sorted(set(script.answers) - asked)
        if unused:  # a typo in an id, most likely: say so rather than pass in silence
            listed = ", ".join(map(repr, unused))
            self.console.error(f"note: the agent never asked {listed}; those answers were not used")
        return EXIT_OK

    async def _settle_scripted(self, script: Script, asked: set[str]) -> int:
        chat = self.chat
        last: list[dict[str, Any]] | None = None
        while True:
            if self.stopped:
                return EXIT_INTERRUPTED
            if self.report():
                return EXIT_FAILED
            batch = chat.pending_interrupts
            if batch is None:
                return EXIT_OK
            if chat.is_expired:
                self._say_expired(batch)
                return EXIT_FAILED
            self._show_batch(batch, script)
            asked.update(i.id for i in batch.interrupts)
            try:
                entries = script.entries_for(batch)
            except ScriptError as exc:
                self.console.error(f"error: {exc}")
                return EXIT_USAGE
            if entries == last:  # a script cannot answer differently: it would loop forever
                self.console.error(
                    "error: the agent asked the same questions again after taking these "
                    "answers; the script has no other answers, so the run stops here"
                )
                return EXIT_USAGE
            last = entries
            if not await self._run(_resumer(chat, batch.id, entries), RESUMING):
                return EXIT_FAILED

    def _show_batch(self, batch: Batch, script: Script) -> None:
        count = len(batch.interrupts)
        self.console.line(f"The agent asks {count} question(s):")
        for n, interrupt in enumerate(batch.interrupts, 1):
            described = describe_interrupt(interrupt, now=self.now(), messages=self.chat.messages)
            self.console.line(f"[{n}/{count}] {described}")
            if interrupt.id in script.answers:
                answer = script.answers[interrupt.id]
                shown = "cancelled" if answer == CANCEL else format_json(answer)
                self.console.line(f"  -> {interrupt.id}: {shown}")


def _sender(chat: AsyncResource, message: str) -> Callable[[], None]:
    return lambda: chat.send(message)


def _resumer(
    chat: AsyncResource, batch_id: str, entries: list[dict[str, Any]]
) -> Callable[[], None]:
    return lambda: chat.resume(batch_id, entries)
