"""PVec against a list, and Rope against string concatenation."""

from __future__ import annotations

import copy
import operator
import pickle
from collections.abc import Sequence
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interlude.core.json import freeze
from interlude.core.patch import SHARE_FROM, apply_patch
from interlude.core.pvec import PVec, Rope

# -- PVec -------------------------------------------------------------------------


def trie_nodes(v: PVec[Any]) -> list[tuple[Any, ...]]:
    """Every inner node and leaf of ``v``'s trie, plus its tail (white-box)."""
    out, stack = [v._tail], [(v._root, v._shift)]
    while stack:
        node, level = stack.pop()
        out.append(node)
        if level > 0:
            stack.extend((child, level - 5) for child in node)
    return out


@settings(max_examples=60)
@given(
    st.integers(0, 40_000),
    st.lists(
        st.tuples(
            st.sampled_from(["append", "set", "extend", "get", "pop"]),
            st.integers(),
            st.integers(0, 70),
        ),
        max_size=30,
    ),
)
def test_pvec_matches_list(start: int, steps: list[tuple[str, int, int]]) -> None:
    v: PVec[int] = PVec.from_iterable(range(start))
    ref = list(range(start))
    history = [(v, list(ref))]
    for kind, a, b in steps:
        if kind == "append":
            v, ref = v.append(a), [*ref, a]
        elif kind == "extend":
            v, ref = (
                v.extend(range(a % 1000, a % 1000 + b)),
                ref + list(range(a % 1000, a % 1000 + b)),
            )
        elif not ref:
            with pytest.raises(IndexError):
                v.set(a, b) if kind == "set" else v.pop()
            continue
        elif kind == "pop":
            v, ref = v.pop(), ref[:-1]
        elif kind == "set":
            i = a % (2 * len(ref)) - len(ref)  # negative indices too
            ref = list(ref)
            ref[i] = b
            v = v.set(i, b)
        else:
            i = a % (2 * len(ref)) - len(ref)
            assert v[i] == ref[i]
        history.append((v, list(ref)))
        assert len(v) == len(ref)
    for old, snapshot in history:  # every version is unchanged by later updates
        assert list(old) == snapshot
        assert old == snapshot


def test_append_one_by_one_across_trie_levels() -> None:
    # Past 32 (first leaf), 32 + 32**2 (root grows to 2 levels), 32 + 32**3 (3 levels).
    n = 32 + 32**3 + 40
    v: PVec[int] = PVec.empty()
    for i in range(n):
        v = v.append(i)
    assert list(v) == list(range(n))
    assert v == PVec.from_iterable(range(n))
    for i in (0, 31, 32, 1023, 1024, 1055, 1056, 32767, 32768, 32799, 32800, n - 1):
        assert v[i] == i
        w = v.set(i, -1)
        assert w[i] == -1 and v[i] == i
        assert list(w) == [*range(i), -1, *range(i + 1, n)]


def test_from_iterable_builds_the_trie_appending_would() -> None:
    """from_iterable builds bottom-up, a level at a time; the result must be the very
    shape appends give (tail of 1 to 32 items, levels grown at the same counts), or a
    later append, set or read would walk it wrongly."""
    sizes = [0, 1, 31, 32, 33, 64, 65, 1024, 1056, 1057, 1088, 1089, 32800, 32801, 32832]
    appended: PVec[int] = PVec.empty()
    built = 0
    for n in sizes:
        for i in range(built, n):
            appended = appended.append(i)
        built = n
        v: PVec[int] = PVec.from_iterable(range(n))
        shape = (v._count, v._shift, v._root, v._tail)
        assert shape == (appended._count, appended._shift, appended._root, appended._tail), n
        assert list(v.append(-1)) == [*range(n), -1]


