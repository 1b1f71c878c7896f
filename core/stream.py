"""How the content events of an acknowledged run build its draft (R-J2).

Each function takes a :class:`Stream` and an event and returns a new Stream,
or raises :class:`StreamViolation` when the event breaks AG-UI in context
(content for a message that is not open, an invalid patch...). The reducer
turns a violation into a non-retryable ``ProtocolError``.

Cost does not grow with history: text and argument deltas go to ropes and
are joined once, when the message closes; messages live in a persistent
vector, so closing one copies a few dozen pointers, not the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import article, listed, quote
from .json import JSON, FrozenDict, as_object, frozen_unchecked
from .patch import PatchError, apply_patch
from .pmap import PMap
from .pvec import PVec, Rope
from .state import (
    IdHints,
    OpenCall,
    OpenText,
    Stream,
    evolve,
    replacer,
    with_open_calls,
    with_open_texts,
    with_rope,
    with_state,
)
from .wire import events as ev
from .wire.messages import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "CONTENT_HANDLERS",
    "MAX_OPEN",
    "WITH_CONTENT",
    "StreamViolation",
    "StreamWarning",
    "close_all",
    "with_arguments",
    "with_call",
    "with_text",
]

MAX_OPEN = 256
"""Messages and tool calls open at once; more is a hostile or broken stream."""


class StreamViolation(Exception):
    """An event that breaks AG-UI in the context of the run's stream."""


class StreamWarning(Exception):
    """An event the draft cannot take and AG-UI says to drop with a warning, not fail on;
    or, with ``applied``, one it took in part (the draft as it stands after it)."""

    def __init__(self, note: str, applied: Stream | None = None) -> None:
        super().__init__(note)
        self.applied = applied


# -- text and reasoning messages -------------------------------------------------


def _find_open_text(s: Stream, message_id: str) -> OpenText | None:
    for o in s.open_texts:
        if o.message_id == message_id:
            return o
    return None


_Adrift = tuple[str, str, str | None]


def _adrift(s: Stream, item_id: str, kinds: tuple[str, ...]) -> _Adrift | None:
    """``item_id``'s entry among the items a snapshot set adrift, if of one of ``kinds``."""
    for entry in s.adrift:
        if entry[1] == item_id and entry[0] in kinds:
            return entry
    return None


_TEXT_KINDS = ("text", "reasoning")
_CALL_KIND = ("call",)


def _ashore(s: Stream, entry: _Adrift) -> Stream:
    """``s`` with an adrift item ended: its end has nothing to close."""
    return evolve(s, adrift=tuple(a for a in s.adrift if a is not entry))


def _start_text(s: Stream, message: Message) -> Stream:
    if _find_open_text(s, message.id) is not None or _adrift(s, message.id, _TEXT_KINDS):
        raise StreamViolation(f"message {message.id!r} was started twice")
    if len(s.open_texts) + _drifting(s, _TEXT_KINDS) >= MAX_OPEN:
        raise StreamViolation(f"more than {MAX_OPEN} messages open at once")
    owner = getattr(message, "subagent_run_id", None)
    index = _index_of(s, message.id)
    if index is not None:
        prior = _opener(s, index)
        if prior is not _UNSEEN and prior != owner:
            # AG-UI 1.0 (Subagents, Ownership): within a run a message keeps its owner;
            # across runs ownership tracking resets, so an earlier run's is not checked.
            raise StreamViolation(
                f"message {message.id!r} was started again by {_owner(owner)}, but "
                f"{_owner(prior)} streamed it in this run"
            )
        return _reopen_text(s, index, message, owner)
    reasoning = isinstance(message, ReasoningMessage)
    opened = OpenText(message.id, len(s.messages), Rope(), reasoning, owner)
    return evolve(s, messages=_appended(s, message), open_texts=(*s.open_texts, opened))


_UNSEEN = object()
"""No event of this run opened it (see :func:`_opener`)."""


def _opener(s: Stream, index: int) -> Any:
    """Who opened the message at ``index`` in this run (None: the parent agent), or
    ``_UNSEEN``. One this run made carries its opener's attribution; the others are
    noted in ``Stream.owners`` when an event of the run opens them."""
    message = s.messages[index]
    if message.id in s.owners:
        return s.owners[message.id]
    if index >= s.fresh:
        return getattr(message, "subagent_run_id", None)
    return _UNSEEN


def _noted_owner(s: Stream, index: int, owner: str | None) -> PMap:
    """``s.owners``, with ``owner`` for the message at ``index`` if it is an earlier one
    that this run opens now (one this run made needs no note)."""
    mid = s.messages[index].id
    if index >= s.fresh or mid in s.owners:
        return s.owners
    return s.owners.with_member(mid, owner)


def _drifting(s: Stream, kinds: tuple[str, ...]) -> int:
    """How many items of ``kinds`` are adrift (they count as open)."""
    return sum(1 for entry in s.adrift if entry[0] in kinds) if s.adrift else 0


def _owner(subagent_run_id: str | None) -> str:
    return "the parent agent" if subagent_run_id is None else f"subagent {subagent_run_id!r}"


def _merged(old: FrozenDict | None, new: FrozenDict | None) -> FrozenDict | None:
    """AG-UI 1.0 (Metadata): key by key, the last write winning; never recursive."""
    if new is None:
        return old
    if old is None:
        return new
    return frozen_unchecked({**old, **new})


def _at(item: OpenText | OpenCall | None, found: int | None) -> int:
    """Where an item an event just found or made stands: open, else as looked up."""
    i = item.position if item is not None else found
    assert i is not None
    return i


def _message_metadata(s: Stream, message_id: str, metadata: FrozenDict | None) -> Stream:
    """``s`` with ``metadata`` merged into this run's message ``message_id``."""
    if metadata is None:
        return s
    o = _find_open_text(s, message_id)
    if o is None and _adrift(s, message_id, _TEXT_KINDS):
        return s  # no place to merge into: dropped with its content
    i = _at(o, _index_of(s, message_id))
    m = s.messages[i]
    changed = evolve(m, metadata=_merged(m.metadata, metadata))
    return evolve(s, messages=s.messages.set(i, changed))


