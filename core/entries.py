"""Checking and copying the entries of a ``resume`` (R-B1, R-B2, R-B4).

Problems name interrupt ids and entry positions, never payload contents: a
payload may hold anything the user typed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ResumeProblem, a_type, listed, quote
from .json import FrozenDict, NotJSONError, as_object, freeze
from .state import Batch
from .wire.run_input import ABSENT, ResumeEntry, ResumeStatus

__all__ = ["check_entries"]

_KEYS = {"interrupt_id", "interruptId", "status", "payload", "metadata"}


def _fields(raw: object) -> dict[str, Any] | None:
    if isinstance(raw, ResumeEntry):
        fields: dict[str, Any] = {"interrupt_id": raw.interrupt_id, "status": raw.status}
        if raw.payload is not ABSENT:
            fields["payload"] = raw.payload
        if raw.metadata is not None:
            fields["metadata"] = raw.metadata
        return fields
    if isinstance(raw, Mapping):
        return dict(raw)
    return None


def check_entries(
    batch: Batch, raw_entries: object
) -> tuple[tuple[ResumeEntry, ...], tuple[ResumeProblem, ...], frozenset[str]]:
    """The entries, frozen and in the submitted order, every problem found, and the
    interrupts whose entry says ``cancelled``, well-formed or not: the expiry check,
    which runs before the entries' (R-B2), reads what the submission cancels (R-G2)."""
    if isinstance(raw_entries, str | bytes | Mapping) or not isinstance(raw_entries, Sequence):
        problem = ResumeProblem("entries must be a list with one entry per interrupt")
        return (), (problem,), frozenset()
    problems: list[ResumeProblem] = []
    entries: list[ResumeEntry] = []
    cancelled: set[str] = set()
    wanted = [i.id for i in batch.interrupts]
    known = set(wanted)  # a batch from the network may hold many: no list scans
    seen: set[str] = set()
    for pos, raw in enumerate(raw_entries):
        fields = _fields(raw)
        if fields is None:
            problems.append(
                ResumeProblem(f"entry {pos} is {a_type(raw)}, not a mapping", entry=pos)
            )
            continue
        given = fields.get("interrupt_id", fields.get("interruptId"))
        # A StrEnum as its text, as freeze() and the request read it.
        iid = str.__str__(given) if isinstance(given, str) else given
        # Placed at the interrupt the entry answers, when it names one of this batch.
        at = iid if type(iid) is str and iid in known else None
        unknown = sorted((k for k in fields if k not in _KEYS), key=repr)  # keys of any type
        if unknown:
            who = f"entry for {quote(iid)}" if at is not None else f"entry {pos}"
            problems.append(
                ResumeProblem(
                    f"{who} has unknown keys {quote(unknown)} (an entry takes interrupt_id, "
                    "status, payload and metadata)",
                    at,
                    pos,
                )
            )
        other = fields.get("interruptId", given)
        if "interrupt_id" in fields and other is not given and other != given:  # NaN is not NaN
            problems.append(
                ResumeProblem(
                    f"entry {pos} gives interrupt_id {quote(iid)} and interruptId "
                    f"{quote(other)}; give one",
                    at,
                    pos,
                )
            )
            continue
        if not isinstance(iid, str):
            problems.append(ResumeProblem(f"entry {pos} has no string interrupt_id", entry=pos))
            continue
        label = f"entry for {quote(iid)}"
        if iid in seen:
            problems.append(ResumeProblem(f"{label} is a duplicate", at, pos))
            continue
        seen.add(iid)
        if iid not in known:
            held = listed(wanted, show=quote)
            problems.append(
                ResumeProblem(
                    f"{label} names no interrupt of this batch (it holds {held})", entry=pos
                )
            )
            continue
        if fields.get("status") == "cancelled":
            cancelled.add(iid)
        checked = _entry(iid, pos, fields)
        if isinstance(checked, list):
            problems += checked
        else:
            entries.append(checked)
    problems += (ResumeProblem(f"no entry for {quote(m)}", m) for m in wanted if m not in seen)
    return tuple(entries), tuple(problems), frozenset(cancelled)


def _entry(iid: str, pos: int, fields: dict[str, Any]) -> ResumeEntry | list[ResumeProblem]:
    """The entry for interrupt ``iid`` of the batch, frozen, or everything wrong with it
    (status, payload and metadata are checked each on its own)."""
    problems: list[ResumeProblem] = []

    def problem(message: str) -> None:
        problems.append(ResumeProblem(f"entry for {quote(iid)} {message}", iid, pos))

    status = fields.get("status")
    if status not in ("resolved", "cancelled"):
        problem("has a status other than 'resolved' or 'cancelled'")
    payload: Any = ABSENT
    if "payload" in fields:
        if status == "cancelled":
            problem("is cancelled and must not carry a payload")
        else:
            try:
                payload = freeze(fields["payload"])
            except NotJSONError as exc:
                problem(f"has a payload that is not JSON ({exc.reason})")
    metadata: FrozenDict | None = None
    if fields.get("metadata") is not None:
        try:
            metadata = as_object(freeze(fields["metadata"]))
        except NotJSONError as exc:
            problem(f"has metadata that is not JSON ({exc.reason})")
        else:
            if metadata is None:
                problem("has metadata that is not a JSON object")
    if problems:
        return problems
    known: ResumeStatus = "resolved" if status == "resolved" else "cancelled"
    return ResumeEntry(interrupt_id=iid, status=known, payload=payload, metadata=metadata)
