"""Mutation testing for interlude: does some test fail when the code is wrong?

    python .ci/mutation/run.py cover                 # the coverage map (about 8 min on 2 cores)
    python .ci/mutation/run.py list core/commands.py
    python .ci/mutation/run.py run core/commands.py [--only 3,7] [--lines 10-40]
        [--tests FILE_OR_ID,...] [-j 2] [--timeout 600]

(``make mutation FILE=core/commands.py`` builds the map if needed and runs.)

Each mutant is imported in place of its module by ``sitecustomize.py`` (this
directory goes on PYTHONPATH), so the checkout is never written and two runs
may share it. A mutant runs only the tests that execute one of its lines (from
the coverage map), the test file named after its module first, and stops at
the first failure, the quickest tests first. Module-level lines run at import,
outside any test, so their mutants run every test (as do those of lines no test
was seen to run, such as a function called at import). Results go to
``.mutation/<file>.tsv``; a survivor is a gap in the tests or an equivalent
mutant, to be read by hand.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mutants import Mutant, apply, mutants

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / ".mutation"
COVER = OUT / "cover.json"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
SUITES = ("tests", "property_tests")


def module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] not in ("core", "adapters"):
        raise SystemExit(f"{path}: only files under core/ and adapters/ are mutated")
    return ".".join(["interlude", *parts])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env["HYPOTHESIS_PROFILE"] = "mutation"
    env.update(extra)
    return env


def _pytest(args: list[str], env: dict[str, str], timeout: float) -> tuple[str, str]:
    """Run pytest in its own process group; (outcome, the first failing test)."""
    cmd = [PYTHON, "-m", "pytest", "-p", "mutation_plugin", "-p", "no:cacheprovider"]
    cmd += ["-x", "-q", "--no-header", "-rf", "--tb=no", *args]
    with subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    ) as p:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return "timeout", ""
    failed = next((ln.split()[1] for ln in out.splitlines() if ln.startswith("FAILED ")), "")
    if p.returncode == 0:
        return "survived", ""
    if p.returncode == 4 and ("no match in any of" in out or "not found:" in out):
        return "stale map", "a test id the coverage map holds is gone: run `cover` again"
    if p.returncode == 1:
        return "killed", failed
    # 2-4: the mutant broke an import or collection (the suite passes without it).
    last = out.strip().splitlines()[-1] if out.strip() else ""
    return "killed", f"pytest exit {p.returncode}: {last}"


def cover(jobs: int) -> None:
    """Trace the whole suite (split across ``jobs`` processes) into cover.json."""
    OUT.mkdir(exist_ok=True)
    files = sorted(str(f.relative_to(ROOT)) for s in SUITES for f in (ROOT / s).glob("test_*.py"))
    parts = [files[i::jobs] for i in range(jobs)]
    procs = []
    for i, part in enumerate(parts):
        env = _env(MUTATION_COVER=str(OUT / f"cover.{i}.json"))
        cmd = [PYTHON, "-m", "pytest", "-p", "mutation_plugin", "-p", "no:cacheprovider", "-q"]
        with (OUT / f"cover.{i}.log").open("w") as log:
            procs.append(subprocess.Popen([*cmd, *part], cwd=ROOT, env=env, stdout=log, stderr=log))
    if [p.wait() for p in procs] != [0] * jobs:
        raise SystemExit(f"the suite fails under the tracer: see {OUT}/cover.*.log")
    merged: dict[str, dict[str, list[str]]] = {}
    durations: dict[str, float] = {}
    for i in range(jobs):
        data = json.loads((OUT / f"cover.{i}.json").read_text())
        durations.update(data["durations"])
        for f, lines in data["lines"].items():
            for n, ids in lines.items():
                merged.setdefault(f, {}).setdefault(n, []).extend(ids)
        (OUT / f"cover.{i}.json").unlink()
        (OUT / f"cover.{i}.log").unlink()
    COVER.write_text(json.dumps({"lines": merged, "durations": durations}))
    print(f"cover: {len(durations)} tests, {len(merged)} library files -> {COVER}")


def _require_fresh_map() -> None:
    """Refuse a coverage map older than a library or test file: its line numbers and
    test ids may no longer be true."""
    if not COVER.exists():
        raise SystemExit(f"no coverage map: run `{Path(sys.argv[0]).name} cover` first")
    built = COVER.stat().st_mtime
    for top in ("core", "adapters", *SUITES):
        for f in (ROOT / top).rglob("*.py"):
            if f.stat().st_mtime > built:
                raise SystemExit(
                    f"the coverage map is older than {f.relative_to(ROOT)}: run "
                    f"`{Path(sys.argv[0]).name} cover` again (or `make mutation`, which does)"
                )


def _module_level(source: str) -> set[int]:
    """Lines that run at import: outside every function body."""
    inside: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            inside.update(range(body[0].lineno, node.end_lineno + 1))  # type: ignore[operator]
    return set(range(1, source.count("\n") + 2)) - inside


def _tests_for(path: str, m: Mutant, cover_map: dict, module_level: set[int]) -> list[str]:
    """The test ids that run the mutant's lines (every test for a line no test
    was seen to run), its module's test file first, then the quickest."""
    durations = cover_map["durations"]
    lines = cover_map["lines"].get(path, {})
    ids = {t for n in range(m.line, m.end_line + 1) for t in lines.get(str(n), ())}
    if m.line in module_level or not ids:
        # Code that runs at import (a module's top level, or a function it calls
        # then) is traced outside every test: any test may depend on it.
        ids = set(durations)
    # The quickest first: a mutant most tests notice is killed in a second or two.
    stem = Path(path).stem.lstrip("_")
    return sorted(ids, key=lambda t: (stem not in t.split("::")[0], durations.get(t, 0.0), t))