def _call_metadata(s: Stream, tool_call_id: str, metadata: FrozenDict | None) -> Stream:
    """``s`` with ``metadata`` merged into call ``tool_call_id`` itself, not its holder
    (AG-UI 1.0: one message holds several calls, each keeping its own)."""
    if metadata is None:
        return s
    o = _find_open_call(s, tool_call_id)
    if o is None and _adrift(s, tool_call_id, _CALL_KIND):
        return s
    i = _at(o, _holder_of(s, tool_call_id))
    holder = s.messages[i]
    assert isinstance(holder, AssistantMessage)

    def merge(c: ToolCall) -> ToolCall:
        return evolve(c, metadata=_merged(c.metadata, metadata))

    changed = with_call(holder, tool_call_id, merge)
    assert changed is not None
    return evolve(s, messages=s.messages.set(i, changed))


def _reopen_text(s: Stream, index: int, message: Message, owner: str | None) -> Stream:
    """AG-UI 1.0: a closed message is closed, not sealed. A START naming one in the
    history, this run's or an earlier run's, reopens it, its further content appending
    to what is there; its role and name as first established stand (an assistant
    message that so far only held tool calls takes text too). ``owner``: the opener's."""
    had = s.messages[index]
    if type(had) is not type(message):
        raise StreamViolation(
            f"message {message.id!r} was started as {article(message.role)} message, but the "
            f"history holds it as {article(had.role)} message"
        )
    if had.content is None:
        text = ""
    elif isinstance(had.content, str):
        text = had.content
    else:
        # A user message with parts (an image, say): appending text would replace them.
        raise StreamViolation(
            f"message {message.id!r} was started again, but it holds content parts, "
            "not text, so text cannot be appended to it"
        )
    opened = OpenText(message.id, index, Rope(text), isinstance(had, ReasoningMessage), owner)
    return evolve(s, open_texts=(*s.open_texts, opened), owners=_noted_owner(s, index, owner))


def _append_text(s: Stream, message_id: str, delta: str) -> Stream:
    texts = s.open_texts
    # The message being written is almost always the newest one: check it first.
    for i in range(len(texts) - 1, -1, -1):
        o = texts[i]
        if o.message_id == message_id:
            grown = with_rope(o, o.rope.append(delta))
            return with_open_texts(s, (*texts[:i], grown, *texts[i + 1 :]))
    if _adrift(s, message_id, _TEXT_KINDS):
        return s  # its place is gone: dropped, as the snapshot that took it warned
    raise StreamViolation(f"content for message {message_id!r}, which is not open")


def _text_content(s: Stream, e: ev.TextMessageContent) -> Stream:
    texts = s.open_texts
    if len(texts) == 1:
        # Half of a stream's events land here: the loop of _append_text, unrolled for
        # its common case (one text message open), saves about 4% of the benchmark's cost.
        o = texts[0]
        tag = e.subagent_run_id
        if (
            o.message_id == e.message_id
            and not o.reasoning
            and e.metadata is None
            and tag == o.owner  # an untagged one continuing a subagent's: checked below
        ):
            return with_open_texts(s, (with_rope(o, o.rope.append(e.delta)),))
    return _content(s, e, False)


def _reasoning_content(s: Stream, e: ev.ReasoningMessageContent) -> Stream:
    return _content(s, e, True)


def _content(
    s: Stream, e: ev.TextMessageContent | ev.ReasoningMessageContent, reasoning: bool
) -> Stream:
    _not_chunked(s, e.message_id, _TEXT_KINDS, e)
    _check_lane(s, e.message_id, reasoning, e)
    s = _append_text(s, e.message_id, e.delta)
    return _message_metadata(s, e.message_id, e.metadata)


def _text_end(s: Stream, e: ev.TextMessageEnd | ev.ReasoningMessageEnd) -> Stream:
    _not_chunked(s, e.message_id, _TEXT_KINDS, e)
    _check_lane(s, e.message_id, type(e) is ev.ReasoningMessageEnd, e)
    if _find_open_text(s, e.message_id) is None:
        entry = _adrift(s, e.message_id, _TEXT_KINDS)
        if entry is not None:
            return _ashore(s, entry)
    return _message_metadata(_end_text(s, e.message_id), e.message_id, e.metadata)


def _check_lane(s: Stream, message_id: str, reasoning: bool, event: Any = None) -> None:
    """A reasoning event must name a reasoning message, a text event a text message:
    AG-UI 1.0 keeps the two apart, and content in the wrong one is silent corruption.
    A continuing ``event`` must agree with the message's opener about its owner.
    (A message that is not open is left to the handler's own error.)"""
    o = _find_open_text(s, message_id)
    if o is not None:
        is_reasoning, owner = o.reasoning, o.owner
    else:
        entry = _adrift(s, message_id, _TEXT_KINDS)
        if entry is None:
            return
        is_reasoning, owner = entry[0] == "reasoning", entry[2]
    if event is not None and event.subagent_run_id is not None:
        _check_owner(event, owner, f"message {message_id!r}")
    if is_reasoning != reasoning:
        kind, other = ("reasoning", "text") if reasoning else ("text", "reasoning")
        raise StreamViolation(f"a {kind} event for message {message_id!r}, a {other} message")


def _check_owner(event: Any, owner: str | None, item: str) -> None:
    """AG-UI 1.0 (Subagents, Ownership): a continuation may omit its ``subagentRunId``
    (it continues whatever the opener owns), never contradict it: one producer's
    content appended to another's message is corruption no one detects afterwards."""
    tag = event.subagent_run_id
    if tag is not None and tag != owner:
        raise StreamViolation(
            f"{article(event.TYPE)} of {_owner(tag)} continuing {item}, "
            f"which {_owner(owner)} opened"
        )


def with_text(message: Message, text: str) -> Message:
    """``message`` with its text content set (text, reasoning and plain messages)."""
    return WITH_CONTENT[type(message)](message, text)  # type: ignore[no-any-return]


