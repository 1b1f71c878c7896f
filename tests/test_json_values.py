"""Frozen JSON values as an application holds them: what ``freeze`` refuses and where it
says the problem is, the limits it keeps (``max_depth``), a ``FrozenDict`` that cannot
be changed in place, and ``thaw`` giving back plain, independent copies.

(Integers past the digit limit, str subclasses and enums are in test_unwritable_values;
a PVec's items and the escaping of a path in test_input_edges; PMap in test_pmap.)
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest

from interlude.core import FrozenDict, NotJSONError, PVec, freeze, thaw
from interlude.core.json import as_object, freeze_parsed, json_default
from interlude.core.pmap import PMap


def nested(levels: int, inner: Any = None) -> Any:
    """``inner`` inside ``levels`` arrays: ``nested(2)`` is ``[[None]]``."""
    value = inner
    for _ in range(levels):
        value = [value]
    return value


def refusal(value: object, **kwargs: Any) -> NotJSONError:
    with pytest.raises(NotJSONError) as caught:
        freeze(value, **kwargs)
    return caught.value


# -- what freeze refuses, and where ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "not a JSON value at /: nan has no JSON form"),
        ({"a": [1, math.inf]}, "not a JSON value at /a/1: inf has no JSON form"),
        ([-math.inf], "not a JSON value at /0: -inf has no JSON form"),
        ({"s": {1, 2}}, "not a JSON value at /s: a set has no JSON form"),
        ([b"x"], "not a JSON value at /0: a bytes has no JSON form"),
        ({"o": [0, object()]}, "not a JSON value at /o/1: an object has no JSON form"),
    ],
)
def test_freeze_names_what_is_not_json_and_where(value: object, message: str) -> None:
    """A ``NotJSONError`` says which value (a JSON Pointer) and why: the intents quote
    it in their ``UsageError`` or ``InvalidResumeError``."""
    error = refusal(value)
    assert str(error) == message
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ({"a": [1, math.nan]}, "/a/1", "nan has no JSON form"),
        ([[0, {"k": {2}}]], "/0/1/k", "a set has no JSON form"),
    ],
)
def test_a_not_json_error_carries_its_path_and_reason(
    value: object, path: str, reason: str
) -> None:
    error = refusal(value)
    assert (error.path, error.reason) == (path, reason)


def test_an_object_key_that_is_not_a_string_is_refused() -> None:
    """JSON object keys are strings; json.dumps would silently turn 1 into "1" (and
    collide with a "1" key), so freeze refuses it, naming the key's type."""
    error = refusal({1: "a"})
    assert str(error) == "not a JSON value at /: object key of type int, not str"
    assert error.reason == "object key of type int, not str" and error.path == ""
    assert str(refusal({"k": 1, (1, 2): 0})).endswith("object key of type tuple, not str")


def test_a_value_that_contains_itself_is_refused_as_a_cycle() -> None:
    """A cycle has no JSON form; freeze says so instead of recursing until Python's
    stack gives out."""
    loop: list[Any] = [1]
    loop.append(loop)
    assert str(refusal(loop)) == "not a JSON value at /1: the value contains itself (a cycle)"
    obj: dict[str, Any] = {}
    obj["me"] = {"again": obj}
    assert str(refusal(obj)) == (
        "not a JSON value at /me/again: the value contains itself (a cycle)"
    )


def test_a_value_shared_twice_is_not_a_cycle() -> None:
    """The same list in two places (or twice in one array) is a tree, not a cycle."""
    shared = [1, {"a": 2}]
    frozen = freeze({"x": shared, "y": [shared, shared]})
    assert thaw(frozen) == {"x": shared, "y": [shared, shared]}


# -- max_depth ------------------------------------------------------------------------------


def test_freeze_takes_512_nested_containers_by_default_and_refuses_513() -> None:
    """docs/reference.md: ``freeze(value, *, max_depth=512)``: 512 nested arrays or
    objects are JSON interlude keeps; one more is refused at its path."""
    assert thaw(freeze(nested(512, 1))) == nested(512, 1)
    error = refusal(nested(513, 1))
    assert error.reason == "nested deeper than 512 levels"
    assert error.path == "/0" * 512


