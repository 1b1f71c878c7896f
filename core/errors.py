"""Every error interlude raises or records, under one base class.

Two families, as in h11: an *intent error* is raised synchronously when the
application asks for something the current state forbids, and the state is
left exactly as it was. An *execution error* never raises from an intent; the
reducer records it in the resource's ``error`` so the application can show it.

Errors compare by type and fields, so two states holding equal errors are
equal; that keeps the reducer's determinism checkable.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

__all__ = [
    "BatchClaimedError",
    "BatchExpiredError",
    "InterludeError",
    "InterruptPendingError",
    "InvalidResumeError",
    "ObserverError",
    "ProtocolError",
    "RecoveryRequiredError",
    "ResumeProblem",
    "RunError",
    "StaleBatchError",
    "StateLockedError",
    "ToolError",
    "TransportError",
    "UsageError",
    "a_type",
    "article",
    "clip",
    "describe_exception",
    "listed",
    "quote",
    "redacted_url",
]

MAX_MESSAGE = 2000
"""The longest error message or warning kept whole. A longer one (a value from the
network or the caller quoted in it) keeps its start and its end, where the advice is."""


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text``, or its start and end with the length left out named between them."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    end = text[len(text) - tail :]  # not text[-tail:]: a tail of 0 would keep it all
    return f"{text[:head]} ... [{len(text) - head - tail:,} characters left out] ... {end}"


def listed(names: Sequence[object], shown: int = 3, show: Callable[[object], str] = str) -> str:
    """The first ``shown`` of ``names`` (as ``show`` gives them: ``quote`` for values from
    the network), comma-separated, and how many more: a message names a few of many
    without growing with them, nor showing more than it names."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(show(n) for n in names[:shown]) + more


_QUOTE = reprlib.Repr()
_QUOTE.maxlevel = 3
_QUOTE.maxstring = 60
_QUOTE.maxother = 60
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 6


def quote(value: object) -> str:
    """``repr(value)`` for a message, bounded in length and depth: never megabytes, and
    never a ``RecursionError`` for a deeply nested value."""
    try:
        return _QUOTE.repr(value)
    except Exception:  # a __repr__ that raises: name the type alone
        return f"<{type(value).__name__} object>"


def article(word: str) -> str:
    """``word`` with its article: "an assistant", "an image", "a user", "a url" (a
    leading "u" is read as a consonant sound, as in the protocol's words)."""
    return f"{'an' if word[:1].lower() in 'aeio' else 'a'} {word}"


def a_type(value: object) -> str:
    """``value``'s type with its article: "an int", "a list"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def describe_exception(exc: BaseException) -> str:
    """``TypeName: message`` for an exception from application code, even one whose
    ``__str__`` raises (the name alone, then)."""
    try:
        text = str(exc)
    except Exception:
        return f"{type(exc).__name__} (its message could not be read)"
    return f"{type(exc).__name__}: {clip(text)}" if text else type(exc).__name__


class InterludeError(Exception):
    """The base of every interlude error."""

    def __init__(self, message: str) -> None:
        message = clip(message)
        super().__init__(message)
        self.message = message

    def _fields(self) -> tuple[Any, ...]:
        return (self.message,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InterludeError) and (
            type(other) is type(self) and other._fields() == self._fields()
        )

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles as cls(*args), which the subclasses' constructors do not take
        # (keyword-only fields; problems joined into the message): rebuild without them.
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[InterludeError], args: tuple[Any, ...], fields: dict[str, Any]) -> Any:
    """An unpickled error: its ``args`` and fields as they were, no constructor run."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(fields)
    return error


# -- intent errors: raised synchronously, state unchanged ---------------------


class UsageError(InterludeError, ValueError):
    """An intent got an argument of the wrong kind (not a state conflict)."""


class StaleBatchError(InterludeError):
    """``resume`` named a batch that is not the one pending."""


class BatchClaimedError(InterludeError):
    """``resume`` of a batch that is already claimed by an earlier ``resume``."""


