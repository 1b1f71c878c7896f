"""Options: every field checked when built, and ``configure`` keeping what the resource owns;
inputs a driver builds wrongly are named at once.

A wrong value is refused where it is written, with what the field takes, not
later from deep inside a send (a typo in ``expiry`` used to behave as
``"block"``; a set in ``forwarded_props`` raised out of the driver).
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import pytest

import interlude.core
from interlude.adapters.fake import FakeDriver, ScriptedAgent, finished, reply, started, tool_call
from interlude.adapters.fake.script import Request
from interlude.core import AttemptFailed, Configure, Send, SendStarting, initial_state, step
from interlude.core.commands import StartAttempt, StartTimer
from interlude.core.errors import ProtocolError, RunError, TransportError, UsageError
from interlude.core.json import FrozenDict
from interlude.core.options import MAX_WAIT, Options, RetryPolicy
from interlude.core.wire.run_input import Context, Tool

BAD_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "expiry typo": ({"expiry": "cancel-expired"}, "Options.expiry is 'block' or 'cancel_expired'"),
    "kind": ({"kind": "structured"}, "Options.kind is 'chat' or 'completion'"),
    "tools not a list": ({"tools": Tool(name="t", description="d")}, "takes a list of Tool"),
    "tools of dicts": ({"tools": [{"name": "t"}]}, "item 0 is a dict, not a Tool"),
    "tool parameters": (
        {"tools": [Tool(name="t", description="d", parameters={"enum": {1, 2}})]},
        r"item 0 \('t'\) parameters takes a JSON value",
    ),
    "tool twice": (
        {"tools": [Tool(name="t", description="a"), Tool(name="t", description="b")]},
        "declares 't' more than once",
    ),
    "tools as a set": (
        {"tools": {Tool(name="t", description="d")}},
        "takes a list of Tool, not set",  # its order, and the request's bytes, would vary
    ),
    "local_tools a string": ({"local_tools": "get_time"}, "takes a list or set of tool names"),
    "context of strings": ({"context": ["hello"]}, "context item 0 must be a Context"),
    "forwarded_props with a set": ({"forwarded_props": {"tags": {"a"}}}, "/tags: a set"),
    "forwarded_props with NaN": ({"forwarded_props": {"x": float("nan")}}, "nan has no JSON"),
    "retry": ({"retry": {"max_attempts": 1}}, "takes a RetryPolicy"),
    "id_prefix": ({"id_prefix": ""}, "id_prefix takes a non-empty string or None"),
    "max_tool_rounds text": ({"max_tool_rounds": "5"}, "takes an integer >= 0, not '5'"),
    "max_tool_rounds negative": ({"max_tool_rounds": -1}, "takes an integer >= 0"),
}

BAD_RETRY: dict[str, tuple[dict[str, Any], str]] = {
    "max_attempts text": ({"max_attempts": "3"}, "max_attempts takes an integer >= 1"),
    "max_attempts zero": ({"max_attempts": 0}, "max_attempts takes an integer >= 1"),
    "max_attempts bool": ({"max_attempts": True}, "max_attempts takes an integer"),
    "base_delay negative": ({"base_delay": -1}, "base_delay takes a finite number >= 0"),
    "jitter above 1": ({"jitter": 1.5}, r"jitter takes a number in \[0, 1\]"),
    "multiplier below 1": ({"multiplier": 0.5}, "multiplier takes a finite number >= 1"),
    "jitter_seed float": ({"jitter_seed": 1.5}, "jitter_seed takes an integer or None"),
    "max_retry_after NaN": ({"max_retry_after": float("nan")}, "max_retry_after takes a number"),
    "base_delay infinite": ({"base_delay": math.inf}, "base_delay takes a finite number >= 0"),
    "multiplier infinite": ({"multiplier": math.inf}, "multiplier takes a finite number >= 1"),
    "max_delay infinite": ({"max_delay": math.inf}, "max_delay takes a finite number >= 0"),
}


@pytest.mark.parametrize("case", BAD_OPTIONS)
def test_a_wrong_option_is_refused_when_the_options_are_built(case: str) -> None:
    fields, says = BAD_OPTIONS[case]
    with pytest.raises(UsageError, match=says):
        Options(**fields)


@pytest.mark.parametrize("case", BAD_RETRY)
def test_a_wrong_retry_setting_is_refused_when_the_policy_is_built(case: str) -> None:
    fields, says = BAD_RETRY[case]
    with pytest.raises(UsageError, match=says):
        RetryPolicy(**fields)


def test_options_store_tuples_and_frozen_json_not_the_callers_lists() -> None:
    params = {"type": "object", "properties": {}}
    props = {"tenant": ["a"]}
    o = Options(
        tools=[Tool(name="t", description="d", parameters=params)],
        local_tools=["t"],
        context=[Context(description="d", value="v")],
        forwarded_props=props,
    )
    assert type(o.tools) is tuple and type(o.context) is tuple
    assert o.local_tools == frozenset({"t"})
    assert isinstance(o.tools[0].parameters, FrozenDict) and o.tools[0].parameters == params
    assert o.forwarded_props == {"tenant": ("a",)}
    props["tenant"].append("b")  # the caller's value is not the options'
    assert o.forwarded_props == {"tenant": ("a",)}
    assert Options(tools=o.tools).tools == o.tools  # frozen values go through unchanged


def _what_time(req: Request) -> Any:
    return reply(started(req), *tool_call("c1", "get_time", {}), finished(req))


def _done(req: Request) -> Any:
    return reply(started(req), finished(req))


def test_configure_keeps_the_resources_local_tools() -> None:
    """Options that leave a local tool out still declare and run it: its function is here."""

    def get_time(arguments: Any) -> str:
        """The time here."""
        return "12:00"

    driver = FakeDriver(ScriptedAgent(_done).then(_what_time))
    chat = driver.chat(local_tools={"get_time": get_time})
    chat.configure(Options(forwarded_props={"tenant": "other"}))
    assert chat.options.local_tools == {"get_time"}
    chat.send("What time is it?")
    driver.run_until_idle()
    first = driver.requests[0].json
    assert [t["name"] for t in first["tools"]] == ["get_time"]
    assert first["tools"][0]["description"] == "The time here."
    assert first["forwardedProps"] == {"tenant": "other"}
    assert [m.role for m in chat.messages] == ["user", "assistant", "tool"]
    assert chat.messages[2].content == "12:00" and len(driver.requests) == 2


def test_configure_on_a_completion_keeps_its_kind() -> None:
    """``Options()`` defaults to kind 'chat'; a completion's configure keeps 'completion'."""
    driver = FakeDriver(ScriptedAgent(_done))
    page = driver.completion()
    page.configure(Options(forwarded_props={"tenant": "x"}))
    assert page.kind == "completion" and page.options.kind == "completion"
    page.set_input("Write a haiku")
    driver.run_until_idle()
    assert page.error is None and driver.requests[0].json["forwardedProps"] == {"tenant": "x"}