def levels(n: int) -> Any:
    """``n`` nested containers, objects and arrays in turn, with a scalar inside."""
    value: Any = "leaf"
    for i in range(n):
        value = {"k": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("max_depth", [0, 1, 2, 5])
def test_max_depth_counts_containers_exactly(max_depth: int) -> None:
    """``max_depth`` containers fit, one more does not; scalars inside add no level."""
    assert thaw(freeze(levels(max_depth), max_depth=max_depth)) == levels(max_depth)
    error = refusal(levels(max_depth + 1), max_depth=max_depth)
    assert error.reason == f"nested deeper than {max_depth} levels"
    assert error.path.count("/") == max_depth


def test_a_pvec_counts_as_one_level_of_nesting() -> None:
    """An array read back from state (a PVec) nests as the list it stands for."""
    inside = PVec.from_iterable([[["leaf"]]])  # three arrays
    assert thaw(freeze(inside, max_depth=3)) == [[["leaf"]]]
    assert refusal([inside], max_depth=3).reason == "nested deeper than 3 levels"


def test_integers_of_up_to_4300_digits_are_json_and_longer_ones_are_refused() -> None:
    """docs/reference.md: integers of more than ``MAX_INT_DIGITS`` (4,300) digits are
    refused, the longest Python writes as text by default; the longest accepted is
    written in full."""
    longest = 10**4300 - 1  # 4300 nines
    assert json.dumps(freeze([-longest, longest])) == f"[-{longest}, {longest}]"
    for past in (10**4300, -(10**4300)):
        assert str(refusal({"n": past})) == (
            "not a JSON value at /n: an integer of more than 4300 digits cannot be written as JSON"
        )


# -- what freeze gives back -------------------------------------------------------------------


def test_freeze_makes_objects_frozen_dicts_and_arrays_tuples_deeply() -> None:
    given = {"a": [1, {"b": [True, None, 1.5, "s"]}], "t": (1, 2), "o": OrderedDict(x=1)}
    frozen = freeze(given)
    assert type(frozen) is FrozenDict
    assert type(frozen["a"]) is tuple and type(frozen["a"][1]) is FrozenDict
    assert type(frozen["a"][1]["b"]) is tuple and type(frozen["o"]) is FrozenDict
    assert frozen == {"a": (1, {"b": (True, None, 1.5, "s")}), "t": (1, 2), "o": {"x": 1}}
    given["a"][1]["b"].append("later")  # the caller's value is not shared
    assert frozen["a"][1]["b"] == (True, None, 1.5, "s")


def test_freezing_frozen_values_returns_them_as_they_are() -> None:
    """A frozen value is shared, never copied (R-D1's cheap steps rely on it)."""
    obj = freeze({"a": [1]})
    wide = PMap.from_mapping({"a": 1})
    vec = PVec.from_iterable([obj])
    assert freeze(obj) is obj and freeze(wide) is wide and freeze(vec) is vec
    assert freeze(obj["a"]) == (1,)


def test_a_float_subclass_freezes_to_its_float_and_nan_in_one_is_refused() -> None:
    class Price(float):
        pass

    frozen = freeze({"p": Price(2.5)})
    assert type(frozen["p"]) is float and frozen["p"] == 2.5
    assert refusal([Price("nan")]).reason == "nan has no JSON form"


# -- FrozenDict -------------------------------------------------------------------------------

MUTATIONS: list[Callable[[FrozenDict], object]] = [
    lambda d: d.__setitem__("a", 2),
    lambda d: d.__delitem__("a"),
    lambda d: d.__ior__({"b": 1}),
    lambda d: d.clear(),
    lambda d: d.pop("a"),
    lambda d: d.popitem(),
    lambda d: d.setdefault("b", 1),
    lambda d: d.update(b=1),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_a_frozen_dict_refuses_every_change_in_place(
    mutate: Callable[[FrozenDict], object],
) -> None:
    """R-D1: state is deeply immutable; the error says how to get a copy to edit."""
    frozen = freeze({"a": 1})
    with pytest.raises(TypeError) as caught:
        mutate(frozen)
    assert str(caught.value) == (
        "this JSON object is read-only (interlude keeps state deeply immutable); "
        "call interlude.core.thaw() for a mutable copy"
    )
    assert frozen == {"a": 1}


def test_calling_init_again_on_a_frozen_dict_is_refused_and_changes_nothing() -> None:
    """R-D1: ``dict.__init__`` fills the dict it is called on; a built FrozenDict, even an
    empty one whose hash was taken, or one interlude built itself, refuses and keeps
    what it was built with."""
    empty = FrozenDict()
    before = hash(empty)
    full = FrozenDict({"a": [1]}, b=2)
    inner = freeze({"c": {}})["c"]
    for made, members in [(empty, {}), (full, {"a": (1,), "b": 2}), (inner, {})]:
        for call in ({"a": 1}, {}):
            with pytest.raises(TypeError, match="read-only"):
                made.__init__(call)  # type: ignore[misc]
        assert made == members
    assert hash(empty) == before and hash(FrozenDict()) == before


def test_a_frozen_dict_set_and_without_leave_the_original_as_it_was() -> None:
    original = freeze({"a": 1, "b": 2})
    changed = original.set("c", [3])
    assert changed == {"a": 1, "b": 2, "c": (3,)} and type(changed) is FrozenDict
    smaller = original.without("a")
    assert smaller == {"b": 2} and type(smaller) is FrozenDict
    assert original == {"a": 1, "b": 2}
    with pytest.raises(KeyError):
        original.without("missing")


def test_a_frozen_dict_hashes_by_its_members_and_copies_as_itself() -> None:
    one, two = freeze({"a": 1, "b": [2]}), freeze({"b": [2], "a": 1})
    assert hash(one) == hash(two) and hash(one) == hash(one) and {one: "x"}[two] == "x"
    assert hash(one) != hash(freeze({"a": 1, "b": [3]}))  # a clash here would be a fluke
    assert copy.copy(one) is one and copy.deepcopy(one) is one
    twin = pickle.loads(pickle.dumps(one))
    assert type(twin) is FrozenDict and twin == one
    assert repr(one) == "FrozenDict({'a': 1, 'b': (2,)})"


def test_a_frozen_dict_takes_no_attributes() -> None:
    """Nothing can be hung on a state object either: it has no ``__dict__``."""
    frozen = freeze({"a": 1})
    with pytest.raises(AttributeError):
        frozen.note = "x"  # type: ignore[attr-defined]


# -- thaw, as_object, freeze_parsed, json_default ------------------------------------------


def test_thaw_gives_plain_mutable_copies_all_the_way_down() -> None:
    frozen = freeze({"a": [1, {"b": (2, 3)}], "v": PVec.from_iterable([{"c": []}])})
    frozen = frozen.set("m", PMap.from_mapping({"d": [4]}))
    plain = thaw(frozen)
    assert plain == {"a": [1, {"b": [2, 3]}], "v": [{"c": []}], "m": {"d": [4]}}
    assert type(plain) is dict and type(plain["a"]) is list and type(plain["a"][1]) is dict
    assert type(plain["v"]) is list and type(plain["v"][0]["c"]) is list
    assert type(plain["m"]) is dict and type(plain["m"]["d"]) is list
    assert list(plain) == ["a", "v", "m"]  # members keep their order
    plain["a"][1]["b"].append(9)
    assert frozen["a"][1]["b"] == (2, 3)
    assert thaw(5) == 5 and thaw("s") == "s" and thaw(None) is None


def test_thaw_copies_a_value_nested_deeper_than_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() + 100
    frozen: Any = 0
    for _ in range(depth):
        frozen = (frozen,)
    plain = thaw(frozen)
    for _ in range(depth):
        assert type(plain) is list and len(plain) == 1
        plain = plain[0]
    assert plain == 0


def test_as_object_gives_an_object_as_a_frozen_dict_and_anything_else_none() -> None:
    obj = freeze({"a": 1})
    assert as_object(obj) is obj
    from_map = as_object(PMap.from_mapping({"a": 1, "b": [2]}))
    assert type(from_map) is FrozenDict and from_map == {"a": 1, "b": (2,)}
    for other in ((1,), "a", 1, None, PVec.from_iterable([1])):
        assert as_object(other) is None


def test_freeze_parsed_freezes_what_json_loads_gives() -> None:
    frozen = freeze_parsed(json.loads('{"a": [1, {"b": []}], "c": "s", "d": null}'))
    assert frozen == freeze({"a": [1, {"b": []}], "c": "s", "d": None})
    assert type(frozen) is FrozenDict and type(frozen["a"]) is tuple  # type: ignore[index]
    assert type(frozen["a"][1]) is FrozenDict  # type: ignore[index]


def test_json_default_writes_pvec_and_pmap_and_refuses_the_rest() -> None:
    value = freeze({"v": PVec.from_iterable([1, 2])}).set("m", PMap.from_mapping({"k": 1}))
    assert json.dumps(value, default=json_default) == '{"v": [1, 2], "m": {"k": 1}}'
    with pytest.raises(TypeError, match=r"^Object of type set is not JSON serializable$"):
        json_default({1})


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": {1: "x"}}, "/a"),
        ([{"k": {2: 1}}], "/0/k"),
        ({"prefs": {"colours": {1: "red"}}}, "/prefs/colours"),
    ],
)
def test_a_non_string_key_deep_inside_is_reported_at_the_object_holding_it(
    value: object, path: str
) -> None:
    """``NotJSONError.path`` is a JSON Pointer to the value at fault: for a key that is
    not a string, the object holding it. ``set_state({"prefs": {"colours": {1: "red"}}})``
    must say ``/prefs/colours``, not ``/`` (the root, whose keys are all strings)."""
    error = refusal(value)
    assert error.path == path
    assert str(error) == f"not a JSON value at {path}: object key of type int, not str"


def test_a_value_inside_a_pvec_is_reported_at_its_index() -> None:
    """``NotJSONError.path`` points at the value at fault inside an array read back from
    state (a PVec) as inside a list: ``/a/1``, not the array's own ``/a``."""
    for array in ([1, math.nan], PVec.from_iterable([1, math.nan])):
        error = refusal({"a": array})
        assert error.path == "/a/1"
        assert str(error) == "not a JSON value at /a/1: nan has no JSON form"
