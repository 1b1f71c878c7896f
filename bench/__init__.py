"""Benchmarks for interlude's performance claims: ``python -m bench`` (``make bench``).

Every target is a ratio against a baseline measured in the same run
(``json.loads`` of the same lines, or the fake driver on the same events),
except the claim latency, which the issue states in absolute terms. The
tables print the measured numbers, the target and PASS/FAIL; the process
exits non-zero if any target fails.

Modules: :mod:`.stream` (the core pipeline), :mod:`.claim` (``resume``),
:mod:`.http` (SSE over loopback), :mod:`.memory` (many paused resources).
"""