WITH_CONTENT: dict[type[Any], Callable[[Any, str], Any]] = {
    cls: replacer(cls, "content")
    for cls in (AssistantMessage, UserMessage, SystemMessage, DeveloperMessage, ReasoningMessage)
}


def _end_text(s: Stream, message_id: str) -> Stream:
    o = _find_open_text(s, message_id)
    if o is None:
        raise StreamViolation(f"end of message {message_id!r}, which is not open")
    closed = with_text(s.messages[o.position], str(o.rope))
    return evolve(
        s,
        messages=s.messages.set(o.position, closed),
        open_texts=tuple(t for t in s.open_texts if t is not o),
    )


def _text_start(s: Stream, e: ev.TextMessageStart) -> Stream:
    message = _plain_message(e.role or "assistant", e.message_id, e.name, e.subagent_run_id)
    return _message_metadata(_start_text(s, message), e.message_id, e.metadata)


def unclosed(s: Stream) -> list[str]:
    """What a ``*_START`` opened and no end closed, described: AG-UI 1.0 fails a run
    that finishes with any (a chunk stream the finish ends itself)."""
    chunked = {(kind == "call", item) for _, kind, item in s.chunks}
    texts = [o.message_id for o in s.open_texts if (False, o.message_id) not in chunked]
    calls = [o.tool_call_id for o in s.open_calls if (True, o.tool_call_id) not in chunked]
    return [
        *(f"message {m!r}" for m in texts),
        *(f"tool call {c!r}" for c in calls),
        *(_item(kind, item) for kind, item, _ in s.adrift),
        *(_step_name(step) for step in s.steps),
    ]


def _item(kind: str, item_id: str) -> str:
    """An open item named for a message: "message 'm1'", "tool call 'c1'"."""
    return f"{'tool call' if kind == 'call' else 'message'} {quote(item_id)}"


def _plain_message(
    role: str, message_id: str, name: str | None, subagent_run_id: str | None = None
) -> Message:
    if role not in _TEXT_ROLES:
        # AG-UI 1.0: a malformed known value is fatal; no default stands in for it.
        raise StreamViolation(
            f"text message {message_id!r} has role {role!r}; a text message is "
            "developer, system, assistant or user"
        )
    message: Message = _TEXT_CLASSES[role](
        id=message_id, content="", name=name, subagent_run_id=subagent_run_id
    )
    return message


_TEXT_CLASSES: dict[str, Any] = {
    "developer": DeveloperMessage,
    "system": SystemMessage,
    "assistant": AssistantMessage,
    "user": UserMessage,
}
_TEXT_ROLES = frozenset(_TEXT_CLASSES)


def _chunk(
    s: Stream,
    e: ev.TextMessageChunk | ev.ReasoningMessageChunk,
    new: Callable[[str], Message],
    repeats: tuple[tuple[str, str | None], ...] = (),
) -> Stream:
    """A ``*_CHUNK`` continues its chunk stream or opens one (reopening a closed message
    of that id); one without an id continues the open stream of its kind (see
    :func:`_continued`). ``repeats``: the chunk's ``role`` and ``name``, which a
    continuation may repeat only unchanged."""
    kind = "reasoning" if type(e) is ev.ReasoningMessageChunk else "text"
    lane = e.subagent_run_id
    mid = e.message_id if e.message_id is not None else _continued(s, lane, kind)
    entry = _chunk_entry(s, kind, mid, lane)
    if entry is None:
        if _find_open_text(s, mid) is not None or _adrift(s, mid, _TEXT_KINDS):
            _check_lane(s, mid, kind == "reasoning")
            raise StreamViolation(_mixed(type(e).TYPE, mid))
        s = _start_text(s, new(mid))
        s = evolve(s, chunks=(*s.chunks, (lane, kind, mid)))
    else:
        m = s.messages[_at(_find_open_text(s, mid), None)]
        _check_repeats(mid, tuple((f, value, getattr(m, f, None)) for f, value in repeats))
    if e.delta:
        s = _append_text(s, mid, e.delta)
    return _message_metadata(s, mid, e.metadata)


def _chunk_entry(
    s: Stream, kind: str, item_id: str, lane: str | None
) -> tuple[str | None, str, str] | None:
    """The open chunk stream of ``kind`` assembling ``item_id``; a chunk tagged for
    another subagent than the one whose chunk opened it contradicts its opener."""
    for entry in s.chunks:
        if entry[1] == kind and entry[2] == item_id:
            if lane is not None and entry[0] != lane:
                raise StreamViolation(
                    f"a chunk of subagent {lane!r} continuing {item_id!r}, which a chunk "
                    f"of {_owner(entry[0])} opened"
                )
            return entry
    return None


def _continued(s: Stream, lane: str | None, kind: str) -> str:
    """The item an id-less chunk continues (AG-UI 1.0, Streaming): the open chunk
    stream of its kind in its lane; an untagged one may continue the sole open stream
    of its kind in any lane. None open, or several to choose from, fails the run."""
    kin = [c for c in s.chunks if c[1] == kind and c[0] == lane]
    if not kin and lane is None:
        kin = [c for c in s.chunks if c[1] == kind]
    if len(kin) == 1:
        return kin[0][2]
    what = "tool call" if kind == "call" else f"{kind} message"
    if not kin:
        raise StreamViolation(f"a {what} chunk without an id, and no {what} chunk stream open")
    raise StreamViolation(
        f"a {what} chunk without an id or subagentRunId, and {what} chunk streams open "
        "in several subagents: it continues none of them"
    )


def _not_chunked(s: Stream, item_id: str, kinds: tuple[str, ...], event: Any) -> None:
    """The other direction of :func:`_mixed`: a content, arguments or end event for an
    item a chunk stream is assembling. One of the chunk's own lane has ended it already
    (:func:`end_chunks`), so this is an untagged event for a subagent's chunked item."""
    for lane, kind, item in s.chunks:
        if item == item_id and kind in kinds:
            raise StreamViolation(
                f"{article(event.TYPE)} for {item_id!r}, which a chunk of {_owner(lane)} "
                "opened and has not ended: only chunks continue an item of the chunk form"
            )


