"""Vetting a copied ``responseSchema`` before fastjsonschema sees it, for ``answers``.

Finds the draft to apply, refuses what fastjsonschema would fetch, choke on or
run slowly (remote or misplaced ``$ref``s, unboundable regexes, overlong keys),
and estimates the size of the code fastjsonschema would generate, so that a
hostile schema is refused before it costs anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final
from urllib.parse import unquote

from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft06 import CodeGeneratorDraft06
from fastjsonschema.draft07 import CodeGeneratorDraft07
from fastjsonschema.draft2019 import CodeGeneratorDraft2019

from .errors import quote
from .regex_bounds import vet_regex
from .schema_json import Tree
from .schema_limits import SchemaLimits, SchemaRejectedError

__all__ = [
    "SOURCE_CHARS_PER_VALUE",
    "draft_of",
    "expanded_values",
    "vet_keywords",
    "vet_numbers",
    "vet_schema",
    "words",
]


# --- vetting the schema ------------------------------------------------------------------------

_DRAFTS: Final[Mapping[str, type[CodeGeneratorDraft04]]] = {
    "draft-04": CodeGeneratorDraft04,
    "draft-06": CodeGeneratorDraft06,
    "draft-07": CodeGeneratorDraft07,
    "draft/2019-09": CodeGeneratorDraft2019,
}
_DRAFT_URI: Final = re.compile(r"https?://json-schema\.org/(draft-0[467]|draft/2019-09)/schema#?")
_DOLLAR: Final = re.compile(r"(?<!\\)\$")  # fastjsonschema turns these into \Z in 'pattern'
_ABSENT: Final = object()


def draft_of(root: dict[str, Any]) -> tuple[str, type[CodeGeneratorDraft04]]:
    """The draft fastjsonschema will apply; an unknown ``$schema`` is refused, not guessed."""
    uri = root.get("$schema", _ABSENT)
    if uri is _ABSENT:
        return "draft/2019-09", CodeGeneratorDraft2019
    match = _DRAFT_URI.fullmatch(uri) if isinstance(uri, str) else None
    if match is None:
        raise SchemaRejectedError(
            f"its $schema {uri!r} is not draft-04, -06, -07 or 2019-09 (omit $schema for 2019-09)"
        )
    return match[1], _DRAFTS[match[1]]


def vet_schema(tree: Tree, limits: SchemaLimits) -> dict[str, int]:
    """Refuse what fastjsonschema would fetch, choke on or run slowly.

    Looks at every object, not only schema positions (a ``$ref`` can point
    anywhere), so a few odd but harmless schemas are refused too. Returns each
    distinct ``$ref`` with the index of its target object (-1 for a boolean schema).
    """
    refs: dict[str, int] = {}
    index_of = {id(obj): i for i, obj in enumerate(tree.objs)}
    longest = limits.max_pattern_input_length
    for i, obj in enumerate(tree.objs):
        if not isinstance(obj, dict):
            continue
        where = tree.pointer(i) or "/"
        for key in obj:
            if len(key) > longest:
                raise SchemaRejectedError(f"a key at {where} is over {longest} characters")
        ref = obj.get("$ref", _ABSENT)
        if ref is not _ABSENT:
            j = i  # an $id would make fastjsonschema resolve the $ref against another base
            while j > 0:
                scope = tree.objs[j]
                if isinstance(scope, dict) and isinstance(scope.get("$id", scope.get("id")), str):
                    raise SchemaRejectedError(
                        f"the $ref at {where} is inside a subschema with its own $id/id"
                    )
                j = tree.parents[j]
            target = _resolve_ref(tree.root, ref, where)
            if not isinstance(target, dict | bool):  # fastjsonschema lets all pass, or fails
                raise SchemaRejectedError(
                    f"the $ref {ref!r} at {where} leads to {quote(target)}, not a schema "
                    "(an object or a boolean)"
                )
            refs[ref] = index_of.get(id(target), -1)
        pattern = obj.get("pattern")
        if isinstance(pattern, str):
            vet_regex(pattern, f"the pattern at {where}", limits)
            vet_regex(_DOLLAR.sub(r"\\Z", pattern), f"the pattern at {where}", limits)
        names = obj.get("patternProperties")
        if isinstance(names, dict):
            for pattern in names:
                vet_regex(pattern, f"the patternProperties key at {where}", limits)
        required = obj.get("required")
        if isinstance(required, list):
            for name in required:
                if not isinstance(name, str):
                    raise SchemaRejectedError(
                        f"'required' at {where} holds {quote(name)}, not a property name"
                    )
                if len(name) > longest:  # said as for a key: the name itself may be huge
                    raise SchemaRejectedError(
                        f"a 'required' name at {where} is over {longest} characters"
                    )
        step = obj.get("multipleOf")
        if isinstance(step, int | float) and not isinstance(step, bool) and step <= 0:
            raise SchemaRejectedError(f"multipleOf at {where} is {step}, not positive")
        if "prefixItems" in obj and "items" in obj:
            raise SchemaRejectedError(
                f"the object at {where} uses draft 2020-12 prefixItems with items, which "
                "fastjsonschema would read with older rules"
            )
    return refs


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Where fastjsonschema reads subschemas: one, a list of them, or a map of names to them.
_ONE_SCHEMA: Final = words(
    "additionalItems additionalProperties contains else if items not propertyNames then"
)
_SCHEMA_LIST: Final = words("allOf anyOf items oneOf")
_SCHEMA_MAP: Final = words("$defs definitions dependencies patternProperties properties")
# fastjsonschema reads a bool here as 0 or 1 (multipleOf false divides by zero when checking).
_NUMBERS: Final = words(
    "maxItems maxLength maxProperties maximum minItems minLength minProperties minimum "
    "multipleOf exclusiveMaximum exclusiveMinimum"
)


def _schema_objects(tree: Tree, refs: Mapping[str, int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each object in a schema position (the root, subschemas, ``$ref`` targets), once,
    with its index: not the values a keyword holds, so a property named ``minimum`` is
    not taken for the keyword."""
    index_of = {id(obj): i for i, obj in enumerate(tree.objs)}
    todo = [i for i in reversed(list(refs.values())) if i >= 0]  # a stack: $ref targets last,
    todo.append(0)  # after the whole walk from the root
    seen: set[int] = set()
    while todo:
        i = todo.pop()
        obj = tree.objs[i]
        if i in seen:  # a $ref target also reached as a subschema
            continue
        seen.add(i)
        yield i, obj
        # Keys in the schema's own order, not a set's: a set of strings iterates in an
        # order that changes between processes, and so would the problem reported first.
        children: list[object] = []
        for key, value in obj.items():
            if key in _ONE_SCHEMA:
                children.append(value)
            if key in _SCHEMA_LIST and isinstance(value, list):
                children += value
            if key in _SCHEMA_MAP and isinstance(value, dict):
                children += value.values()
        todo += (index_of[id(c)] for c in reversed(children) if isinstance(c, dict))


