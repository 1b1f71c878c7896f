"""Local tools: the shapes a driver accepts, and the signal that tells one it was cancelled.

Shared by every driver, so a tool written for the :class:`~.trio.TrioDriver`
runs unchanged under the :class:`~.fake.FakeDriver` in tests.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

import anyio
import attrs

__all__ = ["LocalTool", "ToolShape", "ToolSignal", "no_function"]

LocalTool = Callable[..., Any]
"""A local tool: ``fn(arguments)`` or ``fn(arguments, signal)``, sync or async.

Async tools run on the event loop; sync tools run in a worker thread. The
return value (a JSON value or text) becomes the tool message; an exception
becomes a tool message that names it.
"""


class ToolSignal:
    """Tells a running local tool that it was cancelled (stop, thread change, shutdown).

    An async tool is also cancelled at its next ``await``; a sync tool in a
    worker thread cannot be interrupted, so it should poll :attr:`cancelled` or
    block in :meth:`wait_blocking`: the driver abandons its thread and ignores
    its result either way.
    """

    def __init__(self) -> None:
        self._flag = threading.Event()
        self._waiters: list[anyio.Event] = []

    @property
    def cancelled(self) -> bool:
        return self._flag.is_set()

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """Block this (worker) thread until cancelled; False if ``timeout`` ran out first."""
        return self._flag.wait(timeout)

    async def wait(self) -> None:
        """Wait on the event loop until cancelled."""
        if self.cancelled:
            return
        event = anyio.Event()
        self._waiters.append(event)
        await event.wait()

    def _cancel(self) -> None:  # on the loop thread only
        self._flag.set()
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()


@attrs.frozen
class ToolShape:
    """How to call one local tool: awaited or not, with a signal or not."""

    fn: LocalTool
    is_async: bool
    takes_signal: bool

    def arguments(self, arguments: Any, signal: ToolSignal) -> tuple[Any, ...]:
        return (arguments, signal) if self.takes_signal else (arguments,)

    @classmethod
    def of(cls, fn: LocalTool) -> ToolShape:
        call = type(fn).__call__  # an object whose __call__ is async counts too
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
        try:  # an async function behind a functools.wraps decorator: its wrapper returns
            inner = inspect.unwrap(fn)  # the coroutine, awaited as an async tool's result
        except ValueError:  # a __wrapped__ cycle
            inner = fn
        is_async = is_async or inspect.iscoroutinefunction(inner)
        return cls(fn, is_async, _takes_two_arguments(fn))


def _takes_two_arguments(fn: LocalTool) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature: pass the arguments only
        return False
    positional = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


def no_function(name: str) -> LookupError:
    """The failure of a call to a tool declared local but given no function: one text for
    every driver, as the tool message the agent reads."""
    return LookupError(f"no function was registered for local tool {name!r}")