def _mixed(chunk_type: str, item_id: str) -> str:
    return (
        f"a {chunk_type} for {item_id!r}, which a START opened and has not ended: "
        "a chunk does not continue an item of the start, content and end form"
    )


_KEEPS_CHUNKS = frozenset(
    {
        ev.Raw,
        ev.ActivitySnapshot,
        ev.ActivityDelta,
        ev.ReasoningEncryptedValue,
        ev.SubagentStarted,
    }
)
"""Events that stand aside from chunk assembly and end no chunk stream (AG-UI 1.0); an
event of an unknown type does not either, and never reaches the draft."""

_CHUNK_KINDS: dict[type[Any], str] = {
    ev.TextMessageChunk: "text",
    ev.ReasoningMessageChunk: "reasoning",
    ev.ToolCallChunk: "call",
}


def end_chunks(s: Stream, event: object) -> Stream:
    """``s`` with the chunk streams ``event`` ends ended (AG-UI 1.0, Closing a chunk
    stream): the chunked form has no end event, so what comes next in its lane ends it,
    unless it continues it; a ``MESSAGES_SNAPSHOT`` ends them all, a subagent's end
    those of its lane. Called before ``event``'s own handler, when a stream is open."""
    t = type(event)
    if t in _KEEPS_CHUNKS:
        return s
    if t is ev.MessagesSnapshot:
        ending = s.chunks
    elif t is ev.SubagentFinished or t is ev.SubagentError:
        ending = tuple(c for c in s.chunks if c[0] == event.subagent_run_id)  # type: ignore[attr-defined]
    else:
        lane = getattr(event, "subagent_run_id", None)
        kind = _CHUNK_KINDS.get(t)
        item = getattr(event, "tool_call_id" if kind == "call" else "message_id", None)
        # A chunk continuing its lane's stream of its kind (by id, or id-less) ends
        # nothing; any other event of the lane ends the lane's stream.
        ending = tuple(
            c
            for c in s.chunks
            if c[0] == lane and not (c[1] == kind and (item is None or item == c[2]))
        )
    if not ending:
        return s
    for _, kind_, item_ in ending:
        if kind_ == "call":
            if _find_open_call(s, item_) is not None:
                s = _tool_call_end(s, item_)
        elif _find_open_text(s, item_) is not None:
            s = _end_text(s, item_)
    return evolve(s, chunks=tuple(c for c in s.chunks if c not in ending))


def _check_repeats(item_id: str, repeats: tuple[tuple[str, str | None, object], ...]) -> None:
    """AG-UI 1.0 (Streaming): a continuation chunk may repeat a field its opener
    established, only with the same value (an opener without a role made an assistant
    message); the producer said two things about one item. ``repeats``: each field's
    name, the chunk's value and the item's."""
    for field, value, had in repeats:
        if value is not None and had is not None and value != had:
            raise StreamViolation(
                f"a chunk continuing {item_id!r} gives {field} {quote(value)}, "
                f"where its opener gave {quote(had)}"
            )


def _text_chunk(s: Stream, e: ev.TextMessageChunk) -> Stream:
    return _chunk(
        s,
        e,
        lambda mid: _plain_message(e.role or "assistant", mid, e.name, e.subagent_run_id),
        (("role", e.role), ("name", e.name)),
    )


def _reasoning_start(s: Stream, e: ev.ReasoningMessageStart) -> Stream:
    if e.role != "reasoning":
        raise StreamViolation(
            f"REASONING_MESSAGE_START {e.message_id!r} has role {e.role!r}, not 'reasoning'"
        )
    message = ReasoningMessage(id=e.message_id, content="", subagent_run_id=e.subagent_run_id)
    return _message_metadata(_start_text(s, message), e.message_id, e.metadata)


def _reasoning_chunk(s: Stream, e: ev.ReasoningMessageChunk) -> Stream:
    def new(mid: str) -> Message:
        return ReasoningMessage(id=mid, content="", subagent_run_id=e.subagent_run_id)

    return _chunk(s, e, new)


# -- steps -------------------------------------------------------------------------


def _step_name(step: tuple[str | None, str]) -> str:
    owner, name = step
    return f"step {name!r}" + (f" of subagent {owner!r}" if owner is not None else "")


def _step_started(s: Stream, e: ev.StepStarted) -> Stream:
    """AG-UI 1.0 (Runs and Steps): a step name is open at most once in its lane (the
    parent agent's or a subagent's), and every step ends before the run finishes."""
    step = (e.subagent_run_id, e.step_name)
    if step in s.steps:
        raise StreamViolation(f"{_step_name(step)} was started twice")
    if len(s.steps) >= MAX_OPEN:
        raise StreamViolation(f"more than {MAX_OPEN} steps open at once")
    return evolve(s, steps=(*s.steps, step))


def _step_finished(s: Stream, e: ev.StepFinished) -> Stream:
    step = (e.subagent_run_id, e.step_name)
    if step not in s.steps:
        raise StreamViolation(f"STEP_FINISHED for {_step_name(step)}, which is not open")
    return evolve(s, steps=tuple(x for x in s.steps if x != step))


# -- tool calls --------------------------------------------------------------------


def _find_open_call(s: Stream, tool_call_id: str) -> OpenCall | None:
    for o in s.open_calls:
        if o.tool_call_id == tool_call_id:
            return o
    return None


def _index_of(s: Stream, message_id: str) -> int | None:
    """The position of the draft's newest message ``message_id``, an earlier run's
    included (AG-UI 1.0: a run may reopen or extend it)."""
    hint = s.ids.get(message_id)
    if hint is None:
        return None  # neither in the history nor ever appended to this draft
    messages = s.messages
    if hint < len(messages) and messages[hint].id == message_id and s.ids.once(message_id):
        return hint
    for i in range(len(messages) - 1, -1, -1):  # a stale hint: look
        if messages[i].id == message_id:
            return i
    return None


