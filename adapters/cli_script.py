"""``--answers FILE``: the messages to send and the answers to give, for unattended runs.

The file is JSON::

    {"messages": ["buy an espresso machine"],
     "answers": {"purchase": {"approved": true}, "shipping-address": "cancel"}}

Answers are keyed by interrupt id and reused whenever that id is asked again
(but not for the same questions asked again right after the same answers: that
would loop, so the run stops); the string ``"cancel"`` cancels. Every scripted
answer is checked with the R-B3 helper first, so a wrong script fails here, with
the checker's problems, and not as a rejected resume on the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from interlude.core.answers import SchemaRejectedError, compile_answer_schema
from interlude.core.state import Batch

from .cli_forms import describe_problem

__all__ = ["CANCEL", "Script", "ScriptError"]

CANCEL = "cancel"


class ScriptError(ValueError):
    """The answers file is unusable, or lacks or has a wrong answer: the message says which."""


@attrs.frozen
class Script:
    messages: tuple[str, ...]
    answers: Mapping[str, Any] = attrs.Factory(dict)

    @classmethod
    def load(cls, path: str | Path) -> Script:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read the answers file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ScriptError(f"the answers file {path} is not UTF-8 text") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ScriptError(f"the answers file {path} is not JSON: {exc}") from None
        except RecursionError:
            raise ScriptError(f"the answers file {path} is nested too deeply") from None
        return cls.parse(data, where=str(path))

    @classmethod
    def parse(cls, data: Any, *, where: str = "the answers file") -> Script:
        if not isinstance(data, dict):
            raise ScriptError(f"{where} must hold a JSON object with 'messages' and 'answers'")
        messages = data.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
            raise ScriptError(f"{where}: 'messages' must be a list of strings")
        answers = data.get("answers", {})
        if not isinstance(answers, dict):
            raise ScriptError(f"{where}: 'answers' must be an object keyed by interrupt id")
        unknown = sorted(set(data) - {"messages", "answers"})
        if unknown:
            raise ScriptError(f"{where}: unknown keys {', '.join(unknown)}")
        return cls(tuple(messages), answers)

    def entries_for(self, batch: Batch) -> list[dict[str, Any]]:
        """One resume entry per interrupt; :class:`ScriptError` lists every problem."""
        entries: list[dict[str, Any]] = []
        problems: list[str] = []
        for interrupt in batch.interrupts:
            iid = interrupt.id
            if iid not in self.answers:
                about = f" ({interrupt.message})" if interrupt.message else ""
                problems.append(f"no scripted answer for interrupt {iid!r}{about}")
                continue
            answer = self.answers[iid]
            if answer == CANCEL:
                entries.append({"interrupt_id": iid, "status": "cancelled"})
                continue
            if interrupt.response_schema is not None:
                try:
                    check = compile_answer_schema(interrupt.response_schema).check(answer)
                except SchemaRejectedError:
                    pass  # the schema cannot be checked here; the agent checks the answer
                else:
                    problems.extend(
                        f"the answer for {iid!r} does not fit its schema: "
                        f"{describe_problem(p, 'answer')}"
                        for p in check.problems
                    )
            entries.append({"interrupt_id": iid, "status": "resolved", "payload": answer})
        if problems:
            raise ScriptError("; ".join(problems))
        return entries
