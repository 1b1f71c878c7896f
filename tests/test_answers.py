"""R-B3: the optional answer check is safe with hostile ``responseSchema``s.

Compiling never runs code from the schema, never fetches, never writes
defaults into the answer, and is bounded in size, depth and time.
"""

from __future__ import annotations

import ast
import copy
import enum
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from interlude.core import schema_code
from interlude.core.answers import (
    AnswerCheck,
    SchemaLimits,
    SchemaRejectedError,
    check_answer,
    compile_answer_schema,
)
from interlude.core.json import FrozenDict, freeze
from interlude.core.patch import apply_patch

APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}
DRAFT_04 = "http://json-schema.org/draft-04/schema#"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
SHORT = {"max_pattern_input_length": 12}
SAFETY_BOUND_S = 2.0  # a generous wall-clock safety bound, not a performance claim


def reason(schema: Any, **limits: int) -> str | None:
    """Why compiling ``schema`` under these limits is refused, or None if it compiles."""
    try:
        compile_answer_schema(schema, limits=SchemaLimits(**limits))
    except SchemaRejectedError as exc:
        return exc.reason
    return None


def nested(depth: int, make: Callable[[Any], Any], leaf: Any) -> Any:
    """Build a deeply nested value without recursion."""
    value = leaf
    for _ in range(depth):
        value = make(value)
    return value


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.elapsed = time.perf_counter() - self.start
        assert self.elapsed < SAFETY_BOUND_S, f"took {self.elapsed:.2f} s"