def run(args: argparse.Namespace) -> None:
    path = args.file
    source = (ROOT / path).read_text()
    chosen = mutants(source)
    if args.only:
        wanted = {int(i) for i in args.only.split(",")}
        chosen = [m for m in chosen if m.id in wanted]
    if args.lines:
        lo, hi = (int(n) for n in args.lines.split("-"))
        chosen = [m for m in chosen if lo <= m.line <= hi]
    explicit = args.tests.split(",") if args.tests else None
    if not explicit:
        _require_fresh_map()
    cover_map = None if explicit else json.loads(COVER.read_text())
    module_level = _module_level(source)
    durations = {} if explicit else cover_map["durations"]
    OUT.mkdir(exist_ok=True)
    report = Path(args.out) if args.out else OUT / (path.replace("/", ".") + ".tsv")
    scratch = Path(tempfile.mkdtemp(prefix="mutants-"))

    def one(m: Mutant) -> tuple[Mutant, str, str, float]:
        tests = explicit if explicit else _tests_for(path, m, cover_map, module_level)
        text = apply(source, m)
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as exc:  # the generator's bug, not a kill
            return m, "invalid", str(exc), 0.0
        mutant_file = scratch / f"{m.id}.py"
        mutant_file.write_text(text)
        env = _env(
            MUTANT_MODULE=module_name(path),
            MUTANT_ORIGIN=str(ROOT / path),
            MUTANT_SOURCE=str(mutant_file),
        )
        # A hang is a kill: three times the tests' traced time, or --timeout when given tests.
        budget = sum(durations.get(t, args.timeout) for t in tests)
        timeout = min(args.timeout, 3 * budget + 30)
        started = time.perf_counter()
        outcome, by = _pytest(list(tests), env, timeout)
        return m, outcome, by, time.perf_counter() - started

    counts: dict[str, int] = {}
    with report.open("w") as out, ThreadPoolExecutor(args.jobs) as pool:
        out.write("id\tline\toutcome\tmutant\tkilled by\tseconds\n")
        for m, outcome, by, seconds in pool.map(one, chosen):
            key = outcome.split()[0]
            counts[key] = counts.get(key, 0) + 1
            out.write(f"{m.id}\t{m.line}\t{outcome}\t{m.what}\t{by}\t{seconds:.1f}\n")
            out.flush()
            if key in ("survived", "invalid", "stale"):
                print(f"{outcome:>9}  {m.describe()}", flush=True)
    print(f"{path}: {len(chosen)} mutants, " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    print(f"report: {report}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cover", help="build the coverage map")
    c.add_argument("-j", "--jobs", type=int, default=2)
    ls = sub.add_parser("list", help="list a file's mutants")
    ls.add_argument("file")
    r = sub.add_parser("run", help="run a file's mutants against the tests")
    r.add_argument("file")
    r.add_argument("--only", help="mutant ids, comma-separated")
    r.add_argument("--lines", help="a line range, a-b")
    r.add_argument("--tests", help="test files or ids to run instead of the coverage map's")
    r.add_argument("-j", "--jobs", type=int, default=2)
    r.add_argument("--timeout", type=float, default=900.0)
    r.add_argument("--out", help="the report's path (default .mutation/<file>.tsv)")
    args = parser.parse_args()
    if args.command == "cover":
        cover(args.jobs)
    elif args.command == "list":
        for m in mutants((ROOT / args.file).read_text()):
            print(m.describe())
    else:
        run(args)


if __name__ == "__main__":
    sys.exit(main())
