"""Generating, vetting and loading the checker code fastjsonschema writes, for ``answers``.

fastjsonschema compiles a schema by generating Python source and exec'ing it.
Here the source is generated with every remote ``$ref`` refused, parsed, and run
only if every node is one fastjsonschema is known to emit, with an allowlist of
builtins and imports; its regexes are bounded in input length, and its ``$ref``
calls are metered per check (:class:`Run`).
"""

from __future__ import annotations

import ast
import base64
import builtins
import decimal
import inspect
import json
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, NoReturn

import fastjsonschema

from .regex_bounds import vet_regex
from .schema_limits import SchemaLimits, SchemaRejectedError
from .schema_vetting import words

__all__ = ["Run", "Unchecked", "generate", "load"]


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


def generate(root: dict[str, Any], formats: Mapping[str, Callable[[str], bool]]) -> str:
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
    for name in words(
        "Exception bool bytes dict enumerate float frozenset hasattr int isinstance len list "
        "locals repr set sorted str tuple type"
    )
}
_NAMES: Final = _SAFE_BUILTINS.keys() | words(
    "Decimal JsonSchemaValueException JsonSchemaValuesException NoneType REGEX_PATTERNS "
    "VERSION base64 custom_formats e errors fn json k name_prefix quotient re v var"
)
_ATTRIBUTES: Final = words(
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


def load(source: str, limits: SchemaLimits) -> Callable[..., Any]:
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
        vet_regex(regex.pattern, "a generated regex", limits)
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


class Unchecked(Exception):
    """Stops a check at a bound; the message is the problem reported."""


class Run(dict[str, Callable[[str], bool]]):
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
            raise Unchecked(
                "the schema's $refs apply to this answer too many times to check it "
                "(over max_check_work)"
            )


def _metered(function: Callable[..., Any], statements: int) -> Callable[..., Any]:
    def metered(data: Any, run: Run, name_prefix: str | None = None) -> Any:
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
            raise Unchecked(
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