@pytest.fixture
def no_side_effects(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if anything tries to run a process or touch the network."""

    def forbidden(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"side effect attempted: {args!r}")

    monkeypatch.setattr(os, "system", forbidden)
    monkeypatch.setattr(os, "popen", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(urllib.request, "urlopen", forbidden)
    yield


# --- normal use --------------------------------------------------------------------------------


def test_rb3_purchase_approval_accepts_booleans_and_rejects_readably() -> None:
    validator = compile_answer_schema(APPROVAL)
    assert validator.check({"approved": True}) == AnswerCheck(ok=True)
    assert validator.check({"approved": False}) == AnswerCheck(ok=True)
    missing = validator.check({})
    assert not missing.ok
    assert missing.problems == ("data must contain ['approved'] properties",)
    wrong = validator.check({"approved": "yes"})
    assert wrong.problems == ("data.approved must be boolean",)
    extra = validator.check({"approved": True, "note": "x"})
    assert not extra.ok and "note" in extra.problems[0]


def test_rb3_common_keywords_report_every_problem() -> None:
    schema = {
        "type": "object",
        "properties": {
            "choice": {"enum": ["approve", "reject"]},
            "reason": {"type": "string", "minLength": 3},
            "amount": {"type": "number", "minimum": 0, "maximum": 100},
            "count": {"type": "integer"},
            "address": {
                "type": "object",
                "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["zip"],
            },
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "kind": {"const": "order"},
        },
        "required": ["choice"],
        "additionalProperties": False,
    }
    validator = compile_answer_schema(schema)
    good = {
        "choice": "approve",
        "reason": "fine",
        "amount": 99.5,
        "count": 3,
        "address": {"zip": "12345"},
        "tags": ["a", "b"],
        "kind": "order",
    }
    assert validator.check(good).ok
    bad = validator.check(
        {
            "choice": "maybe",
            "reason": "no",
            "amount": 101,
            "count": 1.5,
            "address": {"zip": "1234x"},
            "tags": ["a", 2, "c"],
            "kind": "other",
        }
    )
    assert not bad.ok
    text = "\n".join(bad.problems)
    for expected in (
        "data.choice must be one of",
        "data.reason must be longer than or equal to 3 characters",
        "data.amount must be smaller than or equal to 100",
        "data.count must be integer",
        "data.address.zip must match pattern",
        "data.tags must contain less than or equal to 2 items",
        "data.tags[1] must be string",
        "data.kind must be same as const definition: order",
    ):
        assert expected in text, (expected, bad.problems)


def test_rb3_accepts_frozen_schemas_and_answers() -> None:
    frozen_schema = freeze(APPROVAL)
    assert isinstance(frozen_schema, FrozenDict)
    validator = compile_answer_schema(frozen_schema)
    assert validator.check(freeze({"approved": True})).ok
    assert not validator.check(freeze({"approved": 1})).ok
    array = compile_answer_schema({"type": "array", "items": {"type": "integer"}})
    assert array.check((1, 2, 3)).ok


def test_rb3_accepts_values_from_state_that_a_json_patch_made_persistent() -> None:
    """Frozen JSON includes the PVec and PMap a patch leaves (long arrays, wide objects)."""
    doc = freeze({"ids": list(range(100)), "wide": {f"k{n}": n for n in range(1100)}})
    state = apply_patch(
        doc,
        freeze(
            [{"op": "add", "path": "/ids/-", "value": 100}, {"op": "remove", "path": "/wide/k0"}]
        ),
    )
    answer = {"ids": state["ids"], "wide": state["wide"]}  # type: ignore[index]
    assert [type(v).__name__ for v in answer.values()] == ["PVec", "PMap"]
    schema = {
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 101},
            "wide": {"type": "object", "minProperties": 1099},
        }
    }
    assert compile_answer_schema(schema).check(answer).ok
    assert compile_answer_schema({"properties": {"ids": {"maxItems": 2}}}).check(answer).problems
    assert compile_answer_schema(freeze({"enum": [state["ids"]]})).check(list(range(101))).ok  # type: ignore[index]


class Choice(str, enum.Enum):  # noqa: UP042 - the mixin apps still use; str() is "Choice.YES"
    YES = "yes"


def test_rb3_an_enum_in_the_answer_is_checked_as_the_text_resume_sends() -> None:
    """resume() sends a (str, Enum) member as its value (R-B1); the check reads the same."""
    checker = compile_answer_schema(
        {"properties": {"yes": {"enum": ["yes"]}}, "additionalProperties": False}
    )
    assert checker.check({Choice.YES: Choice.YES}) == AnswerCheck(ok=True)
    assert compile_answer_schema({"const": Choice.YES}).check("yes").ok


@pytest.mark.parametrize(
    ("uri", "draft"),
    [
        ("http://json-schema.org/draft-04/schema#", "draft-04"),
        ("http://json-schema.org/draft-06/schema#", "draft-06"),
        ("https://json-schema.org/draft-07/schema", "draft-07"),
        ("https://json-schema.org/draft/2019-09/schema", "draft/2019-09"),
    ],
)
def test_rb3_known_drafts_are_used(uri: str, draft: str) -> None:
    validator = compile_answer_schema({**APPROVAL, "$schema": uri})
    assert validator.draft == draft
    assert validator.check({"approved": True}).ok
    assert compile_answer_schema(APPROVAL).draft == "draft/2019-09"


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
        {"$schema": "http://example.com/my-draft", "type": "object"},
        {"$schema": None},
        {"$schema": 4},
    ],
)
def test_rb3_unknown_schema_draft_is_rejected(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaRejectedError, match=r"\$schema"):
        compile_answer_schema(schema)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "dependentRequired": {"card": ["cvc"]}}, "dependentRequired"),
        ({"properties": {"a": {"unevaluatedProperties": False}}}, "unevaluatedProperties"),
        ({"items": {"type": "array", "contains": {"const": 1}, "minContains": 2}}, "minContains"),
        ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, "maxLength"),
    ],
)
def test_rb3_a_2019_09_assertion_the_checker_would_skip_is_refused(
    schema: dict[str, Any], says: str
) -> None:
    """A schema without ``$schema`` is read as draft 2019-09, which fastjsonschema checks
    with draft-07's keywords: these assertions would be skipped and a wrong answer called
    right. The schema is refused instead ("check it without local checks"); the same
    keyword under an explicit draft-07, which does not define it, is ignored as the draft
    says, and a property that merely bears its name is fine."""
    with pytest.raises(SchemaRejectedError, match=says):
        compile_answer_schema(schema)
    draft07 = {**schema, "$schema": "http://json-schema.org/draft-07/schema#"}
    assert compile_answer_schema(draft07).draft == "draft-07"
    named = {"type": "object", "properties": {says: {"type": "string"}}, "required": [says]}
    assert compile_answer_schema(named).check({says: "x"}).ok


def test_rb3_content_keywords_are_annotations_in_2019_09() -> None:
    """Draft 2019-09 (section 8) makes contentMediaType and contentEncoding annotations:
    a right answer is not refused for them (fastjsonschema would decode and parse it)."""
    schema = {"type": "string", "contentMediaType": "application/json", "contentEncoding": "base64"}
    assert check_answer(schema, "YQ==").ok  # "a", not JSON text: still a right answer
    assert check_answer({**schema, "maxLength": 3}, "YQ==").problems
    given = copy.deepcopy(schema)
    compile_answer_schema(given)
    assert given == schema  # the caller's schema is not touched


@pytest.mark.parametrize("schema", [True, False, [], "string", 3, None])
def test_rb3_schema_must_be_an_object(schema: Any) -> None:
    with pytest.raises(SchemaRejectedError, match="not a JSON object"):
        compile_answer_schema(schema)


def test_rb3_rejection_says_why_and_what_to_do() -> None:
    with pytest.raises(SchemaRejectedError) as info:
        compile_answer_schema({"$ref": "https://example.com/schema.json"})
    assert "never fetched" in info.value.reason or "outside the schema" in info.value.reason
    assert "free JSON" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_rb3_malformed_schemas_are_rejected_not_crashes() -> None:
    for schema in (
        {"type": "banana"},
        {"type": {"not": "hashable"}},
        {"minLength": "three"},
        {"format": ["list"]},
        {"required": [{"a": 1}]},
        {"multipleOf": 0},
        {"enum": 3},
        {"properties": []},
        {"prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        {"a": float("nan")},
        {"a": 10**400},
        {"a": {1: "non-string key"}},
        {"a": {"set"}},
    ):
        with pytest.raises(SchemaRejectedError):
            compile_answer_schema(schema)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema",
    [
        {"multipleOf": False},  # was a ZeroDivisionError on every numeric answer
        {"minLength": True},  # was read as 1: "longer than or equal to True characters"
        {"properties": {"n": {"maximum": False}}},
        {"items": [{"minItems": True}]},
        {"$defs": {"n": {"minimum": True}}, "$ref": "#/$defs/n"},
        {"enum": [{"multipleOf": False}], "$ref": "#/enum/0"},  # a $ref makes it a schema
        {"minimum": 0, "exclusiveMinimum": True},  # draft-04's boolean form, read as 1
    ],
)
def test_rb3_a_boolean_where_a_number_belongs_is_a_rejected_schema(schema: Any) -> None:
    """A malformed schema is refused when compiled, not reported on every answer."""
    with pytest.raises(SchemaRejectedError, match=r"not a number|draft-04"):
        compile_answer_schema(schema)


_NUMBER_KEYWORDS = [
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
]


@pytest.mark.parametrize("turn", range(len(_NUMBER_KEYWORDS)))
def test_rb3_the_problem_named_is_the_first_in_the_schema_whatever_the_process(turn: int) -> None:
    # A set of strings iterates in an order that changes with the process's hash seed:
    # walked that way, the same schema named a different keyword from run to run.
    keywords = _NUMBER_KEYWORDS[turn:] + _NUMBER_KEYWORDS[:turn]
    first = keywords[0]
    with pytest.raises(SchemaRejectedError, match=f"{first} at / is true"):
        compile_answer_schema(dict.fromkeys(keywords, True))
    nested = {k: {"minLength": True} for k in ("not", "if", "then", "else", "contains")}
    order = list(nested)[turn % 5 :] + list(nested)[: turn % 5]
    with pytest.raises(SchemaRejectedError, match=f"minLength at /{order[0]} is true"):
        compile_answer_schema({k: nested[k] for k in order})


def test_rb3_a_ref_target_outside_the_subschemas_is_looked_at_after_them() -> None:
    # The walk is the schema's own order; a $ref that makes data a schema comes last.
    schema = {"allOf": [{"$ref": "#/enum/0"}], "enum": [{"multipleOf": False}]}
    with pytest.raises(SchemaRejectedError, match="multipleOf at /enum/0 is false"):
        compile_answer_schema(schema)
    with pytest.raises(SchemaRejectedError, match="minLength at / is true"):
        compile_answer_schema({**schema, "minLength": True})
    # a target already looked at as a subschema ends nothing: the other target is seen too
    refs = [{"$ref": "#/$defs/a"}, {"$ref": "#/enum/0"}]
    for both in (refs, refs[::-1]):
        with pytest.raises(SchemaRejectedError, match="multipleOf at /enum/0 is false"):
            compile_answer_schema({"allOf": both, "$defs": {"a": {}}, "enum": schema["enum"]})


def test_rb3_booleans_that_are_schemas_or_data_are_not_numbers() -> None:
    # boolean subschemas of properties named like keywords, and booleans in data
    schema = {
        "properties": {"minimum": True, "maxLength": False},
        "default": {"minLength": True},
        "const": {"multipleOf": False},
    }
    assert compile_answer_schema(schema).check({"multipleOf": False}).ok
    assert not compile_answer_schema(schema).check({"maxLength": 1}).ok
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 0}
    checker = compile_answer_schema({**draft4, "exclusiveMinimum": True})
    assert [checker.check(0).ok, checker.check(1).ok] == [False, True]


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"minLength": True}, "minLength at / is true, not a number"),
        (
            {"exclusiveMinimum": True},
            "exclusiveMinimum at / is true, draft-04's form; draft/2019-09 takes the bound "
            "itself, a number (or give $schema draft-04)",
        ),
        (
            {"$schema": DRAFT_07, "exclusiveMaximum": False},
            "exclusiveMaximum at / is false, draft-04's form; draft-07 takes the bound "
            "itself, a number (or give $schema draft-04)",
        ),
        ({"allOf": [{"minLength": True}]}, "minLength at /allOf/0 is true, not a number"),
        ({"not": {"maxItems": False}}, "maxItems at /not is false, not a number"),
        ({"items": [{"minItems": True}]}, "minItems at /items/0 is true, not a number"),
        ({"$defs": {"x": {"minLength": True}}}, "minLength at /$defs/x is true, not a number"),
        (
            {"dependencies": {"a": {"minimum": True}}},
            "minimum at /dependencies/a is true, not a number",
        ),
        (
            {"dependentSchemas": {}, "dependentRequired": {}},
            "it uses dependentRequired (at /), a draft 2019-09 keyword the checker does not apply",
        ),
        (
            {"properties": {"a": {"unevaluatedItems": False}}},
            "it uses unevaluatedItems (at /properties/a), a draft 2019-09 keyword the checker "
            "does not apply",
        ),
        (
            {"$ref": "#/$defs/s", "$defs": {"s": {}}, "type": "string", "maxLength": 2},
            "it has maxLength beside a $ref (at /), which the checker would not apply "
            "(draft-07 rules); put both in an allOf",
        ),
        (
            {"$schema": "http://json-schema.org/draft-05/schema#"},
            "its $schema 'http://json-schema.org/draft-05/schema#' is not draft-04, -06, -07 "
            "or 2019-09 (omit $schema for 2019-09)",
        ),
        (
            {"$schema": DRAFT_07 + "#"},
            f"its $schema '{DRAFT_07}#' is not draft-04, -06, -07 or 2019-09 (omit $schema "
            "for 2019-09)",
        ),
        ({"multipleOf": 0}, "multipleOf at / is 0, not positive"),
        ({"multipleOf": -1.5}, "multipleOf at / is -1.5, not positive"),
        ({"required": [3]}, "'required' at / holds 3, not a property name"),
        (  # fastjsonschema reads a pattern's $ as \Z, also in a class, where it is invalid
            {"pattern": "[$]"},
            "the pattern at / ('[\\\\Z]') is not a valid regular expression (bad escape \\Z "
            "at position 1)",
        ),
        (
            {"prefixItems": [], "items": {}},
            "the object at / uses draft 2020-12 prefixItems with items, which fastjsonschema "
            "would read with older rules",
        ),
    ],
)
def test_rb3_a_vetted_schema_is_refused_naming_the_keyword_and_place(
    schema: dict[str, Any], why: str
) -> None:
    """R-B3: the reason names the keyword, where it is (a JSON Pointer) and what is wrong."""
    assert reason(schema) == why


@pytest.mark.parametrize(
    "schema",
    [
        {"enum": [{"minLength": True}]},  # data, not a schema
        {"dependencies": {"a": ["b"]}},
        {"multipleOf": 0.5},
        {"$schema": "http://json-schema.org/draft-07/schema"},  # the '#' is optional
        {"$schema": "https://json-schema.org/draft-04/schema#"},
        {"$schema": "http://json-schema.org/draft/2019-09/schema#"},
        {"$schema": DRAFT_07, "dependentRequired": {"a": ["b"]}},  # not a draft-07 keyword
    ],
)
def test_rb3_schemas_near_a_refusal_compile(schema: dict[str, Any]) -> None:
    assert reason(schema) is None


def test_rb3_keys_and_required_names_are_bounded_by_the_input_length() -> None:
    """max_pattern_input_length also bounds keys and ``required`` names, exactly."""
    assert reason({"properties": {"x" * 12: {}}, "required": ["y" * 12]}, **SHORT) is None
    assert reason({"properties": {"x" * 13: {}}}, **SHORT) == (
        "a key at /properties is over 12 characters"
    )
    assert reason({"required": ["y" * 13]}, **SHORT) == (
        "a 'required' name at / is over 12 characters"
    )


def test_rb3_an_overlong_required_name_is_refused_saying_why_without_quoting_it_whole() -> None:
    """R-B3: the schema comes from the network; a ``required`` name over
    max_pattern_input_length is refused as an overlong key is: the message names the
    limit (what to raise, or why the schema is unusable) and does not carry the name in
    full (up to max_bytes of text in an exception, a log line, a form's banner). It was
    quoted whole, with no reason."""
    said = reason({"required": ["y" * 100_000]})
    assert said is not None
    assert "over 1000 characters" in said
    assert len(said) < 500
    said = reason({"required": [["y" * 1000] * 100]})  # not a name: quoted, bounded
    assert said is not None and said.startswith("'required' at / holds [")
    assert said.endswith(", not a property name") and len(said) < 500


def test_rb3_check_answer_convenience() -> None:
    assert check_answer(APPROVAL, {"approved": True}).ok
    assert not check_answer(APPROVAL, {}).ok
    with pytest.raises(SchemaRejectedError):
        check_answer({"$ref": "http://x/"}, {})


def test_rb3_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        SchemaLimits(max_depth=0)
    with pytest.raises(ValueError, match="max_bytes"):
        SchemaLimits(max_bytes=True)


LIMIT_DEFAULTS = {
    "max_bytes": 256 * 1024,
    "max_depth": 32,
    "max_nodes": 10_000,
    "max_pattern_length": 1000,
    "max_pattern_input_length": 1000,
    "max_format_length": 4096,
    "max_expanded_values": 100_000,
    "max_check_work": 2_000_000,
}


def test_rb3_limit_defaults_are_the_documented_ones() -> None:
    """docs/answers.md's table of SchemaLimits defaults is what a user gets."""
    limits = SchemaLimits()
    assert {name: getattr(limits, name) for name in LIMIT_DEFAULTS} == LIMIT_DEFAULTS


@pytest.mark.parametrize("name", sorted(LIMIT_DEFAULTS))
@pytest.mark.parametrize("bad", [0, -1, True, 1.0, "1", None])
def test_rb3_every_limit_must_be_a_positive_int(name: str, bad: object) -> None:
    """Each limit refuses anything but an int of at least 1, naming itself and the value."""
    with pytest.raises(ValueError) as info:
        SchemaLimits(**{name: bad})  # type: ignore[arg-type]
    assert str(info.value) == f"SchemaLimits.{name} must be a positive int, not {bad!r}"
    assert getattr(SchemaLimits(**{name: 1}), name) == 1


def test_rb3_limits_are_keyword_only_and_frozen() -> None:
    """docs/answers.md: all keyword arguments; a compiled validator's limits cannot change."""
    with pytest.raises(TypeError):
        SchemaLimits(1024)  # type: ignore[misc]
    limits = SchemaLimits(max_depth=4)
    with pytest.raises(AttributeError):
        limits.max_depth = 5  # type: ignore[misc]


def test_rb3_a_rejection_reads_as_reason_then_what_to_do() -> None:
    """str(SchemaRejectedError) is the sentence an application can show or log."""
    error = SchemaRejectedError("it is 41 bytes as JSON, over 40")
    assert error.reason == "it is 41 bytes as JSON, over 40"
    assert str(error) == (
        "responseSchema not usable for local answer checks: it is 41 bytes as JSON, over 40. "
        "Collect the answer without local checks (e.g. free JSON entry); the server validates "
        "it on resume"
    )


# --- 1. no code runs from the schema -----------------------------------------------------------

PAYLOADS = [
    "\"); __import__('pathlib').Path(MARK).touch()#",
    "'); __import__('pathlib').Path(MARK).touch()#",
    '"""; __import__("pathlib").Path(MARK).touch(); """',
    "\\\"); __import__('pathlib').Path(MARK).touch()#\\",
    "\n__import__('pathlib').Path(MARK).touch()\n",
    "\r\n__import__('pathlib').Path(MARK).touch()  # \u2028 \x0c \x00",
    "{__import__('pathlib').Path(MARK).touch()}",
    "{data.__class__.__init__.__globals__}",
    "{0.__class__}{{}}}{",
    "f'{__import__(\"pathlib\").Path(MARK).touch()}'",
    "\\N{LATIN SMALL LETTER A}\\x41\\u0041 \ud800 \U0001f600",
    "__import__",
    "'; import os; os.system('touch MARK')#",
]


def payloads(mark: Path) -> list[str]:
    return [p.replace("MARK", str(mark)) for p in PAYLOADS]


def hostile_schema(mark: Path) -> dict[str, Any]:
    texts = payloads(mark)
    properties: dict[str, Any] = {
        text: {
            "type": "string",
            "title": text,
            "description": text,
            "$comment": text,
            "format": text,
            "default": text,
            "examples": [text],
            "definition_rule": text,  # fastjsonschema echoes this raw without detailed errors
            "const": text,
            text: text,
        }
        for text in texts
    }
    return {
        "$id": texts[0],
        "title": texts[1],
        "type": "object",
        "properties": properties,
        "required": texts[:3],
        "enum": [{t: t for t in texts}, *texts],
        "dependencies": {texts[4]: [texts[5]], texts[6]: {"required": [texts[7]]}},
        "definitions": {t: {"const": t, "enum": [t]} for t in texts},
        "propertyNames": {"enum": texts},
        texts[8]: {"$ref": "#/definitions/" + texts[8].replace("~", "~0").replace("/", "~1")},
    }


def test_rb3_no_code_runs_from_schema_strings(tmp_path: Path, no_side_effects: None) -> None:
    mark = tmp_path / "pwned"
    texts = payloads(mark)
    validator = compile_answer_schema(hostile_schema(mark))
    answer = {t: t for t in texts}  # satisfies every keyword of the hostile schema
    assert validator.check(answer) == AnswerCheck(ok=True)
    for text in texts:
        assert not validator.check({**answer, text: 5}).ok
    assert not validator.check({**answer, "extra": "x"}).ok  # propertyNames / enum
    # the payloads stay plain names and values: one problem each, as for any name
    names = compile_answer_schema(
        {
            "type": "object",
            "properties": {t: {"const": t} for t in texts},
            "required": texts,
            "additionalProperties": False,
        }
    )
    assert names.check(answer).ok
    for text in texts:
        problems = names.check({**answer, text: "other"}).problems
        assert len(problems) == 1 and "must be same as const definition" in problems[0]
        problems = names.check({k: v for k, v in answer.items() if k != text}).problems
        assert len(problems) == 1 and "must contain" in problems[0]
    assert not mark.exists()


def test_rb3_no_code_runs_from_patterns_and_pattern_properties(
    tmp_path: Path, no_side_effects: None
) -> None:
    mark = tmp_path / "pwned"
    # valid regexes full of quotes, braces, backslashes and code-looking text
    patterns = [
        '^"\\); __import__\\(.pathlib.\\)#$',
        "^'\\}\\{__import__\\}$",
        '^\\\\"\\n\\r$',
        "^[\"'{}]+$",
        f"^{str(mark)!s}$".replace("\\", "\\\\").replace(".", "\\."),
    ]
    schema = {
        "type": "object",
        "properties": {p: {"type": "string", "pattern": p} for p in patterns},
        "patternProperties": {p: {"type": "integer"} for p in patterns},
    }
    validator = compile_answer_schema(schema)
    assert validator.check({"'}{__import__}": 1}).ok
    result = validator.check({"'}{__import__}": "x"})
    assert not result.ok
    assert validator.check({"\"'{}": 3}).ok
    assert not validator.check({"\"'{}": "nope"}).ok
    assert not mark.exists()


def test_rb3_generated_code_is_vetted_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_side_effects: None
) -> None:
    """Defence in depth: if fastjsonschema ever emitted schema text as code, it would not run."""
    mark = tmp_path / "pwned"
    honest = fastjsonschema.compile_to_code
    injections = [
        f"__import__('pathlib').Path({str(mark)!r}).touch()",
        f"open({str(mark)!r}, 'w')",
        "().__class__.__base__.__subclasses__()",
        "data.__class__",
        "(lambda: 0)()",
        "eval('1')",
        "getattr(data, 'x')",
        "f'{data}'",
        "'{0.__class__}'.format(data)",
        "2 ** 10 ** 10",
    ]
    statements = ["while True: pass", "import os", "from os import system", "global x"]
    for injection in [f"x = {code}" for code in injections] + statements:

        def poisoned(*args: Any, _line: str = injection, **kwargs: Any) -> str:
            source = honest(*args, **kwargs)
            return source.replace("NoneType = type(None)", f"NoneType = type(None)\n{_line}")

        monkeypatch.setattr(fastjsonschema, "compile_to_code", poisoned)
        with pytest.raises(SchemaRejectedError, match="does not trust"):
            compile_answer_schema(APPROVAL)
    assert not mark.exists()


def test_rb3_generated_code_gets_only_vetted_builtins_and_imports() -> None:
    assert schema_code._import("json") is json
    with pytest.raises(ImportError, match=r"^the answer checker may not import 'os'$"):
        schema_code._import("os")
    with pytest.raises(ImportError):
        schema_code._import("json", level=1)
    assert "open" not in schema_code._SAFE_BUILTINS
    assert "eval" not in schema_code._SAFE_BUILTINS
    assert "getattr" not in schema_code._SAFE_BUILTINS


CHECKER = "def validate(data, custom_formats={}, name_prefix=None):\n    {body}\n    return data\n"


def untrusted(body: str, more: str = "") -> str | None:
    """Why ``schema_code.load`` refuses a checker with this line (white-box: fastjsonschema
    itself never writes such code, so only a hand-written source reaches these rules)."""
    try:
        schema_code.load(CHECKER.replace("{body}", body) + more, SchemaLimits())
    except SchemaRejectedError as exc:
        return exc.reason.removeprefix("fastjsonschema generated code this module does not trust ")
    return None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("data_x = lambda: 0", "(a Lambda)"),
        ("while data: pass", "(a While)"),
        ("data_x = os", "(the name 'os')"),
        ("x = data", "(the name 'x')"),
        ("data_x = data.__class__", "(the attribute '__class__')"),
        ("import os", "(an import)"),
        ("import re as r", "(an import)"),
        ("from decimal import Decimal as D", "(an import)"),
        ("from os import path", "(an import)"),
        ("from .decimal import Decimal", "(an import)"),
        ("custom_formats[data](data)", "(a computed format)"),
        ("data_x = '{data.y}'.format(**locals())", "(an unexpected call)"),
        ("data_x = '{data!r}'.format(**locals())", "(an unexpected call)"),
        ("data_x = '{data:>9}'.format(**locals())", "(an unexpected call)"),
        ("data_x = '{} {0}'.format(data)", "(an unexpected call)"),
        ("data_x = '{'.format()", "(an unexpected call)"),
        ("data_x = data.format()", "(an unexpected call)"),
        ("data_x = b'{data}'.format()", "(an unexpected call)"),
        ("data_x = data[0](1)", "(an unexpected call)"),
    ],
)
def test_rb3_checker_code_outside_what_fastjsonschema_writes_is_refused(
    body: str, problem: str
) -> None:
    """R-B3: each rule of the allowlist, alone, names what it refused."""
    assert untrusted(body) == problem