def vet_numbers(tree: Tree, refs: Mapping[str, int], draft: str) -> None:
    """Refuse a boolean where a schema takes a number."""
    for i, obj in _schema_objects(tree, refs):
        for key in obj:  # in the schema's order, so the first problem is named
            if key not in _NUMBERS or type(obj[key]) is not bool:
                continue
            exclusive = key.startswith("exclusive")  # draft-04's are booleans
            if exclusive and draft == "draft-04":
                continue
            where, value = tree.pointer(i) or "/", json.dumps(obj[key])
            if exclusive:
                raise SchemaRejectedError(
                    f"{key} at {where} is {value}, draft-04's form; {draft} takes the "
                    "bound itself, a number (or give $schema draft-04)"
                )
            raise SchemaRejectedError(f"{key} at {where} is {value}, not a number")


# fastjsonschema reads draft 2019-09 with draft-07's keywords: these 2019-09 assertions
# would be skipped, and a wrong answer pass as right.
_SKIPPED_2019: Final = words(
    "dependentRequired dependentSchemas unevaluatedProperties unevaluatedItems "
    "minContains maxContains $recursiveRef"
)
# Keywords draft-07 checks; next to a $ref, fastjsonschema skips them (draft-07 does),
# where 2019-09 applies them.
_CHECKED_07: Final = words(
    "type enum const allOf anyOf oneOf not if then else minLength maxLength pattern "
    "format minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minItems "
    "maxItems uniqueItems items additionalItems contains minProperties maxProperties "
    "required dependencies propertyNames properties patternProperties "
    "additionalProperties"
)
# Annotations only in 2019-09 (section 8), which fastjsonschema checks as draft-07 may.
_ANNOTATIONS_2019: Final = ("contentEncoding", "contentMediaType")


