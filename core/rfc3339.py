"""RFC 3339 date-times, parsed strictly into epoch seconds (R-A6, R-G1).

An interrupt's ``expires_at`` decides whether answers may still be sent, so
a value that merely looks like a date is refused rather than guessed at: the
zone is required (a local time names no instant), the calendar is checked,
and nothing but the RFC 3339 ``date-time`` grammar is accepted (no ISO 8601
week dates, ordinals, basic format or missing seconds).

A leap second (``:60``) is accepted only where RFC 3339 §5.7 puts one: at
23:59:60 UTC on the last day of a month (shifted by the zone's offset, so
``15:59:60-08:00`` too). It is clamped to the last representable instant of
that minute (``:59.999999``), because POSIX time has no slot for it; an expiry
one leap second early is harmless.

Pure arithmetic: no clock is read.
"""

from __future__ import annotations

import re

__all__ = ["parse_rfc3339"]

_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)

_LIMIT = 64
"""Longer input is no date-time; refusing early keeps messages and work small."""


def _show(text: str) -> str:
    return repr(text) if len(text) <= _LIMIT else f"{text[:_LIMIT]!r}… ({len(text)} chars)"


def parse_rfc3339(text: str) -> float:
    """Epoch seconds (UTC) of an RFC 3339 ``date-time`` with a zone.

    Raises ``ValueError`` saying what is wrong: not a date-time, no zone,
    a date that does not exist, or a field out of range.
    """
    if type(text) is not str:
        raise ValueError(f"an RFC 3339 date-time must be a string, not {type(text).__name__}")
    m = _DATE_TIME.fullmatch(text) if len(text) <= _LIMIT else None
    if m is None:
        raise ValueError(f"{_show(text)} is not an RFC 3339 date-time with a zone{_hint(text)}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zulu, sign, off_h, off_m = m.groups()[6:]
    if not 1 <= month <= 12:
        raise ValueError(f"{_show(text)}: month {month} does not exist")
    if not 1 <= day <= _month_days(year, month):
        raise ValueError(f"{_show(text)}: {year:04d}-{month:02d} has no day {day}")
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError(
            f"{_show(text)}: time {hour:02d}:{minute:02d}:{second:02d} is out of range"
        )
    offset = 0
    if zulu is None:
        oh, om = int(off_h), int(off_m)
        if oh > 23 or om > 59:
            raise ValueError(f"{_show(text)}: zone offset {sign}{off_h}:{off_m} is out of range")
        offset = (oh * 60 + om) * 60 * (1 if sign == "+" else -1)
    if second == 60 and not _ends_a_month_in_utc(
        year, month, day, hour * 60 + minute - offset // 60
    ):
        raise ValueError(
            f"{_show(text)}: a leap second (:60) comes only at 23:59:60 UTC "
            "on the last day of a month"
        )
    frac = float(fraction) if fraction else 0.0
    if second == 60:  # a leap second: clamp into the minute's last instant
        second, frac = 59, 0.999999
    days = _days_from_civil(year, month, day)
    return days * 86400 + hour * 3600 + minute * 60 + second - offset + frac


def _hint(text: str) -> str:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text, re.ASCII):
        return " (a date alone names no instant)"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?", text, re.ASCII):
        return " (the zone, Z or ±hh:mm, is required)"
    return ""


def _ends_a_month_in_utc(year: int, month: int, day: int, utc_minute: int) -> bool:
    """Whether minute ``utc_minute`` of the local date (in UTC, so it may fall on the
    day before or after) is 23:59 UTC on the last day of a month."""
    carry, minute = divmod(utc_minute, 1440)
    return minute == 1439 and day + carry in (0, _month_days(year, month))


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468
