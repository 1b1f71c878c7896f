"""A persistent JSON object, for state that a patch changes one member at a time.

A :class:`~.json.FrozenDict` is copied whole by every change, so a stream of
patches into an object that grows by a member per event costs O(n²). A
:class:`PMap` changes in O(log n): its members live in a hash trie of small
dicts (path copying: a change copies one dict per level, each of at most 32
entries), and their order, which JSON text and ``dict`` keep, in a
:class:`~.pvec.PVec` of keys. A removed key leaves a gap in that order until
gaps outnumber members, when the order is rebuilt (amortized O(1)).

Reads are a ``Mapping``'s: it equals (and hashes like) a ``dict`` with the same
members, iterates in insertion order, and ``thaw`` turns it into a ``dict``.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from operator import itemgetter
from typing import Any, NoReturn

from .pvec import PVec

__all__ = ["PMap"]

_BITS = 5
_MASK = (1 << _BITS) - 1
_LEAF_MAX = 16  # members a leaf holds before it splits into a node of leaves
_MAX_SHIFT = 60  # past this the hash bits are spent: a leaf then just grows


class _Node(dict[int, Any]):
    """An inner trie node: 5 bits of a key's hash → a child node or leaf."""

    __slots__ = ()


class _Leaf(dict[str, tuple[int, Any]]):
    """A trie leaf: key → (position in the order, value)."""

    __slots__ = ()


_GAP = object()  # a removed key's slot in the order


def _frozen(self: object, *_: object) -> NoReturn:
    raise TypeError(
        "this JSON object is read-only (interlude keeps state deeply immutable); "
        "call interlude.core.thaw() for a mutable copy"
    )


_set_attr = object.__setattr__


class PMap(Mapping[str, Any]):
    """An immutable, ordered JSON object: ``set`` and ``without`` return new versions."""

    __slots__ = ("_count", "_hash", "_order", "_root")
    _count: int
    _order: PVec[Any]  # keys in insertion order, _GAP where one was removed
    _root: _Node
    _hash: int

    __setattr__ = _frozen
    __delattr__ = _frozen

    def __init__(self) -> None:
        raise TypeError("use PMap.from_mapping()")

    @staticmethod
    def _make(count: int, order: PVec[Any], root: _Node) -> PMap:
        m: PMap = object.__new__(PMap)
        _set_attr(m, "_count", count)
        _set_attr(m, "_order", order)
        _set_attr(m, "_root", root)
        return m

    @classmethod
    def from_mapping(cls, members: Mapping[str, Any]) -> PMap:
        """A map of ``members``, in their order; O(n). They are checked and frozen as
        ``freeze`` does (``NotJSONError``), so a list given is copied: changing it later
        changes nothing built from the map."""
        from .json import freeze  # json imports this module

        return cls.from_frozen_items(freeze(dict(members.items())).items())

    @classmethod
    def from_frozen_items(cls, items: Iterable[tuple[str, Any]]) -> PMap:
        """A map of ``items`` whose values are frozen already, a repeated key keeping its
        first place and its last value (unchecked: interlude's own code)."""
        root = _Node()
        keys: list[str] = []
        for key, value in items:
            entry = _lookup(root, key, hash(key))
            if entry is None:
                _insert_in_place(root, key, hash(key), (len(keys), value))
                keys.append(key)
            else:
                _insert_in_place(root, key, hash(key), (entry[0], value))
        return PMap._make(len(keys), PVec.from_iterable(keys), root)

    # -- reads -----------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _entry(self, key: object) -> tuple[int, Any] | None:
        if type(key) is not str and isinstance(key, str):
            key = str.__str__(key)  # a StrEnum member finds its text, as in a dict of str
        # Any other key is looked up as a dict of str would: by its hash (an unhashable
        # key raises TypeError) and equality, so an object that grows into a PMap
        # answers every read as the FrozenDict it was.
        return _lookup(self._root, key, hash(key))  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> Any:
        entry = self._entry(key)
        if entry is None:
            raise KeyError(key)
        return entry[1]

    def __contains__(self, key: object) -> bool:
        return self._entry(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        entry = self._entry(key)
        return default if entry is None else entry[1]

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._order if k is not _GAP)

    def __reversed__(self) -> Iterator[str]:
        return (k for k in reversed(self._order) if k is not _GAP)

    # A Mapping's items() and values() look every key up in the trie; merging the
    # leaves into one dict (a C-level update per leaf) and reading it in order is
    # about twice as cheap, and writing a request's state reads every member.

    def items(self) -> ItemsView[str, Any]:
        return self._as_dict().items()

    def values(self) -> ValuesView[Any]:
        return self._as_dict().values()

    def _as_dict(self) -> dict[str, Any]:
        flat: dict[str, tuple[int, Any]] = {}
        stack = [self._root]
        while stack:
            for child in stack.pop().values():
                if type(child) is _Node:
                    stack.append(child)
                else:
                    flat.update(child)
        return {k: flat[k][1] for k in self._order if k is not _GAP}

    # -- updates ---------------------------------------------------------------

    def set(self, key: str, value: object) -> PMap:
        """A new map with ``key`` set (appended if new); this one is unchanged.

        ``value`` is checked and frozen as ``freeze`` does, as ``FrozenDict.set`` does
        (a shared state wide enough to be a ``PMap`` is derived from the same way)."""
        from .json import freeze  # json imports this module

        ((k, v),) = freeze({key: value}).items()
        return self.with_member(k, v)

    def with_member(self, key: str, value: Any) -> PMap:
        """``set`` for a ``value`` that is frozen JSON already (unchecked: interlude's
        own code, such as a patch, whose values were checked on entry)."""
        h = hash(key)
        entry = _lookup(self._root, key, h)
        if entry is not None:
            root = _with(self._root, key, h, (entry[0], value), 0)
            return PMap._make(self._count, self._order, root)
        order = self._order
        root = _with(self._root, key, h, (len(order), value), 0)
        return PMap._make(self._count + 1, order.append(key), root)

    def without(self, key: str) -> PMap:
        """A new map without ``key`` (which must be present); this one is unchanged."""
        h = hash(key)
        entry = _lookup(self._root, key, h)
        if entry is None:
            raise KeyError(key)
        count = self._count - 1
        order = self._order.set(entry[0], _GAP)
        root = _without(self._root, key, h, 0)
        if len(order) - count > max(count, _LEAF_MAX):
            # Gaps outnumber members: renumber them (amortized over the removals).
            return _compacted(root, count)
        return PMap._make(count, order, root)

    # -- equality, hashing, copying --------------------------------------------

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(other) != self._count:
            return False
        missing = object()
        return all(other.get(k, missing) == v for k, v in self.items())

    def __hash__(self) -> int:
        h: int | None = getattr(self, "_hash", None)
        if h is None:
            h = hash(frozenset(self.items()))  # as a FrozenDict with these members
            _set_attr(self, "_hash", h)
        return h

    # A patch turns a wide FrozenDict into a PMap: what the dict methods a FrozenDict
    # keeps do (a merge or a copy into a plain dict), it does too.

    def __or__(self, other: object) -> dict[str, Any]:
        if not isinstance(other, dict | PMap):
            return NotImplemented
        merged = dict(self.items())
        merged.update(other.items())
        return merged

    def __ror__(self, other: object) -> dict[str, Any]:
        if not isinstance(other, dict):
            return NotImplemented
        merged = dict(other)
        merged.update(self.items())
        return merged

    __ior__ = _frozen  # in place, as FrozenDict's |= does

    def copy(self) -> dict[str, Any]:
        """A shallow, mutable ``dict`` of the members (as ``FrozenDict.copy()`` gives)."""
        return dict(self.items())

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PMap.from_mapping, (dict(self.items()),))

    def __copy__(self) -> PMap:
        return self

    def __deepcopy__(self, memo: object) -> PMap:
        return self


