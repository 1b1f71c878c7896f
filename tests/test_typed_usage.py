"""The typed usage module (checked by mypy --strict in ``make typecheck``) also runs."""

from __future__ import annotations

import typed.usage as usage


def test_the_typed_usage_module_runs() -> None:
    assert usage.schema_checks()
    assert usage.first_request_body().startswith(b'{"threadId":')
    assert usage.observe_a_subclass() >= 1
    assert usage.record_inputs()[:2] == ["Send", "SendStarting"]
    assert type(usage.default_driver()) is usage.Resource
    assert usage.an_answer().payload == {"approved": True}
