"""Any run outcome the endpoint sends, then any answers the app gives, end cleanly.

Hypothesis draws the ``outcome`` of RUN_FINISHED (interrupts with ids, reasons,
tool call ids, schemas, expiries and metadata of the right and the wrong kind;
success, cancelled, unknown and junk outcomes), then the ``resume`` entries an
app might pass (the batch's ids and others, every status, payloads, junk).
Whatever it draws:

- the run ends with a published batch, or without one and no error, or with a
  non-retryable ``ProtocolError`` and the checkpoint as before (R-A, R-J5);
- a rejected ``resume`` raises an ``InterludeError`` and changes nothing (R-B2);
- an accepted one claims the batch and sends exactly one answer per interrupt,
  with no batch id on the wire (R-B5, R-C2); its run then settles.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from stream_events import small_json

from interlude.adapters.agent_scenarios import rfc3339
from interlude.adapters.fake import FakeDriver, ScriptedAgent, reply
from interlude.adapters.fake.script import Request, finished, started, tool_call
from interlude.core.errors import InterludeError, ProtocolError

IDS = st.sampled_from(["a", "b", "c", "d", ""])
junk = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.just([]), st.just({}))
MISSING = object()


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any], odds: int) -> Any:
    """``good`` ``odds`` times out of ``odds + 1``, else ``bad`` (one_of would weigh the
    two alike: it merges repeated strategies)."""
    return st.integers(0, odds).flatmap(lambda n: good if n else bad)


def field(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value: mostly one of ``values``, else junk or left out (one draw in
    twenty), so that many outcomes hold an invalid field and many are fully valid."""
    return mostly(values, junk | st.just(MISSING), 19)


def expiries(now: float) -> st.SearchStrategy[str]:
    """Mostly valid instants (in an hour, a minute, or already past), else broken ones."""
    valid = st.sampled_from([3600.0, 60.0, -60.0]).map(lambda d: rfc3339(now + d))
    return mostly(valid, st.sampled_from(["tomorrow", "2027-01-01T00:00:00"]), 3)


def interrupts(now: float) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "id": field(IDS),
            "reason": field(st.sampled_from(["input_required", "tool_call", "x"])),
            "message": field(st.text(max_size=4)),
            "toolCallId": field(st.sampled_from(["c1", "nope"])),
            "responseSchema": field(st.sampled_from([{"type": "object"}, {"type": 3}])),
            "expiresAt": field(expiries(now)),
            "metadata": field(st.just({"k": 1})),
        }
    ).map(lambda d: {k: v for k, v in d.items() if v is not MISSING})


def outcomes(now: float) -> st.SearchStrategy[Any]:
    interrupt = st.builds(
        lambda items: {"type": "interrupt", "interrupts": items},
        st.lists(interrupts(now), min_size=1, max_size=3) | st.just([]),
    )
    others = st.one_of(
        st.builds(lambda r: {"type": "success", "result": r}, small_json),
        st.sampled_from([{"type": "cancelled"}, {"type": "later"}, {"type": 7}, None, MISSING]),
        junk,
    )
    return mostly(interrupt, others, 3)


def entry(interrupt_id: Any) -> st.SearchStrategy[Any]:
    """An answer to ``interrupt_id``: mostly well formed, else with a field wrong or
    missing, or not an entry at all."""
    good = st.builds(
        lambda status, payload: {"interrupt_id": interrupt_id, "status": status, **payload},
        st.sampled_from(["resolved", "cancelled"]),
        st.just({}) | st.builds(lambda p: {"payload": p}, small_json),
    )
    bad = st.one_of(
        st.fixed_dictionaries(
            {
                "interrupt_id": field(IDS | st.just("zzz")),
                "status": field(st.sampled_from(["resolved", "cancelled", "maybe"])),
                "payload": field(small_json),
            }
        ).map(lambda d: {k: v for k, v in d.items() if v is not MISSING}),
        junk,
    )
    return mostly(good, bad, 4)


def answers_for(ids: list[str]) -> st.SearchStrategy[list[Any]]:
    """One answer per interrupt, in any order, sometimes one too many or too few."""
    one_each = st.tuples(*(entry(i) for i in ids)).map(list)
    return st.builds(
        lambda answers, extra, drop: (answers + extra)[drop:],
        st.permutations(ids).flatmap(lambda order: st.tuples(*(entry(i) for i in order))).map(list)
        | one_each,
        mostly(st.just([]), st.lists(entry("zzz") | entry(ids[0]), max_size=1), 4),
        mostly(st.just(0), st.just(1), 6),
    )


def well_formed(answers: list[Any], ids: list[str]) -> bool:
    """One entry per interrupt, each resolved (payload optional) or cancelled (none),
    with no other key: an answer set resume() must accept while nothing has expired."""
    if not all(isinstance(a, dict) for a in answers):
        return False
    given = [a.get("interrupt_id") for a in answers]
    if not all(type(g) is str for g in given) or sorted(given) != sorted(ids):
        return False
    for a in answers:
        if set(a) - {"interrupt_id", "status", "payload"}:
            return False
        if a.get("status") == "cancelled" and "payload" in a:
            return False
        if a.get("status") not in ("resolved", "cancelled"):
            return False
    return True


@settings(max_examples=400)
@given(data=st.data(), with_call=st.booleans())
def test_any_outcome_then_any_answers_end_cleanly(data: st.DataObject, with_call: bool) -> None:
    drawn: dict[str, Any] = {}

    def first(req: Request) -> Any:
        event = finished(req)
        if drawn["outcome"] is not MISSING:
            event["outcome"] = drawn["outcome"]
        before = [tool_call("c1", "remote", {"q": 1})] if with_call else []
        return reply(started(req), *before, event)

    # The first request gets the drawn outcome; later ones (the resume) a plain finish.
    agent = ScriptedAgent(lambda req: reply(started(req), finished(req))).then(first)
    driver = FakeDriver(agent)
    drawn["outcome"] = data.draw(outcomes(driver.now()), label="outcome")
    chat = driver.chat()
    chat.send("Go", message_id="u0")
    before = chat.core_state.checkpoint
    driver.run_until_idle()

    assert not chat.is_loading
    batch = chat.pending_interrupts
    if chat.error is not None:
        assert isinstance(chat.error, ProtocolError), chat.error
        assert chat.error.retryable is False
        assert chat.core_state.checkpoint == before and batch is None
        return
    if batch is None:
        return
    assert batch.interrupts and len({it.id for it in batch.interrupts}) == len(batch.interrupts)

    ids = [it.id for it in batch.interrupts]
    answers = data.draw(answers_for(ids), label="entries")
    state = chat.core_state
    try:
        chat.resume(batch.id, answers)
    except InterludeError as exc:
        assert chat.core_state is state  # rejected: nothing changed
        # A right answer set is never refused (R-B1, R-B2), or this test could not fail.
        assert not well_formed(answers, ids) or batch.expired_ids(driver.now()), exc
        return
    assert chat.is_resuming and chat.core_state.claim is not None
    driver.run_until_idle()
    request = driver.requests[-1]
    assert batch.id not in request.body
    sent = request.resume
    assert sent is not None
    assert sorted(e["interruptId"] for e in sent) == sorted(it.id for it in batch.interrupts)
    assert not chat.is_loading and not chat.is_resuming
