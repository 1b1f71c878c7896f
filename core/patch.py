"""RFC 6902 JSON Patch on frozen JSON, with structural sharing.

An operation copies only the containers on its path (O(depth × their width));
everything else in the result is the very object from the input, so a patch on
a large state is cheap and unchanged parts stay ``is``-identical. A patch is
atomic for free: the input is immutable, and a failed op raises before any
result escapes.

Every kind of bad input raises :class:`PatchError` and nothing else: the walk
is iterative, pointers are capped at ``MAX_DEPTH`` tokens, and values are not
compared recursively.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import a_type
from .json import JSON, FrozenDict, with_member
from .pmap import PMap
from .pvec import PVec

__all__ = [
    "MAX_COPIED",
    "MAX_DEPTH",
    "SHARE_FROM",
    "SHARE_MEMBERS_FROM",
    "PatchError",
    "apply_patch",
    "json_equal",
    "parse_pointer",
]

MAX_DEPTH = 512
"""The most reference tokens a pointer may have (deeper state is not JSON we keep)."""

_BAD_TILDE = re.compile(r"~(?![01])")
_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_ABSENT = object()
_FROZEN_TYPES = (type(None), bool, int, float, str, tuple, PVec, FrozenDict, PMap)

MAX_COPIED = 1_000_000
"""The most JSON values (containers and scalars) one patch's ``copy`` ops may duplicate
in all. Copies share structure, so doubling an array costs nothing here, but forty
doublings would be a trillion values to send back: a patch's output stays linear in
its input this way."""

SHARE_FROM = 64
"""Arrays a patch leaves at least this long are persistent vectors (:class:`PVec`): a
change to one copies O(log n) slots, where a tuple would be copied whole."""

SHARE_MEMBERS_FROM = 1024
"""Objects a patch changes with at least this many members become persistent maps
(:class:`PMap`): a change copies O(log n) small dicts, where a ``FrozenDict`` would be
copied whole. Below it a ``FrozenDict`` copy is the cheaper."""


class PatchError(ValueError):
    """A JSON Patch could not be applied; the input document is unchanged.

    ``index`` is the failing operation's position (``None`` outside a patch),
    ``path`` the pointer involved, ``reason`` what was wrong.
    """

    def __init__(self, reason: str, *, index: int | None = None, path: str | None = None) -> None:
        where = "" if index is None else f"operation {index}"
        if path is not None:
            where = f"{where} at {_short(path)}".lstrip()
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.index = index
        self.path = path


class _Fail(Exception):
    """Internal: a reason, wrapped into PatchError with op index and path by the caller."""


class _UnknownOp(_Fail):
    """An op name RFC 6902 does not define: a newer producer's, which a caller may skip."""


def _short(s: str, limit: int = 80) -> str:
    """A repr that never dumps a huge string into an error message."""
    return repr(s) if len(s) <= limit else f"{s[:limit]!r}… ({len(s)} chars)"


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """Split an RFC 6901 JSON Pointer into unescaped tokens; ``""`` is the root."""
    try:
        return _parse(pointer)
    except _Fail as e:
        raise PatchError(str(e), path=pointer if isinstance(pointer, str) else None) from None


def _parse(pointer: object) -> tuple[str, ...]:
    if type(pointer) is not str:
        raise _Fail(f"a pointer must be a string, not {type(pointer).__name__}")
    if pointer == "":
        return ()
    if pointer[0] != "/":
        raise _Fail("a pointer must be empty or start with '/'")
    if pointer.count("/") > MAX_DEPTH:
        raise _Fail(f"a pointer may have at most {MAX_DEPTH} tokens")
    tokens = pointer[1:].split("/")
    if "~" in pointer:
        # "~" must be followed by 0 or 1; "~1" is decoded before "~0" (RFC 6901 §4).
        if _BAD_TILDE.search(pointer):
            raise _Fail("'~' must be followed by '0' or '1'")
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in tokens]
    return tuple(tokens)


def _index(token: str, length: int, *, end_ok: bool) -> int:
    """An array index; ``end_ok`` allows ``length`` itself (and ``-``), for ``add``."""
    if token == "-":
        if end_ok:
            return length
        raise _Fail("'-' names no existing element (only 'add' may use it)")
    # ASCII digits without a leading zero (str.isdigit alone admits other scripts' digits).
    if not (token.isascii() and token.isdigit() and (token[0] != "0" or token == "0")):
        raise _Fail(f"{_short(token)} is not an array index")
    # Past 18 digits no array is that long; don't int() it (Python caps int() at 4300 digits).
    i = int(token) if len(token) <= 18 else length + 1
    if i < length or (end_ok and i == length):
        return i
    raise _Fail(f"index {_short(token)} is out of range for an array of {length}")


def _child(container: JSON, token: str) -> JSON:
    if isinstance(container, dict | PMap):
        if token in container:
            return container[token]
        raise _Fail(f"no member {_short(token)}")
    if type(container) is tuple or type(container) is PVec:
        return container[_index(token, len(container), end_ok=False)]
    raise _Fail(f"cannot look up {_short(token)} in {_kind(container)}")


_KINDS = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}


