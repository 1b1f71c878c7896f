"""Length-bounded ``format`` checkers, for the answer checker in ``answers``.

Some of fastjsonschema's format regexes are quadratic, so every format it knows
gets a checker here that refuses strings over a length bound before matching;
``format: regex`` answers are parsed, never compiled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

from fastjsonschema.draft04 import CodeGeneratorDraft04

from .regex_bounds import sre
from .schema_limits import SchemaLimits

__all__ = ["format_checkers"]


# --- formats -----------------------------------------------------------------------------------

# Formats with a natural length bound; the others use SchemaLimits.max_format_length.
# fastjsonschema's email/hostname/uri-reference/json-pointer regexes are quadratic
# (a 20,000-character adversarial email takes ~3 s), so lengths are always bounded.
_FORMAT_LENGTHS: Final[Mapping[str, int]] = {
    "date": 10,
    "time": 64,
    "date-time": 64,
    "duration": 64,
    "email": 320,
    "idn-email": 320,
    "hostname": 253,
    "idn-hostname": 253,
    "ipv4": 15,
    "ipv6": 45,
    "uuid": 36,
}


def format_checkers(
    generator: type[CodeGeneratorDraft04], limits: SchemaLimits
) -> dict[str, Callable[[str], bool]]:
    """Length-bounded checkers for every format fastjsonschema knows for this draft."""
    regexes: Mapping[str, str] = getattr(generator, "FORMAT_REGEXS", {})
    checkers = {
        name: _format_checker(
            re.compile(regex), _FORMAT_LENGTHS.get(name, limits.max_format_length)
        )
        for name, regex in regexes.items()
    }
    if "idn-hostname" in regexes:
        checkers["idn-hostname"] = _idn_hostname_checker(re.compile(regexes["hostname"]))
    checkers["regex"] = _regex_format_checker(limits.max_pattern_length)
    return checkers


def _format_checker(regex: re.Pattern[str], longest: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return len(value) <= longest and regex.match(value) is not None

    return check


_IDN_DOTS: Final = re.compile("[.\u3002\uff0e\uff61]")
"""The label separators IDNA reads as a dot (RFC 3490 3.1)."""


def _idn_hostname_checker(hostname: re.Pattern[str]) -> Callable[[str], bool]:
    # fastjsonschema's own idn-hostname regex is ASCII-only and wants two or three
    # labels, so it refuses the names the format exists for ('bücher.example') and
    # common ones ('www.example.co.uk'). Check the name's IDNA (ASCII) form as a hostname.
    longest = _FORMAT_LENGTHS["idn-hostname"]

    def check(value: str) -> bool:
        if len(value) > longest:
            return False
        if any(label[:1] == "-" or label[-1:] == "-" for label in _IDN_DOTS.split(value)):
            return False  # Python's IDNA codec leaves hyphens to the caller (no STD3 rules)
        try:
            ascii_form = value.encode("idna").decode("ascii")
        except UnicodeError:  # an empty or too long label, or a character IDNA prohibits
            return False
        return len(ascii_form) <= longest and hostname.match(ascii_form) is not None

    return check


def _regex_format_checker(longest: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:  # parse, not compile: no work on the answer's regex, no cache
        if len(value) > longest:
            return False
        try:
            sre.parse(value, 0)
        except (re.error, OverflowError, ValueError, RecursionError):
            return False
        return True

    return check
