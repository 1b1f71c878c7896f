"""``make demo``: the embedded reference agent and the terminal client, over real HTTP.

On a terminal it is the interactive client (try "buy an espresso machine").
Otherwise (``make demo < /dev/null``, CI) it plays a built-in walkthrough: a
purchase that pauses for approval and a shipping address, answered and
resumed; then a question the agent answers by calling a local tool.
"""

from __future__ import annotations

import sys

from .cli import ChatConfig, run
from .cli_script import Script

__all__ = ["WALKTHROUGH", "main"]

WALKTHROUGH = Script(
    messages=("buy an espresso machine", "what time is it"),
    answers={"purchase": {"approved": True}, "shipping-address": {"addressId": "address-123"}},
)


def main() -> int:
    if sys.stdin.isatty():
        banner = 'Try "buy an espresso machine", then "what time is it".'
        return run(ChatConfig(banner=banner))
    print("interlude demo: a scripted walkthrough against the embedded reference agent")
    print("(run `make demo` in a terminal to chat yourself)")
    print(flush=True)
    return run(ChatConfig(script=WALKTHROUGH))


if __name__ == "__main__":
    sys.exit(main())
