"""pytest plugin for the mutation runner: a fast Hypothesis profile, and the
coverage map (which tests run which lines of the library) when asked for.

``HYPOTHESIS_PROFILE=mutation``: the CI profile without shrinking, since a
mutant is killed by any failure and a minimal example is not needed.
``MUTATION_COVER=path``: trace each test and write {file: {line: [test ids]}}.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "mutation",
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=list(HealthCheck),
)

_OUT = os.environ.get("MUTATION_COVER")
_ROOT = Path(__file__).resolve().parents[2]
_TARGETS = (str(_ROOT / "core") + os.sep, str(_ROOT / "adapters") + os.sep)
_lines: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
_durations: dict[str, float] = {}
_seen: set[tuple[str, int]] = set()


def _tracer(frame: FrameType, event: str, arg: Any) -> Any:
    name = frame.f_code.co_filename
    if not name.startswith(_TARGETS):
        return None

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            _seen.add((name, frame.f_lineno))
        return local

    _seen.add((name, frame.f_lineno))
    return local


if _OUT:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: object) -> Iterator[None]:
        _seen.clear()
        started = time.perf_counter()
        threading.settrace(_tracer)
        sys.settrace(_tracer)
        try:
            yield
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
            _durations[item.nodeid] = time.perf_counter() - started
            for name, line in _seen:
                _lines[os.path.relpath(name, _ROOT)][line].add(item.nodeid)

    def pytest_sessionfinish(session: pytest.Session) -> None:
        data = {
            "lines": {
                f: {str(n): sorted(ids) for n, ids in sorted(lines.items())}
                for f, lines in sorted(_lines.items())
            },
            "durations": _durations,
        }
        Path(_OUT).write_text(json.dumps(data))
