"""R-B3: the static backtracking bound that decides which schema regexes are accepted.

A ``pattern`` or ``patternProperties`` regex from a hostile schema is accepted only
when the modelled work of ``re.search`` on the longest string it will be given
(``SchemaLimits.max_pattern_input_length``) is at most 4,000,000 steps. The exact
numbers below are worked out by hand from the model in ``core/regex_bounds.py``, so a
wrong change to its arithmetic moves the line between accepted and refused regexes.

Work is a polynomial in ``X = longest + 1``. With ``longest=9`` (``X = 10``) its decimal
digits are its coefficients, lowest power last, which is how the table reads.
"""

from __future__ import annotations

import pytest

from interlude.core import regex_bounds
from interlude.core.answers import SchemaLimits, SchemaRejectedError, compile_answer_schema


def work(pattern: str, longest: int = 9) -> int:
    """The modelled steps (white-box: only the accept/refuse line is public)."""
    return regex_bounds._regex_work(pattern, longest)


def refusal(pattern: str, longest: int = 1000) -> str:
    """The reason a schema with this ``pattern`` is refused, through the public API (keys
    count against ``longest`` too, so it is at least 7, for ``"pattern"``)."""
    limits = SchemaLimits(max_pattern_input_length=longest)
    with pytest.raises(SchemaRejectedError) as info:
        compile_answer_schema({"type": "string", "pattern": pattern}, limits=limits)
    return info.value.reason


def repeated_branches(levels: int) -> str:
    """``^(?:A|B(?:C|D...z)+)+``: a repeat of a two-way branch per level, every character
    distinct, so nothing is ambiguous; each level is two levels of modelling."""
    pattern = "z"
    for level in range(levels):
        pattern = f"(?:{chr(0x100 + 2 * level)}|{chr(0x101 + 2 * level)}{pattern})+"
    return "^" + pattern


def accepted(pattern: str, longest: int = 1000) -> bool:
    limits = SchemaLimits(max_pattern_input_length=longest)
    try:
        compile_answer_schema({"pattern": pattern}, limits=limits)
    except SchemaRejectedError:
        return False
    return True


