"""Result rows and plain-text tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Row", "Section", "fmt_rate", "fmt_seconds", "render"]


@dataclass(frozen=True)
class Row:
    """One line of a table. ``ok`` is None for a figure reported without a target."""

    metric: str
    measured: str
    target: str = ""
    ok: bool | None = None

    @property
    def verdict(self) -> str:
        return "" if self.ok is None else ("PASS" if self.ok else "FAIL")


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headers: tuple[str, str, str, str] = ("metric", "measured", "target", "result")

    def add(self, metric: str, measured: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append(Row(metric, measured, target, ok))

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.ok is False]


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f} ev/s"


def fmt_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def render(sections: Sequence[Section]) -> str:
    """Every section as a fixed-width table, with its notes under it."""
    out: list[str] = []
    for s in sections:
        headers = s.headers
        cells = [(r.metric, r.measured, r.target, r.verdict) for r in s.rows]
        widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(headers)]
        line = "+".join("-" * (w + 2) for w in widths)
        out.append(f"== {s.title} ==")
        out.append(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
        out.append(line)
        for c in cells:
            out.append(" | ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
        out.extend(f"  * {n}" for n in s.notes)
        out.append("")
    return "\n".join(out)