def _kind(value: object) -> str:
    """What a value is, in JSON's words (the endpoint's author reads them): 'a number'."""
    return "null" if value is None else _KINDS.get(type(value)) or a_type(value)


def _get(doc: JSON, tokens: tuple[str, ...]) -> JSON:
    for token in tokens:
        doc = _child(doc, token)
    return doc


def _rebuild(doc: JSON, tokens: tuple[str, ...], op: str, value: JSON, flat_root: bool) -> JSON:
    """``doc`` with ``op`` done at ``tokens`` (not the root); copies only the path.

    ``flat_root``: a wide root object stays a ``FrozenDict`` (a field typed as one):
    one C-level copy per op, rather than a ``PMap`` built and copied back each time.
    """
    keep = doc if flat_root else None
    # Walk down, remembering each container and the resolved key into it.
    chain: list[tuple[JSON, str | int]] = []
    node = doc
    for n in range(len(tokens) - 1):
        token = tokens[n]
        kind = type(node)
        key: str | int
        if (kind is FrozenDict or kind is PMap) and token in node:  # type: ignore[operator]
            key = token
        elif kind is PVec or kind is tuple:
            key = _index(token, len(node), end_ok=False)  # type: ignore[arg-type]
        else:
            _child(node, token)  # raises, saying why
            key = token  # a plain dict (not frozen JSON, but readable)
        chain.append((node, key))
        node = node[key]  # type: ignore[index]
    last = tokens[-1]
    new: JSON
    if isinstance(node, dict | PMap):
        if op != "add" and last not in node:
            raise _Fail(f"no member {_short(last)}")
        members = node
        if type(node) is not FrozenDict or len(node) >= SHARE_MEMBERS_FROM:
            members = _shared(node, keep)
        new = members.without(last) if op == "remove" else _member_set(members, last, value)
    elif type(node) is tuple or type(node) is PVec:
        new = _array_with(node, _index(last, len(node), end_ok=op == "add"), op, value)
    else:
        raise _Fail(f"cannot {op} {_short(last)} in {_kind(node)}")
    # Walk back up, copying each container with its one child replaced.
    for parent, key in reversed(chain):
        if type(parent) is PVec:
            new = parent.set(key, new)  # type: ignore[arg-type]
        elif isinstance(key, str):
            if type(parent) is not FrozenDict or len(parent) >= SHARE_MEMBERS_FROM:
                parent = _shared(parent, keep)
            new = _member_set(parent, key, new)
        else:
            new = _array_with(parent, key, "replace", new)  # type: ignore[arg-type]
    return new


def _member_set(obj: FrozenDict | PMap, key: str, value: JSON) -> FrozenDict | PMap:
    """``obj`` with member ``key`` set to ``value``, frozen already (checked by ``_value``)."""
    if type(obj) is PMap:
        return obj.with_member(key, value)
    return with_member(obj, key, value)  # type: ignore[arg-type]


def _shared(obj: Any, keep: object = None) -> FrozenDict | PMap:
    """``obj``, an object about to change, as a ``PMap`` if it is wide (SHARE_MEMBERS_FROM)
    and not ``keep``."""
    if type(obj) is FrozenDict and len(obj) >= SHARE_MEMBERS_FROM and obj is not keep:
        return PMap.from_frozen_items(obj.items())
    if type(obj) is FrozenDict or type(obj) is PMap:
        return obj
    return FrozenDict(obj)  # a plain dict (readable, not frozen JSON): copied once


def _array_with(
    array: tuple[JSON, ...] | PVec[JSON], i: int, op: str, value: JSON
) -> tuple[JSON, ...] | PVec[JSON]:
    """``array`` with ``op`` done at index ``i``; long results share structure (SHARE_FROM).
    A PVec shorter than that (an application's own) gives a tuple, as any short array."""
    if len(array) >= SHARE_FROM:
        vec = array if type(array) is PVec else PVec.from_iterable(array)
        if op == "replace":
            return vec.set(i, value)
        if op == "add" and i == len(vec):
            return vec.append(value)
        if op == "remove" and i == len(vec) - 1 and len(vec) > SHARE_FROM:
            return vec.pop()  # a stack's pop: no copy of the whole array
    items = list(array)
    if op == "add":
        items.insert(i, value)
    elif op == "remove":
        del items[i]
    else:
        items[i] = value
    return PVec.from_iterable(items) if len(items) >= SHARE_FROM else tuple(items)


def _add(doc: JSON, tokens: tuple[str, ...], value: JSON, flat_root: bool) -> JSON:
    return _rebuild(doc, tokens, "add", value, flat_root) if tokens else value


def _remove(doc: JSON, tokens: tuple[str, ...], flat_root: bool) -> JSON:
    if not tokens:
        raise _Fail("cannot remove the whole document")
    return _rebuild(doc, tokens, "remove", None, flat_root)


def _replace(doc: JSON, tokens: tuple[str, ...], value: JSON, flat_root: bool) -> JSON:
    return _rebuild(doc, tokens, "replace", value, flat_root) if tokens else value