# --- exact bounds ------------------------------------------------------------------------------
#
# Per item of a sequence: cost += ways-to-get-here * item cost; ways *= item ways; at the end
# cost += ways (each way out is handed on). A literal or zero-width item costs 1 with 1 way.
# A quantifier is one way out when what follows cannot continue it, else X ways (unbounded,
# or a spread over 16) or spread + 1 ways. An unanchored search multiplies by (1 + X).


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^a", 3),  # ^ 1, a 1, handed on 1
        ("\\Aa", 3),
        ("^a$", 4),
        ("^$", 3),
        ("", 11),  # nothing: 1, searched from X + 1 starts
        ("a", 22),  # (a 1 + 1) * (1 + X)
        ("(?m)^a", 33),  # a multiline ^ matches after any newline: searched like 'a'
        ("^a+", 24),  # a+ costs 2 + 2X: 2 per iteration, X iterations
        ("^a+b", 25),  # one way out of a+: b cannot continue it
        ("^a+$", 25),  # $ (end, or a final newline) cannot continue a+
        ("^a+a", 45),  # a+ then a: X ways out, each tries a, each is handed on
        ("^a*a", 45),
        ("a+a", 484),  # (5 + 4X)... unanchored: (4 + 4X)(1 + X)
        ("^a{3}", 9),  # 3 * 2 + 1, one way
        ("^a{2,5}a", 20),  # cost 2 * 5 + 1, 4 ways out, a tried 4 times, 4 handed on
        ("^a{2,5}b", 14),
        ("^a{1,2}a", 10),  # a spread of one: cost 2 * 2 + 1, 2 ways out, each tries a
        ("^a?a", 8),  # ? with a continuing follow: 2 ways
        ("^a?b", 6),
        ("^a{1,16}a", 66),  # a spread of 15 is a constant: 16 ways, cost 33
        ("^a{1,17}a", 57),  # over 16 repeats costs 2 + 2X, spread 16 is still 17 ways
        ("^a{0,17}a", 45),  # a spread of 17 is X ways
        ("^a{1,18}a", 45),
        ("^(?:ab|cd)", 8),  # branches that cannot start alike: 1 way, both tried
        ("^(?:a.|.b)", 9),  # branches that can: 2 ways
        ("^(?:a|bc)?a", 12),
        ("^(?:a.|.b)?c", 18),  # 2 ways through the branches, times 2 for skipping them
        ("^(?:a|a){3}", 45),  # 'a(?:|)' repeated: ways double per repeat, 1+5+10+20 + 8
        ("^(?:a?){2}", 21),
        ("^(?:\\b){3}", 24),  # an empty body: ways double per repeat, 1 + (1+2+4+8) + 8
        ("^(?:a|bc){1,3}", 21),
        ("^(?:ab)+a", 56),  # (ab)+ costs 3 + 3X and, followed by a, has X ways out
        ("^(?:ab)+c", 36),
        ("^(?:ab|cd)+a", 100),
        ("(?:a|b)*", 253),
        ("^(?=a+)", 25),  # a lookahead costs its body, one way out
        ("^(?=a)b+b", 47),
        ("^(?=a+)b+b", 68),
        ("^(?:(?=a)b)+b", 67),  # a constant lookahead repeats with its iteration
        ("^(?:(?=a+)b)+b", 298),  # one that reads ahead re-reads: (5 + 2X) per iteration
        ("^(?>ab)", 5),  # an atomic group is modelled as a group
        ("^(?>a+)a", 56),
        ("^(?:(?>a)b)+a", 67),
        ("^a+a{0}", 25),  # a{0} matches nothing, so nothing follows a+
        ("^(?:a|)b", 8),  # an empty branch: two ways
        ("^(?:ab|)c", 9),
        ("^a+[^a]a", 26),  # [^a] is one character, so a does not follow a+
        ("^b+a+b", 47),  # a+ stands between b+ and b
        ("^b+a*b", 287),  # a* may not: b+ has X ways out, each tries a*
        ("^a+\\Za", 26),  # nothing follows the end, so nothing continues a+
        ("^a+$a", 26),
        ("^a{1}a", 6),  # exactly once: one way
        ("^(?:a|a){1}b", 11),  # the body's 2 ways, once
        ("^(?:ab+c)+", 77),  # (5 + 2X) per iteration: only the constant 5 repeats X times
        ("^(?:(ab)c+)+", 88),  # (ab) is not optional: the next iteration starts with a
        ("^(?:(?=a)b+c)+", 88),  # a one-character lookahead does not re-read
        ("^(?:(?:ab|cd)e+)+", 121),  # no branch is optional: the next iteration starts a or c
        ("^(a)+b", 36),  # a group sets only the flags it names: b cannot continue (a)+
        ("(a)" * 40, 891),  # 40 groups side by side are not nested
        ("(?>" * 32 + "a" + ")" * 32, 374),  # 32 nested atomic groups: 2 + 32, searched
        ("(?=" * 32 + "a" + ")" * 32, 374),
    ],
)
def test_rb3_regex_work_is_the_modelled_bound(pattern: str, expected: int) -> None:
    """The bound computed for small regexes, worked out by hand (see the module docstring)."""
    assert work(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^[^@]+@", 25),  # [^@] cannot be '@': one way out
        ("^[^a]+b", 45),
        ("^[^a-c]+b", 25),
        ("^\\d+a", 25),
        ("^\\d+5", 45),
        ("^[\\D]+5", 25),
        ("(?a)^[\\D]+5", 45),  # ASCII-only \\D: not modelled, assumed to overlap
        ("(?a)^[\\d]+a", 25),
        ("^\\w+\\d", 45),
        ("^\\w+_", 45),
        ("^\\W+_", 25),
        ("^\\w+-", 25),
        ("(?i)^a+\\Z", 25),  # case folding, but nothing continues into the very end
        ("^[\u0100-\u0300]+a", 25),  # a tested range
        ("^[\u0100-\u0300]+\u0200", 45),
        ("^[\u0100-\u0300]+\u0100", 45),  # a tested range includes both of its ends
        ("^[\u0100-\u0300]+\u0300", 45),
        ("^[\u0100-\u0300]+\u00ff", 25),  # and nothing outside them
        ("^[\u0100-\u0300]+\u0301", 25),
        ("^[a-z]+\\d", 25),
        ("^[a-z]+[0-9]", 25),
        ("^[a-z]+[x-z]", 45),
        ("^[a-c]+c", 45),  # a range includes its last character
        ("^\\d+[a-z]", 25),
        ("^\\s+$", 45),  # $ also matches before a final newline, which \\s is
        ("^\\s+\\Z", 25),  # \\Z only at the very end
        ("^.+\\n", 25),  # . is not a newline
        ("(?s)^.+\\n", 45),  # unless DOTALL
        ("(?i)^a+A", 45),  # case folding: assumed to overlap
        ("(?i)^[a]+A", 45),
        ("^(?i:[ab])+B", 56),  # a case-folded class may match B: X ways out
        ("^[a]+A", 25),
        ("^[\x00-\xff]+[\u0100-\u0300]", 25),  # a listed range against a tested one
        ("^[\x00-\u0100]+[\u0101-\u0300]", 45),  # two tested ranges: assumed to overlap
        ("^[\x00-\xff\u0100-\u01ff]+[\u0200-\u0400]", 25),  # 512 characters are listed
        ("^[\x00-\xff\u0100-\u01ff\u0300]+[\u0400-\u0600]", 45),  # 513 are not
    ],
)
def test_rb3_a_quantifier_counts_only_when_what_follows_can_continue_it(
    pattern: str, expected: int
) -> None:
    """``[^@]+@`` has one way out; ``\\d+5`` has one per length. 25 is one way, 45 is X."""
    assert work(pattern) == expected


