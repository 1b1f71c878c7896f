"""The entries of a ``resume``: what is taken, what is sent, and what each problem says
(R-B1, R-B2, R-B4).

``tests/test_intent_arguments.py`` covers entries of the wrong kind found by the
intent fuzzer; these pin the shapes an application writes: ``ResumeEntry`` objects,
the ``interruptId`` spelling, payloads that are falsy, and a list that is not a list.
"""

from __future__ import annotations

from typing import Any

import pytest
from rule_support import ask, paused_chat

from interlude.core.errors import InvalidResumeError, ResumeProblem
from interlude.core.wire.run_input import ResumeEntry

# -- what is sent ---------------------------------------------------------------------------


def _sent_resume(entries: Any, *iids: str) -> list[dict[str, Any]]:
    """The ``resume`` of the request that answers a batch of ``iids`` with ``entries``."""
    driver, chat, batch = paused_chat(*(ask(i) for i in iids or ("a",)))
    chat.resume(batch.id, entries)
    driver.run_until_idle()
    assert chat.error is None
    resume: list[dict[str, Any]] = driver.requests[-1].json["resume"]
    return resume


def test_resume_entry_objects_are_taken_as_given() -> None:
    """R-B1: an application may answer with ``ResumeEntry`` objects; a payload of 0 or
    None is a given payload, an absent one stays absent, metadata goes out as given."""
    entries = [
        ResumeEntry(interrupt_id="b", status="resolved", payload=None),
        ResumeEntry(interrupt_id="a", status="resolved", payload=0, metadata={"k": [1]}),  # type: ignore[arg-type]
        ResumeEntry(interrupt_id="c", status="cancelled"),
        ResumeEntry(interrupt_id="d", status="resolved"),
    ]
    assert _sent_resume(entries, "a", "b", "c", "d") == [
        {"interruptId": "b", "status": "resolved", "payload": None},
        {"interruptId": "a", "status": "resolved", "payload": 0, "metadata": {"k": [1]}},
        {"interruptId": "c", "status": "cancelled"},
        {"interruptId": "d", "status": "resolved"},
    ]


def test_a_resume_entry_object_is_checked_as_a_mapping_is() -> None:
    """R-B1: a cancelled ``ResumeEntry`` carrying a payload, or metadata that is not an
    object, is refused with the same problems a dict entry gets."""
    _, chat, batch = paused_chat(ask("a"), ask("b"))
    before = chat.core_state
    entries = [
        ResumeEntry(interrupt_id="a", status="cancelled", payload=False),
        ResumeEntry(interrupt_id="b", status="resolved", metadata=[1]),  # type: ignore[arg-type]
    ]
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    assert chat.core_state is before
    assert caught.value.details == (
        ResumeProblem("entry for 'a' is cancelled and must not carry a payload", "a", 0),
        ResumeProblem("entry for 'b' has metadata that is not a JSON object", "b", 1),
    )


@pytest.mark.parametrize("payload", [False, 0, "", None, [], {}])
def test_a_falsy_payload_is_sent_as_given(payload: Any) -> None:
    """R-B1: ``None``, ``False`` and ``0`` are answers, preserved; no key means none."""
    entry = {"interruptId": "a", "status": "resolved", "payload": payload}
    assert _sent_resume([entry]) == [entry]


def test_entries_may_be_a_tuple_and_metadata_none_is_no_metadata() -> None:
    """R-B1: any sequence of entries, in the submitted order; ``metadata: None`` is
    absent (not a problem, not sent)."""
    entries = (
        {"interrupt_id": "b", "status": "cancelled", "metadata": None},
        {"interruptId": "a", "status": "resolved", "payload": {"ok": True}},
    )
    assert _sent_resume(entries, "a", "b") == [
        {"interruptId": "b", "status": "cancelled"},
        {"interruptId": "a", "status": "resolved", "payload": {"ok": True}},
    ]


# -- what is refused ------------------------------------------------------------------------

