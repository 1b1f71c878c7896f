"""Deeply immutable JSON values.

Objects become :class:`FrozenDict`, arrays become tuples; strings, numbers,
booleans and ``None`` are immutable already. A long array that a JSON Patch
changes becomes a :class:`~.pvec.PVec` (a persistent vector that equals and
hashes like the tuple of its items), so that the next change to it copies a
few dozen slots rather than the whole array; a wide object becomes a
:class:`~.pmap.PMap`, for the same reason. A frozen value is shared, never
copied: freezing an already-frozen value returns it as it is, and a JSON Patch
copies only the containers on the patched path (see :mod:`.patch`).

``FrozenDict`` subclasses ``dict`` so that the C JSON encoder writes it at full
speed and equality with plain dicts works, but every mutating method raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn, Self, TypeAlias, overload

from .errors import a_type
from .pmap import PMap
from .pvec import PVec

__all__ = [
    "JSON",
    "MAX_INT_DIGITS",
    "FrozenDict",
    "NotJSONError",
    "as_object",
    "freeze",
    "freeze_parsed",
    "json_default",
    "thaw",
]

JSON: TypeAlias = (
    "bool | int | float | str | tuple[JSON, ...] | PVec[JSON] | FrozenDict | PMap | None"
)


class FrozenDict(dict[str, "JSON"]):
    """A read-only JSON object. Reads like a mapping; every mutation raises.

    Built as ``dict`` is (``FrozenDict({"a": [1]})``, ``FrozenDict(a=1)``), it checks
    and freezes its members as :func:`freeze` does (``NotJSONError``): the list given
    becomes a tuple, so changing the list later cannot change the object, nor any state
    it is put in.
    """

    __slots__ = ("_hash",)
    _hash: int

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        fd = _new(cls)
        if args or kwargs:
            _dict_init(fd, freeze(dict(*args, **kwargs)))
        fd._hash = _FRESH
        return fd

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The members are set in __new__. The one __init__ call that follows it finds
        # the _FRESH mark; any later call (which dict.__init__ would let fill even an
        # empty object) is refused.
        if getattr(self, "_hash", None) is not _FRESH:
            self._readonly()
        del self._hash

    def _readonly(self, *_: object, **__: object) -> NoReturn:
        raise TypeError(
            "this JSON object is read-only (interlude keeps state deeply immutable); "
            "call interlude.core.thaw() for a mutable copy"
        )

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        h: int | None = getattr(self, "_hash", None)
        if h is None or h is _FRESH:
            h = hash(frozenset(self.items()))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self

    def set(self, key: str, value: object) -> FrozenDict:
        """A new object with ``key`` set; this one is unchanged (one O(width) copy).

        ``value`` is checked and frozen as :func:`freeze` does (``NotJSONError``), so
        the new object is deeply immutable JSON too: a list given here and changed
        later cannot change it, and a NaN is refused here rather than when sent.
        """
        ((k, v),) = freeze({key: value}).items()
        return with_member(self, k, v)

    def without(self, key: str) -> FrozenDict:
        """A new object without ``key``; this one is unchanged (one O(width) copy)."""
        fd = frozen_unchecked(self)
        _dict_del(fd, key)
        return fd


_new = dict.__new__
_FRESH: Any = object()  # FrozenDict._hash between __new__ and the __init__ after it
_dict_init = dict.__init__
_dict_set = dict.__setitem__
_dict_del = dict.__delitem__


def with_member(obj: FrozenDict, key: str, value: JSON) -> FrozenDict:
    """``obj`` with ``key`` set to ``value``, which is frozen JSON already (unchecked:
    for interlude's own code, such as a patch, whose values were checked on entry)."""
    fd = _new(FrozenDict)
    _dict_init(fd, obj)  # a C-level copy: dict's merge, not the blocked __setitem__
    _dict_set(fd, key, value)
    return fd


def frozen_unchecked(members: Mapping[str, JSON]) -> FrozenDict:
    """A ``FrozenDict`` of ``members``, whose values are frozen JSON already: no checks,
    no copies below (interlude's own code; the public constructor freezes)."""
    fd = _new(FrozenDict)
    _dict_init(fd, members)
    return fd


class NotJSONError(ValueError):
    """A value cannot be represented as JSON. ``path`` is a JSON Pointer to it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"not a JSON value at {path or '/'}: {reason}")
        self.path = path
        self.reason = reason


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


@overload
def freeze(value: dict[str, Any], *, max_depth: int = 512) -> FrozenDict: ...
@overload
def freeze(value: list[Any] | tuple[Any, ...], *, max_depth: int = 512) -> tuple[JSON, ...]: ...
@overload
def freeze(value: object, *, max_depth: int = 512) -> JSON: ...
def freeze(value: object, *, max_depth: int = 512) -> JSON:
    """Check that ``value`` is JSON and return a deeply immutable copy.

    Rejects NaN and infinities, integers of more than :data:`MAX_INT_DIGITS`
    digits, non-string keys, cycles, and every non-JSON type (bytes, sets,
    datetimes, callables, custom objects). Frozen parts are reused as they
    are, so freezing is O(size of the unfrozen parts). A string that is not
    valid Unicode (a lone surrogate) is kept: it goes out as its ``\\u`` escape,
    as JSON allows (see :func:`~interlude.core.wire.encode_json`).
    """
    try:
        return _freeze(value, 0, max_depth, set())
    except _Fail as exc:
        path = "".join(f"/{_escape(str(t))}" for t in reversed(exc.tokens))
        raise NotJSONError(path, exc.reason) from None


class _Fail(Exception):
    """Raised deep inside ``_freeze``; the path is collected while unwinding."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.tokens: list[str | int] = []


MAX_INT_DIGITS = 4300
"""The longest integer freeze() accepts, in decimal digits: Python's default limit
for converting an int to text, so that every frozen value can be written as JSON."""
_INT_BOUND = 10**MAX_INT_DIGITS


def _freeze(value: Any, depth: int, max_depth: int, active: set[int]) -> JSON:
    t = type(value)
    if value is None or t is str or t is bool or t is FrozenDict or t is PMap:
        return value  # type: ignore[no-any-return]
    if t is int:
        if -_INT_BOUND < value < _INT_BOUND:
            return value  # type: ignore[no-any-return]
        raise _Fail(f"an integer of more than {MAX_INT_DIGITS} digits cannot be written as JSON")
    if t is float:
        if not math.isfinite(value):
            raise _Fail(f"{value!r} has no JSON form")
        return value  # type: ignore[no-any-return]
    if depth >= max_depth:
        raise _Fail(f"nested deeper than {max_depth} levels")
    if isinstance(value, Mapping) or t is tuple or t is list:
        if id(value) in active:
            raise _Fail("the value contains itself (a cycle)")
        active.add(id(value))
        key: str | int | None = None  # the member being frozen: the failure's path token
        try:
            if isinstance(value, Mapping):
                out: dict[str, JSON] = {}
                for key, v in value.items():
                    if type(key) is not str:
                        if not isinstance(key, str):
                            bad = type(key).__name__
                            key = None  # a bad key is this object's fault: its path, no token
                            raise _Fail(f"object key of type {bad}, not str")
                        key = str.__str__(key)  # a StrEnum key: its text, as json.dumps
                    out[key] = _freeze(v, depth + 1, max_depth, active)
                return frozen_unchecked(out)
            items: list[JSON] = []
            for key, v in enumerate(value):  # noqa: B007 (``key`` names the failing item)
                items.append(_freeze(v, depth + 1, max_depth, active))
            return tuple(items)
        except _Fail as exc:
            if key is not None:
                exc.tokens.append(key)
            raise
        finally:
            active.discard(id(value))
    if t is PVec:
        frozen: list[JSON] = []
        for index, v in enumerate(value):
            try:
                frozen.append(_freeze(v, depth + 1, max_depth, active))
            except _Fail as exc:
                exc.tokens.append(index)
                raise
        same = all(a is b for a, b in zip(frozen, value, strict=True))
        return value if same else PVec.from_iterable(frozen)
    if isinstance(value, int):  # int subclasses such as IntEnum
        return _freeze(int(value), depth, max_depth, active)
    if isinstance(value, str):  # StrEnum, (str, Enum) and other str subclasses
        # Their text, as json.dumps writes it; str() of a (str, Enum) is "Choice.APPROVE".
        return str.__str__(value)
    if isinstance(value, float):
        return _freeze(float(value), depth, max_depth, active)
    raise _Fail(f"{a_type(value)} has no JSON form")


def as_object(value: JSON) -> FrozenDict | None:
    """``value`` as a ``FrozenDict`` if it is a JSON object (a ``PMap`` is copied into
    one), else None: for fields typed as an object."""
    if type(value) is FrozenDict:
        return value
    if type(value) is PMap:
        return frozen_unchecked(dict(value.items()))
    return None


def freeze_parsed(value: Any) -> JSON:
    """Freeze the output of ``json.loads`` (already checked JSON): no checks, one pass."""
    t = type(value)
    if t is dict:
        return frozen_unchecked({k: freeze_parsed(v) for k, v in value.items()})
    if t is list:
        return tuple([freeze_parsed(item) for item in value])
    return value  # type: ignore[no-any-return]


_CONTAINERS = (dict, PMap, tuple, list, PVec)


def thaw(value: object) -> Any:
    """A plain, mutable ``dict``/``list`` copy of a frozen JSON value.

    Iterative: an agent's patches can nest a state deeper than Python's recursion
    limit allows a recursive copy (a pointer of 512 tokens, then a value), and thawing
    is how an application reads it.
    """
    if not isinstance(value, _CONTAINERS):
        return value
    top: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(top, 0, value)]
    while todo:
        into, slot, v = todo.pop()
        if isinstance(v, dict | PMap):
            obj: dict[str, Any] = {}
            for k, x in v.items():
                obj[k] = x  # in order; a container is replaced by its copy below
                if isinstance(x, _CONTAINERS):
                    todo.append((obj, k, x))
            into[slot] = obj
        else:
            arr = list(v)
            for i, x in enumerate(arr):
                if isinstance(x, _CONTAINERS):
                    todo.append((arr, i, x))
            into[slot] = arr
    return top[0]


def json_default(value: object) -> list[Any] | dict[str, Any]:
    """The ``default`` hook for ``json.dumps`` of frozen JSON: writes a PVec as an array
    and a PMap as an object."""
    if type(value) is PVec:
        return list(value)
    if type(value) is PMap:
        return dict(value.items())
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
