"""The terminal client, driven as a person would: ``interlude chat`` in a pseudo-terminal.

Each test spawns the real client (``python -m interlude.adapters.cli chat``), which
serves its embedded reference agent on 127.0.0.1 and talks to it over HTTP. Every
wait has a timeout; no test needs more than a few seconds.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
import trio

from interlude.adapters import agent as agent_module
from interlude.adapters import cli as cli_module
from interlude.adapters.agent import Fault, ReferenceAgent, serve_agent
from interlude.adapters.agent import main as agent_main
from interlude.adapters.cli import ChatConfig, _secrets, run_chat
from interlude.adapters.cli import main as cli_main
from interlude.adapters.cli_console import Console
from interlude.adapters.cli_log import LoggingTransport
from interlude.adapters.cli_script import Script
from interlude.adapters.cli_session import Session, describe_error
from interlude.adapters.cli_transcript import Transcript
from interlude.core.errors import TransportError
from interlude.core.reducer import MAX_WARNINGS
from interlude.core.wire.messages import AssistantMessage, FunctionCall, ToolCall

PY = sys.executable
TIMEOUT = 20


def env() -> dict[str, str]:
    """A dumb terminal: the client must work without any escape sequences."""
    return {**os.environ, "TERM": "dumb", "PYTHONFAULTHANDLER": "1"}


class Chat:
    """A spawned ``interlude chat`` with everything it printed kept for the final checks."""

    def __init__(self, *args: str) -> None:
        self.log = io.StringIO()
        self.child = pexpect.spawn(
            PY,
            ["-m", "interlude.adapters.cli", "chat", *args],
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(50, 200),
            env=env(),
        )
        self.child.logfile_read = self.log

    def expect(self, pattern: str) -> None:
        self.child.expect_exact(pattern)

    def answer(self, prompt: str, line: str) -> None:
        self.expect(prompt)
        self.child.sendline(line)

    def quit(self) -> str:
        """Type /quit at the next prompt; the whole output, checked for tracebacks."""
        self.answer("you> ", "/quit")
        return self.finish()

    def finish(self, status: int = 0) -> str:
        self.child.expect(pexpect.EOF)
        self.child.close()
        out = self.log.getvalue()
        assert "Traceback" not in out, out
        assert self.child.exitstatus == status, out
        return out


@pytest.fixture
def chat() -> Iterator[Callable[..., Chat]]:
    spawned: list[Chat] = []

    def start(*args: str) -> Chat:
        spawned.append(Chat(*args))
        return spawned[-1]

    yield start
    for c in spawned:
        if c.child.isalive():
            c.child.terminate(force=True)


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "interlude.adapters.cli", "chat", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
    )


def write_json(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


# -- interactive ---------------------------------------------------------------------------


def test_r_b1_approve_with_edits_and_pick_an_address(chat: Callable[..., Chat]) -> None:
    c = chat()
    c.expect("embedded reference agent")
    c.answer("you> ", "buy an espresso machine")
    c.expect("agent> I can order the espresso machine for you.")
    c.expect("The agent is waiting for your answer (2 questions).")
    c.expect("[1/2] Approve this purchase?")
    c.answer("approved (y/n): ", "y")
    c.answer("quantity (whole number, 1 to 10, Enter to skip): ", "2")
    c.expect("[2/2] Which address?")
    c.expect("1) address-123")
    c.answer("addressId (1-2): ", "1")
    c.expect("resuming…")
    c.expect("agent> Ordered 2 espresso machines, shipping to address-123.")
    c.answer("you> ", "/state")
    c.expect('"address": "address-123"')
    c.quit()


def test_r_b1_cancel_answer_is_sent_as_a_cancellation(chat: Callable[..., Chat]) -> None:
    c = chat()
    c.answer("you> ", "buy an espresso machine")
    c.answer("approved (y/n): ", "cancel")
    c.expect("-> purchase: cancelled")
    c.answer("addressId (1-2): ", "2")
    c.expect("agent> Purchase abandoned.")
    c.quit()


def test_r_b3_invalid_answer_is_reasked_with_problems(chat: Callable[..., Chat]) -> None:
    c = chat()
    c.answer("you> ", "buy an espresso machine")
    c.answer("approved (y/n): ", "perhaps")
    c.expect("answer y or n")
    c.answer("approved (y/n): ", "yes")
    c.answer("Enter to skip): ", "11")
    c.expect("quantity must be smaller than or equal to 10")
    c.answer("Enter to skip): ", "3")
    c.answer("addressId (1-2): ", "9")
    c.expect("choose a number from 1 to 2")
    c.answer("addressId (1-2): ", "address-456")
    c.expect("Ordered 3 espresso machines, shipping to address-456.")
    c.quit()


def test_r_g2_expired_batch_offers_a_new_thread(chat: Callable[..., Chat]) -> None:
    c = chat("--agent-expires-in", "1")
    c.answer("you> ", "buy an espresso machine")
    c.expect("expires in 1s")
    c.expect("approved (y/n): ")
    c.expect("The agent's questions expired")  # while the form was open (R-G3 timer)
    c.answer("Start a new thread? (y/n): ", "y")
    c.expect("(new thread ")
    c.answer("you> ", "hello")
    c.expect("agent> You said: hello")
    c.quit()


def test_slash_new_abandons_the_form_and_ctrl_d_exits(chat: Callable[..., Chat]) -> None:
    c = chat()
    c.answer("you> ", "buy an espresso machine")
    c.answer("approved (y/n): ", "/new")
    c.expect("(new thread ")
    c.expect("you> ")
    c.child.sendeof()
    c.finish()


def test_ctrl_c_stops_a_streaming_reply(chat: Callable[..., Chat]) -> None:
    c = chat()
    c.answer("you> ", "long 300000")
    c.child.searchwindowsize = 4096
    c.expect("token1 ")
    c.child.sendintr()
    c.expect("stopped (Ctrl-C)")
    c.expect("(the unfinished reply above was discarded)")
    c.child.searchwindowsize = None
    c.answer("you> ", "hello")
    c.expect("agent> You said: hello")
    c.quit()


def test_unreachable_url_is_explained_without_a_traceback(chat: Callable[..., Chat]) -> None:
    c = chat("http://127.0.0.1:9/")
    c.answer("you> ", "hello")
    c.expect("error (TransportError): could not connect to http://127.0.0.1:9/")
    c.expect("check that the agent is running and the URL is right")
    c.expect("type /retry to try again")
    c.quit()


# -- unattended: --answers, --log, the demo ---------------------------------------------------


def test_answers_file_runs_unattended_and_log_records_the_wire(tmp_path: Path) -> None:
    script = {
        "messages": ["buy an espresso machine", "what time is it"],
        "answers": {
            "purchase": {"approved": True},
            "shipping-address": {"addressId": "address-123"},
        },
    }
    log = tmp_path / "wire.jsonl"
    done = run_cli("--answers", write_json(tmp_path / "a.json", script), "--log", str(log))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "you> buy an espresso machine" in done.stdout
    assert '-> purchase: {"approved": true}' in done.stdout
    assert "resuming…" in done.stdout
    assert "agent> Ordered 1 espresso machine, shipping to address-123." in done.stdout
    assert "agent> Your local time is" in done.stdout

    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert all({"ts", "direction", "request"} <= line.keys() for line in lines)
    sends = [line for line in lines if line["direction"] == "send"]
    assert len(sends) == 4  # buy, resume, time, the local tool's follow-up
    resume = [s["body"]["resume"] for s in sends if s["body"].get("resume")]
    assert resume == [
        [
            {"interruptId": "purchase", "status": "resolved", "payload": {"approved": True}},
            {
                "interruptId": "shipping-address",
                "status": "resolved",
                "payload": {"addressId": "address-123"},
            },
        ]
    ]
    received = [line["data"]["type"] for line in lines if line["direction"] == "receive"]
    assert received[0] == "RUN_STARTED"
    assert received.count("RUN_FINISHED") == 4
    assert "never asked" not in done.stderr  # every answer was used


def test_answers_the_agent_never_asked_for_are_named(tmp_path: Path) -> None:
    script = {
        "messages": ["buy an espresso machine"],
        "answers": {
            "purchase": "cancel",
            "shipping-address": "cancel",
            "shiping-adress": {"addressId": "address-123"},
        },
    }
    done = run_cli("--answers", write_json(tmp_path / "a.json", script))
    assert done.returncode == 0, done.stderr
    assert "note: the agent never asked 'shiping-adress'; those answers were not used" in (
        done.stderr
    )


def test_answers_file_cancel_and_missing_answer(tmp_path: Path) -> None:
    cancel = {
        "messages": ["buy an espresso machine"],
        "answers": {"purchase": "cancel", "shipping-address": "cancel"},
    }
    done = run_cli("--answers", write_json(tmp_path / "c.json", cancel))
    assert done.returncode == 0, done.stderr
    assert "Purchase abandoned." in done.stdout

    missing = {"messages": ["buy an espresso machine"], "answers": {"purchase": {"approved": True}}}
    done = run_cli("--answers", write_json(tmp_path / "m.json", missing))
    assert done.returncode == 2
    assert "no scripted answer for interrupt 'shipping-address' (Which address?)" in done.stderr
    assert "Traceback" not in done.stderr


def test_answers_file_wrong_answer_or_file(tmp_path: Path) -> None:
    wrong = {
        "messages": ["buy an espresso machine"],
        "answers": {"purchase": {"approved": "yes"}, "shipping-address": {"addressId": "moon"}},
    }
    done = run_cli("--answers", write_json(tmp_path / "w.json", wrong))
    assert done.returncode == 2
    assert "'purchase' does not fit its schema: approved must be boolean" in done.stderr
    assert "addressId must be one of" in done.stderr

    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    done = run_cli("--answers", str(bad))
    assert done.returncode == 2
    assert "is not JSON" in done.stderr and "Traceback" not in done.stderr


def test_an_answers_file_nested_too_deeply_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """json.loads raises RecursionError (not ValueError) past about a thousand levels."""
    deep = tmp_path / "deep.json"
    nested = "[" * 100_000 + "]" * 100_000
    deep.write_text('{"messages": [], "answers": {"q": ' + nested + "}}", encoding="utf-8")
    assert cli_main(["chat", "--answers", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "is nested too deeply" in err and "Traceback" not in err


def test_an_unattended_run_with_stdout_closed_still_runs_and_logs(tmp_path: Path) -> None:
    """Python sets sys.stdout to None when descriptor 1 is closed (cron, `>&-`): the
    first line written raised AttributeError, a traceback instead of the run."""
    answers = write_json(tmp_path / "a.json", {"messages": ["hello"]})
    log = tmp_path / "wire.jsonl"
    done = subprocess.run(
        [PY, "-m", "interlude.adapters.cli", "chat", "--answers", answers, "--log", str(log)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=TIMEOUT,
        env=env(),
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    wire = log.read_text(encoding="utf-8")
    assert '"delta": "hello"' in wire and '"outcome": {"type": "success"}' in wire


def test_demo_walkthrough_runs_without_a_terminal() -> None:
    done = subprocess.run(
        [PY, "-m", "interlude.adapters.demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "The agent asks 2 question(s):" in out
    assert "resuming…" in out
    assert "agent> Ordered 1 espresso machine, shipping to address-123." in out
    assert "[tool call] get_local_time {}" in out
    assert "agent> Your local time is" in out
    assert "Traceback" not in out + done.stderr


# -- endpoints that fail ------------------------------------------------------------------------


def serve(status: int, content_type: str, body: bytes) -> tuple[str, Callable[[], None]]:
    """A tiny HTTP server answering every POST the same way; its URL and a stopper."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}/agent", stop


