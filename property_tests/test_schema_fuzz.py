"""A hostile ``responseSchema`` is compiled or refused, and an answer is checked, never a crash.

The schema comes from the network. Hypothesis builds schemas from JSON Schema
keywords with values of the right and of the wrong kind: ``$ref`` targets that
exist, do not, recurse or point off-document, regexes that backtrack or do not
parse, unknown formats and drafts, junk where a schema should be. Whatever it
draws:

- ``compile_answer_schema`` returns a validator or raises ``SchemaRejectedError``,
  nothing else, and leaves the caller's schema unchanged;
- the validator's ``check`` never raises, whatever the answer, and returns
  ``ok`` or at least one readable problem; checking twice gives the same result.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlude.core.answers import (
    AnswerCheck,
    AnswerValidator,
    SchemaRejectedError,
    check_answer,
    compile_answer_schema,
)

TYPES = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])
PATTERNS = st.sampled_from(
    ["^a+$", "(a+)+$", "(a|aa)*b", "[", "\\d{2,}", "(?P<x>a)(?P=x)", "a{1000}", "", "\\p{L}"]
)
FORMATS = st.sampled_from(["email", "date-time", "date", "uri", "regex", "ipv4", "nope"])
REFS = st.sampled_from(
    ["#", "#/definitions/a", "#/$defs/a", "#/properties/x", "#/nope", "http://x/s.json", "a.json"]
)
DRAFTS = st.sampled_from(
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
        "urn:unknown",
    ]
)
NAMES = st.sampled_from(["x", "y", "a"])
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.floats(allow_nan=False),
    st.text(max_size=3),
)
answers = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


def keywords(schema: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """One schema object: a few keywords, each with a fitting or a junk value."""
    pairs = st.one_of(
        st.tuples(st.just("type"), TYPES | st.lists(TYPES, max_size=2) | junk),
        st.tuples(st.just("properties"), st.dictionaries(NAMES, schema, max_size=2) | junk),
        st.tuples(st.just("required"), st.lists(NAMES | junk, max_size=2) | junk),
        st.tuples(st.just("items"), schema | st.lists(schema, max_size=2) | junk),
        st.tuples(st.just("enum"), st.lists(answers, max_size=3) | junk),
        st.tuples(st.just("const"), answers),
        st.tuples(st.sampled_from(["minimum", "maximum", "exclusiveMinimum"]), junk),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]), junk),
        st.tuples(st.just("multipleOf"), st.sampled_from([0, 0.1, -1, 3]) | junk),
        st.tuples(st.just("pattern"), PATTERNS | junk),
        st.tuples(st.just("patternProperties"), st.dictionaries(PATTERNS, schema, max_size=2)),
        st.tuples(st.just("format"), FORMATS | junk),
        st.tuples(st.just("$ref"), REFS | junk),
        st.tuples(st.sampled_from(["definitions", "$defs"]), st.fixed_dictionaries({"a": schema})),
        st.tuples(st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(schema, max_size=3)),
        st.tuples(st.sampled_from(["not", "if", "then", "else"]), schema),
        st.tuples(st.just("additionalProperties"), schema),
        st.tuples(st.just("uniqueItems"), st.booleans() | junk),
        st.tuples(st.just("dependencies"), st.dictionaries(NAMES, st.lists(NAMES) | schema)),
        st.tuples(st.just("default"), answers),
    )
    return st.lists(pairs, max_size=4).map(dict)


schemas = st.recursive(st.booleans() | st.just({}), keywords, max_leaves=10)
roots = st.builds(
    lambda body, draft: {**body, "$schema": draft} if draft else body,
    keywords(schemas),
    st.none() | DRAFTS,
)


@settings(max_examples=500)
@given(schema=roots, answer=answers)
def test_any_schema_compiles_or_is_refused_and_any_answer_is_checked(
    schema: dict[str, Any], answer: Any
) -> None:
    original = copy.deepcopy(schema)
    try:
        validator = compile_answer_schema(schema)
    except SchemaRejectedError as exc:
        assert str(exc)  # says why
        assert schema == original
        return
    assert isinstance(validator, AnswerValidator)
    assert schema == original
    first = validator.check(answer)
    assert isinstance(first, AnswerCheck)
    assert first.ok or (first.problems and all(isinstance(p, str) and p for p in first.problems))
    assert validator.check(answer) == first
    assert check_answer(schema, answer) == first
