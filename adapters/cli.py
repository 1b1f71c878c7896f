"""``interlude chat [URL]``: talk to an AG-UI 1.0 agent that pauses for a human.

Without a URL it serves the embedded reference agent on 127.0.0.1 (an
ephemeral port) and talks to it over real HTTP, so the whole product can be
tried with nothing else running. The pieces: :mod:`.cli_session` (the prompt
loop and unattended scripts), :mod:`.cli_ask` and :mod:`.cli_forms` (the
answer form), :mod:`.cli_console` (terminal I/O), :mod:`.cli_log` (``--log``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TextIO

import attrs
import httpx
import trio

from interlude.core.errors import UsageError
from interlude.core.json import freeze
from interlude.core.options import Options
from interlude.core.wire.run_input import Tool

from .agent_scenarios import expiry_argument
from .cli_console import Console
from .cli_log import LoggingTransport
from .cli_script import Script, ScriptError
from .cli_session import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, Session
from .httpx import HttpxTransport, checked_headers, endpoint_url, redacted
from .trio import Transport, TrioDriver

__all__ = ["ChatConfig", "build_parser", "get_local_time", "main", "run", "run_chat"]

LOCAL_TIME_TOOL = Tool(
    name="get_local_time",
    description="The user's local time and time zone, read from this computer's clock.",
    parameters=freeze({"type": "object", "properties": {}, "additionalProperties": False}),
)


def get_local_time(arguments: Any) -> str:
    """The user's local time and time zone (a frontend tool the agent may call)."""
    return datetime.now().astimezone().strftime("%H:%M:%S %Z")


@attrs.frozen(kw_only=True)
class ChatConfig:
    """Everything ``interlude chat`` was asked to do, checked before the event loop starts."""

    url: str | None = None
    headers: Mapping[str, str] = attrs.Factory(dict)
    thread_id: str | None = None
    script: Script | None = None
    log: TextIO | None = None
    agent_expires_in: float | None = None
    banner: str | None = None
    """Extra lines for the interactive banner (the demo's suggestion)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interlude", description="A terminal client for AG-UI 1.0 agents that pause for you."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = commands.add_parser(
        "chat",
        help="chat with an agent and answer its questions",
        description="Chat with an AG-UI 1.0 agent. Without URL, an embedded reference agent "
        "is started on 127.0.0.1 (try: buy an espresso machine).",
    )
    chat.add_argument("url", nargs="?", metavar="URL", help="the agent's AG-UI endpoint")
    chat.add_argument(
        "--answers",
        metavar="FILE",
        help='run unattended: JSON {"messages": [...], "answers": {interrupt id: answer}}',
    )
    chat.add_argument(
        "--log", metavar="FILE", help="append every request and SSE event as JSON lines"
    )
    chat.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every request (repeatable; a later one of the same name "
        "replaces an earlier)",
    )
    chat.add_argument("--thread", metavar="ID", help="the thread id to start with")
    chat.add_argument(
        "--agent-expires-in",
        type=expiry_argument,
        metavar="SECONDS",
        help="embedded agent only: every interrupt expires after this many seconds",
    )
    chat.set_defaults(parser=chat)  # errors in the checks below show chat's usage
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``interlude`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "chat":
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        config = _config(parser, args)
    except ScriptError as exc:
        print(f"interlude: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run(config)


def run(config: ChatConfig) -> int:
    """Run ``interlude chat`` with ``config`` on this terminal; the exit code."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # started with that descriptor closed (`>&-`)
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):  # never crash on a character it cannot show
            stream.reconfigure(errors="replace")
    code = EXIT_FAILED
    try:
        code = trio.run(run_chat, config)
    except* BrokenPipeError:  # `interlude chat ... | head`: the reader left
        _discard_stdout()
    except* KeyboardInterrupt:  # Ctrl-C before the session could take it over
        code = EXIT_INTERRUPTED
        with contextlib.suppress(OSError):
            print("\ninterrupted", file=sys.stderr)
    finally:
        if config.log is not None:
            config.log.close()
    return code


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _config(top: argparse.ArgumentParser, args: argparse.Namespace) -> ChatConfig:
    parser: argparse.ArgumentParser = getattr(args, "parser", top)
    headers: dict[str, str] = {}
    for n, raw in enumerate(args.header, 1):
        name, colon, value = raw.partition(":")
        if not colon or not name.strip() or any(c.isspace() for c in name.strip()):
            # Not quoted: a header given wrongly may still hold a credential.
            parser.error(f"--header number {n} is not written as 'Name: value'")
        name = name.strip()
        for given in [k for k in headers if k.lower() == name.lower()]:
            del headers[given]  # a later --header replaces an earlier one of the same name
        headers[name] = value.strip()
    try:
        checked_headers(headers)
        if args.url is not None:
            endpoint_url(args.url)
    except UsageError as exc:
        parser.error(str(exc))
    if args.thread is not None and not args.thread:
        parser.error("--thread: give a non-empty thread id, or leave it out for a new one")
    if args.agent_expires_in is not None and args.url is not None:
        parser.error("--agent-expires-in applies to the embedded agent only (no URL)")
    script = Script.load(args.answers) if args.answers else None
    log: TextIO | None = None
    if args.log:
        try:
            log = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - closed by main
        except OSError as exc:
            parser.error(f"cannot open the log file {args.log}: {exc.strerror}")
    return ChatConfig(
        url=args.url,
        headers=headers,
        thread_id=args.thread,
        script=script,
        log=log,
        agent_expires_in=args.agent_expires_in,
    )


