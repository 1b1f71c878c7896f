"""What the application configures: the resource kind, tools, retries, expiry."""

from __future__ import annotations

import math
import sys
import zlib
from collections.abc import Callable
from typing import Any, Literal, get_args

import attrs

from . import intake
from .errors import UsageError, a_type, quote
from .json import JSON, as_object
from .wire.run_input import Context, Tool

__all__ = ["MAX_WAIT", "ExpiryPolicy", "Options", "ResourceKind", "RetryPolicy"]

ResourceKind = Literal["chat", "completion"]

ExpiryPolicy = Literal["block", "cancel_expired"]
"""``block`` (the default, as the seed): an expired batch cannot be resumed.
``cancel_expired`` (AG-UI 1.0's opt-in): a submission that cancels every
expired interrupt is accepted (R-G2)."""


# -- checks: a wrong value is refused when the Options is built, with what it takes ------


def _number(
    least: float, most: float = math.inf, *, integer: bool = False, finite: bool = False
) -> Callable[[Any, Any, Any], None]:
    kind = "an integer" if integer else "a finite number" if finite else "a number"

    def check(obj: Any, a: Any, value: Any) -> None:
        allowed = (int,) if integer else (int, float)
        if (
            type(value) not in allowed
            or not least <= value <= most
            or (finite and value == math.inf)
        ):
            span = f">= {least:g}" if most == math.inf else f"in [{least:g}, {most:g}]"
            raise UsageError(
                f"{type(obj).__name__}.{a.name} takes {kind} {span}, not {quote(value)}"
            )

    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, Any, Any], None]:
    def check(obj: Any, a: Any, value: Any) -> None:
        if value not in choices:
            listed = " or ".join(map(repr, choices))
            raise UsageError(f"{type(obj).__name__}.{a.name} is {listed}, not {quote(value)}")

    return check


def _optional_name(obj: Any, a: Any, value: Any) -> None:
    if value is not None and (type(value) is not str or not value):
        raise UsageError(
            f"{type(obj).__name__}.{a.name} takes a non-empty string or None, not {quote(value)}"
        )


def _items(value: object, field: str, of: str, *, ordered: bool = True) -> tuple[Any, ...]:
    # Tools and context go out in the request in this order: a set's order would change
    # with the hash seed, and with it the request's bytes (R-F2). Names may be a set.
    kinds = (list, tuple) if ordered else (list, tuple, set, frozenset)
    if not isinstance(value, kinds):
        what = "a list" if ordered else "a list or set"
        raise UsageError(f"Options.{field} takes {what} of {of}, not {type(value).__name__}")
    return tuple(value)


def _tools(value: object) -> tuple[Tool, ...]:
    out: list[Tool] = []
    for n, t in enumerate(_items(value, "tools", "Tool")):
        if not isinstance(t, Tool):
            raise UsageError(
                f"Options.tools item {n} is {a_type(t)}, not a Tool; "
                "declare tools with interlude.core.wire.Tool(name=..., description=...)"
            )
        if type(t.name) is not str or not t.name or type(t.description) is not str:
            raise UsageError(f"Options.tools item {n}: a Tool's name and description are text")
        where = f"Options.tools item {n} ({t.name!r})"
        parameters = intake.json_value(t.parameters, f"{where} parameters")
        given = intake.json_value(t.metadata, f"{where} metadata")
        metadata = as_object(given)
        if given is not None and metadata is None:
            raise UsageError(f"{where} metadata must be an object or None")
        out.append(attrs.evolve(t, parameters=parameters, metadata=metadata))
    names = [t.name for t in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"Options.tools declares {', '.join(map(repr, twice))} more than once")
    return tuple(out)


def _local_tools(value: object) -> frozenset[str]:
    names = _items(value, "local_tools", "tool names", ordered=False)
    if not all(type(n) is str and n for n in names):
        raise UsageError("Options.local_tools takes tool names (non-empty strings)")
    return frozenset(names)


def _context(value: object) -> tuple[Context, ...]:
    items = _items(value, "context", "Context")
    for n, c in enumerate(items):
        if not isinstance(c, Context) or type(c.description) is not str or type(c.value) is not str:
            raise UsageError(
                f"Options.context item {n} must be a Context(description=..., value=...) "
                "of two strings"
            )
    return items


def _forwarded_props(value: object) -> JSON:
    return intake.json_value(value, "Options.forwarded_props")


def _retry(obj: Any, a: Any, value: Any) -> None:
    if not isinstance(value, RetryPolicy):
        raise UsageError(f"Options.retry takes a RetryPolicy, not {type(value).__name__}")