def _entries(root: _Node) -> list[tuple[int, str, Any]]:
    """Every member as ``(position, key, value)``, in order: the leaves are read
    directly, so no member is looked up."""
    entries: list[tuple[int, str, Any]] = []
    stack = [root]
    while stack:
        for child in stack.pop().values():
            if type(child) is _Node:
                stack.append(child)
            else:
                entries.extend((pos, k, v) for k, (pos, v) in child.items())
    entries.sort(key=itemgetter(0))
    return entries


def _compacted(root: _Node, count: int) -> PMap:
    """A map of ``root``'s members, their positions renumbered without gaps."""
    entries = _entries(root)
    fresh = _Node()
    for n, (_, k, v) in enumerate(entries):
        _insert_in_place(fresh, k, hash(k), (n, v))
    return PMap._make(count, PVec.from_iterable(k for _, k, _ in entries), fresh)


def _lookup(node: _Node, key: str, h: int) -> tuple[int, Any] | None:
    shift = 0
    while True:
        child = node.get((h >> shift) & _MASK)
        if child is None:
            return None
        if type(child) is _Leaf:
            return child.get(key)
        node = child
        shift += _BITS


def _with(node: _Node, key: str, h: int, entry: tuple[int, Any], shift: int) -> _Node:
    """``node`` with ``key`` → ``entry``, copying one dict per level on the way."""
    slot = (h >> shift) & _MASK
    child = node.get(slot)
    copy = _Node(node)
    if child is None:
        copy[slot] = _Leaf({key: entry})
    elif type(child) is _Node:
        copy[slot] = _with(child, key, h, entry, shift + _BITS)
    elif key in child or len(child) < _LEAF_MAX or shift + _BITS > _MAX_SHIFT:
        leaf = _Leaf(child)
        leaf[key] = entry
        copy[slot] = leaf
    else:
        # A full leaf splits into a node one level down (the leaf itself is not changed).
        split = _Node()
        for k, e in child.items():
            _insert_in_place(split, k, hash(k), e, shift + _BITS)
        _insert_in_place(split, key, h, entry, shift + _BITS)
        copy[slot] = split
    return copy


def _insert_in_place(node: _Node, key: str, h: int, entry: tuple[int, Any], shift: int = 0) -> None:
    """Put ``key`` → ``entry`` into a trie under construction (no other version sees it)."""
    while True:
        slot = (h >> shift) & _MASK
        child = node.get(slot)
        if child is None:
            node[slot] = _Leaf({key: entry})
            return
        if type(child) is _Node:
            node, shift = child, shift + _BITS
            continue
        if key in child or len(child) < _LEAF_MAX or shift + _BITS > _MAX_SHIFT:
            child[key] = entry
            return
        split = _Node()
        for k, e in child.items():
            _insert_in_place(split, k, hash(k), e, shift + _BITS)
        node[slot] = split
        node, shift = split, shift + _BITS


def _without(node: _Node, key: str, h: int, shift: int) -> _Node:
    """``node`` without ``key`` (present), copying one dict per level."""
    slot = (h >> shift) & _MASK
    child = node[slot]
    copy = _Node(node)
    if type(child) is _Node:
        copy[slot] = _without(child, key, h, shift + _BITS)
    elif len(child) == 1:
        del copy[slot]
    else:
        leaf = _Leaf(child)
        del leaf[key]
        copy[slot] = leaf
    return copy
