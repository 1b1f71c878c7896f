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


# -- equality: errors compare by type and fields --------------------------------------


def test_equal_errors_are_equal_and_hash_alike() -> None:
    """Two states holding equal errors are equal (the reducer's determinism is checked
    that way), and an error can be a set member or a dict key."""
    for error in EVERY_ERROR:
        twin = pickle.loads(pickle.dumps(error))
        assert twin == error and (twin != error) is False
        assert hash(twin) == hash(error) and {twin, error} == {error}


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (err.UsageError("a"), err.UsageError("b")),
        (err.UsageError("a"), err.StaleBatchError("a")),
        (err.BatchExpiredError("e", ["p"]), err.BatchExpiredError("e", ["q"])),
        (
            err.InvalidResumeError([err.ResumeProblem("bad", interrupt_id="p", entry=0)]),
            err.InvalidResumeError([err.ResumeProblem("bad", interrupt_id="p", entry=1)]),
        ),
        (err.ProtocolError("p"), err.ProtocolError("p", retryable=True)),
        (err.ProtocolError("p", body="a"), err.ProtocolError("p", body="b")),
        (err.TransportError("t", retryable=True), err.TransportError("t", retryable=False)),
        (
            err.TransportError("t", retryable=True, status=502),
            err.TransportError("t", retryable=True, status=503),
        ),
        (
            err.TransportError("t", retryable=True, body="a"),
            err.TransportError("t", retryable=True, body="b"),
        ),
        (
            err.TransportError("t", retryable=True, retry_after=1),
            err.TransportError("t", retryable=True, retry_after=2),
        ),
        (err.RunError("r", code="A"), err.RunError("r", code="B")),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_differing_in_type_or_any_field_are_not_equal(
    one: err.InterludeError, other: err.InterludeError
) -> None:
    """A state whose error changed (another status, another code, another interrupt)
    is a different state."""
    assert one != other and other != one and (one == other) is False


def test_an_error_never_equals_a_non_interlude_exception_or_text() -> None:
    error = err.UsageError("pass a str")
    assert error != ValueError("pass a str") and error != "pass a str"


def test_repr_names_the_type_and_message() -> None:
    assert repr(err.StaleBatchError("stale")) == "StaleBatchError('stale')"
    assert repr(err.RunError("failed", code="E1")) == "RunError('failed', code='E1')"
    assert repr(err.RunError("failed")) == "RunError('failed')"


# -- TransportError.from_status -----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (404, False),
        (428, False),
        (429, True),
        (430, False),
        (499, False),
        (500, True),
        (501, True),
        (503, True),
        (598, True),
        (599, True),
        (600, False),
        (302, False),
    ],
)
def test_R_J4_from_status_is_retryable_at_429_and_5xx_only(status: int, retryable: bool) -> None:
    """R-J4: 5xx and 429 are retried, other 4xx not, nor a status past 599."""
    error = err.TransportError.from_status(status, "body text")
    assert error.retryable is retryable
    assert error.status == status and error.body == "body text"


REDIRECT = " (a redirect: interlude does not follow redirects; use the new URL)"
CREDENTIALS = " (check the credentials the transport sends: its headers)"
URL = " (check the endpoint URL: it takes POST requests of RunAgentInput)"
UNDEFINED = " (a status HTTP does not define: not retried)"


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (300, REDIRECT),
        (301, REDIRECT),
        (399, REDIRECT),
        (400, ""),
        (401, CREDENTIALS),
        (402, ""),
        (403, CREDENTIALS),
        (404, URL),
        (405, URL),
        (406, ""),
        (429, ""),
        (500, ""),
        (599, ""),
        (600, UNDEFINED),
        (999, UNDEFINED),
    ],
)
def test_from_status_hints_what_the_application_can_fix(status: int, hint: str) -> None:
    """A redirect, credentials, a wrong URL and a status HTTP does not define each say
    what to do; a status the endpoint must fix says nothing more."""
    error = err.TransportError.from_status(status, "")
    assert str(error) == f"the endpoint answered HTTP {status}{hint}"


def test_from_status_names_the_endpoint_and_the_wait_it_asked_for() -> None:
    error = err.TransportError.from_status(
        503, "busy", retry_after=2.5, endpoint="https://agent.example/run"
    )
    assert str(error) == (
        "the endpoint https://agent.example/run answered HTTP 503; "
        "it asked to wait 2.5 s before retrying"
    )
    assert error.retry_after == 2.5