@pytest.mark.parametrize(
    ("status", "content_type", "body", "expected"),
    [
        (
            500,
            "text/plain",
            b"Internal Server Error: the database is on fire",
            [
                "error (TransportError): the endpoint http://127.0.0.1:",
                "the response said: Internal Server Error: the database is on fire",
                "try again in a moment",
            ],
        ),
        (
            200,
            "text/event-stream",
            b"data: <html>garbage</html>\n\n",
            ["error (ProtocolError): the frame is not JSON", "is the URL an AG-UI agent endpoint?"],
        ),
        (
            200,
            "text/html",
            b"<html>not an agent</html>",
            ["error (ProtocolError)", "not text/event-stream"],
        ),
    ],
)
def test_failing_endpoint_is_explained_without_a_traceback(
    tmp_path: Path, status: int, content_type: str, body: bytes, expected: list[str]
) -> None:
    url, stop = serve(status, content_type, body)
    try:
        done = run_cli(url, "--answers", write_json(tmp_path / "a.json", {"messages": ["hi"]}))
    finally:
        stop()
    assert done.returncode == 1
    for text in expected:
        assert text in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_bad_arguments_are_usage_errors() -> None:
    done = run_cli("ftp://example.com/")
    assert done.returncode == 2 and "http:// or https://" in done.stderr
    done = run_cli("--header", "no colon here")
    assert done.returncode == 2 and "'Name: value'" in done.stderr


