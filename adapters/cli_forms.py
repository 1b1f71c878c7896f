"""Form fields from an interrupt's ``responseSchema``, and parsing what a person types.

Pure: no terminal, no clock. The CLI asks one field at a time; this module
decides which fields a schema makes and turns typed text into JSON. Only the
syntax is checked here (a number is a number); constraints (bounds, lengths,
patterns, required keys) are left to the R-B3 answer checker, so the rules
shown to the person are the schema's own, with one implementation.

A schema this module does not fully understand becomes a free JSON field
rather than a form that could silently drop part of the answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from interlude.core.json import json_default, thaw

from .cli_console import one_line

__all__ = [
    "MAX_FORM_DEPTH",
    "ArrayField",
    "BoolField",
    "ChoiceField",
    "ConstField",
    "Field",
    "IncompleteJSON",
    "InputProblem",
    "JsonField",
    "NumberField",
    "ObjectField",
    "TextField",
    "build_form",
    "describe_problem",
    "format_duration",
    "format_json",
    "hint",
    "parse_bool",
    "parse_choice",
    "parse_json",
    "parse_list",
    "parse_number",
    "parse_scalar",
]

MAX_FORM_DEPTH: Final = 6
"""Deeper schemas are answered as JSON: a form that deep is no help to a person."""

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
        "format",
    }
)
# Keywords the answer checker enforces on values a form field can produce.
_CHECKED = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
    }
)
_KNOWN = _ANNOTATIONS | _CHECKED
_SCALARS = ("boolean", "string", "integer", "number")
_TRUE = frozenset({"y", "yes", "true", "t", "1"})
_FALSE = frozenset({"n", "no", "false", "f", "0"})


class InputProblem(ValueError):
    """What the person typed cannot be read as the field's kind; the message says why."""


class IncompleteJSON(InputProblem):
    """The JSON typed so far is a valid beginning: read another line and try again."""


@attrs.frozen(kw_only=True)
class Field:
    """One thing to ask. ``schema`` is the field's own (sub)schema, as plain JSON."""

    name: str
    """The path shown to the person: ``quantity``, ``shipping.street``, ``tags[]``."""
    schema: Mapping[str, Any]
    required: bool = True
    key: str = ""
    """The property name in the parent object ("" for the root and for array items)."""

    @property
    def title(self) -> str | None:
        """The schema's own words for the field: ``title``, then ``description``."""
        for key in ("title", "description"):
            value = self.schema.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

    @property
    def has_default(self) -> bool:
        return "default" in self.schema

    @property
    def default(self) -> Any:
        return self.schema.get("default")


@attrs.frozen(kw_only=True)
class BoolField(Field):
    pass


@attrs.frozen(kw_only=True)
class ChoiceField(Field):
    choices: tuple[Any, ...]


@attrs.frozen(kw_only=True)
class TextField(Field):
    pass


@attrs.frozen(kw_only=True)
class NumberField(Field):
    integer: bool


@attrs.frozen(kw_only=True)
class ConstField(Field):
    value: Any


@attrs.frozen(kw_only=True)
class ObjectField(Field):
    fields: tuple[Field, ...]


@attrs.frozen(kw_only=True)
class ArrayField(Field):
    item: Field

    @property
    def scalar_items(self) -> bool:
        """Items fit on one comma-separated line (otherwise they are asked one by one)."""
        return isinstance(self.item, BoolField | NumberField | ChoiceField | TextField)


@attrs.frozen(kw_only=True)
class JsonField(Field):
    reason: str
    """Why this is free JSON rather than a form (shown to the person)."""


# -- schema -> fields ------------------------------------------------------------------


def build_form(schema: Mapping[str, Any] | None, name: str = "answer") -> Field:
    """The field tree for an interrupt's ``responseSchema`` (frozen or plain JSON).

    ``None`` (no schema) is a free JSON answer. The root is always required.
    """
    if schema is None:
        return JsonField(name=name, schema={}, reason="the agent gave no response schema")
    plain = thaw(schema)
    if not isinstance(plain, dict):
        return JsonField(name=name, schema={}, reason="the response schema is not an object")
    return _field(plain, name, required=True, depth=0)