@pytest.mark.parametrize(
    ("retry_after", "shown"),
    [
        (0, None),
        (0.0, None),
        (1, "1"),
        (999_999, "999999"),
        (999_999.5, "1000000"),  # :g rounds it to 1e+06
        (2.5, "2.5"),
        (1_000_000, "1000000"),
        (1_000_000.4, "1000000"),
        (2_147_483_647, "2147483647"),
    ],
)
def test_from_status_writes_a_long_wait_in_whole_seconds(
    retry_after: float, shown: str | None
) -> None:
    """A wait is written as a person reads it: "1000000 s", never "1e+06 s". A wait of
    0 asks for none, and the message says nothing of it."""
    error = err.TransportError.from_status(429, "", retry_after=retry_after)
    wait = "" if shown is None else f"; it asked to wait {shown} s before retrying"
    assert str(error) == f"the endpoint answered HTTP 429{wait}"
    assert error.retry_after == retry_after


@pytest.mark.parametrize(
    ("retry_after", "named"),
    [
        ("5", "a str '5'"),
        (True, "a bool True"),
        (float("nan"), "a float nan"),
        (b"5", "a bytes b'5'"),
    ],
)
def test_a_retry_after_that_is_not_seconds_is_a_usage_error(
    retry_after: object, named: str
) -> None:
    """The reducer compares the wait with numbers: text there (an unparsed header), a
    bool or a NaN is refused where the driver made it, naming the fix."""
    for make in (
        lambda: err.TransportError("t", retryable=True, retry_after=retry_after),  # type: ignore[arg-type]
        lambda: err.TransportError.from_status(503, "", retry_after=retry_after),  # type: ignore[arg-type]
    ):
        with pytest.raises(err.UsageError) as caught:
            make()
        assert str(caught.value) == (
            f"TransportError: retry_after must be seconds (a number) or None, not {named}: "
            "parse the Retry-After header first (interlude.adapters.httpx.retry_after does)"
        )


@pytest.mark.parametrize("retry_after", [None, 0, 3, 2.5])
def test_a_retry_after_in_seconds_or_none_is_kept(retry_after: float | None) -> None:
    error = err.TransportError("t", retryable=True, retry_after=retry_after)
    assert error.retry_after == retry_after and type(error.retry_after) is type(retry_after)


def test_a_protocol_error_is_not_retryable_unless_said() -> None:
    """R-A6: a malformed outcome (and every protocol error raised without ``retryable``)
    is not retried."""
    assert err.ProtocolError("bad frame").retryable is False
    assert err.ProtocolError("bad frame").body is None


# -- InvalidResumeError ---------------------------------------------------------------------


def test_for_interrupt_gives_the_problems_of_that_interrupt_only() -> None:
    """R-B3: a form shows each problem next to its question; one without problems gets
    none, and a problem of no interrupt is shown by none of them."""
    error = err.InvalidResumeError(
        [
            "the batch has 3 interrupts",
            err.ResumeProblem("'q' needs an answer", interrupt_id="q"),
            err.ResumeProblem("payload refused", interrupt_id="p", entry=0),
            err.ResumeProblem("unknown key 'x'", interrupt_id="p", entry=0),
        ]
    )
    assert error.for_interrupt("p") == ("payload refused", "unknown key 'x'")
    assert error.for_interrupt("q") == ("'q' needs an answer",)
    assert error.for_interrupt("r") == ()
    assert error.problems == (
        "the batch has 3 interrupts",
        "'q' needs an answer",
        "payload refused",
        "unknown key 'x'",
    )
    assert str(error) == (
        "the resume entries were rejected, nothing was sent: the batch has 3 interrupts; "
        "'q' needs an answer; payload refused; unknown key 'x'"
    )


def test_batch_expired_keeps_its_interrupt_ids_as_a_tuple() -> None:
    ids = ["p", "q"]
    error = err.BatchExpiredError("expired", ids)
    ids.append("r")
    assert error.interrupt_ids == ("p", "q") and err.BatchExpiredError("e").interrupt_ids == ()


# -- message helpers -------------------------------------------------------------------------