@pytest.mark.parametrize(
    ("args", "code", "shown"),
    [
        (["--header", "Authorization Bearer SECRET"], 2, "--header number 1 is not written"),
        (["--header", "Authorization: Bearer SECRET\u00e9"], 2, "header 'Authorization'"),
        (["ftp://user:SECRET@example.com/agent?token=SECRET"], 2, "'ftp://example.com/agent?..."),
        # stdin is empty, so the session ends at once: the banner is what is checked.
        (["http://user:SECRET@127.0.0.1:1/agent?token=SECRET"], 0, "http://127.0.0.1:1/agent"),
    ],
    ids=["header without colon", "header not ASCII", "bad url", "banner"],
)
def test_the_cli_never_prints_a_credential(args: list[str], code: int, shown: str) -> None:
    """Its output is seen on shared screens and in CI logs: the banner and every error
    name the endpoint without userinfo or query, and never quote a header's value."""
    done = run_cli(*args)
    assert done.returncode == code
    assert shown in done.stdout + done.stderr
    assert "SECRET" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--thread", ""], "--thread: give a non-empty thread id"),
        (["--header", "X-Name: é"], "the value of header 'X-Name' must be ASCII text"),
        (["--header", "X: a\x00b"], "must be ASCII text on one line"),
        (["localhost:8000"], "did you mean 'http://localhost:8000'"),
        (["--agent-expires-in", "nan"], "above 0 and at most 31622400"),
        (["--agent-expires-in", "1e308"], "above 0 and at most 31622400"),
        (["--agent-expires-in", "0"], "above 0"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_more_bad_arguments_are_usage_errors_with_the_chat_usage(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and a line that says what to change, not a traceback at run time."""
    with pytest.raises(SystemExit) as exited:
        cli_main(["chat", *args])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert says in err and "usage: interlude chat" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "99999"], "a port is a number from 0 to 65535"),
        (["--port", "65536"], "a port is a number from 0 to 65535"),
        (["--port", "-1"], "a port is a number from 0 to 65535"),
        (["--port", "http"], "a port is a number from 0 to 65535"),
        (["--expires-in", "inf"], "an interrupt lifetime is a number of seconds"),
    ],
)
def test_the_agent_command_refuses_bad_arguments(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        agent_main(args)
    assert exited.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "serves_on"),
    [
        ([], ("127.0.0.1", 8000)),
        (["--port", "0"], ("127.0.0.1", 0)),
        (["--port", "65535", "--host", "::1"], ("::1", 65535)),
    ],
)
def test_the_agent_command_takes_every_port_from_0_to_65535(
    args: list[str], serves_on: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounds are ports too (the refusals are above), and 8000 is the default."""
    served: list[tuple[str, int]] = []

    async def serve(agent: ReferenceAgent, host: str, port: int) -> None:
        served.append((host, port))

    monkeypatch.setattr(agent_module, "_serve_until_signalled", serve)
    assert agent_main(args) == 0
    assert served == [serves_on]


def test_the_agent_command_says_why_it_cannot_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert agent_main(["--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"error: cannot serve on 127.0.0.1:{port}:" in err and "in use" in err
    assert "Traceback" not in err


def test_the_reference_agent_refuses_an_expiry_it_cannot_write() -> None:
    for bad in (float("nan"), float("inf"), 1e308, 0, -5):
        with pytest.raises(ValueError, match="an interrupt lifetime"):
            ReferenceAgent(expires_in=bad)


# -- failures of a resume, in process (faults injected into the reference agent) ---------------


class LateFaults(ReferenceAgent):
    """Applies its faults from the second request on: the first run pauses normally."""

    def __init__(self, *faults: Fault) -> None:
        super().__init__()
        self.late = list(faults)

    def take_fault(self, thread_id: str | None) -> Fault | None:
        if len(self.requests) >= 2 and self.late:
            return self.late.pop(0)
        return None


def chat_in_process(agent: ReferenceAgent, typed: str, **options: Any) -> tuple[int, str, str]:
    """``interlude chat URL`` in this process, reading ``typed``; exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    codes: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_agent, agent)
            config = ChatConfig(url=url, **options)
            with trio.fail_after(TIMEOUT):
                codes.append(
                    await run_chat(config, stdin=io.StringIO(typed), stdout=out, stderr=err)
                )
            nursery.cancel_scope.cancel()

    trio.run(main)
    return codes[0], out.getvalue(), err.getvalue()


ANSWERS = "buy an espresso machine\ny\n\n1\n"


def test_an_error_with_retry_after_says_how_long_the_endpoint_asked_to_wait() -> None:
    error = TransportError.from_status(429, "slow down", retry_after=30, endpoint="http://h/a")
    lines = describe_error(error)
    assert lines[0] == (
        "error (TransportError): the endpoint http://h/a answered HTTP 429; "
        "it asked to wait 30 s before retrying"
    )
    assert lines[1:] == [
        "  the response said: slow down",
        "  the endpoint is limiting requests; try again later",
    ]
    lines = describe_error(TransportError.from_status(501, ""))
    assert (
        lines[-1]
        == "  the server does not handle this request: is the URL an AG-UI agent endpoint?"
    )


def test_r_f4_rejected_resume_offers_the_same_answers_again() -> None:
    agent = LateFaults(Fault.refuse(400, "no thanks"))
    code, out, err = chat_in_process(agent, ANSWERS + "y\n")
    assert code == 0
    assert "error (TransportError): the endpoint http://127.0.0.1:" in err
    assert "answered HTTP 400" in err
    assert "the response said: no thanks" in err
    assert "your answers were not taken: you can send them again" in err
    assert "Send the same answers again? (y: resend, n: answer again): y" in out
    assert "agent> Ordered 1 espresso machine, shipping to address-123." in out
    assert agent.side_effects == 1


def test_r_f5_failure_after_the_resume_was_taken_offers_a_new_thread() -> None:
    agent = LateFaults(Fault.run_error("boom", "BROKEN"))
    code, out, err = chat_in_process(agent, ANSWERS + "y\nhello\n")
    assert code == 0
    assert "error (RunError): boom (code BROKEN)" in err
    assert "cannot go on on this thread" in err
    assert "Start a new thread? (y/n): y" in out
    assert "(new thread " in out
    assert "agent> You said: hello" in out


class AsksAgain(ReferenceAgent):
    """Takes every resume, then asks for the shipping address again."""

    def run(self, request: Any) -> list[dict[str, Any]]:
        if request.get("resume"):
            again = {"id": f"again-{len(self.requests)}", "role": "user", "content": "address"}
            request = {**request, "resume": None, "messages": [*request["messages"], again]}
        return super().run(request)


def test_an_unattended_run_stops_when_the_agent_asks_the_same_again() -> None:
    """The script would give the same answer forever: an unattended run never ended."""
    agent = AsksAgain()
    script = Script(("address",), {"shipping-address": {"addressId": "address-123"}})
    out, err = io.StringIO(), io.StringIO()
    codes: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_agent, agent)
            with trio.fail_after(5):
                codes.append(
                    await run_chat(ChatConfig(url=url, script=script), stdout=out, stderr=err)
                )
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert codes == [2], err.getvalue()
    assert "the agent asked the same questions again" in err.getvalue()
    assert len(agent.requests) == 2  # the message, then one resume


def test_headers_and_thread_id_reach_the_endpoint() -> None:
    agent = ReferenceAgent()
    headers = {"Authorization": "Bearer t0ken", "X-Trace": "cli"}
    code, out, _ = chat_in_process(agent, "hello\n", headers=headers, thread_id="thread-cli")
    assert code == 0 and "agent> You said: hello" in out
    (request,) = agent.requests
    assert request.headers["authorization"] == "Bearer t0ken"
    assert request.headers["x-trace"] == "cli"
    assert request.body["threadId"] == "thread-cli"


def test_a_later_header_of_the_same_name_replaces_an_earlier_one_whatever_its_case() -> None:
    """HTTP header names are case-insensitive: ``--header 'authorization: old'
    --header 'Authorization: new'`` sends one Authorization, the later, where both went
    out before and the server chose which credential counted."""
    from interlude.adapters import cli

    parser = cli.build_parser()
    argv = ["chat", "--header", "authorization: Bearer old", "--header", "X-Trace: 1"]
    args = parser.parse_args([*argv, "--header", "Authorization: Bearer new"])
    config = cli._config(parser, args)
    assert dict(config.headers) == {"X-Trace": "1", "Authorization": "Bearer new"}
    agent = ReferenceAgent()
    code, _, _ = chat_in_process(agent, "hello\n", headers=config.headers)
    assert code == 0
    (request,) = agent.requests
    assert request.headers["authorization"] == "Bearer new"


def test_a_credential_the_endpoint_echoes_in_an_error_is_not_shown() -> None:
    """docs/reference.md: the CLI's errors never show a header's value. An endpoint
    that echoes the request in its 401 body must not put the token on the screen."""
    token = "s3cr3t-T0KEN-value"
    agent = ReferenceAgent()
    agent.faults.append(Fault.refuse(401, f"bad credentials: Bearer {token} (also {token})"))
    headers = {"Authorization": f"Bearer {token}", "X-Trace": "cli"}
    code, out, err = chat_in_process(agent, "hello\n", headers=headers)
    assert code == 0 and "answered HTTP 401" in err
    assert "the response said: bad credentials: *** (also ***)" in err
    assert token not in out + err

    url = "http://user:pa55word@h/agent?api_key=sk-0123456789"
    error = TransportError.from_status(403, "no: user:pa55word sk-0123456789", endpoint=url)
    lines = describe_error(error, _secrets(ChatConfig(url=url), url))
    assert lines[1] == "  the response said: no: user:*** ***"


def test_control_characters_from_the_network_are_shown_not_obeyed() -> None:
    typed = "hi \x1b]52;c;aGk=\x07 and \x1b[2J\r done\n"  # the agent echoes it back
    code, out, _ = chat_in_process(ReferenceAgent(), typed)
    assert code == 0
    assert "agent> You said: hi ^[]52;c;aGk=^G and ^[[2J^M done" in out
    assert "\x1b" not in out and "\x07" not in out


def test_a_lone_surrogate_from_the_network_is_shown_escaped_not_a_crash() -> None:
    out = io.StringIO()
    # A strict UTF-8 stream, as a terminal's stdout is: the raw character would raise.
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    console = Console(strict, out)
    console.line("smile \ud83d")
    strict.flush()
    assert strict.buffer.getvalue() == b"smile \\ud83d\n"  # type: ignore[attr-defined]


def test_a_lone_surrogate_in_a_frame_is_logged_escaped_not_a_failed_run(tmp_path: Path) -> None:
    """A JSON escape of half an emoji is valid JSON; written raw, the UTF-8 log file
    refused it (UnicodeEncodeError), and --log turned a good run into a TransportError."""
    path = tmp_path / "wire.jsonl"
    with open(path, "a", encoding="utf-8") as log:
        code, out, err = chat_in_process(ReferenceAgent(), "smile \ud83d\n", log=log)
    assert code == 0, err
    assert "agent> You said: smile \\ud83d" in out and "error" not in err
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    said = [
        e["data"]["delta"]
        for e in lines
        if e["direction"] == "receive" and e["data"]["type"] == "TEXT_MESSAGE_CONTENT"
    ]
    assert "".join(said) == "You said: smile \ud83d"
    assert lines[0]["body"]["messages"][-1]["content"] == "smile \ud83d"


def test_a_tool_call_name_cannot_fake_a_line_of_the_transcript() -> None:
    """Its arguments were flattened to one line, its name was not."""
    out = io.StringIO()
    transcript = Transcript(Console(out, io.StringIO()))
    call = ToolCall(id="c1", function=FunctionCall(name="pay\nagent> all done", arguments="{}"))
    transcript.update([AssistantMessage(id="a1", tool_calls=(call,))], settled=True)
    assert out.getvalue() == "[tool call] pay agent> all done {}\n"


def test_a_long_session_keeps_the_answers_of_the_pending_batch_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R-F4: the session keeps the answers it sent, to offer them again if the resume is
    not taken. It kept those of every batch it ever answered, for the whole session,
    though only the pending batch can be resumed (R-A2: batch ids are never reused)."""
    sessions: list[Session] = []

    class Kept(Session):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            sessions.append(self)

    monkeypatch.setattr(cli_module, "Session", Kept)
    code, out, _ = chat_in_process(ReferenceAgent(), ANSWERS * 4)
    assert code == 0
    assert out.count("agent> Ordered 1 espresso machine") == 4
    assert len(sessions[0]._sent) <= 1


def test_a_long_session_remembers_only_the_notes_the_state_still_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each note is shown once. The session remembered every note it had shown, so an
    endpoint whose notes differ per run (an unknown event type named per run, here) grew
    it for the whole session; the state keeps only its newest MAX_WARNINGS."""
    sessions: list[Session] = []

    class Kept(Session):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            sessions.append(self)

    class Chatty(ReferenceAgent):
        runs = 0

        def run(self, request: Any) -> list[Any]:
            events = super().run(request)
            Chatty.runs += 1
            return [events[0], {"type": f"X_PROGRESS_{Chatty.runs}"}, *events[1:]]

    monkeypatch.setattr(cli_module, "Session", Kept)
    turns = MAX_WARNINGS + 5
    code, out, err = chat_in_process(Chatty(), "".join(f"hello {n}\n" for n in range(turns)))
    assert code == 0, err
    assert out.count("agent> You said: hello") == turns
    for n in range(1, turns + 1):  # each run's note shown, and only once
        assert err.count(f"'X_PROGRESS_{n}',") == 1, err
    assert len(sessions[0]._warned) <= MAX_WARNINGS


def test_the_log_numbers_requests_keeps_raw_frames_and_re_raises_a_failure() -> None:
    """--log: each request numbered in turn, a frame that is not JSON logged as text, a
    transport's failure logged with its status and raised on (not swallowed: the attempt
    must fail as it would without the log), the inner stream closed."""
    closed: list[int] = []

    class Inner:
        def __init__(self) -> None:
            self.calls = 0

        async def stream(self, body: bytes) -> Any:
            self.calls += 1
            try:
                yield '{"type": "RUN_STARTED", "note": "é"}'
                yield "not json"
                if self.calls == 2:
                    raise TransportError("HTTP 503 from the endpoint", retryable=True, status=503)
            finally:
                closed.append(self.calls)

    sink = io.StringIO()
    log = LoggingTransport(Inner(), sink, clock=lambda: 0.0)  # type: ignore[arg-type]

    async def main() -> None:
        assert [d async for d in log.stream(b'{"runId": "r1"}')] == [
            '{"type": "RUN_STARTED", "note": "é"}',
            "not json",
        ]
        with pytest.raises(TransportError, match="HTTP 503"):
            async for _ in log.stream(b"{not json"):
                pass

    trio.run(main)
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [(x["direction"], x["request"]) for x in lines] == [
        ("send", 1),
        ("receive", 1),
        ("receive", 1),
        ("send", 2),
        ("receive", 2),
        ("receive", 2),
        ("error", 2),
    ]
    assert lines[0]["body"] == {"runId": "r1"} and lines[3]["raw"] == "{not json"
    assert lines[1]["data"]["note"] == "é" and "é" in sink.getvalue()  # not \u00e9
    assert lines[2]["raw"] == "not json"
    assert lines[6] == {
        "ts": "1970-01-01T00:00:00.000Z",
        "direction": "error",
        "request": 2,
        "error": "TransportError",
        "message": "HTTP 503 from the endpoint",
        "status": 503,
    }
    assert closed == [1, 2]
