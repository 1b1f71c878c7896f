"""The examples in README.md and docs/*.md run, so the docs cannot rot.

Each page's fenced ``python`` blocks run in order in one namespace, so a page
reads as one session; ``pycon`` blocks (``>>>`` sessions) are doctests in that
same namespace, and their printed output is checked. A block whose fence is
preceded, on the line just before, by ``<!-- not-tested -->`` is skipped: that
is only for snippets that need a real remote endpoint. Tracebacks name the page
and its line numbers.
"""

from __future__ import annotations

import doctest
import re
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
NOT_TESTED = "<!-- not-tested -->"
RUNNABLE = ("python", "pycon")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w-]*)")

# Blocks in pages owned by others that are not code (keyed by their first line).
NOT_CODE: dict[str, set[str]] = {
    # A signature written as a call; its owner should fence it as ```text.
    "docs/design.md": {
        "interlude.core.step(state: State, input: Input, now: float) -> Transition(state, commands)"
    },
}
# The pages this test's author keeps; their relative links must resolve.
OWN_PAGES = ("README.md", "docs/index.md", "docs/quickstart.md", "docs/testing.md")
OWN_PAGES += ("docs/failures.md", "docs/reference.md")


class Block(NamedTuple):
    page: Path
    line: int
    """1-based line of the opening fence; the code starts on the next line."""
    lang: str
    source: str
    marked_not_tested: bool


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    n = 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if opening is None:
            n += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        end = n + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].isspace() else lines[end])
            end += 1
        marked = n > 0 and lines[n - 1].strip() == NOT_TESTED
        yield Block(page, n + 1, opening["lang"].lower(), "\n".join(body) + "\n", marked)
        n = end + 1


def rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def to_run(page: Path) -> list[Block]:
    skip = NOT_CODE.get(rel(page), set())
    return [
        b
        for b in blocks(page)
        if b.lang in RUNNABLE
        and not b.marked_not_tested
        and b.source.splitlines()[0].strip() not in skip
    ]


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    # Pad with blank lines so that tracebacks show the page's own line numbers.
    code = compile("\n" * block.line + block.source, str(block.page), "exec")
    try:
        exec(code, namespace)
    except Exception as exc:
        # The plain traceback: pytest's own would print the whole page as the "function".
        trace = "".join(traceback.format_exception(exc))
    else:
        return
    pytest.fail(f"the block at {rel(block.page)}:{block.line} failed\n{trace}", pytrace=False)


def run_pycon(block: Block, namespace: dict[str, Any]) -> None:
    name = f"{rel(block.page)}:{block.line}"
    test = doctest.DocTestParser().get_doctest(
        block.source, namespace, name, str(block.page), block.line
    )
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # DocTest works on a copy: carry its names forward
    if runner.failures:
        pytest.fail("".join(report), pytrace=False)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_example_of_the_page_runs(page: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in to_run(page):
        if block.lang == "python":
            run_python(block, namespace)
        else:
            run_pycon(block, namespace)


def test_the_docs_hold_examples_and_mark_few_as_not_tested() -> None:
    found = {rel(p): list(blocks(p)) for p in PAGES}
    for own in OWN_PAGES:
        assert own in found, f"{own} is missing"
    runnable = [b for bs in found.values() for b in bs if b.lang in RUNNABLE]
    skipped = [b for b in runnable if b.marked_not_tested]
    assert len(runnable) >= 30
    assert len(skipped) <= 2, [f"{rel(b.page)}:{b.line}" for b in skipped]
    stray = [
        f"{page}:{b.line}"
        for page, bs in found.items()
        for b in bs
        if b.marked_not_tested and b.lang not in RUNNABLE
    ]
    assert not stray, f"{NOT_TESTED} marks a block that would not run anyway: {stray}"


def test_the_readme_opens_with_the_two_commands() -> None:
    first = [
        line
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:12]
        if line.strip()
    ]
    commands = [line.strip() for line in first if line.strip().startswith("make ")]
    assert commands[:2] == ["make demo", "make test"], first


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@pytest.mark.parametrize("page", OWN_PAGES)
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    for match in LINK.finditer(text):
        target = match["target"].split("#", 1)[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        resolved = (path.parent / target).resolve()
        # Inside the repository: a clone anywhere (or a published page) has no ../shared.
        assert resolved.is_relative_to(ROOT.resolve()), f"{page} links outside: {target}"
        assert resolved.exists(), f"{page} links to missing {match['target']}"