def _holder_of(s: Stream, tool_call_id: str) -> int | None:
    """The position of the draft's newest message holding call ``tool_call_id``, an
    earlier run's included: found through the hints as ``_index_of`` finds a message."""
    hint = s.ids.call(tool_call_id)
    if hint is None:
        return None  # neither in the history nor ever added to this draft
    messages = s.messages

    def holds(i: int) -> bool:
        m = messages[i]
        return isinstance(m, AssistantMessage) and any(
            c.id == tool_call_id for c in m.tool_calls or ()
        )

    if hint < len(messages) and holds(hint) and s.ids.once(tool_call_id):
        return hint
    for i in range(len(messages) - 1, -1, -1):  # a stale hint: look
        if holds(i):
            return i
    return None


def _appended(s: Stream, message: Message) -> PVec[Message]:
    """``s.messages`` with ``message`` at the end, its position noted."""
    s.ids.note(message.id, len(s.messages))
    return s.messages.append(message)


def _tool_call_start(
    s: Stream, tool_call_id: str, name: str, parent: str | None, tag: str | None
) -> Stream:
    """A call opened (``tag``: its start's ``subagentRunId``), or reopened by id."""
    if _find_open_call(s, tool_call_id) is not None or _adrift(s, tool_call_id, _CALL_KIND):
        raise StreamViolation(f"tool call {tool_call_id!r} was started twice")
    if len(s.open_calls) + _drifting(s, _CALL_KIND) >= MAX_OPEN:
        raise StreamViolation(f"more than {MAX_OPEN} tool calls open at once")
    held = _holder_of(s, tool_call_id)
    if held is not None:
        return _reopen_call(s, held, tool_call_id, _call_owner(s, held, tag, tool_call_id))
    call = ToolCall(id=tool_call_id, function=FunctionCall(name=name, arguments=""))
    messages = s.messages
    index: int | None = None
    if parent is not None:
        # The parent may be an earlier run's message (AG-UI 1.0): the call joins it.
        o = _find_open_text(s, parent)
        index = o.position if o is not None else _index_of(s, parent)
    if index is None or not isinstance(messages[index], AssistantMessage):
        # As AG-UI clients do: the call gets its own assistant message, with the parent's
        # id unless a message of another kind (a reasoning one, say) already has it.
        mid = parent if parent is not None and index is None else _holder_id(s, tool_call_id)
        holder = AssistantMessage(id=mid, tool_calls=(call,), subagent_run_id=tag)
        owner = tag
        index = len(messages)
        messages = _appended(s, holder)
    else:
        parent_message = messages[index]
        assert isinstance(parent_message, AssistantMessage)
        owner = _call_owner(s, index, tag, tool_call_id)
        messages = messages.set(
            index,
            evolve(parent_message, tool_calls=(*(parent_message.tool_calls or ()), call)),
        )
    s.ids.note_call(tool_call_id, index)
    opened = OpenCall(tool_call_id, index, Rope(), owner)
    return evolve(
        s,
        messages=messages,
        open_calls=(*s.open_calls, opened),
        new_calls=s.new_calls.append(tool_call_id),
    )


def _holder_id(s: Stream, tool_call_id: str) -> str:
    """The id of the message made to hold call ``tool_call_id``: the call's own, unless a
    message has it (call and message ids are separate namespaces), then ``id#2``, ...;
    the history never holds two messages of one id."""
    mid, n = tool_call_id, 1
    while _index_of(s, mid) is not None:
        n += 1
        mid = f"{tool_call_id}#{n}"
    return mid


def _reopen_call(s: Stream, held: int, tool_call_id: str, owner: str | None) -> Stream:
    """AG-UI 1.0: call ``tool_call_id``, held at ``held``, open again (``owner``: the
    opener's); further arguments append to those it has, its name and parent stand."""
    holder = s.messages[held]
    assert isinstance(holder, AssistantMessage)
    had = next(c for c in holder.tool_calls or () if c.id == tool_call_id)
    reopened = OpenCall(tool_call_id, held, Rope(had.function.arguments), owner)
    return evolve(s, open_calls=(*s.open_calls, reopened))


def _call_owner(s: Stream, index: int, tag: str | None, tool_call_id: str) -> str | None:
    """AG-UI 1.0 (Subagents): a call belongs to the owner of the message holding it (at
    ``index``). An untagged start inherits that owner; one tagged for another owner than
    a message this run opened is refused (across runs ownership tracking resets)."""
    holder = s.messages[index]
    held_by = _opener(s, index)
    if held_by is _UNSEEN:
        return tag if tag is not None else getattr(holder, "subagent_run_id", None)
    if tag is None:
        return held_by  # type: ignore[no-any-return]
    if tag != held_by:
        raise StreamViolation(
            f"tool call {tool_call_id!r} of {_owner(tag)} in message {holder.id!r}, "
            f"which {_owner(held_by)} streamed: a call belongs to its message's owner"
        )
    return tag


def _tool_call_args(s: Stream, tool_call_id: str, delta: str) -> Stream:
    calls = s.open_calls
    for i in range(len(calls) - 1, -1, -1):
        o = calls[i]
        if o.tool_call_id == tool_call_id:
            grown = with_rope(o, o.rope.append(delta))
            return with_open_calls(s, (*calls[:i], grown, *calls[i + 1 :]))
    if _adrift(s, tool_call_id, _CALL_KIND):
        return s  # as in _append_text
    raise StreamViolation(f"arguments for tool call {tool_call_id!r}, which is not open")


def _tool_call_args_event(s: Stream, e: ev.ToolCallArgs) -> Stream:
    calls = s.open_calls
    tag = e.subagent_run_id
    if (
        len(calls) == 1
        and calls[0].tool_call_id == e.tool_call_id
        and e.metadata is None
        and tag == calls[0].owner  # as in _text_content
    ):
        o = calls[0]  # as in _text_content
        return with_open_calls(s, (with_rope(o, o.rope.append(e.delta)),))
    _not_chunked(s, e.tool_call_id, _CALL_KIND, e)
    _check_call_owner(s, e)
    s = _tool_call_args(s, e.tool_call_id, e.delta)
    return _call_metadata(s, e.tool_call_id, e.metadata)


