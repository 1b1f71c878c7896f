"""What the application configures: the resource kind, tools, retries, expiry."""

from __future__ import annotations

import zlib
from typing import Literal

import attrs

from .json import JSON
from .wire.run_input import Context, Tool

__all__ = ["ExpiryPolicy", "Options", "ResourceKind", "RetryPolicy"]

ResourceKind = Literal["chat", "completion"]

ExpiryPolicy = Literal["block", "cancel_expired"]
"""``block`` (the default, as the seed): an expired batch cannot be resumed.
``cancel_expired`` (AG-UI 1.0's opt-in): a submission that cancels every
expired interrupt is accepted (R-G2)."""


def _mask64(x: int) -> int:
    return x & 0xFFFFFFFFFFFFFFFF


def _splitmix64(x: int) -> int:
    x = _mask64(x + 0x9E3779B97F4A7C15)
    x = _mask64((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9)
    x = _mask64((x ^ (x >> 27)) * 0x94D049BB133111EB)
    return x ^ (x >> 31)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Retries of one logical run before its acknowledgement (R-F1).

    ``max_attempts`` counts the first attempt. The delay before attempt n+1 is
    ``min(max_delay, base_delay * multiplier**(n-1))`` scaled by a jitter
    factor in ``[1 - jitter, 1 + jitter]``, drawn from a deterministic source
    seeded with ``jitter_seed``: the same state always waits the same time.
    """

    max_attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    base_delay: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    max_delay: float = attrs.field(default=10.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(
        default=0.2, validator=attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(1))
    )
    jitter_seed: int | None = None
    """None: derived from the resource's id prefix, which the async driver makes
    random per resource, so clients that fail together do not retry together."""
    max_retry_after: float = attrs.field(default=60.0, validator=attrs.validators.ge(0))
    """The longest wait an endpoint's ``Retry-After`` may ask for. A shorter one is
    honoured (the back-off is at least that long); a longer one ends the run with the
    error, which carries ``retry_after``, rather than keep it loading that long."""

    def delay(self, failed_attempt: int, draw: int, id_prefix: str = "") -> float:
        """Seconds to wait after attempt ``failed_attempt`` failed; ``draw`` picks the jitter."""
        base = min(self.max_delay, self.base_delay * self.multiplier ** (failed_attempt - 1))
        seed = self.jitter_seed if self.jitter_seed is not None else zlib.crc32(id_prefix.encode())
        unit = _splitmix64(seed * 1_000_003 + draw) / 2**64  # in [0, 1)
        return base * (1.0 + self.jitter * (2.0 * unit - 1.0))


@attrs.frozen(kw_only=True)
class Options:
    """A resource's configuration. Changing it never changes a captured request (R-F2)."""

    kind: ResourceKind = "chat"
    tools: tuple[Tool, ...] = ()
    """Tools declared to the endpoint. Those named in ``local_tools`` run here."""
    local_tools: frozenset[str] = frozenset()
    context: tuple[Context, ...] = ()
    forwarded_props: JSON = None
    retry: RetryPolicy = RetryPolicy()
    expiry: ExpiryPolicy = "block"
    id_prefix: str | None = None
    """Prefix of the ids the runtime generates (threads, runs, messages, batches).

    None means ``"interlude"``. The async driver sets a random prefix per
    resource so that ids, batch ids included, never repeat across runtimes
    (R-I1); the fake driver keeps the fixed one so tests are repeatable."""
    max_tool_rounds: int = 25
    """Follow-up runs one interaction may make for local tools before it fails."""