def vet_keywords(tree: Tree, refs: Mapping[str, int], draft: str) -> None:
    """For draft 2019-09 (a schema without ``$schema``): refuse the assertions the checker
    would skip, rather than call an answer right that the schema refuses, and drop the
    two keywords 2019-09 makes annotations (they would refuse right answers)."""
    if draft != "draft/2019-09":
        return
    for i, obj in _schema_objects(tree, refs):
        where = tree.pointer(i) or "/"
        skipped = sorted(_SKIPPED_2019.intersection(obj))
        if skipped:
            raise SchemaRejectedError(
                f"it uses {skipped[0]} (at {where}), a draft 2019-09 keyword the checker "
                "does not apply"
            )
        beside = sorted(_CHECKED_07.intersection(obj)) if "$ref" in obj else ()
        if beside:
            raise SchemaRejectedError(
                f"it has {beside[0]} beside a $ref (at {where}), which the checker would "
                "not apply (draft-07 rules); put both in an allOf"
            )
        for key in _ANNOTATIONS_2019:
            obj.pop(key, None)


def _resolve_ref(root: dict[str, Any], ref: object, where: str) -> object:
    """The target of a local ``$ref``, found the way fastjsonschema finds it."""
    if not isinstance(ref, str):
        raise SchemaRejectedError(f"the $ref at {where} is not a string")
    if not ref.startswith("#"):
        raise SchemaRejectedError(
            f"the $ref {ref!r} at {where} points outside the schema; only '#...' refs are "
            "followed and nothing is fetched"
        )
    if any(ch in ref for ch in "\t\n\r"):  # urlsplit drops them: '#/a<LF>b' means '#/ab'
        raise SchemaRejectedError(
            f"the $ref {ref!r} at {where} holds a tab or line break, which URI parsing "
            "drops; percent-encode it (%09, %0A, %0D)"
        )
    fragment = ref[1:].lstrip("/")
    if ref[1:] and not ref[1:].startswith("/"):
        raise SchemaRejectedError(f"the $ref {ref!r} at {where} is not a JSON Pointer")
    node: object = root
    for part in unquote(fragment).split("/") if fragment else []:
        part = part.replace("~1", "/").replace("~0", "~")
        try:
            if isinstance(node, list):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise LookupError(part)
        except (LookupError, ValueError):
            raise SchemaRejectedError(f"the $ref {ref!r} at {where} leads nowhere") from None
    return node


# Keywords fastjsonschema turns into checks, and how many; each repeats the subschema.
_CHECKS: Final[Mapping[str, int]] = {
    **dict.fromkeys(
        words(
            "type enum anyOf oneOf not minLength maxLength pattern format minimum maximum "
            "minItems maxItems uniqueItems items additionalItems minProperties maxProperties "
            "required dependencies additionalProperties exclusiveMinimum exclusiveMaximum "
            "propertyNames contains const"
        ),
        1,
    ),
    "multipleOf": 2,
    "contentEncoding": 2,
    "contentMediaType": 2,
}
SOURCE_CHARS_PER_VALUE: Final = 64  # a hard backstop on the source length after generation


def expanded_values(tree: Tree, refs: Mapping[str, int]) -> int:
    """Estimate the JSON values in fastjsonschema's generated source, before generating it.

    Every check repeats its subschema (with ``$ref``s inside expanded once) as
    ``definition=...``, generated code names each value by its path, and each
    distinct ``$ref`` gets a function for its target. This deliberately
    over-counts; it exists because a 9 KiB schema of 400 ``{"$ref": "#"}``
    generates 7 MB of source that takes ~20 s to parse.
    """
    objs, parents, n = tree.objs, tree.parents, len(tree.objs)
    size = list(tree.own)
    for i in range(n - 1, 0, -1):
        size[parents[i]] += size[i]
    extra = [0] * n  # values added by expanding the $refs under each container
    for i in range(n - 1, 0, -1):
        obj = objs[i]
        if isinstance(obj, dict) and isinstance(obj.get("$ref"), str):
            target = refs.get(obj["$ref"], -1)
            extra[i] += size[target] if target >= 0 else 1
        extra[parents[i]] += extra[i]
    path = [0] * n
    volume = [0] * n
    for i, obj in enumerate(objs):
        if i:
            key = tree.keys[i]
            path[i] = path[parents[i]] + 1 + (len(key) // 16 if isinstance(key, str) else 0)
        checks = 0
        if isinstance(obj, dict) and not isinstance(obj.get("$ref"), str):
            checks = sum(_CHECKS.get(key, 0) for key in obj)
            dependencies = obj.get("dependencies")
            if isinstance(dependencies, dict):
                checks += sum(len(v) for v in dependencies.values() if isinstance(v, list))
        volume[i] = checks * (size[i] + extra[i] + 24 + path[i]) + (len(obj) + 1) * (6 + path[i])
    for i in range(n - 1, 0, -1):
        volume[parents[i]] += volume[i]
    return volume[0] + sum(volume[t] if t >= 0 else 1 for t in refs.values())