def with_call(
    holder: AssistantMessage, tool_call_id: str, change: Callable[[ToolCall], ToolCall]
) -> AssistantMessage | None:
    """``holder`` with its call ``tool_call_id`` changed, or None if it holds no such call."""
    calls = holder.tool_calls or ()
    for n, call in enumerate(calls):
        if call.id == tool_call_id:
            return _with_tool_calls(holder, (*calls[:n], change(call), *calls[n + 1 :]))
    return None


def with_arguments(holder: AssistantMessage, tool_call_id: str, text: str) -> AssistantMessage:
    """``holder`` with the arguments of its call ``tool_call_id`` set to ``text``.

    Read after every argument delta of a streaming call, so the usual case (the
    call is the holder's newest) is built directly, without a search.
    """
    calls = holder.tool_calls
    if calls and calls[-1].id == tool_call_id:
        call = calls[-1]
        changed = _with_function(call, _with_call_arguments(call.function, text))
        return _with_tool_calls(holder, (*calls[:-1], changed))
    stored = with_call(
        holder, tool_call_id, lambda c: _with_function(c, _with_call_arguments(c.function, text))
    )
    if stored is None:
        raise ValueError(f"{holder.id!r} holds no tool call {tool_call_id!r}")
    return stored


_with_tool_calls = replacer(AssistantMessage, "tool_calls")
_with_function = replacer(ToolCall, "function")
_with_call_arguments = replacer(FunctionCall, "arguments")


def _tool_call_end(s: Stream, tool_call_id: str) -> Stream:
    o = _find_open_call(s, tool_call_id)
    if o is None:
        raise StreamViolation(f"end of tool call {tool_call_id!r}, which is not open")
    holder = s.messages[o.position]
    assert isinstance(holder, AssistantMessage)
    closed = with_arguments(holder, tool_call_id, o.rope.text())  # an open call has its holder
    return evolve(
        s,
        messages=s.messages.set(o.position, closed),
        open_calls=tuple(c for c in s.open_calls if c is not o),
    )


def _check_call_owner(s: Stream, e: ev.ToolCallArgs | ev.ToolCallEnd) -> None:
    if e.subagent_run_id is None:
        return  # an untagged continuation continues whatever its opener owns
    o = _find_open_call(s, e.tool_call_id)
    entry = _adrift(s, e.tool_call_id, _CALL_KIND) if o is None else None
    if o is not None or entry is not None:
        owner = o.owner if o is not None else entry[2]  # type: ignore[index]
        _check_owner(e, owner, f"tool call {e.tool_call_id!r}")


def _tool_call_end_event(s: Stream, e: ev.ToolCallEnd) -> Stream:
    _not_chunked(s, e.tool_call_id, _CALL_KIND, e)
    _check_call_owner(s, e)
    if _find_open_call(s, e.tool_call_id) is None:
        entry = _adrift(s, e.tool_call_id, _CALL_KIND)
        if entry is not None:
            return _ashore(s, entry)
    return _call_metadata(_tool_call_end(s, e.tool_call_id), e.tool_call_id, e.metadata)


def _tool_call_chunk(s: Stream, e: ev.ToolCallChunk) -> Stream:
    lane = e.subagent_run_id
    cid = e.tool_call_id if e.tool_call_id is not None else _continued(s, lane, "call")
    if _chunk_entry(s, "call", cid, lane) is None:
        if _find_open_call(s, cid) is not None or _adrift(s, cid, _CALL_KIND):
            raise StreamViolation(_mixed("TOOL_CALL_CHUNK", cid))
        if e.tool_call_name is None:
            raise StreamViolation(f"the first TOOL_CALL_CHUNK of {cid!r} has no toolCallName")
        s = _tool_call_start(s, cid, e.tool_call_name, e.parent_message_id, lane)
        s = evolve(s, chunks=(*s.chunks, (lane, "call", cid)))
    else:
        holder = s.messages[_at(_find_open_call(s, cid), None)]
        assert isinstance(holder, AssistantMessage)
        call = next(c for c in holder.tool_calls or () if c.id == cid)
        # (parentMessageId is not compared: a parent of another kind left the call a
        # holder under its own id, so the holder's id need not be the parent named.)
        _check_repeats(cid, (("toolCallName", e.tool_call_name, call.function.name),))
    if e.delta:
        s = _tool_call_args(s, cid, e.delta)
    return _call_metadata(s, cid, e.metadata)


def _tool_call_result(s: Stream, e: ev.ToolCallResult) -> Stream:
    if e.role not in (None, "tool"):
        raise StreamViolation(f"TOOL_CALL_RESULT {e.message_id!r} has role {e.role!r}, not 'tool'")
    # R-D4: the result may name a call from before the interrupt; it attaches by id.
    msg = ToolMessage(
        id=e.message_id,
        content=e.content,
        tool_call_id=e.tool_call_id,
        metadata=e.metadata,
        subagent_run_id=e.subagent_run_id,
    )
    i = _index_of(s, e.message_id)
    if i is not None:
        # AG-UI 1.0: the result is a message of its own, with its own id; history is
        # restated by snapshots, never re-streamed. The same result again is dropped.
        held = s.messages[i]
        if isinstance(held, ToolMessage):
            # What the event cannot carry (a local tool's ``error``, an encrypted value
            # stored since) is no difference: an echo of a failed tool's result repeats it.
            msg = evolve(msg, error=held.error, encrypted_value=held.encrypted_value)
        if _restates(held, msg):
            raise StreamWarning(
                f"TOOL_CALL_RESULT {e.message_id!r} repeats a result the history holds; "
                "it was dropped"
            )
        raise StreamViolation(
            f"TOOL_CALL_RESULT {e.message_id!r} names a message id the history already "
            f"holds ({article(s.messages[i].role)} message): a result needs an id of its own"
        )
    return evolve(s, messages=_appended(s, msg))