@pytest.mark.parametrize(
    "body",
    [
        "pass",
        "import re, json",
        "from decimal import Decimal",
        "from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException",
        "custom_formats['uri'](data)",
        "data_x = '{data} must be {name_prefix}'.format(**locals())",
        "data_x = data.keys()",
    ],
)
def test_rb3_checker_code_fastjsonschema_writes_is_loaded(body: str) -> None:
    """The same rules let through the shapes fastjsonschema emits."""
    assert untrusted(body) is None


def test_rb3_the_loaded_checker_runs_with_the_vetted_builtins_only() -> None:
    """White-box: the exec'd checker's globals hold the allowlisted builtins and the
    import hook, not Python's builtins."""
    entry = compile_answer_schema({"type": "string"})._entry
    builtins = entry.__globals__["__builtins__"]
    assert set(builtins) == {*schema_code._SAFE_BUILTINS, "__import__"}
    assert builtins["__import__"] is schema_code._import


def test_rb3_draft_07_content_keywords_are_checked_with_the_preimported_modules() -> None:
    """Draft-07 checks contentEncoding/contentMediaType; its code imports base64 and json,
    which the checker gets from the modules imported here."""
    schema = {
        "$schema": DRAFT_07,
        "contentEncoding": "base64",
        "contentMediaType": "application/json",
    }
    validator = compile_answer_schema(schema)
    assert validator.check("e30=").ok  # "{}"
    assert not validator.check("YQ==").ok  # "a": not JSON


