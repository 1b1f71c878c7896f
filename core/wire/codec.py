"""The camelCase wire form of AG-UI 1.0: strict decoding, deterministic encoding.

One cattrs converter holds a generated structure and unstructure function
per wire class (cattrs compiles them to straight-line code, which is what
keeps decoding a frame near the cost of ``json.loads``). Every field gets a
hook made for it: the hook knows the field's wire name, checks the type
exactly (a ``str`` must be a ``str``; a ``bool`` is not a number), freezes
JSON values once (as :func:`~interlude.core.json.freeze_parsed` would, with
fewer copies), and reports where a problem is. Unknown keys are ignored;
unknown event, outcome and message types are kept whole rather than refused
(R-J1, R-J5).

A ``null`` where an optional field is allowed reads as absent, as the
reference Python SDK does; a ``null`` where a value is required is an error.

Decoding never lets an exception other than :class:`WireError` escape, so
the reducer can turn any bad frame into a ``ProtocolError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar, Union, cast

import attrs
import cattrs
from cattrs.fns import identity
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..errors import article, listed
from ..json import JSON, MAX_INT_DIGITS, FrozenDict, frozen_unchecked, json_default
from ..pmap import PMap
from ..pvec import PVec
from ..rfc3339 import parse_rfc3339
from . import events as ev
from .messages import (
    ActivityMessage,
    AssistantMessage,
    Content,
    DeveloperMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .run_input import Absent, Context, Interrupt, ResumeEntry, RunAgentInput, Tool

__all__ = [
    "MAX_DEPTH",
    "PART_FIELDS",
    "LeftOut",
    "WireError",
    "content_parts",
    "converter",
    "decode_event",
    "decode_frame",
    "decode_message",
    "decode_run_input",
    "dumps",
    "encode_event",
    "encode_json",
    "encode_message",
    "encode_request",
    "encode_run_input",
    "left_out_note",
    "read_frame",
    "wire_key",
]

MAX_DEPTH = 256
"""The deepest nesting a frame may have. Deeper JSON is refused before it can
exhaust the interpreter's stack in any recursive walk that follows."""

_T = TypeVar("_T")
_Hook = Callable[[Any, Any], Any]
_Writer = Callable[[Any], dict[str, Any]]


class WireError(ValueError):
    """Data that is not valid AG-UI 1.0. The message names the event type, the
    field and what was wrong, and never quotes more than a short excerpt."""

    def __init__(self, reason: str, *, event_type: str | None = None, path: str = "") -> None:
        where = f"at {path}: " if path else ""
        head = f"malformed {event_type} event: " if event_type else ""
        super().__init__(f"{head}{where}{reason}")
        self.reason = reason
        self.event_type = event_type
        self.path = path