def test_a_message_of_2000_characters_is_kept_whole_and_one_more_is_clipped() -> None:
    """docs/failures.md: a message longer than 2,000 characters keeps its start (two
    thirds) and its end (one third) and names how many characters it left out."""
    assert err.UsageError("m" * 2000).message == "m" * 2000
    text = "h" * 1333 + "LO" + "t" * 666
    assert err.UsageError(text).message == (
        "h" * 1333 + " ... [2 characters left out] ... " + "t" * 666
    )
    assert err.clip("h" * 1333 + "x" * 8001 + "t" * 666) == (
        "h" * 1333 + " ... [8,001 characters left out] ... " + "t" * 666
    )


@pytest.mark.parametrize(
    ("text", "limit", "clipped"),
    [
        ("abcdef", 6, "abcdef"),
        ("abcdef", 5, "abc ... [2 characters left out] ... f"),
        ("abcdef", 3, "ab ... [3 characters left out] ... f"),
        ("abcdef", 2, "a ... [5 characters left out] ... "),
        ("abcdef", 1, " ... [6 characters left out] ... "),
    ],
)
def test_clip_keeps_two_thirds_of_the_limit_at_the_start_and_one_third_at_the_end(
    text: str, limit: int, clipped: str
) -> None:
    """A limit too small for an end keeps none of it (not the whole text)."""
    assert err.clip(text, limit) == clipped


@pytest.mark.parametrize(
    ("names", "shown", "text"),
    [
        ([], 3, ""),
        (["a"], 3, "a"),
        (["a", "b", "c"], 3, "a, b, c"),
        (["a", "b", "c", "d"], 3, "a, b, c and 1 more"),
        ([1, 2, 3, 4, 5, 6], 3, "1, 2, 3 and 3 more"),
        (["a", "b"], 1, "a and 1 more"),
    ],
)
def test_listed_names_a_few_and_counts_the_rest(names: list[object], shown: int, text: str) -> None:
    assert err.listed(names, shown) == text
    if shown == 3:
        assert err.listed(names) == text


class _Repr:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("x" * 58, "'" + "x" * 58 + "'"),  # a repr of 60 characters: whole
        ("x" * 59, "'" + "x" * 27 + "..." + "x" * 28 + "'"),
        (_Repr("R" * 60), "R" * 60),
        (_Repr("R" * 61), "R" * 28 + "..." + "R" * 29),
        (list(range(6)), "[0, 1, 2, 3, 4, 5]"),
        (list(range(7)), "[0, 1, 2, 3, 4, 5, ...]"),
        (tuple(range(7)), "(0, 1, 2, 3, 4, 5, ...)"),
        (set(range(7)), "{0, 1, 2, 3, 4, 5, ...}"),
        (dict.fromkeys(range(7), 0), "{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, ...}"),
        ([[[1]]], "[[[1]]]"),
        ([[[[1]]]], "[[[[...]]]]"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_quote_shows_60_characters_6_items_and_3_levels(value: object, shown: str) -> None:
    """A value quoted in a message is shown briefly: a long text or repr by its start
    and end, a long container by its first six items, a deep one to three levels."""
    assert err.quote(value) == shown


@pytest.mark.parametrize(
    ("word", "with_article"),
    [
        ("assistant", "an assistant"),
        ("image", "an image"),
        ("object", "an object"),
        ("Event", "an Event"),
        ("user", "a user"),
        ("url", "a url"),
        ("tool", "a tool"),
    ],
)
def test_article(word: str, with_article: str) -> None:
    assert err.article(word) == with_article


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (1, "an int"),
        ([], "a list"),
        (b"", "a bytes"),
        (object(), "an object"),
        (None, "a NoneType"),
    ],
)
def test_a_type(value: object, named: str) -> None:
    assert err.a_type(value) == named


def test_describe_exception_gives_type_and_message() -> None:
    class BadStr(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert err.describe_exception(ValueError("boom")) == "ValueError: boom"
    assert err.describe_exception(ValueError()) == "ValueError"
    assert err.describe_exception(BadStr()) == "BadStr (its message could not be read)"
    long = err.describe_exception(ValueError("z" * 3000))
    assert long.startswith("ValueError: zzz") and "[1,001 characters left out]" in long