def test_rb3_checker_functions_are_only_plain_validators() -> None:
    """Only undecorated, unannotated ``validate*`` (and ``fn``) functions; two $refs that
    compile to one name must be one function; there must be an entry point."""
    validator = (
        "def {name}(data, custom_formats={{}}, name_prefix=None){returns}:\n    return {v}\n"
    )

    def extra(name: str, v: str = "data", returns: str = "") -> str:
        return validator.format(name=name, v=v, returns=returns)

    assert untrusted("pass", "@data\n" + extra("validate_x")) == "(the function 'validate_x')"
    assert untrusted("pass", extra("validate_x", returns=" -> None")) == (
        "(the function 'validate_x')"
    )
    assert untrusted("pass", extra("evil")) == "(the function 'evil')"
    assert untrusted("pass", extra("fn")) is None
    assert untrusted("pass", extra("validate_x") * 2) is None
    assert untrusted("pass", extra("validate_x") + extra("validate_x", v="1")) == (
        "two of its $refs compile to one function name (validate_x)"
    )
    with pytest.raises(SchemaRejectedError) as info:
        schema_code.load(extra("validate_x"), SchemaLimits())
    assert info.value.reason == "fastjsonschema generated no entry function"
    with pytest.raises(SchemaRejectedError, match="Python cannot parse its generated checker"):
        schema_code.load("def validate(:\n", SchemaLimits())


# --- 2. nothing is fetched ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "http://example.com/schema.json",
        "https://example.com/schema.json#/definitions/x",
        "file:///etc/passwd",
        "ftp://example.com/s.json",
        "urn:uuid:0b6b7c5e-3bdc-4a4e-9c8e-1c1c6f5c0e2a",
        "other.json",
        "other.json#/definitions/x",
        "//example.com/s.json",
        "/etc/passwd",
        "#plain-name",
        "",
        "data:application/json,{}",
    ],
)
def test_rb3_remote_refs_are_refused_before_compiling(
    ref: str, monkeypatch: pytest.MonkeyPatch, no_side_effects: None
) -> None:
    def fail(*args: object, **kwargs: object) -> str:
        raise AssertionError("compiled a schema with a remote $ref")

    monkeypatch.setattr(fastjsonschema, "compile_to_code", fail)
    for schema in (
        {"$ref": ref},
        {"properties": {"a": {"$ref": ref}}},
        {"definitions": {"x": {"allOf": [{"$ref": ref}]}}},
        {"$id": "https://evil.example/base/", "properties": {"a": {"$ref": ref}}},
    ):
        with pytest.raises(SchemaRejectedError):
            compile_answer_schema(schema)


def test_rb3_refs_under_a_nested_id_are_refused(no_side_effects: None) -> None:
    schema = {
        "definitions": {"x": {"$id": "https://evil.example/x.json", "items": {"$ref": "#/y"}}},
        "properties": {"a": {"$ref": "#/definitions/x"}},
    }
    with pytest.raises(SchemaRejectedError, match=r"\$id"):
        compile_answer_schema(schema)


def test_rb3_a_root_id_does_not_turn_local_refs_remote(no_side_effects: None) -> None:
    # with this $id, fastjsonschema itself would resolve '#/...' by fetching 'http://evil/x'
    schema = {
        "$id": "http://evil.example/x#",
        "definitions": {"flag": {"type": "boolean"}},
        "properties": {"a": {"$ref": "#/definitions/flag"}},
    }
    validator = compile_answer_schema(schema)
    assert validator.check({"a": True}).ok
    assert not validator.check({"a": 1}).ok
    assert schema["$id"] == "http://evil.example/x#"  # the caller's schema is untouched


def test_rb3_handlers_refuse_every_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: even fastjsonschema's own resolution cannot reach urllib."""

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("urlopen called")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    handlers = schema_code._RefuseEveryScheme()
    for ref in ("http://x/a.json", "file:///etc/passwd", "urn:x:y", "weird-scheme:z", "rel.json"):
        with pytest.raises(schema_code._RemoteRef):
            fastjsonschema.compile_to_code({"$ref": ref}, handlers)
    assert "anything" in handlers and len(handlers) == 0 and not list(handlers)


def test_rb3_generating_the_checker_refuses_what_fastjsonschema_cannot_do() -> None:
    """White-box (vetting refuses these first): a remote $ref is never fetched, and
    fastjsonschema failing on a schema is a rejection, with its own words."""
    with pytest.raises(SchemaRejectedError) as info:
        schema_code.generate({"$ref": "http://x/a.json"}, {})
    assert info.value.reason == "it refers to 'http://x/a.json', which is never fetched"
    with pytest.raises(SchemaRejectedError) as info:
        schema_code.generate({"items": {"$ref": "#/const"}, "const": 3}, {})
    assert info.value.reason.startswith("fastjsonschema cannot compile it (TypeError: ")


def test_rb3_regexes_in_the_generated_checker_are_vetted_again() -> None:
    """White-box: a regex the schema walk missed is still vetted before the checker runs."""
    source = "import re\nREGEX_PATTERNS = {'x': re.compile('(a+)+$')}\n" + CHECKER.replace(
        "{body}", "pass"
    )
    with pytest.raises(SchemaRejectedError) as info:
        schema_code.load(source, SchemaLimits())
    assert info.value.reason == (
        "a generated regex ('(a+)+$') nests a variable quantifier or ambiguous alternation "
        "in a quantifier"
    )


def test_rb3_local_refs_work() -> None:
    schema = {
        "definitions": {"flag": {"type": "boolean"}, "a/b": {"type": "integer"}},
        "$defs": {"name": {"type": "string", "minLength": 1}},
        "type": "object",
        "properties": {
            "ok": {"$ref": "#/definitions/flag"},
            "who": {"$ref": "#/$defs/name"},
            "n": {"$ref": "#/definitions/a~1b"},
            "list": {"type": "array", "items": {"$ref": "#/properties/who"}},
        },
    }
    validator = compile_answer_schema(schema)
    assert validator.check({"ok": True, "who": "ann", "n": 2, "list": ["b"]}).ok
    result = validator.check({"ok": 1, "who": "", "n": "x", "list": [""]})
    assert result.problems == (
        "data.ok must be boolean",
        "data.who must be longer than or equal to 1 characters",
        "data.n must be integer",
        "data.list[0] must be longer than or equal to 1 characters",
    )
    with pytest.raises(SchemaRejectedError, match="leads nowhere"):
        compile_answer_schema({"$ref": "#/definitions/missing"})