def test_extend_to_a_full_leaf_builds_the_trie_from_iterable_would() -> None:
    """extend fills the tail, then moves full tails into the trie; a vector extended to
    exactly fill a leaf (32, 64, 1056 items) must have the shape from_iterable gives
    (a full tail, never an empty one), or a later pop or append walks it wrongly."""
    for start, added in [(0, 32), (10, 22), (0, 64), (31, 1), (32, 32), (1000, 56), (5, 1051)]:
        n = start + added
        v: PVec[int] = PVec.from_iterable(range(start)).extend(range(start, n))
        u: PVec[int] = PVec.from_iterable(range(n))
        assert (v._count, v._shift, v._root, v._tail) == (u._count, u._shift, u._root, u._tail)
        assert list(v.pop()) == list(range(n - 1)) and list(v.append(-1)) == [*range(n), -1]


def test_set_copies_one_path() -> None:
    v: PVec[int] = PVec.from_iterable(range(100_000))
    w = v.set(12_345, -1)
    old = {id(n) for n in trie_nodes(v)}
    new = [n for n in trie_nodes(w) if id(n) not in old]
    assert len(new) == 4  # one node per level: root, 2 inner, the leaf
    assert sum(len(n) for n in new) <= 4 * 32
    assert w._tail is v._tail


def test_pop_gives_the_trie_from_iterable_would_and_copies_one_path() -> None:
    """pop() of every size across the trie's level changes has the shape the shorter
    vector built whole has (a later append, set or read walks it), and copies a path,
    not the vector: a stack popped n times costs O(n log n), not O(n^2)."""
    for n in (1, 2, 32, 33, 34, 65, 1056, 1057, 1058, 32800, 32801, 32802, 33825):
        v: PVec[int] = PVec.from_iterable(range(n))
        w, u = v.pop(), PVec.from_iterable(range(n - 1))
        assert (w._count, w._shift, w._root, w._tail) == (u._count, u._shift, u._root, u._tail)
        assert list(w.append(-1)) == [*range(n - 1), -1] and list(v) == list(range(n))
        old = {id(node) for node in trie_nodes(v)}
        assert sum(len(node) for node in trie_nodes(w) if id(node) not in old) <= 4 * 32
    with pytest.raises(IndexError):
        PVec.empty().pop()


@settings(max_examples=100)
@given(
    st.integers(0, 3000),
    st.none() | st.integers(-4000, 4000),
    st.none() | st.integers(-4000, 4000),
    st.none() | st.integers(-70, 70).filter(bool),
)
# Steps other than 1, in the trie and the tail: only a step of 1 is read leaf by leaf, so
# a step of 2 must not be taken for one (the random steps above may never draw it).
@example(0, None, None, 2)
@example(5, None, None, 2)
@example(33, None, -1, -2)
@example(100, 1, None, 2)
@example(1100, 3, 550, 3)
@example(1100, -40, 1100, 33)
@example(1100, None, None, -3)
def test_slices(n: int, start: int | None, stop: int | None, step: int | None) -> None:
    v: PVec[int] = PVec.from_iterable(range(n))
    s = slice(start, stop, step)
    got = v[s]
    assert isinstance(got, PVec)
    assert list(got) == list(range(n))[s]


@settings(max_examples=50)
@given(st.lists(st.integers(), max_size=100), st.lists(st.integers(), max_size=100))
def test_extend_and_reversed(a: list[int], b: list[int]) -> None:
    v = PVec.from_iterable(a)
    assert list(v.extend(b)) == a + b
    assert list(v) == a
    assert list(reversed(v.extend(b))) == (a + b)[::-1]


def test_indexing_errors() -> None:
    v = PVec.from_iterable("abc")
    assert v[-1] == "c" and v[-3] == "a"
    for i in (3, -4, 10**30):
        with pytest.raises(IndexError):
            v[i]
        with pytest.raises(IndexError):
            v.set(i, "x")
    with pytest.raises(TypeError):
        v["0"]  # type: ignore[call-overload]
    with pytest.raises(IndexError):
        PVec.empty()[0]
    for n in (32, 64, 100, 1056):  # tail full or not: n and -n-1 must not wrap around
        w = PVec.from_iterable(range(n))
        assert list(w.set(-1, "x")) == [*range(n - 1), "x"] and w.set(-n, "x")[0] == "x"
        for i in (n, -n - 1):
            with pytest.raises(IndexError):
                w.set(i, "x")
            with pytest.raises(IndexError):
                w[i]


