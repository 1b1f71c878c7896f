"""Checking and copying the entries of a ``resume`` (R-B1, R-B2, R-B4).

Problems name interrupt ids and entry positions, never payload contents: a
payload may hold anything the user typed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .json import FrozenDict, NotJSONError, as_object, freeze
from .state import Batch
from .wire.run_input import ABSENT, ResumeEntry

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
) -> tuple[tuple[ResumeEntry, ...], tuple[str, ...]]:
    """The entries, frozen and in the submitted order, and every problem found."""
    if isinstance(raw_entries, str | bytes | Mapping) or not isinstance(raw_entries, Sequence):
        return (), ("entries must be a list with one entry per interrupt",)
    problems: list[str] = []
    entries: list[ResumeEntry] = []
    wanted = [i.id for i in batch.interrupts]
    known = set(wanted)  # a batch from the network may hold many: no list scans
    seen: set[str] = set()
    for pos, raw in enumerate(raw_entries):
        fields = _fields(raw)
        if fields is None:
            problems.append(f"entry {pos} is a {type(raw).__name__}, not a mapping")
            continue
        unknown = sorted((k for k in fields if k not in _KEYS), key=repr)  # keys of any type
        if unknown:
            problems.append(f"entry {pos} has unknown keys {unknown}")
        iid = fields.get("interrupt_id", fields.get("interruptId"))
        other = fields.get("interruptId", iid)
        if "interrupt_id" in fields and other is not iid and other != iid:  # NaN is not NaN
            problems.append(
                f"entry {pos} gives interrupt_id {iid!r} and interruptId {other!r}; give one"
            )
            continue
        if not isinstance(iid, str):
            problems.append(f"entry {pos} has no string interrupt_id")
            continue
        label = f"entry for {iid!r}"
        if iid in seen:
            problems.append(f"{label} is a duplicate")
            continue
        seen.add(iid)
        if iid not in known:
            problems.append(f"{label} names no interrupt of this batch")
            continue
        status = fields.get("status")
        if status not in ("resolved", "cancelled"):
            problems.append(f"{label} has a status other than 'resolved' or 'cancelled'")
            continue
        payload: Any = ABSENT
        if "payload" in fields:
            if status == "cancelled":
                problems.append(f"{label} is cancelled and must not carry a payload")
                continue
            try:
                payload = freeze(fields["payload"])
            except NotJSONError as exc:
                problems.append(f"{label} has a payload that is not JSON ({exc.reason})")
                continue
        metadata: FrozenDict | None = None
        if fields.get("metadata") is not None:
            try:
                frozen = freeze(fields["metadata"])
            except NotJSONError as exc:
                problems.append(f"{label} has metadata that is not JSON ({exc.reason})")
                continue
            metadata = as_object(frozen)
            if metadata is None:
                problems.append(f"{label} has metadata that is not a JSON object")
                continue
        entries.append(
            ResumeEntry(interrupt_id=iid, status=status, payload=payload, metadata=metadata)
        )
    missing = [i for i in wanted if i not in seen]
    if missing:
        problems.append(f"no entry for {', '.join(repr(m) for m in missing)}")
    return tuple(entries), tuple(problems)