def test_rb3_refs_follow_json_pointer_escapes_and_array_indexes() -> None:
    """'~0' is '~', '%20' a space, a number an array index; a $ref may lead to a $ref."""
    schema = {
        "definitions": {
            "t~x": {"type": "string"},
            "s p": {"type": "integer"},
            "list": [{"type": "boolean"}],
        },
        "properties": {
            "tilde": {"$ref": "#/definitions/t~0x"},
            "space": {"$ref": "#/definitions/s%20p"},
            "index": {"$ref": "#/definitions/list/0"},
            "self": {"$ref": "#/properties/index"},
        },
    }
    validator = compile_answer_schema(schema)
    assert validator.check({"tilde": "x", "space": 1, "index": True, "self": True}).ok
    assert validator.check({"tilde": 1, "space": "x", "index": 1, "self": 1}).problems == (
        "data.tilde must be string",
        "data.space must be integer",
        "data.index must be boolean",
        "data.self must be boolean",
    )


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        (3, "the $ref at /properties/p is not a string"),
        (
            "other.json#",
            "the $ref 'other.json#' at /properties/p points outside the schema; only '#...' "
            "refs are followed and nothing is fetched",
        ),
        ("#p", "the $ref '#p' at /properties/p is not a JSON Pointer"),
        ("#/anyOf/1", "the $ref '#/anyOf/1' at /properties/p leads nowhere"),
        ("#/anyOf/first", "the $ref '#/anyOf/first' at /properties/p leads nowhere"),
        ("#/anyOf/0/type/x", "the $ref '#/anyOf/0/type/x' at /properties/p leads nowhere"),
        # fastjsonschema let every answer pass a $ref to an array or a string
        (
            "#/anyOf",
            "the $ref '#/anyOf' at /properties/p leads to [{'type': 'string'}], not a schema "
            "(an object or a boolean)",
        ),
        (
            "#/anyOf/0/type",
            "the $ref '#/anyOf/0/type' at /properties/p leads to 'string', not a schema "
            "(an object or a boolean)",
        ),
        (
            "#/a\tb",
            "the $ref '#/a\\tb' at /properties/p holds a tab or line break, which URI parsing "
            "drops; percent-encode it (%09, %0A, %0D)",
        ),
    ],
)
def test_rb3_a_ref_that_cannot_be_followed_is_refused_with_its_reason(
    ref: object, why: str
) -> None:
    assert reason({"anyOf": [{"type": "string"}], "properties": {"p": {"$ref": ref}}}) == why


def test_rb3_a_ref_to_a_boolean_schema_applies_it() -> None:
    schema = {"definitions": {"no": False}, "properties": {"p": {"$ref": "#/definitions/no"}}}
    validator = compile_answer_schema(schema)
    assert validator.check({}).ok and not validator.check({"p": 1}).ok


@pytest.mark.parametrize("scope", ["$id", "id"])
def test_rb3_a_ref_under_any_nested_id_is_refused(scope: str) -> None:
    """Two levels below the $id too, and beside it in the root's first subschema or an
    array's item; a non-string $id is no base URI and changes nothing."""
    inner = {"properties": {"b": {"properties": {"c": {"$ref": "#"}}}}}
    assert reason({"properties": {"a": {scope: "x", **inner}}}) == (
        "the $ref at /properties/a/properties/b/properties/c is inside a subschema with its "
        "own $id/id"
    )
    assert reason({"properties": {"a": {scope: 3, **inner}}}) is None
    for schema, where in (
        ({"not": {scope: "x", "$ref": "#"}}, "/not"),
        ({"allOf": [{scope: "x", "$ref": "#"}]}, "/allOf/0"),
    ):
        assert reason(schema) == f"the $ref at {where} is inside a subschema with its own $id/id"


@pytest.mark.parametrize("raw", ["\n", "\t", "\r"])
def test_rb3_a_ref_is_never_read_as_naming_another_subschema(raw: str) -> None:
    """URI parsing drops a raw tab or line break, so '#/$defs/a<LF>b' would check the
    answer against '#/$defs/ab'; it is refused, and its %-escaped form works."""
    defs = {f"a{raw}b": {"type": "string"}, "ab": {"type": "integer"}}
    with pytest.raises(SchemaRejectedError, match="percent-encode"):
        compile_answer_schema({"$defs": defs, "$ref": f"#/$defs/a{raw}b"})
    escaped = compile_answer_schema({"$defs": defs, "$ref": f"#/$defs/a%{ord(raw):02X}b"})
    assert escaped.check("x").ok and not escaped.check(1).ok


# --- 3. the answer is not modified -------------------------------------------------------------


def test_rb3_defaults_are_never_written_into_the_answer() -> None:
    schema = {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean", "default": True},
            "meta": {
                "type": "object",
                "default": {"x": 1},
                "properties": {"note": {"type": "string", "default": "n/a"}},
            },
            "items": {
                "type": "array",
                "items": [{"type": "string", "default": "first"}, {"default": 2}],
            },
        },
    }
    validator = compile_answer_schema(schema)
    answer: dict[str, Any] = {"meta": {}, "items": []}
    inner, items = answer["meta"], answer["items"]
    before = copy.deepcopy(answer)
    assert validator.check(answer).ok
    assert answer == before
    assert answer["meta"] is inner and inner == {}
    assert answer["items"] is items and items == []
    assert "approved" not in answer
    frozen = freeze({"meta": {}})
    assert validator.check(frozen).ok and frozen == {"meta": {}}
    # Not into the private copy either: a default filled in there would be checked by
    # the keywords after it, and an empty answer that maxProperties 0 allows refused.
    filled = {"allOf": [{"properties": {"a": {"default": 1}}}, {"maxProperties": 0}]}
    assert compile_answer_schema(filled).check({}).ok


def test_rb3_the_schema_is_not_modified() -> None:
    schema = {
        "$id": "https://example.com/s",
        "definitions": {"x": {"type": "string"}},
        "properties": {"a": {"$ref": "#/definitions/x"}},
    }
    before = copy.deepcopy(schema)
    compile_answer_schema(schema).check({"a": "b"})
    assert schema == before


# --- 4. bounded --------------------------------------------------------------------------------


def test_rb3_huge_schema_is_rejected_by_size() -> None:
    schema = {"enum": ["x" * 1000 for _ in range(300)]}
    with Stopwatch(), pytest.raises(SchemaRejectedError, match=r"characters|bytes"):
        compile_answer_schema(schema)
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="bytes"):
        compile_answer_schema({"enum": ["é" * 1000 for _ in range(150)]})


def test_rb3_schema_size_is_bounded_exactly() -> None:
    """max_bytes is the compact JSON size ('{"enum":["..."]}' is 13 bytes and the text):
    reached is fine, one over is refused; strings over it are refused while copying."""
    assert reason({"enum": ["x" * 27]}, max_bytes=40) is None
    assert reason({"enum": ["x" * 28]}, max_bytes=40) == "it is 41 bytes as JSON, over 40"
    assert reason({"enum": ["x" * 36]}, max_bytes=40) == "it is 49 bytes as JSON, over 40"
    assert reason({"enum": ["x" * 37]}, max_bytes=40) == "it holds over 40 characters (at /enum/0)"
    assert reason({"k" * 41: 1}, max_bytes=40) == "it holds over 40 characters (at /)"  # keys too


def test_rb3_schema_size_counts_utf8_bytes_not_escapes() -> None:
    """max_bytes is the UTF-8 size: 'é' is 2 bytes (not the 6 of '\\u00e9'), and a lone
    surrogate, which JSON text may carry, is 3 bytes, measured rather than a crash."""
    assert reason({"enum": ["é" * 13]}, max_bytes=40) is None  # 13 + 26 bytes
    assert reason({"enum": ["é" * 14]}, max_bytes=40) == "it is 41 bytes as JSON, over 40"
    assert reason({"enum": ["\ud800" * 9]}, max_bytes=40) is None  # 13 + 27 bytes
    assert reason({"enum": ["\ud800" * 10]}, max_bytes=40) == "it is 43 bytes as JSON, over 40"


