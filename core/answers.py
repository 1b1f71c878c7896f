"""Check an answer against an interrupt's ``responseSchema`` before resuming.

Optional, and never called by the runtime: the server is authoritative (R-B3).
It lets applications that build forms show readable problems early.

The schema comes from the network, so it is treated as hostile. fastjsonschema
compiles a schema by generating Python source and exec'ing it, so this module:

- copies the schema iteratively under size, depth and node bounds, and
  refuses what it cannot bound: a ``$ref`` that is not ``#...`` (nothing is
  ever fetched; fastjsonschema's ``handlers`` refuse every URI scheme as a
  second line), an unknown ``$schema``, a regex that could backtrack for long,
  or a schema whose generated code would be too big to parse quickly;
- parses the generated source and runs it only if every node is one
  fastjsonschema is known to emit (schema text can then only be string
  constants), with an allowlist of builtins and imports;
- validates a private copy of the answer with ``use_default=False``, bounds
  its depth, the strings fed to regexes and the ``$ref`` calls made per check.
"""

from __future__ import annotations

import ast
import base64
import builtins
import decimal
import importlib
import inspect
import json
import math
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, NoReturn
from urllib.parse import unquote

import attrs
import fastjsonschema
from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft06 import CodeGeneratorDraft06
from fastjsonschema.draft07 import CodeGeneratorDraft07
from fastjsonschema.draft2019 import CodeGeneratorDraft2019

__all__ = [
    "AnswerCheck",
    "AnswerValidator",
    "SchemaLimits",
    "SchemaRejectedError",
    "check_answer",
    "compile_answer_schema",
]


# --- public types ------------------------------------------------------------------------------


