"""A bounded, iterative copy of a JSON value, for the answer checker in ``answers``.

Schemas and answers both come from outside, so they are copied into private
plain dicts and lists without recursion, under depth, node and size bounds,
before anything reads them. The copy (:class:`Tree`) also records each
container's parent, key and size, which the schema vetting and the per-check
work budget use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from .errors import a_type
from .pvec import PVec

__all__ = ["NotUsable", "Tree", "copy_json"]


# --- bounded, iterative JSON copy --------------------------------------------------------------


class NotUsable(Exception):
    """A value broke a bound while being copied; ``path`` is a JSON Pointer."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path or "/"
        self.reason = reason


@attrs.define
class Tree:
    """A private plain copy of a JSON value, and per container (pre-order) its parent,
    its key in the parent and the values it holds directly (strings count 1 per 64 chars)."""

    root: Any = None
    objs: list[Any] = attrs.Factory(list)
    parents: list[int] = attrs.Factory(list)
    keys: list[str | int] = attrs.Factory(list)
    own: list[int] = attrs.Factory(list)

    def pointer(self, index: int, last: str | int | None = None) -> str:
        if index < 0:  # the root itself: ``last`` is its slot in copy_json's box, not a key
            return ""
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


def copy_json(
    value: object, *, max_depth: int, max_nodes: int | None = None, max_chars: int | None = None
) -> Tree:
    """Copy ``value`` as plain dicts/lists without recursion, enforcing the bounds.

    No Python recursion, so a 10,000-deep value fails fast at ``max_depth``;
    cycles hit the same bound.
    """
    tree = Tree()
    box: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int, int]] = [(value, box, 0, -1, 0)]
    nodes = chars = 0
    while stack:
        src, dst, slot, parent, depth = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise NotUsable(tree.pointer(parent, slot), f"has more than {max_nodes} values")
        out: Any
        weight = 1
        if src is None or type(src) is bool:
            out = src
        elif isinstance(src, str):
            out = str.__str__(src)  # a (str, Enum)'s value, as freeze() and resume() read it
            chars += len(out)
            weight += len(out) // 64
        elif isinstance(src, int):
            out = int(src)
            if out.bit_length() > 1024:
                raise NotUsable(tree.pointer(parent, slot), "holds a number too large")
        elif isinstance(src, float):
            out = float(src)
            if not math.isfinite(out):
                raise NotUsable(tree.pointer(parent, slot), f"holds {out!r}, which is not JSON")
        elif isinstance(src, Mapping | list | tuple | PVec):  # PVec: frozen JSON's long arrays
            if depth >= max_depth:
                raise NotUsable(
                    tree.pointer(parent, slot), f"is nested deeper than {max_depth} levels"
                )
            if max_nodes is not None and nodes + len(src) > max_nodes:
                raise NotUsable(tree.pointer(parent, slot), f"has more than {max_nodes} values")
            index = len(tree.objs)
            tree.parents.append(parent)
            tree.keys.append(slot)
            if isinstance(src, Mapping):
                for key in src:
                    if not isinstance(key, str):
                        raise NotUsable(tree.pointer(parent, slot), "has a non-string key")
                out = {str.__str__(key): None for key in src}
                chars += sum(map(len, out))
                tree.own.append(1 + sum(1 + len(key) // 64 for key in out))
                stack.extend((v, out, str.__str__(k), index, depth + 1) for k, v in src.items())
            else:
                out = [None] * len(src)
                tree.own.append(1)
                stack.extend((v, out, i, index, depth + 1) for i, v in enumerate(src))
            tree.objs.append(out)
            weight = 0  # counted in its own slot
        else:
            raise NotUsable(tree.pointer(parent, slot), f"holds {a_type(src)}")
        if max_chars is not None and chars > max_chars:
            raise NotUsable(tree.pointer(parent, slot), f"holds over {max_chars} characters")
        dst[slot] = out
        if parent >= 0:
            tree.own[parent] += weight
    tree.root = box[0]
    return tree