def test_the_core_refuses_a_kind_change_and_says_how_to_keep_it() -> None:
    s = initial_state(Options(kind="completion"))
    with pytest.raises(UsageError, match=r"pass Options\(kind='completion', \.\.\.\)"):
        step(s, Configure(Options()), 0.0)


@pytest.mark.parametrize("error", [None, ValueError("x"), RunError("x")], ids=repr)
def test_an_attempt_failed_built_with_another_error_is_a_usage_error(error: Any) -> None:
    """A driver bug is named at once; the state is left as it was."""
    t = step(initial_state(Options(), thread_id="t1"), Send("hi"), 0.0)
    (command,) = t.commands
    assert isinstance(command, StartAttempt)
    s = step(t.state, SendStarting(command.attempt), 0.0).state
    with pytest.raises(UsageError, match="must be a TransportError or ProtocolError"):
        step(s, AttemptFailed(command.attempt, error), 0.0)
    retried = step(s, AttemptFailed(command.attempt, TransportError("x", retryable=True)), 0.0)
    assert retried.state.run is not None and retried.state.run.attempt is None  # a back-off


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "now",
    ["later", None, float("nan"), float("inf"), True, _deep_list(10_000)],
    ids=["str", "none", "nan", "inf", "bool", "deep-list"],
)
def test_a_clock_reading_that_is_not_finite_seconds_is_a_usage_error(now: Any) -> None:
    """Refused at the step, not later as a TypeError or a timer due at NaN (nor as a
    RecursionError while quoting a deeply nested value)."""
    s = initial_state(Options(), thread_id="t1")
    with pytest.raises(UsageError, match="now must be finite epoch seconds"):
        step(s, Send("hi"), now)
    assert step(s, Send("hi"), 0).state.run is not None  # an int is fine


