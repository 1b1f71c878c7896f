"""Persistent sequences for state that grows one item at a time.

:class:`PVec` is a 32-way trie with a tail (Clojure's persistent vector): append
copies at most the 32-slot tail (amortized O(1)); ``set`` and indexing touch one
node per level, log32(n) levels (4 for a million items). Old versions stay valid
and share all untouched nodes with new ones.

:class:`Rope` accumulates streamed text deltas in O(1) each, joining them only
when the text is read.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, ClassVar, NoReturn, TypeVar, overload

__all__ = ["PVec", "Rope"]

T = TypeVar("T")

_BITS = 5
_WIDTH = 1 << _BITS  # 32
_MASK = _WIDTH - 1

# A node is a tuple: of sub-nodes at inner levels, of items at the leaves.
_Node = tuple[Any, ...]

_set = object.__setattr__


def _frozen(self: object, *_: object) -> NoReturn:
    raise AttributeError(f"{type(self).__name__} is immutable")


class PVec(Sequence[T]):
    """An immutable vector: every update returns a new version, sharing structure."""

    __slots__ = ("_count", "_hash", "_root", "_shift", "_tail")
    _count: int
    _shift: int  # bits consumed by the root level
    _root: _Node  # the trie holding all items before the tail
    _tail: _Node  # the last 1..32 items (empty only when the vector is)
    _hash: int

    __setattr__ = _frozen
    __delattr__ = _frozen

    def __init__(self) -> None:
        raise TypeError("use PVec.empty() or PVec.from_iterable()")

    @staticmethod
    def _make(count: int, shift: int, root: _Node, tail: _Node) -> PVec[Any]:
        v: PVec[Any] = _new(PVec)
        _set_count(v, count)
        _set_shift(v, shift)
        _set_root(v, root)
        _set_tail(v, tail)
        return v  # _hash stays unset until first asked for

    @classmethod
    def empty(cls) -> PVec[T]:
        """The empty vector (one shared instance)."""
        return _EMPTY

    @classmethod
    def from_iterable(cls, items: Iterable[T]) -> PVec[T]:
        """A vector of ``items``, built bottom-up in O(n): sliced into leaves, which are
        grouped 32 to a node, level by level (Python work per 32 items)."""
        new = items if type(items) is list else list(items)
        count = len(new)
        if not count:
            return _EMPTY
        in_trie = (count - 1) >> _BITS << _BITS  # the tail keeps 1 to 32 items
        nodes: list[Any] = [tuple(new[i : i + _WIDTH]) for i in range(0, in_trie, _WIDTH)]
        shift = _BITS
        while len(nodes) > _WIDTH:
            nodes = [tuple(nodes[i : i + _WIDTH]) for i in range(0, len(nodes), _WIDTH)]
            shift += _BITS
        return PVec._make(count, shift, tuple(nodes), tuple(new[in_trie:]))

    # -- reads -----------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _leaf(self, i: int) -> _Node:
        """The leaf holding index ``i`` (0 <= i < count)."""
        if i >= self._count - len(self._tail):
            return self._tail
        node = self._root
        for level in range(self._shift, 0, -_BITS):
            node = node[(i >> level) & _MASK]
        return node

    def _norm(self, index: int) -> int:
        i = operator.index(index)
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("PVec index out of range")
        return i

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> PVec[T]: ...
    def __getitem__(self, index: int | slice) -> T | PVec[T]:
        if isinstance(index, slice):
            r = range(*index.indices(self._count))
            if r.step == 1:
                return _EMPTY.extend(self._iter_range(r.start, r.stop))
            return _EMPTY.extend(self[i] for i in r)
        if type(index) is int:
            # The common read, inlined: the newest items live in the tail.
            count = self._count
            i = index + count if index < 0 else index
            if count - len(self._tail) <= i < count:
                return self._tail[i & _MASK]  # type: ignore[no-any-return]
        i = self._norm(index)
        return self._leaf(i)[i & _MASK]  # type: ignore[no-any-return]

    def _iter_range(self, start: int, stop: int) -> Iterator[T]:
        i = start
        while i < stop:
            leaf = self._leaf(i)
            lo = i & _MASK
            hi = min(len(leaf), lo + stop - i)
            yield from leaf[lo:hi]
            i += hi - lo

    def __iter__(self) -> Iterator[T]:
        # Leaf by leaf: Python work per 32 items, C work per item.
        return chain.from_iterable(self._leaves())

    def _leaves(self) -> list[_Node]:
        """The leaves in order, the tail last: the trie flattened a level at a time."""
        level: list[Any] = [self._root]
        for _ in range(self._shift // _BITS):
            level = list(chain.from_iterable(level))
        level.append(self._tail)
        return level

    def __reversed__(self) -> Iterator[T]:
        i = self._count  # always at the end of a leaf (the tail, or a full one)
        while i > 0:
            leaf = self._leaf(i - 1)
            yield from reversed(leaf)
            i -= len(leaf)

    # -- updates ---------------------------------------------------------------

    def append(self, item: T) -> PVec[T]:
        """A new vector with ``item`` at the end: amortized O(1)."""
        tail = self._tail
        if len(tail) < _WIDTH:
            return PVec._make(self._count + 1, self._shift, self._root, (*tail, item))
        shift, root = _push_tail(self._count, self._shift, self._root, tail)
        return PVec._make(self._count + 1, shift, root, (item,))

    def set(self, index: int, item: T) -> PVec[T]:
        """A new vector with ``item`` at ``index``: copies log32(n) nodes of <= 32 slots."""
        i = index if type(index) is int and 0 <= index < self._count else self._norm(index)
        if i >= self._count - len(self._tail):
            tail = list(self._tail)  # list, set, tuple: half the cost of slicing around j
            tail[i & _MASK] = item
            return PVec._make(self._count, self._shift, self._root, tuple(tail))
        return PVec._make(
            self._count, self._shift, _assoc(self._shift, self._root, i, item), self._tail
        )

    def pop(self) -> PVec[T]:
        """A new vector without its last item: copies log32(n) nodes of <= 32 slots."""
        count, shift, root, tail = self._count, self._shift, self._root, self._tail
        if count <= 1:
            if not count:
                raise IndexError("pop from an empty PVec")
            return _EMPTY
        if len(tail) > 1:
            return PVec._make(count - 1, shift, root, tail[:-1])
        # The tail empties: the trie's last leaf becomes the tail, and a root left with
        # one child gives way to it, as from_iterable would build the shorter vector.
        last = self._leaf(count - 2)
        root = _pop(shift, root, ((count - 1) >> _BITS) - 1)
        while shift > _BITS and len(root) == 1:
            root, shift = root[0], shift - _BITS
        return PVec._make(count - 1, shift, root, last)

    def extend(self, items: Iterable[T]) -> PVec[T]:
        """A new vector with ``items`` appended, a leaf at a time (O(len(items)))."""
        new = list(items)
        if not new:
            return self
        count, shift, root, tail = self._count, self._shift, self._root, self._tail
        pos = _WIDTH - len(tail)  # fill the current tail first
        tail = (*tail, *new[:pos])
        count += min(pos, len(new))
        while pos < len(new):
            shift, root = _push_tail(count, shift, root, tail)  # the tail is full
            tail = tuple(new[pos : pos + _WIDTH])
            count += len(tail)
            pos += _WIDTH
        return PVec._make(count, shift, root, tail)

    # -- values ----------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PVec):
            if other._root is self._root and other._tail is self._tail:
                return True
        elif not isinstance(other, tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        # Equal to the tuple's hash, since a PVec equals the tuple of its items.
        try:
            return self._hash
        except AttributeError:
            h = hash(tuple(self))
            _set(self, "_hash", h)
            return h

    # A patch turns a long tuple into a PVec: what a tuple does, it does too.

    def __add__(self, other: object) -> PVec[Any]:
        if isinstance(other, tuple | PVec):
            return self.extend(other)
        return NotImplemented  # as tuple + list: a TypeError

    def __radd__(self, other: object) -> PVec[Any]:
        if isinstance(other, tuple):
            return PVec.from_iterable([*other, *self])
        return NotImplemented

    def __mul__(self, times: object) -> PVec[T]:
        try:
            n = operator.index(times)  # type: ignore[arg-type]
        except TypeError:
            return NotImplemented
        return PVec.from_iterable(list(self) * n) if n > 1 else self if n == 1 else _EMPTY

    __rmul__ = __mul__

    def __lt__(self, other: object) -> bool:
        t = _as_tuple(other)
        return NotImplemented if t is None else tuple(self) < t

    def __le__(self, other: object) -> bool:
        t = _as_tuple(other)
        return NotImplemented if t is None else tuple(self) <= t

    def __gt__(self, other: object) -> bool:
        t = _as_tuple(other)
        return NotImplemented if t is None else tuple(self) > t

    def __ge__(self, other: object) -> bool:
        t = _as_tuple(other)
        return NotImplemented if t is None else tuple(self) >= t

    def __repr__(self) -> str:
        return f"PVec({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PVec.from_iterable, (tuple(self),))


def _as_tuple(other: object) -> tuple[Any, ...] | None:
    """``other`` as a tuple to order against, if it is one or a PVec (as tuples order)."""
    if isinstance(other, tuple):
        return other
    return tuple(other) if isinstance(other, PVec) else None


def _push_tail(count: int, shift: int, root: _Node, tail: _Node) -> tuple[int, _Node]:
    """The (shift, root) of a ``count``-item vector's trie with its full ``tail`` moved in."""
    leaves = (count >> _BITS) - 1  # full leaves already in the trie
    if leaves == 1 << shift:  # the root is full: grow a level
        return shift + _BITS, (root, _path(shift, tail))
    return shift, _push(shift, root, leaves, tail)