def _encrypted_value(s: Stream, e: ev.ReasoningEncryptedValue) -> Stream:
    """Store an opaque reasoning artefact with the message or tool call it names, an
    earlier run's included, to go back unmodified in later requests. Anything else is
    dropped with a warning."""
    if e.subtype == "message":
        i = _index_of(s, e.entity_id)
        message = None if i is None else s.messages[i]
        if message is None or not hasattr(message, "encrypted_value"):  # activity, unknown
            what = (
                "which is not in the history"
                if message is None
                else f"{article(message.role)} message, which cannot hold one"
            )
            raise StreamWarning(
                f"REASONING_ENCRYPTED_VALUE for message {e.entity_id!r}, {what}; "
                "the value was dropped"
            )
        assert i is not None
        changed = evolve(message, encrypted_value=e.encrypted_value)
        return evolve(s, messages=s.messages.set(i, changed))
    if e.subtype == "tool-call":

        def store(call: ToolCall) -> ToolCall:
            return evolve(call, encrypted_value=e.encrypted_value)

        i = _holder_of(s, e.entity_id)
        if i is not None:
            holder = s.messages[i]
            assert isinstance(holder, AssistantMessage)
            stored = with_call(holder, e.entity_id, store)
            assert stored is not None
            return evolve(s, messages=s.messages.set(i, stored))
        raise StreamWarning(
            f"REASONING_ENCRYPTED_VALUE for tool call {e.entity_id!r}, which is not in "
            "the history; the value was dropped"
        )
    raise StreamWarning(
        f"REASONING_ENCRYPTED_VALUE with unknown subtype {e.subtype!r}; the value was dropped"
    )


# -- snapshots, deltas, activities ---------------------------------------------------


def _patched(
    doc: JSON, ops: Any, what: str, skipped: list[str], *, flat_root: bool = False
) -> JSON:
    try:
        return apply_patch(doc, ops, flat_root=flat_root, skipped=skipped)
    except PatchError as exc:
        raise StreamViolation(f"invalid {what}: {exc}") from None


def _with_skipped(s: Stream, skipped: list[str], what: str) -> Stream:
    """``s``, or a warning carrying it when the patch had ops it left out (AG-UI 1.0:
    unrecognised material is dropped with a warning, the rest applied)."""
    if skipped:
        raise StreamWarning(f"{what}: left out {'; '.join(skipped)}", applied=s)
    return s


def _state_delta(s: Stream, e: ev.StateDelta) -> Stream:
    skipped: list[str] = []
    patched = with_state(s, _patched(s.state, e.delta, "STATE_DELTA patch", skipped))
    return _with_skipped(patched, skipped, "STATE_DELTA") if skipped else patched