NOT_A_LIST: dict[str, Any] = {
    "a mapping": {"interrupt_id": "a", "status": "resolved"},
    "a ResumeEntry": ResumeEntry(interrupt_id="a", status="resolved"),
    "a str": "a",
    "bytes": b"a",
    "None": None,
    "a set": {"a"},
    "a generator": ({"interrupt_id": "a", "status": "resolved"} for _ in range(1)),
}


@pytest.mark.parametrize("entries", NOT_A_LIST.values(), ids=NOT_A_LIST)
def test_entries_that_are_not_a_list_are_one_problem_not_a_crash(entries: Any) -> None:
    """R-B2: a single entry given where the list goes (or text, or nothing) is an
    InvalidResumeError saying what is expected; the batch stays pending, unclaimed."""
    _, chat, batch = paused_chat(ask("a"))
    before = chat.core_state
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    assert chat.core_state is before
    assert caught.value.details == (
        ResumeProblem("entries must be a list with one entry per interrupt"),
    )


def test_a_duplicate_is_named_once_and_the_batch_is_still_answered_by_the_first() -> None:
    """R-B1: one entry per interrupt; the second for the same id is the problem, placed
    at its position, and nothing else is said of it (it is not checked again), nor is
    the interrupt it names reported as unanswered."""
    _, chat, batch = paused_chat(ask("a"), ask("b"))
    entries = [
        {"interrupt_id": "a", "status": "resolved"},
        {"interruptId": "a", "status": "cancelled", "payload": 1},
    ]
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    assert caught.value.details == (
        ResumeProblem("entry for 'a' is a duplicate", "a", 1),
        ResumeProblem("no entry for 'b'", "b", None),
    )


SKIPPED: dict[str, tuple[dict[str, Any], ResumeProblem]] = {
    "no string id": (
        {"interrupt_id": 7, "status": "maybe"},
        ResumeProblem("entry 0 has no string interrupt_id", None, 0),
    ),
    "a list as id": (  # unhashable: never looked up among the batch's ids
        {"interrupt_id": ["approve"], "status": "resolved"},
        ResumeProblem("entry 0 has no string interrupt_id", None, 0),
    ),
    "an id of another batch": (
        {"interrupt_id": "zzz", "status": "maybe", "payload": {1}},
        ResumeProblem(
            "entry for 'zzz' names no interrupt of this batch (it holds 'approve')", None, 0
        ),
    ),
    "two ids": (
        {"interrupt_id": "approve", "interruptId": "other", "status": "maybe"},
        ResumeProblem(
            "entry 0 gives interrupt_id 'approve' and interruptId 'other'; give one", "approve", 0
        ),
    ),
}


@pytest.mark.parametrize("case", SKIPPED)
def test_an_entry_that_answers_no_interrupt_of_the_batch_gets_one_problem(case: str) -> None:
    """R-B2: an entry that cannot be placed is named once; its status and payload are
    not checked (they answer nothing), and its interrupt still lacks an answer."""
    entry, problem = SKIPPED[case]
    _, chat, batch = paused_chat(ask("approve"))
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, [entry])
    assert caught.value.details == (problem, ResumeProblem("no entry for 'approve'", "approve"))


def test_an_entry_of_another_batch_is_told_the_ids_this_one_holds_a_few_of_many() -> None:
    """R-B2: the problem names what the entry could have answered, so a caller who mixed
    up two batches sees it at once; a batch of many ids, or of long ones, is named in a
    bounded message (the first three, each clipped, and how many more)."""
    long_id = "x" * 500
    _, chat, batch = paused_chat(ask(long_id), ask("b"), ask("c"), ask("d"), ask("e"))
    entries = [{"interrupt_id": "zz", "status": "resolved"}, {"interrupt_id": "yy"}]
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    clipped = repr("x" * 500)[:28] + "..." + repr("x" * 500)[-29:]  # reprlib: 60 characters
    holds = f"(it holds {clipped}, 'b', 'c' and 2 more)"
    assert caught.value.details[:2] == (
        ResumeProblem(f"entry for 'zz' names no interrupt of this batch {holds}", None, 0),
        ResumeProblem(f"entry for 'yy' names no interrupt of this batch {holds}", None, 1),
    )


