"""The mutants of one Python source file: small, single edits a test should notice.

Each mutant replaces one node's source text and keeps every other byte, so
line numbers (and the coverage map that picks a mutant's tests) stay true: a
replacement that is shorter by lines is padded with newlines, inside
parentheses for an expression and as blank lines after a statement.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "apply", "mutants"]

_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BINARY = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
    ast.BitXor: ast.BitOr,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}


@dataclass(frozen=True)
class Mutant:
    """One edit: the node at ``line`` (1-based) from byte ``start`` to ``end`` becomes ``text``."""

    id: int
    line: int
    end_line: int
    start: int
    end: int
    text: str
    what: str
    statement: bool

    def describe(self) -> str:
        return f"#{self.id} line {self.line}: {self.what}"


def apply(source: str, m: Mutant) -> str:
    """``source`` with the mutant's edit made, every line still where it was."""
    data = source.encode()
    pad = "\n" * (m.end_line - m.line)
    text = m.text + pad if m.statement else f"({m.text}{pad})"
    return (data[: m.start] + text.encode() + data[m.end :]).decode()


def mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source``, numbered from 1 in source order."""
    tree = ast.parse(source)
    starts = _line_starts(source.encode())
    skip = _skipped(tree)
    found = []
    for node, text, what, statement in _edits(tree, skip):
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        found.append((node.lineno, node.col_offset, what, node, start, end, text, statement))
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    return [
        Mutant(i, line, n.end_lineno, start, end, text, what, statement)
        for i, (line, _, what, n, start, end, text, statement) in enumerate(found, 1)
    ]


def _line_starts(data: bytes) -> list[int]:
    starts, at = [], 0
    for line in data.splitlines(keepends=True):
        starts.append(at)
        at += len(line)
    starts.append(at)
    return starts


def _skipped(tree: ast.Module) -> set[int]:
    """Nodes no mutant should touch: docstrings, annotations, f-string parts,
    ``__all__`` and ``TYPE_CHECKING`` blocks, and ``@overload`` stubs."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            mark(body[0])
        if isinstance(node, ast.arg):
            mark(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mark(node.returns)
            if any(_name(d) == "overload" for d in node.decorator_list):
                mark(node)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif _never(node):
            mark(node)
    return skip


def _never(node: ast.AST) -> bool:
    """f-strings (3.11 gives their parts no usable positions), ``__all__`` and
    ``if TYPE_CHECKING:`` blocks."""
    return (
        isinstance(node, ast.JoinedStr)
        or (isinstance(node, ast.Assign) and any(_name(t) == "__all__" for t in node.targets))
        or (isinstance(node, ast.If) and _name(node.test) == "TYPE_CHECKING")
    )


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _edits(tree: ast.Module, skip: set[int]) -> Iterator[tuple[ast.AST, str, str, bool]]:
    """(node, its replacement text, a description, whether it is a statement)."""
    compared: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for c in node.comparators:
                compared.update(
                    id(e) for e in ([c, *c.elts] if isinstance(c, ast.Tuple | ast.Set) else [c])
                )
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        yield from _node_edits(node, compared)


def _node_edits(node: ast.AST, compared: set[int]) -> Iterator[tuple[ast.AST, str, str, bool]]:
    u = ast.unparse
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                new = copy.deepcopy(node)
                new.ops[i] = _COMPARE[type(op)]()
                yield node, u(new), f"{_op(op)} -> {_op(new.ops[i])}", False
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield node, u(new), f"{_word(node.op)} -> {_word(new.op)}", False
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, u(node.operand), f"drop `not` of {_short(node.operand)}", False
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        new = copy.deepcopy(node)
        new.op = _BINARY[type(node.op)]()
        yield node, u(new), f"{_short(node)} -> {_short(new)}", False
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINARY:
        new = copy.deepcopy(node)
        new.op = _BINARY[type(node.op)]()
        yield node, u(new), f"{_short(node)} -> {_short(new)}", True
    elif isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            yield node, repr(not v), f"{v} -> {not v}", False
        elif isinstance(v, int | float):
            yield node, repr(v + 1), f"{v!r} -> {v + 1!r}", False
        elif isinstance(v, str) and id(node) in compared:
            yield node, repr(v + "~"), f"{v!r} -> {v + '~'!r}", False
    elif isinstance(node, ast.Break):
        yield node, "continue", "break -> continue", True
    elif isinstance(node, ast.Continue):
        yield node, "break", "continue -> break", True
    elif isinstance(node, ast.Raise):
        yield node, "pass", f"{_short(node)} -> pass", True
    elif isinstance(node, ast.Return) and not (
        node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
    ):
        yield node, "return None", f"{_short(node)} -> return None", True
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
        yield node, "pass", f"{_short(node)} -> pass", True


def _op(op: ast.cmpop) -> str:
    return {
        ast.Lt: "<",
        ast.LtE: "<=",
        ast.Gt: ">",
        ast.GtE: ">=",
        ast.Eq: "==",
        ast.NotEq: "!=",
        ast.Is: "is",
        ast.IsNot: "is not",
        ast.In: "in",
        ast.NotIn: "not in",
    }[type(op)]


def _word(op: ast.boolop) -> str:
    return "and" if isinstance(op, ast.And) else "or"


def _short(node: ast.AST, limit: int = 60) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