def _path(level: int, node: _Node) -> _Node:
    """``node`` wrapped in single-child inner nodes up to ``level``."""
    while level > 0:
        node = (node,)
        level -= _BITS
    return node


def _push(level: int, parent: _Node, leaf_index: int, leaf: _Node) -> _Node:
    """``parent`` (at ``level``) with ``leaf`` stored as its ``leaf_index``-th leaf."""
    sub = (leaf_index >> (level - _BITS)) & _MASK
    if level == _BITS:
        child = leaf
    elif sub < len(parent):
        child = _push(level - _BITS, parent[sub], leaf_index, leaf)
    else:
        child = _path(level - _BITS, leaf)
    return (*parent[:sub], child, *parent[sub + 1 :])


def _pop(level: int, parent: _Node, leaf_index: int) -> _Node:
    """``parent`` (at ``level``) without its last leaf, the ``leaf_index``-th."""
    sub = (leaf_index >> (level - _BITS)) & _MASK
    child = _pop(level - _BITS, parent[sub], leaf_index) if level > _BITS else ()
    return (*parent[:sub], child) if child else parent[:sub]


def _assoc(level: int, node: _Node, i: int, item: object) -> _Node:
    """``node`` (at ``level``) with index ``i`` set to ``item``: copies one node per level."""
    sub = (i >> level) & _MASK
    copy = list(node)
    copy[sub] = item if level == 0 else _assoc(level - _BITS, node[sub], i, item)
    return tuple(copy)