@pytest.mark.parametrize(
    ("policy", "failed_attempt"),
    [
        (RetryPolicy(max_attempts=3000), 2000),  # 2.0 ** 1999 is past any float
        (RetryPolicy(multiplier=1e200), 3),
    ],
)
def test_a_delay_that_grows_past_any_float_is_capped_not_an_overflow(
    policy: RetryPolicy, failed_attempt: int
) -> None:
    """A legal policy must never crash the reducer: a float power past 1e308 raises
    OverflowError in Python, where the delay is simply max_delay."""
    wait = policy.delay(failed_attempt, 1)
    assert policy.max_delay * (1 - policy.jitter) <= wait <= policy.max_delay * (1 + policy.jitter)


def test_a_delay_is_never_longer_than_max_wait_nor_made_of_an_overflow() -> None:
    """A timer's due time must stay finite: max_delay near the float limit, scaled up by
    the jitter, used to give inf, which no driver can wait for."""
    huge = RetryPolicy(base_delay=1e308, max_delay=1e308, jitter=1.0)
    assert all(huge.delay(1, draw) == MAX_WAIT for draw in range(50))
    # 0 * an overflowing growth is 0: a zero base delay retries at once, every time.
    assert RetryPolicy(base_delay=0.0, multiplier=1e308, max_attempts=9).delay(5, 1) == 0.0
    # A tiny base times a power past the float range is still the formula's value.
    tiny = RetryPolicy(base_delay=1e-300, multiplier=10.0, max_delay=1e10, jitter=0)
    assert tiny.delay(310, 0) == pytest.approx(1e9)


def test_an_endless_retry_after_under_an_endless_limit_waits_max_wait() -> None:
    """Retry-After: inf (a custom transport may say so) with max_retry_after=inf is
    honoured as the longest wait, not a timer due at infinity."""
    policy = RetryPolicy(max_retry_after=math.inf, jitter=0)
    s = initial_state(Options(retry=policy))
    t = step(s, Send("hi"), 1000.0)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), 1000.0).state
    failed = TransportError("busy", retryable=True, status=503, retry_after=math.inf)
    t = step(s, AttemptFailed(start.attempt, failed), 1000.0)
    (timer,) = [c for c in t.commands if isinstance(c, StartTimer)]
    assert timer.due == 1000.0 + MAX_WAIT


def test_a_failure_given_up_keeps_every_field_but_says_why_in_its_message() -> None:
    """R-F1: the budget spent, the error recorded is the failure's own, body included."""
    s = initial_state(Options(retry=RetryPolicy(max_attempts=1)))
    t = step(s, Send("hi"), 1000.0)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), 1000.0).state
    failed = ProtocolError("odd body", retryable=True, body="<html>")
    error = step(s, AttemptFailed(start.attempt, failed), 1000.0).state.error
    assert error == ProtocolError(
        "odd body (gave up after 1 attempt(s), RetryPolicy.max_attempts)",
        retryable=True,
        body="<html>",
    )


