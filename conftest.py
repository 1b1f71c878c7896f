"""Test setup for tests/ and property_tests/: one fixed Hypothesis profile (deterministic CI)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from interlude.core.pmap import PMap

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def pmaps_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the PMaps built from members while the test runs, in order."""
    built: list[int] = []
    from_items = PMap.from_frozen_items.__func__  # type: ignore[attr-defined]

    def counted(cls: type[PMap], items: Any) -> PMap:
        items = list(items)
        built.append(len(items))
        return from_items(cls, items)  # type: ignore[no-any-return]

    monkeypatch.setattr(PMap, "from_frozen_items", classmethod(counted))
    return built