def _optional_seed(obj: Any, a: Any, value: Any) -> None:
    if value is not None and type(value) is not int:
        raise UsageError(f"RetryPolicy.jitter_seed takes an integer or None, not {quote(value)}")


# -- the options -----------------------------------------------------------------------


def _mask64(x: int) -> int:
    return x & 0xFFFFFFFFFFFFFFFF


def _splitmix64(x: int) -> int:
    x = _mask64(x + 0x9E3779B97F4A7C15)
    x = _mask64((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9)
    x = _mask64((x ^ (x >> 27)) * 0x94D049BB133111EB)
    return x ^ (x >> 31)


MAX_WAIT = float(2**31)
"""The longest wait the reducer ever sets, in seconds (68 years): a timer's due time
stays finite however large the policy's delays or an endpoint's ``Retry-After``."""


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Retries of one logical run before its acknowledgement (R-F1).

    ``max_attempts`` counts the first attempt. The delay before attempt n+1 is
    ``min(max_delay, base_delay * multiplier**(n-1))`` scaled by a jitter
    factor in ``[1 - jitter, 1 + jitter]``, drawn from a deterministic source
    seeded with ``jitter_seed``: the same state always waits the same time.
    """

    max_attempts: int = attrs.field(default=3, validator=_number(1, integer=True))
    base_delay: float = attrs.field(default=0.5, validator=_number(0, finite=True))
    multiplier: float = attrs.field(default=2.0, validator=_number(1, finite=True))
    max_delay: float = attrs.field(default=10.0, validator=_number(0, finite=True))
    jitter: float = attrs.field(default=0.2, validator=_number(0, 1))
    jitter_seed: int | None = attrs.field(default=None, validator=_optional_seed)
    """None: derived from the resource's id prefix, which the async driver makes
    random per resource, so clients that fail together do not retry together."""
    max_retry_after: float = attrs.field(default=60.0, validator=_number(0))
    """The longest wait an endpoint's ``Retry-After`` may ask for. A shorter one is
    honoured (the back-off is at least that long); a longer one ends the run with the
    error, which carries ``retry_after``, rather than keep it loading that long."""

    def delay(self, failed_attempt: int, draw: int, id_prefix: str = "") -> float:
        """Seconds to wait after attempt ``failed_attempt`` failed; ``draw`` picks the jitter."""
        try:
            grown = self.base_delay * self.multiplier ** (failed_attempt - 1)
        except OverflowError:  # a float power past 1e308 raises rather than give inf
            grown = _grown_by_logs(self.base_delay, self.multiplier, failed_attempt - 1)
        base = min(self.max_delay, grown)
        seed = self.jitter_seed if self.jitter_seed is not None else zlib.crc32(id_prefix.encode())
        unit = _splitmix64(seed * 1_000_003 + draw) / 2**64  # in [0, 1)
        return min(base * (1.0 + self.jitter * (2.0 * unit - 1.0)), MAX_WAIT)


def _grown_by_logs(base: float, multiplier: float, times: int) -> float:
    """``base * multiplier**times`` when the power alone is past the float range."""
    if base == 0:
        return 0.0
    log = math.log(base) + times * math.log(multiplier)
    return math.exp(log) if log < _LOG_MAX else math.inf


_LOG_MAX = math.log(sys.float_info.max)


@attrs.frozen(kw_only=True)
class Options:
    """A resource's configuration. Changing it never changes a captured request (R-F2).

    Every field is checked when the Options is built: a wrong value raises
    :class:`~interlude.core.errors.UsageError` saying what the field takes. Lists
    become tuples and JSON values are frozen.
    """

    kind: ResourceKind = attrs.field(default="chat", validator=_one_of(get_args(ResourceKind)))
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    """Tools declared to the endpoint. Those named in ``local_tools`` run here."""
    local_tools: frozenset[str] = attrs.field(default=frozenset(), converter=_local_tools)
    context: tuple[Context, ...] = attrs.field(default=(), converter=_context)
    forwarded_props: JSON = attrs.field(default=None, converter=_forwarded_props)
    retry: RetryPolicy = attrs.field(default=RetryPolicy(), validator=_retry)
    expiry: ExpiryPolicy = attrs.field(default="block", validator=_one_of(get_args(ExpiryPolicy)))
    id_prefix: str | None = attrs.field(default=None, validator=_optional_name)
    """Prefix of the ids the runtime generates (threads, runs, messages, batches).

    None means ``"interlude"``. The async driver sets a random prefix per
    resource so that ids, batch ids included, never repeat across runtimes
    (R-I1); the fake driver keeps the fixed one so tests are repeatable."""
    max_tool_rounds: int = attrs.field(default=25, validator=_number(0, integer=True))
    """Follow-up runs one interaction may make for local tools before it fails."""
