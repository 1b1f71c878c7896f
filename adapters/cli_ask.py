"""Asking a person for one answer per interrupt of a batch, as one form.

Every answer is checked with the R-B3 helper (``compile_answer_schema``)
before anything is sent, field by field and then whole, and re-asked with the
checker's problems listed: the server stays authoritative, but a person
should hear about a typo before a round trip. Terminal I/O goes through a
:class:`Prompter`, so the form runs the same in a terminal and in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from interlude.core.answers import AnswerValidator, SchemaRejectedError, compile_answer_schema
from interlude.core.json import thaw
from interlude.core.state import Batch
from interlude.core.wire.messages import AssistantMessage, Message
from interlude.core.wire.run_input import Interrupt

from .cli_console import capped, one_line
from .cli_forms import (
    ArrayField,
    ChoiceField,
    ConstField,
    Field,
    IncompleteJSON,
    InputProblem,
    JsonField,
    ObjectField,
    TextField,
    build_form,
    describe_problem,
    format_duration,
    format_json,
    hint,
    parse_bool,
    parse_list,
    parse_scalar,
)

__all__ = ["FORM_HELP", "FormAborted", "Prompter", "ask_batch", "describe_interrupt"]

FORM_HELP: Final = (
    "'cancel' (or '/cancel' in a text field) cancels the current question;\n"
    "/new abandons them all and starts a new thread; /quit exits."
)
_ABORTS = ("/new", "/quit")

MAX_CHOICES_SHOWN: Final = 50
"""A schema's enum may hold thousands: the rest are chosen by number or by value."""


class Prompter(Protocol):
    """Where the form talks: ``ask`` returns a line without its newline, None at end of input."""

    async def ask(self, prompt: str) -> str | None: ...

    def say(self, text: str = "") -> None: ...


class FormAborted(Exception):
    """The person typed ``/new`` or ``/quit`` (or ended the input) instead of answering."""

    def __init__(self, command: str) -> None:
        super().__init__(command)
        self.command = command


class _Cancel(Exception):
    """The person cancelled the current interrupt."""


class _Skip:
    """An optional field left empty (and a schema-less answer sent without payload)."""


_SKIP: Final = _Skip()


async def ask_batch(
    io: Prompter,
    batch: Batch,
    *,
    now: float,
    messages: Sequence[Message] = (),
    commands: Mapping[str, Callable[[], None]] | None = None,
) -> list[dict[str, Any]]:
    """One resume entry per interrupt, in the batch's order. Raises :class:`FormAborted`.

    ``commands`` are extra slash commands that print something and re-ask (``/state``).
    """
    count = len(batch.interrupts)
    noun = "question" if count == 1 else f"{count} questions"
    io.say(f"The agent is waiting for your answer ({noun}).")
    io.say(FORM_HELP)
    walker = _Walker(io, dict(commands or {}))
    entries: list[dict[str, Any]] = []
    for n, interrupt in enumerate(batch.interrupts, 1):
        io.say()
        io.say(f"[{n}/{count}] " + describe_interrupt(interrupt, now=now, messages=messages))
        entries.append(await walker.interrupt(interrupt))
    return entries


def describe_interrupt(
    interrupt: Interrupt, *, now: float, messages: Sequence[Message] = ()
) -> str:
    """The question, then its id, reason, expiry, the tool call it is about and its metadata."""
    # Everything here comes from the agent: one-line facts stay on their line, and a
    # huge message is cut, so it can neither fake lines nor flood the terminal.
    reason = one_line(interrupt.reason)
    title = capped(interrupt.message) if interrupt.message else f"({reason or 'no reason'})"
    facts = [f"id {one_line(interrupt.id)}"]
    if interrupt.reason:
        facts.append(f"reason {reason}")
    if interrupt.expires_at_epoch is not None:
        left = interrupt.expires_at_epoch - now
        facts.append(
            f"expires in {format_duration(left)}" if left > 0 else "EXPIRED: it cannot be answered"
        )
    lines = [title, "  " + " | ".join(facts)]
    call = _tool_call(messages, interrupt.tool_call_id)
    if call is not None:
        lines.append(f"  about the tool call: {one_line(call, 300)}")
    if interrupt.metadata:
        details = ", ".join(
            f"{one_line(k, 60)}: {format_json(thaw(v), 60)}" for k, v in interrupt.metadata.items()
        )
        lines.append(f"  details: {details}")
    return "\n".join(lines)