def _field(
    schema: dict[str, Any], name: str, *, required: bool, depth: int, key: str = ""
) -> Field:
    common: dict[str, Any] = {"name": name, "schema": schema, "required": required, "key": key}
    rich = _too_rich(schema, depth)
    if rich is not None:
        return JsonField(**common, reason=rich)
    if "const" in schema:
        return ConstField(**common, value=schema["const"])
    if "enum" in schema:
        return ChoiceField(**common, choices=tuple(schema["enum"]))
    kind = schema.get("type")
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    if kind == "boolean":
        return BoolField(**common)
    if kind == "string":
        return TextField(**common)
    if kind in ("integer", "number"):
        return NumberField(**common, integer=kind == "integer")
    if kind == "null":
        return ConstField(**common, value=None)
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return JsonField(**common, reason="it is a free-form object")
        needed = set(schema.get("required", ()))
        prefix = "" if depth == 0 else f"{name}."
        fields = tuple(
            # The name is shown, the key sent: a line break in a key must not start a line.
            _field(sub, f"{prefix}{one_line(k, 100)}", required=k in needed, depth=depth + 1, key=k)
            for k, sub in props.items()
        )
        return ObjectField(**common, fields=fields)
    if kind == "array":
        item = _field(schema["items"], f"{name}[]", required=True, depth=depth + 1)
        return ArrayField(**common, item=item)
    return JsonField(**common, reason="it names no type")


def _too_rich(schema: dict[str, Any], depth: int) -> str | None:
    """Why a form cannot represent ``schema`` faithfully, or None if it can."""
    if depth > MAX_FORM_DEPTH:
        return f"it nests deeper than {MAX_FORM_DEPTH} levels"
    unknown = sorted(k for k in schema if k not in _KNOWN)
    if unknown:
        return f"it uses {', '.join(unknown[:3])}"
    kind = schema.get("type")
    if kind is not None and kind not in (*_SCALARS, "object", "array", "null"):
        return "its type is a list or unknown" if isinstance(kind, list) else "its type is unknown"
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        return "its enum is empty or not a list"
    if not isinstance(schema.get("additionalProperties", False), bool):
        return "its additionalProperties is a schema"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its required is not a list of property names"
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        return "its properties are not schemas"
    if kind == "array" and not isinstance(schema.get("items"), dict):
        return "its items are not one schema"
    for key in ("exclusiveMinimum", "exclusiveMaximum"):  # draft-04 booleans
        if isinstance(schema.get(key), bool):
            return f"its {key} is a boolean"
    return None


# -- describing fields -------------------------------------------------------------------


def hint(field: Field) -> str:
    """A short reminder of what to type, from the schema's own bounds."""
    parts: list[str] = []
    s = field.schema
    if isinstance(field, BoolField):
        parts.append("y/n")
    elif isinstance(field, NumberField):
        parts.append("whole number" if field.integer else "number")
        bounds = _bounds(s)
        if bounds:
            parts.append(bounds)
    elif isinstance(field, TextField):
        parts.append("text")
        if isinstance(s.get("format"), str):
            parts.append(s["format"])
        if "maxLength" in s:
            parts.append(f"at most {s['maxLength']} characters")
    elif isinstance(field, ChoiceField):
        parts.append(f"1-{len(field.choices)}")
    elif isinstance(field, ArrayField):
        parts.append(f"{hint(field.item)}, comma-separated" if field.scalar_items else "list")
    elif isinstance(field, JsonField):
        parts.append("JSON")
    if field.has_default:
        parts.append(f"Enter for {format_json(field.default, 40)}")
    elif not field.required:
        parts.append("Enter to skip")
    return ", ".join(parts)