def _restates(held: Message, given: Message) -> bool:
    """Whether a snapshot's ``given`` copy is the ``held`` message exactly: ``==``, and
    every value of the same kind (``==`` takes ``true`` for ``1`` and ``1.0`` for ``1``,
    which JSON tells apart), so keeping the held object loses nothing the agent said."""
    if given != held:
        return False
    stack: list[tuple[object, object]] = [(held, given)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        cls = type(x)
        if cls is not type(y):
            return False
        if isinstance(x, Mapping):
            stack.extend((v, y[k]) for k, v in x.items())  # type: ignore[index]
        elif isinstance(x, tuple | PVec):
            stack.extend(zip(x, y, strict=True))  # type: ignore[call-overload]
        elif attrs.has(cls):
            stack.extend((getattr(x, f.name), getattr(y, f.name)) for f in attrs.fields(cls))
    return True


def _messages_snapshot(s: Stream, e: ev.MessagesSnapshot) -> Stream:
    """Reconciled by id, as AG-UI 1.0 (State) says: a message the snapshot names is
    replaced in place, one it does not name is dropped (but activity and reasoning
    messages, which a producer may not track, unless the snapshot carries that role),
    and the snapshot's new messages are appended in its order. An unchanged message
    keeps its object, so the history shares what it can.

    The snapshot opens and closes nothing: a message or call streaming through it goes
    on, from the snapshot's text. One it leaves no place for (it drops it, or restates
    it as a message its stream cannot go on in: another lane, no text) is set adrift,
    with a warning: still open, its content dropped until its end; a later snapshot
    that restates it gives it back its place."""
    was_open = [(o.message_id, o.reasoning, o.owner) for o in s.open_texts]
    was_open += [(i, kind == "reasoning", who) for kind, i, who in s.adrift if kind != "call"]
    calls_open = [(c.tool_call_id, c.owner) for c in s.open_calls]
    calls_open += [(i, who) for kind, i, who in s.adrift if kind == "call"]
    s = close_all(s)
    given = {m.id: m for m in e.messages}
    roles = {m.role for m in e.messages}
    kept_roles = {"activity", "reasoning"} - roles
    merged: list[Message] = []
    placed: set[str] = set()
    for m in s.messages:
        new = given.get(m.id)
        if new is not None and m.id not in placed:
            merged.append(m if _restates(m, new) else new)
            placed.add(m.id)
        elif new is None and m.role in kept_roles:
            merged.append(m)
    merged.extend(m for m in e.messages if m.id not in placed)
    messages = PVec.from_iterable(merged)
    # What this run opened keeps its opener through the snapshot (which opens nothing);
    # what the snapshot dropped goes with it.
    present = {m.id for m in merged}
    opened = [*s.owners.items()]
    opened += ((m.id, getattr(m, "subagent_run_id", None)) for m in s.messages[s.fresh :])
    owners = PMap.from_frozen_items((k, v) for k, v in opened if k in present)
    out = evolve(
        s,
        messages=messages,
        base=0,
        fresh=len(messages),
        ids=IdHints(messages),
        owners=owners,
    )
    adrift: list[_Adrift] = []
    for mid, reasoning, owner in was_open:
        i = _index_of(out, mid)
        if i is not None and _goes_on_in(out.messages[i], reasoning):
            # Still the stream its START opened: the opener's owner stands. (_goes_on_in
            # has checked what _reopen_text refuses: it holds text of the same lane.)
            out = _reopen_text(out, i, out.messages[i], owner)
        else:
            adrift.append(("reasoning" if reasoning else "text", mid, owner))
    for cid, owner in calls_open:
        held = _holder_of(out, cid)
        if held is not None:
            out = _reopen_call(out, held, cid, owner)  # its arguments as they stand
        else:
            adrift.append(("call", cid, owner))
    notes = []
    if adrift:
        out = evolve(out, adrift=tuple(adrift))
        names = [_item(kind, item) for kind, item, _ in adrift]
        notes.append(
            f"MESSAGES_SNAPSHOT left no place for {listed(names)} while streaming (dropped, "
            "or restated as a message it cannot continue): open until ended, its content "
            "dropped"
        )
    if notes:
        raise StreamWarning("; ".join(notes), applied=out)
    return out


def _goes_on_in(message: Message, reasoning: bool) -> bool:
    """Whether a text stream of its lane can go on in ``message``: one of the same lane
    holding text, or nothing yet (content parts would be replaced by the text)."""
    content = getattr(message, "content", None)
    return (
        type(message) in WITH_CONTENT
        and isinstance(message, ReasoningMessage) == reasoning
        and (content is None or isinstance(content, str))
    )


def _activity_snapshot(s: Stream, e: ev.ActivitySnapshot) -> Stream:
    i = _index_of(s, e.message_id)
    had = None if i is None else s.messages[i]
    if had is not None and not isinstance(had, ActivityMessage):
        # Replacing it would lose a message of another kind (a user's, or one still
        # streaming, whose deltas would have nowhere to go).
        raise StreamViolation(
            f"ACTIVITY_SNAPSHOT for {e.message_id!r}, which names "
            f"{article(had.role)} message, not an activity"
        )
    msg = ActivityMessage(
        id=e.message_id,
        activity_type=e.activity_type,
        content=e.content,
        # Metadata so far survives a replacing snapshot; attribution is re-minted
        # (AG-UI 1.0, Activity).
        metadata=_merged(None if had is None else had.metadata, e.metadata),
        subagent_run_id=e.subagent_run_id,
    )
    if i is None:
        return evolve(s, messages=_appended(s, msg))
    if e.replace is False:
        return s
    # A replacing snapshot re-mints the activity: its attribution, and its opener.
    owners = s.owners
    if i < s.fresh or e.message_id in owners:
        owners = owners.with_member(e.message_id, e.subagent_run_id)
    return evolve(s, messages=s.messages.set(i, msg), owners=owners)


def _activity_delta(s: Stream, e: ev.ActivityDelta) -> Stream:
    i = _index_of(s, e.message_id)
    if i is None or not isinstance(s.messages[i], ActivityMessage):
        # AG-UI 1.0 (Activity): skipped with a warning; it MUST NOT fail the run.
        what = (
            "no message" if i is None else f"{article(s.messages[i].role)} message, not an activity"
        )
        raise StreamWarning(
            f"ACTIVITY_DELTA for {e.message_id!r}, which names {what}; the delta was skipped"
        )
    current = s.messages[i]
    assert isinstance(current, ActivityMessage)
    opener = _opener(s, i)
    if opener is not _UNSEEN and e.subagent_run_id is not None:
        # Ownership is tracked within a run (AG-UI 1.0, Subagents).
        _check_owner(e, opener, f"activity {e.message_id!r}")
    # The content is typed as a FrozenDict: kept one, so a wide activity costs one C-level
    # copy per delta, not a PMap built from it and copied back every time.
    skipped: list[str] = []
    patched = _patched(current.content, e.patch, "ACTIVITY_DELTA patch", skipped, flat_root=True)
    content = as_object(patched)
    if content is None:
        raise StreamViolation("an ACTIVITY_DELTA patch made the activity content a non-object")
    # The delta's activityType replaces the message's (AG-UI 1.0: a delta may retype).
    changed = evolve(
        current,
        content=content,
        activity_type=e.activity_type,
        metadata=_merged(current.metadata, e.metadata),
    )
    return _with_skipped(evolve(s, messages=s.messages.set(i, changed)), skipped, "ACTIVITY_DELTA")


CONTENT_HANDLERS: dict[type[Any], Callable[[Stream, Any], Stream]] = {
    # Events not listed carry no content and leave the draft as it is: raw, custom,
    # subagent lifecycle, reasoning phases. (The reducer drops unknown types itself.)
    ev.StepStarted: _step_started,
    ev.StepFinished: _step_finished,
    ev.TextMessageStart: _text_start,
    ev.TextMessageContent: _text_content,
    ev.TextMessageEnd: _text_end,
    ev.TextMessageChunk: _text_chunk,
    ev.ReasoningMessageStart: _reasoning_start,
    ev.ReasoningMessageContent: _reasoning_content,
    ev.ReasoningMessageEnd: _text_end,
    ev.ReasoningMessageChunk: _reasoning_chunk,
    ev.ToolCallStart: lambda s, e: _call_metadata(
        _tool_call_start(
            s, e.tool_call_id, e.tool_call_name, e.parent_message_id, e.subagent_run_id
        ),
        e.tool_call_id,
        e.metadata,
    ),
    ev.ToolCallArgs: _tool_call_args_event,
    ev.ToolCallEnd: _tool_call_end_event,
    ev.ToolCallChunk: _tool_call_chunk,
    ev.ToolCallResult: _tool_call_result,
    ev.StateSnapshot: lambda s, e: evolve(s, state=e.snapshot),
    ev.StateDelta: _state_delta,
    ev.MessagesSnapshot: _messages_snapshot,
    ev.ActivitySnapshot: _activity_snapshot,
    ev.ActivityDelta: _activity_delta,
    ev.ReasoningEncryptedValue: _encrypted_value,
}


def close_all(s: Stream) -> Stream:
    """Join every open text and argument rope into its message (at a run's end); what
    is adrift has no message and just ends."""
    for o in s.open_texts:
        s = _end_text(s, o.message_id)
    for c in s.open_calls:
        s = _tool_call_end(s, c.tool_call_id)
    return evolve(s, adrift=()) if s.adrift else s