def test_a_failure_given_up_keeps_its_own_class() -> None:
    """A custom transport's TransportError subclass stays itself when recorded."""

    class QuotaError(TransportError):
        pass

    s = initial_state(Options(retry=RetryPolicy(max_attempts=1)))
    t = step(s, Send("hi"), 1000.0)
    (start,) = [c for c in t.commands if isinstance(c, StartAttempt)]
    s = step(t.state, SendStarting(start.attempt), 1000.0).state
    failed = QuotaError("over quota", retryable=True, status=429, retry_after=5.0)
    error = step(s, AttemptFailed(start.attempt, failed), 1000.0).state.error
    assert type(error) is QuotaError and str(error) == error.message
    assert error == QuotaError(
        "over quota (gave up after 1 attempt(s), RetryPolicy.max_attempts)",
        retryable=True,
        status=429,
        retry_after=5.0,
    )


# -- what the fields take: bounds are inclusive, types strict, defaults as documented --------

ACCEPTED_RETRY: dict[str, dict[str, Any]] = {
    "one attempt": {"max_attempts": 1},
    "no base delay": {"base_delay": 0},
    "no growth": {"multiplier": 1},
    "no delay cap": {"max_delay": 0.0},
    "no jitter": {"jitter": 0},
    "full jitter": {"jitter": 1.0},
    "a negative seed": {"jitter_seed": -5},
    "never honour Retry-After": {"max_retry_after": 0},
    "any Retry-After": {"max_retry_after": math.inf},
}


@pytest.mark.parametrize("case", ACCEPTED_RETRY)
def test_a_retry_setting_at_its_bound_is_accepted(case: str) -> None:
    """The documented ranges are closed: ``jitter`` in [0, 1], ``max_attempts`` >= 1, ..."""
    fields = ACCEPTED_RETRY[case]
    policy = RetryPolicy(**fields)
    assert all(getattr(policy, name) == value for name, value in fields.items())


WRONG_RETRY: dict[str, tuple[dict[str, Any], str]] = {
    "base_delay text": ({"base_delay": "0.5"}, "base_delay takes a finite number >= 0, not '0.5'"),
    "max_delay bool": ({"max_delay": True}, "max_delay takes a finite number >= 0, not True"),
    "jitter below 0": ({"jitter": -0.1}, r"jitter takes a number in \[0, 1\], not -0.1"),
    "jitter_seed bool": ({"jitter_seed": True}, "jitter_seed takes an integer or None, not True"),
    "jitter_seed text": ({"jitter_seed": "7"}, "jitter_seed takes an integer or None, not '7'"),
    "max_attempts float": ({"max_attempts": 2.0}, "max_attempts takes an integer >= 1, not 2.0"),
    "max_retry_after negative": (
        {"max_retry_after": -1},
        "max_retry_after takes a number >= 0, not -1",
    ),
}


@pytest.mark.parametrize("case", WRONG_RETRY)
def test_a_retry_setting_of_the_wrong_type_is_refused_with_the_field_and_value(case: str) -> None:
    """A bool is not a number here, nor a float an integer: each says what it takes."""
    fields, says = WRONG_RETRY[case]
    with pytest.raises(UsageError, match=f"^RetryPolicy.{says}$"):
        RetryPolicy(**fields)


