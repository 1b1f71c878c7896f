"""The public errors as values: they survive pickling and copying whole (worker pools,
pytest-xdist and logging queues move them between processes), and a message never
carries an endpoint's credentials."""

from __future__ import annotations

import copy
import pickle

import pytest

from interlude.core import errors as err

EVERY_ERROR: list[err.InterludeError] = [
    err.UsageError("pass a str"),
    err.StaleBatchError("stale"),
    err.BatchClaimedError("claimed"),
    err.BatchExpiredError("expired", ["p", "q"]),
    err.InvalidResumeError(
        ["no entry for 'p'", err.ResumeProblem("payload refused", interrupt_id="q", entry=1)]
    ),
    err.InterruptPendingError("pending"),
    err.RecoveryRequiredError("recover"),
    err.StateLockedError("locked"),
    err.ProtocolError("bad frame", retryable=True, body="<html>"),
    err.TransportError("down", retryable=True, status=503, body="busy", retry_after=2.5),
    err.RunError("the agent failed", code="E42"),
    err.RunError("", None),
    err.ToolError("rounds"),
    err.ObserverError("observer"),
]


@pytest.mark.parametrize("error", EVERY_ERROR, ids=lambda e: type(e).__name__)
def test_an_error_survives_pickling_and_copying_whole(error: err.InterludeError) -> None:
    for twin in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(twin) is type(error) and twin == error
        assert str(twin) == str(error) and repr(twin) == repr(error)
        assert twin.args == error.args and vars(twin) == vars(error)


def test_an_unpickled_invalid_resume_keeps_its_problems() -> None:
    """Exception's own pickling called the constructor again with the joined message,
    which it read as a list of problems, one a character."""
    error = err.InvalidResumeError(["no entry for 'p'"])
    twin = pickle.loads(pickle.dumps(error))
    assert twin.problems == ("no entry for 'p'",)
    assert str(twin) == "the resume entries were rejected, nothing was sent: no entry for 'p'"


def test_R_J4_from_status_never_quotes_credentials_query_or_fragment() -> None:
    """A custom driver passing its endpoint as configured must not leak a token."""
    error = err.TransportError.from_status(
        302,
        "",
        endpoint="https://user:secret@agent.example/run?api_key=k#f",
        location="https://other.example/run?token=t",
    )
    assert "secret" not in str(error) and "api_key" not in str(error)
    assert "token" not in str(error)
    assert str(error) == (
        "the endpoint https://agent.example/run?... answered HTTP 302 (a redirect to "
        "https://other.example/run?...: interlude does not follow redirects; use the new URL)"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://agent.example/run", "https://agent.example/run"),
        ("http://u:p@h:8000/a/b?x=1", "http://h:8000/a/b?..."),
        ("//token@h/p#frag", "//h/p?..."),
        ("not a url at all", "not a url at all"),
        ("key@host/path", "host/path"),
    ],
)
def test_redacted_url(url: str, shown: str) -> None:
    assert err.redacted_url(url) == shown