class Index:
    """An index that is an object with ``__index__`` only (as a NumPy integer or a
    user's index type): a sequence takes it wherever it takes an ``int``."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __index__(self) -> int:
        return self.i


def test_any_index_type_reads_and_sets_as_its_int_does() -> None:
    """``v[i]`` and ``v.set(i, x)`` take any object with ``__index__``, as the tuple a
    PVec stands in for does: in the trie, in the tail, from the end, and out of range
    (an ``IndexError``). Only a plain ``int`` is read inline; the rest must not reach
    that path's ``<`` (an ``__index__`` object has no order)."""
    v: PVec[int] = PVec.from_iterable(range(100))
    t = tuple(range(100))
    for i in (0, 5, 40, 95, 96, 99, -1, -4, -5, -100):
        assert v[Index(i)] == t[Index(i)]
        assert v.set(Index(i), -7)[i] == -7 and v[i] == t[i]
    for i in (100, -101):
        with pytest.raises(IndexError):
            v[Index(i)]
        with pytest.raises(IndexError):
            v.set(Index(i), -7)


def test_value_semantics() -> None:
    v = PVec.from_iterable([1, 2, 3])
    assert v == (1, 2, 3) and v == [1, 2, 3]
    assert operator.eq((1, 2, 3), v) and operator.eq([1, 2, 3], v)  # reflected
    assert v == PVec[int].empty().append(1).append(2).append(3)
    assert v != (1, 2) and v != [1, 2, 4] and v != "123" and v != {1, 2, 3}
    assert hash(v) == hash((1, 2, 3)) == hash(PVec.from_iterable((1, 2, 3)))
    table: dict[Any, int] = {v: 1}
    assert table[(1, 2, 3)] == 1
    assert repr(v) == "PVec([1, 2, 3])"
    assert isinstance(v, Sequence)
    assert 2 in v and v.index(3) == 2 and v.count(1) == 1
    assert PVec.empty() == () and len(PVec.empty()) == 0
    assert pickle.loads(pickle.dumps(v)) == v and copy.deepcopy(v) == v


class Unequal:
    """An item whose ``==`` fails loudly: a comparison that reaches the items shows."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("items compared")

    __hash__ = object.__hash__


def test_versions_sharing_a_trie_or_a_tail_are_told_apart() -> None:
    """Versions of a vector share their trie (an append or a pop in the tail) or their
    tail (a set in the trie): equality still compares items, so a changed state never
    passes for the old one. A vector is equal to itself without its items being
    compared: O(1), as a tuple's ``t == t``."""
    v: PVec[int] = PVec.from_iterable(range(100))
    for other in (v.append(100), v.pop(), v.set(0, -1), v.set(99, -1), v.set(40, -1)):
        assert v != other and other != v and operator.eq(v, other) is False
    assert v == v.set(0, 0) and v.set(99, 99) == v  # another version with the same items
    loud = PVec.from_iterable([Unequal()] * 40)
    assert loud == loud and operator.ne(loud, loud) is False
    assert PVec.from_iterable([]) is PVec.empty() and PVec.empty().extend([]) is PVec.empty()


def test_it_concatenates_repeats_and_orders_as_its_tuple_does() -> None:
    """A patch turns an array of SHARE_FROM items or more into a PVec; code written for
    the tuple it was (``state["items"] + (item,)``, sorting) must keep working then."""
    ops = freeze([{"op": "add", "path": "/-", "value": 63}])
    v: Any = apply_patch(tuple(range(63)), ops)
    t = tuple(range(64))
    assert type(v) is PVec and len(v) == SHARE_FROM
    for got, expected in [
        (v + ("x",), (*t, "x")),  # noqa: RUF005 (the operator is what is tested)
        (("x",) + v, ("x", *t)),  # noqa: RUF005
        (v + v, t + t),
        (v * 2, t * 2),
        (2 * v, t * 2),
        (v * 1, t),
        (v * 0, ()),
        (v * -3, ()),
    ]:
        assert got == expected and list(got) == list(expected)
    for bad in ([1], 1, "x", None):
        with pytest.raises(TypeError):
            v + bad
        with pytest.raises(TypeError):
            bad + v
    with pytest.raises(TypeError):
        v * 1.5
    bigger = (*t[:-1], 64)
    assert v < bigger and bigger > v and v <= t and v >= t and not v < t and t <= v
    assert not v > t and not t > v and not v > v.append(0) and v.append(0) > v
    assert v < v.append(0) and not v.append(0) <= v and (0,) < v < (1,)
    assert sorted([bigger, v, t[:3]]) == [t[:3], t, bigger]
    with pytest.raises(TypeError):
        v < [0]  # noqa: B015 (as a tuple with a list: no order)