def test_rb3_the_bound_is_checked_at_the_longest_input() -> None:
    """'a+a' searched: (4 + 4X)(1 + X) = 4 + 8X + 4X**2 steps. At 998 characters that is
    exactly 4,000,000, the most accepted; at 999 it is refused, and the reason says so."""
    assert work("a+a", 998) == 4_000_000
    assert accepted("a+a", 998)
    assert not accepted("a+a", 999)
    assert refusal("a+a", 999) == (
        "the pattern at / ('a+a') could take about 4e+06 backtracking steps on a "
        "999-character string (ambiguous, nested or adjacent quantifiers)"
    )
    assert work("^a+a", 1000) == 5 + 4 * 1001
    assert accepted("^a+a")  # anchored: linear
    assert work("^a+a", 999_997) == 3_999_997  # 5 + 4X
    assert "steps on a 999998-character string" in refusal("^a+a", 999_998)  # 4,000,001


def test_rb3_a_huge_bound_is_reported_capped() -> None:
    """Seven adjacent quantifiers on 1,000 characters: about 1e21 steps, reported as 1e+12."""
    assert "could take about 1e+12 backtracking steps" in refusal("^" + "a+" * 7 + "a")


# --- refused outright --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("^a{1001}", "repeats a count over 1000"),
        ("^a{1001,}", "repeats a count over 1000"),
        ("^a{0,1001}", "repeats a count over 1000"),
        ("(a)\\1", "uses a backreference"),
        ("(a)?(?(1)b|c)", "uses a backreference"),
        ("^(?:a+)+", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:a?)*", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:a|a){11}", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:(a?)b+)+", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:\\b)*a", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:(?=a))+", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:x{0})+", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        ("^(?:(?i:B)b+)+", "nests a variable quantifier or ambiguous alternation in a quantifier"),
        (  # a lookahead reads nothing: an iteration also starts with $, where (\\Z)+ may end
            "^(?:(?=a)$(\\Z)+)+",
            "nests a variable quantifier or ambiguous alternation in a quantifier",
        ),
        ("[)]" + "(" * 33 + "a" + ")" * 33, "nests groups more than 32 deep"),
        ("(" * 33 + "a" + ")" * 33, "nests groups more than 32 deep"),
        ("\\\\(" * 33 + ")" * 33, "nests groups more than 32 deep"),  # \\\\ is a backslash
        ("(?:a" * 33 + ")" * 33, "nests groups more than 32 deep"),  # text between: still 33
        ("((a)" + "(" * 32 + "b" + ")" * 33, "nests groups more than 32 deep"),  # (a) closes one
        ("(a|" * 21 + "b" + ")" * 21, "nests too deeply"),
        (repeated_branches(21), "nests too deeply"),
        ("(?=b|" * 21 + "a" + ")" * 21, "nests too deeply"),  # a lookahead is a level too
        ("(?>b|" * 21 + "a" + ")" * 21, "nests too deeply"),  # so is an atomic group
        ("^" + "a+" * 8 + "a", "could backtrack polynomially in the input length"),
        ("a(", "is not a valid regular expression (missing ), unterminated subpattern"),
    ],
)
def test_rb3_regexes_the_model_cannot_bound_are_refused_with_a_reason(
    pattern: str, reason: str
) -> None:
    """The reason names the pattern and what about it cannot be bounded (even at 7 chars)."""
    assert refusal(pattern, longest=7).startswith(f"the pattern at / ({pattern[:80]!r}) {reason}")


@pytest.mark.parametrize(
    "pattern",
    [
        "^a{1000}",
        "^a{1000,}",
        "^a{0,1000}",
        "^(?:a|a){10}",
        "(" * 32 + "a" + ")" * 32,
        "(a)" + "(" * 32 + "b" + ")" * 32,  # a group closed before leaves no depth behind
        "\\(" * 40 + "a",  # escaped: literal parentheses, not groups
        "(a|" * 20 + "bb" + ")" * 20,  # 40 levels deep (an innermost a|b would be a class)
        repeated_branches(20),
        "(?=b|" * 20 + "a" + ")" * 20,  # 40 levels: a lookahead and a branch each
        "(?>b|" * 20 + "a" + ")" * 20,  # 40 levels: an atomic group and a branch each
    ],
)
def test_rb3_regexes_just_inside_the_structural_limits_are_accepted(pattern: str) -> None:
    """Each limit above is exact: one step inside it the regex is bounded normally."""
    assert accepted(pattern)


def test_rb3_seven_adjacent_quantifiers_are_still_counted() -> None:
    """Degree 7 in the input length is modelled (and refused on its size at 1,000
    characters); degree 8 is refused whatever the length. White-box: at one character,
    X = 2: 1 + 6 * (1 + 3 + ... + 3**6) for the ^ and seven a+, then 3**7 ways tried and
    handed on, 2 * 2187."""
    assert work("^" + "a+" * 7 + "a", 1) == 10933


def test_rb3_pattern_length_is_bounded_exactly() -> None:
    """``max_pattern_length`` characters are accepted, one more is refused, before parsing."""
    limits = SchemaLimits(max_pattern_length=5)
    compile_answer_schema({"pattern": "^abcd"}, limits=limits)
    with pytest.raises(SchemaRejectedError) as info:
        compile_answer_schema({"pattern": "^abcde"}, limits=limits)
    assert info.value.reason == "the pattern at / is over 5 characters"