async def run_chat(
    config: ChatConfig,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Serve the embedded agent if needed, connect, and run the session; the exit code."""
    console = Console(
        stdout or sys.stdout,
        stderr or sys.stderr,
        None if config.script is not None else (stdin or sys.stdin),
    )
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            url = config.url
            if url is None:
                if importlib.util.find_spec("hypercorn") is None:
                    console.error(
                        "error: the embedded agent needs hypercorn: pip install 'interlude[server]'"
                        ", or give the URL of an AG-UI endpoint: interlude chat URL"
                    )
                    return EXIT_USAGE
                try:
                    url = await nursery.start(partial(_serve_embedded, config.agent_expires_in))
                except OSError as exc:
                    console.error(f"error: the embedded agent could not start: {exc}")
                    return EXIT_FAILED
            try:
                return await _talk(config, console, url, signals)
            finally:
                nursery.cancel_scope.cancel()


async def _serve_embedded(
    expires_in: float | None, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    # Imported here: hypercorn is needed only when no URL is given.
    from .agent import ReferenceAgent, serve_agent

    await serve_agent(ReferenceAgent(expires_in=expires_in), task_status=task_status)


async def _talk(config: ChatConfig, console: Console, url: str, signals: AsyncIterator[int]) -> int:
    http = HttpxTransport(url, headers=dict(config.headers))
    wire: Transport = http if config.log is None else LoggingTransport(http, config.log)
    options = Options(tools=(LOCAL_TIME_TOOL,))
    async with http, TrioDriver(wire) as driver:
        chat = driver.chat(
            options, local_tools={LOCAL_TIME_TOOL.name: get_local_time}, thread_id=config.thread_id
        )
        session = Session(chat, console, now=driver.now, secrets=_secrets(config, url))
        async with trio.open_nursery() as nursery:
            console.reading_in(nursery)
            nursery.start_soon(_on_ctrl_c, signals, session)
            if config.script is not None:
                code = await session.scripted(config.script)
            else:
                code = await session.interactive(_banner(config, url))
            nursery.cancel_scope.cancel()
    return code


def _secrets(config: ChatConfig, url: str) -> list[str]:
    """What an error body must not show if the endpoint echoes the request: every header
    value, and its long words (a token without its "Bearer "); the URL's userinfo and
    query values."""
    found: list[str] = []
    for value in config.headers.values():
        found.append(value)
        found.extend(word for word in value.split() if len(word) >= 8)
    parsed = httpx.URL(url)
    found += [parsed.username, parsed.password]
    found += [value for _, value in parsed.params.multi_items()]
    return [secret for secret in found if len(secret) >= 6]  # not a word of every body


async def _on_ctrl_c(signals: AsyncIterator[int], session: Session) -> None:
    async for _ in signals:
        session.interrupt()


def _banner(config: ChatConfig, url: str) -> str:
    shown = redacted(url)  # the screen may be shared or recorded: no credentials
    where = f"{shown} (the embedded reference agent)" if config.url is None else shown
    lines = [f"interlude chat: talking to {where}"]
    if config.banner:
        lines.append(config.banner)
    lines.append("Type a message and press Enter; /help lists commands, /quit or Ctrl-D exits.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