class SchemaRejectedError(ValueError):
    """The schema cannot be checked safely here; ``reason`` says why.

    Nothing is wrong with the answer: collect it without local checks (for
    example as free JSON) and let the server validate it on resume.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"responseSchema not usable for local answer checks: {reason}. Collect the answer "
            "without local checks (e.g. free JSON entry); the server validates it on resume"
        )
        self.reason = reason


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"SchemaLimits.{attribute.name} must be a positive int, not {value!r}")


@attrs.frozen(kw_only=True)
class SchemaLimits:
    """Bounds on the work a hostile schema can cause. Defaults fit form schemas."""

    max_bytes: int = attrs.field(default=256 * 1024, validator=_positive)
    """Size of the schema as compact UTF-8 JSON."""
    max_depth: int = attrs.field(default=32, validator=_positive)
    """Nesting of the schema, and of answers (deeper answers are a problem, not a crash)."""
    max_nodes: int = attrs.field(default=10_000, validator=_positive)
    """JSON values in the schema."""
    max_pattern_length: int = attrs.field(default=1000, validator=_positive)
    """Characters in one ``pattern``/``patternProperties`` regex (and ``format: regex`` answers)."""
    max_pattern_input_length: int = attrs.field(default=1000, validator=_positive)
    """Longest string matched against a schema regex; longer ones are a problem. Regexes are
    accepted only if their worst case on strings this long is small, so raising this rejects
    more regexes. Object keys and ``required`` names in the schema are bounded by it too."""
    max_format_length: int = attrs.field(default=4096, validator=_positive)
    """Longest string checked against a ``format`` without a natural bound (``uri``, ...);
    longer ones fail the format. Formats like ``email`` or ``ipv4`` use their RFC bounds."""
    max_expanded_values: int = attrs.field(default=100_000, validator=_positive)
    """Estimated JSON values in fastjsonschema's generated source: it repeats each subschema
    (with ``$ref``s expanded once) in every check it emits, and emits one function per
    ``$ref``. Parsing that source is the slow step of compiling (3-12 µs a value)."""
    max_check_work: int = attrs.field(default=2_000_000, validator=_positive)
    """Per check: the sum, over calls into ``$ref``'d subschemas, of the callee's statements
    times the answer values under the call. Stops ``$ref`` fan-out that re-checks one part of
    the answer exponentially often."""


@attrs.frozen
class AnswerCheck:
    """The outcome of checking one answer: ``ok``, else readable ``problems``."""

    ok: bool
    problems: tuple[str, ...] = ()


class AnswerValidator:
    """A compiled ``responseSchema``; made by :func:`compile_answer_schema`, reusable."""

    __slots__ = ("_entry", "_formats", "draft", "limits")

    def __init__(
        self,
        entry: Callable[..., Any],
        formats: Mapping[str, Callable[[str], bool]],
        draft: str,
        limits: SchemaLimits,
    ) -> None:
        self._entry = entry
        self._formats = formats
        self.draft = draft
        """The JSON Schema rules used: ``draft-04``, ``draft-06``, ``draft-07`` or
        ``draft/2019-09`` (fastjsonschema's default when ``$schema`` is absent)."""
        self.limits = limits

    def check(self, answer: object) -> AnswerCheck:
        """Check ``answer`` (plain or frozen JSON). Never raises, never modifies ``answer``."""
        try:
            tree = _copy_json(answer, max_depth=self.limits.max_depth)
        except _NotUsable as exc:
            return AnswerCheck(ok=False, problems=(f"the answer {exc.reason} (at {exc.path})",))
        run = _Run(self._formats, tree.subtree_values(), self.limits.max_check_work)
        try:
            self._entry(tree.root, run, None)
        except fastjsonschema.JsonSchemaException as exc:  # one problem, or all of them
            errors = getattr(exc, "errors", None) or [exc]
            problems = tuple(dict.fromkeys(str(getattr(e, "message", e)) for e in errors))
        except _Unchecked as exc:
            problems = (str(exc),)
        except RecursionError:
            problems = ("the schema's $refs recurse too deeply to check this answer",)
        except Exception as exc:  # a hostile schema must not turn an answer into a crash
            problems = (f"the answer could not be checked ({type(exc).__name__}: {exc})",)
        else:
            return AnswerCheck(ok=True)
        return AnswerCheck(ok=False, problems=problems or ("the answer does not match",))


def compile_answer_schema(
    schema: Mapping[str, Any], *, limits: SchemaLimits = SchemaLimits()
) -> AnswerValidator:
    """Vet and compile a ``responseSchema`` (plain or frozen JSON object).

    Raises :class:`SchemaRejectedError` when the schema cannot be checked safely.
    The schema is copied; the caller's object is never modified.
    """
    try:
        tree = _copy_json(
            schema,
            max_depth=limits.max_depth,
            max_nodes=limits.max_nodes,
            max_chars=limits.max_bytes,
        )
    except _NotUsable as exc:
        raise SchemaRejectedError(f"it {exc.reason} (at {exc.path})") from None
    root = tree.root
    if not isinstance(root, dict):
        raise SchemaRejectedError(f"it is a {type(root).__name__}, not a JSON object")
    compact = json.dumps(root, ensure_ascii=False, separators=(",", ":"))
    size = len(compact.encode("utf-8", "surrogatepass"))  # JSON may carry lone surrogates
    if size > limits.max_bytes:
        raise SchemaRejectedError(f"it is {size} bytes as JSON, over {limits.max_bytes}")
    draft, generator = _draft_of(root)
    for key in ("$id", "id"):  # the base URI; only '#...' refs are allowed, so it is unused
        if isinstance(root.get(key), str):
            del root[key]
    refs = _vet_schema(tree, limits)
    expanded = _expanded_values(tree, refs)
    if expanded > limits.max_expanded_values:
        raise SchemaRejectedError(
            f"its generated checker would hold about {expanded} values, over "
            f"max_expanded_values={limits.max_expanded_values} (many or large $ref targets, "
            "or deep nesting)"
        )
    formats = _format_checkers(generator, limits)
    source = _generate(root, formats)
    if len(source) > _SOURCE_CHARS_PER_VALUE * limits.max_expanded_values:
        raise SchemaRejectedError(f"its generated checker is {len(source)} characters")
    entry = _load(source, limits)
    return AnswerValidator(entry, formats, draft, limits)


def check_answer(
    schema: Mapping[str, Any], answer: object, *, limits: SchemaLimits = SchemaLimits()
) -> AnswerCheck:
    """Compile ``schema`` and check ``answer`` once. Compile once to check repeatedly.

    Raises :class:`SchemaRejectedError` for an unusable schema, never for the answer.
    """
    return compile_answer_schema(schema, limits=limits).check(answer)


# --- bounded, iterative JSON copy --------------------------------------------------------------


class _NotUsable(Exception):
    """A value broke a bound while being copied; ``path`` is a JSON Pointer."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path or "/"
        self.reason = reason


@attrs.define
class _Tree:
    """A private plain copy of a JSON value, and per container (pre-order) its parent,
    its key in the parent and the values it holds directly (strings count 1 per 64 chars)."""

    root: Any = None
    objs: list[Any] = attrs.Factory(list)
    parents: list[int] = attrs.Factory(list)
    keys: list[str | int] = attrs.Factory(list)
    own: list[int] = attrs.Factory(list)

    def pointer(self, index: int, last: str | int | None = None) -> str:
        tokens = [] if last is None else [last]
        while index > 0:
            tokens.append(self.keys[index])
            index = self.parents[index]
        return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in reversed(tokens))

    def subtree_values(self) -> dict[int, int]:
        """Values under each container, by ``id`` of the container."""
        sizes = list(self.own)
        for i in range(len(sizes) - 1, 0, -1):
            sizes[self.parents[i]] += sizes[i]
        return {id(obj): size for obj, size in zip(self.objs, sizes, strict=True)}


def _copy_json(
    value: object, *, max_depth: int, max_nodes: int | None = None, max_chars: int | None = None
) -> _Tree:
    """Copy ``value`` as plain dicts/lists without recursion, enforcing the bounds.

    No Python recursion, so a 10,000-deep value fails fast at ``max_depth``;
    cycles hit the same bound.
    """
    tree = _Tree()
    box: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int, int]] = [(value, box, 0, -1, 0)]
    nodes = chars = 0
    while stack:
        src, dst, slot, parent, depth = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise _NotUsable(tree.pointer(parent, slot), f"has more than {max_nodes} values")
        out: Any
        weight = 1
        if src is None or type(src) is bool:
            out = src
        elif isinstance(src, str):
            out = str(src)
            chars += len(out)
            weight += len(out) // 64
        elif isinstance(src, int):
            out = int(src)
            if out.bit_length() > 1024:
                raise _NotUsable(tree.pointer(parent, slot), "holds a number too large")
        elif isinstance(src, float):
            out = float(src)
            if not math.isfinite(out):
                raise _NotUsable(tree.pointer(parent, slot), f"holds {out!r}, which is not JSON")
        elif isinstance(src, Mapping | list | tuple):
            if depth >= max_depth:
                raise _NotUsable(
                    tree.pointer(parent, slot), f"is nested deeper than {max_depth} levels"
                )
            if max_nodes is not None and nodes + len(src) > max_nodes:
                raise _NotUsable(tree.pointer(parent, slot), f"has more than {max_nodes} values")
            index = len(tree.objs)
            tree.parents.append(parent)
            tree.keys.append(slot)
            if isinstance(src, Mapping):
                for key in src:
                    if not isinstance(key, str):
                        raise _NotUsable(tree.pointer(parent, slot), "has a non-string key")
                out = {str(key): None for key in src}
                chars += sum(map(len, out))
                tree.own.append(1 + sum(1 + len(key) // 64 for key in out))
                stack.extend((v, out, str(k), index, depth + 1) for k, v in src.items())
            else:
                out = [None] * len(src)
                tree.own.append(1)
                stack.extend((v, out, i, index, depth + 1) for i, v in enumerate(src))
            tree.objs.append(out)
            weight = 0  # counted in its own slot
        else:
            raise _NotUsable(tree.pointer(parent, slot), f"holds a {type(src).__name__}")
        if max_chars is not None and chars > max_chars:
            raise _NotUsable(tree.pointer(parent, slot), f"holds over {max_chars} characters")
        dst[slot] = out
        if parent >= 0:
            tree.own[parent] += weight
    tree.root = box[0]
    return tree


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


def _draft_of(root: dict[str, Any]) -> tuple[str, type[CodeGeneratorDraft04]]:
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


def _vet_schema(tree: _Tree, limits: SchemaLimits) -> dict[str, int]:
    """Refuse what fastjsonschema would fetch, choke on or run slowly.

    Looks at every object, not only schema positions (a ``$ref`` can point
    anywhere), so a few odd but harmless schemas are refused too. Returns each
    distinct ``$ref`` with the index of its target container (-1 for a scalar).
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
            refs[ref] = index_of.get(id(target), -1)
        pattern = obj.get("pattern")
        if isinstance(pattern, str):
            _vet_regex(pattern, f"the pattern at {where}", limits)
            _vet_regex(_DOLLAR.sub(r"\\Z", pattern), f"the pattern at {where}", limits)
        names = obj.get("patternProperties")
        if isinstance(names, dict):
            for pattern in names:
                _vet_regex(pattern, f"the patternProperties key at {where}", limits)
        required = obj.get("required")
        if isinstance(required, list):
            for name in required:
                if not isinstance(name, str) or len(name) > longest:
                    raise SchemaRejectedError(f"'required' at {where} holds {name!r}")
        step = obj.get("multipleOf")
        if isinstance(step, int | float) and not isinstance(step, bool) and step <= 0:
            raise SchemaRejectedError(f"multipleOf at {where} is {step}, not positive")
        if "prefixItems" in obj and "items" in obj:
            raise SchemaRejectedError(
                f"the object at {where} uses draft 2020-12 prefixItems with items, which "
                "fastjsonschema would read with older rules"
            )
    return refs


def _resolve_ref(root: dict[str, Any], ref: object, where: str) -> object:
    """The target of a local ``$ref``, found the way fastjsonschema finds it."""
    if not isinstance(ref, str):
        raise SchemaRejectedError(f"the $ref at {where} is not a string")
    if not ref.startswith("#"):
        raise SchemaRejectedError(
            f"the $ref {ref!r} at {where} points outside the schema; only '#...' refs are "
            "followed and nothing is fetched"
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


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Keywords fastjsonschema turns into checks, and how many; each repeats the subschema.
_CHECKS: Final[Mapping[str, int]] = {
    **dict.fromkeys(
        _words(
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
_SOURCE_CHARS_PER_VALUE: Final = 64  # a hard backstop on the source length after generation


def _expanded_values(tree: _Tree, refs: Mapping[str, int]) -> int:
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

_sre: Any = importlib.import_module("re._parser")  # the parser behind re.compile, stdlib
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
    _sre.CATEGORY_DIGIT: str.isdecimal,  # re's \d is Unicode category Nd, as isdecimal
    _sre.CATEGORY_SPACE: str.isspace,
    _sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    _sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdecimal(),
    _sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    _sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}
_NEGATIVE_CATEGORIES: Final = frozenset(
    {_sre.CATEGORY_NOT_DIGIT, _sre.CATEGORY_NOT_SPACE, _sre.CATEGORY_NOT_WORD}
)


def _char_class(items: list[tuple[Any, Any]], flags: int) -> _Chars:
    if flags & re.IGNORECASE:
        return _EVERY  # case folding is subtle; assume overlap
    negate = False
    listed: set[str] = set()
    tests: list[Callable[[str], bool]] = []
    for op, av in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            listed.add(chr(av))
        elif op is _sre.RANGE and av[1] - av[0] < 256:
            listed.update(map(chr, range(av[0], av[1] + 1)))
        elif op is _sre.RANGE:
            tests.append(_in_range(av[0], av[1]))
        elif op is _sre.CATEGORY and not (flags & re.ASCII and av in _NEGATIVE_CATEGORIES):
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


def _vet_regex(pattern: str, what: str, limits: SchemaLimits) -> None:
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
        parsed = _sre.parse(pattern, 0)
    except (re.error, OverflowError, ValueError, RecursionError) as exc:
        raise _Risky(f"is not a valid regular expression ({exc})") from None
    flags: int = parsed.state.flags
    data = list(parsed.data)
    cost = _sequence(data, (), flags).cost
    anchored = bool(data) and data[0] == (_sre.AT, _sre.AT_BEGINNING_STRING)
    anchored |= bool(data) and data[0] == (_sre.AT, _sre.AT_BEGINNING) and not flags & re.MULTILINE
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
        if op is _sre.SUBPATTERN:
            f, nullable = _first(list(av[3]), (flags | av[1]) & ~av[2])
        elif op is _sre.ATOMIC_GROUP:
            f, nullable = _first(list(av), flags)
        elif op is _sre.BRANCH:
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
    if op is _sre.LITERAL:
        return ((_EVERY if flags & re.IGNORECASE else _literal(chr(av))),), False
    if op is _sre.NOT_LITERAL:
        ch = chr(av)
        return (
            (_EVERY if flags & re.IGNORECASE else _Chars(None, lambda c: c not in ("", ch))),
        ), False
    if op is _sre.ANY:
        return ((_EVERY if flags & re.DOTALL else _NOT_NEWLINE),), False
    if op is _sre.IN:
        return (_char_class(list(av), flags),), False
    if op is _sre.AT:
        if av is _sre.AT_END_STRING:
            return (_END,), False
        if av is _sre.AT_END or av is _sre.AT_END_LINE:
            return (_END_OR_NEWLINE,), False
        return (_EVERY,), True  # ^, \A, \b, \B: zero width, but they can fail
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return (_EVERY,), True
    if op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
        raise _Risky("uses a backreference")
    raise _Risky(f"uses {op}, which this check does not know")


_REPEATS: Final = frozenset({_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT})


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
    if op is _sre.SUBPATTERN:
        return _sequence(list(av[3]), follow, (flags | av[1]) & ~av[2], depth + 1)
    if op is _sre.ATOMIC_GROUP:
        return _sequence(list(av), follow, flags, depth + 1)
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):  # atomic: one way out, but it may fail
        body = _sequence(list(av[1]), (), flags, depth + 1)
        return _Shape((_EVERY,), True, _ONE, body.cost, body.rescans or len(body.cost) > 1)
    if op is _sre.BRANCH:
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
    unbounded = high == _sre.MAXREPEAT
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


# --- formats -----------------------------------------------------------------------------------

# Formats with a natural length bound; the others use SchemaLimits.max_format_length.
# fastjsonschema's email/hostname/uri-reference/json-pointer regexes are quadratic
# (a 20,000-character adversarial email takes ~3 s), so lengths are always bounded.
_FORMAT_LENGTHS: Final[Mapping[str, int]] = {
    "date": 10,
    "time": 64,
    "date-time": 64,
    "duration": 64,
    "email": 320,
    "idn-email": 320,
    "hostname": 253,
    "idn-hostname": 253,
    "ipv4": 15,
    "ipv6": 45,
    "uuid": 36,
}


def _format_checkers(
    generator: type[CodeGeneratorDraft04], limits: SchemaLimits
) -> dict[str, Callable[[str], bool]]:
    """Length-bounded checkers for every format fastjsonschema knows for this draft."""
    regexes: Mapping[str, str] = getattr(generator, "FORMAT_REGEXS", {})
    checkers = {
        name: _format_checker(
            re.compile(regex), _FORMAT_LENGTHS.get(name, limits.max_format_length)
        )
        for name, regex in regexes.items()
    }
    checkers["regex"] = _regex_format_checker(limits.max_pattern_length)
    return checkers


def _format_checker(regex: re.Pattern[str], longest: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return len(value) <= longest and regex.match(value) is not None

    return check


def _regex_format_checker(longest: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:  # parse, not compile: no work on the answer's regex, no cache
        if len(value) > longest:
            return False
        try:
            _sre.parse(value, 0)
        except (re.error, OverflowError, ValueError, RecursionError):
            return False
        return True

    return check


# --- generating, vetting and loading the code --------------------------------------------------


class _RemoteRef(Exception):
    """fastjsonschema asked for a document outside the schema."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.uri = uri


def _refuse(uri: str) -> NoReturn:
    raise _RemoteRef(uri)


class _RefuseEveryScheme(Mapping[str, Callable[[str], Any]]):
    """fastjsonschema ``handlers`` claiming every URI scheme, so it never falls back to urllib."""

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse

    def __contains__(self, scheme: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_HAS_FAST_FAIL: Final = "fast_fail" in inspect.signature(fastjsonschema.compile_to_code).parameters


def _generate(root: dict[str, Any], formats: Mapping[str, Callable[[str], bool]]) -> str:
    try:
        if _HAS_FAST_FAIL:  # collect every problem, not only the first
            return fastjsonschema.compile_to_code(
                root, _RefuseEveryScheme(), formats, use_default=False, fast_fail=False
            )
        return fastjsonschema.compile_to_code(  # pragma: no cover - fastjsonschema < 2.21
            root, _RefuseEveryScheme(), formats, use_default=False
        )
    except _RemoteRef as exc:
        raise SchemaRejectedError(f"it refers to {exc.uri!r}, which is never fetched") from None
    except RecursionError:
        raise SchemaRejectedError("fastjsonschema recursed too deeply on it") from None
    except Exception as exc:  # JsonSchemaDefinitionException, or a crash on a malformed keyword
        raise SchemaRejectedError(
            f"fastjsonschema cannot compile it ({type(exc).__name__}: {exc})"
        ) from None


# Everything fastjsonschema 2.x emits; schema text can then only appear as constants.
_NODES: Final = frozenset(
    {
        ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Assign, ast.AugAssign,
        ast.Expr, ast.If, ast.For, ast.Try, ast.ExceptHandler, ast.Raise, ast.Return,
        ast.Pass, ast.Break, ast.Import, ast.ImportFrom, ast.alias, ast.Name, ast.Attribute,
        ast.Subscript, ast.Slice, ast.Call, ast.keyword, ast.Constant, ast.Dict, ast.List,
        ast.Tuple, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.Add, ast.Sub, ast.Div,
        ast.Mod, ast.BitOr, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Compare, ast.Eq,
        ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot,
        ast.IfExp, ast.GeneratorExp, ast.comprehension, ast.Load, ast.Store,
    }
)  # fmt: skip
_SAFE_BUILTINS: Final[Mapping[str, Any]] = {
    name: getattr(builtins, name)
    for name in _words(
        "Exception bool bytes dict enumerate float frozenset hasattr int isinstance len list "
        "locals repr set sorted str tuple type"
    )
}
_NAMES: Final = _SAFE_BUILTINS.keys() | _words(
    "Decimal JsonSchemaValueException JsonSchemaValuesException NoneType REGEX_PATTERNS "
    "VERSION base64 custom_formats e errors fn json k name_prefix quotient re v var"
)
_ATTRIBUTES: Final = _words(
    "append b64decode compile decode errors extend format get is_integer items keys loads "
    "match remove search A I L M S U X DEBUG"
)
_MODULES: Final[Mapping[str, Any]] = {
    "base64": base64,
    "decimal": decimal,
    "fastjsonschema": fastjsonschema,
    "json": json,
    "re": re,
}
_FROM_IMPORTS: Final = {
    "decimal": {"Decimal"},
    "fastjsonschema": {"JsonSchemaValueException", "JsonSchemaValuesException"},
}
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _import(name: str, *_: object, level: int = 0, **__: object) -> Any:
    """The generated code's ``import``: pre-imported modules only, so no file is read."""
    if level == 0 and name in _MODULES:
        return _MODULES[name]
    raise ImportError(f"the answer checker may not import {name!r}")


def _load(source: str, limits: SchemaLimits) -> Callable[..., Any]:
    """Vet the generated source node by node, then exec it with bounded regexes and calls."""
    try:
        module = ast.parse(source, "<responseSchema checker>")
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        raise SchemaRejectedError(f"Python cannot parse its generated checker ({exc})") from None
    functions: dict[str, ast.FunctionDef] = {}
    for statement in module.body:
        if isinstance(statement, ast.FunctionDef):
            previous = functions.setdefault(statement.name, statement)
            if previous is not statement and ast.dump(previous) != ast.dump(statement):
                raise SchemaRejectedError(
                    f"two of its $refs compile to one function name ({statement.name})"
                )
    statements = dict.fromkeys(functions, 0)  # per function: its weight in max_check_work
    todo: list[tuple[ast.AST, str]] = [(module, "")]
    while todo:
        node, owner = todo.pop()
        kind = type(node)
        if kind is ast.Constant:
            continue
        if isinstance(node, ast.Call) and _is_name(node.func, "JsonSchemaValueException"):
            # drop the echoed subschema: raising would copy it once per problem
            node.keywords = [k for k in node.keywords if k.arg != "definition"]
        problem = _untrusted(node)
        if problem:
            raise SchemaRejectedError(
                f"fastjsonschema generated code this module does not trust ({problem})"
            )
        if kind is ast.Name:
            continue
        if isinstance(node, ast.FunctionDef) and not owner:
            owner = node.name
        elif owner and isinstance(node, ast.stmt):
            statements[owner] += 1
        todo.extend((child, owner) for child in ast.iter_child_nodes(node))
    if "validate" not in functions:
        raise SchemaRejectedError("fastjsonschema generated no entry function")
    namespace: dict[str, Any] = {"__builtins__": {**_SAFE_BUILTINS, "__import__": _import}}
    try:  # CPython allows 20 nested blocks; deep items/not/contains chains exceed that
        exec(compile(module, "<responseSchema checker>", "exec"), namespace)
    except (SyntaxError, RecursionError, MemoryError, ValueError, re.error) as exc:
        raise SchemaRejectedError(f"Python cannot compile its generated checker ({exc})") from None
    patterns: dict[str, re.Pattern[str]] = namespace.get("REGEX_PATTERNS", {})
    for regex in patterns.values():  # the schema walk vetted them; make sure it saw all
        _vet_regex(regex.pattern, "a generated regex", limits)
    namespace["REGEX_PATTERNS"] = {
        key: _BoundedRegex(regex, limits.max_pattern_input_length)
        for key, regex in patterns.items()
    }
    entry = namespace["validate"]
    for name, count in statements.items():  # calls between them go through these names
        namespace[name] = _metered(namespace[name], count + 1)
    return entry  # type: ignore[no-any-return]


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _untrusted(node: ast.AST) -> str | None:
    """Why ``node`` is not something fastjsonschema emits, or None."""
    if type(node) not in _NODES:
        return f"a {type(node).__name__}"
    if isinstance(node, ast.Name):
        ok = node.id in _NAMES or node.id.startswith(("data", "validate"))
        return None if ok else f"the name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return None if node.attr in _ATTRIBUTES else f"the attribute {node.attr!r}"
    if isinstance(node, ast.FunctionDef):
        ok = (node.name == "fn" or node.name.startswith("validate")) and not node.decorator_list
        return None if ok and node.returns is None else f"the function {node.name!r}"
    if isinstance(node, ast.Import):
        ok = all(a.name in ("re", "base64", "json") and a.asname is None for a in node.names)
        return None if ok else "an import"
    if isinstance(node, ast.ImportFrom):
        allowed = _FROM_IMPORTS.get(node.module or "", set())
        ok = node.level == 0 and all(a.name in allowed and a.asname is None for a in node.names)
        return None if ok else "an import"
    if isinstance(node, ast.Call):
        return _untrusted_call(node.func)
    return None


def _untrusted_call(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name | ast.Attribute) and not (
        isinstance(func, ast.Attribute) and func.attr == "format"
    ):
        return None  # the name or attribute itself is vetted as its own node
    if isinstance(func, ast.Subscript) and _is_name(func.value, "custom_formats"):
        return None if isinstance(func.slice, ast.Constant) else "a computed format"
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant):
        template = func.value.value
        try:  # '...{data_key}...'.format(**locals()): plain local names only
            fields = list(string.Formatter().parse(template)) if isinstance(template, str) else None
        except ValueError:
            fields = None
        if fields is not None and all(
            name is None or (_IDENTIFIER.fullmatch(name) and not spec and conversion is None)
            for _, name, spec, conversion in fields
        ):
            return None
    return "an unexpected call"


class _Unchecked(Exception):
    """Stops a check at a bound; the message is the problem reported."""


class _Run(dict[str, Callable[[str], bool]]):
    """One check: the format checkers the generated code looks up, and a work budget.

    fastjsonschema passes ``custom_formats`` along every generated call, so this
    per-check object reaches every ``$ref`` call without shared mutable state.
    """

    __slots__ = ("left", "sizes")

    def __init__(
        self, formats: Mapping[str, Callable[[str], bool]], sizes: dict[int, int], budget: int
    ) -> None:
        super().__init__(formats)
        self.sizes = sizes
        self.left = budget

    def spend(self, statements: int, data: object) -> None:
        self.left -= statements * self.sizes.get(id(data), 1)
        if self.left < 0:
            raise _Unchecked(
                "the schema's $refs apply to this answer too many times to check it "
                "(over max_check_work)"
            )


def _metered(function: Callable[..., Any], statements: int) -> Callable[..., Any]:
    def metered(data: Any, run: _Run, name_prefix: str | None = None) -> Any:
        run.spend(statements, data)
        return function(data, run, name_prefix)

    return metered


class _BoundedRegex:
    """A vetted schema regex that refuses strings longer than the length it was vetted for."""

    __slots__ = ("_longest", "_regex")

    def __init__(self, regex: re.Pattern[str], longest: int) -> None:
        self._regex = regex
        self._longest = longest

    def _fits(self, text: str) -> None:
        if len(text) > self._longest:
            raise _Unchecked(
                f"a string of {len(text)} characters is too long to check against the "
                f"pattern {self._regex.pattern[:80]!r} (max_pattern_input_length="
                f"{self._longest})"
            )

    def search(self, text: str) -> re.Match[str] | None:
        self._fits(text)
        return self._regex.search(text)

    def match(self, text: str) -> re.Match[str] | None:
        self._fits(text)
        return self._regex.match(text)