def json_equal(a: object, b: object) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``; objects unordered, arrays ordered.

    Iterative, so arbitrarily deep values cannot raise ``RecursionError``.
    """
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, dict | PMap):
            if not isinstance(y, dict | PMap) or len(x) != len(y):
                return False
            for k, v in x.items():
                if k not in y:
                    return False
                stack.append((v, y[k]))
        elif isinstance(x, tuple | list | PVec):
            if not isinstance(y, tuple | list | PVec) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, bool) or isinstance(y, bool):
            if x is not y:  # True and False are singletons
                return False
        elif isinstance(x, int | float) and isinstance(y, int | float):
            if x != y:
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _value(op: Mapping[str, Any]) -> JSON:
    if "value" not in op:
        raise _Fail("missing 'value'")
    value = op["value"]
    if type(value) not in _FROZEN_TYPES:
        raise _Fail(f"'value' is a {type(value).__name__}, not frozen JSON (freeze() it)")
    if type(value) is float and not math.isfinite(value):
        raise _Fail("'value' is not a finite number")
    return value  # type: ignore[no-any-return]


def _source(doc: JSON, op: Mapping[str, Any]) -> tuple[tuple[str, ...], JSON]:
    """The tokens of ``from`` and the value there; failures say they are about ``from``."""
    if "from" not in op:
        raise _Fail("missing 'from'")
    try:
        tokens = _parse(op["from"])
        return tokens, _get(doc, tokens)
    except _Fail as e:
        where = f"from {_short(op['from'])}" if type(op["from"]) is str else "'from'"
        raise _Fail(f"{where}: {e}") from None


def _apply_one(doc: JSON, op: object, copied: list[int], flat_root: bool) -> JSON:
    if type(op) is not FrozenDict and not isinstance(op, Mapping):  # the ABC check is slow
        raise _Fail(f"an operation must be an object, not {type(op).__name__}")
    name = op.get("op")
    if name is None:
        raise _Fail("missing 'op'")
    if type(name) is not str:  # before the set lookup: it may be unhashable
        raise _Fail(f"'op' must be a string, not {type(name).__name__}")
    if name not in _OPS:
        raise _UnknownOp(f"unknown op {_short(name)}")
    pointer = op.get("path", _ABSENT)
    if pointer is _ABSENT:
        raise _Fail("missing 'path'")
    if type(pointer) is not str:
        raise _Fail(f"'path' must be a string, not {type(pointer).__name__}")
    path = _parse(pointer)
    if name == "add":
        return _add(doc, path, _value(op), flat_root)
    if name == "remove":
        return _remove(doc, path, flat_root)
    if name == "replace":
        return _replace(doc, path, _value(op), flat_root)
    if name == "test":
        if not json_equal(_get(doc, path), _value(op)):
            raise _Fail("test failed: the value differs")
        return doc
    source, value = _source(doc, op)
    if name == "copy":
        copied[0] += _count(value, MAX_COPIED - copied[0])
        if copied[0] > MAX_COPIED:
            raise _Fail(f"the patch copies more than {MAX_COPIED:,} JSON values in all")
        return _add(doc, path, value, flat_root)
    if len(source) < len(path) and path[: len(source)] == source:
        raise _Fail("cannot move a value into one of its own children")
    if source == path:
        return doc
    return _add(_remove(doc, source, flat_root), path, value, flat_root)


def _count(value: JSON, budget: int) -> int:
    """The JSON values in ``value``, itself included; counting stops past ``budget``."""
    count = 0
    stack = [value]
    while stack:
        v = stack.pop()
        count += 1
        if count > budget:
            break
        t = type(v)
        if t is FrozenDict or t is PMap:
            stack.extend(v.values())  # type: ignore[union-attr]
        elif t is tuple or t is PVec:
            stack.extend(v)  # type: ignore[arg-type]
    return count


def apply_patch(
    doc: JSON, ops: Sequence[Any], *, flat_root: bool = False, skipped: list[str] | None = None
) -> JSON:
    """Apply the frozen JSON Patch ``ops`` to ``doc``; raise :class:`PatchError` if any op fails.

    Values from the ops are shared into the result, not copied: they must be
    frozen JSON already (checked at the top level only). ``flat_root``: a root
    object stays a ``FrozenDict`` however wide (for a field typed as one); the
    objects below it may become ``PMap``s as usual. ``skipped``: an op with an
    unknown name is left out, and what was left out noted here, as AG-UI 1.0 has a
    consumer do (a newer producer's op); without it, such an op fails the patch.
    """
    if type(ops) is not tuple and (
        isinstance(ops, str | bytes | Mapping) or not isinstance(ops, Sequence)
    ):
        raise PatchError(f"a patch must be an array of operations, not {type(ops).__name__}")
    copied = [0]
    for i, op in enumerate(ops):
        try:
            doc = _apply_one(doc, op, copied, flat_root)
        except _Fail as e:
            if type(e) is _UnknownOp and skipped is not None:
                skipped.append(f"operation {i}: {e}")
                continue
            path = op.get("path") if isinstance(op, Mapping) else None
            raise PatchError(
                str(e), index=i, path=path if isinstance(path, str) else None
            ) from None
    return doc