class BatchExpiredError(InterludeError):
    """An interrupt of the batch has expired; the way on is a new thread.

    Raised by ``resume`` when found before the claim; recorded in ``error``
    when found just before a send (the claim is then released).
    """

    def __init__(self, message: str, interrupt_ids: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.interrupt_ids = tuple(interrupt_ids)

    def _fields(self) -> tuple[Any, ...]:
        return (self.message, self.interrupt_ids)


class ResumeProblem(NamedTuple):
    """One thing wrong with the entries of a ``resume``, placed for a form to show."""

    message: str
    interrupt_id: str | None = None
    """The interrupt it concerns: one of the batch's, which an entry names or lacks."""
    entry: int | None = None
    """The position of the entry in the list given to ``resume``, if one is at fault."""


class InvalidResumeError(InterludeError):
    """The entries of a ``resume`` are wrong; ``problems`` lists every one.

    Problems name interrupt ids and entry positions, never payload contents.
    ``details`` holds them as :class:`ResumeProblem`s, so that a form can show each
    next to its question (:meth:`for_interrupt`).
    """

    def __init__(self, problems: Iterable[str | ResumeProblem]) -> None:
        self.details = tuple(
            p if isinstance(p, ResumeProblem) else ResumeProblem(p) for p in problems
        )
        self.problems = tuple(p.message for p in self.details)
        super().__init__(
            "the resume entries were rejected, nothing was sent: " + "; ".join(self.problems)
        )

    def for_interrupt(self, interrupt_id: str) -> tuple[str, ...]:
        """The problems with the answer to ``interrupt_id`` (empty if it is fine)."""
        return tuple(p.message for p in self.details if p.interrupt_id == interrupt_id)

    def _fields(self) -> tuple[Any, ...]:
        return (self.details,)


class InterruptPendingError(InterludeError):
    """``send``, ``set_messages`` or ``reload`` while a batch awaits answers."""


class RecoveryRequiredError(InterludeError):
    """The resumed interaction was stopped or failed after the server took it; change thread."""


class StateLockedError(InterludeError):
    """``set_state`` while a claim is held or a run owns the state."""


# -- execution errors: recorded in ``error``, never raised from intents -------


class ProtocolError(InterludeError):
    """The endpoint broke AG-UI (malformed event, outcome, snapshot or patch)."""

    def __init__(self, message: str, *, retryable: bool = False, body: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.body = body
        """The start of an answer that was not an event stream (kept out of the message:
        a server may echo the request, credentials included)."""

    def _fields(self) -> tuple[Any, ...]:
        return (self.message, self.retryable, self.body)


class TransportError(InterludeError):
    """The request or its stream failed below AG-UI (network, HTTP status)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        body: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.body = body
        self.retry_after = _seconds_or_none(retry_after)
        """Seconds the endpoint asked the client to wait (its ``Retry-After``), if it said."""

    def _fields(self) -> tuple[Any, ...]:
        return (self.message, self.retryable, self.status, self.body, self.retry_after)

    @classmethod
    def from_status(
        cls,
        status: int,
        body: str,
        *,
        retry_after: float | None = None,
        endpoint: str = "",
        location: str | None = None,
    ) -> TransportError:
        """The error for a non-2xx answer: 5xx and 429 are retryable, other 4xx not, nor
        a status past 599, which HTTP does not define (a broken server or proxy).

        ``endpoint`` names it in the message and ``location``, a redirect's target (not
        followed), in its hint; both without credentials, query or fragment
        (:func:`redacted_url`), where tokens live.
        """
        retry_after = _seconds_or_none(retry_after)
        retryable = 500 <= status <= 599 or status == 429
        where = f"the endpoint {redacted_url(endpoint)}" if endpoint else "the endpoint"
        location = redacted_url(location) if location is not None else None
        # A long wait in whole seconds: 2147483647, not 2.14748e+09.
        wait = ""
        if retry_after:
            secs = f"{retry_after:g}"
            if "e+" in secs:  # six significant digits ran out (999999.5 rounds up too)
                secs = f"{retry_after:.0f}"
            wait = f"; it asked to wait {secs} s before retrying"
        return cls(
            f"{where} answered HTTP {status}{wait}{_status_hint(status, location)}",
            retryable=retryable,
            status=status,
            body=body,
            retry_after=retry_after,
        )


def _seconds_or_none(value: float | None) -> float | None:
    """A ``Retry-After`` wait as given, if it is seconds: the reducer compares it with
    numbers, so text there would fail the step that reads it, far from the driver's bug."""
    if value is None or (
        isinstance(value, int | float) and not isinstance(value, bool) and value == value
    ):
        return value
    raise UsageError(
        f"TransportError: retry_after must be seconds (a number) or None, not "
        f"{a_type(value)} {quote(value)}: parse the Retry-After header first "
        "(interlude.adapters.httpx.retry_after does)"
    )


_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?[^/?#@]*@")
_QUERY = re.compile(r"[?#]")


def redacted_url(url: str) -> str:
    """``url`` as an error message may show it: without credentials (``user:pw@``),
    query or fragment, where tokens live. Works on text that is not a URL too."""
    head, *cut = _QUERY.split(_USERINFO.sub(lambda m: m.group(1) or "", url), maxsplit=1)
    return head + ("?..." if cut else "")


def _status_hint(status: int, location: str | None) -> str:
    """What to do about a status the application, not the endpoint, can fix."""
    if 300 <= status < 400:
        to = f" to {location}" if location else ""
        return f" (a redirect{to}: interlude does not follow redirects; use the new URL)"
    if status in (401, 403):
        return " (check the credentials the transport sends: its headers)"
    if status in (404, 405):
        return " (check the endpoint URL: it takes POST requests of RunAgentInput)"
    if status > 599:
        return " (a status HTTP does not define: not retried)"
    return ""


class RunError(InterludeError):
    """The endpoint sent ``RUN_ERROR``; never retried.

    ``message`` is the endpoint's text (clipped past ``MAX_MESSAGE`` characters, as
    every message is), ``code`` as sent; ``str()`` reads both, and says so when the
    endpoint gave no message.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        text = self.message
        if not text.strip():
            text = "the agent reported an error (RUN_ERROR) without a message"
        if code is not None:
            text += f" [code {quote(code)}]"
        self.args = (text,)

    def _fields(self) -> tuple[Any, ...]:
        return (self.message, self.code)

    def __repr__(self) -> str:
        code = f", code={quote(self.code)}" if self.code is not None else ""
        return f"RunError({self.message!r}{code})"


class ToolError(InterludeError):
    """The endpoint asked for more rounds of local tools than ``Options.max_tool_rounds``
    in one interaction; that round's tools did not run.

    A tool that raises is not an error of the resource: its exception becomes the
    call's tool message, and the loop goes on.
    """


class ObserverError(InterludeError):
    """An application observer raised while being notified; never retried (R-F1)."""