def test_rb3_generated_checker_length_is_a_backstop_bounded_exactly() -> None:
    """A schema within max_expanded_values whose generated checker is still long (a long
    ``const`` is one value, repeated in the source) is refused before Python parses it:
    at most 64 characters of source per allowed value, that many included."""
    for length in range(5000, 5200):  # the source's length depends on fastjsonschema
        schema = {"const": "x" * length}
        over = reason(schema, max_expanded_values=1)
        assert over is not None
        estimate = int(over.split("about ")[1].split(" ")[0])
        refused = reason(schema, max_expanded_values=estimate)
        assert refused is not None and refused.startswith("its generated checker is ")
        chars = int(refused.split()[4])
        assert refused == (
            f"its generated checker is {chars} characters, over {64 * estimate} (64 per value "
            f"of max_expanded_values={estimate}; long constants or patterns make a long checker)"
        )
        assert chars > 64 * estimate
        if chars % 64 == 0:
            break
    else:
        pytest.fail("no const length gives a checker of a multiple of 64 characters")
    assert reason(schema, max_expanded_values=chars // 64) is None
    below = chars // 64 - 1
    assert reason(schema, max_expanded_values=below) == (
        f"its generated checker is {chars} characters, over {64 * below} (64 per value "
        f"of max_expanded_values={below}; long constants or patterns make a long checker)"
    )


def test_rb3_schema_node_count_is_bounded_exactly() -> None:
    """max_nodes counts every JSON value, containers included, and names where it ran out."""
    assert reason({"enum": list(range(8))}, max_nodes=10) is None  # 1 + 1 + 8
    assert reason({"enum": list(range(9))}, max_nodes=10) == "it has more than 10 values (at /enum)"
    assert reason({"a": 1, "b": [1, 2, 3]}, max_nodes=6) is None
    assert reason({"a": 1, "b": [1, 2, 3]}, max_nodes=5) == "it has more than 5 values (at /a)"


def test_rb3_schema_and_answer_depth_are_bounded_exactly() -> None:
    """max_depth levels of containers are fine; one more is refused, or a problem."""
    assert reason({"not": {"not": {}}}, max_depth=3) is None
    assert reason({"not": {"not": {"not": {}}}}, max_depth=3) == (
        "it is nested deeper than 3 levels (at /not/not/not)"
    )
    validator = compile_answer_schema({}, limits=SchemaLimits(max_depth=3))
    assert validator.check([[[1]]]).ok
    assert validator.check([[[[]]]]).problems == (
        "the answer is nested deeper than 3 levels (at /0/0/0)",
    )


def test_rb3_numbers_over_1024_bits_and_non_finite_floats_are_not_json() -> None:
    """A 1024-bit integer is checked; a wider one (either sign) or inf is a problem."""
    validator = compile_answer_schema({"type": "integer"})
    assert validator.check(2**1024 - 1).ok
    too_large = ("the answer holds a number too large (at /)",)
    assert validator.check(2**1024).problems == too_large
    assert validator.check(-(2**1024)).problems == too_large
    assert validator.check(float("-inf")).problems == (
        "the answer holds -inf, which is not JSON (at /)",
    )
    assert reason({"const": 2**1024 - 1}) is None
    assert reason({"const": 2**1024}) == "it holds a number too large (at /const)"


def test_rb3_problem_places_escape_slash_and_tilde() -> None:
    """JSON Pointer escaping (RFC 6901): '~' is '~0' and '/' is '~1' in the named place."""
    validator = compile_answer_schema({"type": "object"})
    assert validator.check({"a/b~c": [{1}]}).problems == ("the answer holds a set (at /a~1b~0c/0)",)


def test_rb3_many_nodes_are_rejected() -> None:
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="more than 10000 values"):
        compile_answer_schema({"enum": list(range(20_000))})


@pytest.mark.parametrize("frozen", [False, True])
def test_rb3_deep_schema_is_rejected_without_recursion(frozen: bool) -> None:
    def wrap(inner: Any) -> Any:
        return FrozenDict({"not": inner}) if frozen else {"not": inner}

    schema = nested(10_000, wrap, {"type": "string"})
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="deeper than 32"):
        compile_answer_schema(schema)


@pytest.mark.parametrize("keyword", ["items", "not", "contains", "additionalProperties"])
def test_rb3_schemas_too_nested_for_python_are_rejected(keyword: str) -> None:
    # within max_depth, but CPython allows only 20 nested blocks in one function
    schema = nested(31, lambda inner: {keyword: inner}, {"type": "string"})
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="Python cannot"):
        compile_answer_schema(schema)


def test_rb3_cyclic_schema_is_rejected() -> None:
    schema: dict[str, Any] = {"type": "object"}
    schema["properties"] = {"self": schema}
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="deeper"):
        compile_answer_schema(schema)


@pytest.mark.parametrize(
    "pattern",
    [
        "^(a+)+$",
        "(a|aa)+$",
        "(.*a){20}",
        "^(a|a?)+$",
        "(x+x+)+y",
        "^(([a-z])+.)+[A-Z]([a-z])+$",
        "(\\w+\\s?)+$",
        "(a)\\1",
        "(?P<x>a)(?P=x)",
        "(a)?(?(1)b|c)",
        "(?=(a+)+b)",
        "\\d+\\d+\\d+x",
        "^.*a.*a.*b$",
        "a{0,5000}",
        "(a?){25}a{25}",
        "a?" * 30 + "a" * 30,
        "(" * 40 + "a" + ")" * 40,
        "[",
        "x" * 1001,
    ],
)
def test_rb3_catastrophic_regexes_are_rejected(pattern: str) -> None:
    for schema in (
        {"type": "string", "pattern": pattern},
        {"type": "object", "patternProperties": {pattern: {}}},
        {"definitions": {"unused": {"pattern": pattern}}},
    ):
        with Stopwatch(), pytest.raises(SchemaRejectedError, match="pattern"):
            compile_answer_schema(schema)


@pytest.mark.parametrize(
    "pattern",
    [
        "^[0-9]{5}$",
        "^[A-Z]{2}\\d{4}$",
        "^(\\d{1,3}\\.){3}\\d{1,3}$",
        "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$",
        "^(?=.*[A-Z])(?=.*\\d).{8,}$",
        "\\S",
        "\\S+$",
        "^[a-z0-9]+(?:-[a-z0-9]+)*$",
        "^\\+?\\d{1,3}[- ]?\\d{3}[- ]?\\d{4}$",
        "^(yes|no)$",
        "^\\d+(\\.\\d{1,2})?$",
        "(?i)^approve$",
    ],
)
def test_rb3_ordinary_regexes_are_accepted_and_fast_on_hostile_input(pattern: str) -> None:
    validator = compile_answer_schema({"type": "array", "items": {"pattern": pattern}})
    hostile = [
        "a" * 1000,
        "1" * 999 + "!",
        "a@" + "a." * 499,
        "a-" * 500,
        "Aa " * 333,
        "\n" * 1000,
    ]
    with Stopwatch():
        validator.check(hostile)


def test_rb3_strings_too_long_for_a_pattern_are_a_problem_not_a_hang() -> None:
    validator = compile_answer_schema(
        {
            "type": "object",
            "properties": {"code": {"pattern": "\\S+$"}},
            "patternProperties": {"^x": {}},
        }
    )
    assert validator.check({"code": "a" * 1000}).ok
    with Stopwatch():
        result = validator.check({"code": "a" * 100_000})
    assert not result.ok and "too long to check against the pattern" in result.problems[0]
    with Stopwatch():
        result = validator.check({"x" * 5000: 1})
    assert not result.ok and "5000 characters" in result.problems[0]


@pytest.mark.parametrize(
    ("fmt", "hostile"),
    [
        ("email", "a@" + "a." * 50_000 + "@"),
        ("idn-email", "a@" + "a." * 50_000 + "@"),
        ("hostname", "a." * 50_000),
        ("idn-hostname", "ü." * 50_000),
        ("date-time", "1" * 100_000),
        ("uri", "a:" + "b" * 100_000 + " "),
        ("uri-reference", "f" * 100_000 + "\\"),
        ("ipv6", "ffff:" * 20_000),
        ("json-pointer", "/a" * 50_000 + "~"),
        ("uri-template", "{" * 100_000),
        ("regex", "(" * 50_000),
        ("regex", "(a+)+" * 1000),
    ],
)
def test_rb3_format_checks_are_bounded_on_long_adversarial_strings(fmt: str, hostile: str) -> None:
    validator = compile_answer_schema({"type": "string", "format": fmt})
    with Stopwatch():
        result = validator.check(hostile)
    assert result == AnswerCheck(ok=False, problems=(f"data must be {fmt}",))


def test_rb3_formats_still_work() -> None:
    cases = {
        "email": ("ann@example.com", "ann"),
        "hostname": ("example.com", "-bad-"),
        "date-time": ("2024-02-29T12:00:00Z", "2023-02-29T12:00:00Z"),
        "ipv4": ("10.0.0.1", "10.0.0.256"),
        "uri": ("https://example.com/x", "no scheme"),
        "regex": ("^a+$", "(unclosed"),
    }
    for fmt, (good, bad) in cases.items():
        validator = compile_answer_schema({"format": fmt})
        assert validator.check(good).ok, fmt
        assert not validator.check(bad).ok, fmt
    draft4 = compile_answer_schema(
        {"$schema": "http://json-schema.org/draft-04/schema#", "format": "date"}
    )
    assert draft4.check("not a date").ok  # draft-04 has no 'date' format


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("bücher.example", True),  # what the format is for: non-ASCII labels
        ("xn--bcher-kva.example", True),  # the same name in its ASCII (IDNA) form
        ("MÜNCHEN.de", True),
        ("例え.テスト", True),
        ("例え。テスト", True),  # an ideographic full stop separates labels too
        ("www.example.co.uk", True),  # any number of labels
        ("localhost", True),
        ("a..example", False),  # an empty label
        ("-bücher.example", False),  # a label starting or ending with a hyphen
        ("bücher-.example", False),
        ("bücher_x.example", False),
        ("bücher.example.", False),  # as `hostname`: no trailing dot
        ("ü" * 60 + ".de", False),  # a label over 63 characters once in ASCII form
        ("a" * 250 + ".de", False),  # over 253 characters
    ],
)
def test_rb3_idn_hostname_takes_international_names_of_any_length(name: str, ok: bool) -> None:
    """R-B3: a form asking for an `idn-hostname` accepts the names users type, which
    fastjsonschema's own regex refused (ASCII only, two or three labels)."""
    validator = compile_answer_schema({"type": "string", "format": "idn-hostname"})
    expected = AnswerCheck(ok=ok, problems=() if ok else ("data must be idn-hostname",))
    assert validator.check(name) == expected