def test_repeating_once_reuses_the_vector() -> None:
    """``v * 1`` is ``v`` itself, as ``t * 1`` is ``t`` for a tuple: the vector is immutable,
    so code that repeats a state's array by a count of 1 copies nothing."""
    v = PVec.from_iterable(range(100))
    assert v * 1 is v and 1 * v is v
    assert list(v * 2) == [*range(100), *range(100)] and (v * 0) is PVec.empty()


def test_immutable() -> None:
    """Changing a vector in place, or making one with ``PVec()``, fails saying what to do."""
    v = PVec.from_iterable([1])
    with pytest.raises(AttributeError, match=r"^PVec is immutable$"):
        v._count = 5
    with pytest.raises(AttributeError, match=r"^PVec is immutable$"):
        del v._tail
    with pytest.raises(TypeError, match=r"^use PVec\.empty\(\) or PVec\.from_iterable\(\)$"):
        PVec()
    with pytest.raises(AttributeError, match=r"^Rope is immutable$"):
        Rope("a")._len = 0


# -- Rope -------------------------------------------------------------------------


@settings(max_examples=100)
@given(st.lists(st.tuples(st.text(max_size=5), st.booleans()), max_size=60))
def test_rope_matches_concatenation(steps: list[tuple[str, bool]]) -> None:
    rope, text = Rope.EMPTY, ""
    history = [(rope, text)]
    for delta, read in steps:
        rope, text = rope.append(delta), text + delta
        history.append((rope, text))
        if read:  # memoizing on one version must not change any other
            assert str(rope) == text
    for old, expected in history:
        assert len(old) == len(expected)
        assert str(old) == expected
        assert str(old) == expected  # memoized read agrees


def test_rope_value_semantics() -> None:
    a = Rope("he").append("llo")
    b = Rope().append("h").append("").append("ello")
    assert a == b and a == "hello" and operator.eq("hello", a)
    assert hash(a) == hash(b) == hash("hello")
    assert a != Rope("help") and a != "hell" and a != 5
    assert a != "hellx" and a != Rope("hellx")  # the same length, other text
    assert Rope.EMPTY == Rope() == "" and len(Rope.EMPTY) == 0
    assert a.append("") is a
    assert repr(a) == "Rope('hello')"
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a._len = 0


def test_comparing_with_other_kinds_defers_to_them() -> None:
    """``==`` with something that is not a sequence (or not text) is False, and lets the
    other side decide first, as tuples and strings do: ``unittest.mock.ANY`` (how tests
    leave a field unchecked) equals a PVec and a Rope."""
    v, rope = PVec.from_iterable([1, 2]), Rope("ab")
    for ours, same in ((v, (1, 2)), (rope, "ab")):
        for other in (5, None, {1: 2}):
            assert operator.eq(ours, other) is False and operator.ne(ours, other) is True
        assert ours == mock.ANY and operator.eq(ours, same) is True


def test_rope_many_deltas() -> None:
    rope = Rope.EMPTY
    for i in range(200_000):
        rope = rope.append(chr(97 + i % 26))
    assert len(rope) == 200_000
    text = str(rope)
    assert text[:3] == "abc" and len(text) == 200_000
    assert str(rope) is text  # joined once
    del rope  # a 200k-node chain is freed without blowing the C stack
