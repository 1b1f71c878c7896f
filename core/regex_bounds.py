"""A static bound on the backtracking of schema regexes, for the answer checker.

Python's ``re`` has no timeout, so a ``pattern`` or ``patternProperties`` regex
from a hostile schema is accepted only when its worst case on the longest
string it will be given is small; :func:`vet_regex` refuses the rest with
:class:`SchemaRejectedError`. How the bound is modelled is described below.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from .schema_limits import SchemaLimits, SchemaRejectedError

__all__ = ["sre", "vet_regex"]


# --- regex vetting -----------------------------------------------------------------------------
#
# Python's re has no timeout, so a regex is accepted only when a static bound on its
# backtracking, at the longest string it will be given (L), is small: c * w * L**e, where
# e counts the quantifiers whose repetition count can still vary when a later part fails
# (plus one for the start positions of an unanchored search), and c, w are constant
# factors (choices of small counts and alternations, work per attempt). A quantifier only
# counts when what may follow it could also continue it (`[^@]+@` has one way out).
# Nested variable quantifiers (`(a+)+`, `(.*a){20}`), quantifiers over alternations whose
# branches can start alike (`(a|aa)+`) or over something that can match empty,
# backreferences and counts over 1000 are refused outright. Fuzzing (random regexes
# that pass, on adversarial 1,000-character inputs) finds no search over ~0.2 s.

sre: Any = importlib.import_module("re._parser")  # the parser behind re.compile, stdlib
_REGEX_WORK: Final = 4_000_000  # modelled steps; 30-150 ns each in practice
_SMALL: Final = 16  # repetition spreads up to this are constant factors, not powers of L
_NESTED_MAX: Final = 10  # a bounded repeat of a variable body may repeat at most this often
_CAP: Final = 10**12


class _Risky(Exception):
    """A regex this module cannot bound."""


class _Chars:
    """A set of characters: listed when small (so overlaps can be tested), else a test.

    ``""`` stands for the end of the string, which only ``$`` and ``\\Z`` contain.
    """

    __slots__ = ("small", "test")

    def __init__(self, small: frozenset[str] | None, test: Callable[[str], bool]) -> None:
        self.small = small
        self.test = test


def _overlap(a: tuple[_Chars, ...], b: tuple[_Chars, ...]) -> bool:
    for x in a:
        for y in b:
            if x.small is not None:
                if any(y.test(ch) for ch in x.small):
                    return True
            elif y.small is not None:
                if any(x.test(ch) for ch in y.small):
                    return True
            else:
                return True
    return False


def _literal(ch: str) -> _Chars:
    return _Chars(frozenset(ch), lambda c: c == ch)


_EVERY: Final = _Chars(None, lambda c: c != "")
_NOT_NEWLINE: Final = _Chars(None, lambda c: c not in ("", "\n"))
_END: Final = _Chars(frozenset({""}), lambda c: c == "")
_END_OR_NEWLINE: Final = _Chars(frozenset({"", "\n"}), lambda c: c in ("", "\n"))
_CATEGORIES: Final[Mapping[Any, Callable[[str], bool]]] = {
    sre.CATEGORY_DIGIT: str.isdecimal,  # re's \d is Unicode category Nd, as isdecimal
    sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdecimal(),
    sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}
_NEGATIVE_CATEGORIES: Final = frozenset(
    {sre.CATEGORY_NOT_DIGIT, sre.CATEGORY_NOT_SPACE, sre.CATEGORY_NOT_WORD}
)


def _char_class(items: list[tuple[Any, Any]], flags: int) -> _Chars:
    if flags & re.IGNORECASE:
        return _EVERY  # case folding is subtle; assume overlap
    negate = False
    listed: set[str] = set()
    tests: list[Callable[[str], bool]] = []
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            listed.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < 256:
            listed.update(map(chr, range(av[0], av[1] + 1)))
        elif op is sre.RANGE:
            tests.append(_in_range(av[0], av[1]))
        elif op is sre.CATEGORY and not (flags & re.ASCII and av in _NEGATIVE_CATEGORIES):
            tests.append(_CATEGORIES.get(av, _EVERY.test))
        else:
            tests.append(_EVERY.test)  # unknown (or ASCII-negated) class item: anything
    frozen = frozenset(listed)

    def test(c: str) -> bool:
        return c != "" and (c in frozen or any(t(c) for t in tests)) != negate

    return _Chars(frozen if not negate and not tests and len(frozen) <= 512 else None, test)


def _in_range(low: int, high: int) -> Callable[[str], bool]:
    return lambda c: c != "" and low <= ord(c) <= high


# Work is a polynomial in L: a tuple of coefficients, lowest power first.
_Poly = tuple[int, ...]
_ONE: Final[_Poly] = (1,)
_L1: Final[_Poly] = (1, 1)  # L + 1: the lengths a quantifier can take, or start positions


def _padd(a: _Poly, b: _Poly) -> _Poly:
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return tuple(
        min(x + (shorter[i] if i < len(shorter) else 0), _CAP) for i, x in enumerate(longer)
    )


def _pmax(a: _Poly, b: _Poly) -> _Poly:
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return tuple(max(x, shorter[i] if i < len(shorter) else 0) for i, x in enumerate(longer))


def _pmul(a: _Poly, b: _Poly) -> _Poly:
    if len(a) + len(b) - 1 > 8:
        raise _Risky("could backtrack polynomially in the input length (ambiguous quantifiers)")
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] = min(out[i + j] + x * y, _CAP)
    return tuple(out)


def _pscale(a: _Poly, n: int) -> _Poly:
    return tuple(min(x * n, _CAP) for x in a)


@attrs.frozen
class _Shape:
    """What a regex piece can start with, if it can match empty, the ways it can end and the
    work of one attempt at it (both polynomials in L); ``rescans``: a lookaround in it reads
    ahead, so repeating it re-reads the input."""

    first: tuple[_Chars, ...]
    nullable: bool
    ways: _Poly = _ONE
    cost: _Poly = _ONE
    rescans: bool = False


def vet_regex(pattern: str, what: str, limits: SchemaLimits) -> None:
    if len(pattern) > limits.max_pattern_length:
        raise SchemaRejectedError(f"{what} is over {limits.max_pattern_length} characters")
    try:
        _regex_work(pattern, limits.max_pattern_input_length)
    except _Risky as exc:
        raise SchemaRejectedError(f"{what} ({pattern[:80]!r}) {exc}") from None


def _regex_work(pattern: str, longest: int) -> int:
    """Bound the backtracking steps of ``re.search(pattern, s)`` for ``len(s) <= longest``."""
    depth = nesting = 0
    escaped = False
    for ch in pattern:  # re's parser recurses per group: bound nesting before parsing
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "(":
            depth += 1
            nesting = max(nesting, depth)
        elif ch == ")":
            depth = max(0, depth - 1)
    if nesting > 32:
        raise _Risky("nests groups more than 32 deep")
    try:
        parsed = sre.parse(pattern, 0)
    except (re.error, OverflowError, ValueError, RecursionError) as exc:
        raise _Risky(f"is not a valid regular expression ({exc})") from None
    flags: int = parsed.state.flags
    data = list(parsed.data)
    cost = _sequence(data, (), flags).cost
    anchored = bool(data) and data[0] == (sre.AT, sre.AT_BEGINNING_STRING)
    anchored |= bool(data) and data[0] == (sre.AT, sre.AT_BEGINNING) and not flags & re.MULTILINE
    if not anchored:  # search() tries every start position
        cost = _pmul(_L1, cost)
    work: int = sum(c * (longest + 1) ** p for p, c in enumerate(cost))
    if work > _REGEX_WORK:
        raise _Risky(
            f"could take about {min(work, _CAP):.0e} backtracking steps on a "
            f"{longest}-character string (ambiguous, nested or adjacent quantifiers)"
        )
    return work


def _first(items: list[tuple[Any, Any]], flags: int) -> tuple[tuple[_Chars, ...], bool]:
    """What a sequence can start with, and whether it can match empty."""
    first: tuple[_Chars, ...] = ()
    for op, av in items:
        if op is sre.SUBPATTERN:
            f, nullable = _first(list(av[3]), (flags | av[1]) & ~av[2])
        elif op is sre.ATOMIC_GROUP:
            f, nullable = _first(list(av), flags)
        elif op is sre.BRANCH:
            parts = [_first(list(b), flags) for b in av[1]]
            f = tuple(c for part in parts for c in part[0])
            nullable = any(part[1] for part in parts)
        elif op in _REPEATS:
            f, nullable = _first(list(av[2]), flags)
            nullable = nullable or av[0] == 0
        else:
            f, nullable = _atom(op, av, flags)
        first += f
        if not nullable:
            return first, False
    return first, True


def _atom(op: Any, av: Any, flags: int) -> tuple[tuple[_Chars, ...], bool]:
    if op is sre.LITERAL:
        return ((_EVERY if flags & re.IGNORECASE else _literal(chr(av))),), False
    if op is sre.NOT_LITERAL:
        ch = chr(av)
        return (
            (_EVERY if flags & re.IGNORECASE else _Chars(None, lambda c: c not in ("", ch))),
        ), False
    if op is sre.ANY:
        return ((_EVERY if flags & re.DOTALL else _NOT_NEWLINE),), False
    if op is sre.IN:
        return (_char_class(list(av), flags),), False
    if op is sre.AT:
        if av is sre.AT_END_STRING:
            return (_END,), False
        if av is sre.AT_END or av is sre.AT_END_LINE:
            return (_END_OR_NEWLINE,), False
        return (_EVERY,), True  # ^, \A, \b, \B: zero width, but they can fail
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return (_EVERY,), True
    if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
        raise _Risky("uses a backreference")
    raise _Risky(f"uses {op}, which this check does not know")


_REPEATS: Final = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT})


def _sequence(
    items: list[tuple[Any, Any]], follow: tuple[_Chars, ...], flags: int, depth: int = 0
) -> _Shape:
    """Shape of a sequence of regex items, ``follow`` being what may come after it."""
    shapes: list[_Shape] = []
    after = follow
    for op, av in reversed(items):  # each item's follow set is what the rest can start with
        shape = _item(op, av, after, flags, depth)
        shapes.append(shape)
        after = shape.first + after if shape.nullable else shape.first
    ways: _Poly = _ONE
    cost: _Poly = ()
    first: tuple[_Chars, ...] = ()
    nullable = True
    for shape in reversed(shapes):
        cost = _padd(cost, _pmul(ways, shape.cost))  # tried once per way to get there
        ways = _pmul(ways, shape.ways)
        if nullable:
            first += shape.first
            nullable = shape.nullable
    cost = _padd(cost, ways)  # each way it ends is handed to what follows
    return _Shape(first, nullable, ways, cost, any(s.rescans for s in shapes))


def _item(op: Any, av: Any, follow: tuple[_Chars, ...], flags: int, depth: int) -> _Shape:
    if depth > 40:
        raise _Risky("nests too deeply")
    if op is sre.SUBPATTERN:
        return _sequence(list(av[3]), follow, (flags | av[1]) & ~av[2], depth + 1)
    if op is sre.ATOMIC_GROUP:
        return _sequence(list(av), follow, flags, depth + 1)
    if op in (sre.ASSERT, sre.ASSERT_NOT):  # atomic: one way out, but it may fail
        body = _sequence(list(av[1]), (), flags, depth + 1)
        return _Shape((_EVERY,), True, _ONE, body.cost, body.rescans or len(body.cost) > 1)
    if op is sre.BRANCH:
        return _branch(av[1], follow, flags, depth)
    if op in _REPEATS:
        return _repeat(av[0], av[1], list(av[2]), follow, flags, depth)
    first, nullable = _atom(op, av, flags)
    return _Shape(first, nullable)


def _branch(branches: list[Any], follow: tuple[_Chars, ...], flags: int, depth: int) -> _Shape:
    shapes = [_sequence(list(b), follow, flags, depth + 1) for b in branches]
    ambiguous = False  # can two branches start alike? then both may succeed
    seen: tuple[_Chars, ...] = ()
    for shape in shapes:
        if (shape.nullable and len(shapes) > 1) or _overlap(shape.first, seen):
            ambiguous = True
            break
        seen += shape.first
    ways: _Poly = ()
    cost: _Poly = ()
    for shape in shapes:
        ways = _padd(ways, shape.ways) if ambiguous else _pmax(ways, shape.ways)
        cost = _padd(cost, shape.cost)  # every branch may be tried
    first = tuple(c for s in shapes for c in s.first)
    nullable = any(s.nullable for s in shapes)
    return _Shape(first, nullable, ways, cost, any(s.rescans for s in shapes))


def _repeat(
    low: int,
    high: int,
    items: list[tuple[Any, Any]],
    follow: tuple[_Chars, ...],
    flags: int,
    depth: int,
) -> _Shape:
    unbounded = high == sre.MAXREPEAT
    if low > 1000 or (not unbounded and high > 1000):
        raise _Risky("repeats a count over 1000")
    body_first, _ = _first(items, flags)
    body = _sequence(items, body_first + follow, flags, depth + 1)
    nullable = low == 0 or body.nullable
    if high == 0:
        return _Shape((), True)
    # one way out if what follows cannot also continue the repetition
    single_exit = not _overlap(body.first, follow)
    spread = high - low
    if high == 1:
        ways = _pscale(body.ways, 1 if low == 1 or single_exit else 2)
        return _Shape(body.first, nullable, ways, _padd(body.cost, _ONE), body.rescans)
    # a body that can match empty can also repeat in many ways without moving
    if body.ways != _ONE or body.nullable:
        if unbounded or high > _NESTED_MAX:
            raise _Risky("nests a variable quantifier or ambiguous alternation in a quantifier")
        each = _pmax(body.ways, (2,))
        ways = _pscale(_ONE, spread + 1)
        cost = _ONE
        for _ in range(high):
            cost = _padd(cost, _pmul(ways, body.cost))
            ways = _pmul(ways, each)
        return _Shape(body.first, nullable, ways, cost, body.rescans)
    if unbounded or high > _SMALL:  # up to L iterations
        ways = _ONE if single_exit else _L1 if unbounded or spread > _SMALL else (spread + 1,)
        if body.rescans:
            cost = _pmul(_L1, body.cost)
        else:  # iterations read disjoint stretches: only the constant part repeats L times
            cost = _padd(_pmul(_L1, body.cost[:1]), (0, *body.cost[1:]))
        return _Shape(body.first, nullable, ways, cost, body.rescans)
    ways = _ONE if single_exit or spread == 0 else (spread + 1,)
    return _Shape(body.first, nullable, ways, _padd(_pscale(body.cost, high), _ONE), body.rescans)