LONGEST_VALID = {  # a valid value of each length, for formats with an open-ended regex
    "date-time": lambda n: "2024-02-29T12:00:00." + "1" * (n - 21) + "Z",
    "duration": lambda n: "P" + "1" * (n - 2) + "D",
    "email": lambda n: "a" * (n - 6) + "@b.com",
    "idn-email": lambda n: "a" * (n - 6) + "@b.com",
    "hostname": lambda n: ".".join(["a" * 63] * 3) + "." + "a" * (n - 192),
    "idn-hostname": lambda n: ".".join(["a" * 63] * 3) + "." + "a" * (n - 192),
    "uri": lambda n: "https://e.com/" + "a" * (n - 14),
    "iri": lambda n: "https://e.com/" + "a" * (n - 14),
}


@pytest.mark.parametrize(
    ("fmt", "longest"),
    [
        ("date-time", 64),
        ("duration", 64),
        ("email", 320),
        ("idn-email", 320),
        ("hostname", 253),
        ("idn-hostname", 253),
        ("uri", 4096),  # max_format_length
        ("iri", 4096),
    ],
)
def test_rb3_format_length_bounds_are_exact(fmt: str, longest: int) -> None:
    """A value the format's regex accepts is accepted up to the format's bound (an RFC's,
    else max_format_length) and fails the format one character over it."""
    validator = compile_answer_schema({"format": fmt})
    value = LONGEST_VALID[fmt]
    assert len(value(longest)) == longest
    assert validator.check(value(longest)).ok
    assert validator.check(value(longest + 1)).problems == (f"data must be {fmt}",)


@pytest.mark.parametrize(
    ("fmt", "longest_value"),
    [
        ("date", "2024-02-29"),
        ("time", "23:59:60.123456+23:59"),
        ("ipv4", "255.255.255.255"),
        ("ipv6", "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"),
        ("uuid", "12345678-1234-1234-1234-123456789abc"),
    ],
)
def test_rb3_formats_with_a_fixed_shape_accept_their_longest_values(
    fmt: str, longest_value: str
) -> None:
    """The length bound of a format never refuses a value the format allows."""
    assert compile_answer_schema({"format": fmt}).check(longest_value).ok


def test_rb3_max_format_length_bounds_open_ended_formats() -> None:
    """max_format_length is the bound for formats without an RFC one; an RFC bound stays."""
    limits = SchemaLimits(max_format_length=20)
    uri = compile_answer_schema({"format": "uri"}, limits=limits)
    assert uri.check("https://e.com/aaaaaa").ok  # 20
    assert uri.check("https://e.com/aaaaaaa").problems == ("data must be uri",)
    email = compile_answer_schema({"format": "email"}, limits=limits)
    assert email.check("a" * 30 + "@example.com").ok


def test_rb3_idn_hostnames_are_bounded_in_their_ascii_form() -> None:
    """An internationalised name is checked as its IDNA form: that form's 253 characters
    bound it, and no label, split at any IDNA dot, may start or end with a hyphen."""
    validator = compile_answer_schema({"format": "idn-hostname"})
    assert validator.check("bücher.example").ok
    assert validator.check("bücher。example").ok  # U+3002 is a dot to IDNA
    assert not validator.check("bücher." * 35 + "de").ok  # 247 characters, 492 in ASCII
    for bad in ("-bücher.example", "bücher-.example", "a。-bücher", "a．bücher-"):
        assert validator.check(bad).problems == ("data must be idn-hostname",), bad
    draft4 = compile_answer_schema({"$schema": DRAFT_04, "format": "idn-hostname"})
    assert draft4.check("-bücher.example").ok  # draft-04 has no idn-hostname format


def test_rb3_regex_format_answers_are_bounded_and_never_crash() -> None:
    """format: regex takes up to max_pattern_length characters; a regex Python refuses to
    parse (too large a count, too deep) is simply not a regex."""
    limits = SchemaLimits(max_pattern_length=10_000)
    validator = compile_answer_schema({"format": "regex"}, limits=limits)
    assert validator.check("a" * 10_000).ok
    for bad in ("a" * 10_001, "a{4294967296}", "(" * 5000 + ")" * 5000, "\\"):
        assert validator.check(bad).problems == ("data must be regex",), bad[:20]


@pytest.mark.parametrize(
    ("schema", "estimate"),
    [
        # Per object: checks * (values under it + its $refs' targets + 24 + path) plus
        # (keys + 1) * (6 + path); path grows 1 per level (+1 per 16 key characters). An
        # object holds 1 + 1 per key (+1 per 64 key characters) + its scalars (+1 per 64
        # characters). Each distinct $ref adds its target's part again.
        ({}, 6),
        ({"type": "string"}, 39),  # 1 * (3 + 24) + 2 * 6
        ({"type": "string", "minLength": 1}, 76),  # 2 * (5 + 24) + 3 * 6
        ({"multipleOf": 2}, 66),  # multipleOf is two checks
        ({"$schema": DRAFT_07, "contentEncoding": "base64"}, 76),  # so is contentEncoding
        ({"$schema": DRAFT_07, "contentMediaType": "application/json"}, 76),  # and this one
        ({"const": "x" * 128}, 41),  # 128 characters weigh 1 + 2
        ({"dependencies": {"a": ["b", "c"]}}, 143),  # one check per dependency name too
        ({"properties": {"a": {"type": "string"}}}, 71),  # 12 + 14 + (29 + 16)
        ({"properties": {"k" * 32: {"type": "string"}}}, 77),  # a 32-character key: path + 2
        ({"allOf": [{"type": "string"}]}, 71),  # 12 + 2 * 7 for the list + (29 + 16)
        ({"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s"}, 122),
        (  # the $ref's target is repeated in the checks of the object holding it
            {
                "type": "array",
                "items": {"$ref": "#/definitions/s"},
                "definitions": {"s": {"type": "string"}},
            },
            222,
        ),
        (  # two levels down: the target counts in the root's check too (42 + 24 for the
            # root, 14 + 16 for properties and the $ref, 14 + 45 + 45 for definitions, s
            # and its function)
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/s"}},
                "definitions": {"s": {"type": "string"}},
            },
            200,
        ),
        (  # a $ref into an array: as above, less 1 for the list's key (in 2 checks)
            {"type": "array", "items": {"$ref": "#/allOf/0"}, "allOf": [{"type": "string"}]},
            220,
        ),
        # a boolean target (a schema since draft-06) counts 1
        ({"type": "array", "items": {"$ref": "#/const"}, "const": True}, 141),
        (  # two $refs with one spelling: one function
            {
                "properties": {"a": {"$ref": "#/definitions/s"}, "b": {"$ref": "#/definitions/s"}},
                "definitions": {"s": {"type": "string"}},
            },
            175,
        ),
    ],
)
def test_rb3_generated_code_size_estimate_is_exact_for_small_schemas(
    schema: dict[str, Any], estimate: int
) -> None:
    """The estimate of the generated checker's size, worked out by hand, is the line
    between compiled and refused: the estimate itself is allowed, one less is not."""
    allowed = reason(schema, max_expanded_values=estimate)
    assert allowed is None or allowed.startswith("fastjsonschema cannot compile it")
    assert reason(schema, max_expanded_values=estimate - 1) == (
        f"its generated checker would hold about {estimate} values, over "
        f"max_expanded_values={estimate - 1} (many or large $ref targets, or deep nesting)"
    )


def test_rb3_ref_amplification_is_rejected_before_generating() -> None:
    # 9 KiB of {"$ref": "#"}: fastjsonschema would emit ~7 MB of source, ~20 s to parse
    schema = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(400)}}
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="max_expanded_values"):
        compile_answer_schema(schema)
    # one big definition under many spellings ('%62ig' is 'big'): a function per spelling
    big = {"type": "object", "properties": {f"q{i}": {"type": "string"} for i in range(100)}}
    spellings = [
        "#/definitions/"
        + "".join(f"%{ord(c):02x}" if (i >> j) & 1 else c for j, c in enumerate("big"))
        for i in range(8)
    ]
    schema = {
        "definitions": {"big": big},
        "properties": {f"p{i}": {"$ref": spellings[i % 8]} for i in range(2000)},
    }
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="max_expanded_values"):
        compile_answer_schema(schema)
    deep_wide: dict[str, Any] = {"type": "object", "properties": {}}
    level = deep_wide
    for i in range(14):
        child: dict[str, Any] = {"type": "object", "required": ["a"], "properties": {}}
        level["properties"]["k" * 900 + str(i)] = child
        level = child
    level["properties"] = {f"leaf{i}": {"minLength": 1} for i in range(400)}
    with Stopwatch(), pytest.raises(SchemaRejectedError, match="max_expanded_values"):
        compile_answer_schema(deep_wide)