def _tool_call(messages: Sequence[Message], call_id: str | None) -> str | None:
    if call_id is None:
        return None
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                if call.id == call_id:
                    return f"{call.function.name} {call.function.arguments[:200]}"
    return None


class _Walker:
    """Asks fields depth first; keeps compiled checkers for the batch's schemas."""

    def __init__(self, io: Prompter, commands: dict[str, Callable[[], None]]) -> None:
        self.io = io
        self.commands = commands
        self._checkers: dict[int, tuple[Mapping[str, Any], AnswerValidator | None]] = {}
        self.reads = 0
        """Lines read so far: a form that read none cannot be answered differently."""

    async def interrupt(self, interrupt: Interrupt) -> dict[str, Any]:
        field = build_form(interrupt.response_schema)
        whole: AnswerValidator | None = None
        if interrupt.response_schema is not None:
            try:
                whole = compile_answer_schema(interrupt.response_schema)
            except SchemaRejectedError as exc:
                self.io.say(f"  (not checked here: {exc.reason}; the agent will check it)")
        if isinstance(field, JsonField):
            self.io.say(f"  Answer as JSON: {field.reason}.")
            if field.schema:
                self.io.say(f"  schema: {format_json(field.schema, 300)}")
        while True:
            reads = self.reads
            try:
                value = await self.ask(field, depth=0, checked=whole is None)
            except _Cancel:
                self.io.say(f"  -> {interrupt.id}: cancelled")
                return {"interrupt_id": interrupt.id, "status": "cancelled"}
            if whole is not None:
                check = whole.check(None if value is _SKIP else value)
                if not check.ok:
                    self._problems(check.problems, "answer")
                    if self.reads == reads:  # only fixed values: the same form would loop
                        reason = "its fixed values do not fit it"
                        field = JsonField(name=field.name, schema=field.schema, reason=reason)
                        self.io.say(f"  Answer as JSON ('cancel' cancels): {reason}.")
                        continue
                    self.io.say("  Let's try this question again.")
                    continue
            entry: dict[str, Any] = {"interrupt_id": interrupt.id, "status": "resolved"}
            if value is not _SKIP:
                entry["payload"] = value
            shown = format_json(value, 200) if value is not _SKIP else "(no payload)"
            self.io.say(f"  -> {interrupt.id}: {shown}")
            return entry

    async def ask(self, field: Field, *, depth: int, checked: bool) -> Any:
        """The value of ``field`` (or ``_SKIP``); ``depth`` 0 is the interrupt's whole answer.

        ``checked`` asks for a per-field check of a JSON field (a form field always
        gets one: its problems are clearer there than in the whole answer's check).
        """
        pad = "  " * max(depth, 1)
        if isinstance(field, ConstField):
            self.io.say(f"{pad}{field.name} = {format_json(field.value)} (fixed)")
            return field.value
        if isinstance(field, ObjectField):
            return await self._object(field, depth)
        if isinstance(field, ArrayField) and not field.scalar_items:
            return await self._items(field, depth)
        title = field.title
        if title is not None and title != field.name:
            # Its further lines are indented under the field, so they cannot pass for
            # lines of their own (an "agent>" line, a "->" answer).
            lines = title.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self.io.say(f"{pad}{field.name}: " + f"\n{pad}    ".join(lines))
        if isinstance(field, ChoiceField):
            for n, choice in enumerate(field.choices[:MAX_CHOICES_SHOWN], 1):
                shown = choice if isinstance(choice, str) else format_json(choice)
                self.io.say(f"{pad}  {n}) {one_line(shown)}")
            hidden = len(field.choices) - MAX_CHOICES_SHOWN
            if hidden > 0:
                self.io.say(f"{pad}  ... and {hidden} more: type a number or the value itself")
        while True:
            line = await self._line(f"{pad}{field.name} ({hint(field)}): ", field)
            if not line.strip() and field.has_default:  # the hint says "Enter for ..."
                return field.default
            if not line.strip() and not isinstance(field, TextField | ArrayField):
                if not field.required or (isinstance(field, JsonField) and not field.schema):
                    return _SKIP
                self.io.say(f"{pad}  {field.name} needs an answer")
                continue
            if not line.strip() and not field.required:
                return _SKIP
            try:
                value = await self._parse(field, line, pad)
            except InputProblem as exc:
                self.io.say(f"{pad}  {exc}")
                continue
            if checked or not isinstance(field, JsonField):
                problems = self._check(field, value)
                if problems:
                    self._problems(problems, field.name, pad)
                    continue
            return value

    async def _parse(self, field: Field, line: str, pad: str) -> Any:
        if isinstance(field, ArrayField):
            while line.rstrip().endswith(","):  # a trailing comma: one item per line
                line += await self._line(f"{pad}... ", field)
            return parse_list(line.rstrip().rstrip(","), field.item)
        text = line
        while True:
            try:
                return parse_scalar(field, text)
            except IncompleteJSON:
                more = await self._line(f"{pad}... ", field)
                text += "\n" + more

    async def _object(self, field: ObjectField, depth: int) -> Any:
        if depth > 0:
            pad = "  " * depth
            if field.required:
                self.io.say(f"{pad}{field.name}:")
            elif not await self._yes_no(f"{pad}fill in {field.name}? (y/n): ", field):
                return _SKIP
        value: dict[str, Any] = {}
        for sub in field.fields:
            got = await self.ask(sub, depth=depth + 1, checked=True)
            if got is not _SKIP:
                value[sub.key] = got
        return value

    async def _items(self, field: ArrayField, depth: int) -> Any:
        pad = "  " * max(depth, 1)
        if not field.required and not await self._yes_no(f"{pad}add {field.name}? (y/n): ", field):
            return _SKIP
        while True:
            items: list[Any] = []
            while await self._yes_no(f"{pad}add an item to {field.name}? (y/n): ", field):
                got = await self.ask(field.item, depth=depth + 1, checked=True)
                items.append(None if got is _SKIP else got)
            problems = self._check(field, items)
            if not problems:
                return items
            self._problems(problems, field.name, pad)
            self.io.say(f"{pad}Let's enter {field.name} again.")

    async def _yes_no(self, prompt: str, field: Field) -> bool:
        while True:
            line = await self._line(prompt, field)
            try:
                return parse_bool(line)
            except InputProblem as exc:
                self.io.say(f"  {exc}")

    async def _line(self, prompt: str, field: Field) -> str:
        """One line for ``field``, after handling commands typed instead of an answer."""
        while True:
            line = await self.io.ask(prompt)
            self.reads += 1
            if line is None:
                raise FormAborted("/quit")
            word = line.strip()
            if word == "/cancel" or (word.lower() == "cancel" and not isinstance(field, TextField)):
                raise _Cancel
            if word in _ABORTS:
                raise FormAborted(word)
            if word == "/help":
                self.io.say(FORM_HELP)
                continue
            command = self.commands.get(word)
            if command is not None:
                command()
                continue
            return line

    def _check(self, field: Field, value: Any) -> tuple[str, ...]:
        """Problems of ``value`` against the field's own subschema (none if not checkable)."""
        key = id(field.schema)
        cached = self._checkers.get(key)
        if cached is None or cached[0] is not field.schema:
            validator: AnswerValidator | None
            try:
                validator = compile_answer_schema(field.schema) if field.schema else None
            except SchemaRejectedError:
                validator = None  # the whole answer is checked (or the agent checks it)
            cached = self._checkers[key] = (field.schema, validator)
        validator = cached[1]
        if validator is None:
            return ()
        return validator.check(value).problems

    def _problems(self, problems: Sequence[str], name: str, pad: str = "  ") -> None:
        self.io.say(f"{pad}That answer does not fit the schema:")
        for problem in problems:
            self.io.say(f"{pad}  - {one_line(describe_problem(problem, name), 500)}")