WRONG_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "max_tool_rounds bool": ({"max_tool_rounds": True}, "max_tool_rounds takes an integer >= 0"),
    "id_prefix number": ({"id_prefix": 7}, "id_prefix takes a non-empty string or None, not 7"),
    "kind None": ({"kind": None}, "kind is 'chat' or 'completion', not None"),
    "retry None": ({"retry": None}, "retry takes a RetryPolicy, not NoneType"),
    "local_tools empty name": ({"local_tools": [""]}, r"local_tools takes tool names \(non-empty"),
    "local_tools number": ({"local_tools": ["a", 1]}, r"local_tools takes tool names \(non-empty"),
    "context text": ({"context": "note"}, "context takes a list of Context, not str"),
    "tools a Tool": (
        {"tools": Tool(name="t", description="d")},
        "tools takes a list of Tool, not Tool$",
    ),
    "tools of text": (
        {"tools": ["t"]},
        "tools item 0 is a str, not a Tool; declare tools with interlude.core.wire.Tool",
    ),
    "tool parameters not JSON": (
        {"tools": [Tool(name="t", description="d", parameters={"x": float("inf")})]},
        r"tools item 0 \('t'\) parameters takes a JSON value: not a JSON value at /x",
    ),
    "local_tools text": (
        {"local_tools": "t"},
        "local_tools takes a list or set of tool names, not str$",
    ),
    "forwarded_props not JSON": (
        {"forwarded_props": {"a": b"x"}},
        "forwarded_props takes a JSON value: not a JSON value at /a",
    ),
    "context description number": (
        {"context": [Context(description=1, value="v")]},  # type: ignore[arg-type]
        r"context item 0 must be a Context\(description=..., value=...\) of two strings",
    ),
    "context value number": (
        {"context": [Context(description="d", value=1)]},  # type: ignore[arg-type]
        r"context item 0 must be a Context\(description=..., value=...\) of two strings",
    ),
    "tool without a name": (
        {"tools": [Tool(name="", description="d")]},
        "tools item 0: a Tool's name and description are text",
    ),
    "tool name a number": (
        {"tools": [Tool(name=5, description="d")]},  # type: ignore[arg-type]
        "tools item 0: a Tool's name and description are text",
    ),
    "tool description None": (
        {"tools": [Tool(name="t", description=None)]},  # type: ignore[arg-type]
        "tools item 0: a Tool's name and description are text",
    ),
    "tool metadata a list": (
        {"tools": [Tool(name="t", description="d", metadata=[1])]},  # type: ignore[arg-type]
        r"tools item 0 \('t'\) metadata must be an object or None",
    ),
    "tool metadata not JSON": (
        {"tools": [Tool(name="t", description="d", metadata={"x": {1}})]},  # type: ignore[dict-item]
        r"tools item 0 \('t'\) metadata takes a JSON value",
    ),
    "tools twice, sorted": (
        {"tools": [Tool(name=n, description="d") for n in "babca"]},
        "tools declares 'a', 'b' more than once",
    ),
}


@pytest.mark.parametrize("case", WRONG_OPTIONS)
def test_an_option_of_the_wrong_type_is_refused_with_the_field_and_value(case: str) -> None:
    fields, says = WRONG_OPTIONS[case]
    with pytest.raises(UsageError, match=f"^Options.{says}"):
        Options(**fields)


def test_options_at_their_bounds_and_as_sets_or_tuples_are_accepted() -> None:
    """``max_tool_rounds=0`` runs no local tool; names may be a set; tools a tuple."""
    tool = Tool(name="t", description="", metadata={"k": 1})  # an empty description is text
    o = Options(max_tool_rounds=0, local_tools={"t"}, tools=(tool,), id_prefix="p")
    assert (o.max_tool_rounds, o.local_tools, o.id_prefix) == (0, frozenset({"t"}), "p")
    assert o.tools == (tool,) and o.tools[0].metadata == {"k": 1}
    assert Options(tools=[Tool(name="t", description="d")]).tools[0].metadata is None
    assert Options(kind="completion", expiry="cancel_expired").expiry == "cancel_expired"


def test_the_defaults_are_the_documented_ones() -> None:
    """docs/reference.md and docs/failures.md give these defaults."""
    assert RetryPolicy() == RetryPolicy(
        max_attempts=3,
        base_delay=0.5,
        multiplier=2.0,
        max_delay=10.0,
        jitter=0.2,
        jitter_seed=None,
        max_retry_after=60.0,
    )
    o = Options()
    assert (o.kind, o.tools, o.local_tools, o.context, o.forwarded_props) == (
        "chat",
        (),
        frozenset(),
        (),
        None,
    )
    assert (o.retry, o.expiry, o.id_prefix, o.max_tool_rounds) == (
        RetryPolicy(),
        "block",
        None,
        25,
    )
    assert MAX_WAIT == 2.0**31


@pytest.mark.parametrize("make", [lambda: Options("chat"), lambda: RetryPolicy(3)])
def test_options_and_retry_policies_take_keywords_only(make: Any) -> None:
    """A positional value cannot land in the wrong field (the reference's ``(*, ...)``)."""
    with pytest.raises(TypeError):
        make()


# -- the delay --------------------------------------------------------------------------------


