"""A Hypothesis state machine that guards the SPEC's safety rules.

It drives a chat resource through the fake driver with random interleavings
of server scripts (successes, interrupts, tool calls, faults, malformed
events), answers (valid and invalid), stops, thread changes, clock moves and
``set_state`` calls. After every reducer step it checks:

- the reducer is deterministic and never mutates the state it was given;
- a rejected intent raises its specific error and leaves the state equal;
- never two claims: a resume is accepted only while none is held, a claim is
  never replaced, and it always belongs to the visible batch;
- never a request with an incomplete, duplicate or expired answer set: a resume
  sends exactly the answers submitted, in their order;
- never a batch id on the wire;
- never a send while a batch is pending, except the resume itself: no other run
  and no local tool while a batch is visible, and the flags say so at every step;
- no committed message or state is lost (a failure, stop or thread change
  never shortens or changes the committed history or changes the committed
  state; a run's commit keeps every committed message in its place; a finished
  tool result is never dropped), and a run's uncommitted draft exists only while
  its attempt is acknowledged.

An intent can be followed by a few drawn moves before the driver runs on (steps,
clock moves, a stop, a thread or policy change, ``set_state``, a second resume):
the races that decide these rules need them to land in one window, which a
sequence of separate rules rarely lines up.

Rules named: R-A2, R-A5, R-B1, R-B2, R-B5, R-C1, R-C2, R-D3, R-F2, R-F3, R-F6, R-H1
(see each check).
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import hypothesis.strategies as st
from hypothesis import event, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from stream_events import content_events

from interlude.adapters.agent_scenarios import rfc3339
from interlude.adapters.fake import (
    FakeDriver,
    Reply,
    Request,
    ScriptedAgent,
    drop,
    finished,
    interrupted,
    refuse,
    reply,
    run_error,
    started,
    state_delta,
    text,
    tool_call,
)
from interlude.adapters.resource import Resource
from interlude.core import inputs as i
from interlude.core import selectors as sel
from interlude.core.errors import (
    BatchClaimedError,
    BatchExpiredError,
    InterludeError,
    InterruptPendingError,
    InvalidResumeError,
    RecoveryRequiredError,
    StaleBatchError,
    StateLockedError,
)
from interlude.core.options import Options, RetryPolicy
from interlude.core.reducer import step
from interlude.core.wire.codec import decode_frame
from interlude.core.wire.events import RunFinished

_INTENTS_THAT_REWRITE_HISTORY = (i.Send, i.SetMessages, i.Reload, i.SetInput)

PAUSES = ("interrupt", "interrupt2", "interrupt_expiring", "interrupt_expiring2", "interrupt_tool")
pauses = st.sampled_from(PAUSES)
# Half the answers pause the run, so resumes, claims and expiry get exercised.
plans = st.one_of(
    pauses,
    st.sampled_from(
        [
            "success",
            "delta",
            "tool",
            "tool2",
            "run_error",
            "refuse",
            "refuse_400",
            "drop_before",
            "drop_after",
            "truncated",
            "garbage",
            "bad_outcome",
            "bad_patch",
        ]
    ),
)
# After an intent: run to the end, leave its commands queued for other rules to race,
# take a few steps, or let the clock pass the batch's expiry before anything is sent.
then_steps = st.sampled_from(["idle", "none", "one", "few", "expire_first"])
# Moves made right after an intent, before ``then``: they race its claim, its sends, a
# retry's back-off or a tool round ("until_tools": to a round with a result in).
moves = st.lists(
    st.sampled_from(
        [
            "step",
            "step",
            "idle",
            "until_tools",
            "tiny",
            "retry",
            "past_expiry",
            "policy",
            "set_state",
            "stop",
            "new_thread",
            "same_thread",
            "resume",
            "resume_cancel",
        ]
    ),
    max_size=3,
)
# What may race a claim before its resume is acknowledged.
claim_races = st.lists(
    st.sampled_from(
        ["step", "past_expiry", "retry", "tiny", "stop", "new_thread", "set_state", "resume"]
    ),
    max_size=4,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


class CheckedResource(Resource):
    """A resource that checks determinism, purity and the safety rules on every step."""

    machine: SafetyMachine

    def apply(self, input: i.Input) -> Any:
        before = self.core_state
        before_repr = repr(before)
        now = self._driver.now()
        try:
            first = step(before, input, now)
        except InterludeError as exc:
            # A rejected intent raises the same error every time and changes nothing.
            try:
                step(before, input, now)
            except InterludeError as again:
                assert again == exc
            assert repr(before) == before_repr
            assert self.core_state is before
            raise
        assert step(before, input, now) == first, "the reducer is not deterministic"
        assert repr(before) == before_repr, "the reducer mutated its input state"
        self.machine.check_transition(before, first.state, input)
        return super().apply(input)


class SafetyMachine(RuleBasedStateMachine):
    @initialize(
        max_attempts=st.integers(1, 3),
        policy=st.sampled_from(["block", "cancel_expired"]),
        opening=st.sampled_from([None, *PAUSES]),
    )
    def setup(self, max_attempts: int, policy: str, opening: str | None) -> None:
        # A plan names a scripted answer, or is a list of drawn content events to stream.
        self.plans: list[str | list[dict[str, Any]]] = []
        self.batch_ids: set[str] = set()
        self.submitted: list[dict[str, Any]] = []  # the last accepted answers, in wire form
        self.expiry_offset: float | None = None
        self.claim_policy = policy
        self.agent = ScriptedAgent(self.answer)
        self.driver = FakeDriver(self.agent, resource_class=CheckedResource)
        CheckedResource.machine = self
        options = Options(
            retry=RetryPolicy(max_attempts=max_attempts, base_delay=1.0, jitter=0.5),
            expiry=policy,  # type: ignore[arg-type]
        )
        self.chat = self.driver.chat(options, local_tools={"lookup": lambda args: {"ok": True}})
        self.pending_steps = "none"
        if opening is not None:  # most runs start paused: whatever rules this run draws
            self.pause(opening, [])

    # -- the scripted server ------------------------------------------------------------

    def answer(self, req: Request) -> Reply:
        self.check_request(req)
        plan = self.plans.pop(0) if self.plans else "success"
        n = len(self.agent.requests)
        if isinstance(plan, list):
            return reply(started(req), *plan, finished(req))
        if plan == "success":
            return reply(started(req), text(f"m{n}", "hello there", chunks=2), finished(req))
        if plan == "delta":
            op = {"op": "add", "path": f"/k{n}", "value": n}
            return reply(
                started(req),
                {"type": "STATE_SNAPSHOT", "snapshot": {}},
                state_delta(op),
                finished(req),
            )
        if plan.startswith("interrupt"):
            ids = ["a"] if plan in ("interrupt", "interrupt_tool") else ["a", "b"]
            items: list[dict[str, Any]] = [{"id": x, "reason": "input_required"} for x in ids]
            if plan.startswith("interrupt_expiring"):
                items[0]["expiresAt"] = rfc3339(self.driver.now() + 20)
            if plan == "interrupt_expiring2":  # a later expiry too: cancel_expired's next one
                items[1]["expiresAt"] = rfc3339(self.driver.now() + 40)
            # R-A5: a local tool call the interrupted run streamed is never run.
            call = tool_call(f"c{n}", "lookup", {"q": 1}) if plan == "interrupt_tool" else []
            return reply(
                started(req), text(f"m{n}", "question", chunks=2), call, interrupted(req, *items)
            )
        if plan in ("tool", "tool2"):
            calls = [tool_call(f"c{n}", "lookup", {"q": 1})]
            if plan == "tool2":  # a round of two: a stop between their results (R-F6)
                calls.append(tool_call(f"d{n}", "lookup", {"q": 2}))
            return reply(started(req), *calls, finished(req))
        if plan == "run_error":
            return reply(started(req), run_error("boom", "E1"))
        if plan == "refuse":
            return refuse(503)
        if plan == "refuse_400":
            return refuse(400)
        if plan == "drop_before":
            return drop()
        if plan == "drop_after":
            return drop(started(req), text(f"m{n}", "partial", chunks=2))
        if plan == "truncated":
            return reply(started(req), text(f"m{n}", "cut"))
        if plan == "garbage":
            return reply(started(req), "{not json")
        if plan == "bad_outcome":
            return reply(started(req), finished(req, {"type": "interrupt", "interrupts": []}))
        if plan == "bad_patch":
            return reply(started(req), state_delta({"op": "remove", "path": "/missing"}))
        raise AssertionError(plan)

    # -- checks ---------------------------------------------------------------------------

    def check_request(self, req: Request) -> None:
        s = self.chat.core_state
        body = req.body
        for batch_id in self.batch_ids:
            assert batch_id not in body, "R-B5: a batch id went over the wire"
        sent = req.json.get("resume")
        if sent is None:
            assert s.batch is None, "a send while a batch is pending that is not its resume"
            return
        # The resume itself: the claimed batch, complete, unique, unexpired (R-B2, R-F3).
        assert s.claim is not None and s.batch is not None
        assert s.claim.batch_id == s.batch.id
        event("a resume went out", f"attempt {s.run.attempt.number}" if s.run else "")
        if s.batch.earliest_expiry is not None:
            event("a resume went out", f"expiring batch, policy {self.claim_policy}")
        ids = [e["interruptId"] for e in sent]
        assert sorted(ids) == sorted(x.id for x in s.batch.interrupts)
        assert len(set(ids)) == len(ids)
        # R-B1, R-F2: what was submitted, in its order, on every attempt.
        assert sent == self.submitted, "the resume did not send the answers submitted"
        expired = set(s.batch.expired_ids(self.driver.now()))
        # The policy the answers were accepted under: configure() may have changed since.
        if self.claim_policy == "cancel_expired":
            cancelled = {e["interruptId"] for e in sent if e["status"] == "cancelled"}
            expired -= cancelled
        assert not expired, "R-F3: a resume went out with an expired interrupt"

    def check_transition(self, before: Any, after: Any, input: i.Input) -> None:
        check_flags(after)
        # Never two claims (R-C2): a resume is accepted only while none is held, and a
        # claim is never replaced by another, only released.
        if isinstance(input, i.Resume):
            assert before.claim is None, "a resume claimed a batch already claimed"
        if before.claim is not None and after.claim is not None:
            assert after.claim is before.claim, "a claim was replaced"
            event("during a claim", type(input).__name__)
        # A draft exists only for the acknowledged attempt of the run in progress: a
        # failure, stop or finish that ends the run drops it (R-F6).
        if after.draft is not None:
            run = after.run
            assert run is not None and run.attempt is not None and run.attempt.acked
        # Never two claims, and a claim belongs to the visible batch (R-C2).
        if after.claim is not None:
            assert after.batch is not None and after.batch.id == after.claim.batch_id
        if after.batch is not None:
            self.batch_ids.add(after.batch.id)
        # R-A2: a batch id is never reused for another batch.
        same_id = after.batch is not None and before.batch is not None
        if same_id and after.batch.id == before.batch.id:
            assert after.batch is before.batch
        # R-F6, R-H1: what was committed is never lost.
        old, new = before.checkpoint, after.checkpoint
        if before.tools is not None and after.tools is None:
            # A round's finished results are committed whatever ends it (send() too).
            event("a tool round ended", type(input).__name__)
            if not isinstance(input, i.SetMessages | i.Reload):
                kept = {m.id for m in new.messages}
                done = [t.result.id for t in before.tools.tasks if t.result is not None]
                assert all(d in kept for d in done), "a finished tool result was lost"
        if isinstance(input, _INTENTS_THAT_REWRITE_HISTORY):
            return
        commit = isinstance(input, i.FrameReceived) and _is_run_finished(input.data)
        draft = before.draft
        if commit and draft is not None and draft.base < len(old.messages):
            # R-J2: the run's MESSAGES_SNAPSHOT replaced the history (it resets ``base``);
            # the server is authoritative, and what it sent is what is committed.
            if after.error is None:
                kept = [m.id for m in new.messages] == [m.id for m in draft.messages]
                assert kept, "the snapshot was not what was committed"
            return
        if commit:
            # A run may extend an earlier run's message or call by id (AG-UI 1.0), never
            # remove one: each keeps its place.
            kept = [m.id for m in list(new.messages)[: len(old.messages)]]
            assert kept == [m.id for m in old.messages], "a committed message was lost"
        else:
            assert list(new.messages)[: len(old.messages)] == list(old.messages), (
                "a committed message was changed outside a commit"
            )
        if not commit:
            # R-F6: only finished tool results are committed outside a RUN_FINISHED;
            # what a failed or stopped run streamed is dropped.
            added = list(new.messages)[len(old.messages) :]
            assert all(m.role == "tool" for m in added), "an uncommitted draft was kept"
        if new.state != old.state:
            assert commit or isinstance(input, i.SetState), "committed state changed"

    @invariant()
    def flags_are_consistent(self) -> None:
        s = self.chat.core_state
        if s.claim is not None:
            assert self.chat.is_resuming and self.chat.is_loading
        if s.batch is not None and s.claim is None:
            assert not self.chat.is_loading and not self.chat.is_resuming  # R-C1
        if not self.chat.is_loading:
            # At rest no interaction is under way, so none counts rounds of local tools
            # (R-D5): whatever ended the last one, the next starts with its full allowance.
            assert s.tool_rounds == 0, f"{s.tool_rounds} tool rounds counted at rest"

    # -- rules ----------------------------------------------------------------------------

    def after_intent(self, then: str) -> None:
        self.pending_steps = then

    def teardown_steps(self) -> None:
        then, self.pending_steps = self.pending_steps, "none"
        if then == "expire_first":
            self.advance_past_expiry()
            then = "idle"
        if then == "idle":
            self.driver.run_until_idle(max_steps=2_000)
        for _ in range({"one": 1, "few": 3}.get(then, 0)):
            self.driver.step()

    def advance_past_expiry(self) -> None:
        """Just past the batch's next expiry (each in turn), else well past any."""
        batch = self.chat.core_state.batch
        now = self.driver.now()
        later = [
            t for x in (batch.interrupts if batch else ()) if (t := x.expires_at_epoch) and t > now
        ]
        self.driver.advance(min(later) - now + 0.001 if later else 25.0)

    def make_moves(self, moves: list[str]) -> None:
        for move in moves:
            if move == "step":
                self.driver.step()
            elif move == "idle":
                self.driver.run_until_idle(max_steps=2_000)
            elif move == "until_tools":
                self.run_until_tool_result()
            elif move in ("tiny", "retry", "past_expiry"):
                self.advance_clock(move)
            elif move.startswith("resume"):
                # Valid answers: all cancelled, or the expired ones cancelled and the
                # others resolved.
                batch = self.chat.pending_interrupts
                if batch is not None:
                    cancel = set(batch.expired_ids(self.driver.now()))
                    if move == "resume_cancel":
                        cancel = {x.id for x in batch.interrupts}
                    # A None payload is an answer too, and is sent as given (R-B1).
                    entries: list[dict[str, Any]] = [
                        {"interrupt_id": x.id, "status": "cancelled"}
                        if x.id in cancel
                        else {"interrupt_id": x.id, "status": "resolved", "payload": n or None}
                        for n, x in enumerate(batch.interrupts)
                    ]
                    self.submit(batch, batch.id, entries, None)
            else:
                self.disrupt(move, {"moved": 1})

    def run_until_tool_result(self) -> None:
        """Step until a round of local tools has a result in and another to come."""
        for _ in range(200):
            tools = self.chat.core_state.tools
            if tools is not None and 0 < tools.waiting < len(tools.tasks):
                event("a move landed inside a tool round")
                return
            if not self.driver.step():
                return

    @rule(plan=plans)
    def script_next_answer(self, plan: str) -> None:
        """Queue an answer for a later request (a retry, a follow-up)."""
        self.plans.append(plan)

    @rule(events=st.lists(content_events, max_size=8))
    def script_drawn_answer(self, events: list[dict[str, Any]]) -> None:
        """Queue an answer streaming drawn content events, however wrong (then a finish)."""
        self.plans.append(events)

    @rule(content=st.text(max_size=6), plan=plans, moves=moves, then=then_steps)
    def send(self, content: str, plan: str, moves: list[str], then: str) -> None:
        self.plans.insert(0, plan)
        self.after_intent(then)
        s = self.chat.core_state
        try:
            self.chat.send(content)
        except RecoveryRequiredError:
            assert s.needs_new_thread
        except InterruptPendingError:
            assert s.batch is not None and not s.needs_new_thread
        else:
            assert s.batch is None and not s.needs_new_thread
        self.make_moves(moves)
        self.teardown_steps()

    @precondition(lambda self: self.chat.core_state.batch is None)
    @rule(plan=pauses, moves=moves)
    def pause(self, plan: str, moves: list[str]) -> None:
        """A run that ends in a batch (unless a recovery or a script on the way stops it),
        then moves that may answer it."""
        self.send("q", plan, ["idle", *moves], "idle")

    @precondition(lambda self: self.chat.pending_interrupts is not None)
    @rule(
        how=st.sampled_from(["resume", "resume_cancel"]),
        first=st.sampled_from(["success", "refuse", "drop_before", "garbage", "interrupt"]),
        switch=st.booleans(),
        expire=st.booleans(),
        races=claim_races,
    )
    def race_a_claim(
        self, how: str, first: str, switch: bool, expire: bool, races: list[str]
    ) -> None:
        """Answer the batch, the resume's first attempt answered by ``first`` (a failure
        backs off to a retry), and race the claim: ``switch`` configures a policy the
        claim must not be judged by (R-F2), ``expire`` moves the clock past the next
        expiry before the send (R-F3), then the clock past an expiry or a back-off, a
        stop, a thread change, set_state, a second resume."""
        self.plans.insert(0, first)
        moves = [how, *(["policy"] if switch else []), *(["past_expiry"] if expire else [])]
        self.make_moves([*moves, *races])
        self.driver.run_until_idle(max_steps=2_000)

    @precondition(lambda self: self.chat.pending_interrupts is not None)
    @rule(
        data=st.data(),
        plan=plans,
        moves=moves,
        then=then_steps,
        mistake=st.sampled_from(
            [None, None, None, "missing", "duplicate", "unknown", "status", "nan", "stale"]
        ),
    )
    def answer_batch(
        self, data: st.DataObject, plan: str, moves: list[str], then: str, mistake: str | None
    ) -> None:
        """Submit answers for the visible batch: valid ones, or one kind of mistake."""
        batch = self.chat.pending_interrupts
        assert batch is not None
        entries: list[dict[str, Any]] = []
        for interrupt in data.draw(st.permutations(list(batch.interrupts))):
            if data.draw(st.booleans()):
                entries.append({"interrupt_id": interrupt.id, "status": "cancelled"})
            else:
                payload = data.draw(json_values)
                entries.append(
                    {"interrupt_id": interrupt.id, "status": "resolved", "payload": payload}
                )
        batch_id = batch.id
        if mistake == "missing":
            entries = entries[1:]
        elif mistake == "duplicate":
            entries = [*entries, entries[0]]
        elif mistake == "unknown":
            entries = [*entries, {"interrupt_id": "zzz", "status": "resolved"}]
        elif mistake == "status":
            entries = [{**entries[0], "status": "maybe"}, *entries[1:]]
        elif mistake == "nan":
            entries = [{**entries[0], "status": "resolved", "payload": float("nan")}, *entries[1:]]
        elif mistake == "stale":
            batch_id = "not-a-batch"
        self.plans.insert(0, plan)
        self.after_intent(then)
        self.submit(batch, batch_id, entries, mistake)
        self.make_moves(moves)
        self.teardown_steps()

    def submit(
        self, batch: Any, batch_id: str, entries: list[dict[str, Any]], mistake: str | None
    ) -> None:
        """resume(), and the outcome the state before it calls for (R-B2)."""
        before = self.chat.core_state
        wire = [
            {"interruptId": e["interrupt_id"], "status": e["status"]}
            | ({"payload": e["payload"]} if "payload" in e else {})
            for e in entries
        ]
        submitted = json.loads(json.dumps(wire)) if mistake is None else []
        try:
            self.chat.resume(batch_id, entries)
        except InterludeError as exc:
            event("resume()", type(exc).__name__)
            if isinstance(exc, RecoveryRequiredError):
                assert before.needs_new_thread
            elif isinstance(exc, BatchClaimedError):
                assert before.claim is not None
            elif isinstance(exc, StaleBatchError):
                assert mistake == "stale"
            elif isinstance(exc, BatchExpiredError):
                assert before.batch is not None and before.batch.expired_ids(self.driver.now())
            else:
                assert isinstance(exc, InvalidResumeError) and mistake is not None
        else:
            event("resume()", f"accepted, policy {before.options.expiry}")
            assert mistake is None, f"an invalid resume ({mistake}) was accepted"
            assert before.claim is None, "R-C2: a second resume claimed the batch"
            assert self.chat.is_resuming and self.chat.is_loading  # R-C2
            expired = set(batch.expired_ids(self.driver.now()))
            if before.options.expiry == "cancel_expired":
                expired -= {e["interrupt_id"] for e in entries if e["status"] == "cancelled"}
            assert not expired, "R-F3: an expired batch was claimed"
            self.claim_policy = before.options.expiry  # what its sends are judged by
            self.submitted = submitted

    @rule(
        kind=st.sampled_from(["stop", "same_thread", "new_thread", "set_state", "policy"]),
        value=json_values,
    )
    def disrupt(self, kind: str, value: Any) -> None:
        """Stop, change thread (or set the same one), replace the shared state, or switch
        the expiry policy (configure: later claims only, R-F2)."""
        before = self.chat.core_state
        if kind == "policy":
            other = "block" if before.options.expiry == "cancel_expired" else "cancel_expired"
            self.chat.configure(attrs.evolve(before.options, expiry=other))
            assert self.chat.core_state.claim == before.claim
        elif kind == "stop":
            self.chat.stop()
            assert self.chat.core_state.claim is None and not self.chat.is_loading
        elif kind == "same_thread":
            self.chat.set_thread_id(before.thread_id)
            assert self.chat.core_state == before  # R-H2
        elif kind == "new_thread":
            self.chat.set_thread_id(None if before.thread_id else "t-other")
            assert self.chat.pending_interrupts is None and not self.chat.needs_new_thread
        else:
            try:
                self.chat.set_state(value)
            except StateLockedError:
                assert before.claim is not None or before.run is not None  # R-D2
            else:
                assert before.claim is None and before.run is None

    @rule(move=st.sampled_from(["tiny", "retry", "past_expiry", "past_expiry"]))
    def advance_clock(self, move: str) -> None:
        """Move the clock a little, past a retry back-off, or just past the batch's expiry."""
        if move == "past_expiry":
            self.advance_past_expiry()
        else:
            self.driver.advance({"tiny": 0.25, "retry": 5.0}[move])

    @rule(steps=st.sampled_from([1, 2, 4, 1000]))
    def step_driver(self, steps: int) -> None:
        """A few driver steps, or (1000) until idle, following retry back-offs."""
        if steps == 1000:
            self.driver.run_until_idle(max_steps=2_000)
        for _ in range(steps if steps < 1000 else 0):
            self.driver.step()


def check_flags(s: Any) -> None:
    """The flags and what may run while a batch is visible, at every step."""
    if s.claim is not None:
        assert s.resuming and sel.is_loading(s), "R-C2: a claim without its flags"
    if s.batch is not None:
        assert s.tools is None, "R-A5: a local tool runs while a batch is visible"
        if s.claim is None:
            assert not sel.is_loading(s) and not s.resuming, "R-C1: a pending batch is loading"
        else:
            assert s.run is not None and s.run.kind == "resume", "R-D3: a run beside the resume"


def _is_run_finished(data: str) -> bool:
    try:
        return isinstance(decode_frame(data), RunFinished)
    except ValueError:
        return False


# Settings built here inherit the loaded profile (derandomized in CI, see conftest).
SafetyMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("INTERLUDE_MACHINE_EXAMPLES", "300")),
    stateful_step_count=40,
)
test_safety_machine = SafetyMachine.TestCase