def test_rb3_ref_fan_out_is_stopped_by_the_work_budget() -> None:
    # each level applies the next twice to the same value: 2**30 calls without a bound
    definitions = {
        f"d{i}": {
            "allOf": [{"$ref": f"#/definitions/d{i + 1}"}, {"$ref": f"#/definitions/d{i + 1}"}]
        }
        for i in range(30)
    }
    definitions["d30"] = {"type": "string"}
    validator = compile_answer_schema({"definitions": definitions, "$ref": "#/definitions/d0"})
    with Stopwatch():
        result = validator.check("x")
    assert not result.ok and "max_check_work" in result.problems[0]
    # and across levels of the answer: properties and patternProperties both recurse
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#"}},
        "patternProperties": {"^a$": {"$ref": "#"}},
    }
    answer = nested(30, lambda inner: {"a": inner}, {})
    with Stopwatch():
        result = compile_answer_schema(schema).check(answer)
    assert not result.ok and "max_check_work" in result.problems[0]


def budget_needed(schema: dict[str, Any], answer: object) -> int:
    """The smallest max_check_work under which checking ``answer`` is not stopped."""
    low, high = 1, 1 << 20
    while low < high:
        mid = (low + high) // 2
        limits = SchemaLimits(max_check_work=mid)
        problems = compile_answer_schema(schema, limits=limits).check(answer).problems
        if any("max_check_work" in problem for problem in problems):
            low = mid + 1
        else:
            high = mid
    return low


ONE_REF = {"definitions": {"a": {"type": "array"}}, "$ref": "#/definitions/a"}


def test_rb3_work_budget_is_statements_times_answer_values() -> None:
    """A call into a $ref'd subschema costs its function's statements plus one, times the
    values under the data it is given (a string weighs 1 + 1 per 64 characters, a key the
    same); the budget is spent exactly, and a second call costs as much again."""
    source = schema_code.generate(ONE_REF, {})
    function = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "validate___definitions_a"
    )
    statements = sum(isinstance(node, ast.stmt) for node in ast.walk(function)) - 1  # not def
    one = statements + 1
    assert budget_needed(ONE_REF, []) == one
    assert budget_needed(ONE_REF, "x") == one  # a scalar weighs 1
    assert budget_needed(ONE_REF, [1, 2, 3]) == 4 * one
    assert budget_needed(ONE_REF, ["x" * 191]) == 4 * one  # 1 + (1 + 2)
    assert budget_needed(ONE_REF, ["x" * 192]) == 5 * one  # 1 + (1 + 3)
    assert budget_needed(ONE_REF, {"k": 1}) == 3 * one
    assert budget_needed(ONE_REF, {"k" * 64: 1}) == 4 * one
    assert budget_needed(ONE_REF, [[1, 2], [3]]) == 6 * one  # nested lists: 1 + 3 + 2
    twice = {
        "definitions": {"a": {"type": "array"}},
        "allOf": [{"$ref": "#/definitions/a"}, {"$ref": "#/definitions/a"}],
    }
    assert budget_needed(twice, [1, 2, 3]) == 8 * one
    limits = SchemaLimits(max_check_work=one - 1)
    assert compile_answer_schema(ONE_REF, limits=limits).check([]).problems == (
        "the schema's $refs apply to this answer too many times to check it (over max_check_work)",
    )


def test_rb3_ref_cycles_that_consume_nothing_are_a_problem_not_a_crash() -> None:
    schema = {
        "definitions": {
            "a": {"$ref": "#/definitions/b"},
            "b": {"allOf": [{"$ref": "#/definitions/a"}]},
        },
        "$ref": "#/definitions/a",
    }
    validator = compile_answer_schema(schema)
    with Stopwatch():
        result = validator.check({"x": 1})
    assert not result.ok


# --- 5. recursive schemas and deep answers -----------------------------------------------------

TREE = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["label"],
}


def test_rb3_recursive_schema_with_a_deep_answer_is_a_problem_not_a_crash() -> None:
    validator = compile_answer_schema(TREE)
    deep = nested(10_000, lambda inner: {"label": "n", "children": [inner]}, {"label": "leaf"})
    with Stopwatch():
        result = validator.check(deep)
    assert not result.ok
    assert "nested deeper than 32 levels" in result.problems[0]
    frozen_deep = nested(
        10_000,
        lambda inner: FrozenDict({"label": "n", "children": (inner,)}),
        FrozenDict({"label": "x"}),
    )
    assert "deeper" in validator.check(frozen_deep).problems[0]


def test_rb3_recursive_schema_checks_answers_within_the_depth_bound() -> None:
    validator = compile_answer_schema(TREE)
    ok = nested(
        15, lambda inner: {"label": "n", "children": [inner, {"label": "y"}]}, {"label": "x"}
    )
    assert validator.check(ok).ok
    bad = nested(15, lambda inner: {"label": "n", "children": [inner]}, {"label": 3})
    problems = validator.check(bad).problems
    assert problems and problems[0].endswith("label must be string")
    assert problems[0].startswith("data.children[0].children[0]")


# --- never raises for a bad answer -------------------------------------------------------------


def test_rb3_bad_answers_are_problems_never_exceptions() -> None:
    validator = compile_answer_schema(
        {"type": "object", "properties": {"n": {"multipleOf": 0.5}, "t": {"format": "email"}}}
    )
    for answer in (
        {"n": float("nan")},
        {"n": 10**400},
        {"n": {1, 2}},
        {1: "non-string key"},
        b"bytes",
        object(),
        {"n": 2**1024 - 1},  # too big for a float: the generated code's division raises
    ):
        result = validator.check(answer)
        assert isinstance(result, AnswerCheck)
        assert not result.ok and result.problems, answer


def test_rb3_a_bad_answer_is_named_at_its_place_with_its_type() -> None:
    """The problem names the place in the answer as a JSON Pointer: the root is '/'."""
    validator = compile_answer_schema({"type": "object"})
    assert validator.check(object()).problems == ("the answer holds an object (at /)",)
    assert validator.check(float("nan")).problems == (
        "the answer holds nan, which is not JSON (at /)",
    )
    assert validator.check({1: 2}).problems == ("the answer has a non-string key (at /)",)
    assert validator.check({"a": [1, {2}]}).problems == ("the answer holds a set (at /a/1)",)
    with pytest.raises(SchemaRejectedError, match=r"non-string key \(at /\)"):
        compile_answer_schema({1: "x"})  # type: ignore[dict-item]


# -- refusal reasons read whole -------------------------------------------------------------


def reason_for(schema: Any, limits: SchemaLimits | None = None) -> str:
    with pytest.raises(SchemaRejectedError) as caught:
        compile_answer_schema(schema, limits=limits or SchemaLimits())
    return caught.value.reason


@pytest.mark.parametrize(
    ("schema", "limits", "reason"),
    [
        ([1], None, "it is a list, not a JSON object"),
        (
            {"a": [[[[1]]]]},
            SchemaLimits(max_depth=3),
            "it is nested deeper than 3 levels (at /a/0/0)",
        ),
        (
            {"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}},
            None,
            "it has type beside a $ref (at /), which the checker would not apply (draft-07 "
            "rules); put both in an allOf",
        ),
        (
            {"$ref": "#/properties/a/type/str", "properties": {"a": {"type": "string"}}},
            None,
            "the $ref '#/properties/a/type/str' at / leads nowhere",  # not into the string
        ),
        (
            {"patternProperties": {"(a+)+": {}}},
            None,
            "the patternProperties key at / ('(a+)+') nests a variable quantifier or ambiguous "
            "alternation in a quantifier",
        ),
        (
            {"properties": {"zip": {"pattern": "^(\\d+)+$"}}},
            None,  # quoted as written: not the \Z form fastjsonschema compiles
            "the pattern at /properties/zip ('^(\\\\d+)+$') nests a variable quantifier or "
            "ambiguous alternation in a quantifier",
        ),
    ],
)
def test_rb3_a_rejection_reason_reads_whole(
    schema: Any, limits: SchemaLimits | None, reason: str
) -> None:
    """R-B3: ``reason`` is what an application logs for the agent's authors, so it is
    read whole: what is wrong and where, and nothing before or after it (a ``$ref`` that
    walks into a string is refused, not a crash)."""
    assert reason_for(schema, limits) == reason


def test_rb3_an_answer_that_cannot_be_copied_is_a_problem_saying_where() -> None:
    """R-B3: an answer too deep to check, or with a key that is not text, is one problem
    naming the place, never an exception."""
    validator = compile_answer_schema({}, limits=SchemaLimits(max_depth=3))
    assert validator.check([[[[[1]]]]]).problems == (
        "the answer is nested deeper than 3 levels (at /0/0/0)",
    )
    assert validator.check({1: 2}).problems == ("the answer has a non-string key (at /)",)