def test_without_jitter_the_delay_grows_by_the_multiplier_up_to_max_delay() -> None:
    """docs/failures.md: ``min(max_delay, base_delay * multiplier**(n-1))``."""
    policy = RetryPolicy(base_delay=0.5, multiplier=3.0, max_delay=10.0, jitter=0)
    assert [policy.delay(n, 0) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert RetryPolicy(jitter=0, max_delay=0).delay(1, 0) == 0.0


def test_the_jitter_spreads_delays_over_the_whole_documented_range() -> None:
    """The factor lies in ``[1 - jitter, 1 + jitter]`` and covers it: delays of many
    draws reach both ends, and do not bunch on one side of the base delay."""
    policy = RetryPolicy(base_delay=1.0, jitter=0.5, jitter_seed=11)
    waits = [policy.delay(1, draw) for draw in range(2000)]
    assert all(0.5 <= w <= 1.5 for w in waits)
    assert min(waits) < 0.52 and max(waits) > 1.48
    below = sum(w < 1.0 for w in waits)
    assert 800 < below < 1200
    assert len(set(waits)) > 1900  # each draw its own wait


def test_the_seed_is_the_policys_or_else_derived_from_the_id_prefix() -> None:
    """Without ``jitter_seed`` resources of different prefixes wait differently (they do
    not retry together); with one, the prefix no longer matters."""
    policy = RetryPolicy()
    by_prefix = {p: [policy.delay(1, d, p) for d in range(20)] for p in ("a", "b", "")}
    assert by_prefix["a"] != by_prefix["b"] != by_prefix[""]
    assert [policy.delay(1, d, "a") for d in range(20)] == by_prefix["a"]
    assert [policy.delay(1, d) for d in range(20)] == by_prefix[""]  # no prefix: ""
    seeded = RetryPolicy(jitter_seed=5)
    assert [seeded.delay(1, d, "a") for d in range(20)] == [
        seeded.delay(1, d, "b") for d in range(20)
    ]
    assert [seeded.delay(1, d) for d in range(20)] != [
        RetryPolicy(jitter_seed=6).delay(1, d) for d in range(20)
    ]


# -- the modules' public names -------------------------------------------------------------


_CORE_MODULES = sorted(
    path.stem
    for path in Path(interlude.core.__file__).parent.glob("*.py")
    if not path.stem.startswith("_")
)


def test_every_core_module_lists_its_public_names() -> None:
    """The star-import test below covers a module only if it has ``__all__``."""
    assert len(_CORE_MODULES) > 20
    for module in _CORE_MODULES:
        assert hasattr(importlib.import_module(f"interlude.core.{module}"), "__all__"), module


@pytest.mark.parametrize("module", _CORE_MODULES, ids=str)
def test_a_star_import_gives_every_name_a_module_lists(module: str) -> None:
    """``from interlude.core.options import *`` (and its neighbours) must not fail on a
    name ``__all__`` lists but the module lacks."""
    namespace: dict[str, Any] = {}
    exec(f"from interlude.core.{module} import *", namespace)
    imported = set(namespace) - {"__builtins__"}
    listed = set(importlib.import_module(f"interlude.core.{module}").__all__)
    assert imported == listed and listed


def test_the_jitter_factor_is_splitmix64_of_the_draw_under_seed_zero() -> None:
    """docs/failures.md: the factor is a splitmix64 hash, so another implementation can
    reproduce the waits. Under seed 0 the draw is the generator's state: 1234567 gives
    6457827717110365317, the first output of the reference splitmix64.c for that seed
    (its published test vector), and the factor is ``1 + jitter * (2 * unit - 1)``."""
    policy = RetryPolicy(base_delay=1.0, jitter=0.5, jitter_seed=0)
    gamma = 0x9E3779B97F4A7C15  # the generator's step: the next state gives the next output
    for state, output in [(1234567, 6457827717110365317), (1234567 + gamma, 3203168211198807973)]:
        unit = output / 2**64
        assert policy.delay(1, state) == 1.0 + 0.5 * (2.0 * unit - 1.0)  # to the last bit
