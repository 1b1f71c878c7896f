"""PMap against a dict: members, order, equality and hashing, old versions kept."""

from __future__ import annotations

import copy
import operator
import pickle
from collections import UserString
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.core.json import FrozenDict, freeze, json_default, thaw
from interlude.core.patch import SHARE_MEMBERS_FROM, apply_patch
from interlude.core.pmap import _LEAF_MAX, _MASK, PMap, _Node

KEYS = st.sampled_from([f"k{i}" for i in range(300)]) | st.text(max_size=3)
STEPS = st.lists(
    st.tuples(st.sampled_from(["set", "without", "get"]), KEYS, st.integers()), max_size=200
)


@settings(max_examples=150)
@given(st.integers(0, 3000), STEPS)
def test_pmap_matches_a_dict_and_keeps_every_version(start: int, steps: list[Any]) -> None:
    ref = {f"k{i}": i for i in range(start)}
    m = PMap.from_mapping(ref)
    history = [(m, dict(ref))]
    for kind, key, value in steps:
        if kind == "set":
            m, ref = m.set(key, value), {**ref, key: value}
        elif kind == "without":
            if key not in ref:
                with pytest.raises(KeyError):
                    m.without(key)
                continue
            m, ref = m.without(key), {k: v for k, v in ref.items() if k != key}
        else:
            assert m.get(key, "absent") == ref.get(key, "absent")
            assert (key in m) is (key in ref)
            continue
        history.append((m, dict(ref)))
    for version, expected in history[:: max(1, len(history) // 8)] + history[-1:]:
        assert list(version.items()) == list(expected.items())  # order too
        assert list(version.values()) == list(expected.values())
        assert len(version) == len(expected)
        assert version == expected and expected == version
        assert version == FrozenDict(expected) and FrozenDict(expected) == version
        assert hash(version) == hash(FrozenDict(expected))


def test_it_reads_like_a_frozen_dict() -> None:
    m = PMap.from_frozen_items([("a", 1), ("b", (2, 3)), ("a", 4)])  # a repeated key: dict rules
    assert list(m.items()) == [("a", 4), ("b", (2, 3))]
    assert m["a"] == 4 and m.get("zz") is None and "zz" not in m and 5 not in m
    with pytest.raises(KeyError):
        m["zz"]
    assert m != {"a": 4} and m != [("a", 4), ("b", (2, 3))]
    assert repr(m) == "PMap({'a': 4, 'b': (2, 3)})"
    assert thaw(m) == {"a": 4, "b": [2, 3]} and freeze(m) is m
    assert json_default(m) == {"a": 4, "b": (2, 3)}
    assert pickle.loads(pickle.dumps(m)) == m
    assert copy.copy(m) is m and copy.deepcopy(m) is m


def test_a_repeated_key_keeps_its_first_place_when_changed_later() -> None:
    """A key given twice to ``from_frozen_items`` keeps the place of its first
    occurrence: removing it afterwards removes that key alone, and setting it again
    leaves it where it was, as a dict built from the same items would."""
    m = PMap.from_frozen_items([("a", "x"), ("b", 2), ("c", 3), ("a", "y")])
    assert list(m.without("a").items()) == [("b", 2), ("c", 3)]
    assert list(m.without("b").items()) == [("a", "y"), ("c", 3)]
    assert list(m.set("a", "z").items()) == [("a", "z"), ("b", 2), ("c", 3)]


def test_comparing_with_other_kinds_defers_to_them() -> None:
    """``==`` with something that is not a mapping is False, and lets the other side
    decide first, as a dict does: ``unittest.mock.ANY`` (how tests leave a field
    unchecked) equals a PMap. Mappings of other sizes or values are unequal; the map
    itself is equal without its values being compared."""
    m = PMap.from_mapping({"a": 1, "b": [2]})
    for other in (5, None, [("a", 1), ("b", (2,))], "ab"):
        assert operator.eq(m, other) is False and operator.ne(m, other) is True
    assert m == mock.ANY and m == {"a": 1, "b": (2,)} and m == m
    for other in ({"a": 1}, {"a": 1, "b": (2,), "c": 3}, {"a": 1, "c": (2,)}, {"a": 1, "b": (3,)}):
        assert operator.eq(m, other) is False and other != m

    class Unequal:
        def __eq__(self, other: object) -> bool:
            raise AssertionError("values compared")

        __hash__ = object.__hash__

    loud = PMap.from_frozen_items([("a", Unequal())])
    assert loud == loud  # itself: O(1), no value compared


def test_a_member_set_again_then_removed_leaves_the_others_in_order() -> None:
    """Setting a present key keeps its place in the order, and removing it afterwards
    removes that key alone (whatever value it was set to)."""
    for size in (3, 40):
        keys = [f"k{i}" for i in range(size)]
        m = PMap.from_mapping({k: n + 1 for n, k in enumerate(keys)}).set("k0", -1)
        assert list(m) == keys and m["k0"] == -1
        gone = m.without("k0")
        assert list(gone.items()) == [(k, n + 1) for n, k in enumerate(keys) if n]


def test_str_subclass_keys_find_their_text_and_it_reverses() -> None:
    """As in the FrozenDict a PMap replaces: a StrEnum member finds its value's key."""
    import enum

    class Key(enum.StrEnum):
        A = "a"

    m = PMap.from_mapping({"a": 1, "b": 2})
    assert m[Key.A] == 1 and Key.A in m and m.get(Key.A) == 1
    assert list(reversed(m.without("a").set("a", 3))) == ["a", "b"]


@pytest.mark.parametrize(
    "key",
    [UserString("a"), UserString("zz"), 1, None, ("a",), [], {}],
    ids=["UserString found", "UserString missing", "int", "None", "tuple", "list", "dict"],
)
def test_a_key_that_is_not_str_reads_as_in_the_frozen_dict_it_replaces(key: Any) -> None:
    """R-D1: a state object that grows past SHARE_MEMBERS_FROM members becomes a PMap;
    its reads must not change. A key equal to a member's (a UserString) finds it, an
    unhashable key raises TypeError, any other key is absent: as in the FrozenDict."""
    members = {"a": 1, "b": 2}
    m, fd = PMap.from_mapping(members), FrozenDict(members)
    for read in (operator.contains, operator.getitem, lambda d, k: d.get(k, "none")):
        try:
            expected: object = read(fd, key)
        except (KeyError, TypeError) as exc:
            with pytest.raises(type(exc)):
                read(m, key)
        else:
            assert read(m, key) == expected


def test_it_cannot_be_changed_in_place() -> None:
    m = PMap.from_mapping({"a": 1})
    with pytest.raises(TypeError, match="read-only"):
        m.x = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"use PMap\.from_mapping"):
        PMap()
    assert not hasattr(m, "__setitem__") and not hasattr(m, "update")


def test_it_merges_and_copies_into_a_dict_as_a_frozen_dict_does() -> None:
    """A patch turns an object of SHARE_MEMBERS_FROM members into a PMap; code written
    for the FrozenDict it was (``state | {"k": v}``, ``state.copy()`` to edit and send
    back) must keep working then: both give a plain dict, in the members' order."""
    wide = freeze({f"k{i}": i for i in range(SHARE_MEMBERS_FROM)})
    m: Any = apply_patch(wide, freeze([{"op": "replace", "path": "/k0", "value": -1}]))
    fd = FrozenDict({**wide, "k0": -1})
    assert type(m) is PMap
    for got, expected in [
        (m | {"k1": "x", "new": 1}, fd | {"k1": "x", "new": 1}),
        ({"new": 1, "k1": "x"} | m, {"new": 1, "k1": "x"} | fd),
        (fd | m, fd | fd),
        (m | fd, fd | fd),
        (m | m, fd | fd),
        (m.copy(), fd.copy()),
    ]:
        assert type(got) is dict and list(got.items()) == list(expected.items())
    edited = m.copy()
    edited["k2"] = "edited"  # a copy to change; the state is not
    assert m["k2"] == 2
    for bad in ([("a", 1)], 1, None):
        with pytest.raises(TypeError):
            m | bad
        with pytest.raises(TypeError):
            bad | m
    with pytest.raises(TypeError, match="read-only"):
        m |= {"a": 1}


def test_removing_most_members_rebuilds_the_order_and_keeps_it() -> None:
    m = PMap.from_mapping({f"k{i}": i for i in range(1000)})
    for i in range(0, 1000, 1):
        if i % 10:
            m = m.without(f"k{i}")
    assert list(m) == [f"k{i}" for i in range(0, 1000, 10)]
    assert len(m._order) < 300  # gaps were dropped along the way (white-box)
    m = m.set("k5", 5)
    assert list(m)[-1] == "k5" and m["k5"] == 5
    # Rebuilding the order keeps it whatever the values are (here in reverse order).
    m = PMap.from_mapping({f"k{i}": -i for i in range(100)})
    for i in range(100):
        if i % 10:
            m = m.without(f"k{i}")
    assert list(m.items()) == [(f"k{i}", -i) for i in range(0, 100, 10)]


def test_a_removal_leaves_a_gap_until_gaps_outnumber_members() -> None:
    """A removal costs O(log n), the order rebuilt (O(n)) only once gaps outnumber the
    members, so amortized O(1) per removal (white-box: the order's length counts the
    gaps). Rebuilding it sooner would make each removal from a wide state O(n)."""
    m = PMap.from_mapping({f"k{i}": i for i in range(1000)})
    assert len(m.without("k5")._order) == 1000  # one removal: a gap, not a rebuild
    m = PMap.from_mapping({f"k{i}": i for i in range(32)})
    for i in range(16):
        m = m.without(f"k{i}")
    assert len(m) == 16 and len(m._order) == 32  # 16 gaps do not outnumber 16 members
    m = m.without("k16")
    assert len(m._order) == 15  # 17 gaps outnumber 15: rebuilt
    assert list(m.items()) == [(f"k{i}", i) for i in range(17, 32)]


def _trie(m: PMap) -> tuple[list[dict[Any, Any]], list[dict[Any, Any]]]:
    """``m``'s trie (white-box): its inner nodes, root first, and its leaves."""
    nodes, leaves, stack = [], [], [m._root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child in node.values():
            (stack if type(child) is _Node else leaves).append(child)
    return nodes, leaves


def test_keys_crowding_one_slot_split_its_leaf_and_all_stay() -> None:
    """Keys whose hashes share their low bits crowd one leaf of the trie; setting one
    more into a full leaf splits it a level down, and every member stays readable, in
    order, the old version unchanged. The split bounds each dict a change copies (at
    most 32 entries, the module's O(log n) promise), however the map was built."""
    slot = hash("k0") & _MASK
    keys = [k for k in (f"k{i}" for i in range(20_000)) if hash(k) & _MASK == slot][:40]
    assert _LEAF_MAX == 16
    full = PMap.from_mapping({k: n for n, k in enumerate(keys[:16])})
    split = full.set(keys[16], 16)
    assert list(split.items()) == [(k, n) for n, k in enumerate(keys[:17])]
    assert all(split[k] == n and k in split for n, k in enumerate(keys[:17]))
    assert list(full.items()) == [(k, n) for n, k in enumerate(keys[:16])]
    grown = PMap.from_mapping({})
    for n, k in enumerate(keys):
        grown = grown.set(k, n)
    assert list(grown.items()) == [(k, n) for n, k in enumerate(keys)]
    assert list(grown.without(keys[3]).items()) == [(k, n) for n, k in enumerate(keys) if n != 3]
    built = PMap.from_mapping(dict(grown))
    assert built == grown and list(built) == keys
    for m in (split, grown, built):
        nodes, leaves = _trie(m)
        assert max(len(d) for d in nodes + leaves) <= 32


def test_a_change_copies_a_path_not_the_members() -> None:
    """O(log n) small dicts per change (white-box): the leaf dicts of other keys are the
    very objects of the old version."""
    old = PMap.from_mapping({f"k{i}": i for i in range(50_000)})
    new = old.set("k7", -7)
    old_ids = {id(leaf) for leaf in _trie(old)[1]}
    changed = [leaf for leaf in _trie(new)[1] if id(leaf) not in old_ids]
    assert len(changed) == 1 and "k7" in changed[0]
    assert new._order is old._order  # a replaced member keeps its place


def test_R_D1_a_wide_state_derived_with_set_is_deeply_immutable() -> None:
    """R-D1: a shared state wide enough to be a PMap is derived from as a FrozenDict is:
    ``state.set(key, value)`` freezes the value, so a list changed afterwards does not
    reach the state, and a value with no JSON form is refused where it is set."""
    from interlude.adapters.fake import (
        FakeDriver,
        ScriptedAgent,
        finished,
        reply,
        started,
        state_delta,
    )

    wide = {f"k{i}": i for i in range(1100)}
    patch = state_delta({"op": "replace", "path": "/k0", "value": -1})
    driver = FakeDriver(ScriptedAgent(lambda r: reply(started(r), patch, finished(r))))
    chat = driver.chat(state=wide)
    chat.send("go")
    driver.run_until_idle()
    assert type(chat.state) is PMap
    cart = ["lamp"]
    chat.set_state(chat.state.set("cart", cart))
    cart.append("sofa")
    assert chat.state["cart"] == ("lamp",)
    with pytest.raises(ValueError, match="no JSON form"):
        chat.state.set("total", float("nan"))


def test_R_D1_a_pmap_built_from_a_mapping_is_deeply_immutable() -> None:
    """R-D1: ``PMap.from_mapping`` freezes what it is given, as ``freeze`` does, and
    ``freeze`` (so ``set_state``) takes a PMap as frozen: a list given and changed
    afterwards changes neither the map nor a state built from it; a value with no JSON
    form is refused where the map is built."""
    cart = ["lamp"]
    m = PMap.from_mapping({"cart": cart, "options": {"gift": False}})
    cart.append("sofa")
    assert m["cart"] == ("lamp",) and type(m["cart"]) is tuple
    assert type(m["options"]) is FrozenDict and freeze(m) is m
    with pytest.raises(ValueError, match="no JSON form"):
        PMap.from_mapping({"total": float("nan")})
    assert pickle.loads(pickle.dumps(m)) == m