# Slot setters that bypass the blocked __setattr__ (about twice as fast as object.__setattr__).
_new = object.__new__
_set_count = PVec.__dict__["_count"].__set__
_set_shift = PVec.__dict__["_shift"].__set__
_set_root = PVec.__dict__["_root"].__set__
_set_tail = PVec.__dict__["_tail"].__set__

_EMPTY: PVec[Any] = PVec._make(0, _BITS, (), ())


class Rope:
    """Immutable text built from streamed deltas: O(1) append, joined once when read.

    A cons list of chunks, newest first. ``str()`` joins them and memoizes the
    text on the node by collapsing it to a single chunk, which also lets older
    nodes be freed and keeps the next ``str()`` from re-walking them.
    """

    __slots__ = ("_len", "_link")
    _link: tuple[Rope | None, str]  # (previous node, this chunk); one slot so it swaps atomically
    _len: int

    EMPTY: ClassVar[Rope]

    __setattr__ = _frozen
    __delattr__ = _frozen

    def __init__(self, text: str = "") -> None:
        _set(self, "_link", (None, text))
        _set(self, "_len", len(text))

    def append(self, delta: str) -> Rope:
        """A new rope with ``delta`` at the end (O(1); this one is unchanged)."""
        if not delta:
            return self
        r = _new(Rope)
        _set_link(r, (self, delta))
        _set_len(r, self._len + len(delta))
        return r

    def __len__(self) -> int:
        return self._len

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The whole text (``str(rope)``; a plain method call is cheaper on the hot path)."""
        prev, chunk = self._link
        if prev is None:
            return chunk
        before, first = prev._link
        if before is None:
            text = first + chunk  # the common case: the text so far was read already
        else:
            chunks = [chunk, first]
            while before is not None:
                before, first = before._link
                chunks.append(first)
            text = "".join(reversed(chunks))
        _set_link(self, (None, text))
        return text

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rope):
            return self is other or (self._len == other._len and str(self) == str(other))
        if isinstance(other, str):
            return self._len == len(other) and str(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))  # equal to the text's, as a Rope equals its text

    def __repr__(self) -> str:
        return f"Rope({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Rope, (str(self),))


_set_link = Rope.__dict__["_link"].__set__
_set_len = Rope.__dict__["_len"].__set__

Rope.EMPTY = Rope()
