"""The bounds on a hostile ``responseSchema``, and the error for one that cannot be checked.

:class:`SchemaLimits` and :class:`SchemaRejectedError` are public through
:mod:`interlude.core.answers`, which re-exports them. They are defined here, below
the modules that read the limits and raise the error (``regex_bounds``,
``schema_vetting``, ``schema_code``), so that none of those imports ``answers``
and no import cycle forms.
"""

from __future__ import annotations

import attrs

__all__ = ["SchemaLimits", "SchemaRejectedError"]


class SchemaRejectedError(ValueError):
    """The schema cannot be checked safely here; ``reason`` says why.

    Nothing is wrong with the answer: collect it without local checks (for
    example as free JSON) and let the server validate it on resume.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"responseSchema not usable for local answer checks: {reason}. Collect the answer "
            "without local checks (e.g. free JSON entry); the server validates it on resume"
        )
        self.reason = reason


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"SchemaLimits.{attribute.name} must be a positive int, not {value!r}")


@attrs.frozen(kw_only=True)
class SchemaLimits:
    """Bounds on the work a hostile schema can cause. Defaults fit form schemas."""

    max_bytes: int = attrs.field(default=256 * 1024, validator=_positive)
    """Size of the schema as compact UTF-8 JSON."""
    max_depth: int = attrs.field(default=32, validator=_positive)
    """Nesting of the schema, and of answers (deeper answers are a problem, not a crash)."""
    max_nodes: int = attrs.field(default=10_000, validator=_positive)
    """JSON values in the schema."""
    max_pattern_length: int = attrs.field(default=1000, validator=_positive)
    """Characters in one ``pattern``/``patternProperties`` regex (and ``format: regex`` answers)."""
    max_pattern_input_length: int = attrs.field(default=1000, validator=_positive)
    """Longest string matched against a schema regex; longer ones are a problem. Regexes are
    accepted only if their worst case on strings this long is small, so raising this rejects
    more regexes. Object keys and ``required`` names in the schema are bounded by it too."""
    max_format_length: int = attrs.field(default=4096, validator=_positive)
    """Longest string checked against a ``format`` without a natural bound (``uri``, ...);
    longer ones fail the format. Formats like ``email`` or ``ipv4`` use their RFC bounds."""
    max_expanded_values: int = attrs.field(default=100_000, validator=_positive)
    """Estimated JSON values in fastjsonschema's generated source: it repeats each subschema
    (with ``$ref``s expanded once) in every check it emits, and emits one function per
    ``$ref``. Parsing that source is the slow step of compiling (3-12 µs a value)."""
    max_check_work: int = attrs.field(default=2_000_000, validator=_positive)
    """Per check: the sum, over calls into ``$ref``'d subschemas, of the callee's statements
    times the answer values under the call. Stops ``$ref`` fan-out that re-checks one part of
    the answer exponentially often."""