def _bounds(s: Mapping[str, Any]) -> str:
    low = s.get("minimum", s.get("exclusiveMinimum"))
    high = s.get("maximum", s.get("exclusiveMaximum"))
    low_op = ">" if "exclusiveMinimum" in s and "minimum" not in s else ">="
    high_op = "<" if "exclusiveMaximum" in s and "maximum" not in s else "<="
    if _is_number(low) and _is_number(high) and low_op == ">=" and high_op == "<=":
        return f"{low} to {high}"
    out = []
    if _is_number(low):
        out.append(f"{low_op} {low}")
    if _is_number(high):
        out.append(f"{high_op} {high}")
    return " and ".join(out)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_json(value: object) -> Any:
    """Frozen JSON's own types as JSON (json_default), anything else as its str()."""
    try:
        return json_default(value)
    except TypeError:
        return str(value)


def format_json(value: Any, limit: int = 200) -> str:
    """Compact JSON for display, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=_as_json)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_duration(seconds: float) -> str:
    """``2h 5m``, ``4m 59s``, ``12s``: how long until an interrupt expires."""
    s = max(0, int(seconds + 0.5))
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def describe_problem(problem: str, name: str) -> str:
    """A checker problem with its ``data`` placeholder replaced by the field's name."""
    if problem == "data" or problem.startswith(("data ", "data.", "data[")):
        rest = problem[4:]
        if name in ("", "answer"):
            return ("the answer" + rest) if rest.startswith(" ") else rest.lstrip(".")
        return name + rest
    return problem


# -- parsing typed text ------------------------------------------------------------------


def parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise InputProblem("answer y or n")


def parse_number(text: str, *, integer: bool) -> int | float:
    raw = text.strip().replace("_", "")
    if integer:
        try:
            return int(raw)
        except ValueError:
            raise InputProblem("type a whole number, like 3") from None
    try:
        value = float(raw)
    except ValueError:
        raise InputProblem("type a number, like 2.5") from None
    if not math.isfinite(value):
        raise InputProblem("type a finite number")
    return int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() else value


def parse_choice(text: str, choices: Sequence[Any]) -> Any:
    """A choice by its number (1-based) or by its value, as shown."""
    raw = text.strip()
    # ASCII digits only: "²" is a digit to isdigit() that int() refuses.
    if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= len(choices):
        return choices[int(raw) - 1]
    for choice in choices:
        if raw == _shown(choice) or raw == format_json(choice, 10_000):
            return choice
    raise InputProblem(f"choose a number from 1 to {len(choices)}")


def _shown(choice: Any) -> str:
    return choice if isinstance(choice, str) else format_json(choice, 10_000)


def parse_json(text: str) -> Any:
    """JSON typed by a person; :class:`IncompleteJSON` when more lines could complete it."""
    raw = text.strip()
    if not raw:
        raise InputProblem('type a JSON value, like {"approved": true}')
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(raw) and raw[0] in '[{"':
            raise IncompleteJSON("the JSON is not finished") from None
        raise InputProblem(f"that is not JSON ({exc.msg} at character {exc.pos + 1})") from None
    except ValueError as exc:
        raise InputProblem(str(exc)) from None
    except RecursionError:
        raise InputProblem("that JSON is nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_scalar(field: Field, text: str) -> Any:
    """The value of a one-line field; raises :class:`InputProblem` naming what to type."""
    if isinstance(field, BoolField):
        return parse_bool(text)
    if isinstance(field, NumberField):
        return parse_number(text, integer=field.integer)
    if isinstance(field, ChoiceField):
        return parse_choice(text, field.choices)
    if isinstance(field, TextField):
        return text
    if isinstance(field, JsonField):
        return parse_json(text)
    raise TypeError(f"{type(field).__name__} is not a one-line field")


def parse_list(text: str, item: Field) -> list[Any]:
    """Comma-separated items (empty: no items), or a JSON array when it starts with ``[``."""
    raw = text.strip()
    if raw.startswith("["):
        value: list[Any] = parse_json(raw)  # text starting with "[" parses only to a list
        return value
    if not raw:
        return []
    items = []
    for n, part in enumerate(raw.split(","), 1):
        try:
            items.append(parse_scalar(item, part.strip()))
        except InputProblem as exc:
            raise InputProblem(f"item {n}: {exc}") from None
    return items
