"""What the checks before a commit and the kept-versions ring cost a drained message (issue 28's drain row): copies of
a Dormant tree with them taken out, step by step, for benchmarks/userpath_ir.py to count beside the tree and a base.

Each copy is the tree with some of these replaced (each replacement must find its text, or this stops: a tree whose
code moved needs this file updated, not a silent no-op):

1. `checked`: the check before a step's result is accepted (`Execution.check_storable` returns at once, no preview);
2. `stored`: and the memory store's check of each draft (`check_draft`) and its kept-versions ring (no `VersionRing`);
3. `measured`: and the engine's measuring of a commit's values (`Execution._draft` leaves `draft.sizes` unset).

A copy without them is not a Dormant anyone should run (it stores what the DynamoDB store refuses, keeps no
versions to fork from): it says how much of a row is the work of those guarantees, and how much the rest.

    git archive ec7c420 lib | tar -x -C /tmp/ec && git archive HEAD lib | tar -x -C /tmp/head
    .venv/bin/python benchmarks/checks_cost.py --lib /tmp/head/lib --out /tmp/checks
    PYTHONHASHSEED=0 .venv/bin/python benchmarks/userpath_ir.py --lib /tmp/ec/lib --lib /tmp/head/lib \\
        --lib /tmp/checks/checked/lib --lib /tmp/checks/stored/lib --lib /tmp/checks/measured/lib --rows drain
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

_CHECKED = [("workflow/execution.py",
             "        ceiling = self._value_ceiling\n        if ceiling is not None and not self._responses",
             "        self._preview = None\n        return\n"
             "        ceiling = self._value_ceiling\n        if ceiling is not None and not self._responses")]
_STORED = [("memory/store.py",
            "    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:\n"
            "        check_draft(ref.name, draft)\n",
            "    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:\n"),
           ("memory/store.py",
            "        record.kept = VersionRing(self._snapshot_every, record.full(), meta.created_at)",
            "        record.kept = None")]
_MEASURED = [("workflow/execution.py", "        elif changed:  # (a state a step's check dumped",
              "        elif False:  # (a state a step's check dumped")]
STEPS = {"checked": _CHECKED, "stored": _CHECKED + _STORED, "measured": _CHECKED + _STORED + _MEASURED}


def make_copy(lib: Path, out: Path, replacements: list[tuple[str, str, str]]) -> Path:
    """A copy of `lib` (holding dormant/) at `out`/lib with `replacements` made; its library directory."""
    target = out / "lib"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(lib, target, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, old, new in replacements:
        path = target / "dormant" / relative
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{path}: the text to replace is not there once; update benchmarks/checks_cost.py:\n{old}")
        path.write_text(text.replace(old, new))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True, type=Path, help="the library directory of the tree (holds dormant/)")
    parser.add_argument("--out", required=True, type=Path, help="where the copies go (<out>/<step>/lib)")
    args = parser.parse_args()
    for step, replacements in STEPS.items():
        print(make_copy(args.lib, args.out / step, replacements))


if __name__ == "__main__":
    main()
