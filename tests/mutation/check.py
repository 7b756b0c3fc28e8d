"""Mutation check of the examples: deleting any compensation handler, timeout, `names=` filter, broadcast,
race branch, or a map's bound or completion rule in examples/ must make some test fail (`make mutation`).

Each mutant is one deletion, found by reading the example's syntax tree:

- `rollback=` of a `.step(...)` call (a compensation handler);
- `timeout=` of a `.step(...)`, `.queue.next(...)` or `.queue.next_batch(...)` call;
- `names=` of a `.queue.next(...)` or `.queue.next_batch(...)` call;
- a `.broadcast(...)` statement (replaced by `pass`);
- one branch of a `.race(name, {...})` call;
- `max_concurrency=`, `min_successes=` or `tolerated_failures=` of a `.map(...)` call (its bound, its completion
  rule).

The mutated module is written (with `ast.unparse`) into a scratch copy of examples/ and tests/, and the
example's own test module runs there on the in-memory backend, in a child forked from this process (which
has imported the heavy dependencies once, so a mutant costs its tests, not an interpreter start). A mutant
some test fails on is killed; the check fails if any mutant survives, if the unmutated examples do not pass
their tests there first (the baseline), or if the whole run exceeds its time budget. Run it with

    .venv/bin/python -m tests.mutation.check [--jobs N] [--budget SECONDS] [--only MODULE]
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SKIPPED = {"__init__.py", "catalog.py", "tour.py"}  # no workflow patterns: the catalog and the demo script
WAIT_CALLS = {"next", "next_batch"}
TIMED_CALLS = {"step"} | WAIT_CALLS
MAP_RULES = {"max_concurrency": "the bound", "min_successes": "the completion rule",
             "tolerated_failures": "the completion rule"}
PER_TEST_TIMEOUT = 10.0  # pytest-timeout per test: a mutant that makes a test hang is killed by it
PER_MUTANT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    what: str
    source: str  # the mutated module


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    killed: bool
    seconds: float
    detail: str


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def mutation_points(tree: ast.Module) -> Iterator[tuple[tuple[int, ...], str, int]]:
    """(path to the node as indexes into ast.walk order, description, line) of every deletion."""
    for index, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.Call):
            method = _method(node)
            for k, keyword in enumerate(node.keywords):
                if keyword.arg == "rollback" and method == "step":
                    yield (index, k), "delete the compensation handler of .step(...)", node.lineno
                elif keyword.arg == "timeout" and method in TIMED_CALLS:
                    yield (index, k), f"delete timeout= of .{method}(...)", node.lineno
                elif keyword.arg == "names" and method in WAIT_CALLS:
                    yield (index, k), f"delete names= of .{method}(...)", node.lineno
                elif keyword.arg in MAP_RULES and method == "map":
                    yield (index, k), f"delete {keyword.arg}= of .map(...) ({MAP_RULES[keyword.arg]})", node.lineno
            if method == "race" and len(node.args) >= 2 and isinstance(node.args[1], ast.Dict):
                for b, key in enumerate(node.args[1].keys):
                    label = key.value if isinstance(key, ast.Constant) else "?"
                    yield (index, -1 - b), f"delete race branch {label!r}", node.lineno
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and _method(node.value) == "broadcast"):
            yield (index,), "delete a .broadcast(...) statement", node.lineno


def apply(tree: ast.Module, point: tuple[int, ...]) -> ast.Module:
    mutated = copy.deepcopy(tree)
    node = list(ast.walk(mutated))[point[0]]
    if len(point) == 1:  # a broadcast statement: becomes `pass`
        assert isinstance(node, ast.Expr)
        node.__class__ = ast.Pass
        del node.value
    elif point[1] >= 0:
        assert isinstance(node, ast.Call)
        del node.keywords[point[1]]
    else:
        assert isinstance(node, ast.Call) and isinstance(node.args[1], ast.Dict)
        branches = node.args[1]
        del branches.keys[-1 - point[1]]
        del branches.values[-1 - point[1]]
    return ast.fix_missing_locations(mutated)


def mutants(only: str | None = None) -> list[Mutant]:
    found: list[Mutant] = []
    for path in sorted(EXAMPLES.glob("*.py")):
        if path.name in SKIPPED or (only and path.stem != only):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for point, what, line in mutation_points(tree):
            found.append(Mutant(path.stem, line, what, ast.unparse(apply(tree, point))))
    return found


def scratch_copy(base: Path) -> Path:
    """examples/, tests/ and pyproject.toml (pytest's settings) under `base`: tests there import them."""
    for name in ("examples", "tests"):
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__", "mutation"))
    shutil.copy(ROOT / "pyproject.toml", base / "pyproject.toml")
    return base


PRELOADED = ("pytest", "pytest_asyncio", "pytest_timeout", "pydantic", "dormant", "dormant.testing",
             "dormant.memory.store", "dormant.aws.worker", "dormant.dynamodb.store", "dormant.sqs.poller",
             "dormant.sqs.transport", "dormant.aws.metering", "aiobotocore.session")


@dataclass
class Running:
    mutant: Mutant
    workspace: Path
    pid: int
    output: Path
    began: float


def start_mutant(mutant: Mutant, workspace: Path) -> Running:
    """Fork a child (the heavy imports are already loaded) that runs the example's tests on the mutant."""
    (workspace / "examples" / f"{mutant.module}.py").write_text(mutant.source)
    output = workspace / "pytest.out"
    pid = os.fork()
    if pid == 0:  # the child: run pytest in the workspace, never return
        code = 3
        try:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(workspace)
            for name in [n for n in sys.modules if n.split(".")[0] in ("tests", "examples")]:
                del sys.modules[name]  # this checker's own package: the child imports the workspace's
            sys.path.insert(0, str(workspace))
            import pytest

            code = int(pytest.main([f"tests/examples/test_{mutant.module}.py", "-k", "memory", "-x", "-q",
                                    "-p", "no:cacheprovider", "--timeout", str(int(PER_TEST_TIMEOUT))]))
        finally:
            sys.stdout.flush()
            os._exit(code)
    return Running(mutant, workspace, pid, output, time.monotonic())


def finish(run: Running, status: int | None) -> Result:
    """`status`: the child's wait status, or None when it ran over PER_MUTANT_TIMEOUT (it is killed)."""
    source = EXAMPLES / f"{run.mutant.module}.py"
    shutil.copy(source, run.workspace / "examples" / source.name)
    seconds = time.monotonic() - run.began
    if status is None:
        return Result(run.mutant, True, seconds, f"hung for {PER_MUTANT_TIMEOUT:.0f} s (counted as killed)")
    code = os.waitstatus_to_exitcode(status)
    text = run.output.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    if code == 0:
        return Result(run.mutant, False, seconds, "no test failed")
    if code != 1:  # not "some tests failed": a collection or usage error says nothing about the mutant
        raise RuntimeError(f"pytest exited with {code} on {run.mutant.module}:\n{text[-3000:]}")
    return Result(run.mutant, True, seconds, lines[0] if lines else "a test failed")


def run_all(todo: list[Mutant], jobs: int, scratch: Path) -> Iterator[Result]:
    for name in PRELOADED:  # imported once here; every forked child starts with them loaded
        __import__(name)
    free = [scratch_copy(scratch / f"w{n}") for n in range(jobs)]  # one workspace per child at a time
    queue = list(todo)
    running: dict[int, Running] = {}
    while queue or running:
        while queue and free:
            run = start_mutant(queue.pop(0), free.pop())
            running[run.pid] = run
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            run = running.pop(pid)
            free.append(run.workspace)
            yield finish(run, status)
            continue
        for run in list(running.values()):
            if time.monotonic() - run.began > PER_MUTANT_TIMEOUT:
                os.kill(run.pid, 9)
                os.waitpid(run.pid, 0)
                del running[run.pid]
                free.append(run.workspace)
                yield finish(run, None)
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--budget", type=float, default=150.0, help="seconds the whole run may take")
    parser.add_argument("--only", help="mutate only this example module")
    args = parser.parse_args(argv)
    todo = mutants(args.only)
    modules = sorted({m.module for m in todo})
    baseline = [Mutant(module, 0, "baseline (not mutated)", (EXAMPLES / f"{module}.py").read_text())
                for module in modules]
    began = time.monotonic()
    print(f"{len(todo)} mutants of {len(modules)} example modules, {args.jobs} at a time", flush=True)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="dormant-mutation-") as scratch:
        broken = [r for r in run_all(baseline, args.jobs, Path(scratch)) if r.killed]
        if broken:
            print("the unmutated examples fail their tests here:", *(r.detail for r in broken), sep="\n  ")
            return 1
        print(f"baseline: the {len(modules)} test modules pass unmutated ({time.monotonic() - began:.1f} s)")
        for result in run_all(todo, args.jobs, Path(scratch) / "mutants"):
            results.append(result)
            mark = "killed  " if result.killed else "SURVIVED"
            print(f"{mark} {result.seconds:5.1f}s  {result.mutant.module}:{result.mutant.line}  "
                  f"{result.mutant.what}  ({result.detail})", flush=True)
    elapsed = time.monotonic() - began
    survivors = [r for r in results if not r.killed]
    print(f"{len(results) - len(survivors)}/{len(results)} mutants killed in {elapsed:.1f} s")
    if survivors:
        print("surviving mutants (a deletion no test notices):")
        for r in survivors:
            print(f"  {r.mutant.module}:{r.mutant.line}  {r.mutant.what}")
        return 1
    if elapsed > args.budget:
        print(f"over the time budget of {args.budget:.0f} s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