class _Bad(Exception):
    """Internal: a problem at ``path`` (wire keys and indexes), filled in on the way up."""

    def __init__(self, reason: str, *path: str | int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def under(self, *prefix: str | int) -> _Bad:
        return _Bad(self.reason, *prefix, *self.path)


def _format_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _short(text: str, limit: int = 60, show: Callable[[str], str] = repr) -> str:
    """``text`` as ``show`` gives it (quoted), or its first ``limit`` characters and its length."""
    return show(text) if len(text) <= limit else f"{show(text[:limit])}… ({len(text)} chars)"


def _describe(v: object) -> str:
    """What a wire value is, briefly (never the whole of a large value)."""
    if v is None:
        return "null"
    if v is True or v is False:
        return f"the boolean {'true' if v else 'false'}"
    t = type(v)
    if t is str:
        return f"the string {_short(v)}"  # type: ignore[arg-type]
    if t is int and v.bit_length() > 256:  # type: ignore[attr-defined]
        return "a number of more than 77 digits"
    if t is int or t is float:
        # Bare: quoted, it would read as the string the check refused.
        return f"the number {_short(repr(v), 30, str)}"
    if t is list:
        n = len(v)  # type: ignore[arg-type]
        return f"an array of {n} item{'' if n == 1 else 's'}"
    if t is dict:
        return "an object"
    return f"a {t.__name__}"


def wire_key(name: str) -> str:
    """The wire's camelCase key for a field's snake_case name (``tool_call_id``:
    ``toolCallId``), as the codec renames every field."""
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


# -- freezing -------------------------------------------------------------------------
#
# The same result as freeze_parsed, about a third faster: one copy per
# container, and no call for a scalar.

_dict_set = dict.__setitem__
_dict_init = dict.__init__
_new = dict.__new__


def _freeze_obj(v: dict[str, Any]) -> FrozenDict:
    fd = _new(FrozenDict)  # not FrozenDict(v), which would check and freeze it again
    _dict_init(fd, v)
    for k, x in v.items():
        t = type(x)
        if t is dict:
            _dict_set(fd, k, _freeze_obj(x))
        elif t is list:
            _dict_set(fd, k, _freeze_arr(x))
    return fd


def _freeze_arr(v: list[Any]) -> tuple[JSON, ...]:
    out = v.copy()
    for i, x in enumerate(v):
        t = type(x)
        if t is dict:
            out[i] = _freeze_obj(x)
        elif t is list:
            out[i] = _freeze_arr(x)
    return tuple(out)


# -- field hooks ---------------------------------------------------------------------
#
# Each factory takes the field's wire name and returns ``hook(value, type)``,
# the signature cattrs' generated code calls. Hooks for optional fields run
# only when the key is present (cattrs checks ``in``).


def _str(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> str:
        if type(v) is str:
            return v
        raise _Bad(f"expected a string, got {_describe(v)}", key)

    return hook


def _opt_str(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> str | None:
        if type(v) is str or v is None:
            return v
        raise _Bad(f"expected a string, got {_describe(v)}", key)

    return hook


def _opt_bool(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> bool | None:
        if v is None or v is True or v is False:
            return v
        raise _Bad(f"expected a boolean, got {_describe(v)}", key)

    return hook


SAFE_INTEGER = 2**53 - 1
"""AG-UI 1.0 bounds its integers (timestamp) to the range JSON numbers survive a round
trip in."""


def _opt_number(key: str) -> _Hook:
    """An event's ``timestamp``: AG-UI 1.0 (Schema: BaseEvent) makes it an integer within
    SAFE_INTEGER of zero, "Deliberately not a float". A number JSON Schema counts as an
    integer (``5.0``) is one; a fraction or a number past the bound is malformed."""

    def hook(v: Any, _: Any) -> int | float | None:
        if v is None or _is_integer(v, -SAFE_INTEGER):
            return v  # type: ignore[no-any-return]
        t = type(v)
        if t is int or (t is float and v.is_integer()):
            raise _Bad(f"expected an integer within 2**53 - 1 of zero, got {_describe(v)}", key)
        what = "an integer" if t is float else "a number"
        raise _Bad(f"expected {what}, got {_describe(v)}", key)

    return hook


def _is_integer(v: Any, least: int) -> bool:
    """Whether ``v`` is an integer, as JSON Schema counts one (``5.0`` is), from ``least``
    to SAFE_INTEGER: AG-UI 1.0's integers (a timestamp, a token count)."""
    t = type(v)
    return (t is int or (t is float and v.is_integer())) and least <= v <= SAFE_INTEGER


def _json(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> JSON:
        t = type(v)
        if t is dict:
            return _freeze_obj(v)
        if t is list:
            return _freeze_arr(v)
        return v  # type: ignore[no-any-return]

    return hook


def _object(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> FrozenDict:
        if type(v) is dict:
            return _freeze_obj(v)
        raise _Bad(f"expected an object, got {_describe(v)}", key)

    return hook


def _opt_object(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> FrozenDict | None:
        if type(v) is dict:
            return _freeze_obj(v)
        if v is None:
            return None
        raise _Bad(f"expected an object, got {_describe(v)}", key)

    return hook


def _objects(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> tuple[FrozenDict, ...]:
        if type(v) is not list:
            raise _Bad(f"expected an array of objects, got {_describe(v)}", key)
        out = []
        for i, item in enumerate(v):
            if type(item) is not dict:
                raise _Bad(f"expected an object, got {_describe(item)}", key, i)
            out.append(_freeze_obj(item))
        return tuple(out)

    return hook


def _opt(make: Callable[[str], _Hook]) -> Callable[[str], _Hook]:
    """The hook of ``make``, with ``null`` read as absent."""

    def factory(key: str) -> _Hook:
        inner = make(key)

        def hook(v: Any, t: Any) -> Any:
            return None if v is None else inner(v, t)

        return hook

    return factory


def _or_empty(make: Callable[[str], _Hook]) -> Callable[[str], _Hook]:
    """The hook of ``make``, with ``null`` read as an empty array ("absent means none")."""

    def factory(key: str) -> _Hook:
        inner = make(key)

        def hook(v: Any, t: Any) -> Any:
            return () if v is None else inner(v, t)

        return hook

    return factory


def _opt_strs(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> tuple[str, ...] | None:
        if v is None:
            return None
        if type(v) is not list:
            raise _Bad(f"expected an array of strings, got {_describe(v)}", key)
        for i, item in enumerate(v):
            if type(item) is not str:
                raise _Bad(f"expected a string, got {_describe(item)}", key, i)
        return tuple(v)

    return hook


def _content(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> Content:
        if type(v) is str:
            return v
        if type(v) is not list:
            raise _Bad(f"expected a string or an array of content parts, got {_describe(v)}", key)
        try:
            return _parts(v, strict=False)
        except _Bad as exc:
            raise exc.under(key) from None

    return hook


# -- content parts -------------------------------------------------------------------
#
# AG-UI 1.0 (Schema: ContentPart, PartSource) closes each part and source and
# discriminates them by type. Read (Processing Model): a member it does not define
# is stripped; a part of a type it does not define is dropped from its list, and so
# is a media part whose source is of such a type (a required position: the value
# holding it goes); a defined member with a wrong value is malformed, and fatal.
# Parts stay frozen JSON (FrozenDicts), keys as on the wire.

_STR = "a string"
_SOURCE = "a source"
_ANY = "any JSON value"
_MEDIA = {"id": (False, _STR), "source": (True, _SOURCE), "metadata": (False, _ANY)}
PART_FIELDS: dict[str, dict[str, tuple[bool, str]]] = {
    "text": {"id": (False, _STR), "text": (True, _STR), "metadata": (False, _ANY)},
    "image": _MEDIA,
    "audio": _MEDIA,
    "video": _MEDIA,
    "document": _MEDIA,
}
"""The content part types of AG-UI 1.0, each with its members: (required, what)."""
_SOURCE_FIELDS: dict[str, dict[str, tuple[bool, str]]] = {
    "data": {"value": (True, _STR), "mimeType": (True, _STR)},
    "url": {"value": (True, _STR), "mimeType": (False, _STR)},
    "file": {"value": (True, _STR), "provider": (False, _STR), "mimeType": (False, _STR)},
}


def _parts(items: Sequence[object], *, strict: bool) -> tuple[FrozenDict, ...]:
    """Content parts, frozen, with what AG-UI 1.0 does not define left out; ``strict``:
    refused instead (an application's own parts)."""
    out = []
    for i, item in enumerate(items):
        try:
            part = _closed(item, PART_FIELDS, "content part", strict)
        except _Bad as exc:
            raise exc.under(i) from None
        if part is not None:
            out.append(_freeze_obj(part))
    return tuple(out)


def _tag(v: Any, key: str, what: str) -> str:
    """The string under ``key`` naming which kind of ``what`` the object ``v`` is (a
    part's or an outcome's type, a message's role): the first thing read of a union."""
    if not isinstance(v, dict):  # a FrozenDict too (an application's own parts)
        raise _Bad(f"expected {what} (an object), got {_describe(v)}")
    kind = v.get(key)
    if type(kind) is not str:
        raise _Bad(f"expected a string, got {_describe(kind)}", key)
    return kind


def _closed(
    v: Any, shapes: dict[str, dict[str, tuple[bool, str]]], what: str, strict: bool
) -> dict[str, Any] | None:
    kind = _tag(v, "type", article(what))
    fields = shapes.get(kind)
    if fields is None:
        if strict:
            known = ", ".join(repr(k) for k in shapes)
            raise _Bad(f"AG-UI 1.0 defines no {what} of type {_short(kind)} ({known})", "type")
        return None
    if strict:
        for k in v:
            if k != "type" and k not in fields:
                raise _Bad(f"AG-UI 1.0 defines no such member of {article(kind)} {what}", k)
    out: dict[str, Any] = {"type": kind}
    for name, (required, expected) in fields.items():
        value = v.get(name)
        if value is None:  # absent, or null: what a JSON writer of None sends
            if required:
                raise _Bad(f"{article(kind)} {what} needs {name!r}")
            continue
        if expected is _STR and type(value) is not str:
            raise _Bad(f"expected a string, got {_describe(value)}", name)
        if expected is _SOURCE:
            try:
                value = _closed(value, _SOURCE_FIELDS, "source", strict)
            except _Bad as exc:
                raise exc.under(name) from None
            if value is None:
                return None
        out[name] = value
    return out


def content_parts(parts: Sequence[object], *, strict: bool = False) -> tuple[FrozenDict, ...]:
    """``parts`` as AG-UI 1.0 content parts, frozen (see the comment above): what it
    does not define left out, or with ``strict`` refused; ``WireError`` if malformed."""
    try:
        return _parts(parts, strict=strict)
    except _Bad as exc:
        index, *within = exc.path
        at = f" at {_format_path(tuple(within))}" if within else ""
        raise WireError(f"content part {index}{at}: {exc.reason}") from None


def _expires_at(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> str | None:
        if v is None:
            return None
        if type(v) is not str:
            raise _Bad(f"expected an RFC 3339 date-time string, got {_describe(v)}", key)
        try:
            parse_rfc3339(v)
        except ValueError as exc:
            raise _Bad(str(exc), key) from None
        return v

    return hook


ROLES = frozenset({"developer", "system", "assistant", "user", "tool", "activity", "reasoning"})
"""Every role AG-UI 1.0 defines (Schema: Role)."""


def _opt_role(key: str) -> _Hook:
    """An optional role of an event: a role AG-UI 1.0 does not define is stripped, as
    the Processing Model requires of an unrecognised value of a closed set in an
    optional position (read as absent); one it defines goes on, to be judged in context."""

    def hook(v: Any, _: Any) -> str | None:
        if v is None:
            return None
        if type(v) is not str:
            raise _Bad(f"expected a string, got {_describe(v)}", key)
        return v if v in ROLES else None

    return hook


def _walk_role(v: Any, path: _Path, out: _LeftOut) -> None:
    if type(v) is str and v not in ROLES:
        out.append(LeftOut(path, f"value {_short(v, 40)}"))


_USAGE_FIELDS = {
    "provider": _STR,
    "model": _STR,
    **dict.fromkeys(
        (
            "inputTokens",
            "outputTokens",
            "totalTokens",
            "reasoningTokens",
            "cachedInputTokens",
            "cacheWriteInputTokens",
        ),
        "a count",
    ),
}
"""AG-UI 1.0 (Schema: TokenUsage), a closed object of optional members."""


def _usage(key: str) -> _Hook:
    """``usage``: token usage entries, what AG-UI 1.0 does not define left out of each,
    a member of the wrong kind (a count that is not an integer from 0 to 2**53 - 1)
    malformed."""

    def hook(v: Any, _: Any) -> tuple[FrozenDict, ...] | None:
        if v is None:
            return None
        if type(v) is not list:
            raise _Bad(f"expected an array of token usage entries, got {_describe(v)}", key)
        out = []
        for i, item in enumerate(v):
            if type(item) is not dict:
                raise _Bad(
                    f"expected a token usage entry (an object), got {_describe(item)}", key, i
                )
            entry = {}
            for name, what in _USAGE_FIELDS.items():
                x = item.get(name)
                if x is None:
                    continue
                if what is _STR and type(x) is not str:
                    raise _Bad(f"expected a string, got {_describe(x)}", key, i, name)
                if what is not _STR and not _is_integer(x, 0):
                    raise _Bad(
                        f"expected a count (an integer from 0 to 2**53 - 1), got {_describe(x)}",
                        key,
                        i,
                        name,
                    )
                entry[name] = x
            out.append(frozen_unchecked(entry))
        return tuple(out)

    return hook


def _walk_usage(v: Any, path: _Path, out: _LeftOut) -> None:
    for n, entry in enumerate(v):
        out.extend(
            LeftOut((*path, n), f"member {_short(k, 40)}") for k in entry if k not in _USAGE_FIELDS
        )


_SUBAGENT_OUTCOMES: dict[str, tuple[str, ...]] = {"success": (), "suspended": ("interruptIds",)}
"""AG-UI 1.0 (Schema: SubagentFinishedOutcome): each type and its members."""


def _subagent_outcome(key: str) -> _Hook:
    """SUBAGENT_FINISHED's ``outcome``, with what AG-UI 1.0 does not define left out: a
    member, or the whole outcome if of a type it does not define (an optional field:
    absent means success). A known member of the wrong kind is malformed."""
    strs = _opt_strs("interruptIds")

    def hook(v: Any, _: Any) -> FrozenDict | None:
        if v is None:
            return None
        kind = _tag(v, "type", "an outcome")  # a _Bad here is under the key, below
        members = _SUBAGENT_OUTCOMES.get(kind)
        if members is None:
            return None
        out: dict[str, Any] = {"type": kind}
        for name in members:
            if v.get(name) is not None:
                out[name] = strs(v[name], None)
        return _freeze_obj(out)

    def guarded(v: Any, t: Any) -> FrozenDict | None:
        try:
            return hook(v, t)
        except _Bad as exc:
            raise exc.under(key) from None

    return guarded


def _walk_subagent_outcome(v: Any, path: _Path, out: _LeftOut) -> None:
    members = _SUBAGENT_OUTCOMES.get(v["type"])
    if members is None:
        out.append(LeftOut(path, f"an outcome of type {_short(v['type'], 40)}"))
        return
    out.extend(
        LeftOut(path, f"member {_short(k, 40)}") for k in v if k != "type" and k not in members
    )


def _status(key: str) -> _Hook:
    def hook(v: Any, _: Any) -> str:
        if v == "resolved" or v == "cancelled":
            return v  # type: ignore[no-any-return]
        raise _Bad(f"expected 'resolved' or 'cancelled', got {_describe(v)}", key)

    return hook


def _nested(decode: Callable[[Any], Any]) -> Callable[[str], _Hook]:
    """Hooks for a field holding one object that ``decode`` reads."""

    def factory(key: str) -> _Hook:
        def hook(v: Any, _: Any) -> Any:
            try:
                return decode(v)
            except _Bad as exc:
                raise exc.under(key) from None

        return hook

    return factory


def _nested_tuple(decode: Callable[[Any], Any], what: str) -> Callable[[str], _Hook]:
    """Hooks for a field holding an array of objects that ``decode`` reads."""

    def factory(key: str) -> _Hook:
        def hook(v: Any, _: Any) -> tuple[Any, ...]:
            if type(v) is not list:
                raise _Bad(f"expected an array of {what}, got {_describe(v)}", key)
            out = []
            for i, item in enumerate(v):
                try:
                    out.append(decode(item))
                except _Bad as exc:
                    raise exc.under(key, i) from None
            return tuple(out)

        return hook

    return factory


def _known_tuple(decode: Callable[[Any], Any], what: str) -> Callable[[str], _Hook]:
    """Hooks for an array of objects that ``decode`` reads, or answers None for one of a
    kind AG-UI 1.0 does not define: that one is dropped, and the list survives
    (Processing Model)."""

    def factory(key: str) -> _Hook:
        read = _nested_tuple(decode, what)(key)

        def hook(v: Any, t: Any) -> tuple[Any, ...]:
            out: tuple[Any, ...] = read(v, t)
            return out if None not in out else tuple(x for x in out if x is not None)

        return hook

    return factory


def _interrupts(key: str) -> _Hook:
    """R-A6: a non-empty array of interrupts with distinct string ids."""
    inner = _nested_tuple(_decode_interrupt, "interrupts")(key)

    def hook(v: Any, t: Any) -> tuple[Interrupt, ...]:
        if type(v) is list and not v:
            raise _Bad("an interrupt outcome must list at least one interrupt", key)
        interrupts: tuple[Interrupt, ...] = inner(v, t)
        seen: dict[str, int] = {}
        for i, it in enumerate(interrupts):
            if it.id in seen:
                again = f"duplicate interrupt id {_short(it.id)} (also at [{seen[it.id]}])"
                raise _Bad(again, key, i)
            seen[it.id] = i
        return interrupts

    return hook


# -- the converter ---------------------------------------------------------------------

converter = cattrs.Converter(detailed_validation=False, forbid_extra_keys=False)
"""The one converter for the wire form; every wire class has its hooks registered here."""


def _object_reader(name: str, fn: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """``fn`` guarded: the value must be an object; a missing key becomes a _Bad."""

    def read(v: Any) -> _T:
        if type(v) is not dict:
            raise _Bad(f"expected {name} (an object), got {_describe(v)}")
        try:
            return fn(v)
        except KeyError as exc:
            raise _Bad(f"missing required field {_short(str(exc.args[0]))}") from None

    return read


_ALIAS_NAMES = {"PVec": PVec, "PMap": PMap}
"""Names the JSON alias uses that the modules declaring JSON fields need not import."""


def _probe_types() -> dict[str, Any]:
    """The resolved forms of the aliases fields are declared with (for the hook table)."""

    @attrs.frozen
    class Probe:
        json: JSON
        content: Content
        payload: Union[JSON, Absent]  # noqa: UP007 (JSON is a string at run time)
        messages: tuple[Message, ...]
        message_sequence: Sequence[Message]
        outcome: ev.Outcome | None

    attrs.resolve_types(Probe, globals(), {**locals(), **_ALIAS_NAMES})
    return {a.name: a.type for a in attrs.fields(Probe)}


def _build() -> dict[type, Callable[[Any], Any]]:
    probe = _PROBE
    readers: dict[type, Callable[[Any], Any]] = {}

    def reader(cls: type) -> Callable[[Any], Any]:
        return lambda v: readers[cls](v)

    table: dict[Any, Callable[[str], _Hook]] = {
        str: _str,
        str | None: _opt_str,
        bool | None: _opt_bool,
        int | float | None: _opt_number,
        probe["json"]: _json,
        probe["payload"]: _json,
        probe["content"]: _content,
        FrozenDict: _object,
        FrozenDict | None: _opt_object,
        tuple[FrozenDict, ...]: _objects,
        tuple[FrozenDict, ...] | None: _opt(_objects),
        tuple[str, ...] | None: _opt_strs,
        FunctionCall: _nested(reader(FunctionCall)),
        tuple[ToolCall, ...] | None: _opt(_tool_calls(reader(ToolCall))),
        probe["messages"]: _messages,
        probe["message_sequence"]: _messages,
        probe["outcome"]: _opt(_nested(_decode_outcome)),
        RunAgentInput | None: _opt(_nested(reader(RunAgentInput))),
        tuple[Tool, ...]: _or_empty(_nested_tuple(reader(Tool), "tools")),
        tuple[Context, ...]: _or_empty(_nested_tuple(reader(Context), "context entries")),
        tuple[ResumeEntry, ...] | None: _opt(_nested_tuple(reader(ResumeEntry), "entries")),
        tuple[Interrupt, ...]: _interrupts,
    }
    # What holds members of its own to check for what AG-UI 1.0 does not define.
    inner: dict[Any, _Walk] = {
        FunctionCall: _walk(FunctionCall),
        tuple[ToolCall, ...] | None: _each(_walk_tool_call),
        probe["messages"]: _each(_walk_message),
        probe["message_sequence"]: _each(_walk_message),
        probe["outcome"]: _walk_outcome,
        RunAgentInput | None: _walk(RunAgentInput),
        tuple[Tool, ...]: _each(_walk(Tool)),
        tuple[Context, ...]: _each(_walk(Context)),
        tuple[ResumeEntry, ...] | None: _each(_walk(ResumeEntry)),
        tuple[Interrupt, ...]: _each(_walk(Interrupt)),
        probe["content"]: _walk_content,
    }
    special: dict[tuple[type, str], Callable[[str], _Hook]] = {
        (Interrupt, "expires_at"): _expires_at,
        (ResumeEntry, "status"): _status,
        **{(c, "role"): _opt_role for c in _OPTIONAL_ROLES},
        **{(c, "usage"): _usage for c in (ev.RunFinished, ev.RunError)},
        (ev.SubagentFinished, "outcome"): _subagent_outcome,
    }
    special_walks: dict[tuple[type, str], _Walk] = {
        **{(c, "role"): _walk_role for c in _OPTIONAL_ROLES},
        **{(c, "usage"): _walk_usage for c in (ev.RunFinished, ev.RunError)},
        (ev.SubagentFinished, "outcome"): _walk_subagent_outcome,
    }
    classes: tuple[type, ...] = (
        *ev.EVENT_TYPES,
        ev.SuccessOutcome,
        ev.InterruptOutcome,
        *_MESSAGE_CLASSES.values(),
        FunctionCall,
        ToolCall,
        Tool,
        Context,
        ResumeEntry,
        Interrupt,
        RunAgentInput,
    )
    for cls in classes:
        attrs.resolve_types(cls, None, _ALIAS_NAMES)
        s_over: dict[str, Any] = {}
        u_over: dict[str, Any] = {}
        for a in attrs.fields(cls):
            if not a.init:
                continue
            key = wire_key(a.name)
            make = special.get((cls, a.name)) or table.get(a.type)
            if make is None:
                raise TypeError(f"no wire hook for {cls.__name__}.{a.name}: {a.type!r}")
            s_over[a.name] = override(rename=key, struct_hook=make(key))
            omit = a.default is None or a.default is Absent.ABSENT
            if cls is RunAgentInput and a.name == "state":
                omit = False  # R-B6: the request always carries the state
            u_over[a.name] = override(
                rename=key, omit_if_default=omit, unstruct_hook=_unstructure_hook(a.type)
            )
        keys = frozenset(wire_key(a.name) for a in attrs.fields(cls) if a.init)
        _MEMBERS[cls] = (
            keys | _DISCRIMINATOR.get(cls, frozenset()),
            tuple(
                (wire_key(a.name), special_walks.get((cls, a.name)) or inner[a.type])
                for a in attrs.fields(cls)
                if (cls, a.name) in special_walks or a.type in inner
            ),
        )
        structure: Callable[[Any], Any] = make_dict_structure_fn(cls, converter, **s_over)
        if cls in _REQUIRED_WITH_DEFAULT:
            structure = _requiring(_REQUIRED_WITH_DEFAULT[cls], structure)
        unstructure: _Writer = make_dict_unstructure_fn(cls, converter, **u_over)
        converter.register_structure_hook(cls, _two_args(structure))
        converter.register_unstructure_hook(cls, unstructure)
        readers[cls] = _object_reader(_NAMES.get(cls, "a message"), structure)
        if cls in ev.EVENT_TYPES:
            hooks = {n: o.struct_hook for n, o in s_over.items()}
            _EVENT_READERS[cls] = _fast_path(cls, structure, hooks)
        _UNSTRUCTURE[cls] = unstructure
    return readers


_MISSING = object()
_REQUIRED_WITH_DEFAULT: dict[type, tuple[str, ...]] = {
    ev.ReasoningMessageStart: ("role",),
    ToolCall: ("type",),
}
"""Wire keys AG-UI 1.0 requires of a class whose field has a default (for those who
build one): REASONING_MESSAGE_START's role is "Fixed, and required rather than
defaulted" (Schema: ReasoningMessageStartEvent), and a call's type "required" (Schema:
ToolCall), so a value without one is malformed."""


def _tool_calls(read: Callable[[Any], ToolCall]) -> Callable[[str], _Hook]:
    """Hooks for ``toolCalls``: a call of a type AG-UI 1.0 does not define (it defines
    "function" only, Schema: ToolCall) is dropped from the list, as the Processing
    Model has an unrecognised value in a required position remove what holds it."""

    def known(v: Any) -> ToolCall | None:
        # The reader refuses what is not an object, or has no type or one not a string.
        kind = v.get("type") if type(v) is dict else None
        return None if type(kind) is str and kind != "function" else read(v)

    return _known_tuple(known, "tool calls")


def _walk_tool_call(v: Any, path: _Path, out: _LeftOut) -> None:
    if v["type"] == "function":
        _walk_members(_MEMBERS[ToolCall], v, path, out)
    else:  # dropped from its list
        out.append(LeftOut(path, f"a tool call of type {_short(v['type'], 40)}"))


def _requiring(keys: tuple[str, ...], structure: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """``structure``, refusing a value without one of ``keys`` (a KeyError, as cattrs
    raises for a missing field without a default)."""

    def read(v: Any) -> _T:
        for key in keys:
            if key not in v:
                raise KeyError(key)
        return structure(v)

    return read


_OPTIONAL_ROLES = (ev.TextMessageStart, ev.TextMessageChunk, ev.ToolCallResult)
"""The events whose optional ``role`` may hold a role AG-UI 1.0 does not define."""
_CLOSED_VALUES: dict[tuple[type, str], frozenset[str]] = {
    (c, "role"): ROLES for c in _OPTIONAL_ROLES
}
"""Optional strings whose value a reading strips unless it is one of a closed set: the
shortcut takes an event whose value is in the set and leaves the others to the general
path, which strips them with a warning."""


def _fast_path(
    cls: type,
    general: Callable[[Any], Any],
    hooks: dict[str, _Hook],
) -> Callable[[Any], tuple[Any, tuple[LeftOut, ...]]]:
    """``general`` and what reading the event stripped (:data:`_MEMBERS` must know the
    class), preceded by a shortcut for the common shape of an event.

    Most events of a stream carry their required fields and, at most, optional
    strings (a start with its role, a call with its parent). For that shape
    the event is built directly: required strings are type-checked inline,
    other required fields go through their own hooks, and every other field
    takes its default, which is the object cattrs would build. Any other
    shape takes the general path, which checks everything and explains what
    is wrong.
    """
    fields = [a for a in attrs.fields(cls) if a.init]
    required = [a for a in fields if a.default is attrs.NOTHING]
    strings = [a for a in fields if a.default is None and a.type == str | None]
    left_out = _left_out_of(cls)

    def slow(obj: Any) -> tuple[Any, tuple[LeftOut, ...]]:
        return general(obj), left_out(obj)

    if not required or any(isinstance(a.default, attrs.Factory) for a in fields):  # type: ignore[arg-type]
        return slow
    if cls in _REQUIRED_WITH_DEFAULT:
        return slow  # the shortcut would take the default for the missing key
    if hasattr(cls, "__attrs_post_init__") or any(
        a.validator is not None or a.converter is not None for a in fields
    ):
        return slow  # the shortcut stores values as given: it cannot run checks
    given = {a.name: f"v{n}" for n, a in enumerate([*required, *strings])}
    env: dict[str, Any] = {
        "_new": object.__new__,
        "_cls": cls,
        "_slow": slow,
        "_left_out": left_out,
        "_nothing": _NOTHING_LEFT_OUT,
        "_keys": frozenset(["type", *(wire_key(a.name) for a in [*required, *strings])]),
        "_missing": _MISSING,
        "_Bad": _Bad,
    }
    lines = ["def structure(obj):", "    if obj.keys() <= _keys:"]
    tests, converted = [], []
    for a in [*required, *strings]:
        v, key = given[a.name], wire_key(a.name)
        lines.append(f"        {v} = obj.get({key!r}, _missing)")
        if a.type is str:
            tests.append(f"type({v}) is str")
        elif a in required:
            env[f"_hook_{a.name}"] = hooks[a.name]
            tests.append(f"{v} is not _missing")
            converted.append(f"            {v} = _hook_{a.name}({v}, None)")
        elif (cls, a.name) in _CLOSED_VALUES:
            env[f"_closed_{a.name}"] = _CLOSED_VALUES[cls, a.name]
            known = f"type({v}) is str and {v} in _closed_{a.name}"
            tests.append(f"({v} is _missing or {v} is None or ({known}))")
            converted.append(f"            {v} = None if {v} is _missing else {v}")
        else:
            tests.append(f"({v} is _missing or {v} is None or type({v}) is str)")
            converted.append(f"            {v} = None if {v} is _missing else {v}")
    lines.append(f"        if {' and '.join(tests)}:")
    if any(a in required and a.type is not str for a in fields):
        # A hook's complaint is left to the general path, so that errors come in its order.
        lines += ["            try:", *(" " * 4 + c for c in converted if "_hook_" in c)]
        lines += ["            except _Bad:", "                return _slow(obj)"]
        converted = [c for c in converted if "_hook_" not in c]
    lines += converted
    lines.append("            new = _new(_cls)")
    for a in fields:
        env[f"_set_{a.name}"] = getattr(cls, a.name).__set__
        env[f"_default_{a.name}"] = a.default
        lines.append(f"            _set_{a.name}(new, {given.get(a.name, f'_default_{a.name}')})")
    # The shortcut's keys are the class's own: only a value holding more may hold more.
    left = "_left_out(obj)" if _MEMBERS[cls][1] else "_nothing"
    lines += [f"            return new, {left}", "    return _slow(obj)", ""]
    exec("\n".join(lines), env)  # generated from the class's field names only
    fast: Callable[[Any], tuple[Any, tuple[LeftOut, ...]]] = env["structure"]
    return fast


def _two_args(fn: Callable[[Any], Any]) -> _Hook:
    """A converter hook (``value, type``) calling a one-argument function."""
    return lambda v, _: fn(v)


def _unstructure_hook(t: Any) -> Callable[[Any], Any]:
    """How a field is written: frozen JSON and scalars as they are, classes by their hook."""
    if t == FunctionCall:
        return lambda v: _UNSTRUCTURE[FunctionCall](v)
    if t == RunAgentInput | None:
        return lambda v: None if v is None else encode_run_input(v)
    if t == tuple[ToolCall, ...] | None:
        return lambda v: None if v is None else [_UNSTRUCTURE[ToolCall](c) for c in v]
    if t in (tuple[Tool, ...], tuple[Context, ...], tuple[ResumeEntry, ...] | None):
        return lambda v: None if v is None else [_UNSTRUCTURE[type(x)](x) for x in v]
    if t == tuple[Interrupt, ...]:
        return lambda v: [_UNSTRUCTURE[Interrupt](x) for x in v]
    if t in (_PROBE_MESSAGES, _PROBE["message_sequence"]):
        return lambda v: [encode_message(m) for m in v]
    if t == _PROBE_OUTCOME:
        return lambda v: None if v is None else _encode_outcome(v)
    return identity


_MESSAGE_CLASSES: dict[str, type[Any]] = {
    c.role: c
    for c in (
        DeveloperMessage,
        SystemMessage,
        AssistantMessage,
        UserMessage,
        ToolMessage,
        ActivityMessage,
        ReasoningMessage,
    )
}
_EVENT_READERS: dict[type, Callable[[Any], tuple[Any, tuple[LeftOut, ...]]]] = {}
"""Per event class: the event a parsed value stands for, and what reading it stripped."""
_UNSTRUCTURE: dict[type, _Writer] = {}
_NAMES: dict[type, str] = {
    ev.SuccessOutcome: "a success outcome",
    ev.InterruptOutcome: "an interrupt outcome",
    FunctionCall: "a function call",
    ToolCall: "a tool call",
    Tool: "a tool",
    Context: "a context entry",
    ResumeEntry: "a resume entry",
    Interrupt: "an interrupt",
    RunAgentInput: "a run input",
}
_PROBE = _probe_types()
_PROBE_MESSAGES = _PROBE["messages"]
_PROBE_OUTCOME = _PROBE["outcome"]


# -- messages, outcomes and interrupts ------------------------------------------------


def _decode_message(v: Any) -> Message | None:
    """A message, or None for one of a role AG-UI 1.0 does not define: the role
    discriminates the union, so such a message is unrecognised material, and its list
    drops it (Processing Model) rather than hand it to the application."""
    cls = _MESSAGE_CLASSES.get(_tag(v, "role", "a message"))
    return None if cls is None else _READERS[cls](v)


_messages = _known_tuple(_decode_message, "messages")
"""Hooks for a list of messages, those of a role AG-UI 1.0 does not define dropped."""


def _decode_outcome(v: Any) -> ev.Outcome:
    kind = _tag(v, "type", "an outcome")
    if kind == "cancelled":
        return ev.CancelledOutcome()
    if kind == "success":
        return _READERS[ev.SuccessOutcome](v)  # type: ignore[no-any-return]
    if kind == "interrupt":
        return _READERS[ev.InterruptOutcome](v)  # type: ignore[no-any-return]
    return ev.UnknownOutcome(type=kind, raw=_freeze_obj(v))


def _decode_interrupt(v: Any) -> Interrupt:
    return _READERS[Interrupt](v)  # type: ignore[no-any-return]


def _encode_outcome(o: ev.Outcome) -> dict[str, Any]:
    if isinstance(o, ev.UnknownOutcome):
        return dict(o.raw)
    if isinstance(o, ev.CancelledOutcome):
        return {"type": "cancelled"}
    return {"type": o.TYPE, **_UNSTRUCTURE[type(o)](o)}


# -- what a reading left out ----------------------------------------------------------
#
# AG-UI 1.0 (Processing Model): a member or union member it does not define is
# stripped, and a consumer SHOULD warn naming its path. The readers above ignore
# such members; after a general read, left_out() walks the same value through the
# same classes and names them. (The shortcut reads only frames with none.)

_Path = tuple[str | int, ...]
_LeftOut = list["LeftOut"]
_Walk = Callable[[Any, _Path, _LeftOut], None]


class LeftOut(NamedTuple):
    """What a reading stripped as AG-UI 1.0 does not define it (see :func:`read_frame`)."""

    path: tuple[str | int, ...]
    """Where, as wire keys and indexes from the event: ``("messages", 3, "content", 0)``."""
    what: str
    """What, briefly: ``member 'x'``, ``a content part of type 'hologram'``."""

    def __str__(self) -> str:
        return f"{self.what} at {_format_path(self.path)}" if self.path else self.what


def left_out_note(event_type: str, left: Sequence[LeftOut]) -> str:
    """One warning for what a reading of ``event_type`` stripped, naming the first few."""
    return f"{event_type}: left out what AG-UI 1.0 does not define: {listed(left)}"


_MEMBERS: dict[type, tuple[frozenset[str], tuple[tuple[str, _Walk], ...]]] = {}
"""Per wire class: the keys it defines, and the walks of the values holding more."""
_OUTCOMES = {
    "success": ev.SuccessOutcome,
    "interrupt": ev.InterruptOutcome,
    "cancelled": ev.CancelledOutcome,
}
_DISCRIMINATOR = {
    **{c: frozenset({"type"}) for c in (*ev.EVENT_TYPES, *_OUTCOMES.values())},
    **{c: frozenset({"role"}) for c in _MESSAGE_CLASSES.values()},
}


_NOTHING_LEFT_OUT: tuple[LeftOut, ...] = ()


def _left_out_of(cls: type) -> Callable[[Any], tuple[LeftOut, ...]]:
    """What reading a ``cls`` from a valid parsed value strips."""
    walk = _walk(cls)

    def left_out(v: Any) -> tuple[LeftOut, ...]:
        out: _LeftOut = []
        walk(v, (), out)
        return tuple(out) if out else _NOTHING_LEFT_OUT

    return left_out


def _walk(cls: type) -> _Walk:
    def walk(v: Any, path: _Path, out: _LeftOut) -> None:
        _walk_members(_MEMBERS[cls], v, path, out)

    return walk


def _walk_members(
    members: tuple[frozenset[str], tuple[tuple[str, _Walk], ...]],
    v: Any,
    path: _Path,
    out: _LeftOut,
) -> None:
    keys, inner = members
    if not v.keys() <= keys:
        out.extend(LeftOut(path, f"member {_short(k, 40)}") for k in v if k not in keys)
    for key, walk in inner:
        value = v.get(key)
        if value is not None:
            walk(value, (*path, key), out)


def _each(walk: _Walk) -> _Walk:
    def each(v: Any, path: _Path, out: _LeftOut) -> None:
        for n, item in enumerate(v):
            walk(item, (*path, n), out)

    return each


def _walk_message(v: Any, path: _Path, out: _LeftOut) -> None:
    cls = _MESSAGE_CLASSES.get(v["role"])
    if cls is None:  # dropped from its list
        out.append(LeftOut(path, f"a message of role {_short(v['role'], 40)}"))
    else:
        _walk_members(_MEMBERS[cls], v, path, out)


def _walk_outcome(v: Any, path: _Path, out: _LeftOut) -> None:
    cls = _OUTCOMES.get(v["type"])
    if cls is not None:  # an unknown type is read as success, and noted by the reducer (R-J5)
        _walk_members(_MEMBERS[cls], v, path, out)


def _walk_content(v: Any, path: _Path, out: _LeftOut) -> None:
    if type(v) is not list:
        return
    for n, part in enumerate(v):
        at = (*path, n)
        fields = PART_FIELDS.get(part["type"])
        if fields is None:
            out.append(LeftOut(at, f"a content part of type {_short(part['type'], 40)}"))
            continue
        source = part["source"] if "source" in fields else {}
        known = _SOURCE_FIELDS.get(source["type"]) if source else None
        if source and known is None:  # a required position: the part goes
            kind = _short(source["type"], 40)
            out.append(LeftOut(at, f"{article(part['type'])} part with a source of type {kind}"))
            continue
        out.extend(
            LeftOut(at, f"member {_short(k, 40)}") for k in part if k != "type" and k not in fields
        )
        if known is not None:
            out.extend(
                LeftOut((*at, "source"), f"member {_short(k, 40)}")
                for k in source
                if k != "type" and k not in known
            )


_READERS = _build()
_MEMBERS[ev.CancelledOutcome] = (_DISCRIMINATOR[ev.CancelledOutcome], ())  # read by hand
_EVENT_CLASS: dict[str, type] = {cast(str, c.TYPE): c for c in ev.EVENT_TYPES}
_EVENTS = {kind: _EVENT_READERS[c] for kind, c in _EVENT_CLASS.items()}


# -- public functions -------------------------------------------------------------------


def decode_event(obj: object) -> ev.Event:
    """The event a parsed JSON value (``json.loads`` output) stands for.

    Raises :class:`WireError` for anything that is not a valid AG-UI 1.0
    event, including a malformed interrupt outcome (R-A6). Unknown keys are
    ignored; an unknown event type becomes :class:`~.events.UnknownEvent`.
    """
    return _read_event(obj)[0]


def _read_event(obj: object) -> tuple[ev.Event, tuple[LeftOut, ...]]:
    if type(obj) is not dict:
        raise WireError(f"an AG-UI event must be a JSON object, got {_describe(obj)}")
    kind = obj.get("type")
    fn = _EVENTS.get(kind) if type(kind) is str else None
    try:
        if fn is not None:
            return fn(obj)
        if type(kind) is not str:
            got = _describe(kind) if "type" in obj else "none"
            raise WireError(f'an AG-UI event needs a string "type", got {got}')
        return ev.UnknownEvent(type=kind, raw=_freeze_obj(obj)), _NOTHING_LEFT_OUT
    except _Bad as exc:
        raise WireError(exc.reason, event_type=kind, path=_format_path(exc.path)) from None
    except KeyError as exc:
        reason = f"missing required field {_short(str(exc.args[0]))}"
        raise WireError(reason, event_type=kind) from None
    except RecursionError:
        raise WireError("nested too deeply", event_type=kind) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _OutOfRange(ValueError):
    pass


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; one past a float's range (``1e400``)
    is refused here, or it would become ``inf``, which no request can carry back."""
    value = float(text)
    if value - value != 0.0:
        raise _OutOfRange(f"the number {text[:40]} is past a float's range (1.8e308)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
# The C scanner alone: json.loads adds two regex matches per call around it.
_scan: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _loads(data: str) -> Any:
    """``json.loads`` without NaN or infinities, deep nesting refused."""
    try:
        value, end = _scan(data, 0)
        if end != len(data) and data[end:].strip(" \t\n\r"):
            raise ValueError(f"extra data after the JSON value at position {end}")
    except StopIteration:  # leading whitespace, or no value at all
        try:
            value = _DECODER.decode(data)
        except _OutOfRange as exc:
            raise WireError(f"the frame is not JSON we accept: {exc}") from None
        except (ValueError, RecursionError) as exc:
            raise _not_json(exc) from None
    except RecursionError:
        raise WireError(f"the frame is not JSON: nested deeper than {MAX_DEPTH} levels") from None
    except _OutOfRange as exc:
        raise WireError(f"the frame is not JSON we accept: {exc}") from None
    except ValueError as exc:
        raise _not_json(exc) from None
    # An upper bound on depth is cheap; the exact walk runs only when it is exceeded.
    if data.count("[") + data.count("{") > MAX_DEPTH and _too_deep(value):
        raise WireError(f"the frame is not JSON we accept: nested deeper than {MAX_DEPTH} levels")
    return value


def _not_json(exc: Exception) -> WireError:
    if "integer string conversion" in str(exc):
        # Python's own message advises sys.set_int_max_str_digits(): no advice for a frame.
        return WireError(
            f"the frame is not JSON we accept: an integer of more than {MAX_INT_DIGITS} digits"
        )
    return WireError(f"the frame is not JSON: {_short(str(exc), 120)}")


def _too_deep(value: Any) -> bool:
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is dict or t is list:
            if depth >= MAX_DEPTH:
                return True
            items = v.values() if t is dict else v
            stack.extend((x, depth + 1) for x in items if type(x) in (dict, list))
    return False


def decode_frame(data: str) -> ev.Event:
    """The event in one SSE frame's data: JSON text, strictly read (see :func:`decode_event`)."""
    return read_frame(data)[0]


def read_frame(data: str) -> tuple[ev.Event, tuple[LeftOut, ...]]:
    """:func:`decode_frame`'s event, and what it stripped as AG-UI 1.0 does not define it.

    The Processing Model says to strip, and warn of, a member an event or anything in it
    does not define, a content part of an unknown type, and a media part whose source is
    of one. ``LeftOut`` names each by its path; :func:`left_out_note` makes the warning.
    (An unknown event type, message role or outcome type is kept whole, not stripped.)
    """
    # Nesting deeper than MAX_DEPTH needs more brackets than that: short frames skip the count.
    if type(data) is str and (
        len(data) <= MAX_DEPTH or data.count("{") + data.count("[") <= MAX_DEPTH
    ):
        # The common case in one pass: a whole, shallow JSON object of a known type.
        # Anything else, or any failure, is read again by the general path below,
        # which finds the same result or explains the problem.
        try:
            obj, end = _scan(data, 0)
            if end == len(data) and type(obj) is dict:
                kind = obj.get("type")
                fn = _EVENTS.get(kind) if type(kind) is str else None
                if fn is not None:
                    return fn(obj)
        except (StopIteration, ValueError, RecursionError, _Bad, KeyError):
            pass
    if type(data) is not str:
        raise WireError(f"a frame must be text, got {_describe(data)}")
    return _read_event(_loads(data))


def decode_message(obj: object) -> Message:
    """A message from parsed JSON. One of a role AG-UI 1.0 does not define is a
    :class:`WireError`: alone, it has no list to be dropped from (in an event or a run
    input, such a message is left out of its list, and named in what was stripped)."""
    try:
        message = _decode_message(obj)
        if message is None:
            role = _short(obj["role"], 40)  # type: ignore[index]
            raise _Bad(f"AG-UI 1.0 defines no message of role {role}", "role")
        return message
    except _Bad as exc:
        raise WireError(_where(exc, "message")) from None
    except RecursionError:
        raise WireError("the message is nested too deeply") from None


def decode_run_input(obj: object) -> RunAgentInput:
    """A RunAgentInput from parsed JSON (for servers and the fake agent)."""
    try:
        inp: RunAgentInput = _READERS[RunAgentInput](obj)
    except _Bad as exc:
        raise WireError(_where(exc, "run input")) from None
    except RecursionError:
        raise WireError("the run input is nested too deeply") from None
    if "protocolVersion" not in obj:  # type: ignore[operator]
        inp = attrs.evolve(inp, protocol_version=None)
    return inp


def _where(exc: _Bad, what: str) -> str:
    path = _format_path(exc.path)
    return f"malformed {what}: {f'at {path}: ' if path else ''}{exc.reason}"


def encode_event(e: ev.Event) -> dict[str, Any]:
    """The wire form of an event: camelCase keys, absent fields left out.

    JSON values inside are the frozen ones (FrozenDict, tuples), which
    :func:`dumps` and ``json.dumps`` write as objects and arrays.
    """
    if isinstance(e, ev.UnknownEvent):
        return dict(e.raw)
    return {"type": e.TYPE, **_UNSTRUCTURE[type(e)](e)}


def encode_message(m: Message) -> dict[str, Any]:
    """The wire form of a message (see :func:`encode_event`)."""
    return {"role": m.role, **_UNSTRUCTURE[type(m)](m)}


_NOT_SENT = (ActivityMessage,)
"""Messages kept in the history but never sent back (see :func:`encode_run_input`)."""


def encode_run_input(inp: RunAgentInput) -> dict[str, Any]:
    """The request body: camelCase, absent optionals left out, ``state`` present
    unless null, and each resume entry with ``payload`` only when given (``None``
    is given, and written as ``null``) and ``metadata`` only when given (R-B6).

    Activity messages stay out of ``messages``: AG-UI 1.0 (Run Input) has a consumer
    strip them, as the consumer's rendering material, not conversation.

    A null state (an agent's ``STATE_SNAPSHOT`` may set one) is left out: AG-UI 1.0
    (Schema: RunAgentInput) takes any state "except null", a whole optional field set
    to null "MUST be omitted" (The Event Model), and the agent reads an absent state
    as ``{}`` (Run Input).
    """
    out = _UNSTRUCTURE[RunAgentInput](inp)
    if any(type(m) in _NOT_SENT for m in inp.messages):
        kept = zip(inp.messages, out["messages"], strict=True)
        out["messages"] = [wire for m, wire in kept if type(m) not in _NOT_SENT]
    if out.get("state", "") is None:
        del out["state"]
    if out.get("protocolVersion", "") is None:
        del out["protocolVersion"]
    return out


def dumps(obj: object) -> str:
    """Compact, deterministic JSON text (UTF-8 as is; NaN and infinities refused)."""
    return json.dumps(
        obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=json_default
    )


def encode_json(obj: object) -> bytes:
    """:func:`dumps` as UTF-8 bytes, the form a request body takes.

    A lone surrogate (say, half of an emoji's ``\\u`` pair that an agent split
    across two deltas) has no UTF-8 form. It can only sit inside a JSON string,
    where ``backslashreplace`` writes exactly its JSON escape: it goes back as
    it came, and the halves join again on the other side.
    """
    return dumps(obj).encode("utf-8", "backslashreplace")


def encode_request(inp: RunAgentInput) -> bytes:
    """The request body of ``inp``; :class:`WireError` if some value has no JSON text."""
    try:
        return encode_json(encode_run_input(inp))
    except (ValueError, TypeError, RecursionError) as exc:
        raise WireError(f"the request cannot be written as JSON: {_short(str(exc), 160)}") from None
