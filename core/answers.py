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

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import fastjsonschema

from .errors import a_type
from .schema_code import Run, Unchecked, generate, load
from .schema_formats import format_checkers
from .schema_json import NotUsable, copy_json
from .schema_limits import SchemaLimits, SchemaRejectedError
from .schema_vetting import (
    SOURCE_CHARS_PER_VALUE,
    draft_of,
    expanded_values,
    vet_keywords,
    vet_numbers,
    vet_schema,
)

__all__ = [
    "AnswerCheck",
    "AnswerValidator",
    "SchemaLimits",
    "SchemaRejectedError",
    "check_answer",
    "compile_answer_schema",
]


# --- public types ------------------------------------------------------------------------------


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
            tree = copy_json(answer, max_depth=self.limits.max_depth)
        except NotUsable as exc:
            return AnswerCheck(ok=False, problems=(f"the answer {exc.reason} (at {exc.path})",))
        run = Run(self._formats, tree.subtree_values(), self.limits.max_check_work)
        try:
            self._entry(tree.root, run, None)
        except fastjsonschema.JsonSchemaException as exc:  # one problem, or all of them
            errors = getattr(exc, "errors", None) or [exc]
            problems = tuple(dict.fromkeys(str(getattr(e, "message", e)) for e in errors))
        except Unchecked as exc:
            problems = (str(exc),)
        except RecursionError:
            problems = ("the schema's $refs recurse too deeply to check this answer",)
        except Exception as exc:  # a hostile schema must not turn an answer into a crash
            problems = (f"the answer could not be checked ({type(exc).__name__}: {exc})",)
        else:
            return AnswerCheck(ok=True)
        return AnswerCheck(ok=False, problems=problems or ("the answer does not match",))


def compile_answer_schema(
    schema: Mapping[str, Any],
    *,
    limits: SchemaLimits = SchemaLimits(),  # noqa: B008
) -> AnswerValidator:
    """Vet and compile a ``responseSchema`` (plain or frozen JSON object).

    Raises :class:`SchemaRejectedError` when the schema cannot be checked safely.
    The schema is copied; the caller's object is never modified.
    """
    try:
        tree = copy_json(
            schema,
            max_depth=limits.max_depth,
            max_nodes=limits.max_nodes,
            max_chars=limits.max_bytes,
        )
    except NotUsable as exc:
        raise SchemaRejectedError(f"it {exc.reason} (at {exc.path})") from None
    root = tree.root
    if not isinstance(root, dict):
        raise SchemaRejectedError(f"it is {a_type(root)}, not a JSON object")
    compact = json.dumps(root, ensure_ascii=False, separators=(",", ":"))
    size = len(compact.encode("utf-8", "surrogatepass"))  # JSON may carry lone surrogates
    if size > limits.max_bytes:
        raise SchemaRejectedError(f"it is {size} bytes as JSON, over {limits.max_bytes}")
    draft, generator = draft_of(root)
    for key in ("$id", "id"):  # the base URI; only '#...' refs are allowed, so it is unused
        if isinstance(root.get(key), str):
            del root[key]
    refs = vet_schema(tree, limits)
    vet_numbers(tree, refs, draft)
    vet_keywords(tree, refs, draft)
    expanded = expanded_values(tree, refs)
    if expanded > limits.max_expanded_values:
        raise SchemaRejectedError(
            f"its generated checker would hold about {expanded} values, over "
            f"max_expanded_values={limits.max_expanded_values} (many or large $ref targets, "
            "or deep nesting)"
        )
    formats = format_checkers(generator, limits)
    source = generate(root, formats)
    cap = SOURCE_CHARS_PER_VALUE * limits.max_expanded_values
    if len(source) > cap:
        raise SchemaRejectedError(
            f"its generated checker is {len(source)} characters, over {cap} "
            f"({SOURCE_CHARS_PER_VALUE} per value of max_expanded_values="
            f"{limits.max_expanded_values}; long constants or patterns make a long checker)"
        )
    entry = load(source, limits)
    return AnswerValidator(entry, formats, draft, limits)


def check_answer(
    schema: Mapping[str, Any],
    answer: object,
    *,
    limits: SchemaLimits = SchemaLimits(),  # noqa: B008
) -> AnswerCheck:
    """Compile ``schema`` and check ``answer`` once. Compile once to check repeatedly.

    Raises :class:`SchemaRejectedError` for an unusable schema, never for the answer.
    """
    return compile_answer_schema(schema, limits=limits).check(answer)