def test_interrupt_id_and_interruptid_that_are_equal_strings_are_one_id() -> None:
    """R-B1: the two spellings may both be given when they agree, as equal strings (not
    necessarily the same object: ids read from JSON or built at run time)."""
    given, built = "approve", "".join(["appr", "ove"])
    assert built == given and built is not given
    entry = {"interrupt_id": given, "interruptId": built, "status": "resolved"}
    assert _sent_resume([entry], "approve") == [{"interruptId": "approve", "status": "resolved"}]


def test_problems_name_an_interrupt_without_quoting_the_payload() -> None:
    """R-B2: a payload may hold anything the user typed; problems never show it."""
    _, chat, batch = paused_chat(ask("a"))
    secret = "hunter2"
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, [{"interrupt_id": "a", "status": "done", "payload": secret}])
    assert caught.value.problems == (
        "entry for 'a' has a status other than 'resolved' or 'cancelled'",
    )
    assert secret not in str(caught.value)


def test_metadata_that_is_not_json_says_why() -> None:
    """R-B2: metadata holding a value JSON cannot write is named with the reason."""
    _, chat, batch = paused_chat(ask("a"))
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, [{"interrupt_id": "a", "status": "resolved", "metadata": {"k": {1}}}])
    assert caught.value.problems == (
        "entry for 'a' has metadata that is not JSON (a set has no JSON form)",
    )


UNPLACED: dict[str, tuple[object, ResumeProblem]] = {
    "not a mapping": (None, ResumeProblem("entry 0 is a NoneType, not a mapping", None, 0)),
    "no string id": (
        {"interruptId": None, "status": "resolved"},
        ResumeProblem("entry 0 has no string interrupt_id", None, 0),
    ),
    "two ids": (
        {"interrupt_id": "a", "interruptId": "zz", "status": "resolved"},
        ResumeProblem("entry 0 gives interrupt_id 'a' and interruptId 'zz'; give one", "a", 0),
    ),
    "an id of another batch": (
        {"interrupt_id": "zz", "status": "resolved"},
        ResumeProblem(
            "entry for 'zz' names no interrupt of this batch (it holds 'a', 'b')", None, 0
        ),
    ),
}


@pytest.mark.parametrize("case", UNPLACED)
def test_an_entry_that_answers_nothing_does_not_stop_the_check_of_the_next(case: str) -> None:
    """R-B2: every problem is listed, so a form shows all there is to fix at once: the
    entries after one that cannot be placed are still checked and placed at theirs."""
    entry, problem = UNPLACED[case]
    _, chat, batch = paused_chat(ask("a"), ask("b"))
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, [entry, {"interrupt_id": "b", "status": "done"}])
    assert caught.value.details == (
        problem,
        ResumeProblem("entry for 'b' has a status other than 'resolved' or 'cancelled'", "b", 1),
        ResumeProblem("no entry for 'a'", "a"),
    )


def test_unknown_keys_are_a_problem_placed_at_the_interrupt_the_entry_answers() -> None:
    """R-B1, R-B2: an entry takes four keys; a typo (``paylod``) is not dropped in
    silence. It is named at the interrupt the entry answers, else by the entry's position,
    and the keys an entry takes are listed."""
    _, chat, batch = paused_chat(ask("a"), ask("b"))
    before = chat.core_state
    entries = [
        {"interrupt_id": "a", "status": "resolved", "note": "x"},
        {"interrupt_id": "zz", "status": "resolved", "paylod": 1},
    ]
    with pytest.raises(InvalidResumeError) as caught:
        chat.resume(batch.id, entries)
    assert chat.core_state is before
    takes = "(an entry takes interrupt_id, status, payload and metadata)"
    assert caught.value.details == (
        ResumeProblem(f"entry for 'a' has unknown keys ['note'] {takes}", "a", 0),
        ResumeProblem(f"entry 1 has unknown keys ['paylod'] {takes}", None, 1),
        ResumeProblem(
            "entry for 'zz' names no interrupt of this batch (it holds 'a', 'b')", None, 1
        ),
        ResumeProblem("no entry for 'b'", "b"),
    )
